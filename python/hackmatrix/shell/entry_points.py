"""The command-line programs: the console scripts of python/pyproject.toml and
python/scripts/*.py both start them here, through `launch.run`."""

from hackmatrix.shell.launch import run


def train():
    """`hackmatrix-train`, python/scripts/train_purejaxrl.py."""
    run("hackmatrix.training.cli")


def watch():
    """`hackmatrix-watch`, python/scripts/watch_jax_agent.py."""
    run("hackmatrix.programs.watch")


def evaluate():
    """`hackmatrix-eval`, python/scripts/evaluate.py."""
    run("hackmatrix.programs.evaluate")


def play():
    """`hackmatrix-play`, python/scripts/play.py."""
    run("hackmatrix.programs.play")


def plot():
    """`hackmatrix-plot`, python/scripts/plot_metrics.py."""
    run("hackmatrix.programs.plot")


def bench():
    """`hackmatrix-bench`, python/scripts/benchmark.py."""
    run("hackmatrix.programs.benchmark")
