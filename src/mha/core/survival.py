"""Time-to-event curves with censoring: the Kaplan-Meier estimate and its restricted mean (chapter 3.7).

A training run "survives" while it has not yet solved its task; it is *censored* when it stopped without solving
(it plateaued, or met the cap), so all we know is that its time to solve is longer than the time it was watched.
:func:`kaplan_meier` estimates the share of runs still unsolved after each number of steps without counting a
censored run as a failure, and :func:`restricted_mean_survival_time` turns that curve into one number, the mean
number of steps to solve counted up to a horizon (section 3.7, "One big head or many").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from mha.core.validation import as_real_array, check_finite_number

__all__ = ["KaplanMeier", "kaplan_meier", "restricted_mean_survival_time"]


@dataclasses.dataclass(frozen=True)
class KaplanMeier:
    """A Kaplan-Meier curve: one row per distinct event time, in increasing order (see :func:`kaplan_meier`).

    ``times`` (k,) the distinct times at which at least one event happened; ``at_risk`` (k,) how many items were
    still watched and event-free just before each; ``events`` (k,) how many had their event there; ``survival``
    (k,) the estimated share still event-free just after each time. ``n_items`` and ``last_time`` (the largest
    time observed, event or censored) say how far the curve was watched; ``last_censored`` whether that last
    observation was censored, in which case the curve is unknown beyond it.
    """

    times: np.ndarray
    at_risk: np.ndarray
    events: np.ndarray
    survival: np.ndarray
    n_items: int
    last_time: float
    last_censored: bool

    def at(self, t: float | Sequence[float]) -> np.ndarray:
        """The estimated share still event-free at time(s) ``t`` (a right-continuous step function): (len(t),)."""
        t = np.atleast_1d(as_real_array("t", t))  # (m,)
        index = np.searchsorted(self.times, t, side="right")  # events at or before each t
        return np.concatenate([[1.0], self.survival])[index]  # (m,)


def _check_times(times, observed) -> tuple[np.ndarray, np.ndarray]:
    times = as_real_array("times", times, meaning="(n,) time of each item's event or censoring")
    observed_array = np.asarray(observed)
    if times.ndim != 1 or len(times) == 0:
        raise ValueError(f"times must be a non-empty 1-d list, one time per item; got shape {times.shape}.")
    if observed_array.shape != times.shape:
        raise ValueError(f"observed has shape {observed_array.shape} but times has {times.shape}: give one flag per "
                         f"item, True where its event happened and False where it was censored.")
    if observed_array.dtype != bool and not np.isin(observed_array, (0, 1)).all():
        raise ValueError("observed must hold True (the event happened at that time) or False (censored there), "
                         f"got {observed_array.tolist()!r:.80}.")
    if not np.isfinite(times).all() or (times < 0).any():
        raise ValueError("times must be finite and >= 0: for an item censored without an event give the time it was "
                         f"last watched, not inf; got {times.tolist()!r:.80}.")
    return times, observed_array.astype(bool)


def kaplan_meier(times: Sequence[float], observed: Sequence[bool]) -> KaplanMeier:
    """The Kaplan-Meier estimate of the share of items still event-free over time. Chapter 3.7.

    ``times`` (n,) each item's time of event or of censoring; ``observed`` (n,) True where the event happened at
    that time, False where the item was censored there (watched until then, no event). At each distinct event time
    ``t`` with ``d`` events among the ``n`` items still at risk, the curve is multiplied by ``1 - d / n``; an item
    censored at ``t`` counts as at risk at ``t`` (events come first at a tie) and leaves the risk set after it.
    With nothing censored the curve is one minus the empirical distribution of the times.
    """
    times, observed = _check_times(times, observed)
    event_times = np.unique(times[observed])  # (k,)
    at_risk = (times[None, :] >= event_times[:, None]).sum(axis=1)  # (k,): watched and event-free just before
    events = (observed[None, :] & (times[None, :] == event_times[:, None])).sum(axis=1)  # (k,)
    survival = np.cumprod(1.0 - events / at_risk)  # (k,)
    last = times.max()
    return KaplanMeier(times=event_times, at_risk=at_risk, events=events, survival=survival, n_items=len(times),
                       last_time=float(last), last_censored=not observed[times == last].any())


def restricted_mean_survival_time(curve: KaplanMeier, horizon: float) -> float:
    """The area under a Kaplan-Meier curve from 0 to ``horizon``: the mean of min(time to event, horizon). Chapter 3.7.

    It is the mean time to the event, counting every item that had none by ``horizon`` as taking ``horizon``. Past
    the last observation the curve is held at its last value: if that observation was censored, this assumes no
    further events (the curve is not known there), and the result is then an upper bound for the items still
    event-free.
    """
    if not isinstance(curve, KaplanMeier):
        raise TypeError(f"curve must be a KaplanMeier (from kaplan_meier(times, observed)), "
                        f"got {type(curve).__name__}.")
    horizon = check_finite_number("horizon", horizon, positive=True, meaning="the time up to which to average")
    inside = curve.times < horizon
    edges = np.concatenate([[0.0], curve.times[inside], [horizon]])  # (m + 2,): where the curve steps
    levels = np.concatenate([[1.0], curve.survival[inside]])  # (m + 1,): its value on each interval
    return float((levels * np.diff(edges)).sum())
