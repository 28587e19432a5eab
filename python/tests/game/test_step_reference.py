"""How one step is put together (rules §5, §4.4, §7.7, §7.11, §7.15, §12.1, §13.2, §14),
checked against what the rules say follows from its parts, for random states and all 28 actions.

Oracle. For each case `compiled.RESOLVE` gives the player's action alone (§5 step 2: the state
right after it and its outcome), called with the step's own resolve key so that WARP and POLY
draw the same way as inside `compiled.STEP` (`transition._step_keys`, the key contract the
batched env relies on). Other modules check the parts themselves (moves, programs, the enemy
turn, the reward components, the observation, UNDO); this one checks their composition, written
from the rules text over the plain dicts of `plain.to_plain`:

- failed action (§4.4): the step's state is the input state, every array of it (history
  included); reward 0.0 with all 15 components 0.0; done; info "invalid_action";
- free action (§5 step 2, every program but WAIT, including STEP, UNDO and a WARP that misses
  the exit): the step's state is exactly the action's (same turn, enemies, transmissions,
  scheduled-task timing, and the same UNDO history: free actions push no snapshot, §7.15);
- move/attack not reaching the exit, siphon, WAIT (§5 step 4, §8) with STEP off: one full enemy
  turn on the action's state. The turn advances by exactly one; every field the enemy turn cannot
  touch is the action's; enemies keep their order, type, hp and origin flags, move at most their
  speed (not at all when disabled or stunned), lose the stun and one disabled turn; transmissions
  count down in order, hatchlings are appended in order; the scheduled task fires when due and
  the owed siphon transmissions appear, each on a free cell; hp only drops, by at most one per
  enemy that could act; and the snapshot pushed at the end is the step's final state (an UNDO
  right after the step restores it exactly, origin flags cleared);
- the same with STEP on (§7.11, §8 step 1): nothing but clearing the flag, no snapshot;
- reaching the exit (§5 step 3, §12.1, §12.2): no enemy turn ever. Below stage 8: hp + 1 (max
  3), the next stage with its fresh counters, the player, resources, score, programs, enemies,
  owed transmissions and history carried over unchanged, old transmissions kept as they were
  and `stage` new ones appended. On stage 8: hp + 1 and nothing else;
- every case: info "stage" and "score" are the step's final state's; the reward is the float32
  sum of the 15 components in table order (§14.1); every component follows from §5 step 1's
  before values (the input state), the final state and the action's outcome (§14); done is true
  exactly for a failed action, hp 0 after the step or victory (§13.2), with info
  "stage_complete", "won" and "death" to match; the observation is that of the final state (§15).

Randomness: states are `test_fuzz.random_scenario` boards (jitted once, fixed keys) varied from
a fixed-seed numpy generator: stage 1-8, STEP on, owed siphon transmissions, a scheduled task due
(with CALM on or off), hp 0, the player next to the exit moving onto it, every enemy on the exit
for a WARP there. The action is a random valid one or any of the 28. The enemy turn's random
processing order and placements are not reproduced: the checks above hold for every outcome the
rules allow.
"""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from hackmatrix.game import constants as C
from hackmatrix.game import observe, transition

import compiled
import plain
from plain import CORNERS, STAGE_TABLE
from test_fuzz import random_scenario
from test_pathfinding import reference_distance

NUM_CASES = 400
SEED = 20250514
SCENARIO = jax.jit(random_scenario)
OBSERVE = jax.jit(observe)

MOVES = (0, 1, 2, 3)
SIPHON = 4
WAIT = compiled.program_action("WAIT")
STEP_PROGRAM = compiled.program_action("STEP")
WARP = compiled.program_action("WARP")
UNDO = compiled.program_action("UNDO")
RESET = compiled.program_action("RESET")
TURN_ENDING = MOVES + (SIPHON, WAIT)  # §5 step 2 (a move only while it misses the exit)
MAX_STAGE = 8
# What the enemy turn (§8) cannot change: it only moves, stuns and decays enemies, counts down
# and hatches transmissions, hurts the player, advances the turn and the scheduled task, places
# transmissions and clears the owed count.
UNTOUCHED_BY_ENEMY_TURN = (
    "player_row", "player_col", "credits", "energy", "data_siphons", "score", "attack_damage",
    "owned", "cells", "show_activated", "scheduled_tasks_disabled", "atk_plus_uses", "stage",
    "exit_row", "exit_col", "step_active", "scheduled_interval")
