"""Opening input files without ever blocking on them (issue 24 item 1).

`open()` of a FIFO without a writer blocks forever, and a character device
such as /dev/zero reads without end. Every file the adapter reads (plan.json,
rank files, manifest.json, safetensors files and their index) goes through
`read_regular` / `require_regular`: the type is checked with `stat` before
the open, the open is non-blocking, and the opened descriptor is checked again
(`fstat`), so a FIFO, socket, device or directory is refused at once.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable


def file_type_text(mode: int) -> str:
    """What a non-regular file is, in the words of shardc's diagnostics."""
    if stat.S_ISFIFO(mode):
        return "is a FIFO"
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISCHR(mode):
        return "is a character device"
    if stat.S_ISBLK(mode):
        return "is a block device"
    if stat.S_ISSOCK(mode):
        return "is a socket"
    return "is not a regular file"


def require_regular(path: str, error: Callable[[str], Exception]) -> int:
    """Raise `error(message)` unless `path` (symlinks followed) is a regular
    file; returns its size in bytes. Never opens the file."""
    try:
        info = os.stat(path)
    except OSError as ex:
        raise error(f"{path}: {ex.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{path} {file_type_text(info.st_mode)}; expected a regular file")
    return info.st_size


def open_regular(path: str, error: Callable[[str], Exception]) -> int:
    """A read-only descriptor of the regular file `path` (O_NONBLOCK, so even a
    file swapped for a FIFO after the check cannot block; fstat re-checked)."""
    require_regular(path, error)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as ex:
        raise error(f"{path}: {ex.strerror}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise error(f"{path} {file_type_text(mode)}; expected a regular file")
    return fd


def read_regular(path: str, limit: int, error: Callable[[str], Exception]) -> bytes:
    """The whole content of the regular file `path`, at most `limit` bytes
    (a larger file is refused before it is read)."""
    fd = open_regular(path, error)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise error(f"{path}: {size} bytes, more than the {limit} this file may have")
        parts, left = [], size
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)
