"""Valid-action mask (rules §4) and program effects (§7) against a plain-Python reference.

The reference below is written from the rules text alone and works on the plain dicts of
`plain.to_plain`. It is compared with the game on random states of two kinds: scenario dicts
drawn here (biased so that every program does something: enemies next to the player, on blocks,
on siphoned cells, sharing cells, at the edges; credits and energy around the costs) and
`test_fuzz.random_scenario` states (generated stages).

- Mask: the 28 flags of `VALID_ACTIONS` must equal the reference mask exactly (§4.1–§4.3).
- Effects: every valid program but UNDO is applied with `APPLY_PROGRAM`; the whole plain state
  after it (cost paid, effect applied) and the outcome (kills, exit reached, enemy turn follows)
  must equal the reference. Kills follow §7 and §14.1: removed enemies and transmissions that
  do not carry fromScheduledTask.
- UNDO (§7.10, §7.15): WAIT turns push snapshots, free programs change the state, then UNDOs
  must restore the snapshots in stack order with the origin flags cleared and the fields the
  rules exclude (stage, exit, STEP, owed transmissions, scheduled-task timing) kept.

Randomness: the states come from fixed seeds. POLY and WARP draw in the game; the test takes the
game's choice, checks that the rules allow it (every new type differs from the old one, with hp
moved by the change of max hp; the WARP target is one of the enemies or transmissions), and
compares everything else with the reference continued from that choice.
"""

import copy
import random
from collections import Counter

import jax
import jax.numpy as jnp
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import scenario

import compiled
import plain
from plain import TYPE_NAMES
from test_fuzz import random_scenario

KEY = jax.random.PRNGKey(0)
SIZE = 6
RING = tuple((dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0))
VIRUS, DAEMON, GLITCH, CRYPTOG = range(4)

# §7.1: (name, credits, energy), in action order 5..27.
PROGRAMS = (
    ("PUSH", 0, 2), ("PULL", 0, 2), ("CRASH", 3, 2), ("WARP", 2, 2), ("POLY", 1, 1),
    ("WAIT", 0, 1), ("DEBUG", 3, 0), ("ROW", 3, 1), ("COL", 3, 1), ("UNDO", 1, 0),
    ("STEP", 0, 3), ("SIPH+", 5, 0), ("EXCH", 4, 0), ("SHOW", 2, 0), ("RESET", 0, 4),
    ("CALM", 2, 4), ("D_BOM", 3, 0), ("DELAY", 1, 2), ("ANTI-V", 3, 0), ("SCORE", 0, 5),
    ("REDUC", 2, 1), ("ATK+", 4, 4), ("HACK", 2, 2),
)
NAMES = [name for name, _, _ in PROGRAMS]
INDEX = {name: k for k, name in enumerate(NAMES)}
FIRST_PROGRAM_ACTION = 5

NUM_SETUPS = 320
NUM_FUZZ_BATCHES = 8
NUM_UNDO_CHAINS = 40


# ---------------------------------------------------------------------------------------------
# Reference: geometry and list helpers

def on_board(row, col):
    return 0 <= row < SIZE and 0 <= col < SIZE


def sign(x):
    return (x > 0) - (x < 0)


def manhattan(a_row, a_col, b_row, b_col):
    return abs(a_row - b_row) + abs(a_col - b_col)


def ring_cells(row, col):
    """The ring of 8 around (row, col), in ring order, on the board only (§1)."""
    return [(row + dr, col + dc) for dr, dc in RING if on_board(row + dr, col + dc)]


def player_cell(s):
    return s["player_row"], s["player_col"]


def not_scheduled(piece):
    return 0 if piece["from_scheduled"] else 1


# ---------------------------------------------------------------------------------------------
# Reference: the mask (§4)