# §12.2: what a new stage carries over from the completed one.
CARRIED_TO_NEXT_STAGE = (
    "player_row", "player_col", "credits", "energy", "data_siphons", "score", "attack_damage",
    "owned", "enemies", "pending_siphon_transmissions", "history_size")


# ------------------------------------------------------------------------------------------
# Drawing the cases.

def _set(state, core=None, **fields):
    """`state` with top-level `fields` and `core` fields replaced, dtypes kept (no recompile)."""
    def cast(old, new):
        return jnp.asarray(new, dtype=jnp.asarray(old).dtype)

    if core:
        state = state.replace(core=state.core.replace(
            **{name: cast(getattr(state.core, name), value) for name, value in core.items()}))
    return state.replace(**{name: cast(getattr(state, name), value)
                            for name, value in fields.items()})


def _next_to_exit(rng, state):
    """The player put next to the exit; returns the state and the direction onto the exit."""
    exit_cell = (int(state.exit_row), int(state.exit_col))
    options = [(d, (exit_cell[0] - dr, exit_cell[1] - dc))
               for d, (dr, dc) in enumerate(plain.DIRECTIONS)
               if 0 <= exit_cell[0] - dr < 6 and 0 <= exit_cell[1] - dc < 6]
    direction, (row, col) = options[rng.integers(len(options))]
    return _set(state, core={"player_row": row, "player_col": col}), direction


def _everything_on_the_exit(state):
    """Every enemy moved onto exitPosition (one added if there is none), no transmission, WARP
    owned and affordable: WARP must land on the exit."""
    core = state.core
    enemies, transmissions = core.enemies, core.transmissions
    active = np.asarray(enemies.active).copy()
    kind, hp = np.asarray(enemies.kind).copy(), np.asarray(enemies.hp).copy()
    if not active.any():
        active[0], kind[0], hp[0] = True, C.VIRUS, 2
    full = np.ones_like(np.asarray(enemies.row))
    enemies = enemies.replace(active=jnp.asarray(active), kind=jnp.asarray(kind),
                              hp=jnp.asarray(hp), row=jnp.asarray(full * int(state.exit_row)),
                              col=jnp.asarray(full * int(state.exit_col)))
    transmissions = transmissions.replace(active=jnp.zeros_like(transmissions.active))
    state = _with_program(state.replace(core=core.replace(enemies=enemies,
                                                          transmissions=transmissions)), WARP)
    return _set(state, core={"credits": max(int(core.credits), 2),
                             "energy": max(int(core.energy), 2)})


def _with_program(state, action):
    """`state` owning the program of `action`, with one more credit (enough for UNDO)."""
    owned = np.asarray(state.core.owned).copy()
    owned[action - C.FIRST_PROGRAM_ACTION] = True
    return _set(state, core={"owned": owned, "credits": int(state.core.credits) + 1})


def _draw_case(rng, scenario_key):
    """A random state and action (see the module docstring)."""
    state = SCENARIO(scenario_key)
    state = _set(state, stage=rng.integers(1, MAX_STAGE + 1))
    if rng.random() < 0.2:
        state = _set(state, step_active=True)
    if rng.random() < 0.3:
        state = _set(state, pending_siphon_transmissions=rng.integers(1, 4))
    if rng.random() < 0.35:  # the scheduled task is due at the next full enemy turn
        state = _set(state, core={"turn": int(state.next_scheduled_turn) - 1,
                                  "scheduled_tasks_disabled": rng.random() < 0.3})
    if rng.random() < 0.08:
        state = _set(state, core={"hp": 0})
    choice = rng.random()
    if choice < 0.12:
        if rng.random() < 0.4:
            state = _set(state, stage=MAX_STAGE)
        return _next_to_exit(rng, state)
    if choice < 0.16:
        return _everything_on_the_exit(state), WARP
    if choice < 0.19:  # fails: no charge (§4.2)
        return _set(state, core={"data_siphons": 0}), SIPHON
    if choice < 0.23:  # fails exactly when the history is empty (§7.1)
        return _with_program(state, UNDO), UNDO
    valid = np.flatnonzero(np.asarray(compiled.VALID_ACTIONS(state)))
    turn_ending = np.intersect1d(valid, TURN_ENDING)
    if choice < 0.47 and turn_ending.size:
        return state, int(rng.choice(turn_ending))
    if choice < 0.7:
        return state, int(rng.choice(valid))
    return state, int(rng.integers(C.NUM_ACTIONS))


