"""The stored head-count study: every run of every head count at every learning rate, and what the chapter reads
from it (chapter 3, "One big head or many").

``scripts/train_head_count_study.py`` trains every ``(h, learning rate, seed)`` of 1-layer attention-only models
on :class:`~mha.lab.tasks.TwoRelationTask`, chooses each h's rate on a validation batch, and writes
``data/lab/head_count_study.json`` with the chosen runs' weights. Each run trains until it solves the task or its
validation accuracy stops rising (a plateau), and records why it stopped. :func:`load_study` reads the file into a
:class:`HeadCountStudy` (checked first, field by field, run by run); :func:`steps_to_solve`, :func:`accuracy_at`,
:func:`median_interval` (a bootstrap over seeds), :func:`arm_survival` (a Kaplan-Meier curve of the steps to solve)
and :func:`best_learning_rates` (the smallest restricted mean on the validation batch) read its runs. The
measurements on the models are in :mod:`mha.lab.head_count_sweep`, which exports these names too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from mha.core.resampling import bootstrap_indices
from mha.core.survival import KaplanMeier, kaplan_meier, restricted_mean_survival_time
from mha.core.validation import (
    LARGEST_D_MODEL_LISTED,
    as_real_array,
    check_items,
    check_share,
    check_type,
    check_whole_number,
    head_counts_that_divide,
    is_whole_number,
)
from mha.lab.checkpoints import LAB_DIRECTORY, load_checkpoint, load_json
from mha.lab.tasks import TwoRelationTask, task_from_dict
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig

__all__ = ["STUDY_FILE", "STOP_REASONS", "HeadCountStudy", "accuracy_at", "arm_survival", "best_learning_rates",
           "load_study", "median_interval", "restricted_mean_interval", "solve_times", "steps_to_solve",
           "study_from_content"]

STUDY_FILE = "head_count_study.json"
"""The study (every h at every learning rate), its chosen models and the mechanism controls:
``scripts/train_head_count_study.py``."""

STOP_REASONS = ("solved", "plateau", "cap")
"""Why a run stopped: it solved the task on both batches, its validation accuracy stopped rising (see
``HeadCountStudy.plateau``), or it reached ``max_steps``, a safety cap that a run still improving should never meet."""


def _listing(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values)


@dataclasses.dataclass(frozen=True)
class HeadCountStudy:
    """The head-count study of ``scripts/train_head_count_study.py`` and its mechanism controls (chapter 3).

    ``runs`` has one record per ``(h, learning rate, seed)``: its ``curve`` holds ``step``, the accuracy at the
    ask positions on the ``validation`` batch (used to choose a learning rate) and on the ``held_out`` batch (used to
    report) and the ``held_out_loss``, every ``log_every`` steps from ``log_every`` until the run stopped; its
    ``stopped`` says why (one of :data:`STOP_REASONS`): solved after at least ``min_steps``, a plateau (``plateau``
    holds the rule: no gain of ``gain`` in the best validation accuracy over the last ``window`` steps), or the
    safety cap ``max_steps``. Its ``role_curve`` holds what each head attends to, every 250 steps and at the last;
    ``training`` the settings every run shares (batch size, optimiser). The runs of ``seeds`` cover every rate and
    choose each h's rate (on the validation batch, by the restricted mean steps to solve up to ``horizon``);
    ``chosen_learning_rates`` maps each h to that rate, whose runs' final weights were saved (:meth:`model`), and
    the runs of ``report_seeds``, trained at the chosen rate only, report it on seeds the choice never saw.
    ``controls`` holds the :class:`~mha.lab.tasks.PairRecallTask` runs; ``held_out_size`` is the number of
    held-out sequences.
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
    report_seeds: tuple[int, ...] = ()
    plateau: dict = dataclasses.field(default_factory=dict)
    horizon: int | None = None
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
        """The choice seeds trained for one arm: all of ``seeds``, unless the arm is listed in ``incomplete``."""
        return tuple(record["seed"] for record in self.runs if record["n_heads"] == n_heads
                     and math.isclose(record["learning_rate"], learning_rate) and record["seed"] in self.seeds)

    def report_runs(self, n_heads: int) -> list[dict]:
        """The records of the report seeds trained at ``n_heads``'s chosen rate (all of ``report_seeds``, unless
        ``incomplete`` lists some as not trained): the runs that report the chosen rate. Chapter 3.7."""
        self.check(n_heads)
        rate = self.chosen_learning_rates[int(n_heads)]
        return [record for record in self.runs if record["n_heads"] == n_heads and record["seed"] in self.report_seeds
                and math.isclose(record["learning_rate"], rate)]

    @property
    def rmst_horizon(self) -> int:
        """The step up to which the restricted mean steps to solve is counted (``horizon``, else ``max_steps``)."""
        return int(self.horizon if self.horizon is not None else self.max_steps)

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

    def curves(self, n_heads: int, learning_rate: float, column: str = "held_out",
               until: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Steps (n,) and ``column`` (seeds, n) of one arm over the choice seeds, every logged step up to ``until``.

        ``until`` defaults to the longest run of the arm. A run that stopped because it had solved the task has its
        last value carried forward (the plots say so); one that stopped without solving it is NaN after its last
        step, since what it would have done is unknown. ``column``: ``"held_out"``, ``"validation"`` (accuracy) or
        ``"held_out_loss"``.
        """
        records = [self.run(n_heads, learning_rate, seed) for seed in self.seeds]
        step = records[0]["curve"]["step"][0]
        until = max(record["curve"]["step"][-1] for record in records) if until is None else until
        steps = np.arange(step, until + 1, step)
        values = np.empty((len(records), len(steps)))
        for row, record in zip(values, records, strict=True):
            measured = np.asarray(record["curve"][column], dtype=float)[:len(steps)]
            row[:len(measured)] = measured
            row[len(measured):] = measured[-1] if record["stopped"] == "solved" else np.nan
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
                          report_seeds=tuple(content.get("report_seeds", ())), plateau=dict(content.get("plateau", {})),
                          horizon=content.get("horizon"), directory=directory)


_STUDY_LISTS = ("head_counts", "learning_rates", "seeds", "thresholds", "runs")
_STUDY_FIELDS = {"min_steps": int, "max_steps": int, "d_model": int, "controls": dict, "held_out": dict,
                 "task": dict}


def _check_study_fields(content: object) -> None:
    """Raise ``ValueError`` naming the first field of ``head_count_study.json`` that is missing or of the wrong type."""
    how = "Regenerate it with:\n    python -m scripts.train_head_count_study"
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
    _check_runs(content, how)


def _check_runs(content: dict, how: str) -> None:
    """Raise ``ValueError`` naming the first run that lacks its stopping reason or disagrees with the header."""
    seeds = set(content["seeds"]) | set(content.get("report_seeds", ()))
    strictest = max(content["thresholds"]) if content["thresholds"] else 1.0
    chosen = {int(h): rate for h, rate in content.get("models", {}).get("learning_rates", {}).items()}
    for index, run in enumerate(content["runs"]):
        if not isinstance(run, dict) or not isinstance(run.get("curve"), dict):
            raise ValueError(f"the head-count study's run {index} is not a record with a 'curve'. {how}")
        name = (f"run {index} (h = {run.get('n_heads')!r}, learning rate {run.get('learning_rate')!r}, "
                f"seed {run.get('seed')!r})")
        if run.get("stopped") not in STOP_REASONS:
            raise ValueError(f"the head-count study's {name} does not say why it stopped: 'stopped' is "
                             f"{run.get('stopped')!r}, but it must be one of {', '.join(STOP_REASONS)}. {how}")
        rate = run.get("learning_rate")
        rate_listed = isinstance(rate, (int, float)) and any(math.isclose(rate, listed)
                                                             for listed in content["learning_rates"])
        if run.get("n_heads") not in content["head_counts"] or not rate_listed or run.get("seed") not in seeds:
            raise ValueError(f"the head-count study's {name} disagrees with its header, which lists h = "
                             f"{_listing(content['head_counts'])}, learning rates {content['learning_rates']} and "
                             f"seeds {_listing(sorted(seeds))}. {how}")
        if run["seed"] not in content["seeds"] and chosen and not math.isclose(run["learning_rate"],
                                                                               chosen.get(run["n_heads"], -1.0)):
            raise ValueError(f"the head-count study's {name} is a report seed at a rate that was not chosen for its "
                             f"h ({chosen.get(run['n_heads'])!r}). {how}")
        curve, last = run["curve"], run.get("steps_trained")
        if not curve.get("step") or last != curve["step"][-1] or last > content["max_steps"]:
            raise ValueError(f"the head-count study's {name} has steps_trained {last!r}, but its curve ends at step "
                             f"{(curve.get('step') or [None])[-1]!r} (at most max_steps = {content['max_steps']}). "
                             f"{how}")
        solved = min(curve["validation"][-1], curve["held_out"][-1]) >= strictest
        if (run["stopped"] == "solved") != solved or (run["stopped"] == "cap" and last != content["max_steps"]):
            raise ValueError(f"the head-count study's {name} says it stopped because of {run['stopped']!r}, but it "
                             f"ended at step {last} with validation accuracy {curve['validation'][-1]} and held-out "
                             f"{curve['held_out'][-1]} (solved means both >= {strictest}). {how}")


def _curve(record: dict) -> dict:
    """``record``'s logged curve, after checking that ``record`` is one run's record that holds one."""
    check_type("record", record, dict, "one run's record (a dict), e.g. study.run(n_heads, learning_rate, seed)")
    return check_type("record['curve']", record.get("curve"), dict, "the run's logged curve (a dict of 'step', "
                      "'validation' and 'held_out' lists); pass a record from study.run(n_heads, learning_rate, seed)")


def steps_to_solve(record: dict, threshold: float, split: str = "held_out") -> float:
    """The first logged step at which a run's accuracy on ``split`` reaches ``threshold``; ``inf`` if it never did.

    ``split`` is ``"validation"`` or ``"held_out"``. ``inf`` marks a censored run: not solved within the steps it
    trained (runs stop early only after solving at the strictest threshold, so a looser one is never censored by
    the early stop). Chapter 3.
    """
    curve = _curve(record)
    if split not in ("validation", "held_out"):
        raise ValueError(f"split must be 'validation' (to choose) or 'held_out' (to report), got {split!r}.")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold is an accuracy in (0, 1], got {threshold!r}.")
    return float(next((step for step, accuracy in zip(curve["step"], curve[split], strict=True)
                       if accuracy >= threshold), math.inf))


def accuracy_at(record: dict, step: int, split: str = "held_out") -> float:
    """A run's accuracy on ``split`` at logged ``step``; ``ValueError`` if the run did not log that step."""
    curve = _curve(record)
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
    level = check_share("level", level, meaning="the interval's confidence, e.g. 0.95")
    resamples = values[bootstrap_indices(len(values), n_resamples, seed)]  # (n_resamples, n)
    medians = np.sort(resamples, axis=1)[:, (len(values) - 1) // 2]  # the lower median: inf-safe
    tail = (1.0 - level) / 2
    low, high = np.quantile(medians, [tail, 1.0 - tail], method="inverted_cdf")
    return float(np.sort(values)[(len(values) - 1) // 2]), float(low), float(high)


def solve_times(records: Sequence[dict], threshold: float, split: str = "held_out") -> tuple[np.ndarray, np.ndarray]:
    """Each run's steps to solve, for a survival curve: ``times`` (n,) and ``solved`` (n,) bools. Chapter 3.7.

    A run that reached ``threshold`` on ``split`` gives the first logged step at which it did (:func:`steps_to_solve`)
    and ``solved`` True; one that never did is censored at the last step it trained (``solved`` False): all we know
    is that it would have needed more.
    """
    records = check_items("records", records, "a list of run records, e.g. [study.run(h, rate, s) for s in seeds]")
    steps = [steps_to_solve(record, threshold, split) for record in records]
    times = np.array([step if math.isfinite(step) else record["curve"]["step"][-1]
                      for step, record in zip(steps, records, strict=True)], dtype=float)  # (n,)
    return times, np.isfinite(steps)  # (n,), (n,)


def arm_survival(study: HeadCountStudy, n_heads: int, learning_rate: float, threshold: float,
                 split: str = "held_out", seeds: Sequence[int] | None = None) -> KaplanMeier:
    """The Kaplan-Meier curve of one arm's steps to ``threshold`` on ``split`` over ``seeds`` (default: the choice
    seeds). A run stopped unsolved counts as censored where it stopped, not as a failure. Chapter 3.7."""
    check_type("study", study, HeadCountStudy, "the HeadCountStudy of load_study()")
    seeds = study.seeds if seeds is None else seeds
    return kaplan_meier(*solve_times([study.run(n_heads, learning_rate, seed) for seed in seeds], threshold, split))


def best_learning_rates(study: HeadCountStudy, threshold: float, horizon: float | None = None) -> dict[int, float]:
    """Per head count, the learning rate chosen on the validation batch: the fewest mean steps to ``threshold``.

    The mean is the restricted mean of the Kaplan-Meier curve over the choice seeds (:func:`arm_survival` on the
    validation batch) up to ``horizon`` (default ``study.rmst_horizon``): a run stopped unsolved is censored, and
    beyond the last run still training the curve is held flat. Ties go to the rate with more seeds solved, then to
    the higher median validation accuracy at ``study.min_steps``, then to the smaller rate. The held-out batch and
    the report seeds play no part in the choice, and a rate not trained from every seed is left out of it.
    Chapter 3.7.
    """
    check_type("study", study, HeadCountStudy, "the HeadCountStudy of load_study()")
    horizon = study.rmst_horizon if horizon is None else horizon
    chosen = {}
    for n_heads in study.head_counts:
        complete = [rate for rate in study.learning_rates
                    if set(study.seeds_trained(n_heads, rate)) == set(study.seeds)]
        if not complete:
            raise ValueError(f"h = {n_heads} has no learning rate trained from every seed; nothing to choose from.")

        def score(learning_rate: float, n_heads: int = n_heads) -> tuple[float, int, float, float]:
            records = [study.run(n_heads, learning_rate, seed) for seed in study.seeds]
            times, solved = solve_times(records, threshold, "validation")
            mean_steps = restricted_mean_survival_time(kaplan_meier(times, solved), horizon)
            accuracy = float(np.median([accuracy_at(r, study.min_steps, "validation") for r in records]))
            return mean_steps, -int(solved.sum()), -accuracy, learning_rate

        chosen[n_heads] = min(complete, key=score)
    return chosen


def restricted_mean_interval(records: Sequence[dict], threshold: float, horizon: float, split: str = "held_out",
                             n_resamples: int = 2000, seed: int = 0,
                             level: float = 0.95) -> tuple[float, float, float]:
    """The restricted mean steps to solve of some runs, with a percentile-bootstrap interval over the runs. 3.7.

    ``records`` (n runs) are read by :func:`solve_times`; the estimate is the area under their Kaplan-Meier curve up
    to ``horizon`` (:func:`~mha.core.survival.restricted_mean_survival_time`), and each resample draws the runs with
    replacement (:func:`~mha.core.resampling.bootstrap_indices`). Returns ``(mean, low, high)``. With a handful of
    seeds the interval can only run between what those seeds did: read it as a rough range, not more.
    """
    times, solved = solve_times(records, threshold, split)  # (n,), (n,)
    estimate = restricted_mean_survival_time(kaplan_meier(times, solved), horizon)
    resampled = [restricted_mean_survival_time(kaplan_meier(times[rows], solved[rows]), horizon)
                 for rows in bootstrap_indices(len(times), n_resamples, seed)]  # (n_resamples,)
    tail = (1.0 - level) / 2
    low, high = np.quantile(resampled, [tail, 1.0 - tail])
    return estimate, float(low), float(high)
