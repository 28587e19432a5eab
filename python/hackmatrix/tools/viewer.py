"""Watch a trained agent play, step by step, in a plain terminal; optionally record a GIF.

Each step prints the whole board before the agent acts (the game's text renderer; unlike
`play.py` it shows what the agent cannot see: a hidden cryptog, stacked enemies), the
value estimate and the top valid actions with their probabilities under the masked policy, the
action taken, and the reward with its non-zero components. In step mode the episode's first
board comes before the first prompt and each step prints, after its action, the board that
action leads to, so that the board above the prompt is always the one the next action is taken
on. After each episode: steps, return, stage reached, score, whether it won, how it ended and
the programs used; an episode stopped at the prompt gets the same summary.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from typing import Callable, NamedTuple, TextIO

import jax
import numpy as np

from hackmatrix import xla_options
from hackmatrix.shell import interrupts
from hackmatrix.game import constants as C
from hackmatrix.game import renderer
from hackmatrix.game import transition
from hackmatrix.tools import compile_ahead, evaluation, gif, policy, report

CLEAR_SCREEN = "\x1b[2J\x1b[H"


class ViewerOptions(NamedTuple):
    episodes: int = 1
    deterministic: bool = False
    delay: float = 0.5
    step_mode: bool = False       # wait for Enter before each step
    seed: int = 0
    scenario: object = None       # a GameState every episode starts from, or None for new games
    max_steps: int = 500
    color: bool = True
    clear_screen: bool = False    # redraw in place (interactive terminals)
    gif_path: str | None = None
    top_k: int = 5


class EpisodeSummary(NamedTuple):
    steps: int
    episode_return: float
    stage: int
    score: int
    won: bool
    end: str                      # "won", "died", "max steps", STOPPED or NO_VALID_ACTION
    programs_used: dict[str, int]


STOPPED = "stopped by the user"   # the end of an episode quit at the --step prompt
# A scenario can wall the player in with nothing to spend (a real game never does): the
# episode ends there, since any action would be an invalid one.
NO_VALID_ACTION = "no valid action"


@functools.cache
def _game_functions():
    """The jitted (reset, step), made once per process so that every viewer shares their
    compilations, with the env's compile options (`xla_options`)."""
    options = xla_options.compiler_options()
    return (jax.jit(transition.reset, compiler_options=options),
            jax.jit(transition.step, compiler_options=options))


@functools.lru_cache(maxsize=None)
def _decide_function(network, deterministic: bool):
    """A jitted `(params, key, game_state) -> (action, masked probabilities, value, mask)`."""

    @jax.jit
    def decide(params, key, game_state):
        features, mask = evaluation.features_and_mask(game_state)
        logits, value = network.apply(params, features)
        action = policy.select_action(key, logits, mask, deterministic)
        probabilities = jax.nn.softmax(policy.masked_logits(logits, mask))
        return action, probabilities, value, mask

    return decide


def _end_reason(info) -> str:
    """Why the episode's last step ended it; the game's done is exactly won | died | invalid
    (§13.2) and the viewer takes no invalid action, so anything else means its step cap."""
    if bool(info["won"]):
        return "won"
    if bool(info["death"]):
        return "died"
    return "max steps"


def watch(loaded: policy.LoadedPolicy, options: ViewerOptions, out: TextIO | None = None,
          read_line: Callable[[], str] | None = None) -> list[EpisodeSummary]:
    """Plays `options.episodes` episodes, printing each step; returns the episode summaries.

    Output goes to `out` (default: the current sys.stdout). In step mode `read_line` (default:
    a line of the current sys.stdin) is called before each step: "q" quits, after a summary of
    the episode so far (shown, not returned: the episode did not end), and end of input stops
    waiting. An interrupt (KeyboardInterrupt, which the CLI raises for SIGTERM too) first writes
    the GIF of the frames collected so far, then propagates; one that comes while the GIF is
    written waits for the file.
    """
    out = out or sys.stdout
    frames, summaries = [], []
    interrupted = None
    try:
        _play(loaded, options, out, read_line or sys.stdin.readline, frames, summaries)
        if len(summaries) > 1:
            returns = [s.episode_return for s in summaries]
            out.write(f"{len(summaries)} episodes: mean return {np.mean(returns):+.3f}, "
                      f"mean stage {np.mean([s.stage for s in summaries]):.2f}, "
                      f"wins {sum(s.won for s in summaries)}\n")
    except KeyboardInterrupt as interrupt:
        interrupted = interrupt
    except BrokenPipeError:  # the reader of the board is gone (`| head`): the GIF still counts
        if options.gif_path and frames:
            _write_gif(frames, options)
        raise
    if options.gif_path and frames:
        # The GIF is what was asked for: a signal while it is written (seconds for a long
        # recording) waits for it instead of losing it.
        with interrupts.held() as signals:
            _write_gif(frames, options)
        if signals and interrupted is None:
            interrupted = interrupts.Interrupted(signals[0])
        count = f"{len(frames)} frame{'' if len(frames) == 1 else 's'}"
        # On a new line: an interrupt may have come at the --step prompt.
        text = (f"\nwrote {options.gif_path} ({count} so far, interrupted)\n" if interrupted
                else f"wrote {options.gif_path} ({count})\n")
        with contextlib.suppress(BrokenPipeError):  # still an interrupt (exit 7)
            out.write(text)
    if interrupted is not None:
        raise interrupted
    out.flush()
    return summaries


