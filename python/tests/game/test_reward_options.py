"""The training reward options (game/reward_options.py, `EnvParams.reward_weights`,
`distance_potential` and `program_potential`): parsing, the params they build, that the defaults
are the rules' reward bit for bit (§14.1: the 15 components added one by one in table order), that
weights scale each component exactly, that the potential shaping pays nothing for walking away and
back, and that the program potential pays for programs acquired and takes back what UNDO removes.

Everything steps through one jitted `HackMatrixEnv.batch_step` of 8 envs whose params are traced,
so every reward option shares its compilation.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.bench.env import random_valid_action
from hackmatrix.game import action_mask, reward_options, scenario
from hackmatrix.game import constants as C
from hackmatrix.game.env import EnvParams, EnvState, HackMatrixEnv
from test_fuzz import random_scenario

ENV = HackMatrixEnv()
NUM_ENVS = 8
NUM_STEPS = 16
BATCH_STEP = jax.jit(ENV.batch_step)
UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3
A = np.float32(0.05)  # the distance reward per cell, in float32 as the env computes it

# Every component but `distance` weighted 0: what is left of the reward is the distance term.
ONLY_DISTANCE = ",".join(f"{name}=0" for name in C.REWARD_COMPONENTS if name != "distance")


def rules_reward(components) -> np.ndarray:
    """§14.1: the components added one by one, in table order, in float32."""
    components = np.asarray(components, np.float32)
    total = components[..., 0]
    for i in range(1, C.NUM_REWARD_COMPONENTS):
        total = np.float32(total + components[..., i])
    return total


# ----------------------------------------------------------------------------- parsing

@pytest.mark.parametrize("text, weights", [
    ("", {}),
    (" , ", {}),
    ("kills=2", {"kills": 2.0}),
    (" kills = 2 , score=0.5,", {"kills": 2.0, "score": 0.5}),
    ("death=-1e1,step_penalty=0", {"death": -10.0, "step_penalty": 0.0}),
    ("siphonDeathPenalty=0.25", {"siphonDeathPenalty": 0.25}),
])
def test_parse_weights_reads_name_value_pairs(text, weights):
    parsed = reward_options.parse_weights(text)
    assert parsed == weights
    assert all(type(value) is float for value in parsed.values())


@pytest.mark.parametrize("text, message", [
    ("kills", "reward weight 'kills' is not NAME=VALUE with NAME one of step_penalty, stage, "),
    ("bogus=1", "reward weight 'bogus=1' is not NAME=VALUE"),
    ("Kills=1", "reward weight 'Kills=1' is not NAME=VALUE"),  # names are case-sensitive
    ("=1", "reward weight '=1' is not NAME=VALUE"),
    ("kills=x", "reward weight 'kills=x': 'x' is not a number"),
    ("kills=", "reward weight 'kills=': '' is not a number"),
    ("kills=inf", "reward weight 'kills=inf' must be finite"),
    ("kills=-inf", "reward weight 'kills=-inf' must be finite"),
    ("kills=nan", "reward weight 'kills=nan' must be finite"),
    ("kills=1e400", "reward weight 'kills=1e400' must be finite"),
    ("kills=1,score=2,kills=3", "reward weight for 'kills' is given twice"),
])
def test_parse_weights_refuses_what_is_not_a_weight_list(text, message):
    with pytest.raises(reward_options.RewardOptionError) as raised:
        reward_options.parse_weights(text)
    assert str(raised.value).startswith(message), str(raised.value)
    assert isinstance(raised.value, ValueError)


def test_env_params_of_the_rules_are_the_default_params():
    default = EnvParams()
    assert default.reward_weights == (1.0,) * 15 and default.distance_potential == 0.0
    assert reward_options.env_params() == default
    assert reward_options.env_params("", "rules") == default
    # base: its other fields are kept
    base = EnvParams(max_steps_in_episode=7)
    built = reward_options.env_params("kills=2", "potential", base=base)
    assert built.max_steps_in_episode == 7


@pytest.mark.parametrize("weights, shaping, expected_weights, potential", [
    ("kills=2,score=0.5", "rules",
     {"kills": 2.0, "score": 0.5}, 0.0),
    ("distance=3", "rules", {"distance": 3.0}, 0.0),
    ("", "potential", {"distance": 0.0}, 0.05),
    ("kills=0", "potential", {"kills": 0.0, "distance": 0.0}, 0.05),
    ("", "none", {"distance": 0.0}, 0.0),
    ("victory=0.001", "none", {"victory": 0.001, "distance": 0.0}, 0.0),
])
def test_env_params_weight_each_component_and_set_the_potential(weights, shaping,
                                                                 expected_weights, potential):
    params = reward_options.env_params(weights, shaping)
    assert params.reward_weights == tuple(expected_weights.get(name, 1.0)
                                          for name in C.REWARD_COMPONENTS)
    assert params.distance_potential == potential
    assert all(type(w) is float for w in params.reward_weights)


@pytest.mark.parametrize("weights, shaping, message", [
    ("", "potentail", "distance shaping must be one of rules, potential, none, got 'potentail'"),
    ("", "", "distance shaping must be one of"),
    ("distance=1", "potential", "--distance-shaping potential replaces the 'distance' component"),
    ("distance=0", "none", "--distance-shaping none replaces the 'distance' component"),
    ("kills=x", "rules", "reward weight 'kills=x'"),
])
def test_env_params_refuse_an_unknown_shaping_or_a_distance_weight_it_replaces(weights, shaping,
                                                                               message):
    with pytest.raises(reward_options.RewardOptionError, match=message):
        reward_options.env_params(weights, shaping)


def test_the_training_config_refuses_bad_reward_options():
    from hackmatrix.training.config import ConfigError, TrainConfig, validate

    validate(TrainConfig(reward_weights="kills=2", distance_shaping="potential"))
    with pytest.raises(ConfigError, match="reward weight 'bogus=1'"):
        validate(TrainConfig(reward_weights="bogus=1"))
    with pytest.raises(ConfigError, match="distance shaping must be one of"):
        validate(TrainConfig(distance_shaping="manhattan"))
    with pytest.raises(ConfigError, match="replaces the 'distance' component"):
        validate(TrainConfig(reward_weights="distance=2", distance_shaping="none"))


# ----------------------------------------------------------------------------- random play

@pytest.fixture(scope="module")
def random_steps():
    """NUM_STEPS batched steps of random valid actions from random scenarios (programs,
    siphons, kills, stage ends, deaths), each stepped with the default params and with two
    weightings: [(states, actions, keys, {name: (obs, state, reward, done, info)})]."""
    games = jax.jit(jax.vmap(random_scenario))(jax.random.split(jax.random.PRNGKey(11), NUM_ENVS))
    states = EnvState(game=games, time=jnp.zeros((NUM_ENVS,), jnp.int32))
    masks = jax.vmap(action_mask.valid_actions)(games)
    key = jax.random.PRNGKey(12)
    steps = []
    for _ in range(NUM_STEPS):
        key, action_key, step_key = jax.random.split(key, 3)
        actions = random_valid_action(action_key, masks).astype(jnp.int32)
        keys = jax.random.split(step_key, NUM_ENVS)
        results = {name: BATCH_STEP(keys, states, actions, params)
                   for name, params in PARAMS.items()}
        steps.append(results)
        obs, states = results["default"][0], results["default"][1]
        masks = obs.action_mask
    return steps


# Powers of two (exact products) and others (rounded products), zero and negative weights.
WEIGHTS = {"step_penalty": 2.0, "stage": 0.5, "score": 0.3, "kills": 3.0, "dataSiphon": 0.0,
           "distance": 1.7, "victory": 0.001, "death": 0.25, "resourceGain": -1.0,
           "resourceHolding": 10.0, "damagePenalty": 0.1, "hpRecovery": 1.0,
           "siphonQuality": 7.5, "programWaste": -2.0, "siphonDeathPenalty": 0.125}
PARAMS = {
    "default": EnvParams(),
    "rules": reward_options.env_params("", "rules"),
    "weighted": reward_options.env_params(",".join(f"{k}={v}" for k, v in WEIGHTS.items())),
}


def test_the_random_steps_cover_many_components(random_steps):
    components = np.stack([np.asarray(step["default"][4]["reward_components"])
                           for step in random_steps])
    nonzero = {name for i, name in enumerate(C.REWARD_COMPONENTS) if components[..., i].any()}
    assert {"step_penalty", "distance", "resourceGain", "kills", "score",
            "damagePenalty"} <= nonzero, nonzero
    assert len(nonzero) >= 6, nonzero


def test_the_default_params_give_the_rules_reward_bit_for_bit(random_steps):
    for step in random_steps:
        _, _, reward, _, info = step["default"]
        expected = rules_reward(info["reward_components"])
        np.testing.assert_array_equal(np.asarray(reward), expected)
        assert np.asarray(reward).dtype == np.float32
        # The rules' options built by name are the same params: the same step, every leaf.
        for a, b in zip(jax.tree_util.tree_leaves(step["default"]),
                        jax.tree_util.tree_leaves(step["rules"]), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_weights_scale_each_component_exactly_and_change_nothing_else(random_steps):
    weights = np.asarray([WEIGHTS[name] for name in C.REWARD_COMPONENTS], np.float32)
    for step in random_steps:
        default, weighted = step["default"], step["weighted"]
        components = np.asarray(weighted[4]["reward_components"], np.float32)
        expected = rules_reward(components * weights)  # each product rounded to float32
        np.testing.assert_array_equal(np.asarray(weighted[2]), expected)
        # The game is the same game: observations, states, done and info (its components
        # included) are the default params' bit for bit; only the reward differs.
        for part in (0, 1, 3, 4):
            for a, b in zip(jax.tree_util.tree_leaves(default[part]),
                            jax.tree_util.tree_leaves(weighted[part]), strict=True):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert any(not np.array_equal(step["default"][2], step["weighted"][2])
               for step in random_steps)


# ----------------------------------------------------------------------------- a walk

def batch_of(game):
    """NUM_ENVS copies of a scenario's state, time 0 (the compiled batch's shape)."""
    return EnvState(game=jax.tree_util.tree_map(lambda x: jnp.stack([x] * NUM_ENVS), game),
                    time=jnp.zeros((NUM_ENVS,), jnp.int32))


def walk(start: dict, moves, params):
    """Env 0's rewards (float32) and infos along `moves`, every env taking the same ones."""
    states = batch_of(scenario.from_dict(start))
    rewards, infos = [], []
    for number, move in enumerate(moves):
        keys = jax.random.split(jax.random.PRNGKey(number), NUM_ENVS)
        _, states, reward, done, info = BATCH_STEP(keys, states,
                                                   jnp.full((NUM_ENVS,), move, jnp.int32), params)
        assert not bool(info["invalid_action"][0]), (number, move)
        rewards.append(np.float32(reward[0]))
        infos.append(jax.tree_util.tree_map(lambda x: np.asarray(x[0]), info))
    return rewards, infos


