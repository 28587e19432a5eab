"""The array observation (rules §15.1-§15.4) and the RL env's flat features against an
independent plain-Python reference.

The oracle, `reference_observation`, is written from the rules text alone (§15.1 player vector,
§15.2 program flags, §15.3 grid channels and their visibility rules) over the plain state of
`plain.to_plain`; it shares no code or constants with `hackmatrix.game.observation`. Every
element is compared exactly (==) with the game's, in the dtypes and shapes §15 gives (player
f32[10], programs i32[23], grid f32[6,6,42] indexed [row][col][channel], row 0 the bottom row).
A fraction of §15 (row / 5, hp / 3, ...) may read as either of its two float32 evaluations: the
quotient rounded once, or the product with the rounded reciprocal, which is what XLA compiles a
division by a constant into under jit (9 / 50: 0.18 or 0.17999999). Anything else is a mismatch.

States compared:

- Scenario dicts (`scenario.from_dict`) drawn from a fixed-seed `random.Random`, biased towards
  every channel and every visibility rule: all four enemy types with hp from below 0 to above
  the type's maximum, stunned, disabled, from siphons or scheduled tasks, several on one cell,
  on blocks and on the player's cell; cryptogs inside and outside the player's row and column
  with SHOW on and off; transmissions stacked and under enemies, countdowns from -2 to 8; data,
  program and question blocks with points, programs and spawn counts beyond what play makes,
  siphoned or not; credits, energy and data-siphon pickups on blocks, on the exit and on open
  cells; siphoned and siphon-centre flags anywhere; an exit cell away from exitPosition; the
  player on edges; stages 1-8; resources, siphons and attackDamage around and past the caps.
- States reached by random valid play (`compiled.STEP`, fixed keys and seeds) from
  `test_fuzz.random_scenario` boards, and from scenarios whose first move completes a stage (a
  new board) or wins: the observation each step returns must be the reference's observation of
  the state it returns.
- The flat features: `flatten(observe(state))` on every scenario and `HackMatrixEnv.reset_env`'s
  `EnvObservation.features` must be player ++ programs ++ grid flattened row-major
  (specs/game-rules.md §9, specs/architecture.md "RL environment").

§15.4 is checked apart from the reference: two states that differ only in what §15.4 hides
(score, turn, the hidden counters of §2.6, the UNDO history, enemies' fromScheduledTask flag,
transmissions' types and flags, question-block contents, resources under unsiphoned blocks, the
siphoned flag of cells without a block, cryptogs out of sight) - or in what §15.3 never shows
(disabledTurns, enemies other than a cell's first living one, list slots holding no piece) -
must give identical observations.
"""

import copy
import random
from collections import Counter

import jax
import numpy as np
import pytest

from hackmatrix import game
from hackmatrix.game import constants as C
from hackmatrix.game import scenario

import compiled
import plain
from plain import CORNERS, MAX_HP, TYPE_NAMES
from test_fuzz import random_scenario

SIZE = 6
CELLS = tuple((r, c) for r in range(SIZE) for c in range(SIZE))
EDGE_CELLS = tuple((r, c) for r, c in CELLS if r in (0, SIZE - 1) or c in (0, SIZE - 1))
CRYPTOG = 3
NUM_PROGRAMS = 23
FIRST_PROGRAM_ACTION = 5

PLAYER_FEATURES = ("row / 5", "col / 5", "hp / 3", "min(credits / 50, 1)",
                   "min(energy / 50, 1)", "(stage - 1) / 7", "dataSiphons / 10",
                   "(attackDamage - 1) / 2", "showActivated", "scheduledTasksDisabled")
# §15.3 channels.
FIRST_TYPE_CHANNEL = 0  # one-hot virus, daemon, glitch, cryptog: channels 0-3
ENEMY_HP, STUNNED, FROM_SIPHON = 4, 5, 6
DATA, PROGRAM, QUESTION, POINTS, SIPHONED = range(7, 12)
FIRST_PROGRAM_CHANNEL = 12
SPAWN_COUNT, COUNTDOWN, CREDITS, ENERGY, PICKUP, EXIT, SIPHON_CENTRE = range(35, 42)
NUM_CHANNELS = 42
CHANNEL_NAMES = (
    "virus", "daemon", "glitch", "cryptog", "enemy hp", "enemy stunned",
    "enemy spawnedFromSiphon", "data block", "program block", "question block",
    "block points", "block siphoned",
    *(f"program {name} on block" for name in C.PROGRAM_NAMES),
    "block spawn count", "transmission countdown", "credits on cell", "energy on cell",
    "data-siphon pickup", "exit", "siphon centre")
