"""wandb mode resolution: never needs the network, never hangs without it."""

import pytest

from hackmatrix.training import wandb_sink


@pytest.fixture
def no_env_mode(monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)


def _probe_must_not_run():
    raise AssertionError("the network was probed")


@pytest.mark.parametrize("credentials, reachable, expected", [
    (True, True, "online"), (True, False, "offline"), (False, None, "offline")])
def test_online_only_with_credentials_and_a_reachable_server(no_env_mode, monkeypatch,
                                                              credentials, reachable, expected):
    monkeypatch.setattr(wandb_sink, "has_credentials", lambda: credentials)
    monkeypatch.setattr(wandb_sink, "server_reachable",
                        (lambda: reachable) if reachable is not None else _probe_must_not_run)
    assert wandb_sink.resolve_mode(True, None) == expected


def test_explicit_mode_environment_and_disabled_need_no_probe(monkeypatch):
    monkeypatch.setattr(wandb_sink, "server_reachable", _probe_must_not_run)
    monkeypatch.setattr(wandb_sink, "has_credentials", lambda: True)
    assert wandb_sink.resolve_mode(False, "online") == "disabled"
    assert wandb_sink.resolve_mode(True, "offline") == "offline"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert wandb_sink.resolve_mode(True, None) == "disabled"
    monkeypatch.setenv("WANDB_MODE", "dryrun")
    assert wandb_sink.resolve_mode(True, None) == "offline"
