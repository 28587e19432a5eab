"""Stage completion, stage generation, victory and death (rules §12, §13) against an independent
reading of the rules, through the public `reset` and `step` only.

Oracle. `check_generated(before, after, stage)` asserts every deterministic rule of §12.1, §12.2
and §13.1 about a freshly generated stage, on the plain states of `plain.to_plain`. `before` is
the completed stage at the moment its exit is reached (the player's action applied, §12.1 not
yet), or None for a reset; `after` is the state the game returns. It is written from the rules
text alone (not from `worldgen.py`) and is applied to

- RESETS states of a vmapped `reset` (§13.1 and the stage-1 generation);
- stage completions at every stage 1..7 from exact scenarios (`scenario.from_dict`): one played
  up to a rich state (a full enemy turn, hence an UNDO snapshot, then SHOW, CALM, ATK+, STEP and
  a siphon whose transmissions are still owed, STEP again on odd stages) before stepping onto
  the exit, and WARP landing on the exit (§7.5), its target an enemy or a transmission;

and the stage-8 victory, death and the steps after them are checked against §12.1, §12.3, §13.2
and the §14 reward. All steps run through one vmapped `step` compiled for BATCH rows.

Randomness. Every key is fixed, so the module is deterministic. Each random choice the rules give
a distribution for (player corner, bonus, exit corner, block count, block cells, block kind,
points, programs, resources, transmission type and cell) is tested with a Pearson chi-square
statistic against a threshold that a correct game exceeds with probability ALPHA = 1e-7 (the
counts within one board are at most negatively correlated, which only makes the test
conservative); the sample sizes make a plainly wrong distribution (a cell never chosen, a kind
twice as likely) exceed it many times over. Block cells, being conditioned on the acceptance
test of §12.2 step 5, have no closed form: they are compared (chi-square homogeneity) with
`reference_layout`, the rules' procedure in plain Python, fed the same block count, exit and
carried pieces as each game board.
"""

import copy
import random
from collections import Counter

import jax
import numpy as np
import pytest
from scipy import stats

from hackmatrix import game
from hackmatrix.game import constants as C
from hackmatrix.game import scenario

import compiled
import plain
from plain import CORNERS, STAGE_TABLE

ALPHA = 1e-7
RESETS = 4000
BATCH = 448
CELLS = tuple((row, col) for row in range(6) for col in range(6))
# §7.1 "Block spawn cost", by program index (action 5 + index).
SPAWN_COST = (4, 4, 6, 5, 3, 1, 4, 2, 2, 3, 4, 7, 3, 2, 2, 6, 4, 4, 4, 5, 3, 8, 4)
BONUSES = ((10, 0, 0), (0, 11, 0), (0, 0, 1))  # §13.1 (credits, energy, dataSiphons)
BLOCKS = (C.DATA_BLOCK, C.PROGRAM_BLOCK, C.QUESTION_BLOCK)
LEFT, RIGHT, SIPHON = 2, 3, 4  # §3 action indices
WARP, WAIT, UNDO, STEP, SIPH_PLUS, SHOW, CALM, ATK_PLUS = (
    compiled.program_action(name)
    for name in ("WARP", "WAIT", "UNDO", "STEP", "SIPH+", "SHOW", "CALM", "ATK+"))

_RESET = jax.jit(jax.vmap(game.reset))
_STEP = jax.jit(jax.vmap(game.step))


# ------------------------------------------------------------------------------------------
# Geometry and the reference checks (§9.2, §12, §13.1).

def on_board(row, col):
    return 0 <= row < 6 and 0 <= col < 6


def neighbours(cell):
    return [(cell[0] + dr, cell[1] + dc) for dr, dc in plain.DIRECTIONS
            if on_board(cell[0] + dr, cell[1] + dc)]


def block_cells(s):
    content = s["cells"]["content"]
    return {(r, c) for r, c in CELLS if plain.is_block(content[r][c])}


def piece_cells(items):
    return {(item["row"], item["col"]) for item in items}


def layout_accepted(blocks, exit_cell):
    """§12.2 step 5 acceptance: every block has an open neighbour, and the open cells are one
    region when the exit may be entered but not passed through (search from the first open
    cell in row-major order, which is expanded even if it is the exit)."""
    if any(all(n in blocks for n in neighbours(b)) for b in blocks):
        return False
    open_cells = [cell for cell in CELLS if cell not in blocks]
    start = open_cells[0]
    seen, stack = {start}, [start]
    while stack:
        cell = stack.pop()
        if cell == exit_cell and cell != start:
            continue
        for n in neighbours(cell):
            if n not in blocks and n not in seen:
                seen.add(n)
                stack.append(n)
    return len(seen) == len(open_cells)


def line_of_fire(player, stoppers):
    """§9.2: cells in the player's row or column with no enemy or block strictly between."""
    cells = set()
    for dr, dc in plain.DIRECTIONS:
        row, col = player[0] + dr, player[1] + dc
        while on_board(row, col):
            cells.add((row, col))
            if (row, col) in stoppers:
                break
            row, col = row + dr, col + dc
    return cells