# ------------------------------------------------------------------------------------------
# Running them.

def _snapshot_restored(state):
    """The plain state an UNDO right after `state` restores (UNDO made owned and affordable;
    the snapshot's credits and programs overwrite the change, §7.10)."""
    restored, outcome = compiled.RESOLVE(jax.random.PRNGKey(0), _with_program(state, UNDO), UNDO)
    assert not bool(outcome.failed), "UNDO with a non-empty history must be valid (§7.1)"
    return plain.to_plain(restored)


def _run_case(index, state, action, step_key):
    resolve_key = transition._step_keys(step_key)[0]
    resolved, outcome = compiled.RESOLVE(resolve_key, state, action)
    after, obs, reward, done, info = compiled.STEP(step_key, state, action)
    before_plain, resolved_plain, after_plain = map(plain.to_plain, (state, resolved, after))
    case = {
        "index": index, "action": action, "before": before_plain, "resolved": resolved_plain,
        "after": after_plain, "outcome": jax.device_get(outcome._asdict()),
        "reward": np.float32(reward), "done": bool(done),
        "info": {name: np.asarray(value) for name, value in info.items()
                 if name != "reward_components"},
        "components": {name: np.float32(info["reward_components"][name])
                       for name in C.REWARD_COMPONENTS},
        "same_as_input": _same_arrays(state, after),
        "same_history_as_action": _same_arrays(
            (resolved.history, resolved.history_top, resolved.history_size),
            (after.history, after.history_top, after.history_size)),
        "obs_is_final_state's": _same_arrays(obs, OBSERVE(after)),
    }
    case["kind"] = _kind(case)
    case["restored"] = _snapshot_restored(after) if case["kind"] == "enemy turn" else None
    return case


def _same_arrays(a, b):
    leaves_a, leaves_b = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    return len(leaves_a) == len(leaves_b) and all(
        np.array_equal(np.asarray(x), np.asarray(y)) for x, y in zip(leaves_a, leaves_b))


def _moved_onto(case):
    """The cell a move/attack walked onto (§6.1), or None."""
    before, resolved = case["before"], case["resolved"]
    cell = (resolved["player_row"], resolved["player_col"])
    moved = case["action"] in MOVES and cell != (before["player_row"], before["player_col"])
    return cell if moved else None


def _exit_reached(case):
    """§5 step 3 / §12.1: a move onto the exit cell, or WARP landing on exitPosition."""
    before, resolved = case["before"], case["resolved"]
    cell = _moved_onto(case)
    if cell is not None:
        return before["cells"]["content"][cell[0]][cell[1]] == C.EXIT
    return case["action"] == WARP and (resolved["player_row"], resolved["player_col"]) == (
        resolved["exit_row"], resolved["exit_col"])


def _kind(case):
    """What §5 makes of the action: failed, exit, enemy turn, skipped turn (STEP) or free."""
    if case["outcome"]["failed"]:
        return "failed"
    if _exit_reached(case):
        return "exit"
    if case["action"] in TURN_ENDING:
        return "skipped turn" if case["resolved"]["step_active"] else "enemy turn"
    return "free"


@pytest.fixture(scope="module")
def cases():
    rng = np.random.default_rng(SEED)
    scenario_keys = jax.random.split(jax.random.PRNGKey(SEED), NUM_CASES)
    step_keys = jax.random.split(jax.random.PRNGKey(SEED + 1), NUM_CASES)
    drawn = [_draw_case(rng, key) for key in scenario_keys]
    return [_run_case(i, state, action, key)
            for i, ((state, action), key) in enumerate(zip(drawn, step_keys))]