FLAT_SIZE = len(PLAYER_FEATURES) + NUM_PROGRAMS + SIZE * SIZE * NUM_CHANNELS

NUM_SCENARIOS = 300
NUM_HIDDEN_VARIANTS = 120
NUM_GENERATED = 16
PLAY_STEPS = 8
NUM_EXIT_STARTS = 12
MOVE_RIGHT = 3
NUM_RESETS = 8


@jax.jit
def observe_and_flatten(state):
    obs = game.observe(state)
    return obs, game.flatten(obs)


# ---------------------------------------------------------------------------------------------
# Reference (§15)


def quotient(n, d):
    """n / d rounded once to float32."""
    return np.float32(n / d)


def reciprocal_product(n, d):
    """n / d as XLA evaluates a division by a constant under jit: n times the float32 reciprocal
    of d (one ulp off the rounded quotient at times, e.g. 9 / 50 gives 0.17999999, not 0.18)."""
    return np.float32(n) * np.float32(1 / d)


def shown_enemy(s, row, col):
    """§15.3: the first enemy in list order on the cell with hp > 0, or None when there is none
    or it is a cryptog out of sight (outside the player's row and column, SHOW off)."""
    living = [e for e in s["enemies"] if (e["row"], e["col"]) == (row, col) and e["hp"] > 0]
    if not living:
        return None
    first = living[0]
    in_sight = (first["row"] == s["player_row"] or first["col"] == s["player_col"]
                or s["show_activated"])
    return None if first["kind"] == CRYPTOG and not in_sight else first


def reference_cell(s, row, col, divide):
    """The 42 channels of one cell (§15.3), as a float32 array."""
    cells = s["cells"]
    channels = np.zeros(NUM_CHANNELS, np.float32)
    enemy = shown_enemy(s, row, col)
    if enemy is not None:
        channels[FIRST_TYPE_CHANNEL + enemy["kind"]] = 1
        channels[ENEMY_HP] = divide(enemy["hp"], 3)
        channels[STUNNED] = enemy["stunned"]
        channels[FROM_SIPHON] = enemy["from_siphon"]
    content = cells["content"][row][col]
    siphoned = cells["siphoned"][row][col]
    if content == C.QUESTION_BLOCK:
        channels[QUESTION] = 1  # and nothing of its content
    elif content in (C.DATA_BLOCK, C.PROGRAM_BLOCK):
        channels[SIPHONED] = siphoned
        channels[SPAWN_COUNT] = divide(cells["spawn_count"][row][col], 9)
        if content == C.DATA_BLOCK:
            channels[DATA] = 1
            channels[POINTS] = divide(cells["points"][row][col], 9)
        else:
            channels[PROGRAM] = 1
            channels[FIRST_PROGRAM_CHANNEL + cells["program"][row][col]] = 1
    transmissions = [t for t in s["transmissions"] if (t["row"], t["col"]) == (row, col)]
    if transmissions:
        channels[COUNTDOWN] = min(divide(transmissions[0]["turns_remaining"], 4), 1)
    if not plain.block_at(s, row, col) or siphoned:
        channels[CREDITS] = divide(cells["credits"][row][col], 3)
        channels[ENERGY] = divide(cells["energy"][row][col], 3)
    channels[PICKUP] = content == C.DATA_SIPHON
    channels[EXIT] = content == C.EXIT
    channels[SIPHON_CENTRE] = cells["siphon_center"][row][col]
    return channels


def reference_observation(s, divide):
    """(player f32[10], programs i32[23], grid f32[6,6,42]) of §15.1-§15.3, each fraction
    evaluated by `divide`."""
    player = np.array([
        divide(s["player_row"], 5), divide(s["player_col"], 5), divide(s["hp"], 3),
        min(divide(s["credits"], 50), 1), min(divide(s["energy"], 50), 1),
        divide(s["stage"] - 1, 7), divide(s["data_siphons"], 10),
        divide(s["attack_damage"] - 1, 2),
        s["show_activated"], s["scheduled_tasks_disabled"]], np.float32)
    programs = np.array([int(k in s["owned"]) for k in range(NUM_PROGRAMS)], np.int32)
    grid = np.array([[reference_cell(s, r, c, divide) for c in range(SIZE)]
                     for r in range(SIZE)])
    return player, programs, grid


def references(s):
    """The reference observation under both float32 evaluations of the rules' fractions; the
    game must match one of them element by element."""
    return [reference_observation(s, divide) for divide in (quotient, reciprocal_product)]


