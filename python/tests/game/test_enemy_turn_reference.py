"""The enemy turn (rules §5, §8, §8.1, §9.1-§9.3, §10 and the UNDO push of §7.15) against an
independent pure-Python reference, on random scenarios.

Each case is a random scenario (`scenario.from_dict`) and an action that an enemy turn follows:
WAIT, a siphon, or a move/attack that does not reach the exit. `compiled.RESOLVE` gives the state
right after the player's action, which isolates the enemy turn; the reference runs the enemy turn
on it and the whole plain state (`plain.to_plain`) is compared with `compiled.STEP`'s result.

Randomness: the processing order of §8 step 4 is drawn afresh in each of its two steps, so the
reference enumerates every order of the enemies that can act (a depth-first search over which
enemy acts next, identical intermediate states merged) and the game's result must be one of the
reachable states. New transmissions are placed at random (§9.2): the reference adopts the game's
new ones after checking their number, their fields and that each went to a legal cell.
"""

import functools
from collections import Counter, deque

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import scenario

import compiled
import plain
from plain import CORNERS
from test_pathfinding import reference_move

KEY = jax.random.PRNGKey(0)
NUM_CASES = 400
NUM_FREE_PROGRAM_CASES = 60
SPEED = {C.VIRUS: 2, C.DAEMON: 1, C.GLITCH: 1, C.CRYPTOG: 1}  # §9.1
# §9.2's rejection sampling draws 100 of the 36 cells per category: with at least this many
# qualifying cells it gives up with probability < 1e-6, so a fallback or a drop is then a bug.
RELIABLE_CELLS = 5


# ------------------------------------------------------------------------------------------
# Reference enemy turn (§8), on plain states.

def manhattan(a, b):
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def block_cells(state):
    content = state["cells"]["content"]
    return frozenset((r, c) for r in range(6) for c in range(6) if plain.is_block(content[r][c]))


def count_down(transmissions):
    """§8 step 3: (transmissions left, enemies hatched in transmission order)."""
    kept, hatched = [], []
    for t in transmissions:
        if t["turns_remaining"] <= 1:
            kind = t["enemy_type"]
            hatched.append({"kind": kind, "row": t["row"], "col": t["col"],
                            "hp": plain.MAX_HP[kind], "disabled_turns": 1, "stunned": False,
                            "from_siphon": t["from_siphon"],
                            "from_scheduled": t["from_scheduled"]})
        else:
            kept.append({**t, "turns_remaining": t["turns_remaining"] - 1})
    return kept, hatched


@functools.lru_cache(maxsize=None)
def enemy_move(e, p, glitch, blocks, others):
    return reference_move(e, p, glitch, blocks, others)


def reaches_player(e, p, glitch, blocks, others):
    """Whether §8.1 rules 1/2 find a first step: p reachable from e through passable cells."""
    if e == p or (not glitch and p in blocks):
        return False
    seen, queue = {e}, deque([e])
    while queue:
        cell = queue.popleft()
        for dr, dc in plain.DIRECTIONS:
            nxt = (cell[0] + dr, cell[1] + dc)
            if nxt == p:
                return True
            if (0 <= nxt[0] < 6 and 0 <= nxt[1] < 6 and nxt not in seen
                    and (glitch or nxt not in blocks) and nxt not in others):
                seen.add(nxt)
                queue.append(nxt)
    return False


def movement_rule(e, p, glitch, blocks, others):
    """Which rule of §8.1 decides the move (for the coverage counts only)."""
    if reaches_player(e, p, glitch, blocks, others):
        return 1
    if (reaches_player(e, p, glitch, blocks, frozenset())
            and enemy_move(e, p, glitch, blocks, frozenset()) not in others):
        return 2
    return 3