def applicable(s, name):
    """The 'Applicable when' column of §7.1."""
    enemies, transmissions = s["enemies"], s["transmissions"]
    row, col = player_cell(s)
    cells = s["cells"]
    if name in ("PUSH", "PULL", "POLY"):
        return bool(enemies)
    if name == "CRASH":
        return any(plain.block_at(s, r, c) or any((e["row"], e["col"]) == (r, c) for e in enemies)
                   or any((t["row"], t["col"]) == (r, c) for t in transmissions)
                   for r, c in ring_cells(row, col))
    if name == "WARP":
        return bool(enemies) or bool(transmissions)
    if name == "DEBUG":
        return any(plain.block_at(s, e["row"], e["col"]) for e in enemies)
    if name == "ROW":
        return any(e["row"] == row for e in enemies)
    if name == "COL":
        return any(e["col"] == col for e in enemies)
    if name == "UNDO":
        return s["history_size"] > 0
    if name == "EXCH":
        return s["credits"] >= 4
    if name == "SHOW":
        return not s["show_activated"]
    if name == "RESET":
        return s["hp"] < 3
    if name == "CALM":
        return not s["scheduled_tasks_disabled"]
    if name == "D_BOM":
        return any(e["kind"] == DAEMON for e in enemies)
    if name == "DELAY":
        return bool(transmissions)
    if name == "ANTI-V":
        return any(e["kind"] == VIRUS for e in enemies)
    if name == "SCORE":
        return s["stage"] < 8
    if name == "REDUC":
        return any(plain.is_block(cells["content"][r][c]) and not cells["siphoned"][r][c]
                   and cells["spawn_count"][r][c] > 0 for r in range(SIZE) for c in range(SIZE))
    if name == "ATK+":
        return s["atk_plus_uses"] < 2
    if name == "HACK":
        return any(any(line) for line in cells["siphoned"])
    return name in ("WAIT", "STEP", "SIPH+")


def reference_mask(s):
    mask = []
    row, col = player_cell(s)
    for dr, dc in plain.DIRECTIONS:
        r, c = row + dr, col + dc
        mask.append(on_board(r, c) and (
            not plain.block_at(s, r, c) or any((e["row"], e["col"]) == (r, c)
                                              for e in s["enemies"])))
    mask.append(s["data_siphons"] >= 1)
    for k, (name, credits, energy) in enumerate(PROGRAMS):
        mask.append(k in s["owned"] and s["credits"] >= credits and s["energy"] >= energy
                    and applicable(s, name))
    return mask


# ---------------------------------------------------------------------------------------------
# Reference: program effects (§7). Each effect takes the paid-for state (a copy it may change)
# and returns (kills, tags); tags name the non-trivial branches taken, for the coverage check.

def remove_dead(s):
    """§7: delete every enemy with hp <= 0; each without fromScheduledTask is a kill."""
    kills = sum(not_scheduled(e) for e in s["enemies"] if e["hp"] <= 0)
    s["enemies"] = [e for e in s["enemies"] if e["hp"] > 0]
    return kills


def hit(s, victims, damage, tags):
    """Damage the victims (floored at 0), stun the survivors, then remove the dead."""
    if any(e["hp"] <= 0 for e in s["enemies"] if not any(e is v for v in victims)):
        tags.add("unhit dead removed")
    for e in victims:
        e["hp"] = max(0, e["hp"] - damage)
        if e["hp"] > 0:
            e["stunned"] = True
            tags.add("stun")
    kills = remove_dead(s)
    if kills:
        tags.add("kill")
    return kills


def effect_push_pull(s, pull, tags):
    """§7.2 / §7.3."""
    p_row, p_col = player_cell(s)
    targets = []
    for e in s["enemies"]:
        if pull:
            dr, dc = sign(p_row - e["row"]), sign(p_col - e["col"])
        else:
            dr, dc = sign(e["row"] - p_row), sign(e["col"] - p_col)
        candidates = [(e["row"] + dr, e["col"] + dc)]
        if dr:
            candidates.append((e["row"] + dr, e["col"]))
        if dc:
            candidates.append((e["row"], e["col"] + dc))
        candidates = [cell for cell in candidates if on_board(*cell)
                      and not (pull and cell == (p_row, p_col))]
        if not candidates:
            targets.append(None)
            continue
        # min/max keep the first of equal keys: the earliest candidate wins ties.
        choose = min if pull else max
        targets.append(choose(candidates, key=lambda cell: manhattan(*cell, p_row, p_col)))
    claimed = set()
    for e, target in zip(s["enemies"], targets):
        if target is None:
            continue
        if target == (p_row, p_col):
            tags.add("claims the player's cell")
        if target in claimed:
            tags.add("collision")
            continue
        claimed.add(target)
        if target != (e["row"], e["col"]):
            tags.add("moved")
        e["row"], e["col"] = target
    return 0