def _play(loaded, options: ViewerOptions, out: TextIO, read_line: Callable[[], str],
          frames: list, summaries: list[EpisodeSummary]) -> None:
    """The episodes of `watch`; appends to `frames` (when recording a GIF) and `summaries` as it
    goes, so that an interrupt keeps everything collected up to then. Returns early on "q"."""
    decide = _decide_function(loaded.network, options.deterministic)
    reset, step = _game_functions()
    key = jax.random.key(options.seed)
    waiting_for_enter = options.step_mode
    game_shapes = (jax.eval_shape(reset, key)[0] if options.scenario is None
                   else options.scenario)
    compile_ahead.compile_ahead(
        [(step, (key, game_shapes, jax.ShapeDtypeStruct((), np.int32)))]
        + ([(reset, (key,))] if options.scenario is None else [])
        + [(decide, (loaded.params, key, game_shapes))])

    def show(text: str):
        if options.clear_screen:
            out.write(CLEAR_SCREEN)
        out.write(text + "\n")
        out.flush()

    for episode in range(1, options.episodes + 1):
        key, reset_key = jax.random.split(key)
        if options.scenario is None:
            game_state, _ = reset(reset_key)
        else:
            game_state = options.scenario
        if options.gif_path:
            frames.append(gif.render_frame(game_state, gif.status_line(game_state, episode, 0),
                                           "start"))
        episode_return, action_counts = 0.0, np.zeros(C.NUM_ACTIONS, np.int64)
        header = f"=== episode {episode}/{options.episodes}"
        if options.step_mode:  # the board first: each Enter then shows what is done on it
            show(f"{header}  start ===\n{renderer.render(game_state, color=options.color)}")
        steps, stuck = 0, False  # max_steps >= 1: `info` is set before the summary reads it
        while steps < options.max_steps:
            if waiting_for_enter:
                out.write("[Enter] next step, q + Enter quits: ")
                out.flush()
                answer = read_line()
                if answer == "":
                    waiting_for_enter = False  # input closed: play on without waiting
                elif answer.strip().lower() == "q":
                    stopped = _summary(steps, episode_return, game_state, action_counts,
                                       won=False, end=STOPPED)
                    show(f"{header} stopped ===\n{_summary_text(stopped)}")
                    return
            key, act_key, step_key = jax.random.split(key, 3)
            action, probabilities, value, mask = jax.device_get(
                decide(loaded.params, act_key, game_state))
            action = int(action)
            if not mask.any():
                stuck = True
                break
            if not mask[action]:
                raise RuntimeError(f"policy chose the invalid action {report.action_name(action)}")
            game_state_after, _, reward, done, info = step(step_key, game_state,
                                                            np.int32(action))
            info = jax.device_get(info)
            components = {name: float(v) for name, v in info["reward_components"].items()}
            steps += 1
            episode_return += float(reward)
            action_counts[action] += 1

            top = policy.top_actions(probabilities, mask, options.top_k)
            decision = [report.top_actions_line(top, float(value)),
                        f"action: {report.action_name(action)} "
                        f"({100 * float(probabilities[action]):.1f}%)",
                        report.reward_line(float(reward), components)]
            step_header = f"{header}  step {steps} ==="
            if options.step_mode:  # the board acted on is above the prompt already
                lines = [step_header, *decision,
                         renderer.render(game_state_after, color=options.color)]
            else:
                lines = [step_header, renderer.render(game_state, color=options.color), *decision]
            # The frame first: every step shown is in the GIF, even if interrupted right after.
            if options.gif_path:
                frames.append(gif.render_frame(
                    game_state_after, gif.status_line(game_state_after, episode, steps),
                    f"{report.action_name(action)}   {report.reward_line(float(reward), {})}"))
            show("\n".join(lines))
            game_state = game_state_after
            # Read before sleeping: it waits for the step's computation, and a sleep begun
            # while XLA still ran it was not cut short by SIGINT (seen with 2 CPU devices).
            finished = bool(done)
            # Before the episode's last step too: its screen says why the episode ended.
            if options.delay > 0 and not waiting_for_enter:
                time.sleep(options.delay)
            if finished:
                break

        if stuck:
            won, end = False, NO_VALID_ACTION
            why_it_ended = [f"no action is valid: {report.NO_VALID_ACTION_REASON}"]
        else:
            won, end = bool(info["won"]), _end_reason(info)
            # In step mode the last step's action and board are just above.
            why_it_ended = [] if options.step_mode else [
                f"last action: {report.action_name(action)}  "
                f"{report.reward_line(float(reward), components)}"]
        summary = _summary(steps, episode_return, game_state, action_counts, won=won, end=end)
        summaries.append(summary)
        board = [] if options.step_mode else [renderer.render(game_state, color=options.color)]
        show("\n".join([f"{header} finished ===", *board, *why_it_ended, _summary_text(summary)]))
        if options.delay > 0 and episode < options.episodes and not waiting_for_enter:
            time.sleep(options.delay)


def _summary(steps: int, episode_return: float, game_state, action_counts, won: bool,
             end: str) -> EpisodeSummary:
    programs = {C.PROGRAM_NAMES[k]: int(count)
                for k, count in enumerate(action_counts[C.FIRST_PROGRAM_ACTION:]) if count}
    return EpisodeSummary(
        steps=steps, episode_return=episode_return, stage=int(game_state.stage),
        score=int(game_state.core.score), won=won, end=end, programs_used=programs)


def _summary_text(summary: EpisodeSummary) -> str:
    return (f"steps {summary.steps}  return {summary.episode_return:+.3f}  stage {summary.stage}  "
            f"score {summary.score}  won {'yes' if summary.won else 'no'}  end: {summary.end}\n"
            f"programs used: {report.programs_used_text(summary.programs_used)}")


def _write_gif(frames, options: ViewerOptions) -> None:
    gif.write_gif(frames, options.gif_path, frame_seconds=max(options.delay, 0.3))
