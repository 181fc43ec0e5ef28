"""Where the book's data files live, and how they are read without trusting them (chapters 2 and 3).

The notebooks read stored results: the lab's checkpoints (``data/lab/``, :mod:`mha.lab.checkpoints`) and the fitted
heads of chapter 2 (``data/pattern_fits.json``, :mod:`mha.core.low_rank_fitting`). A data file may be missing, replaced
by something else, or damaged. :func:`read_data_file` reads only a regular file of bounded size, so a path that
names a device such as ``/dev/zero`` or a pipe fails at once instead of hanging, and every failure is raised as the
caller's own error class with the command that regenerates the file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["DATA_DIRECTORY", "read_data_file"]

DATA_DIRECTORY = Path(__file__).resolve().parents[2] / "data"
"""``data/`` of the repository this package is installed from (editable install)."""


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return "not a regular file"


def read_data_file(path: str | os.PathLike, *, what: str, how: str, limit: int,
                   error: type[Exception] = ValueError) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes; anything else raises ``error``.

    ``what`` names the file in messages ("the checkpoint manifest"); ``how`` says how to fix it (usually the
    command that regenerates it). Devices, pipes and folders are refused before they are opened, so nothing hangs.
    """
    path = Path(path)
    try:
        before = os.stat(path)
    except FileNotFoundError:
        raise error(f"{what} {path} is missing. {how}") from None
    except OSError as problem:
        raise error(f"{what} {path} cannot be read ({problem}). {how}") from problem
    if not stat.S_ISREG(before.st_mode):
        raise error(f"{what} {path} is {_file_kind(before.st_mode)}, not a regular file, so it is not read. Put the "
                    f"real file there. {how}")
    if before.st_size > limit:
        raise error(f"{what} {path} is {before.st_size:,} bytes, more than the {limit:,} bytes it may have, so it "
                    f"is not read. {how}")
    try:
        # O_NONBLOCK: should the path turn into a pipe after the check above, opening it cannot block
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(descriptor, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise error(f"{what} {path} changed into something other than a regular file while it was read. "
                            f"{how}")
            data = handle.read(limit + 1)
    except OSError as problem:
        raise error(f"{what} {path} cannot be read ({problem}). {how}") from problem
    if len(data) > limit:
        raise error(f"{what} {path} grew past {limit:,} bytes while it was read. {how}")
    return data
