"""Differential test of the siphon (rules §6.2, §10, §14.4) and the reward (§14.1, §14.2).

An independent pure-Python reading of the rules, over the plain state of `plain.to_plain`, is
compared with the JAX game on random states:

- siphon: `compiled.RESOLVE(key, state, 4)` (the siphon alone, before the enemy turn) must give
  exactly the reference's whole plain state and the reference siphon quality (§14.4);
- reward: for random valid actions of all 28 kinds, every one of the 15 components of
  `compiled.STEP`'s `info["reward_components"]` and the total are recomputed from the state
  before, the action, the game's state after (taken as given: other tests check the enemy turn,
  programs and generation) and the facts the rules define (kills, exit reached, pickup, whether
  an enemy turn follows), which the reference derives itself. Invalid actions must pay 0.0.

Randomness: states come from fixed-seed `random.Random` scenario dicts (scenario.from_dict) and
from `test_fuzz.random_scenario` (vmapped and jitted once, fixed keys), walked by a few random
steps. Where a rule is random (WARP's target, POLY's new types) the game's choice is read from
the state after and checked to be a legal choice (WARP) or used as given (POLY's deaths).
"""

import copy
import random
from collections import Counter

import jax
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import scenario

import compiled
import plain
from plain import STAGE_TABLE
from test_fuzz import random_scenario
from test_pathfinding import reference_distance

KEY = jax.random.PRNGKey(0)
ACTION_RESET = C.FIRST_PROGRAM_ACTION + C.RESET
ACTION_WARP = C.FIRST_PROGRAM_ACTION + C.WARP
ACTION_UNDO = C.FIRST_PROGRAM_ACTION + C.UNDO
GENERATED_STATES = 32


def on_board(row, col):
    return 0 <= row < 6 and 0 <= col < 6


def cross(row, col):
    """§1: centre, up, down, left, right, in-bounds only."""
    cells = [(row, col)] + [(row + dr, col + dc) for dr, dc in plain.DIRECTIONS]
    return [cell for cell in cells if on_board(*cell)]


def ring_of_eight(row, col):
    """§1: row offset -1, 0, +1 (outer), col offset -1, 0, +1 (inner), centre skipped."""
    return [(row + dr, col + dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1)
            if (dr, dc) != (0, 0) and on_board(row + dr, col + dc)]


def block_cells(s):
    return {(r, c) for r in range(6) for c in range(6) if plain.block_at(s, r, c)}


def held_by_block(s, row, col):
    """("data", points) or ("program", P) for a block cell, question blocks by their hidden
    content (§2.3); None for a cell without a block."""
    cells = s["cells"]
    content = cells["content"][row][col]
    if content == C.DATA_BLOCK:
        return "data", cells["points"][row][col]
    if content == C.PROGRAM_BLOCK:
        return "program", cells["program"][row][col]
    if content == C.QUESTION_BLOCK:
        program = cells["program"][row][col]
        return ("program", program) if program >= 0 else ("data", cells["points"][row][col])
    return None


def pieces_on(items, cell):
    return [item for item in items if (item["row"], item["col"]) == cell]


# ---------------------------------------------------------------------------------------------
# §6.2 siphon and §14.4 siphon quality


def reference_siphon(s):
    """The plain state right after the siphon action (§6.2 steps 2-5; no enemy turn)."""
    s = copy.deepcopy(s)
    cells = s["cells"]
    owned = set(s["owned"])
    centre = (s["player_row"], s["player_col"])
    cells["siphon_center"][centre[0]][centre[1]] = True
    for row, col in cross(*centre):
        if cells["siphoned"][row][col]:
            continue
        held = held_by_block(s, row, col)
        if held is None:
            s["credits"] += cells["credits"][row][col]
            s["energy"] += cells["energy"][row][col]
            cells["credits"][row][col] = cells["energy"][row][col] = 0
        else:
            kind, value = held
            if kind == "data":
                s["score"] += value
                cells["content"][row][col] = C.DATA_BLOCK
            else:
                owned.add(value)
                cells["content"][row][col] = C.PROGRAM_BLOCK
            s["pending_siphon_transmissions"] += cells["spawn_count"][row][col]
            cells["spawn_count"][row][col] = 0
        cells["siphoned"][row][col] = True
    s["owned"] = sorted(owned)
    s["data_siphons"] -= 1
    s["scheduled_interval"] = max(4, s["scheduled_interval"] - 1)
    s["next_scheduled_turn"] += 5
    return s


