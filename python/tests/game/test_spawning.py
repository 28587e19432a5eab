"""Transmission placement (§9.2)."""

import jax
import jax.numpy as jnp
import numpy as np

from hackmatrix.game import bitboard as bb
from hackmatrix.game import scenario
from hackmatrix.game import spawning


def _place(key, state, count, from_siphon, from_scheduled):
    return spawning.place_transmissions(key, state, count, from_siphon, from_scheduled)


_place_seeds = jax.jit(jax.vmap(_place, in_axes=(0, None, None, None, None)))
_lines = jax.jit(lambda state: tuple(bb.to_bool(b) for b in
                                     spawning.free_and_line_of_fire(state.core)))


def place(state, count, seeds=1, siphon=False, scheduled=False):
    keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    return _place_seeds(keys, state, jnp.int32(count), jnp.asarray(siphon),
                        jnp.asarray(scheduled))


def placed_cells(out, start=0):
    """[(row, col) per placement] for every seed."""
    t = out.core.transmissions
    active = np.asarray(t.active)
    rows, cols = np.asarray(t.row), np.asarray(t.col)
    return [[(rows[s, i], cols[s, i]) for i in range(start, active.shape[1]) if active[s, i]]
            for s in range(active.shape[0])]


PIECES = {
    "player": {"row": 2, "col": 2},
    "enemies": [{"type": "daemon", "row": 2, "col": 4, "hp": 3},
                {"type": "virus", "row": 0, "col": 2, "hp": 2}],
    "transmissions": [{"row": 4, "col": 2, "turnsRemaining": 2, "enemyType": "glitch"}],
    "blocks": [{"row": 2, "col": 0, "type": "data", "points": 3},
               {"row": 3, "col": 5, "type": "program", "program": "WAIT"}],
}


def test_line_of_fire_is_shielded_by_enemies_and_blocks_but_not_transmissions():
    free, line = map(np.asarray, _lines(scenario.from_dict(PIECES)))
    expected_line = {(2, 1), (2, 0),          # left: the block is in line, nothing behind it
                     (2, 3), (2, 4),          # right: the daemon shields (2,5)
                     (1, 2), (0, 2),          # down: the virus is in line
                     (3, 2), (4, 2), (5, 2)}  # up: the transmission does not shield
    assert set(zip(*np.nonzero(line))) == expected_line
    occupied = {(2, 2), (2, 4), (0, 2), (4, 2), (2, 0), (3, 5)}
    assert set(zip(*np.nonzero(free))) == {(r, c) for r in range(6) for c in range(6)} - occupied


def test_placements_avoid_occupied_cells_and_the_line_of_fire():
    out = place(scenario.from_dict(PIECES), 5, seeds=300)
    _, line = map(np.asarray, _lines(scenario.from_dict(PIECES)))
    forbidden = {(2, 2), (2, 4), (0, 2), (4, 2), (2, 0), (3, 5)}
    for cells in placed_cells(out, start=1):
        assert len(cells) == 5 and len(set(cells)) == 5
        assert not set(cells) & forbidden
        assert not any(line[r, c] for r, c in cells)


def test_new_transmissions_are_appended_with_one_turn_and_the_given_flags():
    out = place(scenario.from_dict(PIECES), 3, seeds=4, siphon=True)
    t = out.core.transmissions
    assert np.asarray(t.active).sum(axis=1).tolist() == [4] * 4
    assert (np.asarray(t.row[:, 0]) == 4).all() and (np.asarray(t.turns_remaining[:, 0]) == 2).all()
    assert (np.asarray(t.turns_remaining[:, 1:4]) == 1).all()
    assert np.asarray(t.from_siphon[:, 1:4]).all() and not np.asarray(t.from_siphon[:, 0]).any()
    assert not np.asarray(t.from_scheduled).any()


def test_flags_by_placement_order():
    state = scenario.from_dict({"player": {"row": 0, "col": 0}})
    order = jnp.arange(36)
    out = jax.jit(spawning.place_transmissions)(
        jax.random.PRNGKey(0), state, jnp.int32(3), order != 0, order == 0)
    t = out.core.transmissions
    assert np.asarray(t.from_scheduled[:3]).tolist() == [True, False, False]
    assert np.asarray(t.from_siphon[:3]).tolist() == [False, True, True]


def test_choice_is_uniform_over_preferred_cells():
    # Player (0,0) with blocks at (0,1) and (1,0): the line of fire is just those two cells,
    # so all 33 other cells are preferred.
    state = scenario.from_dict({"player": {"row": 0, "col": 0}, "blocks": [
        {"row": 0, "col": 1, "type": "data", "points": 1},
        {"row": 1, "col": 0, "type": "data", "points": 1}]})
    seeds = 6600
    counts = np.zeros((6, 6))
    for cells in placed_cells(place(state, 1, seeds=seeds)):
        counts[cells[0]] += 1
    assert counts[0, 0] == counts[0, 1] == counts[1, 0] == 0
    expected = seeds / 33
    observed = counts[counts > 0]
    assert observed.size == 33
    chi2 = np.sum((observed - expected) ** 2 / expected)
    assert chi2 < 70  # 32 degrees of freedom: p ~ 1e-4

    types = np.asarray(place(state, 1, seeds=4000).core.transmissions.enemy_type[:, 0])
    assert np.allclose(np.bincount(types, minlength=4) / 4000, 0.25, atol=0.03)


