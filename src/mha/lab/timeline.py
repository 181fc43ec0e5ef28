"""The training timeline of the lab's 2-layer induction model: how its induction head forms (sections 3.5, 3.6).

``scripts/induction_timeline.py`` trains ``induction_2layer_seed0`` once more, exactly as its checkpoints were
trained, and records it step by step into ``data/lab/induction_timeline_seed0.json`` (:data:`TIMELINE_FILE`):
the loss curve, each head's previous-token and prefix-matching scores on the held-out batch, and the attention
maps of every head on a few fixed held-out sequences, with the phase change marked as section 3.5 defines it (the
steepest 200-step fall of the repeat loss, :func:`mha.lab.training.steepest_drop`).
:func:`load_induction_timeline` reads that file back, checked against the lab's manifest and against its own
layout, as plain numpy arrays (:class:`InductionTimeline`).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import gzip
import os
import zlib
from collections.abc import Sequence

import numpy as np

from mha.core.argument_checks import check_whole_numbers
from mha.core.validation import InputError, as_path, check_items, check_whole_number, is_whole_number
from mha.data_files import how_to_restore
from mha.lab.checkpoints import LAB_DIRECTORY, CheckpointError, load_json
from mha.lab.training import TrainingLog, steepest_drop

__all__ = ["TIMELINE_FILE", "REGENERATE_TIMELINE", "FRAME_EVERY", "DENSE_WINDOW", "TIMELINE_PERIODS",
           "TimelineError", "InductionTimeline", "frame_steps", "timeline_sequences", "load_induction_timeline"]

TIMELINE_FILE = "induction_timeline_seed0.json"
"""The recorded timeline of ``induction_2layer_seed0``, in the lab's folder."""

REGENERATE_TIMELINE = "python -m scripts.induction_timeline"
"""Run from the root of a clone of the repository, this records the timeline again."""

FRAME_EVERY = 100
"""Steps between the timeline's frames away from the phase change."""

DENSE_WINDOW = 400
"""Within this many steps of the phase change, every logged step is a frame."""

TIMELINE_PERIODS = (7, 11, 19)
"""The repeat periods of the held-out sequences whose maps are recorded: the first held-out sequence of each."""


class TimelineError(CheckpointError, ValueError):
    """The timeline file is missing, altered or malformed; the message names it and how to regenerate it."""


@dataclasses.dataclass(frozen=True)
class InductionTimeline:
    """One recorded training run of the 2-layer induction model, frame by frame (section 3.5 "Induction heads").

    Per frame (``n_steps`` of them): ``steps`` (n_steps,) optimiser steps taken; ``loss`` (n_steps,) the repeat
    loss in nats on the fixed evaluation batch of training periods (the curve the phase change is read from);
    ``train_loss`` (n_steps,) the mean training loss over the logged steps before (NaN at step 0);
    ``held_out_loss`` (n_steps,) the repeat loss on the held-out batch; ``previous_token`` and
    ``prefix_matching`` (n_steps, layers, heads) each head's scores on the held-out batch; ``maps``
    (n_steps, sequences, layers, heads, seq, seq) uint8, each attention weight in whole hundredths (rows attend
    from, columns are attended to). Per sequence: ``tokens`` (sequences, seq) token ids, ``periods`` and
    ``repeat_starts`` (sequences,). The whole loss curve, every logged step: ``curve_steps``, ``curve_loss`` and
    ``curve_train_loss`` (n_logged,). ``phase_change_step`` is the middle of the steepest 200-step fall of
    ``curve_loss``; ``model`` names the checkpoint series the run retraces, with ``n_layers``, ``n_heads`` and
    ``vocab_size`` from its config.
    """

    steps: np.ndarray
    loss: np.ndarray
    train_loss: np.ndarray
    held_out_loss: np.ndarray
    previous_token: np.ndarray
    prefix_matching: np.ndarray
    maps: np.ndarray
    tokens: np.ndarray
    periods: np.ndarray
    repeat_starts: np.ndarray
    curve_steps: np.ndarray
    curve_loss: np.ndarray
    curve_train_loss: np.ndarray
    phase_change_step: int
    model: str
    n_layers: int
    n_heads: int
    vocab_size: int

    def frame_at(self, step: int) -> int:
        """The index of the frame recorded at ``step``; ``ValueError`` listing the nearest recorded steps if none."""
        found = np.flatnonzero(self.steps == step)
        if not len(found):
            nearest = self.steps[np.argsort(np.abs(self.steps - step))[:2]]
            raise ValueError(f"no frame at step {step!r}; the nearest recorded steps are {sorted(nearest.tolist())}.")
        return int(found[0])


