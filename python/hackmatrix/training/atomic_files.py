"""Files replaced as a whole: a reader, or a process killed at any moment, sees the old file or
the new one, never a part of the new one under the real name."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable

# `atomic_write`'s temp files: ".{name}.{random}.tmp".
TEMP_FILE_PATTERN = re.compile(r"^\..+\.tmp$")


def atomic_write(path: Path, write: Callable[[Any], None]) -> Path:
    """Calls write(binary_file) on a temp file next to `path`, fsyncs it, renames it over `path`."""
    return commit(write_temp(path, write), path)


def write_temp(path: Path, write: Callable[[Any], None]) -> Path:
    """Calls write(binary_file) on a new temp file next to `path` and fsyncs it; returns the temp
    file, for `commit` to rename (several files written first, then renamed one after another,
    make the renames the only moments a kill can fall between). A write that fails leaves no
    temp file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp_name, 0o666 & ~_umask())  # mkstemp creates 0600; use the usual file mode
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return Path(tmp_name)


def commit(temp: Path, path: Path) -> Path:
    """Renames `write_temp`'s file over `path` (durably); the temp file is gone either way."""
    try:
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    fsync_directory(Path(path).parent)
    return Path(path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_directory(directory: Path) -> None:
    """Makes renames and deletions in `directory` durable; skipped where the platform cannot."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temp_files(directory: Path) -> list[Path]:
    """The temp files of writes that a kill interrupted."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    return [entry for entry in directory.iterdir()
            if TEMP_FILE_PATTERN.match(entry.name) and entry.is_file()]
