"""The evaluator's numbers against an independent replay of the same episodes.

`evaluation.run_episodes` plays N games at once (vmapped and jitted, capped at `max_steps`) and
`evaluation.summarise` turns them into the report that evaluate.py prints and writes as JSON.
Here every episode is replayed on its own, in a plain Python loop over the public unbatched
game API (`game.reset`, `game.step`, `game.valid_actions`, `game.flatten`; nothing from
evaluation.py's loop), with the keys the evaluator derives from its key:

    key -> (reset, act, loop); episode i resets with split(reset, N)[i] and picks its first
    action with split(act, N)[i]. Before step t the loop key splits into (next loop key, step,
    next act); episode i steps with split(step, N)[i] and picks its next action with
    split(next act, N)[i]. The keys do not depend on the policy: every policy plays the same
    boards (specs/agent-tools.md, "Evaluation").

A replayed episode stops at its first `done` (won, died or invalid action, §13.2) or at the
longest cap; the outcome under a shorter cap is a prefix of it. From the replayed steps alone
this module recomputes each episode's return, length, final stage and score, won / died /
invalid / truncated and action counts, and the report: means, the population std of the
return (the spec's), max stage, rates over episodes, action fractions over all steps taken and
the programs used. They must equal what `run_episodes` and `summarise` give, and what
evaluate.py prints and writes with --json.

Policies: both baselines (`random` samples with its keys, `exit-runner` is deterministic and
goes through stages), a small network saved as a params .npz, sampled and greedy, whose actor
head favours siphon and programs so that scores and programs occur, and a careless random
policy that sometimes takes an invalid action. Caps: the longest, a single step, a cap at
which one episode ends while another is still running, and one at which an episode completes
a stage. No episode here is won (8 stages take far more steps), so `won` and `win_rate` are
compared only as all-false and 0.
"""

import collections
import json
import re
import statistics
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import load_script
from hackmatrix import game
from hackmatrix.game import constants as C
from hackmatrix.tools import baselines, evaluation, policy
from hackmatrix.training import params_files
from hackmatrix.training import network as net

evaluate_main = load_script("evaluate.py")

SEED, EPISODES, MAX_STEPS = 0, 8, 60
POLICY_CASES = ("random", "exit-runner", "network-sampled", "network-greedy", "careless")
CAP_KINDS = ("max_steps", "one_step", "an_end_at_the_cap", "a_stage_completed_at_the_cap")


class ReplayedStep(NamedTuple):
    """One step of a replayed episode: the action taken and what `game.step` returned."""
    action: int
    reward: np.float32
    done: bool
    stage: int
    score: int
    won: bool
    death: bool
    invalid_action: bool


@pytest.fixture(scope="module")
def network_file(tmp_path_factory):
    """A 1 x 16 MLP whose actor head prefers programs, then siphon, then moves; its kernel is
    scaled up so that what the network sees, not only the bias, moves its sampled choices."""
    network = net.network_from_config(
        {"hidden_dim": 16, "num_layers": 1, "num_actions": C.NUM_ACTIONS})
    params = net.init_params(network, jax.random.key(SEED), policy.OBS_DIM)
    preference = np.zeros(C.NUM_ACTIONS, np.float32)
    preference[C.ACTION_SIPHON] = 2.0
    preference[C.FIRST_PROGRAM_ACTION:] = 3.0
    head = params["params"]["actor_logits"]
    params["params"]["actor_logits"] = {"kernel": head["kernel"] * 100.0,
                                        "bias": jnp.asarray(preference)}
    path = tmp_path_factory.mktemp("network") / "params_1.npz"
    params_files.save_params(path, params)
    return path


def careless_policy(params, key, game_state, features, action_mask):
    """Random, but an invalid action keeps a small chance: it ends the episode (§4.4). Not a
    policy evaluate.py runs (those never pick a masked action); here so that episodes also end
    by invalid action, not only by death or the cap."""
    del params, game_state, features
    return jax.random.categorical(key, jnp.where(action_mask, 0.0, -6.0)).astype(jnp.int32)


