"""The tools on a run of several agents (`--num-seeds 2`, CartPole): `--agent I` picks one (default
0) from its params files and checkpoints, whose arrays hold the agents first; an agent a file
does not hold is a bad argument (exit 3, one line); plot_metrics.py draws the run."""

import json

import numpy as np
import pytest

from conftest import load_script
from hackmatrix.tools import cli
from hackmatrix.training import params_files, policy_loading

evaluate_main = load_script("evaluate.py")
watch_main = load_script("watch_jax_agent.py")
plot_main = load_script("plot_metrics.py")

ENV = "CartPole-v1"
UPDATES = 4


@pytest.fixture(scope="module")
def agents_run(tmp_path_factory):
    """A run directory of 2 agents, 4 updates of PPO on CartPole (4 envs x 32 steps)."""
    pytest.importorskip("gymnax")
    from hackmatrix.training import cli as train_cli

    checkpoint_dir = tmp_path_factory.mktemp("checkpoints")
    assert train_cli.main(["--env", ENV, "--num-envs", "4", "--num-steps", "32",
                           "--total-timesteps", str(4 * 32 * UPDATES), "--hidden-dim", "16",
                           "--seed", "1", "--num-seeds", "2", "--no-wandb",
                           "--checkpoint-dir", str(checkpoint_dir), "--run-name", "agents"]) == 0
    return checkpoint_dir / "agents"


def _evaluate(source, json_path, *flags):
    assert evaluate_main([str(source), "--episodes", "8", "--seed", "3", "--json",
                          str(json_path), *flags]) == 0
    return json.loads(json_path.read_text())[str(source)]


def test_agent_picks_one_agent_of_the_run(agents_run, tmp_path, capsys):
    final = agents_run / "final_params.npz"
    params, network = policy_loading.load_policy_params(final, agent=1)
    with np.load(final) as data:
        assert data["meta/num_seeds"] == 2
        np.testing.assert_array_equal(params["params"]["actor_logits"]["kernel"],
                                      data["params/actor_logits/kernel"][1])
    # The same agent's params in a file of their own play the same episodes.
    alone = params_files.save_params(tmp_path / "alone.npz", params, network, meta={"env": ENV})
    second = _evaluate(agents_run, tmp_path / "second.json", "--agent", "1")
    assert second["agent"] == 1
    assert "agent 1 of 2" in capsys.readouterr().out
    single = _evaluate(alone, tmp_path / "alone.json")
    assert "agent" not in single and "agent 1 of" not in capsys.readouterr().out
    ignored = {"checkpoint_file": None, "agent": None}
    assert {**second, **ignored} == {**single, **ignored}
    # The default is agent 0; the run's checkpoint holds the same agents.
    first = _evaluate(agents_run, tmp_path / "first.json")
    assert first["agent"] == 0 and first != {**second, "agent": 0}
    from_checkpoint = _evaluate(agents_run / f"checkpoint_{UPDATES}.pkl",
                                tmp_path / "checkpoint.json", "--agent", "1")
    assert {**from_checkpoint, **ignored} == {**second, **ignored}

    assert watch_main([str(agents_run), "--agent", "1", "--max-steps", "2"]) == 0
    out = capsys.readouterr().out
    assert f"({network_text(network)}, agent 1 of 2, {ENV}, sampling)" in out


def network_text(network: dict) -> str:
    return f"separate {network['num_layers']} x {network['hidden_dim']} tanh"


@pytest.mark.parametrize("target, agent, message", [
    ("final_params.npz", "2",
     "agent 2 is not in {run}/final_params.npz: it holds 2 agents, 0 to 1"),
    (f"checkpoint_{UPDATES}.pkl", "7", "it holds 2 agents, 0 to 1"),
    (None, "1", "it holds one agent, 0"),  # a file of one agent
])
def test_an_agent_the_file_does_not_hold_exits_3_in_one_line(target, agent, message, agents_run,
                                                             tmp_path, capsys):
    path = agents_run / target if target else params_files.save_params(
        tmp_path / "alone.npz", *policy_loading.load_policy_params(agents_run),
        meta={"env": ENV})
    for main in (evaluate_main, watch_main):
        assert main([str(path), "--agent", agent]) == cli.EXIT_BAD_ARGUMENTS
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message.format(run=agents_run) in err


@pytest.mark.parametrize("main", [evaluate_main, watch_main])
def test_a_negative_agent_is_a_bad_argument(main, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["RUN", "--agent", "-1"])
    assert exited.value.code == cli.EXIT_BAD_ARGUMENTS
    assert "argument --agent: must be >= 0, got -1" in capsys.readouterr().err


def test_a_file_whose_agents_do_not_fit_its_count_is_refused(agents_run, tmp_path, capsys):
    with np.load(agents_run / "final_params.npz") as data:
        entries = {key: data[key] for key in data.files}
    damaged = tmp_path / "damaged.npz"
    np.savez(damaged, **{**entries, "meta/num_seeds": np.asarray(3)})
    assert evaluate_main([str(damaged), "--episodes", "2"]) == cli.EXIT_BAD_CHECKPOINT
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is corrupt: it holds 3 agents, but an array of shape" in err


def test_plot_metrics_draws_a_run_of_several_agents(agents_run, tmp_path, capsys):
    output = tmp_path / "agents.png"
    assert plot_main([str(agents_run), "-o", str(output)]) == 0
    assert output.stat().st_size > 0