def _report(failures):
    return f"{len(failures)} violation(s):\n" + "\n".join(failures[:8])


def _label(case):
    return f"case {case['index']} ({C.ACTION_NAMES[case['action']]}, {case['kind']})"


def _of_kind(cases, *kinds):
    return [case for case in cases if case["kind"] in kinds]


# ------------------------------------------------------------------------------------------
# The composition checks.

def _manhattan(a, b):
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def _free_for_new_transmission(state, transmission, index):
    """§9.2's free cell, judged on the final state (nothing moves after placement, and later
    placements only take more cells): not the player's, no block, no enemy, no other
    transmission."""
    cell = (transmission["row"], transmission["col"])
    others = [(t["row"], t["col"]) for j, t in enumerate(state["transmissions"]) if j != index]
    return (cell != (state["player_row"], state["player_col"]) and not plain.block_at(state, *cell)
            and cell not in [(e["row"], e["col"]) for e in state["enemies"]]
            and cell not in others)


def _any_free_cell(state):
    occupied = ({(e["row"], e["col"]) for e in state["enemies"]}
                | {(t["row"], t["col"]) for t in state["transmissions"]}
                | {(state["player_row"], state["player_col"])})
    return any((r, c) not in occupied and not plain.block_at(state, r, c)
               for r in range(6) for c in range(6))


def _check_new_transmissions(after, first_new, expected_flags, rule):
    """The transmissions appended from list index `first_new`: their number (fewer only when no
    free cell is left), countdown 1, a legal type, origin flags in order, free cells."""
    problems = []
    new = after["transmissions"][first_new:]
    if len(new) > len(expected_flags) or (len(new) < len(expected_flags)
                                          and _any_free_cell(after)):
        problems.append(f"{rule}: {len(new)} new transmission(s), expected "
                        f"{len(expected_flags)}")
    placed_flags = expected_flags[:len(new)] if len(new) == len(expected_flags) else None
    for offset, transmission in enumerate(new):
        flags = (transmission["from_siphon"], transmission["from_scheduled"])
        if (transmission["turns_remaining"] != 1 or transmission["enemy_type"] not in range(4)
                or (placed_flags is not None and flags != placed_flags[offset])):
            problems.append(f"{rule}: new transmission {transmission} (§9.2: countdown 1, a "
                            f"random type, origin flags (siphon, scheduled) "
                            f"{placed_flags[offset] if placed_flags else '?'})")
        if not _free_for_new_transmission(after, transmission, first_new + offset):
            problems.append(f"{rule}: new transmission {transmission} not on a free cell (§9.2)")
    return problems