def siphon_yield(s, row, col):
    """§14.4 yield of position (row, col): (sorted data values, unowned programs, credits,
    energy); empty when the position itself has a block."""
    values, programs, credits, energy = [], set(), 0, 0
    if plain.block_at(s, row, col):
        return values, programs, credits, energy
    cells = s["cells"]
    for r, c in cross(row, col):
        if cells["siphoned"][r][c]:
            continue
        held = held_by_block(s, r, c)
        if held is None:
            credits += cells["credits"][r][c]
            energy += cells["energy"][r][c]
        elif held[0] == "data":
            values.append(held[1])
        elif held[1] not in s["owned"]:
            programs.add(held[1])
    return sorted(values), programs, credits, energy


def reference_siphon_quality(s):
    """§14.4: (component value, whether the yield held blocks, number of dominating cells)."""
    row, col = s["player_row"], s["player_col"]
    values, programs, credits, energy = siphon_yield(s, row, col)
    open_cells = [(r, c) for r in range(6) for c in range(6) if not plain.block_at(s, r, c)]
    with_blocks = bool(values or programs)
    if with_blocks:
        unsiphoned = [(r, c) for r, c in cross(row, col)
                      if plain.block_at(s, r, c) and not s["cells"]["siphoned"][r][c]]
        candidates = [x for x in open_cells
                      if all(abs(x[0] - b[0]) + abs(x[1] - b[1]) == 1 for b in unsiphoned)]
    else:
        candidates = open_cells
    dominating = []
    for x in candidates:
        x_values, x_programs, x_credits, x_energy = siphon_yield(s, *x)
        if (x_values == values and x_programs == programs and x_credits >= credits
                and x_energy >= energy and (x_credits > credits or x_energy > energy)):
            dominating.append((x_credits, x_energy))
    if not dominating:
        return 0.0, with_blocks, 0
    missed_credits = max(c for c, _ in dominating) - credits
    missed_energy = max(e for _, e in dominating) - energy
    return -0.5 * (0.05 * missed_credits + 0.05 * missed_energy), with_blocks, len(dominating)


# ---------------------------------------------------------------------------------------------
# Facts of §5 step 2 that the reward needs: exit reached, enemy turn follows, kills, pickup.


def line_of_fire_target(s, action):
    """§6.1: ("transmission" | "enemy", piece) or None."""
    dr, dc = plain.DIRECTIONS[action]
    row, col = s["player_row"] + dr, s["player_col"] + dc
    while on_board(row, col):
        transmissions = pieces_on(s["transmissions"], (row, col))
        if transmissions:
            return "transmission", transmissions[0]
        enemies = pieces_on(s["enemies"], (row, col))
        if enemies:
            return "enemy", enemies[0]
        if plain.block_at(s, row, col):
            return None
        row, col = row + dr, col + dc
    return None


def move_fails(s, action):
    """§4.4 for a direction: no target and the next cell is off the board or a block."""
    dr, dc = plain.DIRECTIONS[action]
    row, col = s["player_row"] + dr, s["player_col"] + dc
    return line_of_fire_target(s, action) is None and (
        not on_board(row, col) or plain.block_at(s, row, col))


def kills_removing_the_dead(enemies, damage_of):
    """Kills of "remove the dead" (§7) after each enemy took damage_of(enemy)."""
    return sum(1 for e in enemies
               if e["hp"] - damage_of(e) <= 0 and not e["from_scheduled"])


def earliest_unscheduled(items):
    return int(bool(items) and not items[0]["from_scheduled"])


def warp_facts(before, after):
    """§7.5 with the game's target: the landing cell must hold an enemy or a transmission;
    which kind was taken is read from what is left on the cell. Returns (kills, exit reached)."""
    landing = (after["player_row"], after["player_col"])
    enemies_before = pieces_on(before["enemies"], landing)
    transmissions_before = pieces_on(before["transmissions"], landing)
    enemies_left = pieces_on(after["enemies"], landing)
    transmissions_left = pieces_on(after["transmissions"], landing)
    legal = []
    if enemies_before and not enemies_left and len(transmissions_left) == len(
            transmissions_before):
        legal.append(earliest_unscheduled(enemies_before))
    if transmissions_before and not transmissions_left and len(enemies_left) == len(
            enemies_before):
        legal.append(earliest_unscheduled(transmissions_before))
    assert legal, f"WARP landed on {landing}, which held no removable target"
    return legal[0], landing == (before["exit_row"], before["exit_col"])


