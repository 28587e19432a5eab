"""Several agents in one run (`--num-seeds K`): their keys, their metrics, and how stdout shows
them.

Agent i trains from `PRNGKey(seed + i)`, the key a one-agent run with `--seed seed + i` starts
from, so it computes what that run computes, up to the last bits of float sums
(specs/training.md, "Several agents"). The trainer maps its functions over the agents' leading
axis (`trainer.py`); this module is the host's side of that axis:
- keys: `agent_keys`, `split_keys`;
- metrics: a log window per agent (`AgentWindows`). A logged record holds, under the one-agent
  names, the mean over the agents, and each agent's own values as `agent/<i>/<name>`;
- stdout: the `[train]` line's fields as mean±std over the agents, health warnings per agent.
With one agent each function gives what the one-agent trainer gives.
"""

from __future__ import annotations

import math

import numpy as np

from hackmatrix.envs.contract import EnvMetrics
from hackmatrix.training import metrics as M
from hackmatrix.training.config import TrainConfig


def agent_key(name: str, agent: int) -> str:
    """The record key of agent `agent`'s value of the metric `name`."""
    return f"agent/{agent}/{name}"


def agent_keys(config: TrainConfig):
    """The key `trainer.init` starts from: `PRNGKey(seed)` for one agent; for K, the stacked
    keys of seeds seed, ..., seed + K - 1."""
    import jax
    import jax.numpy as jnp
    if config.num_seeds == 1:
        return jax.random.PRNGKey(config.seed)
    return jnp.stack([jax.random.PRNGKey(config.seed + agent)
                      for agent in range(config.num_seeds)])


def split_keys(rng, num_seeds: int):
    """`jax.random.split(rng)` of each agent's key: two keys per agent, as two arrays with the
    agents first when there are several."""
    import jax
    if num_seeds == 1:
        return jax.random.split(rng)
    return jax.vmap(jax.random.split, out_axes=1)(rng)


def metrics_window(config: TrainConfig, env_metrics: EnvMetrics):
    """The log window of a run: `MetricsWindow`, or one per agent for several."""
    if config.num_seeds == 1:
        return M.MetricsWindow(config.batch_size, env_metrics)
    return AgentWindows(config.num_seeds, config.batch_size, env_metrics)


def mean_and_std(values) -> tuple[float, float]:
    """The mean and the (population) standard deviation over the agents whose value is
    defined (not NaN: no episode ended in the window); NaN when none is."""
    defined = [float(value) for value in values if not math.isnan(value)]
    if not defined:
        return math.nan, math.nan
    return float(np.mean(defined)), float(np.std(defined))


class AgentWindows:
    """`MetricsWindow`'s interface over one window per agent, for chunk metrics with the agents
    second (`[updates, K, ...]`, `trainer.run_chunk`)."""

    def __init__(self, num_agents: int, batch_size: int, env_metrics: EnvMetrics):
        self.windows = [M.MetricsWindow(batch_size, env_metrics) for _ in range(num_agents)]

    @property
    def updates(self) -> int:
        return self.windows[0].updates

    @property
    def steps(self) -> int:
        """Every agent's env steps: `train/sps` is the run's speed, all agents together."""
        return sum(window.steps for window in self.windows)

    def reset(self) -> None:
        for window in self.windows:
            window.reset()

    def add(self, chunk_metrics: dict, num_active: int) -> None:
        for agent, window in enumerate(self.windows):
            window.add({key: np.asarray(value)[:, agent] for key, value in chunk_metrics.items()},
                       num_active)

    def state(self, seconds: float) -> dict:
        return {"agents": [window.state(seconds) for window in self.windows]}

    def restore(self, state: dict) -> float:
        """As `MetricsWindow.restore`; ValueError for a window of another number of agents."""
        states = state["agents"]
        if not isinstance(states, list) or len(states) != len(self.windows):
            raise ValueError(f"the window is not one of {len(self.windows)} agents")
        seconds = [window.restore(saved) for window, saved in zip(self.windows, states)]
        return seconds[0]  # saved alike for every agent

    def summarize(self) -> dict:
        """The mean over the agents under each metric's name, then every agent's own values."""
        per_agent = [window.summarize() for window in self.windows]
        record = {name: mean_and_std([values[name] for values in per_agent])[0]
                  for name in per_agent[0]}
        for agent, values in enumerate(per_agent):
            record.update({agent_key(name, agent): value for name, value in values.items()})
        return record


def agent_record(record: dict, agent: int) -> dict:
    """Agent `agent`'s values of a logged record, under the one-agent names."""
    prefix = agent_key("", agent)
    return {"update": record["update"], **{key[len(prefix):]: value for key, value in
                                           record.items() if key.startswith(prefix)}}


def format_line(record: dict, num_updates: int, eta_seconds: float, num_agents: int) -> str:
    """The `[train]` line (`metrics.format_line`); with several agents each field is the mean
    ± the std over them, the std to 2 significant digits."""
    if num_agents == 1:
        return M.format_line(record, num_updates, eta_seconds)

    def spread(name: str) -> str:
        mean, std = mean_and_std([record[agent_key(name, agent)] for agent in range(num_agents)])
        return M.short_number(mean) + (f"±{std:.2g}" if not math.isnan(mean) else "")
    return M.format_line(record, num_updates, eta_seconds, spread)


def health_warnings(record: dict, num_agents: int) -> list[str]:
    """`metrics.health_warnings`; with several agents, each agent's, naming it: a mean would
    hide one agent's collapse."""
    if num_agents == 1:
        return M.health_warnings(record)
    return [warning for agent in range(num_agents)
            for warning in M.health_warnings(agent_record(record, agent), f" agent={agent}")]


def seed_text(config: TrainConfig) -> str:
    """The seed on the `[config]` line, with the agents' seeds when there are several."""
    if config.num_seeds == 1:
        return f"seed={config.seed}"
    return (f"seed={config.seed} num_seeds={config.num_seeds} (agents' seeds {config.seed}.."
            f"{config.seed + config.num_seeds - 1})")