def effect_crash(s, tags):
    """§7.4. A destroyed block leaves an ordinary empty cell (specs/game-rules.md §12)."""
    kills = 0
    cells = s["cells"]
    for r, c in ring_cells(*player_cell(s)):
        if plain.is_block(cells["content"][r][c]):
            cells["content"][r][c] = C.EMPTY
            cells["points"][r][c] = 0
            cells["program"][r][c] = C.NO_PROGRAM
            cells["spawn_count"][r][c] = 0
            tags.add("block destroyed")
        for kind in ("enemies", "transmissions"):
            here = [x for x in s[kind] if (x["row"], x["col"]) == (r, c)]
            if here:
                kills += not_scheduled(here[0])
                if len(here) > 1:
                    tags.add(f"several {kind} on a cell")
                s[kind] = [x for x in s[kind] if (x["row"], x["col"]) != (r, c)]
                tags.add(f"{kind} removed")
    return kills


def effect_warp(s, kind, cell, tags):
    """§7.5 with the target chosen: the player lands on `cell`, pieces of `kind` there go."""
    here = [x for x in s[kind] if (x["row"], x["col"]) == cell]
    s[kind] = [x for x in s[kind] if (x["row"], x["col"]) != cell]
    s["player_row"], s["player_col"] = cell
    tags.add(f"onto {kind}")
    if cell == (s["exit_row"], s["exit_col"]):
        tags.add("onto the exit")
    return not_scheduled(here[0])


def effect_poly(s, new_types, tags):
    """§7.6 with the new types chosen."""
    for e, new_type in zip(s["enemies"], new_types):
        damage = plain.MAX_HP[e["kind"]] - e["hp"]
        if e["hp"] <= 0 < plain.MAX_HP[new_type] - damage:
            tags.add("revived")
        e["kind"], e["hp"] = new_type, plain.MAX_HP[new_type] - damage
    kills = remove_dead(s)
    if kills:
        tags.add("kill")
    return kills


def effect_d_bom(s, tags):
    """§7.16."""
    p_row, p_col = player_cell(s)
    daemons = [e for e in s["enemies"] if e["kind"] == DAEMON]
    distances = [manhattan(e["row"], e["col"], p_row, p_col) for e in daemons]
    if distances.count(min(distances)) > 1:
        tags.add("tie")
    target = min(daemons, key=lambda e: manhattan(e["row"], e["col"], p_row, p_col))
    s["enemies"] = [e for e in s["enemies"] if e is not target]
    ring = set(ring_cells(target["row"], target["col"]))
    victims = [e for e in s["enemies"] if (e["row"], e["col"]) in ring]
    if victims:
        tags.add("neighbours hit")
    return not_scheduled(target) + hit(s, victims, 1, tags)


