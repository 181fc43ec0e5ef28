"""Every exercise check passes the solution and fails, with a useful message, on wrong answers."""

import sys

import numpy as np
import pytest
from slips import assert_key_passes_and_stub_fails, assert_slip_named

from mha import exercises

# --- solutions, written the way a learner would --------------------------------------------------

def softmax_solution(scores):
    shifted = scores - scores.max(axis=-1, keepdims=True)
    exps = np.exp(shifted)
    return exps / exps.sum(axis=-1, keepdims=True)


def attention_solution(q, k, v, mask=None):
    scores = q @ k.T / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax_solution(scores)
    return weights @ v, weights


def causal_mask_solution(n):
    return np.tril(np.ones((n, n), dtype=bool))


def split_heads_solution(x, n_heads):
    batch, seq, d_model = x.shape
    return x.reshape(batch, seq, n_heads, d_model // n_heads).transpose(0, 2, 1, 3)


def parameter_count_solution(d_model, n_heads, bias=True):
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def head_contributions_solution(z, W_O):
    batch, n_heads, seq, d_head = z.shape
    return np.stack([z[:, h] @ W_O[h * d_head:(h + 1) * d_head] for h in range(n_heads)], axis=1)


# --- wrong answers, each a mistake learners really make -------------------------------------------

def not_attempted(*args, **kwargs):
    raise NotImplementedError


def naive_softmax(scores):
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)


def softmax_over_wrong_axis(scores):
    shifted = scores - scores.max(axis=0, keepdims=True)
    return np.exp(shifted) / np.exp(shifted).sum(axis=0, keepdims=True)


def attention_without_scaling(q, k, v, mask=None):
    scores = q @ k.T
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax_solution(scores)
    return weights @ v, weights


def attention_ignoring_mask(q, k, v, mask=None):
    return attention_solution(q, k, v, None)


def attention_returning_output_only(q, k, v, mask=None):
    return attention_solution(q, k, v, mask)[0]


def upper_triangular_mask(n):
    return np.triu(np.ones((n, n), dtype=bool))


def float_mask(n):
    return np.tril(np.ones((n, n)))