def frame_steps(logged: Sequence[int], phase_change_step: int) -> list[int]:
    """The frames kept from the logged steps: every :data:`FRAME_EVERY` steps, the last step, and every logged
    step within :data:`DENSE_WINDOW` steps of the phase change."""
    logged = check_whole_numbers("logged", logged, minimum=0, meaning="the logged steps")
    phase_change_step = check_whole_number("phase_change_step", phase_change_step, minimum=0)
    if not logged:
        raise InputError("logged is empty: give the steps of a training log, e.g. log.steps.")
    last = logged[-1]
    return [step for step in logged
            if step % FRAME_EVERY == 0 or step == last or abs(step - phase_change_step) <= DENSE_WINDOW]


def timeline_sequences(periods: Sequence[int]) -> list[int]:
    """Indices of the first sequence of each of :data:`TIMELINE_PERIODS` in a held-out batch with these ``periods``."""
    periods = check_items("periods", periods, "a list of periods (whole numbers)")
    periods = list(periods)
    missing = [period for period in TIMELINE_PERIODS if period not in periods]
    if missing:
        raise ValueError(f"the held-out batch has no sequence of period {missing}; use "
                         f"mha.lab.induction.held_out_batch().")
    return [periods.index(period) for period in TIMELINE_PERIODS]


def _decode_maps(entry: object, problem) -> np.ndarray:
    """The maps (steps, sequences, layers, heads, seq, seq) from their JSON entry, which stores them step axis last
    (sequences, layers, heads, seq, seq, steps) as base64 of gzip; ``problem(...)`` says what is wrong."""
    if not (isinstance(entry, dict) and isinstance(entry.get("data"), str) and isinstance(entry.get("shape"), list)):
        raise problem("its 'maps' is not an object with 'shape' (a list) and 'data' (base64 text)")
    shape = entry["shape"]
    if len(shape) != 6 or not all(is_whole_number(n) and n > 0 for n in shape):
        raise problem(f"its maps' shape is {shape!r}, not six positive whole numbers (sequences, layers, heads, "
                      f"seq, seq, steps)")
    try:
        data = gzip.decompress(base64.b64decode(entry["data"], validate=True))
    except (binascii.Error, OSError, EOFError, zlib.error) as error:
        raise problem(f"its maps cannot be decoded as base64 of gzip ({error})") from error
    if len(data) != int(np.prod(shape)):
        raise problem(f"its maps hold {len(data):,} bytes, but their shape {shape} needs {int(np.prod(shape)):,}")
    return np.moveaxis(np.frombuffer(data, dtype=np.uint8).reshape(shape), -1, 0)  # (steps, sequences, ...)


def _array(content: dict, path: tuple[str, str], shape: tuple, problem, dtype=np.float64) -> np.ndarray:
    """``content[a][b]`` as an array of ``shape``, NaN for JSON's null; ``problem(...)`` if it cannot be."""
    outer, inner = path
    value = content.get(outer, {}).get(inner) if isinstance(content.get(outer), dict) else None
    try:
        array = np.array(value if value is not None else [], dtype=np.float64)  # None entries -> NaN
    except (TypeError, ValueError) as error:
        raise problem(f"its {outer}.{inner} is not a list of numbers ({error})") from error
    if array.shape != shape:
        raise problem(f"its {outer}.{inner} has shape {array.shape}, but it should be {shape}")
    if dtype is not np.float64:
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            raise problem(f"its {outer}.{inner} holds numbers that are not whole")
        return array.astype(dtype)
    return array


