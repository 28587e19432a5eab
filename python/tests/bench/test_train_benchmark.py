"""`benchmark.py train`: one line per num_envs and device count, with the network-only bound."""

import pytest

from hackmatrix.bench import timing
from hackmatrix.bench import train as train_benchmark
from hackmatrix.tools.cli import EXIT_BAD_ARGUMENTS


def test_prints_each_device_count_with_its_bound(capsys):
    assert train_benchmark.main(["--num-envs", "4", "--num-devices", "1,2", "--num-steps", "4",
                                 "--hidden-dim", "8", "--num-layers", "1", "--updates", "1",
                                 "--repeats", "1", "--use-cache"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("backend=cpu") and lines[1].split()[:2] == ["num_envs", "dev"]
    rows = [line.split() for line in lines[2:]]
    assert [row[:5] for row in rows] == [["4", "1", "16", "4", "4"], ["4", "2", "16", "4", "4"]]
    for row in rows:
        compile_s, first_update_s, train_sps, bound_sps = map(float, row[5:9])
        assert 0 < compile_s <= first_update_s and train_sps > 0 and bound_sps > 0
        # The SPS columns are rounded to whole steps/s and the overhead to 0.1%.
        rounding = bound_sps / train_sps * (0.5 / train_sps + 0.5 / bound_sps) + 5e-4
        assert abs(float(row[9].rstrip("%")) / 100 - (bound_sps / train_sps - 1)) <= rounding + 1e-9
        # One round: the overhead is that round's, and so are both quartiles.
        assert row[10] == f"{row[9]}-{row[9]}"


def test_more_devices_than_jax_sees_is_a_usage_error(capsys):
    import jax
    assert jax.local_device_count() == 2  # started here: the count cannot change any more
    with pytest.raises(SystemExit) as exit_info:
        train_benchmark.main(["--num-envs", "4", "--num-devices", "1,4"])
    assert exit_info.value.code == EXIT_BAD_ARGUMENTS
    assert capsys.readouterr().err.strip().endswith(
        "--num-devices 4, but JAX sees 2 cpu device(s) (on CPU at most 64)")


def test_per_round_quartiles_interpolate_between_rounds():
    assert timing.quartiles([0.5, 0.1, 0.3, 0.2, 0.4]) == pytest.approx((0.2, 0.4))
    assert timing.quartiles([0.1, 0.2]) == pytest.approx((0.125, 0.175))
    assert timing.quartiles([0.07]) == (0.07, 0.07)


def test_overhead_is_the_median_of_the_rounds_own():
    # Round 2 is a slow spell for both runs, round 3 for the bound alone. The ratio of the two
    # medians (10.5 / 10 - 1 = 5%) would pair chunks from different rounds.
    train = [10.0, 5.0, 10.0, 10.0, 10.0]
    bound = [11.0, 5.5, 6.0, 11.5, 10.5]  # rounds: 10%, 10%, -40%, 15%, 5%
    median, low, high = train_benchmark._rollout_overhead(train, bound)
    assert (median, low, high) == pytest.approx((0.10, 0.05, 0.10))


def test_rounds_alternate_their_order(monkeypatch):
    timed = []

    class Recorded:
        def __init__(self, config, env, env_params):
            self.name, self.compile_s, self.first_update_s, self.sps = env, 1.0, 2.0, []

        def time_chunk(self):
            timed.append(self.name)
            self.sps.append(100.0)

    monkeypatch.setattr(train_benchmark, "_Prepared", Recorded)
    results = train_benchmark.measure(["a config"], "game", None, repeats=4, replay="replay")
    assert timed == ["game", "replay", "replay", "game"] * 2
    assert [result["sps_all"] for result in results[0]] == [[100.0] * 4, [100.0] * 4]