def program_kills(before, after, program):
    """Kills of a free program or WAIT (§7), from the state before (POLY: the game's types)."""
    enemies = before["enemies"]
    player = (before["player_row"], before["player_col"])
    damage = before["attack_damage"]
    if program == C.CRASH:
        return sum(earliest_unscheduled(pieces_on(enemies, cell))
                   + earliest_unscheduled(pieces_on(before["transmissions"], cell))
                   for cell in ring_of_eight(*player))
    if program == C.DEBUG:
        return kills_removing_the_dead(
            enemies, lambda e: damage if plain.block_at(before, e["row"], e["col"]) else 0)
    if program == C.ROW:
        return kills_removing_the_dead(enemies, lambda e: damage * (e["row"] == player[0]))
    if program == C.COL:
        return kills_removing_the_dead(enemies, lambda e: damage * (e["col"] == player[1]))
    if program == C.ANTI_V:
        return kills_removing_the_dead(enemies, lambda e: int(e["kind"] == C.VIRUS))
    if program == C.HACK:
        siphoned = before["cells"]["siphoned"]
        return kills_removing_the_dead(
            enemies, lambda e: damage if siphoned[e["row"]][e["col"]] else 0)
    if program == C.D_BOM:
        daemons = [e for e in enemies if e["kind"] == C.DAEMON]
        target = min(daemons, key=lambda e: abs(e["row"] - player[0]) + abs(e["col"] - player[1]))
        ring = ring_of_eight(target["row"], target["col"])
        rest = [e for e in enemies if e is not target]
        return (int(not target["from_scheduled"])
                + kills_removing_the_dead(rest, lambda e: int((e["row"], e["col"]) in ring)))
    if program == C.POLY:
        # New types are random: the dead are the enemies missing from the game's result.
        unscheduled = lambda items: sum(not e["from_scheduled"] for e in items)
        return unscheduled(enemies) - unscheduled(after["enemies"])
    return 0  # PUSH, PULL, UNDO, WAIT and the programs that touch no enemy


def action_facts(before, action, after):
    """(exit reached, enemy turn follows, kills, data siphon collected) per §5, §6, §7."""
    if action < C.ACTION_SIPHON:
        target = line_of_fire_target(before, action)
        if target is not None:
            kind, piece = target
            dead = kind == "transmission" or piece["hp"] - before["attack_damage"] <= 0
            return False, True, int(dead and not piece["from_scheduled"]), False
        dr, dc = plain.DIRECTIONS[action]
        content = before["cells"]["content"][before["player_row"] + dr][before["player_col"] + dc]
        exit_reached = content == C.EXIT  # the exit *cell* (§7.15), not exitPosition
        return exit_reached, not exit_reached, 0, content == C.DATA_SIPHON
    if action == C.ACTION_SIPHON:
        return False, True, 0, False
    if action == ACTION_WARP:
        kills, exit_reached = warp_facts(before, after)
        return exit_reached, False, kills, False
    program = action - C.FIRST_PROGRAM_ACTION
    return False, action == C.ACTION_WAIT, program_kills(before, after, program), False


def path_distance(s, row, col):
    return reference_distance((row, col), (s["exit_row"], s["exit_col"]), block_cells(s))