# From (3, 3) on an empty board, 4 cells from the exit at (5, 5): two steps away (down, left),
# two back (up, right), then the four to the exit (the last one completes the stage).
EMPTY_BOARD = {"player": {"row": 3, "col": 3}}
AWAY_AND_BACK = [DOWN, LEFT, UP, RIGHT]
TO_THE_EXIT = [UP, UP, RIGHT, RIGHT]


def test_the_potential_shaping_pays_nothing_for_walking_away_and_back():
    potential = reward_options.env_params(ONLY_DISTANCE, "potential")
    rewards, infos = walk(EMPTY_BOARD, AWAY_AND_BACK + TO_THE_EXIT, potential)
    # 0.05 x the signed change of the distance: -1, -1, +1, +1, then +1 x 4 (the last step
    # reaches the exit: its whole remaining distance, 1).
    assert rewards == [-A, -A, A, A, A, A, A, A]
    assert [bool(info["stage_complete"]) for info in infos] == [False] * 7 + [True]
    assert np.sum(np.array(rewards[:4], np.float64)) == 0.0
    assert np.float32(rewards[0] + rewards[1] + rewards[2] + rewards[3]) == 0.0
    # Over the stage: 0.05 x the start's distance to the exit, however the player walked.
    assert np.sum(np.array(rewards, np.float64)) == 4 * np.float64(A)
    straight, _ = walk(EMPTY_BOARD, TO_THE_EXIT, potential)
    assert np.sum(np.array(straight, np.float64)) == 4 * np.float64(A)
    # The env's info is the game's: its distance component pays the rules' 0.05 x max(0, delta).
    distance = C.REWARD_COMPONENTS.index("distance")
    assert [float(info["reward_components"][distance]) for info in infos] == [
        0.0, 0.0] + [float(A)] * 6