def enemy_action_outcomes(enemies, player, player_hp, blocks, transmission_cells):
    """§8 step 4 under every processing order: {(positions, player hp): events}, where events
    are the coverage facts true of every order that leads to that result."""

    def act(state, i):
        positions, hp, attacked, moves, events = state
        e, events = positions[i], set(events)
        if enemies[i]["hp"] <= 0:
            events.add("enemy with hp <= 0 acted")
        if manhattan(e, player) == 1:
            hp, attacked = max(0, hp - 1), attacked | {i}
            events.add("attack" if len(attacked) == 1 else "several attacks")
        else:
            others = frozenset(positions[:i] + positions[i + 1:]) | transmission_cells
            glitch = enemies[i]["kind"] == C.GLITCH
            events.add(f"move by rule {movement_rule(e, player, glitch, blocks, others)}")
            if e == player:
                events.add("moved off the player's cell")
            if e in positions[:i] + positions[i + 1:]:
                events.add("moved off a shared cell")
            positions = positions[:i] + (enemy_move(e, player, glitch, blocks, others),) \
                + positions[i + 1:]
            moves = moves[:i] + (moves[i] + 1,) + moves[i + 1:]
            if moves[i] == 2:
                events.add("virus moved twice")
        return positions, hp, attacked, moves, frozenset(events)

    @functools.lru_cache(maxsize=None)
    def every_order(state, waiting):
        if not waiting:
            return frozenset({state})
        return frozenset().union(*(every_order(act(state, i), waiting - {i}) for i in waiting))

    # Disabled and stunned enemies skip both steps; step 1 is for viruses (speed 2) only, and
    # the order among enemies that skip does not matter.
    ready = frozenset(i for i, en in enumerate(enemies)
                      if en["disabled_turns"] <= 0 and not en["stunned"])
    start = (tuple((en["row"], en["col"]) for en in enemies), player_hp, frozenset(),
             (0,) * len(enemies), frozenset())
    results = {}
    for middle in every_order(start, ready):
        second = frozenset(i for i in ready
                           if SPEED[enemies[i]["kind"]] > 1 and i not in middle[2])
        for positions, hp, _, _, events in every_order(middle, second):
            key = (positions, hp)
            results[key] = results[key] & events if key in results else events
    return results


def in_line_of_fire(cell, player, blocks, enemy_cells):
    """§9.2: same row or column as the player, nothing but transmissions strictly between."""
    if cell[0] != player[0] and cell[1] != player[1]:
        return False
    dr = (cell[0] > player[0]) - (cell[0] < player[0])
    dc = (cell[1] > player[1]) - (cell[1] < player[1])
    between = (player[0] + dr, player[1] + dc)
    while between != cell:
        if between in blocks or between in enemy_cells:
            return False
        between = (between[0] + dr, between[1] + dc)
    return True


def placement_problems(new, to_create, player, blocks, enemy_cells, transmission_cells):
    """Check the game's new transmissions against §9.2 (in creation order, each one seeing the
    ones placed before it); returns a list of problems."""
    problems, queue, taken = [], list(new), set(transmission_cells)
    for origin in to_create:
        flags = (origin == "siphon", origin == "scheduled")
        free = [(r, c) for r in range(6) for c in range(6)
                if (r, c) != player and (r, c) not in blocks and (r, c) not in enemy_cells
                and (r, c) not in taken]
        sheltered = [cell for cell in free
                     if not in_line_of_fire(cell, player, blocks, enemy_cells)]
        if queue and (queue[0]["from_siphon"], queue[0]["from_scheduled"]) == flags:
            t = queue.pop(0)
            cell = (t["row"], t["col"])
            if t["turns_remaining"] != 1 or not 0 <= t["enemy_type"] < C.NUM_ENEMY_TYPES:
                problems.append(f"{origin} transmission has bad fields {t}")
            if cell not in free:
                problems.append(f"{origin} transmission on a cell that is not free: {cell}")
            elif cell not in sheltered and len(sheltered) >= RELIABLE_CELLS:
                problems.append(f"{origin} transmission at {cell} is in the line of fire although "
                                f"{len(sheltered)} free cells are not")
            taken.add(cell)
        elif len(free) >= RELIABLE_CELLS:
            problems.append(f"{origin} transmission missing although {len(free)} cells are free")
    if queue:
        problems.append(f"unexpected new transmissions {queue}")
    return problems


