"""wandb mode resolution: never needs the network, never hangs without it. The probe's own tests
talk to servers on 127.0.0.1 only (`loopback` in tests/faults/test_wandb_network.py runs whole
trainings against the same servers)."""

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
    monkeypatch.setattr(wandb_sink, "server_answers",
                        (lambda: reachable) if reachable is not None else _probe_must_not_run)
    assert wandb_sink.resolve_mode(True, None) == expected


def test_offline_disabled_and_wandb_off_need_no_probe(monkeypatch):
    monkeypatch.setattr(wandb_sink, "server_answers", _probe_must_not_run)
    monkeypatch.setattr(wandb_sink, "has_credentials", lambda: True)
    assert wandb_sink.resolve_mode(False, "online") == "disabled"
    assert wandb_sink.resolve_mode(True, "offline") == "offline"
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert wandb_sink.resolve_mode(True, None) == "disabled"
    monkeypatch.setenv("WANDB_MODE", "dryrun")
    assert wandb_sink.resolve_mode(True, None) == "offline"


@pytest.mark.parametrize("explicit, credentials, reachable, expected, warning", [
    ("online", True, True, "online", None),
    ("online", True, False, "offline",
     "[wandb] --wandb-mode online but api.wandb.ai did not answer within 2 s: logging offline "
     "instead"),
    ("online", False, None, "offline",
     "[wandb] --wandb-mode online but no credentials (WANDB_API_KEY, or `wandb login`): logging "
     "offline instead"),
    (None, True, False, "offline",
     "[wandb] WANDB_MODE=online but api.wandb.ai did not answer within 2 s: logging offline "
     "instead"),
])
def test_online_by_name_without_credentials_or_server_runs_offline_and_says_why(
        monkeypatch, explicit, credentials, reachable, expected, warning):
    # wandb.init online with no network blocks for its whole init timeout, then gives up.
    monkeypatch.setenv("WANDB_MODE", "online")
    for name in ("WANDB_BASE_URL", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(wandb_sink, "has_credentials", lambda: credentials)
    monkeypatch.setattr(wandb_sink, "server_answers",
                        (lambda: reachable) if reachable is not None else _probe_must_not_run)
    warnings = []
    assert wandb_sink.resolve_mode(True, explicit, warnings.append) == expected
    assert warnings == ([warning] if warning else [])


@pytest.mark.parametrize("url, address", [
    (None, ("api.wandb.ai", 443)), ("https://wandb.example.org", ("wandb.example.org", 443)),
    ("http://10.0.0.5:8080/", ("10.0.0.5", 8080)),
    ("wandb.lab.internal", ("wandb.lab.internal", 443)),
    ("http://host:port", ("api.wandb.ai", 443)),  # unreadable: wandb reports it itself
])
def test_the_probed_server_is_wandb_base_urls(monkeypatch, tmp_path, url, address):
    if url is None:
        monkeypatch.delenv("WANDB_BASE_URL", raising=False)
    else:
        monkeypatch.setenv("WANDB_BASE_URL", url)
    assert wandb_sink.server_address() == address
    # Credentials are looked up in ~/.netrc under the same host.
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    (tmp_path / "netrc").write_text(f"machine {address[0]} login user password secret\n")
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    assert wandb_sink.has_credentials()


@pytest.mark.parametrize("proxy, no_proxy, hop", [
    (None, None, ("api.wandb.ai", 443)), ("http://proxy.corp:3128", None, ("proxy.corp", 3128)),
    ("proxy.corp:3128", None, ("proxy.corp", 3128)),
    ("http://proxy.corp:3128", "api.wandb.ai", ("api.wandb.ai", 443)),
])
def test_the_warning_names_where_wandb_connects_through_an_https_proxy(monkeypatch, proxy,
                                                                      no_proxy, hop):
    for name in ("WANDB_BASE_URL", "HTTPS_PROXY", "https_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    if proxy:
        monkeypatch.setenv("https_proxy", proxy)
    if no_proxy:
        monkeypatch.setenv("no_proxy", no_proxy)
    assert wandb_sink._first_hop() == hop


@pytest.mark.parametrize("url, expected", [
    (None, "https://api.wandb.ai"), ("wandb.lab.internal", "https://wandb.lab.internal"),
    ("http://127.0.0.1:8080/", "http://127.0.0.1:8080/"), ("http://host:port", "https://api.wandb.ai"),
])
def test_the_probe_requests_wandb_base_url(monkeypatch, url, expected):
    if url is None:
        monkeypatch.delenv("WANDB_BASE_URL", raising=False)
    else:
        monkeypatch.setenv("WANDB_BASE_URL", url)
    assert wandb_sink.server_url() == expected