def reference_reward(before, action, after):
    """The 15 components of §14.1 (in REWARD_COMPONENTS order) and the facts used."""
    exit_reached, turn_follows, kills, collected = action_facts(before, action, after)
    won = exit_reached and before["stage"] == C.MAX_STAGE
    hp_before, hp_after = before["hp"], after["hp"]
    distance_before = path_distance(before, before["player_row"], before["player_col"])
    if hp_after == 0:
        gained = 0
    elif exit_reached:
        gained = distance_before
    else:
        gained = distance_before - path_distance(after, after["player_row"], after["player_col"])
    adjacent_from_siphon = any(
        e["from_siphon"] and abs(e["row"] - after["player_row"])
        + abs(e["col"] - after["player_col"]) == 1 for e in after["enemies"])
    quality = reference_siphon_quality(before)[0] if action == C.ACTION_SIPHON else 0.0
    components = {
        "step_penalty": -0.01,
        # c = stage_after - 1; table[c - 1] (victory leaves the stage at 8, so it pays 64).
        "stage": STAGE_TABLE[after["stage"] - 2] if exit_reached else 0.0,
        "score": 0.5 * (after["score"] - before["score"]),
        "kills": 0.3 * kills,
        "dataSiphon": 1.0 if collected else 0.0,
        "distance": 0.05 * max(0, gained),
        "victory": 500 + 100 * after["score"] if won else 0.0,
        "death": -0.5 * sum(STAGE_TABLE[:after["stage"] - 1]) if hp_after == 0 else 0.0,
        "resourceGain": 0.05 * (after["credits"] - before["credits"])
        + 0.05 * (after["energy"] - before["energy"]),
        "resourceHolding": 0.01 * (after["credits"] + after["energy"]) if exit_reached else 0.0,
        "damagePenalty": -1.0 * max(0, hp_before - hp_after),
        "hpRecovery": 1.0 * max(0, hp_after - hp_before),
        "siphonQuality": quality,
        "programWaste": -0.3 if action == ACTION_RESET and hp_before == 2 else 0.0,
        "siphonDeathPenalty": -10.0 if turn_follows and hp_after == 0 and adjacent_from_siphon
        else 0.0,
    }
    facts = {"exit_reached": exit_reached, "won": won, "kills": kills, "collected": collected}
    return components, facts


# ---------------------------------------------------------------------------------------------
# Random states


def random_dict(rng, *, player=None, stage=None, hp=None, siphons=None, all_programs=False,
                adjacent_enemies=0, player_on_block=False, enemy_on_exit=False, crowd=False,
                enemy_on_block=False):
    """A random scenario dict with every kind of block, resources, pieces and hidden counters;
    `crowd` puts blocks on some of the player's neighbours."""
    exit_cell = (5, 5)
    cells = [(r, c) for r in range(6) for c in range(6)]
    if player is None:
        player = rng.choice([x for x in cells if x != exit_cell])
    near = [x for x in cross(*player)[1:] if x != exit_cell] if crowd else []
    near = rng.sample(near, rng.randint(1, len(near))) if near else []
    others = [x for x in cells if x not in (player, exit_cell, *near)]
    rng.shuffle(others)
    block_at = near + others[:rng.randint(2, 10)] + ([player] if player_on_block else [])
    blocks = []
    for row, col in block_at:
        kind = rng.choice(("data", "program", "question"))
        block = {"row": row, "col": col, "type": kind}
        if kind == "program" or (kind == "question" and rng.random() < 0.5):
            block["program"] = rng.randrange(C.FIRST_PROGRAM_ACTION, C.NUM_ACTIONS)
        else:
            block["points"] = rng.randint(1, 9)
        if rng.random() < 0.3:
            block["spawnCount"] = rng.randint(0, 9)
        if kind != "question" and rng.random() < 0.25:
            block["siphoned"] = True
        blocks.append(block)
    open_cells = [x for x in cells if x not in block_at and x != exit_cell]
    question_cells = {(b["row"], b["col"]) for b in blocks if b["type"] == "question"}
    resources = [{"row": r, "col": c, rng.choice(("credits", "energy")): rng.randint(1, 3)}
                 for r, c in cells if rng.random() < 0.5]
    resources += [{"row": r, "col": c, "dataSiphon": True}
                  for r, c in rng.sample(open_cells, rng.randint(0, 2))]
    siphoned_cells = [{"row": r, "col": c} for r, c in rng.sample(cells, rng.randint(0, 3))
                      if (r, c) not in question_cells]

    def enemy(row, col):
        kind = rng.randrange(4)
        return {"type": C.ENEMY_TYPE_NAMES[kind], "row": row, "col": col,
                "hp": rng.randint(0 if rng.random() < 0.1 else 1, int(C.ENEMY_MAX_HP[kind])),
                "stunned": rng.random() < 0.2, "disabledTurns": int(rng.random() < 0.2),
                "spawnedFromSiphon": rng.random() < 0.4,
                "isFromScheduledTask": rng.random() < 0.25}

    neighbours = cross(*player)[1:]
    rng.shuffle(neighbours)
    enemies = [enemy(*x) for x in neighbours[:adjacent_enemies]]
    enemies += [enemy(*rng.choice(cells)) for _ in range(rng.randint(0, 4))]
    if enemy_on_exit:
        enemies.append(enemy(*exit_cell))
    if enemy_on_block:
        enemies.append(enemy(*rng.choice(block_at)))
    transmissions = [{"row": r, "col": c, "turnsRemaining": rng.randint(1, 3),
                      "enemyType": rng.choice(C.ENEMY_TYPE_NAMES),
                      "spawnedFromSiphon": rng.random() < 0.3,
                      "isFromScheduledTask": rng.random() < 0.3}
                     for r, c in [rng.choice(cells) for _ in range(rng.randint(0, 3))]]
    owned = [k for k in range(C.NUM_PROGRAMS) if all_programs or rng.random() < 0.5]
    return {
        "player": {"row": player[0], "col": player[1],
                   "hp": hp if hp is not None else rng.randint(1, 3),
                   "credits": rng.randint(0, 30), "energy": rng.randint(0, 30),
                   "dataSiphons": siphons if siphons is not None else rng.randint(0, 2),
                   "score": rng.randint(0, 40), "attackDamage": rng.randint(1, 3)},
        "enemies": enemies, "transmissions": transmissions, "blocks": blocks,
        "resources": resources, "siphonedCells": siphoned_cells,
        "ownedPrograms": [C.PROGRAM_NAMES[k] for k in owned],
        "stage": stage if stage is not None else rng.randint(1, 8),
        "turn": rng.randint(0, 15), "showActivated": rng.random() < 0.2,
        "scheduledTasksDisabled": rng.random() < 0.2,
        "scheduledTaskInterval": rng.randint(4, 13),
        "nextScheduledTaskTurn": rng.randint(0, 20),
        "pendingSiphonTransmissions": rng.randint(0, 5), "stepActive": rng.random() < 0.2,
        "atkPlusUsesThisStage": rng.randint(0, 2),
    }