def flat(observation):
    """specs/game-rules.md §9: player ++ programs ++ grid row-major as [row][col][channel]."""
    player, programs, grid = observation
    return np.concatenate([player, programs.astype(np.float32), grid.reshape(-1)])


# ---------------------------------------------------------------------------------------------
# Comparison


def mismatch(alternatives, got):
    """Mask of the elements of `got` equal to none of the alternative arrays."""
    return np.logical_and.reduce([want != got for want in alternatives])


def shown_values(alternatives, index):
    values = list(dict.fromkeys(want[index].item() for want in alternatives))
    return " or ".join(repr(np.float32(v)) if isinstance(v, float) else str(v) for v in values)


def observation_diffs(alternatives, obs):
    """Readable differences between the game's Observation and a list of alternative expected
    (player, programs, grid): dtype or shape, then every element that equals none of them,
    named by its channel."""
    got = [np.asarray(x) for x in (obs.player, obs.programs, obs.grid)]
    diffs = [f"{name}: reference {want.dtype}{list(want.shape)}, game {have.dtype}"
             f"{list(have.shape)}"
             for name, want, have in zip(("player", "programs", "grid"), alternatives[0], got)
             if have.dtype != want.dtype or have.shape != want.shape]
    if diffs:
        return diffs
    players, programs, grids = zip(*alternatives)
    player, owned, grid = got
    diffs += [f"player[{i}] ({PLAYER_FEATURES[i]}): reference {shown_values(players, i)}, "
              f"game {player[i]!r}" for i in np.flatnonzero(mismatch(players, player))]
    diffs += [f"programs[{k}] ({C.PROGRAM_NAMES[k]} owned): reference "
              f"{shown_values(programs, k)}, game {owned[k]}"
              for k in np.flatnonzero(mismatch(programs, owned))]
    diffs += [f"grid[{r}][{c}][{ch}] ({CHANNEL_NAMES[ch]}): reference "
              f"{shown_values(grids, (r, c, ch))}, game {grid[r, c, ch]!r}"
              for r, c, ch in zip(*np.nonzero(mismatch(grids, grid)))]
    return diffs


def flat_diffs(alternatives, features):
    """As `observation_diffs`, for the flat features against the flattened alternatives."""
    features = np.asarray(features)
    if features.dtype != np.float32 or features.shape != (FLAT_SIZE,):
        return [f"features: expected float32[{FLAT_SIZE}], got {features.dtype}"
                f"{list(features.shape)}"]
    flats = [flat(observation) for observation in alternatives]
    return [f"features[{i}] ({flat_name(i)}): reference {shown_values(flats, i)}, "
            f"game {features[i]!r}" for i in np.flatnonzero(mismatch(flats, features))]


def flat_name(index):
    if index < len(PLAYER_FEATURES):
        return f"player {PLAYER_FEATURES[index]}"
    index -= len(PLAYER_FEATURES)
    if index < NUM_PROGRAMS:
        return f"{C.PROGRAM_NAMES[index]} owned"
    row, rest = divmod(index - NUM_PROGRAMS, SIZE * NUM_CHANNELS)
    col, channel = divmod(rest, NUM_CHANNELS)
    return f"grid[{row}][{col}] {CHANNEL_NAMES[channel]}"


def report(label, diffs, limit=12):
    more = f"\n  ... {len(diffs) - limit} more" if len(diffs) > limit else ""
    return f"{label}\n  " + "\n  ".join(diffs[:limit]) + more


# ---------------------------------------------------------------------------------------------
# Random scenario dicts


def random_count(rng, low, typical_high, rare_high):
    """Mostly low..typical_high, one time in five up to rare_high."""
    return rng.randint(low, rare_high if rng.random() < 0.2 else typical_high)


def random_enemy(rng, cell):
    """An enemy on `cell`; a third of them are cryptogs (so that visibility is exercised)."""
    kind = CRYPTOG if rng.random() < 0.33 else rng.randrange(4)
    hp_draw = rng.random()
    if hp_draw < 0.6:
        hp = rng.randint(1, MAX_HP[kind])
    elif hp_draw < 0.8:
        hp = rng.randint(-1, 0)  # dead from setup: never shown
    else:
        hp = MAX_HP[kind] + rng.randint(1, 4)  # hp / 3 is not capped
    return {"type": rng.choice((TYPE_NAMES[kind], TYPE_NAMES[kind].upper())),
            "row": cell[0], "col": cell[1], "hp": hp, "stunned": rng.random() < 0.35,
            "disabledTurns": rng.choice((0, 0, 1, 2)),
            "spawnedFromSiphon": rng.random() < 0.4, "isFromScheduledTask": rng.random() < 0.3}