def effect_simple(s, name, tags):
    """The programs with no random choice other than the movers and CRASH."""
    cells = s["cells"]
    row, col = player_cell(s)
    if name == "DEBUG":
        return hit(s, [e for e in s["enemies"] if plain.block_at(s, e["row"], e["col"])],
                   s["attack_damage"], tags)
    if name == "ROW":
        return hit(s, [e for e in s["enemies"] if e["row"] == row], s["attack_damage"], tags)
    if name == "COL":
        return hit(s, [e for e in s["enemies"] if e["col"] == col], s["attack_damage"], tags)
    if name == "HACK":
        return hit(s, [e for e in s["enemies"] if cells["siphoned"][e["row"]][e["col"]]],
                   s["attack_damage"], tags)
    if name == "ANTI-V":
        return hit(s, [e for e in s["enemies"] if e["kind"] == VIRUS], 1, tags)
    if name == "D_BOM":
        return effect_d_bom(s, tags)
    if name == "STEP":
        s["step_active"] = True
    elif name == "SIPH+":
        s["data_siphons"] += 1
    elif name == "EXCH":
        s["energy"] += 4
    elif name == "SHOW":
        s["show_activated"] = True
    elif name == "RESET":
        s["hp"] = 3
    elif name == "CALM":
        s["scheduled_tasks_disabled"] = True
    elif name == "DELAY":
        for t in s["transmissions"]:
            t["turns_remaining"] += 3
    elif name == "SCORE":
        s["score"] += 8 - s["stage"]
    elif name == "REDUC":
        for r in range(SIZE):
            for c in range(SIZE):
                if plain.is_block(cells["content"][r][c]) and not cells["siphoned"][r][c]:
                    if cells["spawn_count"][r][c] > 0:
                        tags.add("reduced")
                    cells["spawn_count"][r][c] = max(0, cells["spawn_count"][r][c] - 1)
    elif name == "ATK+":
        s["attack_damage"] += 1
        s["atk_plus_uses"] += 1
        tags.add(f"use {s['atk_plus_uses']}")
    elif name == "CRASH":
        return effect_crash(s, tags)
    elif name in ("PUSH", "PULL"):
        return effect_push_pull(s, name == "PULL", tags)
    else:
        assert name == "WAIT", name
    return 0


def paid(s, name):
    """A copy of `s` with the program's cost deducted (§7: costs are paid first)."""
    s = copy.deepcopy(s)
    _, credits, energy = PROGRAMS[INDEX[name]]
    s["credits"] -= credits
    s["energy"] -= energy
    return s


def reference_outcome(s, name, kills):
    at_exit = name == "WARP" and player_cell(s) == (s["exit_row"], s["exit_col"])
    return {"kills": kills, "exit_reached": at_exit, "enemy_turn_follows": name == "WAIT"}


# ---------------------------------------------------------------------------------------------
# Reference continued from the game's random choice (POLY types, WARP target)

def warp_choices(before):
    """Every (kind, cell) a WARP may pick: all enemies, then all transmissions (§7.5)."""
    choices = []
    for kind in ("enemies", "transmissions"):
        for x in before[kind]:
            if (kind, (x["row"], x["col"])) not in choices:
                choices.append((kind, (x["row"], x["col"])))
    return choices


def poly_types(before, after):
    """New types for the enemies of `before` that explain the game's survivors `after`, or
    None when no legal choice (each new type differs from the old one) does."""
    old = before["enemies"]
    survivors = after["enemies"]

    def search(i, j):
        if i == len(old):
            return [] if j == len(survivors) else None
        e = old[i]
        damage = plain.MAX_HP[e["kind"]] - e["hp"]
        for new_type in range(4):
            if new_type == e["kind"]:
                continue
            hp = plain.MAX_HP[new_type] - damage
            if hp > 0:
                if j < len(survivors) and survivors[j] == {**e, "kind": new_type, "hp": hp}:
                    rest = search(i + 1, j + 1)
                    if rest is not None:
                        return [new_type] + rest
            else:
                rest = search(i + 1, j)
                if rest is not None:
                    return [new_type] + rest
        return None

    return search(0, 0)