def _enemy_turn_problems(resolved, after):
    """§8 on the action's state `resolved`, as far as it does not depend on the random order
    and placement."""
    problems = [f"§8: the enemy turn changed {name}: action left {resolved[name]}, step gave "
                f"{after[name]}" for name in UNTOUCHED_BY_ENEMY_TURN
                if resolved[name] != after[name]]
    turn = resolved["turn"] + 1
    if after["turn"] != turn:
        problems.append(f"§8 step 2: turn must advance once, {resolved['turn']} -> {turn}, got "
                        f"{after['turn']}")

    # Transmissions (§8 step 3): count down in order; hatched ones become appended enemies.
    survivors = [dict(t, turns_remaining=t["turns_remaining"] - 1)
                 for t in resolved["transmissions"] if t["turns_remaining"] > 1]
    hatching = [t for t in resolved["transmissions"] if t["turns_remaining"] <= 1]
    if after["transmissions"][:len(survivors)] != survivors:
        problems.append(f"§8 step 3: transmissions must count down in order: expected "
                        f"{survivors} first, got {after['transmissions']}")

    # Enemies (§8 steps 3, 4, 7): same list, then the hatchlings; no death in the enemy turn.
    hatchlings = [{"kind": t["enemy_type"], "row": t["row"], "col": t["col"],
                   "hp": plain.MAX_HP[t["enemy_type"]], "disabled_turns": 0, "stunned": False,
                   "from_siphon": t["from_siphon"], "from_scheduled": t["from_scheduled"]}
                  for t in hatching]
    old = resolved["enemies"]
    if len(after["enemies"]) != len(old) + len(hatchlings):
        problems.append(f"§8: {len(old)} enemies + {len(hatchlings)} hatchlings expected, got "
                        f"{len(after['enemies'])}")
    else:
        if after["enemies"][len(old):] != hatchlings:
            problems.append(f"§8 steps 3, 7: hatchlings {hatchlings} expected at the end of the "
                            f"list, got {after['enemies'][len(old):]}")
        for enemy, now in zip(old, after["enemies"]):
            acts = enemy["disabled_turns"] == 0 and not enemy["stunned"]
            speed = 2 if enemy["kind"] == C.VIRUS else 1
            reach = _manhattan((enemy["row"], enemy["col"]), (now["row"], now["col"]))
            kept = {k: enemy[k] for k in ("kind", "hp", "from_siphon", "from_scheduled")}
            if ({k: now[k] for k in kept} != kept or now["stunned"]
                    or now["disabled_turns"] != max(0, enemy["disabled_turns"] - 1)
                    or reach > (speed if acts else 0)):
                problems.append(f"§8 steps 4, 7: enemy {enemy} became {now}")
    actors = sum(e["disabled_turns"] == 0 and not e["stunned"] for e in old)
    if not 0 <= resolved["hp"] - after["hp"] <= actors or after["hp"] < 0:
        problems.append(f"§8 step 4: hp {resolved['hp']} -> {after['hp']} with {actors} enemies "
                        f"able to act")

    # Scheduled task (§8 step 5, §10) and owed siphon transmissions (§8 step 6).
    fires = (not resolved["scheduled_tasks_disabled"] and resolved["scheduled_interval"] > 0
             and turn >= resolved["next_scheduled_turn"])
    next_turn = turn + resolved["scheduled_interval"] if fires else resolved["next_scheduled_turn"]
    if after["next_scheduled_turn"] != next_turn:
        problems.append(f"§8 step 5: next scheduled turn {next_turn} expected, got "
                        f"{after['next_scheduled_turn']}")
    if after["pending_siphon_transmissions"] != 0:
        problems.append("§8 step 6: the owed siphon transmissions must be cleared")
    expected_flags = [(False, True)] * fires + [(True, False)] * resolved[
        "pending_siphon_transmissions"]
    problems += _check_new_transmissions(after, len(survivors), expected_flags, "§8 steps 5-6")
    history = min(C.HISTORY_CAPACITY, resolved["history_size"] + 1)
    if after["history_size"] != history:
        problems.append(f"§7.15: a full enemy turn pushes one snapshot: history size "
                        f"{resolved['history_size']} -> {history}, got {after['history_size']}")
    return problems


def _snapshot_problems(case):
    """§8 step 8, §7.15: the snapshot pushed is the state at the very end of the step."""
    expected = copy.deepcopy(case["after"])
    for piece in expected["enemies"] + expected["transmissions"]:
        piece["from_siphon"] = piece["from_scheduled"] = False
    expected["history_size"] -= 1
    return [f"§8 step 8: the snapshot is not the step's final state: {diff}"
            for diff in plain.state_diff(expected, case["restored"])]