def random_dict(rng):
    """A random scenario dict exercising every channel (module docstring)."""
    player = rng.choice(EDGE_CELLS if rng.random() < 0.5 else CELLS)
    in_sight = [x for x in CELLS if x != player and (x[0] == player[0] or x[1] == player[1])]
    out_of_sight = [x for x in CELLS if x[0] != player[0] and x[1] != player[1]]

    block_cells = rng.sample(CELLS, rng.randint(0, 12))
    blocks, question_cells = [], set()
    for row, col in block_cells:
        kind = rng.choice(("data", "program", "question"))
        block = {"row": row, "col": col, "type": kind}
        if kind == "program" or (kind == "question" and rng.random() < 0.5):
            action = rng.randrange(FIRST_PROGRAM_ACTION, FIRST_PROGRAM_ACTION + NUM_PROGRAMS)
            block["program"] = (C.PROGRAM_NAMES[action - FIRST_PROGRAM_ACTION]
                                if rng.random() < 0.2 else action)
        else:
            block["points"] = random_count(rng, 0, 9, 20)
        if rng.random() < 0.5:
            block["spawnCount"] = random_count(rng, 0, 9, 20)
        if kind == "question":
            question_cells.add((row, col))
        elif rng.random() < 0.4:
            block["siphoned"] = True
        blocks.append(block)

    # Resources on about half of the cells (blocks and the exit included), some overwritten by
    # a later entry; then a few data-siphon pickups, which replace a block on their cell.
    resources = []
    for row, col in CELLS:
        for _ in range(rng.choice((0, 0, 1, 1, 2))):
            kind = rng.choice(("credits", "energy"))
            resources.append({"row": row, "col": col, kind: random_count(rng, 1, 3, 9)})
    for row, col in rng.sample(CELLS, rng.randint(0, 3)):
        resources.append({"row": row, "col": col, "dataSiphon": True})

    def some_cell():
        """A cell for a piece: in the player's sight, out of it, on a block, on the player."""
        pools = [in_sight, out_of_sight, out_of_sight, CELLS] + (
            [block_cells] if block_cells else []) + [[player]]
        return rng.choice(rng.choice(pools))

    enemies = []
    for _ in range(rng.randint(0, 9)):
        if enemies and rng.random() < 0.3:
            other = rng.choice(enemies)
            cell = (other["row"], other["col"])
        else:
            cell = some_cell()
        enemies.append(random_enemy(rng, cell))
    occupied = [(e["row"], e["col"]) for e in enemies]
    transmissions = []
    for _ in range(rng.randint(0, 5)):
        pool = [(t["row"], t["col"]) for t in transmissions] + occupied
        cell = rng.choice(pool) if pool and rng.random() < 0.35 else some_cell()
        transmissions.append({
            "row": cell[0], "col": cell[1], "turnsRemaining": rng.randint(-2, 8),
            "enemyType": rng.choice(TYPE_NAMES), "spawnedFromSiphon": rng.random() < 0.3,
            "isFromScheduledTask": rng.random() < 0.3})

    owned = rng.sample(range(NUM_PROGRAMS), rng.randint(0, NUM_PROGRAMS))
    d = {
        "player": {"row": player[0], "col": player[1], "hp": rng.randint(0, 3),
                   "credits": rng.choice((rng.randint(0, 60), rng.randint(45, 55),
                                          rng.randint(0, 500))),
                   "energy": rng.choice((rng.randint(0, 60), rng.randint(45, 55),
                                         rng.randint(0, 500))),
                   "dataSiphons": random_count(rng, 0, 3, 30),
                   "attackDamage": random_count(rng, 1, 3, 9), "score": rng.randint(0, 99)},
        "enemies": enemies, "transmissions": transmissions, "blocks": blocks,
        "resources": resources,
        "siphonedCells": [{"row": r, "col": c} for r, c in rng.sample(CELLS, rng.randint(0, 5))
                          if (r, c) not in question_cells],
        "siphonCenterCells": [{"row": r, "col": c}
                              for r, c in rng.sample(CELLS, rng.choice((0, 0, 1, 2)))],
        "ownedPrograms": [C.PROGRAM_NAMES[k] if rng.random() < 0.5 else FIRST_PROGRAM_ACTION + k
                          for k in owned],
        "stage": rng.randint(1, 8), "turn": rng.randint(0, 30),
        "showActivated": rng.random() < 0.4, "scheduledTasksDisabled": rng.random() < 0.5,
        "scheduledTaskInterval": rng.randint(0, 13), "nextScheduledTaskTurn": rng.randint(0, 40),
        "pendingSiphonTransmissions": rng.randint(0, 9), "stepActive": rng.random() < 0.3,
        "atkPlusUsesThisStage": rng.randint(0, 2),
    }
    if rng.random() < 0.15:
        # UNDO across a stage change: the exit cell is not at exitPosition (§7.15).
        exit_position, exit_cell = rng.sample(CORNERS, 2)
        d["exitPosition"] = {"row": exit_position[0], "col": exit_position[1]}
        d["exitCell"] = {"row": exit_cell[0], "col": exit_cell[1]}
    return d


