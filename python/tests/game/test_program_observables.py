"""What ten programs pay and show (rules §7, §14, §15): one `step` each, with the exact reward,
all 15 reward components and the observation channels the program changes.

These close the gaps left by test_programs.py for PUSH, PULL, DEBUG and ANTI-V (reward and
observation), CALM, DELAY and REDUC (reward) and WARP, STEP and SIPH+ (observation). Every
expected number is worked out from the rules text in a comment next to it.
"""

import jax
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import scenario

import compiled

STEP = compiled.STEP
KEY = jax.random.PRNGKey(0)
program = compiled.program_action
enemy = compiled.enemy

# §15.1 player vector.
ROW, COL, CREDITS, ENERGY, SIPHONS, ATTACK, SHOW, CALM = 0, 1, 3, 4, 6, 7, 8, 9
# §15.3 grid channels.
CH_ENEMY = slice(0, 7)  # virus, daemon, glitch, cryptog, hp / 3, stunned, spawnedFromSiphon
CH_DATA_BLOCK, CH_PROGRAM_BLOCK, CH_POINTS = 7, 8, 10
CH_SPAWN_COUNT, CH_TRANSMISSION, CH_CREDITS, CH_DATA_SIPHON, CH_EXIT = 35, 36, 37, 39, 40
NO_ENEMY = [0, 0, 0, 0, 0, 0, 0]


def take(name, player, **fields):
    """One step of program `name` from a scenario owning only it: (obs, reward, info)."""
    d = {"player": player, "ownedPrograms": [name], **fields}
    _, obs, reward, done, info = STEP(KEY, scenario.from_dict(d), program(name))
    assert not bool(info["invalid_action"]) and not bool(done)
    return obs, reward, info


def assert_reward(reward, info, expected, **nonzero):
    """§14.1: the step penalty, the components in `nonzero`, every other one exactly 0; the 15
    add up, in table order, to the reward, which is `expected`."""
    compiled.assert_components_add_up(reward, info)
    values = compiled.reward_components(info)
    wanted = {**dict.fromkeys(C.REWARD_COMPONENTS, 0.0), "step_penalty": -0.01, **nonzero}
    assert len(wanted) == 15
    for name in C.REWARD_COMPONENTS:
        assert values[name] == pytest.approx(wanted[name], abs=1e-6), name
    assert float(reward) == pytest.approx(expected, abs=1e-6)


def assert_enemy_cell(obs, row, col, expected):
    """Channels 0-6 of a cell: the first live enemy there, or all 0 (§15.3)."""
    np.testing.assert_allclose(np.asarray(obs.grid[row, col, CH_ENEMY]), expected, atol=1e-6)


def test_push_reward_and_the_pushed_enemies_old_and_new_cells():
    obs, reward, info = take(
        "PUSH", {"row": 2, "col": 2, "energy": 5},
        enemies=[enemy("virus", 2, 4, 1, stunned=True, spawnedFromSiphon=True),  # row: -> (2,5)
                 enemy("daemon", 3, 3, 3)],  # diagonal: (4,4) is the farthest candidate (§7.2)
        blocks=[{"row": 4, "col": 4, "type": "data", "points": 6}])
    # -0.01 step, 2 energy spent: 0.05 * -2 = -0.1; no kill, the player did not move, and the 3
    # energy left pay no holding reward (only on completing a stage).
    assert_reward(reward, info, -0.11, resourceGain=-0.1)
    assert_enemy_cell(obs, 2, 4, NO_ENEMY)
    assert_enemy_cell(obs, 2, 5, [1, 0, 0, 0, 1 / 3, 1, 1])  # no damage; stun and origin kept
    assert_enemy_cell(obs, 3, 3, NO_ENEMY)
    assert_enemy_cell(obs, 4, 4, [0, 1, 0, 0, 3 / 3, 0, 0])  # PUSH ignores blocks
    assert float(obs.player[ENERGY]) == pytest.approx(3 / 50)  # 5 / 50 before
    # The block under the daemon stays as it was: data block, 6 points.
    assert float(obs.grid[4, 4, CH_DATA_BLOCK]) == 1.0
    assert float(obs.grid[4, 4, CH_POINTS]) == pytest.approx(6 / 9)