def expected_results(before, name, after):
    """[(expected state, expected outcome, tags)] the rules allow for program `name` on
    `before`, given the game's state `after` (only read for the POLY and WARP draws)."""
    results = []
    if name == "WARP":
        choices = warp_choices(before)
        # Compare with the choice at the game's landing cell first, for a readable diff.
        choices.sort(key=lambda choice: choice[1] != player_cell(after))
        for kind, cell in choices:
            s, tags = paid(before, name), set()
            kills = effect_warp(s, kind, cell, tags)
            results.append((s, reference_outcome(s, name, kills), tags))
        return results
    s, tags = paid(before, name), set()
    if name == "POLY":
        new_types = poly_types(before, after)
        if new_types is None:
            return []
        kills = effect_poly(s, new_types, tags)
    else:
        kills = effect_simple(s, name, tags)
    return [(s, reference_outcome(s, name, kills), tags)]


# ---------------------------------------------------------------------------------------------
# Comparison helpers


def game_outcome(outcome):
    return {"kills": int(outcome.kills), "exit_reached": bool(outcome.exit_reached),
            "enemy_turn_follows": bool(outcome.enemy_turn_follows)}


def describe(case, state):
    return f"case {case}; scenario.from_dict({scenario.to_dict(state)!r})"


# ---------------------------------------------------------------------------------------------
# Random states

def near(rng, row, col):
    """A cell that is often next to (row, col) or in its row/column, so programs bite."""
    roll = rng.random()
    if roll < 0.35:
        dr, dc = rng.choice(RING)
        if on_board(row + dr, col + dc):
            return row + dr, col + dc
    if roll < 0.55:
        return row, rng.randrange(SIZE)
    if roll < 0.75:
        return rng.randrange(SIZE), col
    return rng.randrange(SIZE), rng.randrange(SIZE)


def random_setup(rng):
    """A scenario dict with pieces crowded around the player, on blocks, on siphoned cells and
    on each other, and credits/energy close to the program costs."""
    cell = lambda: (rng.randrange(SIZE), rng.randrange(SIZE))  # noqa: E731
    p_row, p_col = cell()
    exit_row, exit_col = rng.choice([(0, 0), (0, 5), (5, 0), (5, 5)])
    occupied_by_block = {}
    for _ in range(rng.randint(0, 10)):
        r, c = near(rng, p_row, p_col)
        if (r, c) in ((p_row, p_col), (exit_row, exit_col)) and rng.random() < 0.8:
            continue
        kind = rng.choice(["data", "data", "program", "question"])
        block = {"row": r, "col": c, "type": kind, "spawnCount": rng.randint(0, 9)}
        if kind == "program" or (kind == "question" and rng.random() < 0.5):
            block["program"] = rng.choice(NAMES)
        else:
            block["points"] = rng.randint(1, 9)
        if kind != "question":
            block["siphoned"] = rng.random() < 0.3
        occupied_by_block[(r, c)] = block
    blocks = list(occupied_by_block.values())
    question_cells = {(b["row"], b["col"]) for b in blocks if b["type"] == "question"}
    siphoned = {near(rng, p_row, p_col) for _ in range(rng.choice([0, 0, 1, 3, 5]))}
    siphoned -= question_cells
    siphoned |= {(b["row"], b["col"]) for b in blocks if b.get("siphoned")}

    def piece_cell(pieces):
        roll = rng.random()
        if roll < 0.15 and blocks:
            block = rng.choice(blocks)
            return block["row"], block["col"]
        if roll < 0.25 and siphoned:
            return rng.choice(sorted(siphoned))
        if roll < 0.35 and pieces:
            piece = rng.choice(pieces)
            return piece["row"], piece["col"]
        if roll < 0.38:
            return exit_row, exit_col
        if roll < 0.40:
            return p_row, p_col
        return near(rng, p_row, p_col)

    enemies = []
    for _ in range(rng.choice([0, 1, 2, 3, 4, 5, 6, 8])):
        kind = rng.randrange(4)
        r, c = piece_cell(enemies)
        hp = rng.randint(1, plain.MAX_HP[kind]) if rng.random() < 0.9 else rng.randint(-1, 0)
        enemies.append({"type": TYPE_NAMES[kind], "row": r, "col": c, "hp": hp,
                        "stunned": rng.random() < 0.2, "disabledTurns": rng.choice([0, 0, 1, 2]),
                        "spawnedFromSiphon": rng.random() < 0.3,
                        "isFromScheduledTask": rng.random() < 0.3})
    transmissions = []
    for _ in range(rng.choice([0, 0, 1, 2, 3, 4])):
        r, c = piece_cell(transmissions + enemies)
        transmissions.append({"row": r, "col": c, "turnsRemaining": rng.randint(0, 4),
                              "enemyType": rng.choice(TYPE_NAMES),
                              "spawnedFromSiphon": rng.random() < 0.3,
                              "isFromScheduledTask": rng.random() < 0.3})
    resources = []
    for _ in range(rng.randint(0, 6)):
        r, c = cell()
        amount = rng.randint(1, 3)
        resources.append({"row": r, "col": c, **rng.choice(
            [{"credits": amount}, {"energy": amount}, {"dataSiphon": True}])})

    def amount():
        return rng.choice([rng.randint(0, 6), rng.randint(0, 6), rng.randint(0, 12), 25])

    return {
        "player": {"row": p_row, "col": p_col, "hp": rng.randint(0, 3) if rng.random() < 0.1
                   else rng.randint(1, 3), "credits": amount(), "energy": amount(),
                   "dataSiphons": rng.randint(0, 2), "score": rng.randint(0, 20),
                   "attackDamage": rng.choice([1, 1, 1, 2, 2, 3, 4])},
        "enemies": enemies, "transmissions": transmissions, "blocks": blocks,
        "resources": resources,
        "ownedPrograms": [name for name in NAMES if rng.random() < 0.6],
        "stage": rng.randint(1, 8), "turn": rng.randint(0, 15),
        "showActivated": rng.random() < 0.25, "scheduledTasksDisabled": rng.random() < 0.25,
        "exitPosition": {"row": exit_row, "col": exit_col},
        "siphonedCells": [{"row": r, "col": c} for r, c in sorted(siphoned)],
        "siphonCenterCells": [{"row": r, "col": c} for r, c in sorted(siphoned)[:1]],
        "stepActive": rng.random() < 0.2, "atkPlusUsesThisStage": rng.choice([0, 0, 1, 2]),
        "scheduledTaskInterval": rng.randint(4, 12), "nextScheduledTaskTurn": rng.randint(0, 20),
        "pendingSiphonTransmissions": rng.randint(0, 3),
    }