def situations(s):
    """What a state exercises beyond the non-zero channels, for the coverage check."""
    seen = Counter()
    player = (s["player_row"], s["player_col"])
    seen[f"stage {s['stage']}"] += 1
    seen["player on an edge"] += player in EDGE_CELLS
    seen["player on a block"] += plain.block_at(s, *player)
    seen["credits >= 50"] += s["credits"] >= 50
    seen["energy >= 50"] += s["energy"] >= 50
    seen["dataSiphons > 10"] += s["data_siphons"] > 10
    seen["attackDamage > 3"] += s["attack_damage"] > 3
    seen["exit cell away from exitPosition"] += (
        s["cells"]["content"][s["exit_row"]][s["exit_col"]] != C.EXIT)
    for row, col in CELLS:
        cells = s["cells"]
        here = [e for e in s["enemies"] if (e["row"], e["col"]) == (row, col)]
        living = [e for e in here if e["hp"] > 0]
        shown = shown_enemy(s, row, col)
        seen["dead enemy before a living one"] += bool(living) and here[0]["hp"] <= 0
        seen["several living enemies on a cell"] += len(living) > 1
        seen["enemy hp above its type's maximum"] += bool(
            shown and shown["hp"] > MAX_HP[shown["kind"]])
        seen["enemy on a block"] += bool(shown) and plain.block_at(s, row, col)
        seen["enemy on the player's cell"] += bool(shown) and (row, col) == player
        if living and living[0]["kind"] == CRYPTOG:
            first = living[0]
            if shown is None:
                seen["cryptog out of sight"] += 1
                seen["cryptog out of sight hides another enemy"] += len(living) > 1
            elif first["row"] == player[0] or first["col"] == player[1]:
                seen["cryptog in the player's row or column"] += 1
            else:
                seen["cryptog shown by SHOW"] += 1
        transmissions = [t for t in s["transmissions"] if (t["row"], t["col"]) == (row, col)]
        seen["several transmissions on a cell"] += len(transmissions) > 1
        seen["transmission under an enemy"] += bool(transmissions and living)
        seen["countdown above 4"] += bool(transmissions) and transmissions[0][
            "turns_remaining"] > 4
        seen["countdown <= 0"] += bool(transmissions) and transmissions[0]["turns_remaining"] <= 0
        resource = cells["credits"][row][col] or cells["energy"][row][col]
        content = cells["content"][row][col]
        if resource and plain.block_at(s, row, col):
            seen["resource under a siphoned block" if cells["siphoned"][row][col]
                 else "resource under an unsiphoned block"] += 1
            seen["resource under a question block"] += content == C.QUESTION_BLOCK
        seen["resource on the exit"] += bool(resource) and content == C.EXIT
        seen["resource under a pickup"] += bool(resource) and content == C.DATA_SIPHON
        seen["resource above 3"] += resource > 3
        seen["siphoned cell without a block"] += (cells["siphoned"][row][col]
                                                  and not plain.block_at(s, row, col))
        seen["block points above 9"] += content == C.DATA_BLOCK and cells["points"][row][col] > 9
        seen["siphon centre on a block"] += (cells["siphon_center"][row][col]
                                             and plain.block_at(s, row, col))
    return seen


def non_zero_channels(expected):
    player, programs, grid = expected
    seen = Counter(f"player {PLAYER_FEATURES[i]}" for i in np.flatnonzero(player))
    seen["some program owned"] += bool(programs.any())
    seen.update(CHANNEL_NAMES[ch] for ch in np.flatnonzero(grid.any(axis=(0, 1))))
    return seen


# ---------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def dict_cases():
    """(label, scenario dict, state) for the random scenario dicts."""
    rng = random.Random(1515)
    cases = []
    for i in range(NUM_SCENARIOS):
        d = random_dict(rng)
        cases.append((f"scenario {i}: {d}", d, scenario.from_dict(d)))
    return cases