def transmission_placements(s, carried):
    """(cell, cells allowed by §9.2) for each generated transmission in list order (the first
    `carried` transmissions are carried over): free cells out of the line of fire if there are
    any, else any free cell; each placement sees the ones before it."""
    player = (s["player_row"], s["player_col"])
    blocks = block_cells(s)
    enemies = piece_cells(s["enemies"])
    taken = piece_cells(s["transmissions"][:carried])
    placements = []
    for t in s["transmissions"][carried:]:
        free = {cell for cell in CELLS
                if cell != player and cell not in enemies | taken | blocks}
        allowed = (free - line_of_fire(player, enemies | blocks)) or free
        cell = (t["row"], t["col"])
        placements.append((cell, allowed))
        taken.add(cell)
    return placements


def check_initial_values(s):
    """§13.1: the values a reset sets before it generates stage 1."""
    assert (s["stage"], s["turn"], s["score"], s["hp"], s["attack_damage"]) == (1, 0, 0, 3, 1), \
        "§13.1: stage 1, turn 0, score 0, hp 3, attackDamage 1"
    assert s["owned"] == [] and s["history_size"] == 0 and s["enemies"] == [], \
        "§13.1: no owned programs, empty history, no enemies"
    assert (s["scheduled_interval"], s["next_scheduled_turn"]) == (12, 12), \
        "§13.1: scheduledTaskInterval 12 and nextScheduledTaskTurn 12"
    assert s["pending_siphon_transmissions"] == 0 and s["atk_plus_uses"] == 0, \
        "§13.1: pendingSiphonTransmissions 0, atkPlusUsesThisStage 0"
    assert not (s["show_activated"] or s["scheduled_tasks_disabled"] or s["step_active"]), \
        "§13.1: all flags false"
    assert (s["credits"], s["energy"], s["data_siphons"]) in BONUSES, \
        "§13.1: the starting bonus is 10 credits, 11 energy or 1 data siphon"


def check_carried_values(before, s, stage):
    """§12.1 and §12.2: what survives a completed stage and what the new stage resets."""
    assert s["hp"] == min(3, before["hp"] + 1), "§12.1 step 1: hp + 1, capped at 3"
    for field in ("credits", "energy", "score", "data_siphons", "attack_damage", "owned"):
        assert s[field] == before[field], f"§12.1: {field} carries over"
    assert (s["player_row"], s["player_col"]) == (before["player_row"], before["player_col"]), \
        "§12.2: the player stays on the old exit's corner"
    assert s["enemies"] == before["enemies"], "§12.2: all enemies carry over, every field"
    carried = len(before["transmissions"])
    assert s["transmissions"][:carried] == before["transmissions"], \
        "§12.2: all transmissions carry over, every field, first in the list"
    assert s["pending_siphon_transmissions"] == before["pending_siphon_transmissions"], \
        "§12.2: pendingSiphonTransmissions carries over"
    assert s["history_size"] == before["history_size"], "§12.2: the UNDO history carries over"
    assert s["turn"] == 0, "§12.2 step 1: turn = 0"
    assert s["scheduled_interval"] == 13 - stage, \
        "§12.1 step 2: scheduledTaskInterval = 13 - stage"
    assert s["next_scheduled_turn"] == s["scheduled_interval"], \
        "§12.2 step 1: nextScheduledTaskTurn = scheduledTaskInterval"
    assert not s["show_activated"] and not s["scheduled_tasks_disabled"], \
        "§12.2 step 1: showActivated and scheduledTasksDisabled cleared"
    assert not s["step_active"] and s["atk_plus_uses"] == 0, \
        "§12.2 step 1: stepActive cleared, atkPlusUsesThisStage = 0"


def check_cells(s, occupied):
    """§12.2 steps 2-6, cell by cell; `occupied` are the carried pieces' cells."""
    cells = s["cells"]
    player = (s["player_row"], s["player_col"])
    exit_cell = (s["exit_row"], s["exit_col"])
    assert player in CORNERS, "§12.2/§13.1: the player stands on a corner"
    assert exit_cell in CORNERS and exit_cell != player, \
        "§12.2 step 3: the exit is a corner other than the player's"
    for row, col in CELLS:
        content = cells["content"][row][col]
        where = f"cell {(row, col)}"
        assert not cells["siphoned"][row][col] and not cells["siphon_center"][row][col], \
            f"§12.2 step 2: {where} keeps a siphon flag"
        if (row, col) == exit_cell:
            assert content == C.EXIT, f"§12.2 step 3: the exit corner {where} holds {content}"
        elif (row, col) == player:
            assert content == C.EMPTY, f"§12.2 steps 2-4: the player's corner holds {content}"
        elif (row, col) in CORNERS:
            assert content == C.DATA_SIPHON, f"§12.2 step 4: corner {where} holds {content}"
        else:
            assert content == C.EMPTY or content in BLOCKS, \
                f"§12.2 step 5: {where} holds {content}, neither empty nor a block"
        if content in BLOCKS:
            assert (row, col) not in occupied, \
                f"§12.2 step 5: block on {where}, under a carried enemy or transmission"
        else:
            assert (cells["points"][row][col], cells["program"][row][col],
                    cells["spawn_count"][row][col]) == (0, C.NO_PROGRAM, 0), \
                f"§12.2 step 2: {where} has no block but keeps block data"
        credits, energy = cells["credits"][row][col], cells["energy"][row][col]
        if content in (C.EMPTY, C.DATA_SIPHON):
            assert min(credits, energy) == 0 and 1 <= credits + energy <= 3, \
                f"§12.2 step 6: {where} should hold one resource of 1-3, has {credits}/{energy}"
        else:
            assert credits == energy == 0, \
                f"§12.2 step 6: {where} (block or exit) holds credits {credits} energy {energy}"


