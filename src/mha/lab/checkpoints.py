"""Saving and loading the tiny transformers the book trains, as safetensors plus a JSON manifest (chapter 3).

Chapter 3 ("Induction heads" and the sections after it) plots models we trained with
``scripts/train_checkpoints.py``; their weights live in the repository's ``data/lab/``, installed with the package as
``mha/data/lab/`` (:data:`LAB_DIRECTORY`, found through the package by :mod:`mha.data_files`), as one
``<name>.safetensors`` file per checkpoint, and ``manifest.json`` beside them records, for each checkpoint, the
model config, seed, training steps, task and training settings, the sha256 of the file, and the exact command that
regenerates it. Other result files (loss curves, sweeps) are recorded in the same manifest with :func:`record_file`.

Loading checks the file against the manifest. A missing file, a file whose sha256 differs from the manifest's
(corrupted, truncated, or from another run), a file whose own metadata (the config it was saved with, its tensor
shapes) disagrees with the manifest's config, a tensor that is not finite float32, or a file that cannot be parsed
raises :class:`CheckpointError` with the file's path and what to do: the command that regenerates it, and for a
package installed from a wheel, how to reinstall it (:func:`mha.data_files.how_to_restore`). The manifest itself is
checked too: the book's own against the sha256 that ``data/SHA256SUMS`` records, and every manifest must be a JSON
object whose entries have every field with the right type, and every ``file`` must be a plain file name next to the
manifest (no folders, no ``..``, no absolute paths, no links that lead out of the folder). Only regular files of at
most :data:`MAX_FILE_BYTES` are read, so a manifest that names a device such as ``/dev/zero`` or a huge file fails
at once instead of hanging.

Files are written canonically: tensors in a fixed order, the safetensors header (metadata included) with sorted
keys. Saving the same weights therefore gives the same bytes, and the same sha256, in every process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import struct
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors_bytes

from mha.core.validation import as_path, check_type, is_whole_number
from mha.data_files import (
    DATA_DIRECTORY,
    check_stored_weights,
    how_to_restore,
    parse_json,
    read_data_file,
    read_verified_file,
    record_sha256,
)
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig

__all__ = ["LAB_DIRECTORY", "MANIFEST_NAME", "MAX_FILE_BYTES", "REGENERATE_ALL", "CheckpointError", "CheckpointInfo",
           "sha256_of_file", "canonical_safetensors", "read_manifest", "save_checkpoint", "load_checkpoint",
           "record_file", "verified_bytes", "load_json", "checkpoint_names"]

LAB_DIRECTORY = DATA_DIRECTORY / "lab"
"""The lab's folder in the package data: the repository's ``data/lab/`` (editable install) or ``mha/data/lab/``."""

MANIFEST_NAME = "manifest.json"
REGENERATE_ALL = "python -m scripts.train_checkpoints"
"""Run from the root of a clone of the repository, this rebuilds everything in ``data/lab/``."""

MAX_FILE_BYTES = 256 * 2**20
"""The largest checkpoint, result file or manifest that is read (256 MiB; the book's files are under 1 MiB)."""

_READABLE = 0o644
_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SHA256_PATTERN = re.compile(r"^[0-9a-f]{64}$")
_FORMAT = 1

# safetensors' names for torch dtypes, in the order of safetensors' Dtype enum (it writes the data of the
# last dtype in this order first, ties broken by tensor name)
_SAFETENSORS_DTYPES = {torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.int16: "I16",
                       torch.float16: "F16", torch.bfloat16: "BF16", torch.int32: "I32", torch.float32: "F32",
                       torch.float64: "F64", torch.int64: "I64"}
_DTYPE_RANK = {dtype: rank for rank, dtype in enumerate(_SAFETENSORS_DTYPES)}

# the manifest's schema: field -> (type, required); ints exclude bools
_CHECKPOINT_FIELDS = {"file": (str, True), "config": (dict, True), "seed": (int, True), "steps": (int, True),
                      "task": (dict, True), "sha256": (str, True), "regenerate": (str, True),
                      "training": (dict, False), "extra": (dict, False)}
_FILE_FIELDS = {"sha256": (str, True), "regenerate": (str, True), "description": (str, False)}


class CheckpointError(RuntimeError):
    """A checkpoint or result file is missing, corrupted or unreadable; the message says how to regenerate it."""


@dataclasses.dataclass(frozen=True)
class CheckpointInfo:
    """What the manifest records about one checkpoint (chapter 3)."""

    name: str
    file: str  # file name inside the lab directory
    config: TinyTransformerConfig
    seed: int  # the model's initialisation seed
    steps: int  # optimiser steps taken when saved
    task: dict  # the task's to_dict()
    training: dict  # the TrainingConfig's to_dict(), or {}
    sha256: str
    regenerate: str  # shell command, run from the root of a clone of the repository
    extra: dict  # anything else the script recorded (e.g. the phase-change step)


def _read_regular_file(path: Path, what: str, how: str) -> bytes:
    """The bytes of ``path``: only a regular file of at most :data:`MAX_FILE_BYTES` is read, so devices never hang."""
    return read_data_file(path, what=what, how=how, limit=MAX_FILE_BYTES, error=CheckpointError)


def sha256_of_file(path: str | os.PathLike) -> str:
    """Hex sha256 of a regular file's bytes; :class:`CheckpointError` for a missing, special or oversized file."""
    path = as_path("path", path)
    return hashlib.sha256(_read_regular_file(path, "file", "Check the path.")).hexdigest()


def canonical_safetensors(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> bytes:
    """The safetensors bytes of ``tensors`` and ``metadata``, the same in every process for the same input.

    The layout is the one :func:`safetensors.torch.save` writes (8-byte header
    length, compact JSON header padded with spaces to a multiple of 8, then
    the data of each tensor, ordered by dtype as safetensors orders them, then
    by name), except that the ``__metadata__`` keys are always sorted:
    safetensors keeps metadata in a hash map whose order changes from process
    to process, so the same weights got a different sha256 on every save.
    """
    check_type("tensors", tensors, dict, "a dict of tensors by name")
    check_type("metadata", metadata, dict, "a dict of text by name")
    if sys.byteorder != "little":  # pragma: no cover - every platform torch ships for is little-endian
        raise RuntimeError("canonical_safetensors writes little-endian data and needs a little-endian machine.")
    if not all(isinstance(key, str) and isinstance(value, str) for key, value in metadata.items()):
        raise ValueError("safetensors metadata must map strings to strings; convert values with json.dumps first.")
    prepared = {}
    for name, tensor in tensors.items():
        if not isinstance(name, str) or not isinstance(tensor, torch.Tensor):
            raise ValueError(f"tensors must map names (str) to torch tensors; got {name!r}: {type(tensor).__name__}.")
        if tensor.dtype not in _SAFETENSORS_DTYPES:
            raise ValueError(f"tensor {name!r} has dtype {tensor.dtype}, which this writer does not store; "
                             f"convert it to one of {', '.join(str(d) for d in _SAFETENSORS_DTYPES)}.")
        prepared[name] = tensor.detach().to("cpu").contiguous()
    header: dict[str, Any] = {"__metadata__": dict(sorted(metadata.items()))} if metadata else {}
    chunks, offset = [], 0
    for name in sorted(prepared, key=lambda key: (-_DTYPE_RANK[prepared[key].dtype], key)):
        tensor = prepared[name]
        data = tensor.reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": _SAFETENSORS_DTYPES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def _safetensors_metadata(data: bytes) -> dict:
    """The ``__metadata__`` of safetensors bytes ({} if none); ``ValueError`` if the header is not valid."""
    if len(data) < 8:
        raise ValueError("shorter than the 8-byte header length")
    (length,) = struct.unpack("<Q", data[:8])
    if length > len(data) - 8:
        raise ValueError(f"its header claims {length:,} bytes but the file has {len(data) - 8:,} after the length")
    header = parse_json(data[8:8 + length], what="its header", path="(safetensors JSON)", how="")
    if not isinstance(header, dict):
        raise ValueError("its header is not a JSON object")
    metadata = header.get("__metadata__") or {}
    if not isinstance(metadata, dict):
        raise ValueError("its __metadata__ is not a JSON object")
    return metadata


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME_PATTERN.match(name):
        raise ValueError(f"name {name!r} should be letters, digits, '_', '-' or '.', starting with a letter or digit.")


def _manifest_path(directory: str | os.PathLike) -> Path:
    return as_path("directory", directory) / MANIFEST_NAME


def _describe(value: object) -> str:
    text = repr(value)
    return f"{text[:60]}..." if len(text) > 60 else text


def _type_name(kind: type) -> str:
    return {str: "a string", int: "a whole number", dict: "a JSON object"}[kind]


def _check_entry(entry: object, where: str, fields: dict) -> list[str]:
    """What is wrong with one manifest entry (``where`` names it), as sentences; [] if nothing."""
    if not isinstance(entry, dict):
        return [f"{where} is {type(entry).__name__} {_describe(entry)}, but it must be a JSON object with the "
                f"fields {', '.join(name for name, (_, required) in fields.items() if required)}"]
    problems = []
    for field, (kind, required) in fields.items():
        if field not in entry:
            if required:
                problems.append(f"{where} has no {field!r} field")
            continue
        value = entry[field]
        if not (is_whole_number(value) if kind is int else isinstance(value, kind)):
            problems.append(f"{where}[{field!r}] is {type(value).__name__} {_describe(value)}, but it must be "
                            f"{_type_name(kind)}")
    if isinstance(entry.get("sha256"), str) and not _SHA256_PATTERN.match(entry["sha256"]):
        problems.append(f"{where}['sha256'] is {_describe(entry['sha256'])}, but it must be 64 lower-case hex digits")
    if isinstance(entry.get("file"), str) and not _NAME_PATTERN.match(entry["file"]):
        problems.append(f"{where}['file'] is {entry['file']!r}, but it must be a plain file name next to the manifest "
                        f"(letters, digits, '_', '-' and '.'; no folders, no '..', no absolute paths)")
    if is_whole_number(entry.get("seed")) and not 0 <= entry["seed"] < 2**64:
        problems.append(f"{where}['seed'] is {_describe(entry['seed'])}, but a seed must be in 0 .. 2**64 - 1")
    if isinstance(entry.get("config"), dict):
        try:
            TinyTransformerConfig.from_dict(entry["config"])
        except (TypeError, ValueError) as error:
            problems.append(f"{where}['config'] is not a valid TinyTransformerConfig ({error})")
    return problems


def _check_manifest(manifest: object, path: Path) -> dict:
    """The manifest with ``checkpoints`` and ``files`` filled in; :class:`CheckpointError` listing what is malformed."""
    problems = []
    if not isinstance(manifest, dict):
        problems.append(f"it holds {type(manifest).__name__} {_describe(manifest)}, but it must be a JSON object "
                        "with 'checkpoints' and 'files'")
    else:
        if "format" in manifest and manifest["format"] != _FORMAT:
            problems.append(f"its 'format' is {_describe(manifest['format'])}, but this version of mha reads format "
                            f"{_FORMAT}")
        for section, fields in (("checkpoints", _CHECKPOINT_FIELDS), ("files", _FILE_FIELDS)):
            entries = manifest.setdefault(section, {})
            if not isinstance(entries, dict):
                problems.append(f"its {section!r} is {type(entries).__name__} {_describe(entries)}, but it must be a "
                                "JSON object mapping names to entries")
                continue
            for name, entry in entries.items():
                if not _NAME_PATTERN.match(name):
                    problems.append(f"{section}[{name!r}] has a name that is not letters, digits, '_', '-' or '.'")
                problems += _check_entry(entry, f"{section}[{name!r}]", fields)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more problems" if len(problems) > 5 else "")
        raise CheckpointError(f"the checkpoint manifest {path} is malformed: {shown}. Restore it (e.g. from git), or "
                              f"delete it and rebuild the lab data. {how_to_restore(REGENERATE_ALL, path.parent)}")
    return manifest


def read_manifest(directory: str | os.PathLike = LAB_DIRECTORY) -> dict:
    """The manifest of ``directory``: a dict with ``checkpoints`` and ``files``, checked against its schema.

    Raises :class:`CheckpointError` if it is absent, unreadable, a link out of ``directory``, not JSON, or
    malformed (not an object, an entry without a field it needs or with a
    field of the wrong type, a ``file`` that is not a plain name in ``directory``).
    The book's own manifest must match the sha256 that ``data/SHA256SUMS`` records for it
    (:func:`mha.data_files.read_verified_file`).
    """
    path = _manifest_path(directory)
    how = how_to_restore(REGENERATE_ALL, directory)
    if not path.exists() and not path.is_symlink():
        raise CheckpointError(f"there is no checkpoint manifest at {path}. {how}")
    path = _path_in(path.parent, MANIFEST_NAME, "the checkpoint manifest", how)
    data = read_verified_file(path, what="the checkpoint manifest", how=how, limit=MAX_FILE_BYTES,
                              error=CheckpointError)
    manifest = parse_json(data, what="the checkpoint manifest", path=path, how=how, error=CheckpointError)
    return _check_manifest(manifest, path)


def _write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename, readable by everyone."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=path.suffix)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, _READABLE)  # mkstemp makes owner-only files; data files are for everyone to read
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _write_manifest(directory: Path, manifest: dict) -> None:
    """Write atomically, keys sorted so regenerated manifests diff cleanly; the book's own is recorded in
    ``data/SHA256SUMS`` (:func:`mha.data_files.record_sha256`), which its readers check it against."""
    _write_atomically(_manifest_path(directory), (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
    if directory.resolve() == LAB_DIRECTORY.resolve():
        record_sha256(directory.parent)  # the data folder, whose list holds lab/manifest.json


@contextlib.contextmanager
def _manifest_lock(directory: Path):
    """Hold an exclusive lock on ``directory`` while its manifest is read and rewritten.

    Training scripts save checkpoints from several processes at once; without the lock two read-modify-write
    cycles could interleave and one entry would be lost. The lock is ``flock`` on the directory itself (no lock file
    is left behind); where there is no ``fcntl`` (Windows) the scripts run one process at a time.
    """
    try:
        import fcntl
    except ImportError:
        yield
        return
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing releases the lock


def _update_manifest(directory: Path, section: str, name: str, entry: dict) -> None:
    with _manifest_lock(directory):
        manifest = read_manifest(directory) if _manifest_path(directory).exists() else {"checkpoints": {}, "files": {}}
        manifest["format"] = _FORMAT
        manifest[section][name] = entry
        _write_manifest(directory, manifest)


def save_checkpoint(
    model: TinyTransformer,
    name: str,
    *,
    seed: int,
    steps: int,
    task: dict,
    regenerate: str,
    training: dict | None = None,
    extra: dict | None = None,
    directory: str | os.PathLike = LAB_DIRECTORY,
) -> Path:
    """Save ``model``'s weights as ``<directory>/<name>.safetensors`` and record it in the manifest (chapter 3).

    ``seed`` (the model's init seed), ``steps``, ``task`` (a task's
    ``to_dict()``), ``training`` (a ``TrainingConfig.to_dict()``) and
    ``extra`` are stored in the manifest next to the config and the file's
    sha256; ``regenerate`` is the shell command (from the repository root)
    that rebuilds this file, quoted by every loading error. The file holds the
    name and config as metadata and is written canonically
    (:func:`canonical_safetensors`), so the same weights give the same bytes.
    Returns the path.
    """
    _check_name(name)
    if not regenerate or not isinstance(regenerate, str):
        raise ValueError("regenerate must be the shell command that rebuilds this checkpoint, e.g. "
                         f"'{REGENERATE_ALL} --only induction_2layer'.")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.safetensors"
    data = canonical_safetensors(model.state_dict(), {"name": name, "config": model.config.to_json()})
    _write_atomically(path, data)
    entry = {"file": path.name, "config": model.config.to_dict(), "seed": int(seed), "steps": int(steps),
             "task": dict(task), "training": dict(training or {}), "sha256": hashlib.sha256(data).hexdigest(),
             "regenerate": regenerate, "extra": dict(extra or {})}
    _update_manifest(directory, "checkpoints", name, entry)
    return path


def record_file(path: str | os.PathLike, *, regenerate: str, description: str,
                directory: str | os.PathLike = LAB_DIRECTORY) -> None:
    """Record an existing result file in ``directory`` (loss curves, a sweep) in the manifest with its sha256."""
    directory = Path(directory)
    path = Path(path)
    if path.parent.resolve() != directory.resolve():
        raise ValueError(f"{path} is not inside {directory}; result files live next to the manifest.")
    if not path.exists():
        raise ValueError(f"{path} does not exist; write it before recording it.")
    _check_name(path.name)
    _update_manifest(directory, "files", path.name, {"sha256": sha256_of_file(path), "regenerate": regenerate,
                                                     "description": description})


def _path_in(directory: Path, file_name: str, what: str, how: str) -> Path:
    """``directory / file_name``, refusing a link that leads out of ``directory`` (names are checked on reading)."""
    path = directory / file_name
    resolved = path.resolve()
    if resolved.parent != directory.resolve():
        raise CheckpointError(f"{what} {path} leads to {resolved}, outside {directory}; lab files must lie in the "
                              f"lab folder itself, so it is not read. Replace the link with the file. {how}")
    return path


def _verified_bytes(directory: Path, file_name: str, expected_sha256: str, regenerate: str,
                    what: str) -> tuple[Path, bytes]:
    """The path and bytes of a lab file after checking where it lies, what it is, its size and its sha256."""
    how = how_to_restore(regenerate, directory)
    path = _path_in(directory, file_name, what, how)
    data = _read_regular_file(path, what, how)
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise CheckpointError(f"{what} {path} is corrupted or out of date: its sha256 is {actual}, but the manifest "
                              f"records {expected_sha256}. {how}")
    return path, data


def checkpoint_names(directory: str | os.PathLike = LAB_DIRECTORY) -> list[str]:
    """The names of all checkpoints in the manifest, sorted."""
    return sorted(read_manifest(directory)["checkpoints"])


def _config_differences(saved: TinyTransformerConfig, recorded: TinyTransformerConfig) -> str:
    saved_fields, recorded_fields = saved.to_dict(), recorded.to_dict()
    return ", ".join(f"{field} = {saved_fields[field]!r} in the file but {recorded_fields[field]!r} in the manifest"
                     for field in recorded_fields if saved_fields[field] != recorded_fields[field])


def _check_against_manifest(path: Path, name: str, data: bytes, config: TinyTransformerConfig,
                            model: TinyTransformer, manifest_path: Path, how: str) -> dict[str, torch.Tensor]:
    """The file's tensors, after checking its metadata (name, config) and tensor shapes against the manifest."""
    try:
        metadata = _safetensors_metadata(data)
        tensors = load_safetensors_bytes(data)
    except (SafetensorError, ValueError, RuntimeError, OverflowError) as error:
        raise CheckpointError(f"checkpoint file {path} cannot be loaded: it is not a valid safetensors file "
                              f"({error}). {how}") from error
    saved_name, saved_config = metadata.get("name"), metadata.get("config")
    if saved_name != name:
        raise CheckpointError(f"checkpoint file {path} was saved as checkpoint {saved_name!r}, but the manifest "
                              f"{manifest_path} lists it under {name!r}: the manifest and the file disagree. {how}")
    try:
        saved = TinyTransformerConfig.from_json(saved_config)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"checkpoint file {path} carries no readable model config in its safetensors metadata "
                              f"({error}), so it cannot be checked against the manifest. {how}") from error
    if saved != config:
        raise CheckpointError(f"checkpoint file {path} holds a different model than the manifest {manifest_path} "
                              f"records for {name!r}: {_config_differences(saved, config)}. One of them comes from "
                              f"another run. {how}")
    expected = {key: tuple(value.shape) for key, value in model.state_dict().items()}
    found = {key: tuple(value.shape) for key, value in tensors.items()}
    if found != expected:
        missing, unexpected = sorted(set(expected) - set(found)), sorted(set(found) - set(expected))
        wrong = [f"{key} is {found[key]} but the config needs {expected[key]}"
                 for key in sorted(set(found) & set(expected)) if found[key] != expected[key]]
        parts = ([f"missing tensors {missing}"] if missing else []) + (
            [f"unexpected tensors {unexpected}"] if unexpected else []) + wrong
        raise CheckpointError(f"checkpoint file {path} does not fit the config the manifest records for {name!r}: "
                              f"{'; '.join(parts)}. {how}")
    return check_stored_weights(tensors, source=f"checkpoint file {path}", how=how, error=CheckpointError)


def load_checkpoint(name: str, directory: str | os.PathLike = LAB_DIRECTORY) -> tuple[TinyTransformer, CheckpointInfo]:
    """The trained :class:`~mha.lab.tiny_model.TinyTransformer` called ``name`` and its manifest entry (chapter 3).

    The file's sha256 is checked against the manifest before it is parsed,
    then its own metadata (the name and config it was saved with) and tensor
    shapes against the manifest's entry. Raises :class:`CheckpointError`,
    naming the file and the command that regenerates it, if the file is
    missing, not a regular file, too large, outside the lab folder, its sha256
    does not match, it disagrees with the manifest, holds a tensor that is not
    finite float32, or it cannot be parsed; a
    name not in the manifest lists the names that are.
    """
    directory = Path(directory)
    entry = _manifest_entry(directory, "checkpoints", name, "checkpoint")
    path, data = _verified_bytes(directory, entry["file"], entry["sha256"], entry["regenerate"], "checkpoint file")
    config = TinyTransformerConfig.from_dict(entry["config"])
    model = TinyTransformer(config, seed=entry["seed"])
    how = how_to_restore(entry["regenerate"], directory)
    tensors = _check_against_manifest(path, name, data, config, model, _manifest_path(directory), how)
    try:
        model.load_state_dict(tensors, strict=True)
    except (RuntimeError, ValueError) as error:
        raise CheckpointError(f"checkpoint file {path} cannot be loaded into the recorded config ({error}). "
                              f"{how}") from error
    model.eval()
    info = CheckpointInfo(name=name, file=entry["file"], config=config, seed=entry["seed"], steps=entry["steps"],
                          task=entry["task"], training=entry.get("training", {}), sha256=entry["sha256"],
                          regenerate=entry["regenerate"], extra=entry.get("extra", {}))
    return model, info


def _manifest_entry(directory: Path, section: str, name: object, what: str) -> dict:
    """The manifest's entry ``name`` in ``section`` ("checkpoints" or "files"), or an error listing the known names."""
    manifest = read_manifest(directory)
    if not isinstance(name, str) or name not in manifest[section]:
        known = ", ".join(sorted(manifest[section])) or "none"
        raise CheckpointError(f"no {what} called {_describe(name)} in {_manifest_path(directory)}; the {what}s "
                              f"are: {known}. To rebuild them all run:\n    {REGENERATE_ALL}")
    return manifest[section][name]


def _result_file(file_name: str, directory: Path) -> tuple[Path, bytes, dict]:
    entry = _manifest_entry(directory, "files", file_name, "result file")
    path, data = _verified_bytes(directory, file_name, entry["sha256"], entry["regenerate"], "result file")
    return path, data, entry


def verified_bytes(file_name: str, directory: str | os.PathLike = LAB_DIRECTORY) -> bytes:
    """The bytes of result file ``file_name`` recorded with :func:`record_file`, read once and checked against its
    sha256: the caller gets what was checked, never a path whose file could change between the check and a read."""
    return _result_file(file_name, as_path("directory", directory))[1]


def load_json(file_name: str, directory: str | os.PathLike = LAB_DIRECTORY) -> Any:
    """A JSON result file (e.g. ``"head_count_sweep.json"``) from the lab directory, checked against the manifest."""
    path, data, entry = _result_file(file_name, as_path("directory", directory))
    return parse_json(data, what="result file", path=path, how=how_to_restore(entry["regenerate"], directory),
                      error=CheckpointError)
