"""Watch a trained agent play another env than HackMatrix, one text line per step.

Such an env (a gymnax one) has no text renderer here, so each step prints what the agent saw
and did: the step number, the observation's values (rounded; a long one cut short, with its
length), the value estimate, the action taken with its probability under the policy, and the
reward. After each episode: its steps, its return and how it ended. In step mode each Enter
plays one step; q + Enter stops after a summary of the episode so far.
"""

from __future__ import annotations

import functools
import sys
import time
from typing import Callable, NamedTuple, TextIO

import jax
import numpy as np

from hackmatrix import xla_options
from hackmatrix.tools import policy

# A MinAtar observation holds hundreds of values; a line of them all is unreadable.
SHOWN_OBSERVATION_VALUES = 32
DECIMALS = 3


class EnvViewerOptions(NamedTuple):
    episodes: int = 1
    deterministic: bool = False
    delay: float = 0.0
    step_mode: bool = False       # wait for Enter before each step
    seed: int = 0
    max_steps: int = 500


class EnvEpisodeSummary(NamedTuple):
    steps: int
    episode_return: float
    end: str                      # "terminated", "truncated", "ended", "max steps" or STOPPED


STOPPED = "stopped by the user"


@functools.lru_cache(maxsize=None)
def _env_functions(env):
    """The env's jitted one-env (reset, step), shared by every viewer of the process."""
    options = xla_options.compiler_options()
    return (jax.jit(env.reset, compiler_options=options),
            jax.jit(env.step, compiler_options=options))


@functools.lru_cache(maxsize=None)
def _decide_function(network, deterministic: bool):
    """A jitted `(params, key, observation) -> (action, masked probabilities, value)`."""

    @jax.jit
    def decide(params, key, observation):
        logits, value = network.apply(params, observation.features)
        action = policy.select_action(key, logits, observation.action_mask, deterministic)
        probabilities = jax.nn.softmax(policy.masked_logits(logits, observation.action_mask))
        return action, probabilities, value

    return decide


def observation_text(features) -> str:
    """`[0.031 -0.012 0.044 0.021]`, cut after SHOWN_OBSERVATION_VALUES values."""
    values = np.round(np.asarray(features, np.float64), DECIMALS) + 0.0  # no "-0.0"
    shown = " ".join(f"{value:g}" for value in values[:SHOWN_OBSERVATION_VALUES])
    rest = len(values) - SHOWN_OBSERVATION_VALUES
    return f"[{shown}{f' ... +{rest} more of {len(values)}' if rest > 0 else ''}]"


def step_line(step: int, features, value: float, action: int, probability: float,
              reward: float) -> str:
    return (f"step {step}  obs {observation_text(features)}  value {value:+.3f}  "
            f"action {action} ({100 * probability:.1f}%)  reward {reward:+.3f}")


def _end_reason(info: dict) -> str:
    """How the env ended the episode: gymnax says whether it terminated or hit its time limit."""
    if bool(info.get("terminated", False)):
        return "terminated"
    if bool(info.get("truncated", False)):
        return "truncated"
    return "ended"


def watch_env(loaded: policy.LoadedPolicy, env, options: EnvViewerOptions,
              out: TextIO | None = None,
              read_line: Callable[[], str] | None = None) -> list[EnvEpisodeSummary]:
    """Plays `options.episodes` episodes of `env`, one line per step on `out` (default: the
    current sys.stdout); returns the summaries of the episodes that ended. In step mode
    `read_line` (default: a line of sys.stdin) comes before each step: "q" stops, end of input
    plays on without waiting."""
    out = out or sys.stdout
    read_line = read_line or sys.stdin.readline
    decide = _decide_function(loaded.network, options.deterministic)
    reset, step = _env_functions(env)
    key = jax.random.key(options.seed)
    waiting_for_enter = options.step_mode
    summaries = []
    for episode in range(1, options.episodes + 1):
        key, reset_key = jax.random.split(key)
        observation, state = reset(reset_key)
        header = f"=== episode {episode}/{options.episodes}"
        out.write(f"{header} ===\n")
        episode_return, steps, end = 0.0, 0, "max steps"
        while steps < options.max_steps:
            if waiting_for_enter:
                out.write("[Enter] next step, q + Enter quits: ")
                out.flush()
                answer = read_line()
                if answer == "":
                    waiting_for_enter = False
                elif answer.strip().lower() == "q":  # shown, not returned: it did not end
                    stopped = EnvEpisodeSummary(steps, episode_return, STOPPED)
                    out.write(f"{header} stopped ===\n{_summary_text(stopped)}\n")
                    out.flush()
                    return summaries
            key, act_key, step_key = jax.random.split(key, 3)
            action, probabilities, value = jax.device_get(
                decide(loaded.params, act_key, observation))
            action = int(action)
            # The observation shown is the one acted on; the env resets itself on the episode's
            # last step, so the next one is already the next episode's.
            features = jax.device_get(observation.features)
            observation, state, reward, done, info = step(step_key, state, np.int32(action))
            steps += 1
            episode_return += float(reward)
            out.write(step_line(steps, features, float(value), action,
                                float(probabilities[action]), float(reward)) + "\n")
            out.flush()
            finished = bool(done)
            if options.delay > 0 and not waiting_for_enter:
                time.sleep(options.delay)
            if finished:
                end = _end_reason(jax.device_get(info))
                break
        summary = EnvEpisodeSummary(steps, episode_return, end)
        summaries.append(summary)
        out.write(f"{header} finished ===\n{_summary_text(summary)}\n")
    if len(summaries) > 1:
        returns = [s.episode_return for s in summaries]
        out.write(f"{len(summaries)} episodes: mean return {np.mean(returns):+.3f}, "
                  f"mean steps {np.mean([s.steps for s in summaries]):.1f}\n")
    out.flush()
    return summaries


def _summary_text(summary: EnvEpisodeSummary) -> str:
    return f"steps {summary.steps}  return {summary.episode_return:+.3f}  end: {summary.end}"