def split_heads_without_transpose(x, n_heads):
    batch, seq, d_model = x.shape
    return x.reshape(batch, n_heads, seq, d_model // n_heads)


def split_heads_strided(x, n_heads):  # interleaves features: head h gets h, h + n_heads, ...
    batch, seq, d_model = x.shape
    return x.reshape(batch, seq, d_model // n_heads, n_heads).transpose(0, 3, 1, 2)


def parameter_count_per_head_matrices_only(d_model, n_heads, bias=True):
    return 3 * d_model * d_model + (4 * d_model if bias else 0)


def parameter_count_as_float(d_model, n_heads, bias=True):
    return float(parameter_count_solution(d_model, n_heads, bias))


def head_contributions_with_wrong_rows(z, W_O):
    batch, n_heads, seq, d_head = z.shape
    return np.stack([z[:, h] @ W_O[:d_head] for h in range(n_heads)], axis=1)


CASES = [
    (
        exercises.check_softmax,
        softmax_solution,
        [
            (naive_softmax, "NaN or infinity"),
            (softmax_over_wrong_axis, "wrong values"),
            (not_attempted, "Not attempted"),
        ],
    ),
    (
        exercises.check_attention,
        attention_solution,
        [
            (attention_without_scaling, "weights has the right shape"),
            (attention_ignoring_mask, "causal mask"),
            (attention_returning_output_only, "return a pair"),
            (not_attempted, "Not attempted"),
        ],
    ),
    (
        exercises.check_causal_mask,
        causal_mask_solution,
        [(upper_triangular_mask, "transpose"), (float_mask, "boolean")],
    ),
    (
        exercises.check_split_heads,
        split_heads_solution,
        [(split_heads_without_transpose, "Heads that differ"), (split_heads_strided, "Heads that differ")],
    ),
    (
        exercises.check_parameter_count,
        parameter_count_solution,
        [(parameter_count_per_head_matrices_only, "the layer has 288"), (parameter_count_as_float, "whole number")],
    ),
    (
        exercises.check_head_contributions,
        head_contributions_solution,
        [(head_contributions_with_wrong_rows, "heads that match: [0]")],
    ),
]


@pytest.mark.parametrize("check, solution", [(c, s) for c, s, _ in CASES], ids=lambda f: f.__name__)
def test_check_passes_the_solution(check, solution):
    result = check(solution)
    assert result.passed and bool(result)
    assert result.message.startswith("✓")


@pytest.mark.parametrize(
    "check, wrong, expected_words",
    [(c, w, m) for c, _, wrongs in CASES for w, m in wrongs],
    ids=lambda f: getattr(f, "__name__", ""),
)
def test_check_fails_a_wrong_answer_and_says_why(check, wrong, expected_words):
    result = check(wrong)
    assert not result.passed and not bool(result)
    assert result.message.startswith("✗")
    assert expected_words in result.message, result.message


def test_check_explains_a_crash_and_a_non_function():
    crashing = exercises.check_softmax(lambda scores: scores.nonexistent)
    assert not crashing and "raised AttributeError on case 1 (a (3, 5) matrix" in crashing.message
    assert "pass the function itself" in exercises.check_softmax(softmax_solution(np.zeros(3))).message


def test_a_single_number_is_compared_and_explained():
    from mha.exercises.checking import describe_difference
    assert describe_difference("the score", np.float64(0.5), np.float64(0.5)) is None
    assert "got 0.4" in describe_difference("the score", 0.4, np.float64(0.5))


# --- the classic slips of chapter 1, each named with its fix ---------------------------------------

def attention_with(divide_by=None, axis=-1, mask_after=False):
    """The learner's attention with one slip: another scale (``divide_by(d_k)``), another softmax axis, or the mask
    applied after the softmax."""
    def my_attention(q, k, v, mask=None):
        scores = q @ k.T / (np.sqrt(q.shape[-1]) if divide_by is None else divide_by(q.shape[-1]))
        if mask is not None and not mask_after:
            scores = np.where(mask, scores, -np.inf)
        shifted = np.exp(scores - scores.max(axis=axis, keepdims=True))
        weights = shifted / shifted.sum(axis=axis, keepdims=True)
        if mask is not None and mask_after:
            weights = weights * mask
        return weights @ v, weights
    return my_attention


def softmax_over_everything(scores):
    exps = np.exp(scores - scores.max())
    return exps / exps.sum()


def strict_causal_mask(n):
    return np.tril(np.ones((n, n), dtype=bool), k=-1)


def parameter_count_per_head(d_model, n_heads, bias=True):
    return n_heads * parameter_count_solution(d_model, n_heads, bias)


def parameter_count_without_biases(d_model, n_heads, bias=True):
    return 4 * d_model * d_model


def head_contributions_interleaved(z, W_O):
    batch, n_heads, seq, d_head = z.shape
    return np.stack([z[:, h] @ W_O[h::n_heads] for h in range(n_heads)], axis=1)


SLIPS = [  # (check, the learner's function with the slip, words its feedback must contain)
    (exercises.check_attention, attention_with(divide_by=lambda d_k: 1.0), ["without the scale", "√d_k",
                                                                             "np.sqrt(d_k)"]),
    (exercises.check_attention, attention_with(divide_by=lambda d_k: d_k), ["divided the scores by d_k",
                                                                             "square root"]),
    (exercises.check_attention, attention_with(axis=0), ["over the queries", "axis -1", "each query's weights"]),
    (exercises.check_attention, attention_with(mask_after=True), ["after the softmax", "-inf before"]),
    (exercises.check_softmax, softmax_over_wrong_axis, ["along axis 0 instead of the last axis"]),
    (exercises.check_softmax, softmax_over_everything, ["whole array sums to 1"]),
    (exercises.check_softmax, naive_softmax, ["exp overflowed", "Subtract each row's largest score"]),
    (exercises.check_split_heads, split_heads_without_transpose, ["without moving an axis", "memory order",
                                                                  "swap the seq and heads axes"]),
    (exercises.check_split_heads, split_heads_strided, ["every n_heads-th feature", "(heads, d_head)"]),
    (exercises.check_causal_mask, strict_causal_mask, ["attend to itself", "keep the diagonal"]),
    (exercises.check_parameter_count, parameter_count_per_head, ["does not grow with n_heads"]),
    (exercises.check_parameter_count, parameter_count_without_biases, ["Add the biases"]),
    (exercises.check_parameter_count, parameter_count_per_head_matrices_only, ["output projection W_O's matrix"]),
    (exercises.check_head_contributions, head_contributions_interleaved, ["rows h, h + heads"]),
]


@pytest.mark.parametrize("check, slip, words", SLIPS, ids=lambda f: getattr(f, "__name__", ""))
def test_a_classic_slip_is_named_on_the_first_case_with_its_fix(check, slip, words):
    result = check(slip)
    first = {"after the softmax": "✗ Case 2 (", "exp overflowed": "✗ Case 4 ("}.get(words[0], "✗ Case 1 (")  # the
    # first case with a mask is the second, the first with scores in the thousands the fourth
    assert not result and result.message.startswith(first), result.message
    for word in words:
        assert word in result.message, f"{word!r} missing from: {result.message}"


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_the_slips_are_not_named_for_the_reference_and_their_answers_differ_from_it(seed):
    for check, solution, _ in CASES:
        assert check(solution, seed=seed).passed
    for check, slip, _ in SLIPS:
        assert not check(slip, seed=seed)


def transposed(function):
    """The learner's function, with its answer's last two axes swapped (the weights, for attention)."""
    def learner_function(*args, **kwargs):
        answer = function(*args, **kwargs)
        if isinstance(answer, tuple):
            return answer[0], np.swapaxes(answer[1], -1, -2)
        return np.swapaxes(answer, -1, -2)
    return learner_function


@pytest.mark.parametrize("check, solution", [(c, s) for c, s, _ in CASES if c is not exercises.check_parameter_count],
                         ids=lambda f: f.__name__)
def test_an_answer_with_its_last_two_axes_swapped_fails_the_first_case(check, solution):
    result = check(transposed(solution))
    assert not result and result.message.startswith("✗ Case 1 ("), result.message


# --- a name that is not defined, a cell that does not parse -----------------------------------------

def test_a_name_that_is_not_defined_is_reported_as_that_with_the_spelling_it_may_mean():
    def my_softmax(scores):
        shifted = scores - scores.max(axis=-1, keepdims=True)
        return np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True) + sifted * 0  # noqa: F821

    result = exercises.check_softmax(my_softmax)
    assert not result and result.message.startswith("✗ `sifted` is not defined (did you mean `shifted`?)"), (
        result.message
    )
    assert "Fix the spelling, or run the cell that defines it" in result.message and "line " in result.message

    def my_attention(q, k, v, mask=None):
        return helper_defined_in_another_cell(q, k, v)  # noqa: F821

    result = exercises.check_attention(my_attention)
    assert result.message.startswith("✗ `helper_defined_in_another_cell` is not defined: run the cell that defines it")
    assert "raised NameError" not in result.message


def test_a_module_not_imported_yet_points_to_the_cell_that_imports_it():
    fresh_kernel = {}  # a cell run before the notebook's imports
    exec("def my_causal_mask(n):\n    return np.tril(np.ones((n, n), dtype=bool))\n", fresh_kernel)
    result = exercises.check_causal_mask(fresh_kernel["my_causal_mask"])
    assert result.message.startswith("✗ `np` is not defined: run the cell that imports it (`import numpy as np`"), \
        result.message


def test_a_local_used_before_it_is_set_is_not_called_undefined():
    def my_causal_mask(n):
        if n < 0:
            mask = None
        return mask

    result = exercises.check_causal_mask(my_causal_mask)
    assert not result and "raised UnboundLocalError" in result.message and "not defined:" not in result.message


def test_a_newer_cell_that_does_not_parse_is_reported_as_a_syntax_error_in_a_kernel(tmp_path, monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path))
    monkeypatch.setitem(sys.modules, "__main__", sys.modules["__main__"])  # the shell replaces it; put it back after
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    try:
        shell.run_cell("import numpy as np\nfrom mha.exercises import check_softmax\n"
                       "def my_softmax(scores):\n    raise NotImplementedError", store_history=True)
        shell.run_cell("def my_softmax(scores)\n    e = np.exp(scores - scores.max(axis=-1, keepdims=True))\n"
                       "    return e / e.sum(axis=-1, keepdims=True)", store_history=True)
        shell.run_cell("result = check_softmax(my_softmax)", store_history=True)
        message = shell.user_ns["result"].message
        assert message.startswith("✗ Your cell has a syntax error at line 1 (`def my_softmax(scores)`): "
                                  "expected ':'"), message
        assert "Not attempted" not in message
        shell.run_cell("def my_softmax(scores):\n    e = np.exp(scores - scores.max(axis=-1, keepdims=True))\n"
                       "    return e / e.sum(axis=-1, keepdims=True)\n\nresult = check_softmax(my_softmax)",
                       store_history=True)
        assert shell.user_ns["result"].passed, shell.user_ns["result"].message
    finally:
        InteractiveShell.clear_instance()