@pytest.fixture(scope="module")
def states():
    """[(case label, GameState)]: drawn scenario dicts, then generated-stage fuzz states."""
    rng = random.Random(2024)
    cases = [(f"setup seed 2024 #{i}", scenario.from_dict(random_setup(rng)))
             for i in range(NUM_SETUPS)]
    # Batches of 8, the shape test_batching compiles, so the persistent cache can share it.
    make_batch = jax.jit(jax.vmap(random_scenario))
    for seed in range(NUM_FUZZ_BATCHES):
        batch = make_batch(jax.random.split(jax.random.PRNGKey(seed), 8))
        cases += [(f"random_scenario batch PRNGKey({seed}) split(8) #{i}",
                   plain.unbatch(batch, i)) for i in range(8)]
    return cases


# ---------------------------------------------------------------------------------------------
# Tests

def with_resources(state, credits, energy):
    core = state.core
    return state.replace(core=core.replace(credits=jnp.asarray(credits, core.credits.dtype),
                                           energy=jnp.asarray(energy, core.energy.dtype)))


def test_mask_matches_the_reference(states):
    rng = random.Random(5)
    exact, short = Counter(), Counter()
    cases = list(states)
    # The generated-stage states again with credits and energy near the costs (they often hold
    # the only UNDO snapshots).
    cases += [(f"{case} with credits {c}, energy {e}", with_resources(state, c, e))
              for case, state in states if case.startswith("random_scenario")
              for c, e in [(rng.randint(0, 5), rng.randint(0, 5)) for _ in range(3)]]
    for case, state in cases:
        s = plain.to_plain(state)
        expected = reference_mask(s)
        actual = [bool(x) for x in jax.device_get(compiled.VALID_ACTIONS(state))]
        wrong = [f"{(['up', 'down', 'left', 'right', 'siphon'] + NAMES)[a]}: ref {expected[a]} "
                 f"game {actual[a]}" for a in range(28) if expected[a] != actual[a]]
        assert not wrong, f"{wrong}; {describe(case, state)}"
        for k, (name, credits, energy) in enumerate(PROGRAMS):
            if k not in s["owned"] or not applicable(s, name):
                continue
            affordable = s["credits"] >= credits and s["energy"] >= energy
            # At the exact cost: a resource the program costs is held at exactly that amount
            # (0 of a resource it does not cost is no edge).
            if affordable and ((credits and s["credits"] == credits)
                               or (energy and s["energy"] == energy)):
                exact[name] += 1
            if s["credits"] == credits - 1 or s["energy"] == energy - 1:
                short[name] += 1
    assert all(exact[name] >= 2 for name in NAMES), f"cases at the exact cost: {exact}"
    # EXCH is applicable only from 4 credits, its cost, so it is never applicable one short.
    costly = [name for name in NAMES if name != "EXCH"]
    assert all(short[name] >= 2 for name in costly), f"one-short cases: {short}"


