"""The lock that lets one trainer at a time write a run directory."""

from __future__ import annotations

import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # no advisory locks on this platform (Windows): RunLock runs unguarded
    fcntl = None

LOCK_NAME = ".lock"


class RunLock:
    """An exclusive lock on a run directory (its `.lock` file), held while a trainer writes it,
    so that a second trainer started on the same run fails at once instead of interleaving
    checkpoints and metrics. The OS releases it when the process ends, however it ends."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK_NAME
        self.file = None

    def acquire(self) -> bool:
        """True when this process now holds the lock; False when another process does."""
        if fcntl is None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(self.path, "a+")
        try:
            fcntl.flock(self.file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.file.close()
            self.file = None
            return False
        self.file.seek(0)
        self.file.truncate()
        self.file.write(f"{os.getpid()}\n")
        self.file.flush()
        return True

    def held_elsewhere(self) -> bool:
        """Whether another process holds the lock now: a probe that takes a shared lock and drops
        it at once, writing nothing. Only "would block" counts: a file system whose locks fail
        otherwise (some network mounts) proves nothing."""
        if fcntl is None:
            return False
        try:
            probe = open(self.path)
        except OSError:  # no lock file (no trainer ever ran here), or unreadable
            return False
        with probe:
            try:
                fcntl.flock(probe.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            except OSError:
                return False
        return False

    def still_in_place(self) -> bool:
        """Whether the lock file this process holds is still `{run_dir}/.lock`: False once the
        run directory was deleted, renamed or replaced during the run. Writing on would then
        create a run directory that no lock guards (a second trainer could resume it at the
        same time and prune the first one's checkpoints), or scatter the run over two."""
        if fcntl is None or self.file is None:
            return True
        try:
            held, there = os.fstat(self.file.fileno()), os.stat(self.path)
        except OSError:
            return False
        return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)

    def holder(self) -> str:
        """The pid written by the process that holds the lock, or "?"."""
        try:
            return self.path.read_text().strip() or "?"
        except OSError:
            return "?"

    def release(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