@pytest.fixture(scope="module")
def generated_states():
    """`random_scenario` states (generated boards, an UNDO snapshot half the time)."""
    # Batches of 8, the shape test_batching compiles, so the persistent cache can share it.
    make_batch = jax.jit(jax.vmap(random_scenario))
    keys = jax.random.split(jax.random.PRNGKey(21), GENERATED_STATES).reshape(-1, 8, 2)
    batches = [make_batch(batch_keys) for batch_keys in keys]
    return [plain.unbatch(batch, i) for batch in batches for i in range(8)]


# ---------------------------------------------------------------------------------------------
# Siphon


def siphon_cases(generated_states):
    """(label, state): random dicts (some with the player on a block), and generated boards
    with the player moved to a random cell without a block and given a charge."""
    rng = random.Random(62)
    for i in range(260):
        d = random_dict(rng, siphons=rng.randint(1, 3), player_on_block=i % 13 == 0,
                        crowd=i % 3 != 0)
        yield f"dict case {i}: {d}", scenario.from_dict(d)
    for i, state in enumerate(generated_states):
        d = scenario.to_dict(state)
        open_cells = [(r, c) for r in range(6) for c in range(6)
                      if not any((b["row"], b["col"]) == (r, c) for b in d["blocks"])]
        d["player"]["row"], d["player"]["col"] = rng.choice(open_cells)
        d["player"]["dataSiphons"] = 1
        yield f"generated case {i}: {d}", scenario.from_dict(d)