def test_the_rules_distance_reward_pays_for_pacing_and_none_pays_nothing():
    rules, _ = walk(EMPTY_BOARD, AWAY_AND_BACK, reward_options.env_params(ONLY_DISTANCE, "rules"))
    assert rules == [0.0, 0.0, A, A]  # walking back earns what walking away never cost
    nothing, _ = walk(EMPTY_BOARD, AWAY_AND_BACK + TO_THE_EXIT,
                      reward_options.env_params(ONLY_DISTANCE, "none"))
    assert nothing == [0.0] * 8


def test_the_potential_adds_to_the_weighted_components():
    # With every other weight at 1: the rules' reward less its distance component, plus the
    # potential term (a step: -0.01 step penalty, and +-0.05).
    rewards, infos = walk(EMPTY_BOARD, AWAY_AND_BACK, reward_options.env_params("", "potential"))
    expected = []
    for info, delta in zip(infos, (-1, -1, 1, 1)):
        components = np.asarray(info["reward_components"], np.float32).copy()
        components[C.REWARD_COMPONENTS.index("distance")] = 0.0
        expected.append(np.float32(rules_reward(components) + A * np.float32(delta)))
    assert rewards == expected
    assert rewards[0] == np.float32(np.float32(-0.01) - A)


def test_death_and_an_invalid_action_pay_no_distance_potential():
    potential = reward_options.env_params(ONLY_DISTANCE, "potential")
    # hp 0: the step (towards the exit) ends in death; the distance term is 0.
    dying = batch_of(scenario.from_dict({"player": {"row": 3, "col": 3, "hp": 0}}))
    invalid = batch_of(scenario.from_dict(EMPTY_BOARD))
    keys = jax.random.split(jax.random.PRNGKey(0), NUM_ENVS)
    _, _, reward, done, info = BATCH_STEP(keys, dying, jnp.full((NUM_ENVS,), UP, jnp.int32),
                                          potential)
    assert bool(info["death"][0]) and bool(done[0]) and float(reward[0]) == 0.0
    crash = C.FIRST_PROGRAM_ACTION + C.CRASH  # not owned: invalid
    _, _, reward, done, info = BATCH_STEP(keys, invalid,
                                          jnp.full((NUM_ENVS,), crash, jnp.int32), potential)
    assert bool(info["invalid_action"][0]) and bool(done[0]) and float(reward[0]) == 0.0


