"""The stored head-count study: every run of every head count at every learning rate, and what the chapter reads
from it (chapter 3, "One big head or many").

``scripts/train_head_count_study.py`` trains every ``(h, learning rate, seed)`` of 1-layer attention-only models
on :class:`~mha.lab.tasks.TwoRelationTask`, chooses each h's rate on a validation batch, and writes
``data/lab/head_count_study.json`` with the chosen runs' weights. :func:`load_study` reads it into a
:class:`HeadCountStudy` (checked first, field by field); :func:`steps_to_solve`, :func:`accuracy_at`,
:func:`median_interval` (a bootstrap over seeds) and :func:`best_learning_rates` (chosen on the validation batch)
read its runs. The measurements on the models are in :mod:`mha.lab.head_count_sweep`, which exports these names too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mha.core.resampling import bootstrap_indices
from mha.core.validation import (
    LARGEST_D_MODEL_LISTED,
    as_real_array,
    check_items,
    check_type,
    check_whole_number,
    head_counts_that_divide,
    is_whole_number,
)
from mha.lab.checkpoints import LAB_DIRECTORY, load_checkpoint, load_json
from mha.lab.tasks import TwoRelationTask, task_from_dict
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig

__all__ = ["STUDY_FILE", "HeadCountStudy", "accuracy_at", "best_learning_rates", "load_study", "median_interval",
           "steps_to_solve", "study_from_content"]

STUDY_FILE = "head_count_study.json"
"""The study (every h at every learning rate), its chosen models and the mechanism controls:
``scripts/train_head_count_study.py``."""


def _listing(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values)


@dataclasses.dataclass(frozen=True)
class HeadCountStudy:
    """The head-count study of ``scripts/train_head_count_study.py`` and its mechanism controls (chapter 3).

    ``runs`` has one record per ``(h, learning rate, seed)``: its ``curve`` holds ``step``, the accuracy at the
    ask positions on the ``validation`` batch (used to choose a learning rate) and on the ``held_out`` batch (used to
    report) and the ``held_out_loss``, every ``log_every`` steps from ``log_every`` until the run stopped (solved
    after at least ``min_steps``, or censored at ``max_steps``); its ``role_curve`` what each head attends to, every
    250 steps and at the last; ``training`` holds the settings every run shares (batch size, optimiser).
    ``chosen_learning_rates`` maps each h to the rate chosen on the validation batch, whose runs' final weights were
    saved (:meth:`model`). ``controls`` holds the
    :class:`~mha.lab.tasks.PairRecallTask` runs; ``held_out_size`` is the number of held-out sequences.
    ``incomplete`` lists the arms that were not trained from every seed (with the reason), which
    :func:`best_learning_rates` leaves out of the choice. Build it with :func:`load_study`.
    """

    head_counts: tuple[int, ...]
    learning_rates: tuple[float, ...]
    seeds: tuple[int, ...]
    thresholds: tuple[float, ...]
    min_steps: int
    max_steps: int
    runs: tuple[dict, ...]
    controls: dict
    held_out_size: int = 256
    incomplete: tuple[dict, ...] = ()
    d_model: int = 32
    task: TwoRelationTask = TwoRelationTask()
    chosen_learning_rates: dict[int, float] = dataclasses.field(default_factory=dict)
    checkpoints: dict[str, str] = dataclasses.field(default_factory=dict)
    training: dict = dataclasses.field(default_factory=dict)
    directory: Any = LAB_DIRECTORY

    def run(self, n_heads: int, learning_rate: float, seed: int) -> dict:
        """The record of one run; ``ValueError`` naming what was trained if there is none."""
        for record in self.runs:
            if (record["n_heads"], record["seed"]) == (n_heads, seed) and math.isclose(record["learning_rate"],
                                                                                       learning_rate):
                return record
        raise ValueError(f"no run with h = {n_heads}, learning rate {learning_rate!r}, seed {seed!r}; the study "
                         f"trained h = {_listing(self.head_counts)}, learning rates "
                         f"{', '.join(f'{lr:g}' for lr in self.learning_rates)} and seeds {_listing(self.seeds)}"
                         f"{' (not every arm from every seed: see seeds_trained)' if self.incomplete else ''}.")

    def seeds_trained(self, n_heads: int, learning_rate: float) -> tuple[int, ...]:
        """The seeds trained for one arm: all of ``seeds``, unless the arm is listed in ``incomplete``."""
        return tuple(record["seed"] for record in self.runs if record["n_heads"] == n_heads
                     and math.isclose(record["learning_rate"], learning_rate))

    def check(self, n_heads: Any, seed: Any = None) -> None:
        """Raise ``ValueError`` saying what to pick instead if ``(n_heads, seed)`` has no saved model."""
        n_heads = check_whole_number("n_heads", n_heads,
                                     meaning=f"the head count; the study trained h = {_listing(self.head_counts)}")
        if n_heads not in self.head_counts:
            divides = n_heads >= 1 and self.d_model % n_heads == 0
            listing = (f" (the counts that do are {_listing(head_counts_that_divide(self.d_model))})"
                       if self.d_model <= LARGEST_D_MODEL_LISTED else "")
            why = ("it divides d_model but was not trained" if divides else
                   f"it does not divide d_model = {self.d_model}{listing}")
            raise ValueError(f"there is no run with h = {n_heads} heads: {why}. The study trained "
                             f"h = {_listing(self.head_counts)}.")
        if seed is not None and (not is_whole_number(seed) or seed not in self.seeds):
            raise ValueError(f"there is no run with seed {seed!r}; the study trained seeds {_listing(self.seeds)}.")

    def chosen_run(self, n_heads: int, seed: int) -> dict:
        """The record of the run whose weights were saved: ``n_heads`` at its chosen learning rate, from ``seed``."""
        self.check(n_heads, seed)
        return self.run(n_heads, self.chosen_learning_rates[int(n_heads)], seed)

    def model(self, n_heads: int, seed: int) -> TinyTransformer:
        """The saved model of ``(n_heads, seed)`` (at the chosen rate), checksum-verified by
        :func:`mha.lab.checkpoints.load_checkpoint`."""
        self.check(n_heads, seed)
        model, _ = load_checkpoint(self.checkpoints[f"{int(n_heads)}/{int(seed)}"], self.directory)
        return model

    def config(self, n_heads: int) -> TinyTransformerConfig:
        """The study's model shape with ``n_heads`` heads (any count that divides ``d_model``)."""
        return TinyTransformerConfig(vocab_size=self.task.vocab_size, max_seq_len=self.task.seq_len,
                                     d_model=self.d_model, n_layers=1, n_heads=n_heads)

    def curves(self, n_heads: int, learning_rate: float, column: str = "held_out") -> tuple[np.ndarray, np.ndarray]:
        """Steps (n,) and ``column`` (seeds, n) of one arm, every logged step up to ``max_steps``.

        A run that stopped early stopped because it had solved the task, so its last value is carried forward to
        the cap (and the plots say so). ``column``: ``"held_out"``, ``"validation"`` (accuracy) or
        ``"held_out_loss"``.
        """
        records = [self.run(n_heads, learning_rate, seed) for seed in self.seeds]
        step = records[0]["curve"]["step"][0]
        steps = np.arange(step, self.max_steps + 1, step)
        values = np.empty((len(records), len(steps)))
        for row, record in zip(values, records):
            measured = np.asarray(record["curve"][column], dtype=float)
            row[:len(measured)] = measured
            row[len(measured):] = measured[-1]
        return steps, values  # (n,), (seeds, n)

    def role_curves(self, n_heads: int, learning_rate: float, seed: int) -> dict[str, np.ndarray]:
        """Over one run: ``step`` (n,), per-head ``fact`` and ``previous`` shares (n, heads), answer-part accuracy."""
        record = self.run(n_heads, learning_rate, seed)["role_curve"]
        return {"step": np.array(record["step"]),
                "fact": np.array(record["attention_to_fact"]),  # (n, heads)
                "previous": np.array(record["attention_to_previous"]),  # (n, heads)
                "value_accuracy": np.array(record["value_accuracy"]),
                "modifier_accuracy": np.array(record["modifier_accuracy"])}