@pytest.fixture(scope="module")
def generated_states():
    """`random_scenario` states: generated boards with random pieces, resources and programs,
    and an UNDO snapshot half the time."""
    make_batch = jax.jit(jax.vmap(random_scenario))
    keys = jax.random.split(jax.random.PRNGKey(1515), NUM_GENERATED).reshape(-1, 8, 2)
    return [plain.unbatch(batch, i) for batch in map(make_batch, keys) for i in range(8)]


# ---------------------------------------------------------------------------------------------
# Tests


def test_observation_matches_the_reference_on_random_scenarios(dict_cases):
    mismatches, seen = [], Counter()
    for label, _, state in dict_cases:
        s = plain.to_plain(state)
        expected = references(s)
        obs, features = observe_and_flatten(state)
        # The flat features are compared once the arrays agree (else they repeat the diffs).
        diffs = observation_diffs(expected, obs) or flat_diffs(expected, features)
        if diffs:
            mismatches.append(report(label, diffs))
        seen.update(non_zero_channels(expected[0]))
        seen.update(situations(s))
    assert not mismatches, (f"{len(mismatches)} of {len(dict_cases)} scenarios differ:\n"
                            + "\n".join(mismatches[:3]))

    every_channel = {f"player {name}": 60 for name in PLAYER_FEATURES[1:]}  # row 0 is common
    every_channel.update({name: 40 for name in CHANNEL_NAMES})
    every_channel.update({CHANNEL_NAMES[FIRST_PROGRAM_CHANNEL + k]: 8
                          for k in range(NUM_PROGRAMS)})
    minimums = {
        **every_channel, "some program owned": 250, **{f"stage {k}": 20 for k in range(1, 9)},
        "player on an edge": 120, "player on a block": 20, "credits >= 50": 60,
        "energy >= 50": 60, "dataSiphons > 10": 20, "attackDamage > 3": 20,
        "exit cell away from exitPosition": 25, "dead enemy before a living one": 20,
        "several living enemies on a cell": 40, "enemy hp above its type's maximum": 40,
        "enemy on a block": 60, "enemy on the player's cell": 20,
        "cryptog out of sight": 60, "cryptog out of sight hides another enemy": 12,
        "cryptog in the player's row or column": 40, "cryptog shown by SHOW": 30,
        "several transmissions on a cell": 30, "transmission under an enemy": 60,
        "countdown above 4": 60, "countdown <= 0": 40, "resource under a siphoned block": 60,
        "resource under an unsiphoned block": 150, "resource under a question block": 40,
        "resource on the exit": 40, "resource under a pickup": 40, "resource above 3": 100,
        "siphoned cell without a block": 150, "block points above 9": 30,
        "siphon centre on a block": 15,
    }
    plain.assert_covered(seen, minimums, "scenarios")


def play_starts(generated_states, dict_cases):
    """(label, state, first action or None for a random one): the generated boards, and
    scenarios with the player at (5,4) moving right onto the exit at (5,5)."""
    starts = [(f"generated state {i}", state, None) for i, state in enumerate(generated_states)]
    for label, d, _ in dict_cases[:NUM_EXIT_STARTS]:
        d = copy.deepcopy(d)
        for name in ("exitPosition", "exitCell"):
            d.pop(name, None)
        d["player"].update(row=5, col=4, hp=max(1, d["player"]["hp"]))
        # Nothing on (5,5) for the move to hit (§6.1).
        d["enemies"] = [e for e in d["enemies"] if (e["row"], e["col"]) != (5, 5)]
        d["transmissions"] = [t for t in d["transmissions"] if (t["row"], t["col"]) != (5, 5)]
        starts.append((f"{label}, player moved to (5,4)", scenario.from_dict(d), MOVE_RIGHT))
    return starts


