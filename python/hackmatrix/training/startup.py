"""Start-up of a training session: the runner (fresh or restored) and the compiled update chunk,
compiled in worker threads so that set-up stays interruptible."""

from __future__ import annotations

import os
import sys

from hackmatrix import xla_options
from hackmatrix.shell import frame_stack, gc_pause
from hackmatrix.shell.exit_codes import EXIT_INTERRUPTED
from hackmatrix.training import resume, seeds

# os._exit, a seam for the tests: it ends the process without the interpreter's teardown.
_exit_at_once = os._exit


def without_weak_types(tree):
    """`tree` with weakly typed leaves (from Python scalars) made strong: a fresh runner, a
    restored one (checkpoint leaves are strongly typed) and the chunk's own output then all have
    the one signature `run_chunk` is compiled for. Works on arrays and on ShapeDtypeStructs."""
    import jax

    def strong(leaf):
        if isinstance(leaf, jax.ShapeDtypeStruct):
            return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype)
        if getattr(leaf, "weak_type", False):
            return jax.lax.convert_element_type(leaf, leaf.dtype)
        return leaf
    return jax.tree.map(strong, tree)


def _run_init(trainer, key, cancelled):
    """The fresh RunnerState (traced, lowered, compiled once and run), or None when `cancelled`
    was set before its XLA compile ended."""
    import jax
    init = jax.jit(trainer.init, out_shardings=trainer.runner_sharding,
                   compiler_options=xla_options.compiler_options(run_once=True))
    with gc_pause.paused():  # a worker thread: a frame stack of its own, so room of its own
        lowered = frame_stack.with_room(init.lower, key)
    compiled = None if cancelled.is_set() else lowered.compile()
    return None if cancelled.is_set() else jax.block_until_ready(compiled(key))


def _compile_chunk(lowered_chunk, cancelled):
    """The compiled `run_chunk`, or None when `cancelled` was set before its XLA compile began."""
    return None if cancelled.is_set() else lowered_chunk.compile()


def _wait_for_the_compile(future) -> None:
    """Wait for `future`, the compile a set-up interruption (or failure) waits out. An XLA
    compile cannot be cut short, and the interpreter must not tear down while one runs: that
    crashes it (SIGSEGV), and a SIGINT while it joined a still-running worker at exit would
    print a traceback. A signal during the wait (a second one, after the interruption) ends the
    process at once with exit 7, skipping the teardown: a long compile (a deep network's takes
    minutes) must not hold a user who insists. Nothing is lost: set-up has written nothing but
    the run directory's lock, and wandb starts only after the compile."""
    try:
        future.exception()
    except KeyboardInterrupt:
        try:  # whatever a print interrupted, the process ends
            print("[signal] exiting now, before the compile ends; nothing to save "
                  "(earlier checkpoints are intact)", file=sys.stderr, flush=True)
            sys.stdout.flush()
        finally:
            _exit_at_once(EXIT_INTERRUPTED)


def build_runner_and_chunk(trainer, schedule, key, saved, config, keep_optimizer, say):
    """(runner, compiled run_chunk). `run_chunk` is traced and lowered against the runner's
    shapes (`trainer.init_shapes`, which does not trace the envs' reset); then two worker threads
    run at once, one compiling the chunk (XLA compiles outside the GIL) while the other traces,
    lowers, compiles and runs `init`. The chunk's tracing comes first, alone: Python work beside
    an XLA compile gets only part of a core on a small machine, and the chunk's compile is the
    long pole that everything waits for;
    `init`'s tracing fits beside its first, single-threaded phase (XLA's HLO passes). A
    checkpoint is checked against those shapes before any compile starts, so a bad one fails at
    once. The compiles run off the main thread because there SIGINT would abandon a compile
    still running (exiting then crashes); instead an exception (SIGINT's KeyboardInterrupt
    included) reaches the caller as itself once no compile runs."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import jax
    import jax.numpy as jnp

    with gc_pause.paused():
        template = without_weak_types(trainer.init_shapes(key))
    restored = (None if saved is None
                else resume.restore_runner(template, saved, config, keep_optimizer, say))
    def unfilled(tree) -> bool:  # leaves the checkpoint did not give are still shapes
        return any(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in jax.tree.leaves(tree))

    # A resume takes from `init` only what the checkpoint cannot give (new envs, a reset optimizer).
    needs_init = restored is None or unfilled(restored)
    init_key = key
    if restored is not None and unfilled(restored.envs):
        # New games (a changed env count) come from the run's random state: the seed's key
        # would start the games the run began with at update 0 again.
        rng, init_key = seeds.split_keys(restored.rng, config.num_seeds)
        restored = restored._replace(rng=rng)
    with gc_pause.paused():
        lowered_chunk = trainer.run_chunk.lower(template, jnp.int32(0), schedule)
    cancelled = threading.Event()
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="compile")
    jobs = []
    try:
        jobs.append(pool.submit(_compile_chunk, lowered_chunk, cancelled))
        if needs_init:
            jobs.append(pool.submit(_run_init, trainer, init_key, cancelled))
        results = [job.result() for job in reversed(jobs)]  # init's failure first
    except BaseException as error:  # e.g. SIGINT: skip what has not begun, wait out what has
        cancelled.set()
        if isinstance(error, KeyboardInterrupt) and not all(job.done() for job in jobs):
            say("[signal] an XLA compile cannot be cut short: exiting when the one running ends "
                "(signal again to exit at once)")
        for job in jobs:
            _wait_for_the_compile(job)
        raise
    finally:
        pool.shutdown(wait=False)
    run_chunk, runner = results[-1], restored
    if needs_init:
        runner = results[0] if restored is None else jax.tree.map(
            lambda kept, fresh: fresh if isinstance(kept, jax.ShapeDtypeStruct) else kept,
            restored, results[0])
    return jax.device_put(without_weak_types(runner), trainer.runner_sharding), run_chunk