def load_study(directory=LAB_DIRECTORY) -> HeadCountStudy:
    """Read ``head_count_study.json`` (checked against the manifest) into a :class:`HeadCountStudy`. Chapter 3."""
    return study_from_content(load_json(STUDY_FILE, directory), directory)


def study_from_content(content: dict, directory=LAB_DIRECTORY) -> HeadCountStudy:
    """A :class:`HeadCountStudy` from the parsed contents of ``head_count_study.json`` (or the dict about to be
    written).

    The fields are checked first: a missing one, or a list given as anything else (``"1248"`` for ``[1, 2, 4, 8]``),
    raises ``ValueError`` naming it and the command that regenerates the file.
    """
    _check_study_fields(content)
    models = content.get("models", {})
    return HeadCountStudy(head_counts=tuple(content["head_counts"]), learning_rates=tuple(content["learning_rates"]),
                          seeds=tuple(content["seeds"]), thresholds=tuple(content["thresholds"]),
                          min_steps=content["min_steps"], max_steps=content["max_steps"], runs=tuple(content["runs"]),
                          controls=content["controls"], held_out_size=content["held_out"]["size"],
                          incomplete=tuple(content.get("incomplete", ())), d_model=content["d_model"],
                          task=task_from_dict(content["task"]),
                          chosen_learning_rates={int(h): rate for h, rate in models.get("learning_rates", {}).items()},
                          checkpoints=dict(models.get("checkpoints", {})), training=dict(content.get("training", {})),
                          directory=directory)


_STUDY_LISTS = ("head_counts", "learning_rates", "seeds", "thresholds", "runs")
_STUDY_FIELDS = {"min_steps": int, "max_steps": int, "d_model": int, "controls": dict, "held_out": dict,
                 "task": dict}