def test_observation_matches_the_reference_in_random_play(generated_states, dict_cases):
    """Random valid actions (a siphon, SHOW or WAIT preferred when valid) from generated boards;
    the observation `step` returns must be the reference's for the state it returns."""
    rng = random.Random(33)
    preferred = {C.ACTION_SIPHON, C.ACTION_WAIT, FIRST_PROGRAM_ACTION + C.SHOW}
    mismatches, seen = [], Counter()
    for i, (label, state, first_action) in enumerate(play_starts(generated_states, dict_cases)):
        obs, _ = observe_and_flatten(state)
        diffs = observation_diffs(references(plain.to_plain(state)), obs)
        if diffs:
            mismatches.append(report(label, diffs))
        actions = []
        for step in range(PLAY_STEPS):
            valid = np.flatnonzero(np.asarray(compiled.VALID_ACTIONS(state))).tolist()
            if not valid:
                break
            favoured = [a for a in valid if a in preferred]
            action = first_action if step == 0 and first_action is not None else rng.choice(
                favoured if favoured and rng.random() < 0.4 else valid)
            actions.append(action)
            state, obs, _, done, info = compiled.STEP(jax.random.PRNGKey(100 * i + step), state,
                                                      action)
            assert not bool(info["invalid_action"]), f"{label}, actions {actions}"
            seen["stage completed"] += bool(info["stage_complete"])
            seen["won"] += bool(info["won"])
            s = plain.to_plain(state)
            expected = references(s)
            diffs = observation_diffs(expected, obs)
            if diffs:
                mismatches.append(report(f"{label}, after actions {actions}", diffs))
            seen["steps"] += 1
            seen.update(non_zero_channels(expected[0]))
            seen.update(name for name, count in situations(s).items()
                        if count and name.startswith(("cryptog", "stage")))
            if bool(done):
                break
    assert not mismatches, (f"{len(mismatches)} observations differ:\n"
                            + "\n".join(mismatches[:3]))
    minimums = {"steps": 120, "stage completed": NUM_EXIT_STARTS, "won": 2,
                "player showActivated": 10, "block siphoned": 10,
                "siphon centre": 10, "enemy stunned": 10, "enemy spawnedFromSiphon": 5,
                "transmission countdown": 40, "question block": 20, "cryptog out of sight": 10,
                "cryptog shown by SHOW": 5}
    plain.assert_covered(seen, minimums, "play states")


def test_env_features_are_the_flat_reference_observation():
    """`HackMatrixEnv`'s features: player ++ programs ++ grid row-major (fresh games)."""
    env = game.HackMatrixEnv()
    reset = jax.jit(jax.vmap(env.reset_env, in_axes=(0, None)))
    observations, env_states = reset(jax.random.split(jax.random.PRNGKey(7), NUM_RESETS),
                                     env.default_params)
    assert env.observation_size == FLAT_SIZE
    for i in range(NUM_RESETS):
        s = plain.to_plain(plain.unbatch(env_states.game, i))
        diffs = flat_diffs(references(s), observations.features[i])
        assert not diffs, report(f"reset {i}", diffs)


# ---------------------------------------------------------------------------------------------
# §15.4: what is hidden


def game_arrays(state):
    """The game's (player, programs, grid) of a state, as NumPy arrays."""
    obs = observe_and_flatten(state)[0]
    return np.asarray(obs.player), np.asarray(obs.programs), np.asarray(obs.grid)


def first_living(enemies):
    """Index of the first enemy with hp > 0 on each cell."""
    first = {}
    for i, e in enumerate(enemies):
        if e["hp"] > 0:
            first.setdefault((e["row"], e["col"]), i)
    return first


def hidden_variant(rng, d, s):
    """A copy of scenario `d` (whose state is `s`) with every value §15.4 hides redrawn."""
    v = copy.deepcopy(d)
    v["player"]["score"] = rng.randint(0, 999)
    v.update(turn=rng.randint(0, 99), scheduledTaskInterval=rng.randint(0, 13),
             nextScheduledTaskTurn=rng.randint(0, 99),
             pendingSiphonTransmissions=rng.randint(0, 20), stepActive=not d["stepActive"],
             atkPlusUsesThisStage=rng.randint(0, 2))
    player = (s["player_row"], s["player_col"])
    first = first_living(d["enemies"])
    for i, e in enumerate(v["enemies"]):
        cell = (e["row"], e["col"])
        e["isFromScheduledTask"] = rng.random() < 0.5
        e["disabledTurns"] = rng.randint(0, 3)
        if first.get(cell) != i:
            # Dead, or behind the cell's first living enemy: nothing of it is shown (a dead one
            # stays dead, or it would become the first living one).
            e["type"] = rng.choice(TYPE_NAMES)
            e["hp"] = rng.randint(-3, 0) if e["hp"] <= 0 else rng.randint(-3, 5)
        elif (e["type"].lower() == "cryptog" and not d["showActivated"]
              and cell[0] != player[0] and cell[1] != player[1]):
            e["hp"] = rng.randint(1, 5)  # a cryptog out of sight
        else:
            continue
        e["stunned"] = rng.random() < 0.5
        e["spawnedFromSiphon"] = rng.random() < 0.5
    seen_cells = set()
    for t in v["transmissions"]:
        t["enemyType"] = rng.choice(TYPE_NAMES)
        t["spawnedFromSiphon"] = rng.random() < 0.5
        t["isFromScheduledTask"] = rng.random() < 0.5
        cell = (t["row"], t["col"])
        if cell in seen_cells:
            t["turnsRemaining"] = rng.randint(-3, 9)  # only the first on a cell is shown
        seen_cells.add(cell)
    for block in v["blocks"]:
        if block["type"] == "question":
            block.pop("points", None)
            block.pop("program", None)
            if rng.random() < 0.5:
                block["program"] = rng.randrange(FIRST_PROGRAM_ACTION,
                                                 FIRST_PROGRAM_ACTION + NUM_PROGRAMS)
            else:
                block["points"] = rng.randint(0, 20)
            block["spawnCount"] = rng.randint(0, 20)
    covered = [(r, c) for r, c in CELLS
               if plain.block_at(s, r, c) and not s["cells"]["siphoned"][r][c]]
    v["resources"] = [x for x in v["resources"] if (x["row"], x["col"]) not in covered]
    v["resources"] += [{"row": r, "col": c, rng.choice(("credits", "energy")): rng.randint(1, 9)}
                       for r, c in covered if rng.random() < 0.7]
    # Setup rejects a siphoned flag where a question block entry was (even one the exit
    # replaced), so those cells keep theirs.
    question_cells = {(b["row"], b["col"]) for b in d["blocks"] if b["type"] == "question"}
    v["siphonedCells"] = v["siphonedCells"] + [
        {"row": r, "col": c} for r, c in CELLS
        if not plain.block_at(s, r, c) and (r, c) not in question_cells and rng.random() < 0.3]
    return v