def check_blocks(s):
    """§12.2 step 5: count, acceptance and contents of the blocks."""
    cells = s["cells"]
    blocks = block_cells(s)
    assert len(blocks) == 0 or 5 <= len(blocks) <= 11, f"§12.2 step 5: {len(blocks)} blocks"
    assert layout_accepted(blocks, (s["exit_row"], s["exit_col"])), \
        f"§12.2 step 5: the layout {sorted(blocks)} fails the acceptance test"
    programs = []
    for row, col in blocks:
        content = cells["content"][row][col]
        points, spawn = cells["points"][row][col], cells["spawn_count"][row][col]
        program = cells["program"][row][col]
        where = f"block {(row, col)}"
        holds_data = (content == C.DATA_BLOCK
                      or (content == C.QUESTION_BLOCK and program == C.NO_PROGRAM))
        if holds_data:
            assert program == C.NO_PROGRAM and 1 <= points <= 9, \
                f"§12.2 step 5: data {where} has points {points}, program {program}"
            assert spawn == points, f"§2.3/§12.2: data {where} has spawnCount {spawn} != {points}"
        else:
            assert 0 <= program < 23, f"§12.2 step 5: program {where} holds program {program}"
            assert spawn == SPAWN_COST[program], \
                f"§12.2 step 5: {where} with program {program} has spawnCount {spawn}"
            programs.append(program)
    assert len(programs) == len(set(programs)), \
        f"§12.2 step 5: programs repeat within the stage: {sorted(programs)}"


def check_new_transmissions(s, stage, carried):
    """§12.2 step 7: `stage` new transmissions after the carried ones, placed by §9.2 (the
    boards here always have free cells, so none may be dropped)."""
    new = s["transmissions"][carried:]
    assert len(new) == stage, f"§12.2 step 7: {len(new)} new transmissions on stage {stage}"
    for t in new:
        assert t["turns_remaining"] == 1 and not t["from_siphon"] and not t["from_scheduled"], \
            f"§9.2/§12.2 step 7: new transmission {t} (turnsRemaining 1, both flags false)"
        assert 0 <= t["enemy_type"] < 4, f"§9.2: enemy type {t['enemy_type']}"
    for cell, allowed in transmission_placements(s, carried):
        assert cell in allowed, \
            f"§9.2: a new transmission went to {cell}, allowed were {sorted(allowed)}"


def check_generated(before, after, stage):
    """Every deterministic rule about the freshly generated stage `stage` in `after`: §13.1 and
    the stage-1 generation when `before` is None, else §12.1/§12.2 from the completed stage
    `before` (its exit just reached)."""
    assert after["stage"] == stage, f"§12.1 step 2: stage {after['stage']}, expected {stage}"
    if before is None:
        check_initial_values(after)
        carried, occupied = 0, set()
    else:
        check_carried_values(before, after, stage)
        carried = len(before["transmissions"])
        occupied = piece_cells(before["enemies"]) | piece_cells(before["transmissions"])
    check_cells(after, occupied)
    check_blocks(after)
    check_new_transmissions(after, stage, carried)


def reached_by_move(s, direction):
    """The state when a move reaches the exit (§6.1): the player on the exit cell."""
    s = copy.deepcopy(s)
    s["player_row"] += plain.DIRECTIONS[direction][0]
    s["player_col"] += plain.DIRECTIONS[direction][1]
    assert s["cells"]["content"][s["player_row"]][s["player_col"]] == C.EXIT
    return s


def reached_by_warp(s, after):
    """The state when WARP lands on the exit (§7.5): costs paid (§7.1), the player on
    exitPosition, the target's kind removed from that cell. The target is random; both kinds
    land on the exit here, and which one the game chose is read from the list that shrank."""
    s = copy.deepcopy(s)
    s["credits"] -= 2
    s["energy"] -= 2
    exit_cell = (s["exit_row"], s["exit_col"])
    s["player_row"], s["player_col"] = exit_cell
    kind = "enemies" if len(after["enemies"]) < len(s["enemies"]) else "transmissions"
    s[kind] = [item for item in s[kind] if (item["row"], item["col"]) != exit_cell]
    return s


# ------------------------------------------------------------------------------------------
# Running the game.

def plain_batch(states):
    host = jax.device_get(states.replace(history=None))
    return [plain.to_plain(plain.unbatch(host, i)) for i in range(host.stage.shape[0])]


