"""Files of a results folder that the suite reads or appends to, never trusted to be what their name
says: only regular files are read (up to a size), appends never follow a link, and a folder the
suite writes into must not be a link. ``suite.store`` builds on these; ``suite.config`` reads YAML
through :func:`read_text`. No suite imports here, so both can use it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO

# A results folder may come from anywhere (a shared disk, a tarball, a colleague's sweep), so no file
# of it is trusted to be what its name says (results/README.md, Security): the suite writes a file by
# renaming a temp file over it (which replaces a symbolic link instead of following it), appends only
# with O_NOFOLLOW, refuses folders it writes into that are links, and reads only regular files, up
# to a size.

MAX_READ_BYTES = 16 << 20  # summary.json, ablation.yaml, claims: the suite writes a few kB of each


class UnsafeFile(OSError):
    """A path the suite will not use: a symbolic link where it writes (it could point outside the
    results folder), or a FIFO, device, folder or oversized file where it reads a regular file."""

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def _unsafe(path: Path | str, why: str) -> UnsafeFile:
    return UnsafeFile(errno.EPERM, why, str(path))


def no_link(path: Path) -> Path:
    """``path``, unless it is a symbolic link (a folder the suite writes into could then point anywhere).
    Raises :class:`UnsafeFile` if it is."""
    path = Path(path)
    if path.is_symlink():
        raise _unsafe(path, "is a symbolic link; the suite does not write through links in a results folder "
                            "(replace it by a real folder or file)")
    return path


def open_regular(path: Path, max_bytes: int | None = MAX_READ_BYTES, links: bool = True) -> IO[bytes]:
    """Open for reading a file that must be a regular one, never blocking on a FIFO and never reading a
    device. ``links``: a link to a regular file is fine; False for a results folder's file that enters a
    shared page (a link could bring in any file of the machine: results/README.md, Security).

    Raises:
        UnsafeFile: not a regular file, a link where ``links`` is False, or larger than ``max_bytes``.
        OSError: as ``open`` (FileNotFoundError, NotADirectoryError, ...).
    """
    if not links and os.path.islink(path):
        raise _unsafe(path, "is a symbolic link; a results folder's file enters a shared page only when it is a "
                            "regular file inside the folder (replace the link by the file)")
    if not stat.S_ISREG(os.stat(path).st_mode):  # before opening: opening a device may do something
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
    """The UTF-8 text of a regular file of at most ``max_bytes`` (:func:`open_regular`, ``links`` too).

    Raises:
        UnsafeFile: see :func:`open_regular`; UnicodeDecodeError (a ValueError): not UTF-8.
    """
    with open_regular(path, max_bytes, links) as f:
        data = f.read() if max_bytes is None else f.read(max_bytes + 1)  # +1: one that grew meanwhile
    if max_bytes is not None and len(data) > max_bytes:
        raise _unsafe(path, f"larger than {max_bytes} bytes; refused to read it")
    return data.decode("utf-8")


def open_append(path: Path) -> IO[str]:
    """Open ``path`` for appending text (``metrics.jsonl``, ``log.txt``, a lock), creating it; never
    through a symbolic link (``O_NOFOLLOW``) and never into a FIFO or device.

    Raises:
        UnsafeFile: ``path`` is a link or not a regular file.
    """
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
