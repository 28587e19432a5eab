"""Weights & Biases logging that never waits long on the network and never stops training.

wandb is imported lazily. Mode: --wandb-mode if given, else WANDB_MODE from the environment, else
online when credentials exist (WANDB_API_KEY or the server's entry in ~/.netrc) and the server
(WANDB_BASE_URL's, else api.wandb.ai) answers an HTTPS request, through the proxy wandb would use,
within two seconds in all; else offline (sync later with `wandb sync`). A proxy or server that
accepts connections and never replies counts as not answering. Whenever credentials exist but the
run goes offline, one warning says why; online asked for by name without credentials says so too.
"online" is passed to wandb only when the user asked for it: an implicit online run lets wandb
read WANDB_MODE itself.
An online run whose wandb.init fails (or times out, after INIT_TIMEOUT_SECONDS) starts again
offline, with one warning. Any other wandb failure prints one warning and disables the sink (a
failed checkpoint upload only warns: logging goes on); training continues.
"""

from __future__ import annotations

import netrc
import os
import secrets
import string
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

MODES = ("online", "offline", "disabled")
WANDB_HOST = "api.wandb.ai"
PROBE_TIMEOUT_SECONDS = 2.0
# Only reached when the server answered the probe: wandb's own default waits much longer.
INIT_TIMEOUT_SECONDS = 15
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _address(url: str, default_scheme: str) -> tuple[str, int] | None:
    """(host, port) of `url`, read as `default_scheme://url` when it has no scheme; the port
    defaults to its scheme's (else `default_scheme`'s). None when it names no host or its port
    is unreadable (e.g. not a number: wandb will say so)."""
    try:
        parts = urllib.parse.urlsplit(url if "://" in url else f"{default_scheme}://{url}")
        if parts.hostname:
            return parts.hostname, parts.port or _DEFAULT_PORTS.get(
                parts.scheme, _DEFAULT_PORTS[default_scheme])
    except ValueError:
        pass
    return None


def server_address() -> tuple[str, int]:
    """(host, port) of the wandb server: WANDB_BASE_URL's (a self-hosted server), else
    api.wandb.ai's."""
    url = os.environ.get("WANDB_BASE_URL", "").strip()
    return (url and _address(url, "https")) or (WANDB_HOST, 443)


def server_url() -> str:
    """The URL the probe requests: WANDB_BASE_URL (https:// when it names no scheme) when it
    names a host, else api.wandb.ai's."""
    url = os.environ.get("WANDB_BASE_URL", "").strip()
    if url and _address(url, "https"):
        return url if "://" in url else f"https://{url}"
    return f"https://{WANDB_HOST}"


def has_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    netrc_path = Path(os.environ.get("NETRC", Path.home() / ".netrc"))
    try:
        return netrc.netrc(netrc_path).authenticators(server_address()[0]) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def _first_hop() -> tuple[str, int]:
    """Where wandb connects to reach its server: the HTTPS proxy that applies to it
    (HTTPS_PROXY unless NO_PROXY exempts the server), else the server itself."""
    server = server_address()
    proxy = urllib.request.getproxies().get("https")
    if proxy and not urllib.request.proxy_bypass(server[0]):
        return _address(proxy, "http") or server
    return server


def server_answers(timeout: float = PROBE_TIMEOUT_SECONDS) -> bool:
    """Whether the wandb server answers an HTTP request (any status) within `timeout` seconds in
    all, through the HTTPS proxy the environment names, as wandb's own requests go. Without an
    answer wandb.init would block for its whole timeout. The request runs in a daemon thread so
    that a peer that accepts and then trickles or stays silent cannot hold the caller longer."""
    answered = threading.Event()

    def request():
        try:
            urllib.request.urlopen(server_url(), timeout=timeout).close()
        except urllib.error.HTTPError:  # an answer, if not a 200
            pass
        except Exception:  # no answer: refused, reset, timed out, TLS failed, unreadable URL
            return
        answered.set()

    threading.Thread(target=request, name="wandb-probe", daemon=True).start()
    return answered.wait(timeout)


def resolve_mode(enabled: bool, explicit_mode: str | None, warn=print) -> str:
    """The mode wandb runs in (module docstring); `warn` gets the line that says why an online
    run asked for by name runs offline."""
    if not enabled:
        return "disabled"
    env_mode = os.environ.get("WANDB_MODE", "").lower()
    requested = explicit_mode or {"dryrun": "offline"}.get(env_mode, env_mode)
    if requested in ("offline", "disabled"):
        return requested
    credentials = has_credentials()
    if not credentials:
        reason = "no credentials (WANDB_API_KEY, or `wandb login`)"
    elif not server_answers():
        reason = f"{_first_hop()[0]} did not answer within {PROBE_TIMEOUT_SECONDS:g} s"
    else:
        return "online"
    if requested == "online":  # asked for by name: say why it is not
        asked_by = "--wandb-mode online" if explicit_mode else "WANDB_MODE=online"
        warn(f"[wandb] {asked_by} but {reason}: logging offline instead")
    elif credentials:  # credentials mean online was expected
        warn(f"[wandb] {reason}: logging offline instead")
    return "offline"