def test_pull_reward_and_the_pulled_enemies_old_and_new_cells():
    obs, reward, info = take(
        "PULL", {"row": 2, "col": 2, "energy": 2},
        enemies=[enemy("daemon", 5, 5, 2),                  # diagonal: -> (4,4)
                 enemy("glitch", 2, 0, 2, stunned=True),    # same row: -> (2,1)
                 enemy("cryptog", 0, 3, 2)])                # nearest candidate (1,2), §7.3
    # -0.01 step, 0.05 * -2 energy = -0.1.
    assert_reward(reward, info, -0.11, resourceGain=-0.1)
    assert_enemy_cell(obs, 5, 5, NO_ENEMY)
    assert_enemy_cell(obs, 4, 4, [0, 1, 0, 0, 2 / 3, 0, 0])
    assert_enemy_cell(obs, 2, 0, NO_ENEMY)
    assert_enemy_cell(obs, 2, 1, [0, 0, 1, 0, 2 / 3, 1, 0])
    # The cryptog was hidden on (0,3), off the player's row and column; on (1,2), in the
    # player's column, it shows (visibility is judged after the step, §15.3).
    assert_enemy_cell(obs, 0, 3, NO_ENEMY)
    assert_enemy_cell(obs, 1, 2, [0, 0, 0, 1, 2 / 3, 0, 0])
    assert float(obs.player[ENERGY]) == 0.0
    assert float(obs.grid[5, 5, CH_EXIT]) == 1.0  # the daemon leaving the exit leaves the exit


def test_debug_reward_and_the_enemies_it_hits():
    obs, reward, info = take(
        "DEBUG", {"row": 2, "col": 2, "credits": 10},
        enemies=[enemy("daemon", 4, 4, 3),     # on a block: 3 - 1 = 2 hp, stunned
                 enemy("virus", 0, 1, 1),      # on a siphoned block: 1 - 1 = 0, removed
                 enemy("glitch", 3, 0, 2)],    # not on a block: untouched
        blocks=[{"row": 4, "col": 4, "type": "data", "points": 2},
                {"row": 0, "col": 1, "type": "program", "program": "WAIT", "siphoned": True}])
    # -0.01 step + 0.3 (one kill) + 0.05 * -3 credits = 0.14.
    assert_reward(reward, info, 0.14, kills=0.3, resourceGain=-0.15)
    assert_enemy_cell(obs, 4, 4, [0, 1, 0, 0, 2 / 3, 1, 0])
    assert_enemy_cell(obs, 0, 1, NO_ENEMY)
    assert float(obs.grid[0, 1, CH_PROGRAM_BLOCK]) == 1.0  # DEBUG leaves the block
    assert float(obs.player[CREDITS]) == pytest.approx(7 / 50)  # 10 / 50 before
    assert_enemy_cell(obs, 3, 0, [0, 0, 1, 0, 2 / 3, 0, 0])


def test_anti_v_reward_and_the_viruses_it_hits():
    obs, reward, info = take(
        "ANTI-V", {"row": 2, "col": 2, "credits": 3, "attackDamage": 3},
        enemies=[enemy("virus", 0, 0, 2),                              # 2 - 1 = 1, stunned
                 enemy("virus", 5, 4, 1),                              # dies: a kill
                 enemy("virus", 5, 0, 1, isFromScheduledTask=True),    # dies: no kill
                 enemy("daemon", 0, 1, 3)])                            # not a virus
    # Exactly 1 damage whatever attackDamage (§7.18). -0.01 step + 0.3 (one kill, the scheduled
    # virus pays nothing) + 0.05 * -3 credits = 0.14.
    assert_reward(reward, info, 0.14, kills=0.3, resourceGain=-0.15)
    assert_enemy_cell(obs, 0, 0, [1, 0, 0, 0, 1 / 3, 1, 0])
    assert_enemy_cell(obs, 5, 4, NO_ENEMY)
    assert_enemy_cell(obs, 5, 0, NO_ENEMY)
    assert float(obs.player[CREDITS]) == 0.0
    assert_enemy_cell(obs, 0, 1, [0, 1, 0, 0, 3 / 3, 0, 0])
    assert float(obs.player[ATTACK]) == 1.0  # (3 - 1) / 2, unchanged


def test_calm_reward_pays_only_its_cost():
    obs, reward, info = take("CALM", {"row": 2, "col": 2, "credits": 2, "energy": 4})
    # -0.01 step + 0.05 * (-2 credits - 4 energy) = -0.31.
    assert_reward(reward, info, -0.31, resourceGain=-0.3)
    assert float(obs.player[CALM]) == 1.0
    assert float(obs.player[SHOW]) == 0.0