def test_falls_back_to_the_line_of_fire_then_places_nothing():
    # Player (5,5) (on the exit); every cell outside row 5 and column 5 is a block: the 10
    # free cells are all in the line of fire.
    blocks = [{"row": r, "col": c, "type": "data", "points": 1}
              for r in range(5) for c in range(5)]
    state = scenario.from_dict({"player": {"row": 5, "col": 5}, "blocks": blocks})
    out = place(state, 12, seeds=20)
    for cells in placed_cells(out):
        assert len(cells) == 10  # the two extra ones are lost
        assert set(cells) == {(5, c) for c in range(5)} | {(r, 5) for r in range(5)}
    assert placed_cells(place(state, 0, seeds=2)) == [[], []]


def test_preferred_cells_are_used_up_before_the_line_of_fire():
    # Player (5,5); blocks fill rows and columns 0-4 except the cells (1,1) and (2,2).
    blocks = [{"row": r, "col": c, "type": "data", "points": 1}
              for r in range(5) for c in range(5) if (r, c) not in [(1, 1), (2, 2)]]
    state = scenario.from_dict({"player": {"row": 5, "col": 5}, "blocks": blocks})
    for cells in placed_cells(place(state, 4, seeds=50)):
        assert set(cells[:2]) == {(1, 1), (2, 2)}
        assert all(r == 5 or c == 5 for r, c in cells[2:])


def test_cells_above_a_siphoned_block_count_as_out_of_the_line_of_fire():
    # The A.5 siphon example: player (3,3), block at (4,3); (5,3) is shielded.
    state = scenario.from_dict({"player": {"row": 3, "col": 3}, "blocks": [
        {"row": 4, "col": 3, "type": "data", "points": 9, "siphoned": True}]})
    _, line = map(np.asarray, _lines(state))
    assert not line[5, 3] and line[4, 3]
    hits = sum((5, 3) in cells for cells in placed_cells(place(state, 9, seeds=200)))
    assert hits > 0


def test_exit_data_siphon_and_resource_cells_count_as_free():
    # Player (0,0); blocks fill rows and columns 1-5 except the exit (5,5), a data-siphon
    # pickup (3,3), a credits cell (2,4) and an energy cell (4,4): those four are the only
    # free cells out of the line of fire, so they take the first four placements, and the
    # fifth falls back to row 0 or column 0.
    allowed = {(5, 5), (3, 3), (2, 4), (4, 4)}
    state = scenario.from_dict({
        "player": {"row": 0, "col": 0},
        "blocks": [{"row": r, "col": c, "type": "data", "points": 1}
                   for r in range(1, 6) for c in range(1, 6) if (r, c) not in allowed],
        "resources": [{"row": 3, "col": 3, "dataSiphon": True},
                      {"row": 2, "col": 4, "credits": 2}, {"row": 4, "col": 4, "energy": 1}]})
    for cells in placed_cells(place(state, 5, seeds=20)):
        assert len(cells) == 5 and set(cells[:4]) == allowed
        assert cells[4][0] == 0 or cells[4][1] == 0


_order_first = jax.jit(jax.vmap(spawning.random_order_first))
_ranks = jax.jit(jax.vmap(spawning.random_ranks))


def test_random_order_first_puts_the_given_items_in_key_order_then_the_others_by_index():
    """Against NumPy: the `first` items sorted by their keys (25 random bits above the index),
    then the others in index order, as each item's position; `random_ranks` sorts by keys of
    26 random bits above the index."""
    generator = np.random.default_rng(5)
    words = generator.integers(0, 2**32, (200, 36), dtype=np.uint32)
    words[:20, :] &= 0xFFFF  # keys of 10 random bits: some collide and keep their index order
    first = generator.random((200, 36)) < np.linspace(0.0, 1.0, 200)[:, None]
    positions = np.asarray(_order_first(jnp.asarray(words), jnp.asarray(first)))
    ranks = np.asarray(_ranks(jnp.asarray(words)))
    for row in range(words.shape[0]):
        keys = (words[row] & np.uint32(0xFFFFFFC0)) | np.arange(36, dtype=np.uint32)
        order = np.argsort(keys, kind="stable")
        np.testing.assert_array_equal(ranks[row], np.argsort(order))
        first_keys = ((words[row] >> 1) & np.uint32(0x7FFFFFC0)) | np.arange(36, dtype=np.uint32)
        processing = ([i for i in np.argsort(first_keys, kind="stable") if first[row, i]]
                      + [i for i in range(36) if not first[row, i]])
        np.testing.assert_array_equal(positions[row], np.argsort(processing))