def test_siphon_matches_the_rules(generated_states):
    seen = Counter()
    for label, state in siphon_cases(generated_states):
        before = plain.to_plain(state)
        after, outcome = compiled.RESOLVE(KEY, state, C.ACTION_SIPHON)
        expected = reference_siphon(before)
        diffs = plain.state_diff(expected, plain.to_plain(after))
        assert not diffs, f"{label}\nsiphon: " + "\n".join(diffs)
        assert not bool(outcome.failed) and bool(outcome.enemy_turn_follows), label
        assert not bool(outcome.exit_reached) and int(outcome.kills) == 0, label
        quality, with_blocks, dominating = reference_siphon_quality(before)
        assert float(outcome.siphon_quality) == pytest.approx(quality, abs=1e-5), (
            f"{label}\nsiphon quality: reference {quality}, game {float(outcome.siphon_quality)}")

        # What the cases exercised.
        row, col = before["player_row"], before["player_col"]
        seen["player on a block"] += plain.block_at(before, row, col)
        seen[f"quality {'non-zero' if quality else 'zero'}, "
             f"{'blocks' if with_blocks else 'no blocks'} in the yield"] += 1
        seen["dominated by several cells"] += dominating > 1
        for r, c in cross(row, col):
            if before["cells"]["siphoned"][r][c]:
                seen["already siphoned cell in the cross"] += 1
                continue
            content = before["cells"]["content"][r][c]
            held = held_by_block(before, r, c)
            if held is None:
                seen["resource collected"] += bool(before["cells"]["credits"][r][c]
                                                   or before["cells"]["energy"][r][c])
                continue
            owned = held[0] == "program" and held[1] in before["owned"]
            kind = {C.DATA_BLOCK: "data", C.PROGRAM_BLOCK: "program"}.get(content, "question")
            seen[f"{kind} block with {held[0]}{' (owned)' if owned else ''}"] += 1
    minimums = {
        "data block with data": 100, "program block with program": 60,
        "program block with program (owned)": 60, "question block with data": 30,
        "question block with program": 20, "question block with program (owned)": 15,
        "already siphoned cell in the cross": 100, "resource collected": 200,
        "player on a block": 15, "quality zero, blocks in the yield": 40,
        "quality non-zero, blocks in the yield": 25, "quality zero, no blocks in the yield": 10,
        "quality non-zero, no blocks in the yield": 25, "dominated by several cells": 20,
    }
    plain.assert_covered(seen, minimums, "siphon cases")


# ---------------------------------------------------------------------------------------------
# Reward


def start_states(generated_states):
    """(label, state, plan): generated boards, plain random dicts, stage ends next to the exit
    (half of them on stage 8), low or zero hp next to enemies on later stages, and walks onto
    an old exit cell brought back by UNDO. A plan lists the actions to take, None for a random
    one (also taken when the planned action is not valid)."""
    rng = random.Random(14)
    for i, state in enumerate(generated_states):
        yield f"generated case {i}", state, [None] * 6
    for i in range(50):
        d = random_dict(rng, all_programs=i % 2 == 0, siphons=rng.randint(0, 2),
                        adjacent_enemies=rng.randint(0, 2), enemy_on_block=i % 2 == 1)
        yield f"dict case {i}: {d}", scenario.from_dict(d), [None] * 4
    for i in range(80):
        d = random_dict(rng, player=rng.choice([(5, 4), (4, 5)]), all_programs=i % 3 == 0,
                        stage=8 if i % 2 else rng.randint(1, 7), enemy_on_exit=i % 5 == 0)
        yield f"exit case {i}: {d}", scenario.from_dict(d), [None] * 2
    for i in range(50):
        d = random_dict(rng, hp=0 if i % 5 == 0 else 1, stage=rng.randint(2, 8),
                        adjacent_enemies=rng.randint(1, 3), siphons=rng.randint(0, 1),
                        all_programs=i % 2 == 0)
        yield f"danger case {i}: {d}", scenario.from_dict(d), [None] * 2
    for i in range(6):
        # WAIT takes a snapshot, the move completes the stage, UNDO brings back the old board
        # (exit cell at (5,5)) under the new exitPosition; the last move steps onto that cell.
        d = random_dict(rng, player=(5, 4), all_programs=True, stage=rng.randint(1, 6))
        d.update(enemies=[], transmissions=[], stepActive=False, pendingSiphonTransmissions=0,
                 scheduledTasksDisabled=True)
        d["player"].update(credits=10, energy=10)
        yield f"undo case {i}: {d}", scenario.from_dict(d), [C.ACTION_WAIT, 3, ACTION_UNDO, 3]


def choose_action(rng, before, mask, taken):
    """A random valid action. Half the time, if there is one, a move onto the exit or onto a
    data-siphon pickup, or a WARP that may land on the exit; else, a quarter of the time, the
    valid action taken least so far (`taken` counts them), so rarely valid programs get drawn.
    None when no action is valid."""
    valid = [a for a in range(C.NUM_ACTIONS) if mask[a]]
    exit_cell = (before["exit_row"], before["exit_col"])
    preferred = [a for a in valid if a < C.NUM_DIRECTIONS
                 and not line_of_fire_target(before, a)
                 and before["cells"]["content"][before["player_row"] + plain.DIRECTIONS[a][0]][
                     before["player_col"] + plain.DIRECTIONS[a][1]] in (C.EXIT, C.DATA_SIPHON)]
    if ACTION_WARP in valid and (pieces_on(before["enemies"], exit_cell)
                                 or pieces_on(before["transmissions"], exit_cell)):
        preferred.append(ACTION_WARP)
    if preferred and rng.random() < 0.5:
        return rng.choice(preferred)
    if valid and rng.random() < 0.25:
        return min(valid, key=lambda a: taken[f"action {a}"])
    return rng.choice(valid) if valid else None