def test_delay_reward_pays_only_its_cost():
    obs, reward, info = take(
        "DELAY", {"row": 2, "col": 2, "credits": 1, "energy": 2},
        transmissions=[{"row": 0, "col": 5, "turnsRemaining": 0, "enemyType": "virus"},
                       {"row": 5, "col": 0, "turnsRemaining": 2, "enemyType": "daemon"}])
    # -0.01 step + 0.05 * (-1 credit - 2 energy) = -0.16; nothing hatches, nothing is killed.
    assert_reward(reward, info, -0.16, resourceGain=-0.15)
    assert float(obs.grid[0, 5, CH_TRANSMISSION]) == 0.75  # 0 + 3 = 3 turns: 3 / 4
    assert float(obs.grid[5, 0, CH_TRANSMISSION]) == 1.0   # 2 + 3 = 5 turns: min(5 / 4, 1)
    assert_enemy_cell(obs, 0, 5, NO_ENEMY)


def test_reduc_reward_pays_only_its_cost():
    obs, reward, info = take(
        "REDUC", {"row": 2, "col": 2, "credits": 2, "energy": 1},
        blocks=[{"row": 0, "col": 0, "type": "data", "points": 4},              # spawn 4 -> 3
                {"row": 0, "col": 1, "type": "data", "points": 5, "siphoned": True},  # stays 5
                {"row": 0, "col": 2, "type": "program", "program": "CRASH"}])  # spawn 6 -> 5
    # -0.01 step + 0.05 * (-2 credits - 1 energy) = -0.16; no block changes the path to the exit.
    assert_reward(reward, info, -0.16, resourceGain=-0.15)
    assert float(obs.grid[0, 0, CH_SPAWN_COUNT]) == pytest.approx(3 / 9)
    assert float(obs.grid[0, 1, CH_SPAWN_COUNT]) == pytest.approx(5 / 9)
    assert float(obs.grid[0, 2, CH_SPAWN_COUNT]) == pytest.approx(5 / 9)
    assert float(obs.grid[0, 0, CH_POINTS]) == pytest.approx(4 / 9)  # points are not touched


def test_warp_observation_shows_the_player_on_the_emptied_target_cell():
    obs, reward, info = take(
        "WARP", {"row": 0, "col": 0, "credits": 2, "energy": 2},
        enemies=[enemy("virus", 3, 4, 2)],  # the only target
        resources=[{"row": 3, "col": 4, "credits": 2}])
    # -0.01 step + 0.3 (the virus) + 0.05 * (10 - 3) cells closer to the exit (5,5)
    # + 0.05 * (-2 credits - 2 energy) = 0.44.
    assert_reward(reward, info, 0.44, kills=0.3, distance=0.35, resourceGain=-0.2)
    assert float(obs.player[ROW]) == pytest.approx(3 / 5)
    assert float(obs.player[COL]) == pytest.approx(4 / 5)
    assert_enemy_cell(obs, 3, 4, NO_ENEMY)
    assert float(obs.player[CREDITS]) == 0.0 and float(obs.player[ENERGY]) == 0.0
    # No pickup on arrival (§7.5): the 2 credits stay on the cell.
    assert float(obs.grid[3, 4, CH_CREDITS]) == pytest.approx(2 / 3)


def test_step_observation_shows_only_the_energy_spent():
    obs, reward, info = take("STEP", {"row": 2, "col": 2, "energy": 3},
                             enemies=[enemy("virus", 3, 2, 2)])
    # -0.01 step + 0.05 * -3 energy = -0.16.
    assert_reward(reward, info, -0.16, resourceGain=-0.15)
    # stepActive is hidden (§2.6): the player vector is the setup's with energy 3 / 50 -> 0.
    np.testing.assert_allclose(np.asarray(obs.player), [2 / 5, 2 / 5, 1, 0, 0, 0, 0, 0, 0, 0],
                               atol=1e-6)
    # A free action: the adjacent virus did not act.
    assert_enemy_cell(obs, 3, 2, [1, 0, 0, 0, 2 / 3, 0, 0])


def test_siph_plus_observation_shows_one_more_data_siphon():
    obs, reward, info = take("SIPH+", {"row": 2, "col": 2, "credits": 5, "dataSiphons": 1},
                             resources=[{"row": 0, "col": 0, "dataSiphon": True}])
    # -0.01 step + 0.05 * -5 credits = -0.26; not a pickup, so dataSiphon stays 0 (§7.12).
    assert_reward(reward, info, -0.26, resourceGain=-0.25)
    assert float(obs.player[SIPHONS]) == pytest.approx(2 / 10)  # 1 + 1 charges
    assert float(obs.player[CREDITS]) == 0.0  # 5 / 50 before
    assert float(obs.grid[0, 0, CH_DATA_SIPHON]) == 1.0  # the pickup on the board stays
