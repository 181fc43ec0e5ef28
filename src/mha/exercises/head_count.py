"""Checks for the exercises of chapter 3, "One big head or many" (the head-count sweep).

Each ``check_*`` runs the learner's function on small seeded inputs whose
answers are known (random causal attention maps, hand-made loss curves, token
ids of :class:`mha.lab.tasks.TwoRelationTask`), compares with the package's own
implementation in :mod:`mha.lab.head_count_sweep` (tested in
``tests/lab/test_head_count_sweep.py``), and when the answer is wrong says which common
slip it matches: averaging over every position instead of the ask positions,
reading a column instead of a row, the next token instead of the previous
one, an index instead of a step, value and modifier swapped, ...

Convention, as everywhere in :mod:`mha`: weights are (batch, heads, seq_q,
seq_k); ROW = query = the position attending FROM, COLUMN = key = the
position attended TO; each row sums to 1.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import numpy as np
import torch

from mha.core.validation import check_seed
from mha.lab.head_count_sweep import answer_parts, equal_split_ceiling, first_step_below, relation_shares
from mha.lab.tasks import TwoRelationTask

from .checking import (
    CheckResult,
    answer_number,
    answer_tuple,
    array_or_none,
    compare_array,
    compare_number,
    describe_difference,
    matches,
    random_attention_maps,
    run_check,
)

__all__ = ["check_relation_shares", "check_first_step_below", "check_answer_parts", "check_equal_split_ceiling"]


# --- relation shares -------------------------------------------------------------------------------

def _share_cases(seed: int = 0):
    """(label, weights, fact_position) triples: random maps, and one real two-relation layout (other sizes and
    draws for a seed other than 0)."""
    rng = np.random.default_rng(3 if check_seed("seed", seed) == 0 else seed)
    shapes = ((2, 1, 6), (3, 2, 8), (4, 4, 10)) if seed == 0 else \
        tuple((int(rng.integers(2, 6)), int(rng.integers(1, 5)), int(rng.integers(6, 13))) for _ in range(3))
    for batch, heads, seq in shapes:
        weights = random_attention_maps(rng, (batch, heads, seq, seq), causal=True)
        fact_position = np.full((batch, seq), -1)
        for b in range(batch):  # asks at odd positions after a few "facts", each pointing at one earlier fact
            n_facts = 2 + b % 2
            for position in range(n_facts + 1, seq, 2):
                fact_position[b, position] = rng.integers(0, n_facts)
        yield f"random maps, batch {batch}, {heads} head(s), seq {seq}", weights, fact_position
    task = TwoRelationTask(n_keys=4, n_values=3, n_modifiers=2, n_facts=3, n_queries=3)
    sample = task.sample(5, 11 if seed == 0 else seed)
    weights = random_attention_maps(rng, (5, 3, task.seq_len, task.seq_len), causal=True)
    yield "a TwoRelationTask batch of 5 sequences, 3 heads", weights, sample.details["fact_position"].numpy()


def _reference_shares(weights: np.ndarray, fact_position: np.ndarray) -> np.ndarray:
    shares = relation_shares(torch.from_numpy(weights), torch.from_numpy(fact_position))  # (heads, 3)
    return shares[:, :2].double().numpy()  # (heads, 2): fact, previous


def _share_slips(weights: np.ndarray, fact_position: np.ndarray) -> dict[str, np.ndarray]:
    """What typical wrong answers give, keyed by the slip (finishing "It looks like you ...")."""
    batch, heads, seq, _ = weights.shape
    ask = fact_position >= 0  # (batch, seq)
    b_index, q_index = np.nonzero(ask)
    facts = fact_position[b_index, q_index]
    slips = {}
    transposed = np.swapaxes(weights, -1, -2)
    slips["read the column instead of the row: weights[..., key, query] is how much the KEY attends to the query"] = \
        np.stack([transposed[b_index, :, q_index, facts].mean(0),
                  transposed[b_index, :, q_index, q_index - 1].mean(0)], -1)
    every_query = np.arange(1, seq)
    slips["averaged the previous-token weight over every position, not only the ask positions"] = \
        np.stack([weights[b_index, :, q_index, facts].mean(0),
                  weights[:, :, every_query, every_query - 1].mean(axis=(0, 2))], -1)
    slips["summed over the ask positions instead of averaging"] = \
        np.stack([weights[b_index, :, q_index, facts].sum(0), weights[b_index, :, q_index, q_index - 1].sum(0)], -1)
    slips["took the query's own position (the ask token itself) as the 'previous' token"] = \
        np.stack([weights[b_index, :, q_index, facts].mean(0), weights[b_index, :, q_index, q_index].mean(0)], -1)
    return slips


def check_relation_shares(function: Callable, seed: int = 0) -> CheckResult:
    """Check ``function(weights, fact_position) -> (heads, 2)``: mean attention to the fact and to the previous token.

    ``weights`` (batch, heads, seq, seq) numpy, rows = queries; ``fact_position``
    (batch, seq) ints, the position of the asked fact at each ask position and
    -1 elsewhere. Column 0: the weight an ask position puts on its fact;
    column 1: on the position just before it; both averaged over every ask
    position of the batch. Compared with :func:`mha.lab.head_count_sweep.relation_shares`.
    """
    cases = [(label, (weights, fact_position), {}, (weights, fact_position))
             for label, weights, fact_position in _share_cases(seed)]

    def compare(got, inputs):
        weights, fact_position = inputs
        expected = _reference_shares(weights, fact_position)
        slips = {slip: (value, f"It looks like you {slip}.")
                 for slip, value in _share_slips(weights, fact_position).items()}
        slips["swapped"] = (expected[:, ::-1], "The two columns are swapped: column 0 is the fact, column 1 the "
                                               "previous token.")
        return compare_array(got, expected, slips, "your shares", head_axis=0)

    return run_check(function, cases, compare, "measures where each head looks from the ask positions")


# --- first step below a threshold ------------------------------------------------------------------

def _curve_cases():
    """(label, steps, losses, threshold) for hand-made loss curves, including spikes and one that never gets there."""
    steps = list(range(0, 1100, 100))
    yield "a smooth curve", steps, [4.7, 3.0, 2.1, 2.08, 1.4, 0.9, 0.4, 0.1, 0.05, 0.02, 0.01], 0.5
    yield "a curve that dips, spikes back up, then falls", steps, \
        [4.7, 2.1, 0.3, 1.2, 2.0, 0.9, 0.6, 0.2, 0.1, 0.1, 0.05], 0.5
    touching = [4.0, 3.0, 2.0, 1.0, 0.5, 0.5, 0.2, 0.1, 0.1, 0.1, 0.1]
    yield "a curve that touches the threshold exactly", steps, touching, 0.5
    yield "a curve that never reaches the threshold", steps, [4.7, 2.1, 2.09, 2.08, 2.08, 2.08, 2.07, 2.07, 2.07, 2.06,
                                                               2.06], 0.5
    yield "logged every 250 steps, starting at 0", list(range(0, 2750, 250)), \
        [3.5, 3.4, 3.1, 2.0, 1.0, 0.4, 0.2, 0.1, 0.05, 0.01, 0.005], 0.1


def _random_curves(seed: int):
    """(label, steps, losses, threshold) for random loss curves: other logging intervals, a spike, a threshold met
    exactly, one never met."""
    rng = np.random.default_rng(check_seed("seed", seed))
    for kind in ("touching", "never", "spike", "plain"):
        every = int(rng.choice([10, 50, 100, 250]))
        start = int(rng.choice([0, every]))
        count = int(rng.integers(8, 20))
        steps = [start + every * i for i in range(count)]
        losses = np.round(4.0 * np.exp(-rng.uniform(0.2, 0.6) * np.arange(count)) + rng.uniform(0, 0.05, count), 3)
        if kind == "spike":
            losses[count // 3] = losses[0]
        if kind == "never":
            threshold = float(np.round(losses.min() - rng.uniform(0.01, 0.5), 3))
        elif kind == "touching":
            threshold = float(losses[int(rng.integers(1, count))])
        else:
            threshold = float(np.round(rng.uniform(losses.min(), losses.max()), 3))
        yield f"a random curve logged every {every} steps ({kind})", steps, [float(x) for x in losses], threshold


def check_first_step_below(function: Callable, seed: int = 0) -> CheckResult:
    """Check ``function(steps, losses, threshold)``: the first logged step with loss <= threshold, or None.

    Compared with :func:`mha.lab.head_count_sweep.first_step_below` on hand-made curves
    (a spike after an early dip, a curve that never gets there, a loss equal
    to the threshold).
    """
    cases = []
    for label, steps, losses, threshold in (_curve_cases() if check_seed("seed", seed) == 0 else _random_curves(seed)):
        cases.append((label, (list(steps), list(losses), threshold), {}, (steps, losses, threshold)))

    def compare(got, inputs):
        steps, losses, threshold = inputs
        expected = first_step_below(steps, losses, threshold)
        if expected is None:
            if got is None:
                return None
            return (f"the curve never reaches {threshold} (its lowest loss is {min(losses)}), so the answer is None; "
                    f"got {got!r}. Return None rather than a number (0, -1 or the last step would read as a step).")
        if got is None:
            return f"got None, but the loss is {losses[steps.index(expected)]} <= {threshold} at step {expected}."
        value = answer_number(got, "the step", kind="a whole number (an int), or None if it never gets there")
        if not float(value).is_integer():
            return f"got {value:g}; return the step, a whole number such as {expected}."
        got = int(value)
        if got == expected:
            return None
        first_strictly_below = next((s for s, loss in zip(steps, losses, strict=True) if loss < threshold), None)
        below_at = {s for s, loss in zip(steps, losses, strict=True) if loss <= threshold}
        hint = ""
        if got == steps.index(expected):
            hint = " That is the position in the list, not the step: return steps[i]."
        elif got == first_strictly_below:
            hint = " Use <= (at or below): a loss equal to the threshold counts."
        elif got in below_at:
            hint = (" The loss is at or below the threshold there too, but not for the first time: return the first "
                    "such step.")
        return f"expected step {expected}, got {got}.{hint}"

    return run_check(function, cases, compare, "finds when a loss curve first reaches a threshold")


# --- value and modifier of an answer ---------------------------------------------------------------

def _answer_cases(seed: int = 0):
    """(label, predicted, target, task): token ids at the ask positions for a few tasks and kinds of model (other
    sizes and draws for a seed other than 0)."""
    rng = np.random.default_rng(5 if check_seed("seed", seed) == 0 else seed)
    sizes = ((8, 4), (5, 3)) if seed == 0 else \
        tuple((int(rng.integers(3, 10)), int(rng.integers(2, 6))) for _ in range(2))
    for n_values, n_modifiers in sizes:
        task = TwoRelationTask(n_keys=8, n_values=n_values, n_modifiers=n_modifiers)
        n = 60 if seed == 0 else int(rng.integers(30, 90))
        values, modifiers = rng.integers(0, n_values, n), rng.integers(0, n_modifiers, n)
        target = task.first_answer + values * n_modifiers + modifiers
        guessed_values = rng.integers(0, n_values, n)
        only_modifier = task.first_answer + guessed_values * n_modifiers + modifiers  # knows m, guesses v
        yield (f"{n_values} values x {n_modifiers} modifiers, a model that knows only the modifier",
               only_modifier, target, task)
        guessed_modifiers = rng.integers(0, n_modifiers, n)
        only_value = task.first_answer + values * n_modifiers + guessed_modifiers  # knows v, guesses m
        yield (f"{n_values} values x {n_modifiers} modifiers, a model that knows only the value", only_value, target,
               task)
    task = TwoRelationTask()
    target = np.array([task.first_answer + 9, task.first_answer + 30, task.first_answer + 2, task.first_answer + 17])
    predicted = np.array([task.first_answer + 9, 5, task.first_modifier + 2, task.first_answer + 16])
    yield "some predictions that are not answer tokens at all (a fact, a modifier)", predicted, target, task


def _task_numbers(task: TwoRelationTask) -> SimpleNamespace:
    """The task's sizes and first token ids as plain numbers, which is all a learner's function reads of it: the
    grader's process that runs the function cannot import the package that defines the task's class."""
    names = ("name", "n_keys", "n_values", "n_modifiers", "n_facts", "n_queries", "first_ask", "first_modifier",
             "first_answer", "vocab_size", "seq_len")
    return SimpleNamespace(**{name: getattr(task, name) for name in names})


def check_answer_parts(function: Callable, seed: int = 0) -> CheckResult:
    """Check ``function(predicted, target, task) -> (value_accuracy, modifier_accuracy)``.

    ``predicted`` and ``target`` are 1-d arrays of token ids at the ask
    positions, ``task`` a :class:`~mha.lab.tasks.TwoRelationTask`. Answer ``(v, m)``
    is token ``task.first_answer + v * task.n_modifiers + m``; a prediction that
    is not an answer token is wrong for both. Compared with
    :func:`mha.lab.head_count_sweep.answer_parts`.
    """
    cases = [(label, (predicted, target, _task_numbers(task)), {}, (predicted, target, task))
             for label, predicted, target, task in _answer_cases(seed)]

    def compare(got, inputs):
        predicted, target, task = inputs
        reference = answer_parts(torch.as_tensor(predicted), torch.as_tensor(target), task)
        expected = np.array([reference["value"], reference["modifier"]])
        names = ("value_accuracy", "modifier_accuracy")
        if array_or_none(got) is None:  # not already an array of two numbers: a pair of numbers
            got = np.array([answer_number(part, name)
                            for part, name in zip(answer_tuple(got, names), names, strict=True)])
        problem = describe_difference("your (value, modifier) accuracy", got, expected, atol=1e-6)
        if problem is None:
            return None
        got_array = array_or_none(got).astype(float)
        if got_array.shape == (2,):
            if matches(got_array, expected[::-1]):
                return (f"{problem} Value and modifier are swapped: v = (token - first_answer) // n_modifiers, "
                        f"m = (token - first_answer) % n_modifiers.")
            p, t = predicted - task.first_answer, target - task.first_answer
            loose = np.array([np.mean(p // task.n_modifiers == t // task.n_modifiers),
                              np.mean(p % task.n_modifiers == t % task.n_modifiers)])
            if matches(got_array, loose) and not np.allclose(loose, expected, atol=1e-6):
                return (f"{problem} A prediction that is not an answer token (a fact, a modifier, ...) must count as "
                        f"wrong; the // and % of its id land on some value and modifier by accident.")
            v_wrong = np.array([np.mean(p // task.n_values == t // task.n_values),
                                np.mean(p % task.n_values == t % task.n_values)])
            if matches(got_array, v_wrong):
                return (f"{problem} Divide by n_modifiers (the answers of one value are n_modifiers apart), not "
                        "n_values.")
        return problem

    return run_check(function, cases, compare, "splits an answer into its value and its modifier")


# --- the even-split ceiling --------------------------------------------------------------------------------------

def check_equal_split_ceiling(function: Callable, seed: int = 0) -> CheckResult:
    """Check ``function(n_symbols)``: the best accuracy possible after an even split of two same-vocabulary sources
    (other sizes for a seed other than 0)."""
    seed = check_seed("seed", seed)
    sizes = (8, 10, 100, 2) if seed == 0 else tuple(int(n) for n in np.random.default_rng(seed).integers(3, 400, 4))
    cases = [(f"{n} symbols", (n,), {}, n) for n in sizes]

    def compare(got, n_symbols):
        want = equal_split_ceiling(n_symbols)
        slips = {"no a = b": (0.5, "Pairs with a = b are never confused: the head's output is the same either way, "
                                   "and it is right. Add them back."),
                 "only a = b": (1 / n_symbols, "When a and b differ, guessing one order is right half the time."),
                 "ordered": ((1 + (n_symbols - 1) / 2) / n_symbols ** 2,
                             "That is a fraction of all answers, not of queries: every query has one pair.")}
        return compare_number(got, want, slips, f"the ceiling for {n_symbols} symbols")

    return run_check(function, cases, compare, "finds the most an even split of two same-kind sources can get right")