def reference_turns(before, game):
    """Every state the rules allow after the enemy turn run on `before`, as a list of
    (expected plain state, placement problems, events). New transmissions are taken from
    `game` (the game's result), after checking them."""
    if before["step_active"]:  # §8 step 1: skip everything, only clear the flag
        return [({**before, "step_active": False}, [], {"STEP skipped the turn"})]
    turn = before["turn"] + 1
    kept, hatched = count_down(before["transmissions"])
    enemies = before["enemies"] + hatched
    player = (before["player_row"], before["player_col"])
    blocks = block_cells(before)
    kept_cells = frozenset((t["row"], t["col"]) for t in kept)

    fires = (not before["scheduled_tasks_disabled"] and before["scheduled_interval"] > 0
             and turn >= before["next_scheduled_turn"])
    due = turn + before["scheduled_interval"] if fires else before["next_scheduled_turn"]
    to_create = ["scheduled"] * fires + ["siphon"] * before["pending_siphon_transmissions"]
    new = game["transmissions"][len(kept):]
    case_events = {"hatching"} if hatched else set()
    if fires:
        case_events.add("scheduled task fired")
    elif (before["scheduled_tasks_disabled"] and before["scheduled_interval"] > 0
          and turn >= before["next_scheduled_turn"]):
        case_events.add("CALM held back a due task")
    if before["pending_siphon_transmissions"]:
        case_events.add("pending siphon transmissions")
    if before["history_size"] == C.HISTORY_CAPACITY:
        case_events.add("full history")

    results = []
    outcomes = enemy_action_outcomes(enemies, player, before["hp"], blocks, kept_cells)
    for (positions, hp), events in outcomes.items():
        final_enemies = [{**en, "row": r, "col": c, "stunned": False,
                          "disabled_turns": max(0, en["disabled_turns"] - 1)}  # step 7
                         for en, (r, c) in zip(enemies, positions)]
        problems = placement_problems(new, to_create, player, blocks, set(positions), kept_cells)
        expected = {**before, "turn": turn, "hp": hp, "enemies": final_enemies,
                    "transmissions": kept + new, "next_scheduled_turn": due,
                    "pending_siphon_transmissions": 0,
                    "history_size": min(before["history_size"] + 1, C.HISTORY_CAPACITY)}
        results.append((expected, problems, events | case_events))
    return results


def differences(expected, game):
    return {name: (expected[name], game[name]) for name in expected if expected[name] != game[name]}


# ------------------------------------------------------------------------------------------
# Running the game.

def is_enemy_turn_action(action):
    return action <= C.ACTION_SIPHON or action == C.ACTION_WAIT


def resolve_and_step(state, action):
    """(state after the player's action, game's state after the step, outcome)."""
    resolved, outcome = compiled.RESOLVE(KEY, state, action)
    stepped = compiled.STEP(KEY, state, action)[0]
    return plain.to_plain(resolved), plain.to_plain(stepped), outcome


def check_case(state, action):
    """Compare the game's enemy turn with the reference; returns (mismatch text or None,
    events of the matching result)."""
    before, game, outcome = resolve_and_step(state, action)
    if bool(outcome.failed) or not bool(outcome.enemy_turn_follows):
        return "§5: a valid move/attack, siphon or WAIT must be followed by an enemy turn", set()
    candidates = reference_turns(before, game)
    order_mattered = {"several reachable results"} if len(candidates) > 1 else set()
    for expected, problems, events in candidates:
        if not problems and not differences(expected, game):
            return None, events | order_mattered
    expected, problems, _ = min(candidates, key=lambda c: len(c[1]) + len(differences(c[0], game)))
    lines = [f"    {name}: reference {ref} != game {got}"
             for name, (ref, got) in differences(expected, game).items()]
    lines += [f"    placement: {problem}" for problem in problems]
    return (f"no order of the {len(candidates)} reachable results matches; closest:\n"
            + "\n".join(lines)), set()


