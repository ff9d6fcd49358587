"""Files of a results folder read or appended to, never trusted to be what their name says: a results folder may come
from anywhere (results/README.md, Security). No suite imports, so store and config use it."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO


MAX_READ_BYTES = 16 << 20  # summary.json, ablation.yaml, claims: the suite writes a few kB of each


class UnsafeFile(OSError):
    """A path the suite will not use: a link where it writes, or not a regular file (or too large) where it reads."""

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def _unsafe(path: Path | str, why: str) -> UnsafeFile:
    return UnsafeFile(errno.EPERM, why, str(path))


def no_link(path: Path) -> Path:
    """``path``, unless it is a symbolic link (:class:`UnsafeFile`)."""
    path = Path(path)
    if path.is_symlink():
        raise _unsafe(path, "is a symbolic link; the suite does not write through links in a results folder "
                            "(replace it by a real folder or file)")
    return path


def open_regular(path: Path, max_bytes: int | None = MAX_READ_BYTES, links: bool = True) -> IO[bytes]:
    """Open a regular file for reading, never blocking on a FIFO nor reading a device; UnsafeFile otherwise, or when
    larger than ``max_bytes``. ``links`` False: a link is refused too (for a file that enters a shared page)."""
    if not links and os.path.islink(path):
        raise _unsafe(path, "is a symbolic link; a results folder's file enters a shared page only when it is a "
                            "regular file inside the folder (replace the link by the file)")
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise _unsafe(path, "a folder, not a file; name a file in it (e.g. a shell glob such as DIR/*.yaml)")
    if not stat.S_ISREG(mode):  # before opening: opening a device may do something
        raise _unsafe(path, "not a regular file (a FIFO, a device or a folder); refused to read it")
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if links else getattr(os, "O_NOFOLLOW", 0))  # a link swapped in: refused
    f = os.fdopen(os.open(path, flags), "rb")  # a FIFO swapped in meanwhile: no wait
    st = os.fstat(f.fileno())
    if not stat.S_ISREG(st.st_mode) or (max_bytes is not None and st.st_size > max_bytes):
        f.close()
        raise _unsafe(path, f"larger than {max_bytes} bytes; refused to read it" if stat.S_ISREG(st.st_mode) else
                      "not a regular file (a FIFO, a device or a folder); refused to read it")
    return f


def read_text(path: Path, max_bytes: int | None = MAX_READ_BYTES, links: bool = True) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes`` (:func:`open_regular`); UnicodeDecodeError if not."""
    with open_regular(path, max_bytes, links) as f:
        data = f.read() if max_bytes is None else f.read(max_bytes + 1)  # +1: one that grew meanwhile
    if max_bytes is not None and len(data) > max_bytes:
        raise _unsafe(path, f"larger than {max_bytes} bytes; refused to read it")
    return data.decode("utf-8")


def open_append(path: Path) -> IO[str]:
    """Open ``path`` for appending text, creating it; UnsafeFile for a link (``O_NOFOLLOW``), a FIFO or a device."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o666)  # less the umask, as any new file
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _unsafe(path, "is a symbolic link; the suite does not write through links in a results folder "
                                "(delete it)") from None
        if err.errno == errno.ENXIO:  # a FIFO nobody reads
            raise _unsafe(path, "not a regular file (a FIFO or a device); refused to write to it") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _unsafe(path, "not a regular file (a FIFO or a device); refused to write to it")
    return os.fdopen(fd, "a", encoding="utf-8")
