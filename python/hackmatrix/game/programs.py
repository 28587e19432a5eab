"""The 23 program effects (rules §7), as one branch-free function.

Under `vmap` every program's effect is computed on every env, so the effects are organised by
the state field they change rather than by program, and they share their expensive parts:

- enemies: PUSH/PULL targets come from one routine with a sign flip (`_pushed_targets`);
  DEBUG/ROW/COL/HACK/ANTI-V/D_BOM select one hit mask and one damage amount, POLY sets hp the
  same way; then one stable compaction (`state.compact`) removes the dead and the CRASH/WARP victims;
- "first piece on a cell" serves both the PUSH/PULL claims and the CRASH/WARP kill rule, with
  one scatter (`_first_with_id`) instead of a [K, K] comparison;
- every other field is one `jnp.where` on the program index, and a field no program touches is
  passed through unchanged so XLA has nothing to select.

UNDO never selects over the history buffer: `history.pop` moves the pointers and restores `core`.
`apply` does not check validity (the step masks invalid actions, §4.4) but is safe on any state.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from hackmatrix.game import constants as C
from hackmatrix.game import history
from hackmatrix.game import outcome as O
from hackmatrix.game import spawning
from hackmatrix.game import state as S

# Programs whose effect ends with "remove the dead" (§7 header).
_REMOVES_DEAD = np.zeros(C.NUM_PROGRAMS, dtype=bool)
_REMOVES_DEAD[[C.POLY, C.DEBUG, C.ROW, C.COL, C.D_BOM, C.ANTI_V, C.HACK]] = True

# Bits of the per-cell code that enemies and transmissions look up with one gather.
_BLOCK_BIT, _SIPHONED_BIT, _CLEARED_BIT = 1, 2, 4
# ceil(2**32 / 3) and ceil(2**33 / 3): thresholds of floor(3x / 2**32) for a uint32 x.
_ONE_THIRD_OF_2_32 = np.uint32(0x55555556)
_TWO_THIRDS_OF_2_32 = np.uint32(0xAAAAAAAB)
# POLY draws one type shift per enemy slot, six base-3 digits per random word.
_POLY_DIGITS_PER_WORD = 6
_POLY_WORDS = -(-C.MAX_ENEMIES // _POLY_DIGITS_PER_WORD)
# Sentinel score for an impossible PUSH/PULL candidate: below any signed Manhattan distance.
_NO_CANDIDATE = -100


def _ring_of_8(row, col):
    """bool[6,6]: cells at Chebyshev distance 1 from (row, col), i.e. the in-bounds ring (§1)."""
    rows = jnp.arange(C.BOARD_SIZE)[:, None]
    cols = jnp.arange(C.BOARD_SIZE)[None, :]
    return jnp.maximum(jnp.abs(rows - row), jnp.abs(cols - col)) == 1


def _first_with_id(ids, valid):
    """bool[K]: valid slots that come first in list order among the valid slots with their id.

    `ids` are cell numbers 0..35. One scatter-min of slot numbers per cell replaces a [K, K]
    comparison (which costs far more under vmap).
    """
    slots = jnp.arange(ids.shape[0], dtype=jnp.int32)
    cell = jnp.where(valid, ids, C.NUM_CELLS)  # out of range: dropped by the scatter
    first = jnp.full((C.NUM_CELLS,), ids.shape[0], jnp.int32).at[cell].min(slots, mode="drop")
    return valid & (first[jnp.clip(ids, 0, C.NUM_CELLS - 1)] == slots)


def _pushed_targets(enemies, player_row, player_col, is_pull):
    """Target cell of every enemy for PUSH (§7.2), or PULL (§7.3) when `is_pull`.

    Returns (has_target, row, col). PULL is PUSH with the direction reversed, the player's cell
    excluded and the smallest instead of the largest distance: scoring candidates by
    `away * distance` covers both, and taking a later candidate only when strictly better keeps
    the earliest one on ties, as both rules require.
    """
    away = jnp.where(is_pull, -1, 1)
    row, col = enemies.row, enemies.col
    d_row = away * jnp.sign(row - player_row)
    d_col = away * jnp.sign(col - player_col)
    # Candidates in rule order: diagonal, vertical (if d_row != 0), horizontal (if d_col != 0).
    candidates = ((row + d_row, col + d_col, True), (row + d_row, col, d_row != 0),
                  (row, col + d_col, d_col != 0))
    best_row, best_col, best_score = row, col, jnp.full_like(row, _NO_CANDIDATE)
    for cand_row, cand_col, allowed in candidates:
        in_bounds = ((cand_row >= 0) & (cand_row < C.BOARD_SIZE)
                     & (cand_col >= 0) & (cand_col < C.BOARD_SIZE))
        on_player = (cand_row == player_row) & (cand_col == player_col)
        distance = jnp.abs(cand_row - player_row) + jnp.abs(cand_col - player_col)
        score = jnp.where(allowed & in_bounds & ~(is_pull & on_player), away * distance,
                          _NO_CANDIDATE)
        better = score > best_score
        best_row = jnp.where(better, cand_row, best_row)
        best_col = jnp.where(better, cand_col, best_col)
        best_score = jnp.maximum(score, best_score)
    return enemies.active & (best_score > _NO_CANDIDATE), best_row, best_col


def _base3_digits(words, digits_per_word):
    """Uniform digits 0..2 from uniform uint32 words, several per word.

    digit = floor(3x / 2**32), then x <- 3x mod 2**32, a bijection of uint32 (3 is odd), so x
    stays uniform; each digit deviates from uniform by less than 3**digits_per_word / 2**32.
    Cheaper than one random word per digit: the random draw dominates otherwise.
    """
    digits = []
    for _ in range(digits_per_word):
        digits.append((words >= _ONE_THIRD_OF_2_32).astype(jnp.int32)
                      + (words >= _TWO_THIRDS_OF_2_32).astype(jnp.int32))
        words = words * jnp.uint32(3)
    return jnp.stack(digits, axis=-1).reshape(-1)


def _warp_target(random_word, enemies, transmissions):
    """Uniform pick over the enemies-then-transmissions list (§7.5).

    Returns (has_target, target_is_enemy, row, col). `random_word % count` is uniform up to a
    bias below count / 2**32.
    """
    enemy_count = jnp.sum(enemies.active, dtype=jnp.int32)
    total = enemy_count + jnp.sum(transmissions.active, dtype=jnp.int32)
    pick = (random_word % jnp.maximum(total, 1).astype(jnp.uint32)).astype(jnp.int32)
    target_is_enemy = pick < enemy_count
    enemy_slot = jnp.clip(pick, 0, C.MAX_ENEMIES - 1)
    transmission_slot = jnp.clip(pick - enemy_count, 0, C.MAX_TRANSMISSIONS - 1)
    row = jnp.where(target_is_enemy, enemies.row[enemy_slot], transmissions.row[transmission_slot])
    col = jnp.where(target_is_enemy, enemies.col[enemy_slot], transmissions.col[transmission_slot])
    return total > 0, target_is_enemy, row, col


def _nearest_daemon(enemies, player_row, player_col):
    """(exists, slot) of the daemon nearest to the player by Manhattan distance, earliest on ties.

    One min-reduction over distance * K + slot orders by distance, then by list position.
    """
    capacity = enemies.kind.shape[0]
    is_daemon = enemies.active & (enemies.kind == C.DAEMON)
    distance = jnp.abs(enemies.row - player_row) + jnp.abs(enemies.col - player_col)
    slots = jnp.arange(capacity, dtype=jnp.int32)
    nearest = jnp.min(jnp.where(is_daemon, distance * capacity + slots, jnp.iinfo(jnp.int32).max))
    return jnp.any(is_daemon), nearest % capacity


def apply(key, state: S.GameState, program_index) -> tuple[S.GameState, O.ActionOutcome]:
    """Pay the program's cost, then apply its effect (§7). `program_index` is 0..22 (traced)."""
    program = jnp.asarray(program_index, jnp.int32)

    def is_program(index):
        return program == index

    core = state.core
    enemies, transmissions, cells = core.enemies, core.transmissions, core.cells
    player_row, player_col = core.player_row, core.player_col
    # One draw serves POLY (type shifts) and WARP (the last word).
    random_words = spawning.random_words(key, _POLY_WORDS + 1)

    # --- Cells whose pieces CRASH (ring of 8, §7.4) and WARP (landing cell, §7.5) remove.
    warp_has_target, warp_hits_enemy, warp_row, warp_col = _warp_target(
        random_words[-1], enemies, transmissions)
    does_warp = is_program(C.WARP) & warp_has_target
    rows = jnp.arange(C.BOARD_SIZE)[:, None]
    cols = jnp.arange(C.BOARD_SIZE)[None, :]
    landing = does_warp & (rows == warp_row) & (cols == warp_col)
    crash_ring = is_program(C.CRASH) & _ring_of_8(player_row, player_col)
    cell_is_block = C.is_block(cells.content)
    enemy_cell_code = (jnp.where(cell_is_block, _BLOCK_BIT, 0)
                       | jnp.where(cells.siphoned, _SIPHONED_BIT, 0)
                       | jnp.where(crash_ring | (landing & warp_hits_enemy), _CLEARED_BIT, 0))
    enemy_cell = enemies.row * C.BOARD_SIZE + enemies.col
    enemy_code = enemy_cell_code.reshape(C.NUM_CELLS)[enemy_cell]
    transmission_cleared_cells = (crash_ring | (landing & ~warp_hits_enemy)).reshape(C.NUM_CELLS)
    transmission_cell = transmissions.row * C.BOARD_SIZE + transmissions.col
    transmission_cleared = transmissions.active & transmission_cleared_cells[transmission_cell]

    # --- PUSH / PULL targets (§7.2, §7.3). The first enemy in list order targeting a cell claims
    # it; CRASH / WARP count one kill per cell, by its earliest piece. Programs are exclusive, so
    # one first-per-cell pass serves both: over target cells when pushing, else current cells.
    moves = is_program(C.PUSH) | is_program(C.PULL)
    has_target, target_row, target_col = _pushed_targets(enemies, player_row, player_col,
                                                         is_program(C.PULL))
    first_on_cell = _first_with_id(
        jnp.where(moves, target_row * C.BOARD_SIZE + target_col, enemy_cell),
        jnp.where(moves, has_target, enemies.active))
    enemy_row = jnp.where(moves & first_on_cell, target_row, enemies.row)
    enemy_col = jnp.where(moves & first_on_cell, target_col, enemies.col)
    enemy_cleared = enemies.active & ((enemy_code & _CLEARED_BIT) != 0)

    # --- POLY (§7.6): a new type, damage taken kept (hp moves by the change of maximum hp).
    max_hp = jnp.asarray(C.ENEMY_MAX_HP)
    shift = 1 + _base3_digits(random_words[:-1], _POLY_DIGITS_PER_WORD)[:C.MAX_ENEMIES]
    poly_kind = (enemies.kind + shift) % C.NUM_ENEMY_TYPES
    polymorphs = is_program(C.POLY) & enemies.active
    enemy_kind = jnp.where(polymorphs, poly_kind, enemies.kind)

    # --- Damage programs (§7.8, 7.9, 7.16, 7.18, 7.22): one selected hit mask and amount.
    has_daemon, bomb_slot = _nearest_daemon(enemies, player_row, player_col)
    bombs = is_program(C.D_BOM) & has_daemon
    bombed = bombs & (jnp.arange(C.MAX_ENEMIES) == bomb_slot)
    near_bomb = jnp.maximum(jnp.abs(enemies.row - enemies.row[bomb_slot]),
                            jnp.abs(enemies.col - enemies.col[bomb_slot])) == 1
    hit = enemies.active & (
        (is_program(C.DEBUG) & ((enemy_code & _BLOCK_BIT) != 0))
        | (is_program(C.ROW) & (enemies.row == player_row))
        | (is_program(C.COL) & (enemies.col == player_col))
        | (is_program(C.HACK) & ((enemy_code & _SIPHONED_BIT) != 0))
        | (is_program(C.ANTI_V) & (enemies.kind == C.VIRUS))
        | (bombs & near_bomb))
    # ANTI-V and the D_BOM blast deal exactly 1; the others deal attackDamage.
    damage = jnp.where(is_program(C.ANTI_V) | is_program(C.D_BOM), 1, core.attack_damage)
    enemy_hp = jnp.where(hit, jnp.maximum(enemies.hp - damage, 0), enemies.hp)
    enemy_hp = jnp.where(polymorphs, enemies.hp + max_hp[poly_kind] - max_hp[enemies.kind],
                         enemy_hp)
    enemy_hp = jnp.where(bombed, 0, enemy_hp)  # D_BOM removes its daemon outright
    enemy_stunned = enemies.stunned | (hit & (enemy_hp > 0))

    # --- Removal and kills (§7 header, §7.4, §7.5): the dead, and everything on cleared cells.
    dead = enemies.active & jnp.asarray(_REMOVES_DEAD)[program] & (enemy_hp <= 0)
    enemy_kills = jnp.sum((dead | (enemy_cleared & first_on_cell)) & ~enemies.from_scheduled,
                          dtype=jnp.int32)
    transmission_kills = jnp.sum(
        transmission_cleared & _first_with_id(transmission_cell, transmissions.active)
        & ~transmissions.from_scheduled, dtype=jnp.int32)
    delays = is_program(C.DELAY) & transmissions.active  # DELAY (§7.17)
    new_enemies = S.compact(
        enemies.replace(row=enemy_row, col=enemy_col, kind=enemy_kind, hp=enemy_hp,
                        stunned=enemy_stunned), ~(dead | enemy_cleared))
    new_transmissions = S.compact(
        transmissions.replace(turns_remaining=transmissions.turns_remaining + 3 * delays),
        ~transmission_cleared)

    # --- Cells: CRASH destroys ring blocks, leaving resource and flags (§7.4); REDUC (§7.20).
    destroyed = crash_ring & cell_is_block
    reduced = is_program(C.REDUC) & cell_is_block & ~cells.siphoned
    new_cells = cells.replace(
        content=jnp.where(destroyed, C.EMPTY, cells.content),
        points=jnp.where(destroyed, 0, cells.points),
        program=jnp.where(destroyed, C.NO_PROGRAM, cells.program),
        spawn_count=jnp.where(destroyed, 0,
                              jnp.where(reduced, jnp.maximum(cells.spawn_count - 1, 0),
                                        cells.spawn_count)),
    )

    # --- Player and global fields. The cost is paid first (§7); EXCH then adds its 4 energy.
    uses_atk_plus = is_program(C.ATK_PLUS).astype(jnp.int32)
    new_core = core.replace(
        player_row=jnp.where(does_warp, warp_row, player_row),
        player_col=jnp.where(does_warp, warp_col, player_col),
        hp=jnp.where(is_program(C.RESET), 3, core.hp),
        credits=core.credits - jnp.asarray(C.PROGRAM_CREDIT_COST)[program],
        energy=(core.energy - jnp.asarray(C.PROGRAM_ENERGY_COST)[program]
                + 4 * is_program(C.EXCH)),
        data_siphons=core.data_siphons + is_program(C.SIPH_PLUS),
        score=core.score + jnp.where(is_program(C.SCORE), C.MAX_STAGE - state.stage, 0),
        attack_damage=core.attack_damage + uses_atk_plus,
        atk_plus_uses=core.atk_plus_uses + uses_atk_plus,
        show_activated=core.show_activated | is_program(C.SHOW),
        scheduled_tasks_disabled=core.scheduled_tasks_disabled | is_program(C.CALM),
        enemies=new_enemies,
        transmissions=new_transmissions,
        cells=new_cells,
    )
    new_state = state.replace(core=new_core, step_active=state.step_active | is_program(C.STEP))
    # UNDO (§7.10, §7.15): its credit is paid above, then the restored snapshot overwrites it.
    new_state = history.pop(new_state, is_program(C.UNDO))

    exit_reached = does_warp & (warp_row == state.exit_row) & (warp_col == state.exit_col)
    outcome = O.no_outcome()._replace(
        exit_reached=exit_reached,
        enemy_turn_follows=is_program(C.WAIT),
        kills=enemy_kills + transmission_kills,
    )
    return new_state, outcome