def with_history_size(state, size):
    # Only the count matters to the enemy turn: the push goes to slot (top + 1) % capacity.
    return state.replace(history_size=jnp.int32(size), history_top=jnp.int32(size - 1))


# ------------------------------------------------------------------------------------------
# Random scenarios.

def random_scenario_dict(rng):
    cells = [(r, c) for r in range(6) for c in range(6)]
    player = cells[rng.integers(36)]
    exit_position = [c for c in CORNERS if c != player][rng.integers(3)]
    density = rng.choice([0.0, 0.15, 0.3, 0.45])
    # The player stands on a block now and then (as after WARP), which walls it in for §8.1.
    blocks = [cell for cell in cells if cell != exit_position and rng.random() < density
              and (cell != player or rng.random() < 0.3)]

    def near_player():
        return (int(np.clip(player[0] + rng.integers(-2, 3), 0, 5)),
                int(np.clip(player[1] + rng.integers(-2, 3), 0, 5)))

    enemies = []
    for _ in range(rng.integers(0, 6)):
        kind = C.VIRUS if rng.random() < 0.4 else int(rng.choice([C.DAEMON, C.GLITCH, C.CRYPTOG]))
        where = rng.random()
        row, col = player if where < 0.06 else near_player() if where < 0.5 else cells[
            rng.integers(36)]
        hp = int(rng.integers(1, plain.MAX_HP[kind] + 1)) if rng.random() > 0.1 else int(
            rng.integers(-1, 1))
        enemies.append({"type": C.ENEMY_TYPE_NAMES[kind], "row": row, "col": col, "hp": hp,
                        "disabledTurns": int(rng.choice([0, 0, 0, 0, 0, 0, 1, 2])),
                        "stunned": bool(rng.random() < 0.15),
                        "spawnedFromSiphon": bool(rng.random() < 0.2),
                        "isFromScheduledTask": bool(rng.random() < 0.2)})
    transmissions = []
    for _ in range(rng.integers(0, 4)):
        row, col = near_player() if rng.random() < 0.5 else cells[rng.integers(36)]
        transmissions.append({"row": row, "col": col,
                              "turnsRemaining": int(rng.choice([0, 1, 1, 1, 2, 3])),
                              "enemyType": C.ENEMY_TYPE_NAMES[rng.integers(4)],
                              "spawnedFromSiphon": bool(rng.random() < 0.3),
                              "isFromScheduledTask": bool(rng.random() < 0.3)})
    due = int(rng.integers(1, 30))
    return {
        "player": {"row": player[0], "col": player[1], "hp": int(rng.integers(1, 4)),
                   "dataSiphons": int(rng.integers(0, 3)), "energy": int(rng.integers(0, 3)),
                   "credits": int(rng.integers(0, 4)), "attackDamage": int(rng.integers(1, 3))},
        "ownedPrograms": ["WAIT"] if rng.random() < 0.8 else [],
        "enemies": enemies, "transmissions": transmissions,
        "blocks": [{"row": r, "col": c, "type": "data", "points": int(rng.integers(1, 4))}
                   for r, c in blocks],
        "resources": [{"row": r, "col": c, "credits": 1} for r, c in cells
                      if (r, c) not in blocks and rng.random() < 0.1],
        "exitPosition": {"row": exit_position[0], "col": exit_position[1]},
        # Turns around the due turn, so scheduled tasks fire (or CALM holds them back).
        "turn": max(0, due + int(rng.integers(-2, 2))), "nextScheduledTaskTurn": due,
        "scheduledTaskInterval": int(rng.choice([0] + list(range(4, 13)))),
        "scheduledTasksDisabled": bool(rng.random() < 0.25),
        "stepActive": bool(rng.random() < 0.12),
        "pendingSiphonTransmissions": int(rng.choice([0, 0, 0, 1, 2, 3])),
    }