def fill_unused_slots(rng, state):
    """The state with random pieces written into the enemy and transmission slots that are not
    in the lists (active = False): they are no part of the game state of §2."""
    def garbage(items, **ranges):
        free = ~np.asarray(items.active)
        return items.replace(**{
            name: np.where(free, np.asarray([rng.randint(*span) for _ in free], np.int32),
                           np.asarray(getattr(items, name))).astype(np.asarray(
                               getattr(items, name)).dtype)
            for name, span in ranges.items()})

    enemies = garbage(state.core.enemies, kind=(0, 3), row=(0, 5), col=(0, 5), hp=(1, 3),
                      stunned=(0, 1), from_siphon=(0, 1))
    transmissions = garbage(state.core.transmissions, row=(0, 5), col=(0, 5),
                            turns_remaining=(1, 4), enemy_type=(0, 3))
    return state.replace(core=state.core.replace(enemies=enemies, transmissions=transmissions))


def test_hidden_values_do_not_change_the_observation(dict_cases):
    rng = random.Random(404)
    changed = Counter()
    for label, d, state in dict_cases[:NUM_HIDDEN_VARIANTS]:
        s = plain.to_plain(state)
        variant = hidden_variant(rng, d, s)
        variant_state = scenario.from_dict(variant)
        differences = plain.state_diff(s, plain.to_plain(variant_state))
        assert differences, label
        changed.update(line.split(":")[0].split("[")[0] for line in differences)
        diffs = observation_diffs([game_arrays(state)], observe_and_flatten(variant_state)[0])
        assert not diffs, report(f"{label}\nvariant with hidden values redrawn: {variant}", diffs)
    # The variants did redraw what §15.4 hides (plain field names of `plain.to_plain`).
    for field in ("score", "turn", "scheduled_interval", "next_scheduled_turn",
                  "pending_siphon_transmissions", "step_active", "atk_plus_uses", "enemies",
                  "transmissions", "cells.points", "cells.program", "cells.spawn_count",
                  "cells.credits", "cells.energy", "cells.siphoned"):
        assert changed[field] >= 10, f"hidden field {field} redrawn in only {changed[field]} cases"


def test_unused_list_slots_and_history_do_not_change_the_observation(generated_states):
    """Pieces left in unused list slots, and the UNDO history (`to_dict` drops it), are not
    observed."""
    rng = random.Random(8)
    with_history = 0
    for i, state in enumerate(generated_states):
        s = plain.to_plain(state)
        expected = [game_arrays(state)]
        without_history = scenario.from_dict(scenario.to_dict(state))
        assert plain.state_diff({**s, "history_size": 0}, plain.to_plain(without_history)) == []
        with_history += s["history_size"] > 0
        for name, variant in (("unused slots filled", fill_unused_slots(rng, state)),
                              ("history dropped", without_history)):
            diffs = observation_diffs(expected, observe_and_flatten(variant)[0])
            assert not diffs, report(f"generated state {i}, {name}", diffs)
    assert with_history >= 4