def test_program_effects_match_the_reference(states):
    counts, tags_seen = Counter(), Counter()
    for case, state in states:
        before = plain.to_plain(state)
        mask = reference_mask(before)
        for k, name in enumerate(NAMES):
            if not mask[FIRST_PROGRAM_ACTION + k] or name == "UNDO":
                continue
            new_state, outcome = compiled.APPLY_PROGRAM(jax.random.PRNGKey(k), state, k)
            after = plain.to_plain(new_state)
            assert not bool(outcome.failed), f"{name} failed; {describe(case, state)}"
            results = expected_results(before, name, after)
            assert results, (f"POLY made no legal type choice: before {before['enemies']} "
                             f"after {after['enemies']}; {describe(case, state)}")
            matching = [(o, tags) for s, o, tags in results if not plain.state_diff(s, after)]
            if name == "WARP":
                assert matching, (f"WARP landed on no legal target: "
                                  f"{plain.state_diff(results[0][0], after)}; {describe(case, state)}")
            else:
                assert matching, f"{name}: {plain.state_diff(results[0][0], after)}; " \
                                 f"{describe(case, state)}"
            ref_outcome, tags = matching[0]
            assert game_outcome(outcome) == ref_outcome, (
                f"{name} outcome: ref {ref_outcome} game {game_outcome(outcome)}; "
                f"{describe(case, state)}")
            counts[name] += 1
            tags_seen.update(f"{name}: {tag}" for tag in tags)
    assert all(counts[name] >= 8 for name in NAMES if name != "UNDO"), counts
    required = [
        "PUSH: moved", "PUSH: collision", "PULL: moved", "PULL: collision",
        "CRASH: block destroyed", "CRASH: enemies removed", "CRASH: transmissions removed",
        "WARP: onto enemies", "WARP: onto transmissions", "POLY: kill",
        "DEBUG: kill", "DEBUG: stun", "ROW: kill", "ROW: stun", "COL: kill", "COL: stun",
        "HACK: kill", "HACK: stun", "ANTI-V: kill", "ANTI-V: stun",
        "D_BOM: neighbours hit", "D_BOM: kill", "D_BOM: stun", "REDUC: reduced",
        "ATK+: use 1", "ATK+: use 2", "PUSH: claims the player's cell",
        "CRASH: several enemies on a cell", "CRASH: several transmissions on a cell",
        "WARP: onto the exit", "POLY: revived", "D_BOM: tie", "ROW: unhit dead removed",
        "HACK: unhit dead removed",
    ]
    rare = [tag for tag in required if tags_seen[tag] < 3]
    assert not rare, f"branches seen fewer than 3 times: {[(t, tags_seen[t]) for t in rare]}"


# ---------------------------------------------------------------------------------------------
# UNDO (§7.10, §7.15)