def _next_stage_problems(resolved, after):
    """§12.1 and §12.2 on the action's state, below stage 8."""
    stage = resolved["stage"] + 1
    interval = 13 - stage
    expected = {"hp": min(3, resolved["hp"] + 1), "stage": stage, "turn": 0,
                "scheduled_interval": interval, "next_scheduled_turn": interval,
                "show_activated": False, "scheduled_tasks_disabled": False, "step_active": False,
                "atk_plus_uses": 0, **{name: resolved[name] for name in CARRIED_TO_NEXT_STAGE}}
    problems = [f"§12.1/§12.2: {name} must be {value}, got {after[name]}"
                for name, value in expected.items() if after[name] != value]
    kept = len(resolved["transmissions"])
    if after["transmissions"][:kept] != resolved["transmissions"]:
        problems.append(f"§12.2: the transmissions must be carried over untouched (no "
                        f"countdown, no enemy turn): {resolved['transmissions']} became "
                        f"{after['transmissions'][:kept]}")
    problems += _check_new_transmissions(after, kept, [(False, False)] * stage, "§12.2 step 7")
    exit_cell = (after["exit_row"], after["exit_col"])
    if (exit_cell not in CORNERS or exit_cell == (after["player_row"], after["player_col"])
            or after["cells"]["content"][exit_cell[0]][exit_cell[1]] != C.EXIT):
        problems.append(f"§12.2 step 3: the new exit {exit_cell} must be an exit cell on a "
                        f"corner other than the player's")
    return problems


def test_failed_action_changes_nothing_pays_nothing_and_ends_the_episode(cases):
    failures = []
    for case in _of_kind(cases, "failed"):
        components = {n: v for n, v in case["components"].items() if v != 0.0}
        if not case["same_as_input"]:
            failures.append(f"{_label(case)}: §4.4 the state must be left completely unchanged: "
                            + "; ".join(plain.state_diff(case["before"], case["after"])[:4]
                                        or ["the UNDO history differs"]))
        if case["reward"] != 0.0 or components:
            failures.append(f"{_label(case)}: §4.4/§14.1 reward must be exactly 0.0 with every "
                            f"component 0, got {case['reward']} {components}")
        if not case["done"] or not case["info"]["invalid_action"]:
            failures.append(f"{_label(case)}: §4.4 done must be true and info invalid_action "
                            f"set, got done {case['done']}, {case['info']['invalid_action']}")
        if case["info"]["stage_complete"] or case["info"]["won"]:
            failures.append(f"{_label(case)}: §4.4 a failed action completes no stage")
    assert not failures, _report(failures)


def test_valid_actions_are_not_reported_invalid(cases):
    failures = [f"{_label(case)}: §4.4 info invalid_action set for an action that succeeded"
                for case in cases if case["kind"] != "failed" and case["info"]["invalid_action"]]
    assert not failures, _report(failures)


def test_free_action_is_the_whole_step(cases):
    """§5 step 2: no enemy turn, no turn advance, no snapshot (§7.15) after a free action."""
    failures = []
    for case in _of_kind(cases, "free"):
        diffs = plain.state_diff(case["resolved"], case["after"])
        if diffs or not case["same_history_as_action"]:
            failures.append(f"{_label(case)}: §5 a free action ends the step as the action left "
                            f"it (no enemy turn, turn not advanced, no snapshot §7.15): "
                            + "; ".join(diffs[:4] or ["the UNDO history differs"]))
    assert not failures, _report(failures)


def test_turn_ending_action_runs_one_enemy_turn_on_the_action_state(cases):
    """§5 step 4, §7.7: move/attack (missing the exit), siphon and WAIT, STEP off."""
    failures = []
    for case in _of_kind(cases, "enemy turn"):
        problems = (_enemy_turn_problems(case["resolved"], case["after"])
                    + _snapshot_problems(case))
        failures += [f"{_label(case)}: {problem}" for problem in problems[:3]]
    assert not failures, _report(failures)


def test_step_skips_the_enemy_turn_of_a_turn_ending_action(cases):
    """§7.11, §8 step 1: only stepActive is cleared: no turn advance, no snapshot."""
    failures = []
    for case in _of_kind(cases, "skipped turn"):
        expected = dict(case["resolved"], step_active=False)
        diffs = plain.state_diff(expected, case["after"])
        if diffs or not case["same_history_as_action"]:
            failures.append(f"{_label(case)}: §8 step 1 with STEP active the enemy turn only "
                            f"clears the flag: " + "; ".join(diffs[:4]
                                                           or ["the UNDO history differs"]))
    assert not failures, _report(failures)


