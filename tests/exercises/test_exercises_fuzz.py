"""Bad input never escapes as a traceback: every exercise check answers every wrong kind of answer with its feedback.

The checks are found by introspection (every ``check_*`` function in every module of :mod:`mha.exercises`), so a
new check is fuzzed as soon as it exists. Each gets answers of the wrong kind (a string, a dict, None, NaN, a
tensor that requires grad, and functions that return those, raise, or return the wrong shape) and, from its
reference solution in the other test files, the right answer spoiled in ways a learner might spoil it. Every one
must give a failing :class:`CheckResult` whose message says what was wrong: never an exception, and never the
catch-all "could not read" message, which is kept for kinds of answer nobody foresaw.
"""

import functools
import importlib
import inspect
import math
import pkgutil

import numpy as np
import pytest
import torch

import mha.exercises
from mha.exercises import emergence
from mha.exercises.checking import (
    CheckBug,
    CheckResult,
    compare_array,
    compare_number,
    describe_difference,
    matches,
    run_check,
)


def _all_checks() -> dict:
    checks = {}
    for info in pkgutil.iter_modules(mha.exercises.__path__):
        module = importlib.import_module(f"mha.exercises.{info.name}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("check_") and function.__module__ == module.__name__:
                checks[name] = function
    return checks


CHECKS = _all_checks()
CATCH_ALL = "could not read"  # run_check's message for an answer no reader foresaw
_TRAINED_ONCE = functools.lru_cache(maxsize=4)(emergence._fast_model_scores)


@pytest.fixture(autouse=True)
def _one_reference_training_per_seed(monkeypatch):
    """The training exercise's reference trains afresh on every call (the grader times a case against it); the many
    wrong answers here share one training per seed instead."""
    monkeypatch.setattr(emergence, "_fast_model_scores", _TRAINED_ONCE)


def assert_feedback(result, *words):
    """``result`` is the check's own failure, with a message that says what was wrong."""
    assert isinstance(result, CheckResult), f"a check returned {type(result).__name__}, not a CheckResult"
    assert not result.passed and not result
    assert result.message.startswith("✗") and len(result.message) > 40, result.message
    assert CATCH_ALL not in result.message, f"no reader handled this answer: {result.message}"
    for word in words:
        assert word.lower() in result.message.lower(), f"{word!r} missing from: {result.message}"


def test_every_check_is_found():
    assert len(CHECKS) >= 40
    assert all(callable(check) for check in CHECKS.values())


# --- answers of the wrong kind -----------------------------------------------------------------------

def returning(value, label):
    """A learner's function that ignores its inputs and returns ``value`` (a fresh one when ``value`` is callable)."""
    def learner_function(*args, **kwargs):
        return value() if callable(value) else value
    learner_function.__name__ = label
    return learner_function


def raising_zero_division(*args, **kwargs):
    return 1 / 0


def raising_without_message(*args, **kwargs):
    raise KeyError


def reading_an_undefined_name(*args, **kwargs):
    return quantity_nobody_defined  # noqa: F821


def compiling_code_that_does_not_parse(*args, **kwargs):
    return eval("(1 +")


WRONG_KINDS = [  # (id, the answer, words its feedback must contain)
    ("a string", "my answer", ["Expected a function", "str"]),
    ("a dict", {"value": 0.5}, ["Expected a function", "dict"]),
    ("None", None, ["Expected a function", "None"]),
    ("NaN", float("nan"), ["Expected a function", "nan"]),
    ("a tensor requiring grad", torch.ones(3, requires_grad=True), ["Expected a function", "requires grad"]),
    ("a function returning a string", returning("0.5", "returns_text"), ["str"]),
    ("a function returning a dict", returning({"value": 0.5}, "returns_dict"), ["dict"]),
    ("a function returning None", returning(None, "returns_none"), ["None"]),
    ("a function returning NaN", returning(float("nan"), "returns_nan"), ["nan"]),
    ("a function returning a tensor requiring grad",
     returning(lambda: torch.full((2, 3), 0.5, requires_grad=True), "returns_grad_tensor"), ["(2, 3)"]),
    ("a function raising ZeroDivisionError", raising_zero_division,
     ["raised ZeroDivisionError", "division by zero", "return 1 / 0"]),
    ("a function raising with no message", raising_without_message, ["raised KeyError", "with no message"]),
    ("a function reading a name that is not defined", reading_an_undefined_name,
     ["`quantity_nobody_defined` is not defined: run the cell that defines it", "return quantity_nobody_defined"]),
    ("a function whose own code does not parse", compiling_code_that_does_not_parse, ["syntax error", "at line 1"]),
    ("a function returning the wrong shape", returning(np.zeros((7, 3, 2)), "returns_wrong_shape"), ["(7, 3, 2)"]),
    ("a function returning text in an array", returning(np.array(["0.5", "1"]), "returns_text_array"), ["<U3"]),
    ("a function returning a complex number", returning(0.5 + 1j, "returns_complex"), ["complex"]),
]


def feedback_problem(check, answer, words) -> str | None:
    """Why ``check(answer)`` is not the check's feedback naming ``words`` (an escaped exception, a pass...), or None."""
    try:
        result = check(answer)
    except Exception as error:
        return f"raised {type(error).__name__}: {error}"
    try:
        assert_feedback(result, *words)
    except AssertionError as error:
        return str(error)
    return None


@pytest.mark.parametrize("check", CHECKS.values(), ids=CHECKS.keys())
@pytest.mark.slow
def test_a_wrong_kind_of_answer_gets_the_checks_feedback(check):
    problems = [f"{label}: {problem}" for label, answer, words in WRONG_KINDS
                if (problem := feedback_problem(check, answer, words))]
    assert not problems, "\n".join(problems)


# --- the reference solution, spoiled ---------------------------------------------------------------

SOLUTIONS = {  # check -> (test module, its reference solution)
    "check_softmax": ("test_exercises", "softmax_solution"),
    "check_attention": ("test_exercises", "attention_solution"),
    "check_causal_mask": ("test_exercises", "causal_mask_solution"),
    "check_split_heads": ("test_exercises", "split_heads_solution"),
    "check_parameter_count": ("test_exercises", "parameter_count_solution"),
    "check_head_contributions": ("test_exercises", "head_contributions_solution"),
    "check_attention_from_circuit": ("test_exercises_geometry", "attention_solution"),
    "check_numerical_rank": ("test_exercises_geometry", "numerical_rank_solution"),
    "check_principal_angle_cosines": ("test_exercises_geometry", "cosines_solution"),
    "check_min_head_width": ("test_exercises_geometry", "min_width_solution"),
    "check_rank_two_scores": ("test_exercises_geometry", "rank_two_solution"),
    "check_energy_rank": ("test_exercises_geometry", "energy_rank_solution"),
    "check_previous_token_share": ("test_exercises_head_roles", "previous_token_share"),
    "check_special_token_share": ("test_exercises_head_roles", "special_token_share"),
    "check_is_positional": ("test_exercises_head_roles", "is_positional"),
    "check_relation_accuracy": ("test_exercises_head_roles", "relation_accuracy"),
    "check_best_offset": ("test_exercises_head_roles", "best_offset"),
    "check_word_attention": ("test_exercises_head_roles", "word_attention"),
    "check_distance_matched_lift": ("test_exercises_head_roles", "distance_matched_lift"),
    "check_candidate_picks": ("test_exercises_coreference_and_content", "candidate_picks_solution"),
    "check_count_flips": ("test_exercises_coreference_and_content", "count_flips_solution"),
    "check_held_out_best": ("test_exercises_coreference_and_content", "held_out_solution"),
    "check_detection_power": ("test_exercises_coreference_and_content", "detection_power_solution"),
    "check_crossed_contrast": ("test_exercises_coreference_and_content", "crossed_solution"),
    "check_rarest_hits": ("test_exercises_coreference_and_content", "rarest_hits_solution"),
    "check_familywise_p_values": ("test_exercises_coreference_and_content", "familywise_solution"),
    "check_previous_token_score": ("test_exercises_emergence", "previous_token_score"),
    "check_prefix_matching_score": ("test_exercises_emergence", "prefix_matching_score"),
    "check_k_composition": ("test_exercises_emergence", "k_composition"),
    "check_heads_with_role": ("test_exercises_emergence", "heads_with_role"),
    "check_permute_heads": ("test_exercises_emergence", "permute_heads"),
    "check_uniform_previous_token_score": ("test_exercises_emergence", "uniform_previous_token_score"),
    "check_relation_shares": ("test_exercises_head_count", "solution_relation_shares"),
    "check_equal_split_ceiling": ("test_exercises_head_count", "equal_split_ceiling_solution"),
    "check_first_step_below": ("test_exercises_head_count", "solution_first_step_below"),
    "check_answer_parts": ("test_exercises_head_count", "solution_answer_parts"),
    "check_norm_based_attention": ("test_exercises_caveats", "norm_attention_solution"),
    "check_attention_rollout": ("test_exercises_caveats", "rollout_solution"),
    "check_rank_correlation": ("test_exercises_caveats", "spearman_solution"),
    "check_sentence_embedding": ("test_exercises_caveats", "embedding_solution"),
    "check_ranking_accuracy": ("test_exercises_caveats", "ranking_solution"),
    "check_michel_importance": ("test_exercises_caveats", "importance_solution"),
    "check_heads_removable": ("test_exercises_caveats", "removable_solution"),
    "check_pooled_ratio_interval": ("test_exercises_layers_and_probing", "pooled_interval_solution"),
    "check_held_out_gain": ("test_exercises_layers_and_probing", "held_out_gain_solution"),
    "check_depth_trend": ("test_exercises_layers_and_probing", "depth_trend_solution"),
    "check_word_features": ("test_exercises_layers_and_probing", "word_features_solution"),
    "check_control_labels": ("test_exercises_layers_and_probing", "control_labels_solution"),
    "check_probe_accuracy": ("test_exercises_layers_and_probing", "probe_accuracy_solution"),
    "check_held_out_relation_head": ("test_exercises_on_real_models", "relation_head_solution"),
    "check_phase_change_step": ("test_exercises_on_real_models", "phase_change_solution"),
    "check_attention_without_head": ("test_exercises_on_real_models", "without_head_solution"),
    "check_model_previous_token_share": ("test_exercises_head_roles", "model_previous_token_share"),
    "check_model_pair_accuracy": ("test_exercises_head_roles", "model_pair_accuracy"),
    "check_similarity_without_head": ("test_exercises_caveats", "similarity_without_head"),
    "check_selection_inflation": ("test_exercises_on_real_models", "inflation_solution"),
    "check_stream_after_each_layer": ("test_exercises_background", "stream_solution"),
    "check_words_from_wordpieces": ("test_exercises_background", "words_solution"),
    "check_cross_entropy": ("test_exercises_background", "cross_entropy_solution"),
    "check_sign_flip_p_value": ("test_exercises_background", "p_value_solution"),
    "check_holm_adjusted": ("test_exercises_background", "holm_solution"),
    "check_bootstrap_interval": ("test_exercises_background", "interval_solution"),
    "check_trained_previous_token_head": ("test_exercises_emergence", "trained_previous_token_head"),
    "check_induction_scores": ("test_exercises_emergence", "induction_scores"),
    "check_patched_change": ("test_exercises_caveats", "patched_change"),
}


def solution_for(check_name: str):
    module, name = SOLUTIONS[check_name]
    return getattr(importlib.import_module(module), name)


def test_every_check_has_a_reference_solution_to_spoil():
    assert sorted(SOLUTIONS) == sorted(CHECKS), "add the new check's reference solution to SOLUTIONS"


def _is_number(leaf) -> bool:
    return isinstance(leaf, (int, float, np.number)) and not isinstance(leaf, (bool, np.bool_))


def _map_leaves(value, spoil):
    """``value`` with every leaf (array, tensor, number) replaced by ``spoil(leaf)``, through tuples and lists."""
    if isinstance(value, (tuple, list)):
        return type(value)(_map_leaves(item, spoil) for item in value)
    return spoil(value)


def _with_nan(leaf):
    if isinstance(leaf, np.ndarray) and leaf.dtype.kind in "iuf" and leaf.size:
        leaf = leaf.astype(float)  # a copy
        leaf.flat[0] = np.nan
        return leaf
    return float("nan") if _is_number(leaf) else leaf


def _as_grad_tensor(leaf, shift=0.0):
    if isinstance(leaf, np.ndarray) and leaf.dtype.kind == "f" or isinstance(leaf, (float, np.floating)):
        return torch.tensor(np.asarray(leaf, dtype=float) + shift, requires_grad=True)
    return leaf + shift if shift and _is_number(leaf) else leaf


SPOILERS = {  # id -> (how the right answer is spoiled, words its feedback must contain)
    "one NaN in the answer": (_with_nan, ["nan"]),
    "wrong values in a tensor requiring grad": (lambda leaf: _as_grad_tensor(leaf, shift=0.5), []),
    "an extra axis": (lambda leaf: np.asarray(leaf)[None] if isinstance(leaf, np.ndarray) else leaf, ["shape"]),
    "the answer as text": (lambda leaf: str(leaf) if isinstance(leaf, (np.ndarray, np.generic, int, float)) else leaf,
                           ["str"]),
}


def spoiled(solution, spoil):
    """The solution with ``spoil`` applied to every leaf of its answer; ``.changed`` says whether that changed one."""
    def learner_function(*args, **kwargs):
        answer = solution(*args, **kwargs)
        result = _map_leaves(answer, spoil)
        learner_function.changed = learner_function.changed or not _same(result, answer)
        return result
    learner_function.changed = False
    learner_function.__name__ = solution.__name__
    return learner_function


def _same(a, b) -> bool:
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and np.array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object))