RESTORED_ELSEWHERE = ("stage", "exit_row", "exit_col", "step_active",
                      "pending_siphon_transmissions", "scheduled_interval",
                      "next_scheduled_turn")


def reference_undo(snapshot, current):
    """The state after UNDO: the snapshot's values with the origin flags cleared, except the
    fields §7.15 does not restore, and one snapshot fewer."""
    s = copy.deepcopy(snapshot)
    for piece in s["enemies"] + s["transmissions"]:
        piece["from_siphon"] = piece["from_scheduled"] = False
    for key in RESTORED_ELSEWHERE:
        s[key] = current[key]
    s["history_size"] = current["history_size"] - 1
    return s


def undo_setup(rng):
    d = random_setup(rng)
    d["ownedPrograms"] = sorted(set(d["ownedPrograms"]) | {"WAIT", "UNDO"})
    d["player"].update(hp=3, credits=rng.randint(3, 25), energy=rng.randint(4, 25))
    d["stepActive"] = False
    return d


def apply_random_free_programs(rng, state, count):
    """Up to `count` valid free programs other than UNDO, in random order."""
    for _ in range(count):
        mask = reference_mask(plain.to_plain(state))
        free = [k for k, name in enumerate(NAMES)
                if mask[FIRST_PROGRAM_ACTION + k] and name not in ("UNDO", "WAIT")]
        if not free:
            break
        # A full step, so that a WARP onto the exit completes the stage as in play.
        state = compiled.STEP(KEY, state, FIRST_PROGRAM_ACTION + rng.choice(free))[0]
    return state


def test_undo_restores_the_snapshots_in_stack_order():
    rng = random.Random(77)
    undos, double_undos, stepped, reverted, across_stages = 0, 0, 0, 0, 0
    for chain in range(NUM_UNDO_CHAINS):
        d = undo_setup(rng)
        state = scenario.from_dict(d)
        stack = []
        for _ in range(rng.choice([1, 2, 2])):
            state = apply_random_free_programs(rng, state, rng.randint(0, 2))
            before = plain.to_plain(state)
            if before["energy"] < 1:
                break
            state = compiled.STEP(KEY, state, FIRST_PROGRAM_ACTION + INDEX["WAIT"])[0]
            after = plain.to_plain(state)
            # §8 step 1 / §7.15: a turn skipped by STEP takes no snapshot.
            pushed = after["history_size"] - before["history_size"]
            assert pushed == (0 if before["step_active"] else 1), f"chain {chain}: {d!r}"
            stepped += before["step_active"]
            if pushed:
                stack.append(after)
        state = apply_random_free_programs(rng, state, rng.randint(0, 3))
        for depth in range(len(stack)):
            current = plain.to_plain(state)
            assert reference_mask(current) == [
                bool(x) for x in jax.device_get(compiled.VALID_ACTIONS(state))], (
                f"chain {chain} mask before UNDO {depth}: {d!r}")
            if current["credits"] < 1:
                break
            state, outcome = compiled.APPLY_PROGRAM(KEY, state, INDEX["UNDO"])
            snapshot = stack.pop()
            expected = reference_undo(snapshot, current)
            # Something the free programs or a later turn changed is brought back.
            kept = RESTORED_ELSEWHERE + ("history_size",)
            reverted += bool(plain.state_diff({**snapshot, **{k: current[k] for k in kept}}, current))
            across_stages += snapshot["stage"] != current["stage"]
            diff = plain.state_diff(expected, plain.to_plain(state))
            assert not diff, f"chain {chain} UNDO {depth}: {diff}; setup {d!r}"
            assert game_outcome(outcome) == {"kills": 0, "exit_reached": False,
                                             "enemy_turn_follows": False}, f"chain {chain}"
            undos += 1
            double_undos += depth == 1
    assert undos >= 40 and double_undos >= 8 and stepped >= 3 and reverted >= 30 \
        and across_stages >= 2, (undos, double_undos, stepped, reverted, across_stages)