@pytest.fixture(scope="module")
def policies(network_file):
    """Each case's policy, built the way evaluate.py builds it."""
    loaded = policy.load_policy(network_file)
    return {
        "random": baselines.baseline("random"),
        "exit-runner": baselines.baseline("exit-runner"),
        "network-sampled": policy.network_policy(loaded, False, name=str(network_file)),
        "network-greedy": policy.network_policy(loaded, True, name=str(network_file)),
        "careless": evaluation.Policy(name="careless", act=careless_policy, params=None),
    }


@pytest.fixture(scope="module")
def episode_keys():
    """(reset keys [N], act keys [MAX_STEPS][N], step keys [MAX_STEPS][N]) for SEED."""
    reset_key, act_key, loop_key = jax.random.split(jax.random.key(SEED), 3)
    act_keys, step_keys = [], []
    for _ in range(MAX_STEPS):
        act_keys.append(jax.random.split(act_key, EPISODES))
        loop_key, step_key, act_key = jax.random.split(loop_key, 3)
        step_keys.append(jax.random.split(step_key, EPISODES))
    return jax.random.split(reset_key, EPISODES), act_keys, step_keys


@pytest.fixture(scope="module")
def replays(policies, episode_keys):
    """Per case, per episode: the list of ReplayedStep, one env at a time."""
    reset_keys, act_keys, step_keys = episode_keys
    reset, step = jax.jit(game.reset), jax.jit(game.step)

    def replay(candidate):
        @jax.jit
        def decide(params, key, state, obs):
            return candidate.act(params, key, state, game.flatten(obs), game.valid_actions(state))

        episodes = []
        for episode in range(EPISODES):
            state, obs = reset(reset_keys[episode])
            steps = []
            for t in range(MAX_STEPS):
                action = decide(candidate.params, act_keys[t][episode], state, obs)
                state, obs, reward, done, info = step(step_keys[t][episode], state, action)
                action, reward, done, info = jax.device_get((action, reward, done, info))
                steps.append(ReplayedStep(
                    action=int(action), reward=np.float32(reward), done=bool(done),
                    stage=int(info["stage"]), score=int(info["score"]), won=bool(info["won"]),
                    death=bool(info["death"]), invalid_action=bool(info["invalid_action"])))
                if done:
                    break
            episodes.append(steps)
        return episodes

    return {case: replay(policies[case]) for case in POLICY_CASES}


def cap_of(kind: str, episodes) -> int:
    """The --max-steps of a CAP_KINDS case, chosen from the replayed episodes."""
    if kind == "max_steps":
        return MAX_STEPS
    if kind == "one_step":
        return 1
    if kind == "an_end_at_the_cap":
        # The longest episode that ends (dies, or acts invalidly) while a longer one runs on.
        longest = max(len(steps) for steps in episodes)
        end_lengths = [len(steps) for steps in episodes
                       if steps[-1].done and len(steps) < longest]
        assert end_lengths, "no episode ends before another one: choose another SEED"
        return max(end_lengths)
    # The first step that completes a stage (stages start at 1), in any episode.
    completions = [t + 1 for steps in episodes for t, replayed in enumerate(steps)
                   if replayed.stage > (steps[t - 1].stage if t else 1)]
    assert completions, "no episode completes a stage: choose another SEED"
    return min(completions)


def reference_outcomes(episodes, cap: int) -> dict[str, np.ndarray]:
    """EpisodeResults' fields, recomputed from the replayed steps under `cap`."""
    fields = collections.defaultdict(list)
    for steps in episodes:
        taken = steps[:cap]
        episode_return = np.float32(0.0)
        for replayed in taken:
            episode_return = np.float32(episode_return + replayed.reward)
        last = taken[-1]
        fields["episode_return"].append(episode_return)
        fields["length"].append(len(taken))
        fields["stage"].append(last.stage)
        fields["score"].append(last.score)
        fields["won"].append(last.won)
        fields["death"].append(last.death)
        fields["invalid_action"].append(last.invalid_action)
        fields["truncated"].append(not last.done)
        fields["action_counts"].append(
            np.bincount([replayed.action for replayed in taken], minlength=C.NUM_ACTIONS))
    return {name: np.asarray(values) for name, values in fields.items()}