def play(variants, seed, keep=None):
    """Plays BATCH rows, row i being scenario `variants[i % len(variants)]` (a pair: scenario
    dict, list of actions, all lists of one length), the steps in lockstep with fixed keys.
    Returns (variant index per row, plain states per step starting with the start states, done
    per step, info per step: its flags, `components` (reward components by name) and
    `reward`); only the step numbers in `keep` (default all) are converted to plain states,
    the others are None."""
    index = [i % len(variants) for i in range(BATCH)]
    starts = jax.device_get([scenario.from_dict(d) for d, _ in variants])
    state = jax.tree_util.tree_map(lambda *xs: np.stack(xs)[index], *starts)
    keep = range(len(variants[0][1]) + 1) if keep is None else keep
    steps = [plain_batch(state) if 0 in keep else None]
    dones, infos = [], []
    for number, actions in enumerate(zip(*(acts for _, acts in variants))):
        keys = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), number), BATCH)
        state, _, reward, done, info = _STEP(keys, state, np.asarray([actions[v] for v in index]))
        components = info.pop("reward_components")
        info = {name: np.asarray(value) for name, value in info.items()}
        info["components"] = {name: np.asarray(value) for name, value in components.items()}
        steps.append(plain_batch(state) if number + 1 in keep else None)
        dones.append(np.asarray(done))
        infos.append({**info, "reward": np.asarray(reward)})
    return index, steps, dones, infos


def assert_valid(infos, row, numbers, context):
    """The actions of `row` at the step numbers `numbers` (0-based) were valid."""
    invalid = [number for number in numbers if infos[number]["invalid_action"][row]]
    assert not invalid, f"{context}: the actions of steps {invalid} were invalid"


def played_completion(stage):
    """Stage `stage`, player next to the exit (5,5) with everything §12.2 carries or resets set
    to a non-default value once `played_actions(stage)` have run up to the step onto the exit."""
    extra = [5 + (3 * stage + j) % 23 for j in range(8)]
    return {
        "player": {"row": 5, "col": 4, "hp": 1 + stage % 3, "credits": 14 + stage,
                   "energy": 15 + stage, "dataSiphons": 2, "score": 10 * stage,
                   "attackDamage": 3},
        "enemies": [{"type": "daemon", "row": 0, "col": 0, "hp": 2, "stunned": True},
                    {"type": "virus", "row": 1, "col": 1, "hp": 1, "spawnedFromSiphon": True},
                    {"type": "glitch", "row": 2, "col": 3, "hp": 2, "disabledTurns": 3},
                    {"type": "cryptog", "row": 0, "col": 3, "hp": 2,
                     "isFromScheduledTask": True}],
        "transmissions": [{"row": 0, "col": 5, "turnsRemaining": 6, "enemyType": "glitch"},
                          {"row": 2, "col": 0, "turnsRemaining": 1, "enemyType": "daemon"}],
        "blocks": [{"row": 4, "col": 4, "type": "data", "points": 3},
                   {"row": 5, "col": 3, "type": "question", "program": "HACK"},
                   {"row": 2, "col": 3, "type": "program", "program": "PUSH", "siphoned": True},
                   {"row": 3, "col": 1, "type": "data", "points": 7, "spawnCount": 2}],
        "resources": [{"row": 5, "col": 5, "credits": 2}, {"row": 3, "col": 3, "energy": 3},
                      {"row": 5, "col": 0, "dataSiphon": True}],
        "ownedPrograms": ["WAIT", "SHOW", "CALM", "ATK+", "STEP", "SIPH+", "UNDO"] + extra,
        "stage": stage, "turn": 11, "pendingSiphonTransmissions": 2,
        "scheduledTaskInterval": 5,
    }


def played_actions(stage):
    """WAIT: a full enemy turn (an UNDO snapshot, the scheduled task and the owed
    transmissions); then free programs, a siphon whose enemy turn STEP skips (its transmissions
    stay owed), STEP again on odd stages (active at the completion) or SIPH+ on even ones (then
    only §5 keeps the enemy turn away), the step onto the exit, and UNDO on the new stage."""
    return [WAIT, SHOW, CALM, ATK_PLUS, STEP, SIPHON, STEP if stage % 2 else SIPH_PLUS, RIGHT,
            UNDO]


ONTO_EXIT = 8  # index of the state after the completing step, the 8th action


def warp_completion(stage, with_transmission):
    """Stage `stage`, WARP's only targets on the exit (5,5): an enemy, and maybe a
    transmission with it."""
    transmissions = [{"row": 5, "col": 5, "turnsRemaining": 3, "enemyType": "virus",
                      "spawnedFromSiphon": True}] if with_transmission else []
    return {
        "player": {"row": 0, "col": 0, "hp": 1 + (stage + 1) % 3, "credits": 2 + stage,
                   "energy": 2 + 2 * stage % 5, "dataSiphons": stage % 3, "score": 5 * stage,
                   "attackDamage": 1 + stage},
        "enemies": [{"type": "cryptog", "row": 5, "col": 5, "hp": 2, "stunned": True}],
        "transmissions": transmissions,
        "blocks": [{"row": 2, "col": 2, "type": "question", "points": 4},
                   {"row": 3, "col": 4, "type": "program", "program": "DELAY", "siphoned": True}],
        "resources": [{"row": 1, "col": 0, "energy": 2}, {"row": 0, "col": 5, "dataSiphon": True}],
        "ownedPrograms": ["WARP", "SCORE", "ROW"], "stage": stage, "turn": 7,
        "showActivated": True, "scheduledTasksDisabled": True, "stepActive": stage % 2 == 1,
        "atkPlusUsesThisStage": 2, "pendingSiphonTransmissions": stage,
        "scheduledTaskInterval": 4, "nextScheduledTaskTurn": 23,
    }


