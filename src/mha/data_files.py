"""Where the book's data files live, and how they are read without trusting them (chapters 2 and 3).

The notebooks read stored results: the lab's checkpoints (``lab/``, :mod:`mha.lab.checkpoints`), the fitted heads of
chapter 2 (``pattern_fits.json``, :mod:`mha.core.low_rank_fitting`) and a treebank sample (``sample.conllu``,
:mod:`mha.corpora.treebank`). They are package data: the repository's ``data/`` folder is installed as the package
:mod:`mha.data`, and :data:`DATA_DIRECTORY` is found through the package with :mod:`importlib.resources`, so they are
found from any working directory, in an editable install (the repository's ``data/`` itself) and from a wheel
(``mha/data/`` in site-packages, as on Colab, Binder or a JupyterHub).

A data file may be missing, replaced by something else, or damaged. :func:`read_data_file` reads only a regular file
of bounded size, so a path that names a device such as ``/dev/zero`` or a pipe fails at once instead of hanging, and
every failure is raised as the caller's own error class with what to do about it (:func:`how_to_restore`: the command
that regenerates the file in a clone of the repository, and for an installed package, how to reinstall it).

Every file the book reads is verified before it is trusted, by one path: :func:`read_verified_file` reads the bytes
once and compares their sha256 with the ``SHA256SUMS`` list of the folder that holds them (or of the folder above),
so nothing can change between the check and the read; a file of :data:`DATA_DIRECTORY` must be listed there
(``python -m scripts.record_data_sha256`` rewrites the list after a regeneration). A link is followed only within
the folder whose list verifies it: one that leads out of it is refused, never read unverified. The lab's
checkpoints have their own manifest (:mod:`mha.lab.checkpoints`), itself listed in ``SHA256SUMS``.

Every JSON file goes through :func:`parse_json`, which bounds the work before and while parsing: the size
(:data:`MAX_JSON_BYTES`), the nesting (:data:`MAX_JSON_DEPTH`, measured in one pass that grows linearly with the
text), the digits of a number (:data:`MAX_JSON_NUMBER_DIGITS`), and no ``NaN`` or ``Infinity``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import json
import math
import os
import re
import stat
from pathlib import Path

import numpy as np

__all__ = ["BOOK_DATA_FILES", "DATA_DIRECTORY", "MAX_JSON_BYTES", "MAX_JSON_DEPTH", "MAX_JSON_NUMBER_DIGITS",
           "SHA256_LIST", "check_stored_weights", "how_to_restore", "parse_json", "read_data_file",
           "read_verified_file", "read_verified_json", "record_sha256", "repository_root", "write_recorded_json"]

SHA256_LIST = "SHA256SUMS"
"""The file beside the data that lists each file's sha256, in ``sha256sum``'s format (``sha256sum -c`` checks it)."""

MAX_JSON_DEPTH = 64
"""The deepest nesting of arrays and objects a JSON data file may have (the book's files nest at most 6 deep)."""
MAX_JSON_BYTES = 64 * 2**20
"""The most bytes of JSON that are parsed (64 MiB; the book's files, and a BERT ``tokenizer.json``, are far less)."""
MAX_JSON_NUMBER_DIGITS = 100
"""The most characters one JSON number may have (a 64-bit seed has 20 digits, a float as json writes it 24)."""

BOOK_DATA_FILES = ("citations.json", "coreference_patching.json", "coreference_removal.json", "ewt_agreement.json",
                   "ewt_dev_heads.safetensors", "litbank/litbank_coref.json", "litbank/litbank_entities.json",
                   "lab/manifest.json", "litbank_coreference.json", "litbank_entities.json",
                   "named_head_patching.json", "amnesic_probing.json",
                   "pattern_fits.json", "pruning_spread.json", "pruning_treebank.json", "sample.conllu",
                   "single_removals.json", "subspace_baselines.json", "triples_pruning.json",
                   "ud_english_ewt/en_ewt-ud-dev.conllu")
"""The data files the book reads, each listed with its sha256 in ``data/SHA256SUMS``: those outside ``lab/``, and
the lab's manifest, which records the sha256 of every checkpoint and result file of ``lab/``."""

RECORD_SHA256 = "python -m scripts.record_data_sha256"
_MAX_LIST_BYTES = 2**20
_LIST_LINE = re.compile(r"^([0-9a-f]{64})  ([A-Za-z0-9_][A-Za-z0-9_./-]*)$")

DATA_PACKAGE = "mha.data"


def _data_directory() -> Path:
    """The folder of the package :mod:`mha.data`: the repository's ``data/`` (editable install) or ``mha/data/``."""
    try:
        return Path(os.fspath(importlib.resources.files(DATA_PACKAGE))).resolve()
    except (ModuleNotFoundError, TypeError):
        # src/ put on sys.path by hand instead of installing the package: mha.data is not importable. Reading then
        # fails with "missing" and how_to_restore() says to install the package.
        return Path(__file__).resolve().parent / "data"


DATA_DIRECTORY = _data_directory()
"""The folder of :mod:`mha.data`: the repository's ``data/`` in an editable install, ``mha/data/`` from a wheel."""


def repository_root() -> Path | None:
    """The repository whose ``data/`` this package reads (an editable install), or None for an installed wheel."""
    root = DATA_DIRECTORY.parent
    if DATA_DIRECTORY.name == "data" and (root / "pyproject.toml").is_file() and (root / "scripts").is_dir():
        return root
    return None


def _reinstall_command() -> str:
    """The pip command that reinstalls this copy of mha from where it came from (PEP 610's direct_url.json)."""
    # the metadata installed beside this copy of the package (site-packages), not another copy's further on sys.path
    beside = list(importlib.metadata.distributions(name="mha", path=[str(Path(__file__).resolve().parents[1])]))
    try:
        distribution = beside[0] if beside else importlib.metadata.distribution("mha")
    except importlib.metadata.PackageNotFoundError:
        return "pip install ."
    version = distribution.version
    try:
        origin = json.loads(distribution.read_text("direct_url.json") or "null")
    except json.JSONDecodeError:
        origin = None
    if isinstance(origin, dict) and isinstance(origin.get("url"), str):
        vcs = origin.get("vcs_info")
        if isinstance(vcs, dict):
            revision = vcs.get("requested_revision") or vcs.get("commit_id")
            target = f"mha @ {vcs.get('vcs', 'git')}+{origin['url']}" + (f"@{revision}" if revision else "")
        else:
            target = origin["url"].removeprefix("file://")
        return f'pip install --force-reinstall --no-deps "{target}"'
    return f"pip install --force-reinstall --no-deps mha=={version}"


def _inside(path: str | os.PathLike | None, folder: Path) -> bool:
    if path is None:
        return True
    try:
        return Path(path).resolve().is_relative_to(folder)
    except OSError:
        return False


def how_to_restore(regenerate: str, path: str | os.PathLike | None = None) -> str:
    """What to do about a missing or damaged data file ``path``, as a sentence for an error message.

    ``regenerate`` is the command that rebuilds it from a clone of the repository (``python scripts/...``). In an
    editable install it is run from this repository's root. A file that came inside an installed wheel (Colab,
    Binder, a JupyterHub) is restored by reinstalling the package, so the message gives that command first.
    """
    root = repository_root()
    if root is not None:
        return f"Regenerate it with:\n    {regenerate}\n(run from the repository root, {root})."
    if not _inside(path, DATA_DIRECTORY):
        return f"Regenerate it with:\n    {regenerate}\n(run from the root of a clone of the book's repository)."
    return (f"It is package data of the installed package mha ({DATA_DIRECTORY}); reinstall the package to restore "
            f"it:\n    {_reinstall_command()}\nor, in a clone of the book's repository, regenerate it with:\n"
            f"    {regenerate}\n(run from the clone's root, then install the package from the clone).")


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
            data = handle.read(min(limit, before.st_size) + 1)  # a buffer of the file's size, not of the limit
            while len(data) <= limit and (more := handle.read(min(2**20, limit + 1 - len(data)))):
                data += more  # the file grew after it was measured
    except OSError as problem:
        raise error(f"{what} {path} cannot be read ({problem}). {how}") from problem
    if len(data) > limit:
        raise error(f"{what} {path} grew past {limit:,} bytes while it was read. {how}")
    return data


def parse_json(data: bytes | str, *, what: str, path: str | os.PathLike, how: str,
               error: type[Exception] = ValueError):
    """The JSON value in ``data`` (UTF-8 bytes, or text), within the bounds of a data file, or ``error``.

    The size (:data:`MAX_JSON_BYTES`) and the nesting (:data:`MAX_JSON_DEPTH`, one pass over the brackets outside
    strings, linear in the text) are checked before parsing, so a file nested 100,000 deep gets this message
    instead of a ``RecursionError``; while parsing, a number longer than :data:`MAX_JSON_NUMBER_DIGITS` and
    ``NaN``, ``Infinity`` or a float that overflows to it are refused before they are converted. Every refusal is an
    ``error`` that names the file and the bound.
    """
    size = len(data)
    if size > MAX_JSON_BYTES:
        raise error(f"{what} {path} holds {size:,} bytes of JSON, more than the {MAX_JSON_BYTES:,} a data file may "
                    f"have, so it is not parsed. {how}")
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    except UnicodeDecodeError as problem:
        raise error(f"{what} {path} cannot be read: it is not UTF-8 text ({problem}). {how}") from None
    depth = _json_depth(data)
    if depth > MAX_JSON_DEPTH:
        raise error(f"{what} {path} nests arrays and objects {depth:,} deep, more than the {MAX_JSON_DEPTH} a data "
                    f"file may have, so it is not parsed. {how}")

    def number(kind: type):
        def convert(digits: str):
            if len(digits) > MAX_JSON_NUMBER_DIGITS:
                raise error(f"{what} {path} holds a number of {len(digits):,} characters ({digits[:20]}...), more "
                            f"than the {MAX_JSON_NUMBER_DIGITS} a number in a data file may have. {how}")
            value = kind(digits)
            if not math.isfinite(value):
                refuse_constant(digits)
            return value
        return convert

    def refuse_constant(name: str):
        raise error(f"{what} {path} holds {name}, but a number in a data file must be finite (no NaN, Infinity or "
                    f"-Infinity). {how}")

    try:
        return json.loads(text, parse_int=number(int), parse_float=number(float), parse_constant=refuse_constant)
    except json.JSONDecodeError as problem:
        raise error(f"{what} {path} cannot be read as JSON ({problem}). {how}") from None


def _json_depth(text: str | bytes) -> int:
    """The deepest nesting of ``[`` and ``{`` in JSON text, brackets inside strings left out.

    Linear in the text: a quote is escaped when an odd run of backslashes stands before it, the other quotes open
    and close strings, and a bracket lies outside every string when an even number of those stand before it. Up to
    the first syntax error this is exactly the parser's reading, and the parser stops there.
    """
    raw = text.encode("utf-8", errors="replace") if isinstance(text, str) else bytes(text)
    codes = np.frombuffer(raw, dtype=np.uint8)  # UTF-8: every byte of a non-ASCII character is >= 0x80
    backslash = (codes == ord("\\")).view(np.int8)
    edges = np.diff(backslash, prepend=np.int8(0), append=np.int8(0))  # +1 where a run starts, -1 just after it
    run_starts, run_ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    del backslash, edges
    quotes = np.flatnonzero(codes == ord('"'))
    run = np.minimum(np.searchsorted(run_ends, quotes), max(len(run_ends) - 1, 0))  # the run ending at each quote
    escaped = np.zeros(len(quotes), dtype=bool)
    if len(run_ends):
        ends_here = run_ends[run] == quotes
        escaped = ends_here & ((run_ends[run] - run_starts[run]) % 2 == 1)
    string_quotes = quotes[~escaped]
    del run_starts, run_ends, quotes, run, escaped
    opening, closing = np.isin(codes, (ord("["), ord("{"))), np.isin(codes, (ord("]"), ord("}")))
    brackets = np.flatnonzero(opening | closing)
    outside = np.searchsorted(string_quotes, brackets) % 2 == 0
    steps = np.where(opening[brackets[outside]], 1, -1).astype(np.int64)
    return int(np.cumsum(steps).max(initial=0))


def check_stored_weights(tensors: dict, *, source: str | os.PathLike, how: str,
                         error: type[Exception] = ValueError) -> dict:
    """``tensors`` (name -> torch tensor) when every one is float32 and finite; else ``error`` naming the tensor.

    A weights file stored in another dtype (BOOL, F16, I64) is a different or damaged model, and one holding NaN
    or inf is damaged: loading it would cast or propagate them silently (chapter 3, "A tour of all 72 heads").
    """
    import torch  # the data files of chapter 2 are read without torch

    for name, tensor in tensors.items():
        if tensor.dtype != torch.float32:
            raise error(f"{source} stores {name!r} as {tensor.dtype}, but the model's weights are float32; a file "
                        f"in another dtype is a different (or damaged) model. {how}")
        if not bool(torch.isfinite(tensor).all()):
            raise error(f"{source} holds NaN or inf in {name!r}; the file is damaged. {how}")
    return tensors


def _sha256_list(folder: Path) -> tuple[Path, dict[str, str]] | None:
    """The ``SHA256SUMS`` of ``folder`` or of the folder above it, and its entries (paths relative to it), if any."""
    for candidate in (folder, folder.parent):
        path = candidate / SHA256_LIST
        if path.is_file() or path.is_symlink():
            if path.resolve().parent != candidate.resolve():
                raise ValueError(f"{path} is a link to {path.resolve()}, outside its folder, so it is not trusted. "
                                 f"Restore it from git, or run {RECORD_SHA256}.")
            data = read_data_file(path, what="the list of data sha256s", how=f"Restore it from git, or run "
                                  f"{RECORD_SHA256}.", limit=_MAX_LIST_BYTES)
            entries = {}
            for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
                match = _LIST_LINE.match(line)
                if match is None or ".." in match[2].split("/"):
                    raise ValueError(f"line {number} of {path} is not '<64 hex digits>  <relative path>': "
                                     f"{line[:80]!r}. Restore it from git, or run {RECORD_SHA256}.")
                entries[match[2]] = match[1]
            return path, entries
    return None


def read_verified_file(path: str | os.PathLike, *, what: str, how: str, limit: int,
                       error: type[Exception] = ValueError) -> bytes:
    """The bytes of data file ``path``, read once and compared with the sha256 that ``SHA256SUMS`` records for them.

    The list is the one in ``path``'s folder or the folder above (``data/SHA256SUMS`` for the book's files); a file
    inside :data:`DATA_DIRECTORY` must be listed there. Links are resolved first, and one that leads out of the
    folder of the list (or out of :data:`DATA_DIRECTORY`) is refused. A file in a folder without a list (a reader's
    own treebank) is read with the same bounds but not compared. The hash is of the bytes returned, never of a
    second read.
    """
    path = Path(path)
    resolved = path.resolve()
    inside_book = _inside(resolved, DATA_DIRECTORY)
    if Path(os.path.abspath(path)).is_relative_to(DATA_DIRECTORY) and not inside_book:
        raise error(_link_out(what, path, resolved, DATA_DIRECTORY, how))
    try:
        found = _sha256_list(Path(os.path.abspath(path)).parent) or _sha256_list(resolved.parent)
    except ValueError as problem:
        raise error(str(problem)) from None
    if found is None:
        if inside_book:
            raise error(f"{what} {path} is one of the book's data files, but {DATA_DIRECTORY / SHA256_LIST} is "
                        f"missing, so it cannot be verified. Restore that list from git, or run {RECORD_SHA256}.")
        return read_data_file(resolved, what=what, how=how, limit=limit, error=error)
    list_path, entries = found
    root = list_path.parent.resolve()
    if not resolved.is_relative_to(root):
        raise error(_link_out(what, path, resolved, root, how))
    data = read_data_file(resolved, what=what, how=how, limit=limit, error=error)  # the file the list verifies
    name = resolved.relative_to(root).as_posix()
    expected = entries.get(name)
    if expected is None:
        if inside_book or entries:
            raise error(f"{what} {path} is not listed in {list_path}, so it cannot be verified. If it is a new data "
                        f"file of the book, record it with {RECORD_SHA256}.")
        return data
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise error(f"{what} {path} is damaged, tampered with or out of date: its sha256 is {actual}, but {list_path} "
                    f"records {expected}. {how} If you regenerated it on purpose, record it with {RECORD_SHA256}.")
    return data


def _link_out(what: str, path: Path, resolved: Path, folder: Path, how: str) -> str:
    return (f"{what} {path} is a link to {resolved}, outside {folder}, where the sha256 of data files is checked, so "
            f"it is not read. Replace the link with the file itself. {how}")


def read_verified_json(path: str | os.PathLike, *, what: str, regenerate: str, limit: int) -> tuple[object, str]:
    """The JSON value of data file ``path`` (:func:`read_verified_file`, then :func:`parse_json`), and the sentence
    that says how to restore the file (:func:`how_to_restore` with ``regenerate``), for the caller's own checks of
    the value's shape. A missing, damaged or malformed file raises ``ValueError`` with that sentence."""
    how = how_to_restore(regenerate, path)
    return parse_json(read_verified_file(path, what=what, how=how, limit=limit), what=what, path=path, how=how), how


def write_recorded_json(path: str | os.PathLike, content) -> Path:
    """Write ``content`` as compact JSON to ``path``, one of :data:`BOOK_DATA_FILES`, and record its sha256.

    What every script that regenerates a JSON data file of the book does last, so that
    :func:`read_verified_file` accepts the new file.
    """
    path = Path(path)
    path.write_text(json.dumps(content, separators=(",", ":")) + "\n")
    record_sha256()  # data/SHA256SUMS: the loaders check the file against it
    return path


def record_sha256(folder: str | os.PathLike = DATA_DIRECTORY, names: tuple[str, ...] = BOOK_DATA_FILES) -> Path:
    """Write ``folder/SHA256SUMS`` listing the sha256 of each of ``names`` (paths relative to ``folder``).

    The scripts that regenerate a data file call it after writing, so the list follows them.
    """
    folder = Path(folder)
    lines = [f"{hashlib.sha256((folder / name).read_bytes()).hexdigest()}  {name}" for name in sorted(names)]
    path = folder / SHA256_LIST
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