def _check_study_fields(content: object) -> None:
    """Raise ``ValueError`` naming the first field of ``head_count_study.json`` that is missing or of the wrong type."""
    how = "Regenerate it with:\n    python scripts/train_head_count_study.py"
    if not isinstance(content, dict):
        raise ValueError(f"the head-count study holds {type(content).__name__}, not a JSON object. {how}")
    for name in _STUDY_LISTS:
        if not isinstance(content.get(name), list):
            raise ValueError(f"the head-count study's {name!r} is {content.get(name)!r:.60}, but it must be a list. "
                             f"{how}")
    for name, kind in _STUDY_FIELDS.items():
        value = content.get(name)
        if not (is_whole_number(value) if kind is int else isinstance(value, kind)):
            raise ValueError(f"the head-count study's {name!r} is {value!r:.60}, but it must be "
                             f"{'a whole number' if kind is int else 'a JSON object'}. {how}")
    if not all(is_whole_number(h) and h >= 1 for h in content["head_counts"]):
        raise ValueError(f"the head-count study's 'head_counts' must be whole numbers >= 1. {how}")


def steps_to_solve(record: dict, threshold: float, split: str = "held_out") -> float:
    """The first logged step at which a run's accuracy on ``split`` reaches ``threshold``; ``inf`` if it never did.

    ``split`` is ``"validation"`` or ``"held_out"``. ``inf`` marks a censored run: not solved within the steps it
    trained (runs stop early only after solving at the strictest threshold, so a looser one is never censored by
    the early stop). Chapter 3.
    """
    check_type("record", record, dict, "one run's record (a dict), e.g. study.run(n_heads, learning_rate, seed)")
    if split not in ("validation", "held_out"):
        raise ValueError(f"split must be 'validation' (to choose) or 'held_out' (to report), got {split!r}.")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold is an accuracy in (0, 1], got {threshold!r}.")
    curve = record["curve"]
    return float(next((step for step, accuracy in zip(curve["step"], curve[split]) if accuracy >= threshold),
                      math.inf))


def accuracy_at(record: dict, step: int, split: str = "held_out") -> float:
    """A run's accuracy on ``split`` at logged ``step``; ``ValueError`` if the run did not log that step."""
    check_type("record", record, dict, "one run's record (a dict), e.g. study.run(n_heads, learning_rate, seed)")
    curve = record["curve"]
    if step not in curve["step"]:
        raise ValueError(f"step {step} was not logged by this run (it logged every {curve['step'][0]} steps up to "
                         f"{curve['step'][-1]}).")
    return float(curve[split][curve["step"].index(step)])


def median_interval(values: Sequence[float], n_resamples: int = 2000, seed: int = 0,
                    level: float = 0.95) -> tuple[float, float, float]:
    """The median of ``values`` and a percentile-bootstrap interval for it: ``(median, low, high)``. Chapter 3.

    ``inf`` (a censored run) is allowed and sorts last, so a median or bound that lands on a censored run is
    ``inf``: "not solved within the cap". With 5 seeds the interval can only run between observed values.
    """
    values = check_items("values", values, "a list of numbers (inf for censored runs)")
    values = as_real_array("values", values)
    if values.ndim != 1 or len(values) == 0 or np.isnan(values).any():
        raise ValueError(f"give a non-empty 1-d list of numbers (inf for censored runs), got {values!r}.")
    resamples = values[bootstrap_indices(len(values), n_resamples, seed)]  # (n_resamples, n)
    medians = np.sort(resamples, axis=1)[:, (len(values) - 1) // 2]  # the lower median: inf-safe
    tail = (1.0 - level) / 2
    low, high = np.quantile(medians, [tail, 1.0 - tail], method="inverted_cdf")
    return float(np.sort(values)[(len(values) - 1) // 2]), float(low), float(high)


def best_learning_rates(study: HeadCountStudy, threshold: float) -> dict[int, float]:
    """Per head count, the learning rate chosen on the validation batch: the fewest median steps to ``threshold``.

    Ties (for example a censored median at every rate) go to the rate with more seeds solved, then to the higher
    median validation accuracy at ``study.min_steps``, then to the smaller rate. The held-out batch plays no part in the
    choice, and a rate not trained from every seed is left out of it. Chapter 3.
    """
    check_type("study", study, HeadCountStudy, "the HeadCountStudy of load_study()")
    chosen = {}
    for n_heads in study.head_counts:
        complete = [rate for rate in study.learning_rates
                    if set(study.seeds_trained(n_heads, rate)) == set(study.seeds)]
        if not complete:
            raise ValueError(f"h = {n_heads} has no learning rate trained from every seed; nothing to choose from.")

        def score(learning_rate: float) -> tuple[float, int, float, float]:
            records = [study.run(n_heads, learning_rate, seed) for seed in study.seeds]
            steps = [steps_to_solve(r, threshold, "validation") for r in records]
            accuracy = float(np.median([accuracy_at(r, study.min_steps, "validation") for r in records]))
            solved = int(np.isfinite(steps).sum())
            return median_interval(steps, n_resamples=1)[0], -solved, -accuracy, learning_rate

        chosen[n_heads] = min(complete, key=score)
    return chosen