def stage_eight_by_move(hp):
    """Stage 8, the player next to the exit with `hp`; the pieces cannot act for a while."""
    return {
        "player": {"row": 5, "col": 4, "hp": hp, "credits": 3 * hp, "energy": 7,
                   "score": 20 + hp, "dataSiphons": 1},
        "enemies": [{"type": "daemon", "row": 0, "col": 0, "hp": 3, "disabledTurns": 5}],
        "transmissions": [{"row": 1, "col": 2, "turnsRemaining": 9, "enemyType": "glitch"}],
        "blocks": [{"row": 3, "col": 3, "type": "data", "points": 6},
                   {"row": 2, "col": 4, "type": "question", "program": "COL"}],
        "resources": [{"row": 4, "col": 4, "credits": 1}, {"row": 0, "col": 5, "dataSiphon": True}],
        "ownedPrograms": ["SHOW"], "stage": 8, "turn": 6, "showActivated": hp == 2,
        "scheduledTasksDisabled": hp == 1, "stepActive": hp == 3,
        "pendingSiphonTransmissions": hp - 1, "atkPlusUsesThisStage": 1,
    }


def stage_eight_by_warp():
    """Stage 8, WARP's only target on the exit, nothing between (0,0) and (5,5)."""
    return {"player": {"row": 0, "col": 0, "hp": 2, "credits": 5, "energy": 3, "score": 4},
            "enemies": [{"type": "glitch", "row": 5, "col": 5, "hp": 1}],
            "ownedPrograms": ["WARP"], "stage": 8, "turn": 2}


def attacked_each_turn(stage):
    """A daemon next to the player hits once per WAIT: hp 3, 2, 1, then 0 and dead."""
    return {"player": {"row": 2, "col": 2, "energy": 4},
            "enemies": [{"type": "daemon", "row": 3, "col": 2, "hp": 3}],
            "ownedPrograms": ["WAIT"], "stage": stage}


ENDINGS = ([("move", hp) for hp in (1, 2, 3)] + [("warp", None)]
           + [("death", stage) for stage in range(1, 9)])


def ending_variant(kind, value):
    """The scenario and the four actions of an ENDINGS entry."""
    if kind == "move":
        return stage_eight_by_move(value), [RIGHT, LEFT, RIGHT, LEFT]
    if kind == "warp":
        return stage_eight_by_warp(), [WARP, LEFT, RIGHT, LEFT]
    return attacked_each_turn(value), [WAIT] * 4


# ------------------------------------------------------------------------------------------
# Fixtures: one reset batch and three step batches, each computed once.

@pytest.fixture(scope="module")
def resets():
    states, _ = _RESET(jax.random.split(jax.random.PRNGKey(2024), RESETS))
    return plain_batch(states)


@pytest.fixture(scope="module")
def played():
    return play([(played_completion(stage), played_actions(stage)) for stage in range(1, 8)],
                seed=1, keep={1, ONTO_EXIT - 1, ONTO_EXIT, ONTO_EXIT + 1})


@pytest.fixture(scope="module")
def warped():
    variants = [(warp_completion(stage, with_transmission), [WARP])
                for stage in range(1, 8) for with_transmission in (False, True)]
    return play(variants, seed=2)


@pytest.fixture(scope="module")
def endings():
    return play([ending_variant(*variant) for variant in ENDINGS], seed=3)


def completions(played, warped):
    """(state when the exit was reached, state after) of every stage completion."""
    steps = played[1]
    for row in range(BATCH):
        yield reached_by_move(steps[ONTO_EXIT - 1][row], RIGHT), steps[ONTO_EXIT][row]
    steps = warped[1]
    for row in range(BATCH):
        yield reached_by_warp(steps[0][row], steps[1][row]), steps[1][row]


@pytest.fixture(scope="module")
def generated(resets, played, warped):
    """Every generated stage: (board, number of carried transmissions, carried piece cells)."""
    boards = [(s, 0, set()) for s in resets]
    for before, board in completions(played, warped):
        occupied = piece_cells(before["enemies"]) | piece_cells(before["transmissions"])
        boards.append((board, len(before["transmissions"]), occupied))
    return boards


# ------------------------------------------------------------------------------------------
# §13.1 reset and §12 stage completion.

def test_reset_states_follow_the_rules(resets):
    for number, s in enumerate(resets):
        try:
            check_generated(None, s, 1)
        except AssertionError as error:
            raise AssertionError(f"reset {number}: {error}") from error


def assert_completion(stage, before, after, done, info, row):
    context = f"stage {stage} completion, row {row}"
    try:
        check_generated(before, after, stage + 1)
    except AssertionError as error:
        raise AssertionError(f"{context}: {error}") from error
    assert info["stage_complete"][row] and not info["won"][row], \
        f"{context}: §13.2 info must report a completed stage, not a win"
    assert not done[row], f"{context}: §13.2 completing stages 1-7 does not end the episode"
    assert info["components"]["stage"][row] == pytest.approx(STAGE_TABLE[stage - 1]), \
        f"{context}: §14.1 stage component"


