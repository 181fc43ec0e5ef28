"""The chapter-3 "One big head or many" exercise checks pass the solutions and explain typical wrong answers."""

from __future__ import annotations

import numpy as np
import pytest

from mha.exercises.head_count import (
    check_answer_parts,
    check_equal_split_ceiling,
    check_first_step_below,
    check_relation_shares,
)

# --- relation shares -------------------------------------------------------------------------------

def solution_relation_shares(weights, fact_position):
    ask_batch, ask_query = np.nonzero(fact_position >= 0)
    facts = fact_position[ask_batch, ask_query]
    to_fact = weights[ask_batch, :, ask_query, facts]  # (n_ask, heads)
    to_previous = weights[ask_batch, :, ask_query, ask_query - 1]  # (n_ask, heads)
    return np.stack([to_fact.mean(0), to_previous.mean(0)], axis=-1)  # (heads, 2)


def loop_relation_shares(weights, fact_position):  # the slow, obvious way must pass too
    batch, heads, seq, _ = weights.shape
    totals, count = np.zeros((heads, 2)), 0
    for b in range(batch):
        for i in range(seq):
            if fact_position[b, i] >= 0:
                count += 1
                for h in range(heads):
                    totals[h, 0] += weights[b, h, i, fact_position[b, i]]
                    totals[h, 1] += weights[b, h, i, i - 1]
    return totals / count


def transposed_shares(weights, fact_position):
    return solution_relation_shares(np.swapaxes(weights, -1, -2), fact_position)


def every_position_previous(weights, fact_position):
    shares = solution_relation_shares(weights, fact_position)
    seq = weights.shape[-1]
    shares[:, 1] = weights[:, :, np.arange(1, seq), np.arange(seq - 1)].mean(axis=(0, 2))
    return shares


def own_position(weights, fact_position):
    ask_batch, ask_query = np.nonzero(fact_position >= 0)
    facts = fact_position[ask_batch, ask_query]
    return np.stack([weights[ask_batch, :, ask_query, facts].mean(0),
                     weights[ask_batch, :, ask_query, ask_query].mean(0)], axis=-1)


def swapped_columns(weights, fact_position):
    return solution_relation_shares(weights, fact_position)[:, ::-1]


@pytest.mark.parametrize("solution", [solution_relation_shares, loop_relation_shares])
def test_relation_shares_check_passes_correct_answers(solution):
    result = check_relation_shares(solution)
    assert result.passed, result.message
    assert "✓" in result.message


@pytest.mark.parametrize("wrong, words", [
    (transposed_shares, "read the column instead of the row"),
    (every_position_previous, "every position, not only the ask positions"),
    (own_position, "own position"),
    (swapped_columns, "columns are swapped"),
])
def test_relation_shares_check_names_the_slip(wrong, words):
    result = check_relation_shares(wrong)
    assert not result.passed
    assert words in result.message, result.message


def test_relation_shares_check_reports_a_wrong_shape_and_an_unattempted_stub():
    result = check_relation_shares(lambda weights, fact_position: solution_relation_shares(weights, fact_position).T)
    assert not result.passed and "shape" in result.message

    def stub(weights, fact_position):
        raise NotImplementedError

    assert "Not attempted yet" in check_relation_shares(stub).message


# --- first step below ------------------------------------------------------------------------------

def solution_first_step_below(steps, losses, threshold):
    for step, loss in zip(steps, losses, strict=True):
        if loss <= threshold:
            return step
    return None


def strictly_below(steps, losses, threshold):
    return next((s for s, loss in zip(steps, losses, strict=True) if loss < threshold), None)


def index_not_step(steps, losses, threshold):
    return next((i for i, loss in enumerate(losses) if loss <= threshold), None)


def last_crossing(steps, losses, threshold):
    """The step after which the curve stays below: misses the early dip."""
    for i in range(len(losses)):
        if all(loss <= threshold for loss in losses[i:]):
            return steps[i]
    return None


def minus_one_when_never(steps, losses, threshold):
    return next((s for s, loss in zip(steps, losses, strict=True) if loss <= threshold), -1)


def test_first_step_check_passes_the_solution():
    result = check_first_step_below(solution_first_step_below)
    assert result.passed, result.message


@pytest.mark.parametrize("wrong, words", [
    (strictly_below, "Use <="),
    (index_not_step, "position in the list"),
    (last_crossing, "not for the first time"),
    (minus_one_when_never, "Return None"),
])
def test_first_step_check_names_the_slip(wrong, words):
    result = check_first_step_below(wrong)
    assert not result.passed
    assert words in result.message, result.message


# --- answer parts ----------------------------------------------------------------------------------

def solution_answer_parts(predicted, target, task):
    p, t = np.asarray(predicted) - task.first_answer, np.asarray(target) - task.first_answer
    is_answer = (p >= 0) & (p < task.n_values * task.n_modifiers)
    value = is_answer & (p // task.n_modifiers == t // task.n_modifiers)
    modifier = is_answer & (p % task.n_modifiers == t % task.n_modifiers)
    return value.mean(), modifier.mean()


def swapped_parts(predicted, target, task):
    value, modifier = solution_answer_parts(predicted, target, task)
    return modifier, value


def forgets_non_answers(predicted, target, task):
    p, t = np.asarray(predicted) - task.first_answer, np.asarray(target) - task.first_answer
    return np.mean(p // task.n_modifiers == t // task.n_modifiers), np.mean(
        p % task.n_modifiers == t % task.n_modifiers
    )


def divides_by_values(predicted, target, task):
    p, t = np.asarray(predicted) - task.first_answer, np.asarray(target) - task.first_answer
    return np.mean(p // task.n_values == t // task.n_values), np.mean(p % task.n_values == t % task.n_values)


def test_answer_parts_check_passes_the_solution():
    result = check_answer_parts(solution_answer_parts)
    assert result.passed, result.message


@pytest.mark.parametrize("wrong, words", [
    (swapped_parts, "swapped"),
    (forgets_non_answers, "not an answer token"),
    (divides_by_values, "Divide by n_modifiers"),
])
def test_answer_parts_check_names_the_slip(wrong, words):
    result = check_answer_parts(wrong)
    assert not result.passed
    assert words in result.message, result.message


def test_answer_parts_check_rejects_a_dict():
    result = check_answer_parts(lambda p, t, task: {"value": 1.0, "modifier": 1.0})
    assert not result.passed and "pair" in result.message



def equal_split_ceiling_solution(n_tokens):
    """Ordered pairs of n tokens: the n with both tokens equal are always right, the others right half the time."""
    return 1 / n_tokens + (1 - 1 / n_tokens) / 2


def test_equal_split_ceiling_check_passes_the_solution_and_names_the_slips():
    assert check_equal_split_ceiling(equal_split_ceiling_solution).passed
    result = check_equal_split_ceiling(lambda n: 0.5)
    assert not result.passed and "a = b" in result.message, result.message
    result = check_equal_split_ceiling(lambda n: 1 / n)
    assert not result.passed and "half the time" in result.message, result.message
    result = check_equal_split_ceiling(lambda n: f"{0.5:.2f}")
    assert not result.passed and "number" in result.message, result.message
