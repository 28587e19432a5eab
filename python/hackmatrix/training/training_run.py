"""A started run, from its first chunk to the session's end: the chunk loop, its log windows,
checkpoints on time, the summary, wandb's run, and the exit a signal or an error asks for.

`cli.py` starts the run (flags, config, lock, compile) and hands it here; `TrainingRun.run`
reads as the loop's stages in order and returns the exit code.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

from hackmatrix import xla_options
from hackmatrix.messages import error_line, one_line
from hackmatrix.shell.exit_codes import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK
from hackmatrix.training import checkpoint as ckpt
from hackmatrix.training import metrics as M
from hackmatrix.training import params_files, run_directory, seeds
from hackmatrix.training.chunk_timing import DispatchedChunk, watch_readiness
from hackmatrix.training.run_records import checkpoint_state, git_commit, resume_point
from hackmatrix.training.wandb_sink import WandbSink, new_run_id, resolve_mode


class RunDirectoryGone(OSError):
    """The run directory this session locked is no longer where it was: writing on would
    create an unlocked one."""


class NonFiniteLoss(Exception):
    pass


class TrainingRun:
    """One session of a started run: what `cli._train` set up (`start` is its `_RunStart`), and
    the state the loop changes (update, timesteps, runner, the log window, the last save)."""

    def __init__(self, *, verbose, signals, cleanup, say, session_start, saved, resume_path,
                 options, backend, start, num_updates, lock, network, trainer, window,
                 window_seconds, schedule, runner, run_chunk, compile_seconds):
        self.verbose, self.signals, self.cleanup, self.say = verbose, signals, cleanup, say
        self.session_start, self.saved, self.resume_path = session_start, saved, resume_path
        self.options, self.backend, self.start = options, backend, start
        self.config, self.run_dir, self.run_name = start.config, start.run_dir, start.run_name
        self.start_update, self.start_timesteps = start.update, start.timesteps
        self.num_updates, self.lock = num_updates, lock
        self.network, self.trainer = network, trainer
        self.window, self.window_seconds = window, window_seconds
        self.schedule, self.runner, self.run_chunk = schedule, runner, run_chunk
        self.compile_seconds = compile_seconds
        self.update, self.timesteps = start.update, start.timesteps
        self.save_interval = options["save_interval"]
        self.eval_interval = options["eval_interval"]

    def run(self) -> int:
        # wandb's start (Python work: its import, service and init) runs while the first chunk
        # computes, instead of before it.
        first_chunk = self.dispatch_chunk(watched=True)
        self.start_wandb()
        self.start_writing()
        self.signals.start_training(self.console.print, self.exit_at_once)
        try:
            return self.train(first_chunk)
        except NonFiniteLoss as error:
            M.write_summary(self.run_dir, {**self.summary("failed"), "error": str(error)})
            print(f"error: {one_line(str(error))}; stopped without saving "
                  f"({resume_point(self.run_dir, 'last good checkpoint:')})", file=sys.stderr)
            self.exit_code = EXIT_FAILURE
            return self.exit_code
        except OSError as error:
            self.exit_code = EXIT_FAILURE
            return self.failed_to_write(error)
        except BaseException:
            self.exit_code = EXIT_FAILURE
            raise
        finally:
            self.console.close()
            self.sink.finish(summary=self.last_record, exit_code=self.exit_code)

    def dispatch_chunk(self, watched: bool = False) -> DispatchedChunk:
        """Starts the next chunk (JAX returns at once; XLA computes on its own threads): its
        updates end at the next log line, checkpoint interval or the run's end. `watched`: its
        end is timed by a watcher thread (`watch_readiness`), not when the loop reads it."""
        import jax.numpy as jnp
        update, config = self.update, self.config
        next_log = (update // config.log_interval + 1) * config.log_interval
        boundaries = [self.num_updates, next_log, update + config.updates_per_chunk]
        if self.save_interval:
            boundaries.append((update // self.save_interval + 1) * self.save_interval)
        if self.eval_interval:
            boundaries.append((update // self.eval_interval + 1) * self.eval_interval)
        num_active = min(boundaries) - update
        start_time = time.perf_counter()
        outputs = self.run_chunk(self.runner, jnp.int32(num_active), self.schedule)
        ready_at = watch_readiness(outputs) if watched else time.perf_counter
        return DispatchedChunk(outputs, num_active, start_time, ready_at)

    def start_wandb(self) -> None:
        config, saved, start, options, say = (self.config, self.saved, self.start, self.options,
                                              self.say)
        continues_wandb_run = saved is not None and not start.forks_now
        self.wandb_run_id = ((saved.get("wandb_run_id") if continues_wandb_run else None)
                             or new_run_id())
        wandb_config = {**config.to_dict(), "run_name": self.run_name, "network": self.network,
                        "git_commit": git_commit(), "batch_size": config.batch_size,
                        "minibatch_size": config.minibatch_size}
        if start.forked_from:
            wandb_config["forked_from"] = start.forked_from
        self.sink = WandbSink(mode=resolve_mode(options["wandb"], options["wandb_mode"], say),
                              project=options["wandb_project"], entity=options["wandb_entity"],
                              run_name=self.run_name, run_id=self.wandb_run_id,
                              config=wandb_config, directory=self.run_dir,
                              resuming=continues_wandb_run,
                              upload_artifacts=not options["no_artifact"],
                              online_requested=options["wandb_mode"] == "online", warn=say)
        self.cleanup.push(self.finish_wandb)

    def finish_wandb(self, error_type, error, trace) -> bool:
        """The training loop's `finally` finishes wandb's run (then this does nothing); this
        covers a session that ends before the loop (a signal in the rest of set-up), whose exit
        7 runs no atexit hook that would finish it."""
        interrupted = error_type is not None and issubclass(error_type, KeyboardInterrupt)
        self.sink.finish(exit_code=EXIT_INTERRUPTED if interrupted else EXIT_FAILURE)
        return False  # an exception goes on

    def start_writing(self) -> None:
        """The console, the run directory's files and the in-training evaluator."""
        config, run_dir, saved, say = self.config, self.run_dir, self.saved, self.say
        self.last_checkpoint = self.resume_path
        self.last_saved_update = self.start_update if saved else None
        # Lines of log_window that metrics.jsonl did not take: the next checkpoint carries them.
        self.unwritten_metrics_lines: list[str] = []
        self.console = M.Console(self.num_updates, self.start_update)
        self.last_record: dict = {}
        self.train_seconds = 0.0
        self.last_save_time = time.monotonic()
        self.save_every_seconds = (None if self.save_interval
                                   else self.options["save_interval_minutes"] * 60)
        self.exit_code = EXIT_OK
        self.run_complete = False  # its final params are saved: an error after that loses nothing
        # Only now, at the end of set-up (the compile and wandb's start done): a mistaken --resume
        # interrupted during set-up must leave the run directory as it was.
        self.metrics_file = M.MetricsFile(run_dir)
        self.extended_final = run_directory.prepare(run_dir, saved, self.start_update,
                                                    self.metrics_file, say)
        # The first record logged after a resume says where it resumed (plot_metrics.py marks it).
        self.resume_mark = ({"resumed_at_update": self.start_update,
                             "resumed_at_timesteps": self.start_timesteps}
                            if saved is not None else {})
        self.tensorboard = None
        # After `prepare`: it mirrors what metrics.jsonl holds now.
        if self.options["tensorboard"]:
            from hackmatrix.training.tensorboard_sink import TensorBoardSink
            self.tensorboard = TensorBoardSink.open(
                run_dir, self.start_timesteps,
                f"after_update_{self.start_update}" if saved else "earlier_run", say)
            self.cleanup.callback(self.tensorboard.close)
        self.evaluator, self.pending_eval = None, {}
        # After `prepare`, which sets aside a best_params.npz of later updates.
        if self.eval_interval:
            from hackmatrix.training.evaluation import InTrainingEvaluator
            self.evaluator = InTrainingEvaluator(self.trainer.network, self.network,
                                                 self.options["eval_episodes"], config.seed,
                                                 run_dir)
            say(self.evaluator.baseline_line())
        # Replaced when the session ends; a summary still "running" tells whoever reads it after a
        # SIGKILL that this session never finished (not that an earlier one completed).
        M.write_summary(run_dir, self.summary("running"))

    def train(self, first_chunk: DispatchedChunk) -> int:
        """The chunk loop, then the session's end: interrupted (exit 7) or complete (exit 0)."""
        import jax
        config, num_updates, signals = self.config, self.num_updates, self.signals
        while self.update < num_updates and signals.signal_name is None:
            chunk = first_chunk or self.dispatch_chunk()
            first_chunk = None
            new_runner, chunk_metrics = chunk.outputs
            num_active = chunk.num_active
            chunk_metrics = jax.device_get(chunk_metrics)
            elapsed = chunk.ready_at() - chunk.start
            if not M.losses_are_finite(chunk_metrics, num_active):
                raise NonFiniteLoss(f"non-finite loss within updates {self.update + 1}-"
                                    f"{self.update + num_active}")
            self.runner = new_runner
            self.update += num_active
            self.timesteps += num_active * config.batch_size
            self.train_seconds += elapsed
            self.window_seconds += elapsed
            self.window.add(chunk_metrics, num_active)
            self.console.advance(num_active)
            update = self.update
            if self.evaluator and (update % self.eval_interval == 0 or update == num_updates):
                eval_metrics, eval_line = self.evaluator.evaluate(self.runner.train.params, update)
                self.console.print(eval_line)
                self.pending_eval.update(eval_metrics)

            if update % config.log_interval == 0 or update == num_updates:
                self.log_window()
            if update < num_updates:
                self.save_on_time()

        if signals.signal_name is not None and self.update < num_updates:
            return self.end_interrupted()
        if signals.signal_name is not None:
            self.console.print(f"[signal] {signals.signal_name} came during the last chunk: the "
                               "run is complete, so it finishes as usual (exit 0, nothing to "
                               "resume)")
        return self.end_complete()

    def save_on_time(self) -> None:
        """A checkpoint every --save-interval updates, else every --save-interval-minutes."""
        if self.save_interval and self.update % self.save_interval == 0:
            self.save_checkpoint(f"every {self.save_interval} updates")
            self.last_save_time = time.monotonic()
        elif (self.save_every_seconds is not None
              and time.monotonic() - self.last_save_time >= self.save_every_seconds):
            minutes = self.options["save_interval_minutes"]
            self.save_checkpoint(f"every {minutes:g} minutes" if minutes else "every chunk")
            self.last_save_time = time.monotonic()

    def end_interrupted(self) -> int:
        signal_name = self.signals.signal_name
        if self.window.updates:
            self.log_window()  # the episodes of a part-finished log window
        self.save_checkpoint(signal_name, session_end=True)
        self.signals.outcome_saved(EXIT_INTERRUPTED, "the checkpoint is saved")
        try:
            M.write_summary(self.run_dir, self.summary("interrupted"))
        except OSError as error:  # the checkpoint is saved: still an exit 7
            self.console.print(f"[exit] warning: could not rewrite {M.SUMMARY_FILE} "
                               f"({error_line(error)}); the checkpoint is saved")
        self.console.print(f"[exit] interrupted by {signal_name}; resume with --resume "
                           f"{self.run_dir}")
        self.exit_code = EXIT_INTERRUPTED
        return self.exit_code

    def end_complete(self) -> int:
        import jax
        run_dir = self.run_dir
        self.save_checkpoint("final", session_end=True)
        params_files.save_params(run_dir / params_files.FINAL_PARAMS_NAME,
                                 jax.device_get(self.runner.train.params), self.network,
                                 params_files.run_meta(self.config.to_dict()))
        self.run_complete = True
        final = self.summary("completed")
        M.write_summary(run_dir, final)
        self.signals.outcome_saved(EXIT_OK, "the run is complete")
        self.console.print(f"[done] update={self.update} timesteps={self.timesteps} "
                           f"sps={final['sps'] or 0:.0f} compile={self.compile_seconds:.1f}s "
                           f"wall={M.format_duration(final['wall_time_seconds'])} "
                           f"summary={run_dir / M.SUMMARY_FILE}")
        return EXIT_OK

    def failed_to_write(self, error: OSError) -> int:
        """A file of the run that could not be written (metrics.jsonl, summary.json, a full
        disk): the updates since the last save are still in memory, so save them before giving
        up, if the run directory takes a checkpoint at all. A run directory that is gone gets
        nothing more: writing would create it anew, unlocked."""
        run_dir, update = self.run_dir, self.update
        gone = not self.lock.still_in_place()
        message = error_line(error)
        if isinstance(error, RunDirectoryGone):
            message, kept = str(error), ""  # it says what happened and what was not saved
        elif gone:
            kept = (f"; the run directory {run_dir} was deleted, renamed or replaced during the "
                    "run: nothing more saved")
        else:
            # What the run directory holds decides the message: a save that failed part-way
            # may have committed nothing, or its checkpoint.
            saved_now, kept = None, ""
            if update != self.last_saved_update:
                try:
                    saved_now = self.save_checkpoint("after the error", session_end=True)
                except Exception as save_error:  # noqa: BLE001  (the first error is reported)
                    kept = f"; update {update} could not be saved either ({error_line(save_error)})"
            if self.run_complete:
                kept = f"; the run is complete ({params_files.FINAL_PARAMS_NAME} is saved)"
            else:
                kept = (f"; saved {saved_now} first" if saved_now
                        else f"{kept}; {resume_point(run_dir, 'the run goes on from')}")
            try:
                M.write_summary(run_dir, {
                    **self.summary("completed" if self.run_complete else "failed"),
                    "error": message})
            except OSError as summary_error:
                kept += f"; {M.SUMMARY_FILE} not rewritten ({error_line(summary_error)})"
        if self.verbose:
            traceback.print_exc()
        print(f"error: {one_line(message)}{kept}", file=sys.stderr)
        return self.exit_code

    def save_checkpoint(self, reason: str, session_end: bool = False) -> Path:
        update, run_dir = self.update, self.run_dir
        if update != self.last_saved_update:  # else e.g. a signal right after an interval save
            if not self.lock.still_in_place():
                raise RunDirectoryGone(
                    f"the run directory {run_dir} was deleted, renamed or replaced during the "
                    f"run (its .lock is gone): not saving update {update} into it")
            state = checkpoint_state(self.runner, config=self.config, network=self.network,
                                     run_name=self.run_name, update=update,
                                     timesteps=self.timesteps, wandb_run_id=self.wandb_run_id,
                                     options=self.options,
                                     explicit_config=self.start.explicit_config,
                                     metrics_window=self.window.state(self.window_seconds),
                                     unwritten_metrics_lines=self.unwritten_metrics_lines,
                                     forked_from=self.start.forked_from)
            path = ckpt.save_checkpoint(run_dir, state)
            self.last_checkpoint, self.last_saved_update = path, update
            if self.extended_final is not None:  # the finished run's end is no longer the newest
                self.extended_final.unlink(missing_ok=True)
                self.extended_final = None
            ckpt.prune_checkpoints(run_dir, self.options["keep_checkpoints"])
            self.console.print(f"[checkpoint] update={update} saved {path} ({reason})")
        if self.last_checkpoint != self.resume_path:  # logged by the session that saved it
            self.sink.log_checkpoint([self.last_checkpoint,
                                      params_files.params_path(run_dir, update)],
                                     update, session_end=session_end)
        return self.last_checkpoint

    def summary(self, status: str) -> dict:
        config, sink, train_seconds = self.config, self.sink, self.train_seconds
        session_steps = (self.timesteps - self.start_timesteps) * config.num_seeds  # all agents'
        return {
            "status": status, "run_name": self.run_name, "run_dir": os.path.abspath(self.run_dir),
            "config": config.to_dict(), "network": self.network, "update": self.update,
            "timesteps": self.timesteps, "final_metrics": self.last_record,
            "wall_time_seconds": time.perf_counter() - self.session_start,
            "train_seconds": train_seconds, "compile_seconds": self.compile_seconds,
            "backend": self.backend,
            "cpu_compile": xla_options.cpu_compile_mode(self.backend),
            "sps": session_steps / train_seconds if train_seconds > 0 else None,
            **run_directory.files_on_disk(self.run_dir),
            "resumed_from": os.path.abspath(self.resume_path) if self.resume_path else None,
            "forked_from": self.start.forked_from,
            "wandb": {"mode": sink.mode if sink.active else "disabled",
                      "run_id": self.wandb_run_id, "dir": sink.run_directory},
            "tensorboard": (os.path.abspath(self.tensorboard.directory) if self.tensorboard
                            else None),
        }

    def log_window(self) -> None:
        config, update, num_updates = self.config, self.update, self.num_updates
        record = {"update": update, "timesteps": self.timesteps, **self.resume_mark,
                  "train/sps": self.window.steps / self.window_seconds,
                  **self.window.summarize(), **self.pending_eval}
        self.pending_eval.clear()
        self.resume_mark.clear()
        # A signal can end a resumed run before its first update, with the checkpoint's
        # part-filled window to log: no pace measured yet, so the ETA is unknown ("?").
        updates_run = update - self.start_update
        seconds_per_update = self.train_seconds / updates_run if updates_run else math.inf
        self.console.print(seeds.format_line(record, num_updates,
                                             (num_updates - update) * seconds_per_update,
                                             config.num_seeds))
        for warning in seeds.health_warnings(record, config.num_seeds):
            self.console.print(warning)
        try:
            self.metrics_file.write(record)
        except OSError:
            # The line leaves the window all the same: the checkpoint saved after this error
            # carries it for the resume to write, which then logs each update once.
            # As write() serialises it.
            self.unwritten_metrics_lines.append(json.dumps(M.json_safe(record)))
            raise
        finally:
            self.last_record = record
            self.window.reset()
            self.window_seconds = 0.0
        self.sink.log(record)
        if self.tensorboard:
            self.tensorboard.log(record)

    def exit_at_once(self, signal_name: str) -> tuple[int, str]:
        """A second signal before the session's end is saved: exit 7 if the run directory holds
        a checkpoint of the update reached (a save in progress may have committed it), as
        after a first signal; else exit 2, naming the newest checkpoint the run goes on from."""
        run_dir, update = self.run_dir, self.update
        checkpoints = ckpt.list_checkpoints(run_dir)
        if checkpoints and checkpoints[-1][0] == update:
            code, status = EXIT_INTERRUPTED, "interrupted"
            message = (f"{checkpoints[-1][1]} holds update {update}, the last one trained; "
                       f"exiting now (resume with --resume {run_dir})")
        else:
            code, status = EXIT_FAILURE, "failed"
            message = (f"exiting now without saving update {update}; "
                       f"{resume_point(run_dir, 'the run goes on from')}")
        M.write_summary(run_dir, {**self.summary(status),
                                  "error": f"{signal_name} again: {message}"})
        return code, message