# ----------------------------------------------------------------------------- program potential

SIPHON = 4
UNDO = C.FIRST_PROGRAM_ACTION + C.UNDO
# A step up to (3, 3), then a siphon there that reaches two program blocks. The first UNDO
# restores the snapshot taken after the siphon's enemy turn (the programs stay owned); the second
# goes back across the siphon and takes both programs back (§7.15).
TWO_PROGRAM_BLOCKS = {
    "player": {"row": 2, "col": 3, "credits": 5, "dataSiphons": 1},
    "ownedPrograms": ["UNDO"],
    "blocks": [{"row": 4, "col": 3, "type": "program", "program": "WAIT"},
               {"row": 3, "col": 4, "type": "program", "program": "PUSH"}],
}


def test_the_program_potential_pays_each_program_acquired_and_takes_it_back_on_undo():
    actions = [UP, SIPHON, UNDO, UNDO]
    rules, infos = walk(TWO_PROGRAM_BLOCKS, actions, EnvParams())
    shaped, _ = walk(TWO_PROGRAM_BLOCKS, actions, reward_options.env_params(program_potential=0.75))
    assert [rules_reward(info["reward_components"]) for info in infos] == rules
    # 0.75 per program owned, on the change: 0, +2 programs, 0, -2.
    gained = np.float32(1.5)
    assert shaped == [rules[0], np.float32(rules[1] + gained), rules[2],
                      np.float32(rules[3] - gained)]


def test_the_program_potential_must_be_finite_and_belongs_to_hackmatrix():
    from hackmatrix.training.config import ConfigError, TrainConfig, validate
    assert EnvParams().program_potential == 0.0
    for bad in (float("inf"), float("nan"), -1e39):
        with pytest.raises(reward_options.RewardOptionError,
                           match="--program-potential must be a finite float32"):
            reward_options.env_params(program_potential=bad)
    with pytest.raises(ConfigError, match="--program-potential must be a finite float32"):
        validate(TrainConfig(program_potential=float("nan")))
    validate(TrainConfig(program_potential=-3.4e38))
    with pytest.raises(ConfigError, match="--env CartPole-v1 trains on its own"):
        validate(TrainConfig(env="CartPole-v1", torso="mlp", distance_shaping="rules",
                             program_potential=1.0))


def test_the_config_line_names_a_program_potential():
    from hackmatrix.training.cli import _reward_text
    from hackmatrix.training.config import TrainConfig
    assert _reward_text(TrainConfig(distance_shaping="rules")) == "rules"
    assert _reward_text(TrainConfig(distance_shaping="rules", program_potential=0.5)).startswith(
        "distance_shaping=rules program_potential=0.5 (not the rules' reward")