def reference_report(outcomes: dict[str, np.ndarray]) -> dict:
    """The report of one policy as specs/agent-tools.md defines it, from per-episode outcomes."""
    def mean(name):
        return statistics.fmean(outcomes[name].tolist())

    steps_taken = int(outcomes["length"].sum())
    counts = outcomes["action_counts"].sum(axis=0)
    return {
        "episodes": len(outcomes["length"]),
        "mean_return": mean("episode_return"),
        "std_return": statistics.pstdev(outcomes["episode_return"].tolist()),
        "mean_stage": mean("stage"),
        "max_stage": int(outcomes["stage"].max()),
        "win_rate": mean("won"),
        "mean_score": mean("score"),
        "mean_length": mean("length"),
        "death_rate": mean("death"),
        "invalid_action_rate": mean("invalid_action"),
        "truncated_rate": mean("truncated"),
        "action_fractions": {
            "move": counts[:C.NUM_DIRECTIONS].sum() / steps_taken,
            "siphon": counts[C.ACTION_SIPHON] / steps_taken,
            "program": counts[C.FIRST_PROGRAM_ACTION:].sum() / steps_taken,
        },
        "programs_used": {C.ACTION_NAMES[action]: int(counts[action])
                          for action in range(C.FIRST_PROGRAM_ACTION, C.NUM_ACTIONS)
                          if counts[action]},
    }


def flat(report: dict) -> dict:
    """Nested report dicts as one level ("action_fractions.move"), for pytest.approx."""
    flattened = {}
    for name, value in report.items():
        if isinstance(value, dict):
            flattened |= {f"{name}.{inner}": inner_value for inner, inner_value in value.items()}
        else:
            flattened[name] = value
    return flattened


@pytest.fixture(scope="module")
def evaluated(policies):
    """(case, cap) -> EpisodeResults of the evaluator, each run once."""
    results = {}

    def run(case: str, cap: int) -> evaluation.EpisodeResults:
        if (case, cap) not in results:
            results[case, cap] = evaluation.run_episodes(
                policies[case], jax.random.key(SEED), EPISODES, cap)
        return results[case, cap]

    return run


@pytest.mark.parametrize("cap_kind", CAP_KINDS)
@pytest.mark.parametrize("case", POLICY_CASES)
def test_every_episode_matches_its_replay(case, cap_kind, replays, evaluated):
    cap = cap_of(cap_kind, replays[case])
    results = evaluated(case, cap)._asdict()
    expected = reference_outcomes(replays[case], cap)
    assert set(results) == set(expected)
    np.testing.assert_allclose(results.pop("episode_return"), expected.pop("episode_return"),
                               rtol=1e-6, atol=1e-6)
    for name, values in expected.items():
        np.testing.assert_array_equal(results[name], values, err_msg=name)


@pytest.mark.parametrize("cap_kind", CAP_KINDS)
@pytest.mark.parametrize("case", POLICY_CASES)
def test_the_report_matches_the_replay(case, cap_kind, replays, evaluated):
    cap = cap_of(cap_kind, replays[case])
    report = evaluation.summarise(evaluated(case, cap))
    expected = reference_report(reference_outcomes(replays[case], cap))
    assert flat(report) == pytest.approx(flat(expected), rel=1e-6, abs=1e-6)


# Decimals of each number in evaluate.py's table and action line (rates and fractions in %).
PRINTED_DECIMALS = {"mean_return": 3, "std_return": 3, "mean_stage": 2, "max_stage": 0,
                    "win_rate": 1, "mean_score": 2, "mean_length": 1, "move": 1, "siphon": 1,
                    "program": 1, "death_rate": 1, "truncated_rate": 1}