def test_reaching_the_exit_completes_the_stage_without_an_enemy_turn(cases):
    """§5 steps 3-4, §12.1: the next stage below stage 8, only hp + 1 on stage 8."""
    failures = []
    for case in _of_kind(cases, "exit"):
        resolved, after = case["resolved"], case["after"]
        if resolved["stage"] == MAX_STAGE:
            expected = dict(resolved, hp=min(3, resolved["hp"] + 1))
            problems = [f"§12.1 step 3: winning changes only hp: {diff}"
                        for diff in plain.state_diff(expected, after)]
        else:
            problems = _next_stage_problems(resolved, after)
        if not case["same_history_as_action"]:
            problems.append("§5: no enemy turn, so no snapshot, when the exit is reached")
        failures += [f"{_label(case)}: {problem}" for problem in problems[:3]]
    assert not failures, _report(failures)


def test_done_and_info_flags_follow_the_step(cases):
    """§13.2: done exactly on a failed action, hp 0 after the step or victory; info stage and
    score are the final state's; stage complete, won and death as §13.2 reports them."""
    failures = []
    for case in cases:
        after, info = case["after"], case["info"]
        valid = case["kind"] != "failed"
        completed = case["kind"] == "exit"
        won = completed and case["resolved"]["stage"] == MAX_STAGE
        expected = {"done": not valid or after["hp"] == 0 or won,
                    "stage": after["stage"], "score": after["score"],
                    "stage_complete": completed, "won": won}
        got = {"done": case["done"], "stage": int(info["stage"]), "score": int(info["score"]),
               "stage_complete": bool(info["stage_complete"]), "won": bool(info["won"])}
        if valid:
            expected["death"], got["death"] = after["hp"] == 0, bool(info["death"])
        wrong = {name: (value, got[name]) for name, value in expected.items()
                 if got[name] != value}
        if wrong:
            failures.append(f"{_label(case)}: §13.2 (expected, got): {wrong}")
    assert not failures, _report(failures)


def test_observation_is_that_of_the_final_state(cases):
    failures = [f"{_label(case)}: §15 the observation must be computed from the state after "
                f"the step" for case in cases if not case["obs_is_final_state's"]]
    assert not failures, _report(failures)


def _distance(state):
    """§14.2 D(player -> exitPosition) on `state`'s board."""
    blocks = {(r, c) for r in range(6) for c in range(6) if plain.block_at(state, r, c)}
    return reference_distance((state["player_row"], state["player_col"]),
                              (state["exit_row"], state["exit_col"]), blocks)


def _expected_components(case):
    """§14.1 from §5 step 1's before values (the input state), the final state and the
    action's outcome."""
    before, after, outcome, action = case["before"], case["after"], case["outcome"], case["action"]
    completed = case["kind"] == "exit"
    won = completed and case["resolved"]["stage"] == MAX_STAGE
    dead = after["hp"] == 0
    walked_onto = _moved_onto(case)
    collected = (walked_onto is not None
                 and before["cells"]["content"][walked_onto[0]][walked_onto[1]]
                 == C.DATA_SIPHON)
    delta = 0 if dead else _distance(before) - (0 if completed else _distance(after))
    player = (after["player_row"], after["player_col"])
    siphon_death = (case["kind"] in ("enemy turn", "skipped turn") and dead and any(
        e["from_siphon"] and _manhattan((e["row"], e["col"]), player) == 1
        for e in after["enemies"]))
    return {
        "step_penalty": -0.01,
        "stage": STAGE_TABLE[after["stage"] - 2] if completed else 0.0,
        "score": 0.5 * (after["score"] - before["score"]),
        "kills": 0.3 * int(outcome["kills"]),
        "dataSiphon": 1.0 if collected else 0.0,
        "distance": 0.05 * max(0, delta),
        "victory": 500 + 100 * after["score"] if won else 0.0,
        "death": -0.5 * sum(STAGE_TABLE[:after["stage"] - 1]) if dead else 0.0,
        "resourceGain": 0.05 * (after["credits"] - before["credits"])
        + 0.05 * (after["energy"] - before["energy"]),
        "resourceHolding": 0.01 * (after["credits"] + after["energy"]) if completed else 0.0,
        "damagePenalty": -1.0 * max(0, before["hp"] - after["hp"]),
        "hpRecovery": 1.0 * max(0, after["hp"] - before["hp"]),
        "siphonQuality": float(outcome["siphon_quality"]) if action == SIPHON else 0.0,
        "programWaste": -0.3 if action == RESET and before["hp"] == 2 else 0.0,
        "siphonDeathPenalty": -10.0 if siphon_death else 0.0,
    }