# --- more named slips of 1.1 and 1.2, on the public case and hidden seeds -----------------------------

def attention_with_inverted_mask(blocked=-np.inf):
    """The learner's attention with True read as blocked (``blocked``: -inf, or a large finite negative)."""
    def my_attention(q, k, v, mask=None):
        scores = q @ k.T / np.sqrt(q.shape[-1])
        if mask is not None:
            scores = np.where(mask, blocked, scores)
        with np.errstate(invalid="ignore"):
            weights = softmax_solution(scores)
        return weights @ v, weights
    return my_attention


def attention_scaled_by_key_length(q, k, v, mask=None):
    scores = q @ k.T / np.sqrt(k.shape[0])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax_solution(scores)
    return weights @ v, weights


def head_contributions_with_W_O_transposed(z, W_O):
    batch, n_heads, seq, d_head = z.shape
    return np.einsum("bhsd,hdm->bhsm", z, W_O.T.reshape(n_heads, d_head, -1))


@pytest.mark.parametrize("check, slip, words", [
    (exercises.check_attention, attention_with_inverted_mask(), ["✗ Case 2 (", "The mask is inverted",
                                                                 "True means the query MAY attend"]),
    (exercises.check_attention, attention_with_inverted_mask(-1e9), ["✗ Case 2 (", "The mask is inverted"]),
    (exercises.check_attention, attention_scaled_by_key_length, ["✗ Case 1 (", "number of keys (seq_k)"]),
    (exercises.check_head_contributions, head_contributions_with_W_O_transposed, ["✗ Case 1 (", "You used W_O.T"]),
], ids=["inverted mask", "inverted mask, finite", "sqrt(seq_k)", "W_O.T"])
def test_more_slips_of_chapter_1_are_named_on_hidden_seeds_too(check, slip, words):
    assert_slip_named(check, slip, words, seeds=(0, 1, 7))


def test_an_inverted_mask_is_not_sent_hunting_for_an_overflow():
    message = exercises.check_attention(attention_with_inverted_mask()).message
    assert "NaN or infinity" in message and "overflow" not in message, message


@pytest.mark.parametrize("check, solution", [(c, s) for c, s, _ in CASES], ids=lambda f: f.__name__)
def test_the_key_passes_on_several_seeds_and_a_stub_is_not_attempted(check, solution):
    assert_key_passes_and_stub_fails(check, solution)