def random_history_size(rng):
    return int(rng.choice([0, int(rng.integers(1, C.HISTORY_CAPACITY)), C.HISTORY_CAPACITY],
                          p=[0.4, 0.4, 0.2]))


@pytest.fixture(scope="module")
def random_cases():
    """Run every random case once: (mismatch reports, Counter of covered events and actions)."""
    rng = np.random.default_rng(2024)
    mismatches, coverage = [], Counter()
    for case in range(NUM_CASES):
        d = random_scenario_dict(rng)
        state = with_history_size(scenario.from_dict(d), random_history_size(rng))
        valid = np.asarray(compiled.VALID_ACTIONS(state))
        choices = [a for a in range(C.NUM_ACTIONS) if valid[a] and is_enemy_turn_action(a)]
        if not choices:
            coverage["no enemy-turn action valid"] += 1
            continue
        action = int(rng.choice(choices))
        resolved, outcome = compiled.RESOLVE(KEY, state, action)
        if bool(outcome.exit_reached):
            # §5: the enemy turn never runs in a step that reached the exit.
            assert not bool(outcome.enemy_turn_follows), f"case {case}: {d}, action {action}"
            coverage["move reached the exit"] += 1
            continue
        mismatch, events = check_case(state, action)
        coverage["move" if action < C.ACTION_SIPHON else C.ACTION_NAMES[action]] += 1
        coverage.update(events)
        coverage["compared"] += 1
        if mismatch:
            mismatches.append(f"case {case}, action {C.ACTION_NAMES[action]} ({action}), "
                              f"history_size {plain.to_plain(state)['history_size']}\n"
                              f"  scenario {d}\n  {mismatch}")
    return mismatches, coverage


def test_enemy_turn_matches_the_reference_on_random_scenarios(random_cases):
    mismatches, _ = random_cases
    assert not mismatches, (f"{len(mismatches)} of {NUM_CASES} cases differ:\n"
                            + "\n".join(mismatches[:4]))


def test_random_cases_exercise_every_part_of_the_enemy_turn(random_cases):
    _, coverage = random_cases
    minimum = {"compared": 300, "move": 60, "siphon": 40, "WAIT": 40,
               "STEP skipped the turn": 20, "hatching": 60, "scheduled task fired": 40,
               "CALM held back a due task": 15, "pending siphon transmissions": 40,
               "full history": 30, "attack": 60, "several attacks": 10,
               "virus moved twice": 30, "move by rule 1": 100, "move by rule 2": 5,
               "move by rule 3": 10, "moved off the player's cell": 3,
               "enemy with hp <= 0 acted": 10, "moved off a shared cell": 5,
               "several reachable results": 10}
    plain.assert_covered(coverage, minimum, "cases")


# ------------------------------------------------------------------------------------------
# Hand-made cases for the behaviours the brief names (each also checked against the reference).

def wait_case(enemies=(), transmissions=(), player=(0, 0), **fields):
    d = {"player": {"row": player[0], "col": player[1], "energy": 1}, "ownedPrograms": ["WAIT"],
         "enemies": list(enemies), "transmissions": list(transmissions), **fields}
    state = scenario.from_dict(d)
    mismatch, _ = check_case(state, C.ACTION_WAIT)
    assert mismatch is None, mismatch
    return plain.to_plain(compiled.STEP(KEY, state, C.ACTION_WAIT)[0])


def enemy(kind, row, col, hp=None, **extra):
    return {"type": kind, "row": row, "col": col,
            "hp": plain.MAX_HP[C.ENEMY_TYPE_NAMES.index(kind)] if hp is None else hp, **extra}


def positions(state):
    return [(en["row"], en["col"]) for en in state["enemies"]]