def printed_report(out: str, name: str) -> tuple[dict, dict]:
    """The numbers of `name`'s table row and action line as printed, and the programs used."""
    number = r"(-?[\d.]+)"
    row = re.search(rf"^{re.escape(name)} +{number} \+- {number} +{number} +{number} +"
                    rf"{number}% +{number} +{number}$", out, re.MULTILINE)
    line = re.search(rf"^{re.escape(name)}: moves {number}%, siphon {number}%, programs "
                     rf"{number}%; died {number}%, cut off {number}%; programs used: (.*)$",
                     out, re.MULTILINE)
    assert row and line, out
    values = [float(text) for text in row.groups() + line.groups()[:-1]]
    programs = {program: int(count)
                for program, count in re.findall(r"(\S+) x(\d+)", line.groups()[-1])}
    return dict(zip(PRINTED_DECIMALS, values)), programs


def as_printed(report: dict) -> dict:
    """The numbers the table should show of a report (rates and fractions in %)."""
    numbers = {name: report[name] for name in ("mean_return", "std_return", "mean_stage",
                                               "max_stage", "mean_score", "mean_length")}
    numbers |= {name: 100 * report[name] for name in ("win_rate", "death_rate",
                                                      "truncated_rate")}
    return numbers | {name: 100 * value for name, value in report["action_fractions"].items()}


@pytest.mark.parametrize("deterministic", [False, True], ids=["sampled", "greedy"])
def test_evaluate_prints_and_writes_the_replayed_numbers(deterministic, network_file, replays,
                                                         tmp_path, capsys):
    json_path = tmp_path / "evaluation.json"
    assert evaluate_main([str(network_file), "--episodes", str(EPISODES), "--max-steps",
                          str(MAX_STEPS), "--seed", str(SEED), "--json", str(json_path)]
                         + ["--deterministic"] * deterministic) == 0
    written = json.loads(json_path.read_text())
    out = capsys.readouterr().out
    network_case = "network-greedy" if deterministic else "network-sampled"
    # Baselines ignore --deterministic.
    cases = {str(network_file): network_case, "random": "random", "exit-runner": "exit-runner"}
    assert list(written) == list(cases)
    assert written[str(network_file)].pop("checkpoint_file") == str(network_file)
    for name, case in cases.items():
        expected = reference_report(reference_outcomes(replays[case], MAX_STEPS))
        assert flat(written[name]) == pytest.approx(flat(expected), rel=1e-6, abs=1e-6), name
        printed_numbers, printed_programs = printed_report(out, name)
        expected_numbers = as_printed(expected)
        for field, decimals in PRINTED_DECIMALS.items():
            assert printed_numbers[field] == pytest.approx(
                expected_numbers[field], abs=0.5 * 10 ** -decimals + 1e-9), (name, field)
        assert printed_programs == expected["programs_used"], name


def test_the_replays_cover_every_way_an_episode_ends_but_a_win(replays):
    """Deaths, invalid actions, cut-off episodes, stage progress, scores, siphons and programs
    all occur, so that each of them is compared above."""
    episodes = [steps for case in POLICY_CASES for steps in replays[case]]
    actions = collections.Counter(replayed.action for steps in episodes for replayed in steps)
    assert any(steps[-1].death for steps in episodes)
    assert any(steps[-1].invalid_action for steps in episodes)
    assert any(len(steps) == MAX_STEPS and not steps[-1].done for steps in episodes)
    assert any(steps[-1].stage > 1 for steps in episodes)
    assert any(steps[-1].score > 0 for steps in episodes)
    assert actions[C.ACTION_SIPHON] > 0
    assert sum(actions[a] for a in range(C.FIRST_PROGRAM_ACTION, C.NUM_ACTIONS)) > 0
    for case in POLICY_CASES:  # the caps exist for every case
        cap_of("an_end_at_the_cap", replays[case])
        cap_of("a_stage_completed_at_the_cap", replays[case])
