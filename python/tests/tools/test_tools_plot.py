"""plot_metrics.py: a PNG from metrics.jsonl, robust to missing keys, exit 6 on bad paths."""

import json

import matplotlib.pyplot as plt
import pytest
from PIL import Image

from conftest import load_script
from hackmatrix.game import constants as C
from hackmatrix.tools import cli, plotting
from hackmatrix.training.metrics import APPROX_KL_LIMIT, CLIP_FRACTION_LIMIT

plot_main = load_script("plot_metrics.py")


def _write_metrics(run_dir, records, trailing=""):
    run_dir.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(record) for record in records]
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n" + trailing)


def _full_record(update):
    record = {"update": update, "timesteps": update * 1024, "train/sps": 900.0 + update,
              "train/mean_episode_return": 0.1 * update, "train/mean_episode_length": 40.0,
              "train/entropy": 2.0 - 0.01 * update, "train/approx_kl": 0.01,
              "train/clip_fraction": 0.1, "actions/move_frac": 0.7, "actions/siphon_frac": 0.1,
              "actions/program_frac": 0.2, "stats/mean_final_stage": 1.5, "stats/win_rate": 0.0}
    record.update({f"reward/{name}": 0.01 * i for i, name in enumerate(C.REWARD_COMPONENTS)})
    return record


def _assert_png(path):
    assert path.is_file() and path.stat().st_size > 10_000
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size[0] > 1000


def test_plots_every_panel(tmp_path, capsys):
    run_dir = tmp_path / "run"
    # A NaN mean return (no episode ended yet) and a truncated last line must not break it.
    records = [_full_record(u) for u in range(1, 20)]
    records[0]["train/mean_episode_return"] = float("nan")
    _write_metrics(run_dir, records, trailing='{"update": 20, "train/s')
    output = tmp_path / "curves.png"
    assert plot_main([str(run_dir), "-o", str(output)]) == 0
    assert "19 records" in capsys.readouterr().out
    _assert_png(output)


def test_plots_a_real_run_with_missing_keys(tiny_run, tmp_path):
    assert plot_main([str(tiny_run)]) == 0
    _assert_png(tiny_run / "training_curves.png")
    sparse = tmp_path / "sparse"
    _write_metrics(sparse, [{"update": 1, "train/entropy": 1.0}, {"update": 2}])
    assert plot_main([str(sparse)]) == 0
    _assert_png(sparse / "training_curves.png")


@pytest.mark.parametrize("case", ["missing_dir", "no_metrics", "empty_metrics", "binary_file"])
def test_bad_run_dir_exits_6(case, tmp_path, capsys):
    run_dir = tmp_path / "run"
    if case == "no_metrics":
        run_dir.mkdir()
    elif case == "empty_metrics":
        _write_metrics(run_dir, [], trailing="not json\n")
    elif case == "binary_file":  # a checkpoint named instead of the run
        run_dir = tmp_path / "checkpoint_1.pkl"
        run_dir.write_bytes(b"\x80\x04\x95\xff\xfe\n\x00\x81")
    assert plot_main([str(run_dir)]) == cli.EXIT_BAD_CHECKPOINT
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_folder_of_runs_is_named_as_such(tmp_path, capsys):
    _write_metrics(tmp_path / "second", [_full_record(1)])
    _write_metrics(tmp_path / "first", [_full_record(1)])
    assert plot_main([str(tmp_path)]) == cli.EXIT_BAD_CHECKPOINT
    assert capsys.readouterr().err == (
        f"plot_metrics.py: error: no metrics.jsonl at {tmp_path}/metrics.jsonl: {tmp_path} is a "
        f"folder of runs, not a run; name one, e.g. {tmp_path}/first\n")


@pytest.fixture
def drawn_figures(monkeypatch):
    """The figures plot_run draws, kept open for inspection instead of closed."""
    figures, close = [], plt.close
    monkeypatch.setattr(plotting.plt, "close", figures.append)
    yield figures
    for figure in figures:
        close(figure)


@pytest.mark.parametrize("name_the_file", [False, True])
def test_one_record_is_drawn_with_markers_and_titled_by_the_run(name_the_file, tmp_path, capsys,
                                                               drawn_figures):
    run_dir = tmp_path / "first"
    _write_metrics(run_dir, [_full_record(5)])
    source = run_dir / "metrics.jsonl" if name_the_file else run_dir
    output = tmp_path / "plotnoext"  # written at exactly this path, as a PNG
    assert plot_main([str(source), "-o", str(output)]) == 0
    assert capsys.readouterr().out == f"wrote {output} (1 record)\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["first", "plotnoext"]
    _assert_png(output)
    (figure,) = drawn_figures
    assert figure._suptitle.get_text() == "first: 1 record, last timesteps 5120"
    # A single point is invisible as a line: every curve of every panel has a marker.
    curves = [line for ax in figure.axes for line in ax.get_lines()
              if line.get_label() and not line.get_label().startswith("limit")]
    # _full_record logs 11 of the 14 curves outside the reward panel (not highest_stage and
    # the death and truncation rates) and all reward components.
    assert len(curves) == 11 + len(C.REWARD_COMPONENTS)
    assert all(line.get_marker() == "o" for line in curves)