def test_step_skips_the_whole_turn_and_keeps_stuns():
    after = wait_case([enemy("daemon", 0, 1, stunned=True), enemy("virus", 4, 0)],
                      [{"row": 3, "col": 3, "turnsRemaining": 1, "enemyType": "glitch"}],
                      stepActive=True, turn=12, pendingSiphonTransmissions=2)
    assert (after["turn"], after["hp"], positions(after)) == (12, 3, [(0, 1), (4, 0)])
    assert after["enemies"][0]["stunned"] and len(after["transmissions"]) == 1
    assert (after["step_active"], after["history_size"]) == (False, 0)
    assert after["pending_siphon_transmissions"] == 2


def test_hatchling_does_not_act_in_the_turn_it_hatches():
    after = wait_case(transmissions=[{"row": 0, "col": 1, "turnsRemaining": 1,
                                      "enemyType": "virus", "spawnedFromSiphon": True}])
    assert after["hp"] == 3 and positions(after) == [(0, 1)]
    assert after["enemies"][0] == {"kind": C.VIRUS, "row": 0, "col": 1, "hp": 2,
                                  "disabled_turns": 0, "stunned": False,
                                  "from_siphon": True, "from_scheduled": False}


def test_virus_moves_twice_then_moves_and_attacks():
    assert positions(wait_case([enemy("virus", 4, 0)])) == [(2, 0)]  # §8.1 example
    after = wait_case([enemy("virus", 0, 2)])
    assert positions(after) == [(0, 1)] and after["hp"] == 2


def test_an_attacker_does_not_act_again_and_several_enemies_each_hit_once():
    after = wait_case([enemy("virus", 0, 1), enemy("daemon", 1, 0), enemy("glitch", 2, 0)])
    # The glitch is walled off by the other two: rule 3 sends it up, away from the player.
    assert after["hp"] == 1 and positions(after) == [(0, 1), (1, 0), (3, 0)]


def test_enemies_with_no_hp_still_move_and_attack():
    after = wait_case([enemy("daemon", 0, 1, hp=0), enemy("cryptog", 3, 0, hp=0)])
    assert after["hp"] == 2 and positions(after) == [(0, 1), (2, 0)]


def test_enemy_on_the_players_cell_moves_to_the_first_free_neighbour():
    after = wait_case([enemy("daemon", 2, 2), enemy("glitch", 3, 2)], player=(2, 2))
    # up (3,2) holds the glitch, which attacks; down (1,2) is the first free neighbour.
    assert positions(after) == [(1, 2), (3, 2)] and after["hp"] == 2


# ------------------------------------------------------------------------------------------
# §5: free programs run no enemy turn.

def test_free_programs_do_not_run_an_enemy_turn():
    rng = np.random.default_rng(7)
    checked = Counter()
    for case in range(NUM_FREE_PROGRAM_CASES):
        d = random_scenario_dict(rng)
        d["ownedPrograms"] = list(C.PROGRAM_NAMES)
        d["player"].update(credits=20, energy=20, dataSiphons=1)
        state = with_history_size(scenario.from_dict(d), random_history_size(rng))
        valid = np.asarray(compiled.VALID_ACTIONS(state))
        # UNDO restores the turn counter, so it is left out.
        choices = [a for a in range(C.FIRST_PROGRAM_ACTION, C.NUM_ACTIONS) if valid[a]
                   and a not in (C.ACTION_WAIT, compiled.program_action("UNDO"))]
        action = int(rng.choice(choices))
        _, outcome = compiled.RESOLVE(KEY, state, action)
        if bool(outcome.exit_reached):
            continue
        before = plain.to_plain(state)
        after = plain.to_plain(compiled.STEP(KEY, state, action)[0])
        fields = ("turn", "history_size", "pending_siphon_transmissions", "scheduled_interval",
                  "next_scheduled_turn")
        changed = {f: (before[f], after[f]) for f in fields if before[f] != after[f]}
        assert not bool(outcome.enemy_turn_follows) and not changed, (
            f"case {case}, action {C.ACTION_NAMES[action]}: {changed}\n  scenario {d}")
        checked[action] += 1
    assert sum(checked.values()) >= 50 and len(checked) >= 12, checked
