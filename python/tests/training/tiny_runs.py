"""The one tiny training shape of the trainer's tests, so that every run shares one compiled
program (and its persistent-cache entry)."""

import numpy as np

from hackmatrix.training import cli

TINY = ["--num-envs", "8", "--num-steps", "16", "--hidden-dim", "32", "--num-layers", "2",
        "--log-interval", "2", "--seed", "1"]
UPDATES = 6
TOTAL = ["--total-timesteps", str(8 * 16 * UPDATES)]


def train(checkpoint_dir, run_name, *extra):
    """A fresh tiny run of UPDATES updates without wandb; returns the exit code."""
    return cli.main([*TINY, *TOTAL, "--checkpoint-dir", str(checkpoint_dir), "--run-name",
                     run_name, "--no-wandb", *extra])


def resume(checkpoint_dir, *extra):
    return cli.main(["--resume", *extra, "--checkpoint-dir", str(checkpoint_dir)])


def load_params(path):
    with np.load(path) as data:
        return {key: data[key] for key in data.files}


def assert_same_params(expected, actual):
    assert expected.keys() == actual.keys()
    for key in expected:
        np.testing.assert_array_equal(expected[key], actual[key], err_msg=key)