def load_induction_timeline(file_name: str = TIMELINE_FILE,
                            directory: str | os.PathLike = LAB_DIRECTORY) -> InductionTimeline:
    """The recorded training timeline (sections 3.5 and 3.6), checked, as an :class:`InductionTimeline`.

    The file must match the sha256 the lab's manifest records, and its content must hold together: every array
    the shape the model config and the number of frames give, frames on the logged steps from step 0 to the last,
    the maps causal hundredths whose rows sum to 100 (within rounding), the phase change at the steepest fall of
    the stored loss curve. Raises :class:`TimelineError` (a ``ValueError``) naming the file and the command that
    regenerates it otherwise.
    """
    directory = as_path("directory", directory)
    path = directory / str(file_name)
    how = how_to_restore(REGENERATE_TIMELINE, directory)

    def problem(what: str) -> TimelineError:
        return TimelineError(f"the training timeline {path} is not a timeline this version of mha can read: "
                             f"{what}. {how}")

    try:
        content = load_json(file_name, directory)
    except CheckpointError as error:
        raise TimelineError(f"the training timeline cannot be read: {error}") from error
    if not isinstance(content, dict):
        raise problem("it is not a JSON object")
    config = content.get("config") if isinstance(content.get("config"), dict) else {}
    n_layers, n_heads, seq, vocab_size = (config.get(key) for key in ("n_layers", "n_heads", "max_seq_len",
                                                                       "vocab_size"))
    if not all(is_whole_number(n) and n > 0 for n in (n_layers, n_heads, seq, vocab_size)):
        raise problem("its config lacks n_layers, n_heads, max_seq_len or vocab_size")

    curve_steps_list = content.get("curve", {}).get("steps") if isinstance(content.get("curve"), dict) else None
    n_logged = len(curve_steps_list) if isinstance(curve_steps_list, list) else 0
    curve_steps = _array(content, ("curve", "steps"), (n_logged,), problem, dtype=np.int64)
    if n_logged < 3 or curve_steps[0] != 0 or np.any(np.diff(curve_steps) <= 0):
        raise problem("its curve.steps are not at least 3 increasing steps starting at 0")
    curve_loss = _array(content, ("curve", "loss"), (n_logged,), problem)
    curve_train_loss = _array(content, ("curve", "train_loss"), (n_logged,), problem)

    maps = _decode_maps(content.get("maps"), problem)
    n_steps, n_sequences = maps.shape[:2]
    if maps.shape[2:] != (n_layers, n_heads, seq, seq):
        raise problem(f"its maps have shape {maps.shape}, but the model needs (steps, sequences, {n_layers}, "
                      f"{n_heads}, {seq}, {seq})")
    steps = _array(content, ("frames", "steps"), (n_steps,), problem, dtype=np.int64)
    at = np.searchsorted(curve_steps, steps)
    if (np.any(at >= n_logged) or np.any(curve_steps[np.minimum(at, n_logged - 1)] != steps)
            or steps[0] != 0 or steps[-1] != curve_steps[-1] or np.any(np.diff(steps) <= 0)):
        raise problem("its frames.steps are not increasing logged steps from 0 to the last logged step")
    scores = {key: _array(content, ("frames", key), (n_steps, n_layers, n_heads), problem)
              for key in ("previous_token", "prefix_matching")}
    if any(np.any(~np.isfinite(value)) or np.any(np.abs(value) > 1) for value in scores.values()):
        raise problem("its head scores are not all between -1 and 1")
    held_out_loss = _array(content, ("frames", "held_out_loss"), (n_steps,), problem)
    if not (np.all(np.isfinite(curve_loss)) and np.all(np.isfinite(held_out_loss))):
        raise problem("its curve.loss or frames.held_out_loss has a value that is missing or not finite")

    if np.any(maps > 100) or np.any(np.triu(maps, k=1)):
        raise problem("its maps hold weights above 100 hundredths, or weight on keys after the query")
    row_sums = maps.sum(axis=-1, dtype=np.int64)  # (steps, sequences, layers, heads, seq)
    slack = np.arange(1, seq + 1) / 2  # each of a row's i + 1 weights is rounded by at most half a hundredth
    if np.any(np.abs(row_sums - 100) > slack + 1e-9):
        raise problem("its maps have rows that do not sum to 100 hundredths")

    tokens = _array(content, ("sequences", "tokens"), (n_sequences, seq), problem, dtype=np.int64)
    periods = _array(content, ("sequences", "period"), (n_sequences,), problem, dtype=np.int64)
    repeat_starts = _array(content, ("sequences", "repeat_start"), (n_sequences,), problem, dtype=np.int64)
    if np.any(tokens < 0) or np.any(tokens >= vocab_size):
        raise problem("its sequences hold token ids outside the vocabulary")

    phase = content.get("phase_change", {}).get("step") if isinstance(content.get("phase_change"), dict) else None
    curve = TrainingLog(rows=[{"step": int(step), "repeat_loss": float(loss)}
                              for step, loss in zip(curve_steps, curve_loss, strict=True)])
    steepest = int(steepest_drop(curve, "repeat_loss", window_steps=200)["step"])  # section 3.5's phase change
    if phase != steepest:
        raise problem(f"its phase_change.step is {phase!r}, but the steepest 200-step fall of its loss curve is "
                      f"at step {steepest}")
    return InductionTimeline(steps=steps, loss=curve_loss[at], train_loss=curve_train_loss[at],
                             held_out_loss=held_out_loss, previous_token=scores["previous_token"],
                             prefix_matching=scores["prefix_matching"], maps=maps, tokens=tokens, periods=periods,
                             repeat_starts=repeat_starts, curve_steps=curve_steps, curve_loss=curve_loss,
                             curve_train_loss=curve_train_loss, phase_change_step=phase,
                             model=str(content.get("model", "")), n_layers=n_layers, n_heads=n_heads,
                             vocab_size=vocab_size)