def failing_actions(before, mask):
    """Actions that fail (§4.4): programs and siphon outside the mask, directions by §6.1."""
    directions = [a for a in range(C.NUM_DIRECTIONS) if move_fails(before, a)]
    return directions + [a for a in range(C.NUM_DIRECTIONS, C.NUM_ACTIONS) if not mask[a]]


def assert_components(label, action, reward, info, expected):
    got = {name: float(value) for name, value in info["reward_components"].items()}
    assert set(got) == set(C.REWARD_COMPONENTS), label
    wrong = {name: (expected[name], got[name]) for name in C.REWARD_COMPONENTS
             if got[name] != pytest.approx(expected[name], abs=1e-5, rel=1e-6)}
    assert not wrong, (f"{label}\naction {action} ({C.ACTION_NAMES[action]}): "
                       f"component: (reference, game) {wrong}")
    total = sum(expected[name] for name in C.REWARD_COMPONENTS)
    assert float(reward) == pytest.approx(total, abs=1e-5, rel=1e-6), (
        f"{label}\naction {action}: total reference {total}, game {float(reward)}")


def test_reward_components_match_the_rules(generated_states):
    rng = random.Random(5)
    seen = Counter()
    for label, state, plan in start_states(generated_states):
        for step, planned in enumerate(plan):
            case = f"{label}, step {step}"
            before = plain.to_plain(state)
            mask = [bool(v) for v in np.asarray(compiled.VALID_ACTIONS(state))]
            failing = failing_actions(before, mask)
            if planned is None and failing and rng.random() < 0.08:
                action = rng.choice(failing)
                _, _, reward, done, info = compiled.STEP(KEY, state, action)
                assert bool(info["invalid_action"]) and bool(done), f"{case}, action {action}"
                assert_components(case, action, reward, info,
                                  dict.fromkeys(C.REWARD_COMPONENTS, 0.0))
                seen["invalid action"] += 1
                continue
            action = planned if planned is not None and mask[planned] else choose_action(
                rng, before, mask, seen)
            if action is None:
                break
            after_state, _, reward, done, info = compiled.STEP(
                jax.random.PRNGKey(seen["steps"]), state, action)
            after = plain.to_plain(after_state)
            assert not bool(info["invalid_action"]), f"{case}: valid action {action} failed"
            expected, facts = reference_reward(before, action, after)
            assert_components(case, action, reward, info, expected)
            assert (bool(info["stage_complete"]), bool(info["won"]), bool(info["death"])) == (
                facts["exit_reached"], facts["won"], after["hp"] == 0), f"{case}, action {action}"

            seen[f"action {action}"] += 1
            seen["steps"] += 1
            for name in C.REWARD_COMPONENTS:
                seen[name] += expected[name] != 0.0
            seen["stage completed by moving"] += facts["exit_reached"] and action < 4
            seen["stage completed by WARP"] += facts["exit_reached"] and action == ACTION_WARP
            seen["stage completed on a cell that is not exitPosition"] += facts[
                "exit_reached"] and (after["player_row"], after["player_col"]) != (
                before["exit_row"], before["exit_col"])
            seen["kills by a move"] += facts["kills"] > 0 and action < 4
            if done:
                break
            state = after_state
    least_per_action = {f"action {a}": 5 for a in range(C.NUM_ACTIONS)}
    minimums = {
        "steps": 450, "invalid action": 20, "stage": 40, "victory": 15, "death": 15,
        "siphonDeathPenalty": 5, "siphonQuality": 10, "programWaste": 3, "dataSiphon": 5,
        "kills": 40, "kills by a move": 10, "distance": 60, "resourceHolding": 30,
        "damagePenalty": 30, "hpRecovery": 30, "score": 20, "resourceGain": 200,
        "stage completed by moving": 35, "stage completed by WARP": 3,
        "stage completed on a cell that is not exitPosition": 3, **least_per_action,
    }
    plain.assert_covered(seen, minimums, "reward cases")