@pytest.mark.parametrize("stage", range(1, 8))
def test_stepping_onto_the_exit_generates_the_next_stage(played, stage):
    index, steps, dones, infos = played
    rows = [row for row, v in enumerate(index) if v == stage - 1]
    for row in rows:
        assert_valid(infos, row, range(ONTO_EXIT), f"stage {stage}, row {row}")
        before = reached_by_move(steps[ONTO_EXIT - 1][row], RIGHT)
        # The setup reached the state it was built for, so every §12.2 reset is exercised.
        assert before["step_active"] == (stage % 2 == 1) and before["show_activated"]
        assert before["scheduled_tasks_disabled"] and before["atk_plus_uses"] == 1
        assert before["pending_siphon_transmissions"] == 7 and before["history_size"] == 1
        assert before["scheduled_interval"] == 4 and before["turn"] == 12
        assert len(before["transmissions"]) >= 3 and len(before["enemies"]) == 5
        assert_completion(stage, before, steps[ONTO_EXIT][row], dones[ONTO_EXIT - 1],
                          infos[ONTO_EXIT - 1], row)


@pytest.mark.parametrize("stage", range(1, 8))
def test_warp_onto_the_exit_generates_the_next_stage(warped, stage):
    index, steps, dones, infos = warped
    targets = Counter()
    for row, v in enumerate(index):
        if v // 2 == stage - 1:
            assert_valid(infos, row, [0], f"stage {stage}, row {row}")
            before = reached_by_warp(steps[0][row], steps[1][row])
            targets[len(before["enemies"]), len(before["transmissions"])] += 1
            assert_completion(stage, before, steps[1][row], dones[0], infos[0], row)
    # Both targets of the variant with a transmission on the exit were taken at least once.
    assert set(targets) == {(0, 0), (1, 0), (0, 1)}


def test_the_undo_history_crosses_the_stage(played):
    """§12.2 carries the history: UNDO on the new stage restores the snapshot of the old one's
    last full enemy turn (§7.15), keeping the new stage, exit, STEP, owed transmissions and
    scheduled-task timing, with the origin flags of the pieces cleared."""
    index, steps, _, infos = played
    after_wait, completed, undone = steps[1], steps[ONTO_EXIT], steps[ONTO_EXIT + 1]
    for row in range(BATCH):
        assert_valid(infos, row, range(ONTO_EXIT), f"stage {index[row] + 1}, row {row}")
        assert not infos[ONTO_EXIT]["invalid_action"][row], \
            f"row {row}: §12.2 UNDO is invalid on the new stage: the history was not carried"
        expected = copy.deepcopy(after_wait[row])
        for item in expected["enemies"] + expected["transmissions"]:
            item["from_siphon"] = item["from_scheduled"] = False
        for field in ("stage", "exit_row", "exit_col", "step_active",
                      "pending_siphon_transmissions", "scheduled_interval",
                      "next_scheduled_turn"):
            expected[field] = completed[row][field]
        expected["history_size"] = completed[row]["history_size"] - 1
        diffs = plain.state_diff(expected, undone[row])
        assert not diffs, f"stage {index[row] + 1}, row {row}: UNDO after the completion: {diffs}"


# ------------------------------------------------------------------------------------------
# §12.1 step 3, §12.3, §13.2: victory and death.

def victory_components(before, after, distance, kills, spent):
    """§14.1 for a winning step (stage 8 completed, no enemy turn); unlisted components are 0."""
    return {"step_penalty": -0.01,
            "stage": STAGE_TABLE[6],  # the stage stays 8: table[stage_after - 1 - 1]
            "kills": 0.3 * kills, "distance": 0.05 * distance,
            "victory": 500 + 100 * after["score"], "resourceGain": -0.05 * spent,
            "resourceHolding": 0.01 * (after["credits"] + after["energy"]),
            "hpRecovery": after["hp"] - before["hp"]}


def rows_of(index, kind):
    return [row for row, v in enumerate(index) if ENDINGS[v][0] == kind]


def test_completing_stage_eight_wins_without_generating(endings):
    index, steps, dones, infos = endings
    for row in rows_of(index, "move") + rows_of(index, "warp"):
        assert_valid(infos, row, [0], f"row {row}")
        start, after = steps[0][row], steps[1][row]
        if ENDINGS[index[row]][0] == "move":
            reached = reached_by_move(start, RIGHT)
            distance, kills, spent = 1, 0, 0
        else:
            reached = reached_by_warp(start, after)
            distance, kills, spent = 10, 1, 4  # (0,0) to (5,5) on an empty board; WARP's cost
        expected = {**reached, "hp": min(3, reached["hp"] + 1)}
        diffs = plain.state_diff(expected, after)
        assert not diffs, f"row {row}: §12.1 step 3 the win changes only hp: {diffs}"
        assert dones[0][row] and infos[0]["won"][row] and infos[0]["stage_complete"][row], \
            f"row {row}: §12.3/§13.2 completing stage 8 wins and ends the episode"
        assert not infos[0]["death"][row]
        expected_components = victory_components(start, after, distance, kills, spent)
        components = {name: float(value[row]) for name, value in infos[0]["components"].items()}
        assert components == pytest.approx({name: expected_components.get(name, 0.0)
                                            for name in components}, rel=1e-6, abs=1e-5), \
            f"row {row}: §14.1 components of the winning step"
        assert infos[0]["reward"][row] == pytest.approx(sum(components.values()), rel=1e-6)