@pytest.mark.parametrize("check_name", sorted(SOLUTIONS))
@pytest.mark.slow
def test_a_spoiled_right_answer_gets_the_checks_feedback(check_name):
    problems = []
    for label, (spoil, words) in SPOILERS.items():
        learner_function = spoiled(solution_for(check_name), spoil)
        problem = feedback_problem(CHECKS[check_name], learner_function, words)
        if problem and learner_function.changed:  # unchanged: nothing to spoil in this kind of answer (a bool)
            problems.append(f"{label}: {problem}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("check_name", sorted(SOLUTIONS))
@pytest.mark.slow
def test_the_right_answer_in_a_tensor_requiring_grad_is_read_as_its_values(check_name):
    learner_function = spoiled(solution_for(check_name), _as_grad_tensor)
    assert CHECKS[check_name](learner_function).passed


# --- an error inside the learner's function --------------------------------------------------------

def test_an_error_in_the_learners_function_is_reported_with_its_type_message_and_line():
    def my_shares(weights, fact_position):
        heads = weights.shape[1]
        return np.zeros((heads, 2)) + heads / len([])  # no ask position counted: ZeroDivisionError

    def my_softmax(scores):
        raise ValueError("scores must be 2-d")

    result = CHECKS["check_relation_shares"](my_shares)
    assert_feedback(result, "my_shares raised ZeroDivisionError on case 1", "division by zero",
                    "heads / len([])")
    result = CHECKS["check_softmax"](my_softmax)
    assert_feedback(result, "raised ValueError on case 1 (a (3, 5) matrix, rows independently): scores must be 2-d",
                    'raise ValueError("scores')


# --- comparisons fail closed -----------------------------------------------------------------------

def test_a_non_finite_expected_answer_is_a_bug_in_the_check_and_raises():
    broken = np.array([0.25, np.nan, 0.5])
    for answer in (np.array([0.25, 7.0, 0.5]), broken.copy(), np.array([1.0, 2.0, 3.0])):
        with pytest.raises(CheckBug, match="bug in the exercise check"):
            describe_difference("the shares", answer, broken)
        with pytest.raises(CheckBug):
            compare_array(answer, broken, {}, "the shares")
    for want in (float("nan"), float("inf"), np.float64("-inf")):
        with pytest.raises(CheckBug):
            compare_number(0.5, want, {}, "the share")
        with pytest.raises(CheckBug):
            compare_number(float("nan"), want, {}, "the share")


def test_run_check_raises_a_check_bug_instead_of_passing_or_blaming_the_learner():
    cases = [("a case whose reference answer is NaN", (), {}, np.array([np.nan, 1.0]))]
    with pytest.raises(CheckBug):
        run_check(lambda: np.array([123.0, 1.0]), cases, lambda got, want: describe_difference("x", got, want), "works")
    with pytest.raises(CheckBug):
        run_check(
            lambda: 0.5, [("NaN", (), {}, math.nan)], lambda got, want: compare_number(got, want, {}, "x"), "works"
        )


def test_a_non_finite_answer_is_feedback_and_never_matches():
    problem = describe_difference("the shares", np.array([0.25, np.nan, 0.5]), np.array([0.25, 0.25, 0.5]))
    assert "NaN or infinity (first at index (1,))" in problem
    assert "is nan" in compare_number(float("nan"), 0.5, {"nan slip": (float("nan"), "a hint")}, "the share")
    assert "is inf" in compare_number(torch.tensor(float("inf")), 0.5, {}, "the share")
    assert not matches(np.array([np.nan]), np.array([np.nan]))
    assert not matches(True, 1.0)
    assert matches(torch.tensor([0.5], requires_grad=True), np.array([0.5]))


def test_an_answer_no_reader_foresaw_is_still_feedback_but_a_check_bug_is_raised():
    def compare_that_trips(got, want):
        return got[5]  # an answer of an unforeseen kind makes the check's own code fail

    result = run_check(lambda: [1, 2], [("a case", (), {}, 0.0)], compare_that_trips, "works")
    assert not result and CATCH_ALL in result.message
    assert "a list of 2 items (int, int)" in result.message and "IndexError" in result.message

    def compare_with_a_broken_reference(got, want):
        raise CheckBug("the reference is NaN")

    with pytest.raises(CheckBug):
        run_check(lambda: 0.5, [("a case", (), {}, 0.0)], compare_with_a_broken_reference, "works")
