"""Network faults for wandb, on 127.0.0.1 only: a proxy that accepts connections and never
replies, a self-hosted server (WANDB_BASE_URL) that does the same, and one that refuses. With
credentials set and no WANDB_MODE (a user who expects online logging), each costs at most the
probe's bound, says why in one `[wandb]` line and logs offline, and the run trains exactly as
without wandb (one whole run by default, drawn with the fault seed; both with
HACKMATRIX_FAULTS=all)."""

import time

import pytest

from hackmatrix.training import cli, wandb_sink

from conftest import drawn
from invariants import assert_consistent, assert_matches_reference
from loopback import answering_server, refusing_url, silent_server
from tiny_runs import TINY, TOTAL

PROBE_BOUND_SECONDS = wandb_sink.PROBE_TIMEOUT_SECONDS + 1.0
PROXY_NAMES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy",
               "NO_PROXY", "no_proxy")


@pytest.fixture
def expects_online(monkeypatch, tmp_path):
    """Credentials, no WANDB_MODE, no proxy: set the network fault on top."""
    for name in (*PROXY_NAMES, "WANDB_MODE", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_home"))
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wandb_data"))
    return monkeypatch


@pytest.fixture(params=["silent proxy", "silent server", "refusing server"])
def network_fault(request, expects_online):
    """Points wandb at a loopback fault; yields the host the warning must name."""
    if request.param == "refusing server":
        expects_online.setenv("WANDB_BASE_URL", refusing_url())
        yield "127.0.0.1"
        return
    with silent_server() as url:
        if request.param == "silent proxy":
            expects_online.setenv("https_proxy", url)  # api.wandb.ai is reached through it
        else:
            expects_online.setenv("WANDB_BASE_URL", url)
        yield "127.0.0.1"


def test_a_network_fault_costs_at_most_the_probe_and_says_why(network_fault):
    warnings = []
    started = time.monotonic()
    assert wandb_sink.resolve_mode(True, None, warnings.append) == "offline"
    assert time.monotonic() - started < PROBE_BOUND_SECONDS
    assert warnings == [f"[wandb] {network_fault} did not answer within "
                        f"{wandb_sink.PROBE_TIMEOUT_SECONDS:g} s: logging offline instead"]


def test_a_server_that_answers_is_online(expects_online):
    with answering_server() as url:
        expects_online.setenv("WANDB_BASE_URL", url)
        started = time.monotonic()
        assert wandb_sink.resolve_mode(True, None, pytest.fail) == "online"
        assert time.monotonic() - started < PROBE_BOUND_SECONDS


@pytest.mark.parametrize("fault", drawn(["silent proxy", "refusing server"], 1, "wandb run"))
def test_a_run_behind_a_network_fault_logs_offline_and_trains_as_without_wandb(
        fault, expects_online, reference_run, tmp_path, capsys):
    def run():
        return cli.main([*TINY, *TOTAL, "--checkpoint-dir", str(tmp_path), "--run-name", "net",
                         "--save-interval", "2", "--keep-checkpoints", "0", "--no-artifact"])

    if fault == "silent proxy":
        with silent_server() as url:
            expects_online.setenv("https_proxy", url)
            assert run() == cli.EXIT_OK
    else:
        expects_online.setenv("WANDB_BASE_URL", refusing_url())
        assert run() == cli.EXIT_OK
    output = capsys.readouterr()
    assert "[wandb] 127.0.0.1 did not answer within 2 s: logging offline instead" in output.out
    run_dir = tmp_path / "net"
    assert list((run_dir / "wandb").glob("offline-run-*")), "wandb logged nothing"
    assert_consistent(run_dir)
    assert_matches_reference(run_dir, reference_run)