def test_a_won_game_is_not_reset_by_step(endings):
    """`step` has no auto-reset: stepping off the exit continues the won stage-8 game (done
    false, §13.2), and stepping back on wins again."""
    index, steps, dones, infos = endings
    for row in rows_of(index, "move") + rows_of(index, "warp"):
        assert_valid(infos, row, range(3), f"row {row}")
        won, off, again = steps[1][row], steps[2][row], steps[3][row]
        assert (off["stage"], off["player_row"], off["player_col"]) == (8, 5, 4)
        assert off["cells"] == won["cells"], f"row {row}: the board of the won game stays"
        assert not dones[1][row] and not infos[1]["won"][row], \
            f"row {row}: §13.2 a step that neither wins nor kills is not done"
        assert (again["player_row"], again["player_col"]) == (5, 5) and again["stage"] == 8
        assert dones[2][row] and infos[2]["won"][row], f"row {row}: §12.1 winning again"
        assert infos[2]["components"]["victory"][row] == pytest.approx(500 + 100 * again["score"])


def test_death_ends_the_episode_and_stays_dead(endings):
    index, steps, dones, infos = endings
    for row in rows_of(index, "death"):
        stage = ENDINGS[index[row]][1]
        context = f"stage {stage}, row {row}"
        assert_valid(infos, row, range(4), context)
        hps = [steps[number][row]["hp"] for number in range(1, 5)]
        assert hps == [2, 1, 0, 0], f"{context}: one attack per enemy turn, got hp {hps}"
        assert [bool(d[row]) for d in dones] == [False, False, True, True], \
            f"{context}: §12.3/§13.2 done exactly when hp is 0 after the step"
        assert [bool(info["death"][row]) for info in infos] == [False, False, True, True], \
            f"{context}: §13.2 info reports death when hp reached 0"
        assert not any(info["won"][row] or info["stage_complete"][row] for info in infos)
        penalty = -0.5 * sum(STAGE_TABLE[:stage - 1])
        assert infos[2]["components"]["death"][row] == pytest.approx(penalty), \
            f"{context}: §14.1 death penalty"
        # The step after death goes on from the dead state (no auto-reset).
        last = steps[4][row]
        assert (last["stage"], last["turn"], last["player_row"], last["player_col"]) == \
            (stage, 4, 2, 2), f"{context}: the dead game is not reset"


# ------------------------------------------------------------------------------------------
# Distributions of the random choices.

def assert_fits(observed, probabilities, rule):
    """Pearson chi-square of category counts against the rule's probabilities."""
    observed = np.asarray(observed, float)
    expected = np.asarray(probabilities, float) * observed.sum()
    assert_chi_square(observed, expected, rule)


def assert_chi_square(observed, expected, rule):
    statistic = float(((observed - expected) ** 2 / expected).sum())
    limit = stats.chi2.isf(ALPHA, len(observed) - 1)
    assert statistic < limit, (f"{rule}: chi-square {statistic:.1f} >= {limit:.1f}; observed "
                               f"{observed.astype(int).tolist()}, expected "
                               f"{np.round(expected, 1).tolist()}")


def test_reset_corner_exit_and_bonus_are_uniform(resets):
    """§13.1: player corner uniform over 4, exit uniform over the other 3 (12 pairs), bonus
    uniform over 3."""
    pairs = Counter(((s["player_row"], s["player_col"]), (s["exit_row"], s["exit_col"]))
                    for s in resets)
    expected_pairs = [(p, e) for p in CORNERS for e in CORNERS if p != e]
    assert set(pairs) <= set(expected_pairs)
    assert_fits([pairs[p] for p in expected_pairs], [1 / 12] * 12,
                "§13.1/§12.2 step 3 (player corner, exit corner)")
    bonus = Counter((s["credits"], s["energy"], s["data_siphons"]) for s in resets)
    assert_fits([bonus[b] for b in BONUSES], [1 / 3] * 3, "§13.1 starting bonus")


def test_exit_corner_is_uniform_after_a_completion(played, warped):
    exits = Counter()
    for (_, steps, _, _), after in ((played, ONTO_EXIT), (warped, 1)):
        exits.update((s["exit_row"], s["exit_col"]) for s in steps[after])
    others = [(0, 0), (0, 5), (5, 0)]  # the player stands on (5,5)
    assert set(exits) <= set(others)
    assert_fits([exits[c] for c in others], [1 / 3] * 3, "§12.2 step 3 exit corner")


def test_block_count_is_uniform(generated):
    """§12.2 step 5: N uniform in 5..11, on the boards whose carried pieces (if any) stand on
    corners only: resets and WARP completions. All 100 attempts fail only for large N (about
    1e-4 for N = 11 on such a board), so a board has no blocks with probability about 2e-5:
    more than 4 of them has probability < 1e-7."""
    counts = Counter(len(block_cells(board)) for board, _, occupied in generated
                     if occupied <= set(CORNERS))
    assert sum(counts.values()) >= RESETS
    assert counts[0] <= 4, f"§12.2 step 5: {counts[0]} boards without blocks"
    assert_fits([counts[n] for n in range(5, 12)], [1 / 7] * 7, "§12.2 step 5 block count")


