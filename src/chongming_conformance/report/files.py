"""Writing a report so that a reader sees the old file or the whole new one, never half.

A CI gate parses the JSON report after the run; a process killed mid-write (or
a disk that fills up) must not leave it a truncated document that reads as a
corrupt verdict. The text goes to a temporary file in the same directory, is
flushed to disk, and replaces the target in one ``os.replace`` (atomic on POSIX
and Windows when both are on the same file system, which the same directory
guarantees).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(target: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``target`` through a temporary sibling and ``os.replace``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