def test_reward_is_the_sum_of_components_from_the_before_and_after_values(cases):
    """§5 steps 1 and 5, §14.1: components from the step's start and end; the reward is their
    float32 sum in table order."""
    failures = []
    for case in cases:
        total = np.float32(0.0)
        for name in C.REWARD_COMPONENTS:
            total = np.float32(total + case["components"][name])
        if total != case["reward"]:
            failures.append(f"{_label(case)}: §14.1 reward {case['reward']} is not the float32 "
                            f"sum of its components {total}")
        if case["kind"] == "failed":
            continue  # §4.4: all zero, checked above
        expected = _expected_components(case)
        wrong = {name: (round(value, 6), float(case["components"][name]))
                 for name, value in expected.items()
                 if not np.isclose(case["components"][name], value, rtol=1e-6, atol=1e-6)}
        if wrong:
            failures.append(f"{_label(case)}: §14.1 components (expected, got): {wrong}")
    assert not failures, _report(failures)


def test_the_cases_cover_every_part_of_the_step(cases):
    """Minimum counts, so the checks above cannot pass on trivial cases."""
    kinds = [case["kind"] for case in cases]
    counts = {kind: kinds.count(kind) for kind in
              ("failed", "free", "enemy turn", "skipped turn", "exit")}
    enemy_turns = _of_kind(cases, "enemy turn")
    exits = _of_kind(cases, "exit")
    extra = {
        "wins": sum(case["resolved"]["stage"] == MAX_STAGE for case in exits),
        "WARP onto the exit": sum(case["action"] == WARP for case in exits),
        "deaths": sum(case["after"]["hp"] == 0 and case["kind"] != "failed" for case in cases),
        "hp lost in an enemy turn": sum(c["after"]["hp"] < c["resolved"]["hp"]
                                        for c in enemy_turns),
        "hatchings": sum(any(t["turns_remaining"] <= 1 for t in c["resolved"]["transmissions"])
                         for c in enemy_turns),
        "scheduled tasks fired": sum(c["after"]["next_scheduled_turn"]
                                     != c["resolved"]["next_scheduled_turn"]
                                     for c in enemy_turns),
        "owed siphon transmissions placed": sum(c["resolved"]["pending_siphon_transmissions"] > 0
                                                for c in enemy_turns),
        "WAIT": sum(c["action"] == WAIT for c in enemy_turns + _of_kind(cases, "skipped turn")),
        "STEP program": sum(c["action"] == STEP_PROGRAM for c in _of_kind(cases, "free")),
        "UNDO": sum(c["action"] == UNDO for c in _of_kind(cases, "free")),
        "valid action numbers": len({c["action"] for c in cases if c["kind"] != "failed"}),
        "failed action numbers": len({c["action"] for c in _of_kind(cases, "failed")}),
        "failed moves": sum(c["action"] in MOVES for c in _of_kind(cases, "failed")),
        "failed siphons": sum(c["action"] == SIPHON for c in _of_kind(cases, "failed")),
        "failed UNDOs": sum(c["action"] == UNDO for c in _of_kind(cases, "failed")),
    }
    minimum = {"failed": 60, "free": 60, "enemy turn": 60, "skipped turn": 12, "exit": 30,
               "wins": 8, "WARP onto the exit": 8, "deaths": 10, "hp lost in an enemy turn": 10,
               "hatchings": 20, "scheduled tasks fired": 10,
               "owed siphon transmissions placed": 10, "WAIT": 5, "STEP program": 3, "UNDO": 4,
               "valid action numbers": 26, "failed action numbers": 20, "failed moves": 3,
               "failed siphons": 5,
               "failed UNDOs": 3}
    plain.assert_covered({**counts, **extra}, minimum, "cases")