def reference_layout(rng, available, count, exit_cell):
    """§12.2 step 5 conditioned on acceptance: attempts of `count` distinct uniform cells of
    `available` until one passes `layout_accepted`."""
    for _ in range(100_000):
        blocks = set(rng.sample(available, count))
        if layout_accepted(blocks, exit_cell):
            return blocks
    raise AssertionError(f"no accepted layout of {count} blocks in {available}")


def test_block_cells_match_the_rules_sampler(generated):
    """Per-cell block counts of the game's boards and of twice as many reference layouts with
    the same block counts, exits and carried pieces: one distribution (chi-square homogeneity)."""
    rng = random.Random(7)
    game_counts, reference_counts = Counter(), Counter()
    for board, _, occupied in generated:
        blocks = block_cells(board)
        if not blocks:
            continue
        game_counts.update(blocks)
        available = [cell for cell in CELLS if cell not in CORNERS and cell not in occupied]
        for _ in range(2):
            reference_counts.update(reference_layout(rng, available, len(blocks),
                                                     (board["exit_row"], board["exit_col"])))
    cells = [cell for cell in CELLS if cell not in CORNERS]
    assert all(game_counts[cell] > 0 for cell in cells), \
        f"§12.2 step 5: cells never used: {[c for c in cells if not game_counts[c]]}"
    table = np.array([[game_counts[c] for c in cells], [reference_counts[c] for c in cells]])
    statistic, p_value, _, _ = stats.chi2_contingency(table, correction=False)
    assert p_value > ALPHA, (f"§12.2 step 5 block cells: homogeneity chi-square {statistic:.1f}"
                             f" (p = {p_value:.1e}); game {table[0].tolist()}, reference "
                             f"{table[1].tolist()}")


def generated_blocks(generated):
    for board, _, _ in generated:
        cells = board["cells"]
        for row, col in block_cells(board):
            yield (board, cells["content"][row][col], cells["points"][row][col],
                   cells["program"][row][col])


def test_block_kind_and_points(generated):
    """§12.2 step 5: each block independently a question block with probability 0.1, data or
    program content with 0.5 each; data points uniform in 1..9."""
    kinds, points = Counter(), Counter()
    for _, content, point, program in generated_blocks(generated):
        kinds[content == C.QUESTION_BLOCK, program != C.NO_PROGRAM] += 1
        if program == C.NO_PROGRAM:
            points[point] += 1
    categories = [(False, False), (False, True), (True, False), (True, True)]
    assert_fits([kinds[k] for k in categories], [0.45, 0.45, 0.05, 0.05],
                "§12.2 step 5 (question?, program content?)")
    assert_fits([points[p] for p in range(1, 10)], [1 / 9] * 9, "§12.2 step 5 data points")


def test_program_choice_is_uniform_whatever_is_owned(generated):
    """§12.2 step 5: programs drawn uniformly among those not yet on the board, owned or not:
    each of the 23 is equally frequent, on resets (nothing owned) and after completions (the
    player owns several programs)."""
    for owning, label in ((False, "resets"), (True, "completions")):
        used = Counter(program for board, _, _, program in generated_blocks(generated)
                       if program != C.NO_PROGRAM and bool(board["owned"]) == owning)
        assert_fits([used[p] for p in range(23)], [1 / 23] * 23,
                    f"§12.2 step 5 program choice ({label})")


def test_resources(generated):
    """§12.2 step 6: amount 1, 2, 3 with 0.45, 0.45, 0.10, credits or energy with 1/2 each,
    on every open cell alike: over all of them, and over the corners and the player's cell."""
    categories = [(kind, amount) for kind in ("credits", "energy") for amount in (1, 2, 3)]
    probabilities = [0.225, 0.225, 0.05] * 2
    everywhere, corners = Counter(), Counter()
    for board, _, _ in generated:
        cells = board["cells"]
        for row, col in CELLS:
            if cells["content"][row][col] in (C.EMPTY, C.DATA_SIPHON):
                kind = "credits" if cells["credits"][row][col] else "energy"
                category = (kind, cells[kind][row][col])
                everywhere[category] += 1
                if (row, col) in CORNERS:
                    corners[category] += 1
    assert_fits([everywhere[c] for c in categories], probabilities, "§12.2 step 6 resources")
    assert_fits([corners[c] for c in categories], probabilities,
                "§12.2 step 6 resources on the data-siphon corners and the player's cell")


def test_new_transmissions_are_uniform(generated):
    """§9.2: each new transmission's type uniform over 4 and its cell uniform over the cells
    allowed at its placement (expected count of a cell: sum of 1/|allowed| where allowed)."""
    types = Counter()
    observed, expected = Counter(), Counter()
    for board, carried, _ in generated:
        types.update(t["enemy_type"] for t in board["transmissions"][carried:])
        for cell, allowed in transmission_placements(board, carried):
            observed[cell] += 1
            for other in allowed:
                expected[other] += 1 / len(allowed)
    assert_fits([types[k] for k in range(4)], [1 / 4] * 4, "§9.2 transmission enemy type")
    cells = sorted(expected)
    assert_chi_square(np.array([observed[c] for c in cells], float),
                      np.array([expected[c] for c in cells]), "§9.2 transmission cell")