def test_help_names_every_panel_drawn(tmp_path, capsys, drawn_figures):
    run_dir = tmp_path / "bare"
    _write_metrics(run_dir, [{"update": 1}])  # no curve logged: every panel is still drawn
    assert plot_main([str(run_dir)]) == 0
    (figure,) = drawn_figures
    titles = [ax.get_title() for ax in figure.axes]
    assert len(titles) == 14
    assert all([text.get_text() for text in ax.texts] == ["not logged"] for ax in figure.axes)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        plot_main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert all(title in help_text for title in titles), titles
    assert 'A panel whose keys the run did not log reads "not logged".' in help_text
    assert f"health threshold ({APPROX_KL_LIMIT} and {CLIP_FRACTION_LIMIT})" in help_text


def _curve(figure, title):
    (ax,) = [ax for ax in figure.axes if ax.get_title() == title]
    (line,) = [line for line in ax.get_lines() if line.get_linestyle() != ":"]
    return list(line.get_xdata()), list(line.get_ydata())


def _resume_lines(figure):
    return [[line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == ":"]
            for ax in figure.axes]


def test_training_health_panels_smoothing_and_resume_marks(tmp_path, drawn_figures, capsys):
    records = [{**_full_record(u), "train/value_loss": float(u), "train/grad_norm": 0.5,
                "train/learning_rate": 1e-3 * (1 - u / 8), "train/explained_variance": 0.1 * u}
               for u in range(1, 7)]
    # Resumed at updates 2 and 4 (the second from a checkpoint between log lines).
    records[2].update(resumed_at_update=2, resumed_at_timesteps=2048)
    records[4].update(resumed_at_update=4, resumed_at_timesteps=4096)
    run_dir = tmp_path / "run"
    _write_metrics(run_dir, records)
    assert plot_main([str(run_dir), "--smooth", "3"]) == 0
    (figure,) = drawn_figures
    assert _curve(figure, "Value loss") == ([1024 * u for u in range(1, 7)],
                                            [1.0, 1.5, 2.0, 3.0, 4.0, 5.0])
    assert _curve(figure, "Gradient norm (before clipping)")[1] == [0.5] * 6
    assert _curve(figure, "Learning rate")[1][0] == pytest.approx(1e-3 * 7 / 8)
    assert _curve(figure, "Explained variance")[1][-1] == pytest.approx(0.5)
    assert figure._suptitle.get_text().endswith(", moving average over 3 records")
    # Every panel marks both resumes, at the timesteps where they started.
    assert _resume_lines(figure) == [[2048, 4096]] * len(figure.axes)
    with pytest.raises(SystemExit) as exited:
        plot_main([str(run_dir), "--smooth", "0"])
    assert exited.value.code == cli.EXIT_BAD_ARGUMENTS
    assert capsys.readouterr().err.endswith("error: --smooth must be >= 1, got 0\n")


def test_smoothing_is_a_trailing_moving_average():
    assert plotting.smoothed([1.0, 2.0, 6.0, 4.0], 2) == [1.0, 1.5, 4.0, 5.0]
    assert plotting.smoothed([1.0, 2.0], 1) == [1.0, 2.0] and plotting.smoothed([], 5) == []


def test_long_series_are_plain_lines(tmp_path, drawn_figures):
    run_dir = tmp_path / "long"
    _write_metrics(run_dir, [_full_record(u) for u in range(1, plotting.MARKER_MAX_POINTS + 2)])
    assert plot_main([str(run_dir)]) == 0
    (figure,) = drawn_figures
    assert all(line.get_marker() in ("None", None) for ax in figure.axes
               for line in ax.get_lines())


@pytest.mark.parametrize("output", ["absent/curves.png", "."])
def test_unwritable_output_exits_3_before_reading(output, tmp_path, capsys):
    run_dir = tmp_path / "run"
    _write_metrics(run_dir, [_full_record(1)])
    target = tmp_path / output
    assert plot_main([str(run_dir), "-o", str(target)]) == cli.EXIT_BAD_ARGUMENTS
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(f"plot_metrics.py: error: -o {target}: ")
    assert len(captured.err.splitlines()) == 1


def test_a_byte_order_mark_keeps_the_first_record(tmp_path):
    """A file saved by an editor that writes a UTF-8 byte-order mark still yields every record."""
    records = [{"update": 1, "timesteps": 64}, {"update": 2, "timesteps": 128}]
    (tmp_path / "metrics.jsonl").write_text(
        "\ufeff" + "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert plotting.read_metrics(tmp_path) == records
