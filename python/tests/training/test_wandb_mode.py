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


def test_a_failed_init_is_one_warning_line_and_training_goes_on(monkeypatch, tmp_path):
    import wandb

    def init(**kwargs):
        raise ConnectionError("no such host\n  request: POST https://api.wandb.ai/graphql\n")
    monkeypatch.setattr(wandb, "init", init)
    warnings = []
    sink = wandb_sink.WandbSink(mode="offline", project="p", entity=None, run_name="r",
                                run_id="id", config={}, directory=tmp_path, resuming=False,
                                upload_artifacts=False, warn=warnings.append)
    assert sink.run is None
    assert warnings == ["[wandb] wandb init (offline) failed, continuing without wandb: "
                        "ConnectionError: no such host request: POST "
                        "https://api.wandb.ai/graphql"]
    sink.log({"update": 1})  # a no-op, not an error


class _StartedRun:
    dir = "/runs/r/wandb/offline-run-1-id/files"

    def define_metric(self, *args, **kwargs):
        pass


@pytest.mark.parametrize("requested_by_name", [False, True])
def test_an_online_init_that_fails_starts_again_offline(monkeypatch, tmp_path, requested_by_name):
    # A server that answered the probe but is not wandb's, or stops replying: wandb times out
    # after its init timeout; the run's metrics must still be kept.
    import wandb

    modes, teardowns = [], []

    def init(**kwargs):
        modes.append(kwargs["mode"])
        if kwargs["mode"] != "offline":
            raise wandb.errors.CommError("Timed out while retrying:\n  Post \"http://x/graphql\"")
        return _StartedRun()
    monkeypatch.setattr(wandb, "init", init)
    monkeypatch.setattr(wandb, "teardown", lambda: teardowns.append(True))
    warnings = []
    sink = wandb_sink.WandbSink(mode="online", project="p", entity=None, run_name="r",
                                run_id="id", config={}, directory=tmp_path, resuming=False,
                                upload_artifacts=False, online_requested=requested_by_name,
                                warn=warnings.append)
    assert modes == ["online" if requested_by_name else None, "offline"] and teardowns == [True]
    assert sink.active and sink.mode == "offline"
    assert warnings[0] == ("[wandb] wandb init (online) failed, logging offline instead: "
                           "CommError: Timed out while retrying: Post \"http://x/graphql\"")
    assert warnings[1].startswith("[wandb] offline: logging to ") and len(warnings) == 2


class _RecordingRun:
    """What a wandb run is told: logged records and the final summary."""

    def __init__(self):
        self.logged, self.summary, self.exit_code = [], {}, None

    def log(self, record):
        self.logged.append(record)

    def finish(self, exit_code=0):
        self.exit_code = exit_code


def test_undefined_values_are_left_out_of_history_and_summary(tmp_path):
    # A log window in which no episode ended has no mean return (NaN): wandb must keep the last
    # defined value rather than a null.
    sink = wandb_sink.WandbSink(mode="disabled", project="p", entity=None, run_name="r",
                                run_id="id", config={}, directory=tmp_path, resuming=False,
                                upload_artifacts=False)
    sink.run = run = _RecordingRun()
    record = {"update": 3, "train/mean_episode_return": float("nan"), "train/entropy": 0.5,
              "stats/win_rate": None}
    sink.log(record)
    sink.finish(summary=record, exit_code=7)
    assert run.logged == [{"update": 3, "train/entropy": 0.5}]
    assert run.summary == {"update": 3, "train/entropy": 0.5} and run.exit_code == 7


@pytest.mark.parametrize("mode", ["online", "offline"])
def test_offline_runs_log_a_checkpoint_artifact_only_at_the_end_of_a_session(tmp_path, mode):
    # Offline, wandb copies each logged artifact into its staging folder until `wandb sync`: a
    # long run saving every few minutes once filled gigabytes there.
    import wandb

    sink = wandb_sink.WandbSink(mode="disabled", project="p", entity=None, run_name="r",
                                run_id="id", config={}, directory=tmp_path, resuming=False,
                                upload_artifacts=True)
    sink.mode, sink._wandb = mode, wandb
    sink.run = run = _RecordingRun()
    run.id, run.artifacts = "id", []
    run.log_artifact = lambda artifact, aliases: run.artifacts.append(aliases[-1])
    checkpoint = tmp_path / "checkpoint_2.pkl"
    checkpoint.write_bytes(b"state")
    sink.log_checkpoint([checkpoint], 2)
    sink.log_checkpoint([checkpoint], 4)
    sink.log_checkpoint([checkpoint], 4, session_end=True)
    sink.log_checkpoint([checkpoint], 6, session_end=True)
    assert run.artifacts == (["update-2", "update-4", "update-6"] if mode == "online"
                             else ["update-4", "update-6"])