def new_run_id() -> str:
    """Chosen before wandb starts so the checkpoint holds it even for offline or disabled runs."""
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))


class WandbSink:
    def __init__(self, *, mode: str, project: str, entity: str | None, run_name: str, run_id: str,
                 config: dict, directory: Path, resuming: bool, upload_artifacts: bool,
                 online_requested: bool = False, warn=print):
        self.run = None
        self.mode = mode
        self.upload_artifacts = upload_artifacts
        self._artifact_update = None
        self.warn = warn
        if mode == "disabled":
            return
        self.run = self._start(directory, online_requested, project=project, entity=entity,
                               name=run_name, id=run_id, resume="allow" if resuming else None,
                               config=config)
        if self.run is None:
            return
        try:
            # Charts are drawn against the update number, logged with each record, not against
            # wandb's own step: a run resumed from an earlier checkpoint logs updates it had
            # logged before, which wandb would drop as steps going backwards.
            self.run.define_metric("update")
            self.run.define_metric("*", step_metric="update")
        except Exception as error:
            self._disable(f"wandb define_metric failed, continuing without wandb: {error}")
            return
        if self.mode == "offline":
            # Each session of a resumed run logs to a folder of its own: sync them all.
            sessions = Path(self.run_directory).parent.parent / f"offline-run-*-{run_id}"
            warn(f"[wandb] offline: logging to {self.run_directory}; upload this run's sessions "
                 f"later with `wandb sync {sessions}`")

    def _start(self, directory: Path, online_requested: bool, **init_args):
        """wandb's run in `self.mode`; online, when wandb cannot start it (a server that answered
        the probe but is not wandb's, or stops replying: init times out), offline instead, so
        that the metrics are kept for `wandb sync`. None when wandb fails."""
        try:
            import wandb
            self._wandb = wandb
            # Absolute: wandb's run directory then is too, as summary.json's paths are.
            directory = Path(os.path.abspath(directory))
            directory.mkdir(parents=True, exist_ok=True)
            init_args.update(dir=str(directory),
                             settings=wandb.Settings(init_timeout=INIT_TIMEOUT_SECONDS, silent=True))
            try:
                return wandb.init(**init_args, mode=None if self.mode == "online"
                                  and not online_requested else self.mode)
            except Exception as error:
                if self.mode != "online":
                    raise
                self._say(f"wandb init (online) failed, logging offline instead: "
                          f"{type(error).__name__}: {error}")
                self.mode = "offline"
                # The failed run still holds its id in wandb's service: a new service frees it.
                wandb.teardown()
                return wandb.init(**init_args, mode="offline")
        except Exception as error:  # wandb raises many types; none may stop training
            self._disable(f"wandb init ({self.mode}) failed, continuing without wandb: "
                          f"{type(error).__name__}: {error}")
            return None

    @property
    def active(self) -> bool:
        return self.run is not None

    @property
    def run_directory(self) -> str | None:
        return getattr(self.run, "dir", None) if self.run is not None else None

    def _say(self, message: str) -> None:
        # wandb's errors span several lines (a network error quotes its whole request); a
        # warning in the training log is one line.
        self.warn(f"[wandb] {' '.join(message.split())}")

    def _disable(self, message: str) -> None:
        self._say(message)
        self.run = None

    def log(self, metrics: dict) -> None:
        """Logs one record; its "update" is the x axis (see __init__)."""
        if self.run is None:
            return
        try:
            self.run.log(_defined(metrics))
        except Exception as error:
            self._disable(f"log failed, disabling wandb: {error}")

    def log_checkpoint(self, paths: list[Path], update: int, session_end: bool = False) -> None:
        """Logs the checkpoint as an artifact (once per update). Offline, only at the end of a
        session (its final or interrupted save): wandb copies every logged artifact into its
        staging folder (~/.local/share/wandb) until `wandb sync`, which a long offline run would
        fill with a checkpoint per save."""
        if (self.run is None or not self.upload_artifacts or update == self._artifact_update
                or (self.mode == "offline" and not session_end)):
            return
        self._artifact_update = update
        try:
            artifact = self._wandb.Artifact(f"{self.run.id}-checkpoint", type="model",
                                            metadata={"update": update})
            for path in paths:
                artifact.add_file(str(path))
            self.run.log_artifact(artifact, aliases=["latest", f"update-{update}"])
        except Exception as error:
            self.warn(f"[wandb] checkpoint artifact upload failed: {error}")

    def finish(self, summary: dict | None = None, exit_code: int = 0) -> None:
        if self.run is None:
            return
        try:
            if summary:  # undefined values (NaN) would overwrite the last defined one
                self.run.summary.update(_defined(summary))
            self.run.finish(exit_code=exit_code)
        except Exception as error:
            self.warn(f"[wandb] finish failed: {error}")
        self.run = None


def _defined(metrics: dict) -> dict:
    """The values that are defined: not None, not NaN (a window without episodes has no mean
    return; wandb omits such values rather than plotting or keeping a null)."""
    return {key: value for key, value in metrics.items() if value is not None and value == value}
