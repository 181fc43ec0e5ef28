"""Fuzzing the public functions of mha.core.attention, mha.core.attention_numpy and mha.core.masks.

Hypothesis draws shapes (sometimes wrong), dtypes (float16/32/64, int, bool),
containers (tensor, numpy array, nested list), NaN and inf, and masks of any
shape and dtype. Every call must end one of two ways:

* it raises :class:`mha.core.validation.InputError` -- the package's own error, a
  ``ValueError`` whose message says what to fix -- and nothing else; or
* it returns a result that equals an independent float64 reference and obeys
  the invariants (weights >= 0, rows sum to 1, blocked keys get weight 0).
  A result holding NaN or inf must come with a NonFiniteWarning, and no other
  warning may escape (no numpy RuntimeWarning, no torch UserWarning).

A well-formed problem must never be refused.
"""

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import mha
from mha.core import attention_numpy
from mha.core.attention import MultiHeadAttention, head_contributions, merge_heads, split_heads
from mha.core.validation import InputError, NonFiniteWarning, check_head_count

FUZZ = settings(max_examples=120, deadline=None, derandomize=True)
DTYPES = ["float16", "float32", "float32", "float64", "float64", "int64", "bool"]  # about 1 input in 7 is refused
CONTAINERS = ["tensor", "numpy", "list"]
TOLERANCE = {torch.float16: 2e-2, torch.float32: 1e-5, torch.float64: 1e-10,
             np.dtype(np.float16): 2e-2, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-10}
WHOLE_HEAD_COUNTS = [1, 2, 3, np.int64(2), np.int32(4)]
HEAD_COUNTS = WHOLE_HEAD_COUNTS + [True, np.bool_(True), 2.0, 2.5, 0, -1, "2", None]
head_counts = st.one_of(st.sampled_from(WHOLE_HEAD_COUNTS), st.sampled_from(HEAD_COUNTS))


def outcome(call):
    """Run ``call``; return ``(result, error, warned)``: its result or InputError, and whether it warned NonFinite.

    Any other exception, or any other warning, fails the test.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result, error = call(), None
        except InputError as refused:
            assert str(refused).endswith(".") and len(str(refused)) > 30, f"unhelpful message: {refused}"
            result, error = None, refused
    others = [f"{w.category.__name__}: {w.message}" for w in caught if not issubclass(w.category, NonFiniteWarning)]
    assert not others, others
    return result, error, len(caught) > 0


def as_numpy(x) -> np.ndarray:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


@st.composite
def arrays(draw, shape, dtype=None, container=None, special=True):
    """An input of ``shape``: values k/2 (exact in every float dtype), maybe a NaN or inf, in some container."""
    dtype = dtype or draw(st.sampled_from(DTYPES))
    container = container or draw(st.sampled_from(CONTAINERS))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = np.asarray(rng.integers(-4, 5, size=shape) / 2)
    if dtype.startswith("float") and values.size and special and draw(st.integers(0, 5)) == 0:
        values.flat[draw(st.integers(0, values.size - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    array = np.asarray(values > 0) if dtype == "bool" else values.astype(dtype)
    if container == "tensor":
        return torch.from_numpy(array)
    return array.tolist() if container == "list" else array


@st.composite
def shapes_near(draw, shape, wrong):
    """``shape``, or (when ``wrong``) ``shape`` with an axis dropped, added, or resized (possibly to 0)."""
    shape = list(shape)
    if wrong:
        change = draw(st.sampled_from(["drop", "add", "resize"]))
        axis = draw(st.integers(0, len(shape) - 1))
        if change == "drop":
            del shape[axis]
        elif change == "add":
            shape.insert(axis, draw(st.integers(1, 3)))
        else:
            shape[axis] = draw(st.integers(0, 4).filter(lambda n: n != shape[axis]))
    return tuple(shape)


@st.composite
def masks(draw, shape):
    """``(mask, well_formed)``: None, a usable boolean mask for scores of ``shape``, or one of wrong shape or dtype."""
    kind = draw(st.sampled_from(["none", "good", "good", "good", "wrong shape", "wrong dtype", "empty row"]))
    if kind == "none":
        return None, True
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    mask_shape = shape[-2:] if draw(st.booleans()) else shape
    if kind == "wrong shape":
        mask_shape = draw(shapes_near(mask_shape, wrong=True))
    mask = rng.random(mask_shape) < 0.6
    if kind in ("good", "wrong dtype") and mask.size:
        mask[..., 0] |= ~mask.any(-1)  # every query keeps a key
    elif kind == "empty row" and mask.size:
        mask.reshape(-1, mask.shape[-1])[0] = False
    if kind == "wrong dtype":
        mask = mask.astype(draw(st.sampled_from(["int64", "float32", "uint8"])))
    container = draw(st.sampled_from(CONTAINERS))
    mask = torch.from_numpy(mask) if container == "tensor" else mask.tolist() if container == "list" else mask
    return mask, kind == "good"


def reference_attention(q, k, v, mask):
    """softmax(q kᵀ / sqrt(d_k)) v in float64 numpy, written independently of the package."""
    q, k, v = (as_numpy(a).astype(np.float64) for a in (q, k, v))
    scores = np.einsum("...qd,...kd->...qk", q, k) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(as_numpy(mask), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return np.einsum("...qk,...kd->...qd", weights, v), weights


def check_weights(weights, mask, tolerance):
    """Weights are >= 0, each row sums to 1, and blocked keys get exactly 0."""
    weights = as_numpy(weights).astype(np.float64)
    assert (weights >= 0).all()
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=tolerance * weights.shape[-1] + 1e-12)
    if mask is not None:
        assert (np.broadcast_to(weights, weights.shape) * ~np.broadcast_to(as_numpy(mask), weights.shape) == 0).all()


def finite_or_warned(result, warned) -> bool:
    """Whether ``result`` (a tuple of arrays) is finite; if it is not, it must have come with a NonFiniteWarning."""
    if not all(np.isfinite(as_numpy(r).astype(np.float64)).all() for r in result):
        assert warned, "NaN or inf in the result without a NonFiniteWarning"
        return False
    return True


@st.composite
def attention_problems(draw):
    """q, k, v and a mask for scaled_dot_product_attention, and whether the problem is well formed."""
    lead = tuple(draw(st.lists(st.integers(1, 2), max_size=2)))
    seq_q, seq_k, d_k, d_v = (draw(st.integers(1, 3)) for _ in range(4))
    wrong = [draw(st.integers(0, 7)) == 0 for _ in range(3)]
    shapes = [draw(shapes_near(lead + s, w))
              for s, w in zip(((seq_q, d_k), (seq_k, d_k), (seq_k, d_v)), wrong, strict=True)]
    q, k, v = (draw(arrays(shape)) for shape in shapes)
    mask, mask_ok = draw(masks(lead + (seq_q, seq_k)))
    well_formed = mask_ok and not any(wrong) and not any(as_numpy(a).dtype == bool for a in (q, k, v))
    return q, k, v, mask, well_formed


@FUZZ
@given(attention_problems(), st.sampled_from(["torch", "numpy"]))
@pytest.mark.slow
def test_attention_functions_work_or_raise_input_error(problem, flavour):
    q, k, v, mask, well_formed = problem
    attention = mha.scaled_dot_product_attention if flavour == "torch" else attention_numpy.scaled_dot_product_attention
    result, error, warned = outcome(lambda: attention(q, k, v, mask))
    if error is not None:
        assert not well_formed, f"a well-formed problem was refused: {error}"
        return
    output, weights = result
    assert isinstance(output, torch.Tensor if flavour == "torch" else np.ndarray)
    assert output.dtype == weights.dtype and output.dtype in TOLERANCE
    if finite_or_warned(result, warned):
        tolerance = TOLERANCE[output.dtype]
        expected_output, expected_weights = reference_attention(q, k, v, mask)
        np.testing.assert_allclose(as_numpy(weights).astype(np.float64), expected_weights, atol=tolerance, rtol=0)
        np.testing.assert_allclose(as_numpy(output).astype(np.float64), expected_output, atol=4 * tolerance, rtol=0)
        check_weights(weights, mask, tolerance)


@st.composite
def module_problems(draw):
    """A layer, its inputs (self- or cross-attention), a mask and a head mask, and whether all is well formed."""
    n_heads, d_head = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    layer = MultiHeadAttention(n_heads * d_head, n_heads, seed=draw(st.integers(0, 9)),
                               dtype=draw(st.sampled_from([torch.float32, torch.float64])))
    batch, seq_q, seq_k = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    cross = draw(st.booleans())
    wrong = [draw(st.integers(0, 7)) == 0 for _ in range(1 + cross)]
    query = draw(arrays(draw(shapes_near((batch, seq_q, layer.d_model), wrong[0]))))
    key = draw(arrays(draw(shapes_near((batch, seq_k, layer.d_model), wrong[-1])))) if cross else None
    mask, mask_ok = draw(masks((batch, seq_q, seq_k if cross else seq_q)))
    head_mask = draw(st.sampled_from([None, [1.0] * n_heads, np.ones((batch, n_heads), bool), [0.0] * (n_heads + 1)]))
    head_mask_ok = head_mask is None or np.shape(head_mask) in ((n_heads,), (batch, n_heads))
    no_booleans = not any(as_numpy(x).dtype == bool for x in (query, key) if x is not None)
    return layer, query, key, mask, head_mask, mask_ok and head_mask_ok and no_booleans and not any(wrong)


@FUZZ
@given(module_problems())
@pytest.mark.slow
def test_multi_head_attention_works_or_raises_input_error(problem):
    layer, query, key, mask, head_mask, well_formed = problem
    result, error, warned = outcome(lambda: layer(query, key, mask=mask, head_mask=head_mask))
    if error is not None:
        assert not well_formed, f"a well-formed problem was refused: {error}"
        return
    assert result.output.dtype == result.weights.dtype == layer.W_Q.dtype
    assert result.output.shape == (*as_numpy(query).shape[:2], layer.d_model)
    if finite_or_warned(result, warned):
        reference = MultiHeadAttention(layer.d_model, layer.n_heads, dtype=torch.float64)
        reference.load_state_dict({name: p.double() for name, p in layer.state_dict().items()})

        def as_float64(x):
            return None if x is None else torch.from_numpy(as_numpy(x).astype(np.float64))

        expected = reference(as_float64(query), as_float64(key),
                             mask=None if mask is None else torch.from_numpy(as_numpy(mask)), head_mask=head_mask)
        tolerance = TOLERANCE[layer.W_Q.dtype]
        torch.testing.assert_close(result.weights.double(), expected.weights, atol=tolerance, rtol=0)
        torch.testing.assert_close(result.output.double(), expected.output, atol=10 * tolerance, rtol=0)
        check_weights(result.weights, None, tolerance)


@FUZZ
@given(st.data(), head_counts, st.integers(1, 6))
@pytest.mark.slow
def test_split_merge_and_head_contributions_work_or_raise_input_error(data, n_heads, d_model):
    wrong = data.draw(st.integers(0, 4)) == 0
    x = data.draw(arrays(data.draw(shapes_near((2, 3, d_model), wrong)), special=False))
    shape = np.shape(as_numpy(x))
    d_head = None
    if len(shape) == 3:
        d_head, error, _ = outcome(lambda: check_head_count(shape[-1], n_heads))
    split, error, _ = outcome(lambda: split_heads(x, n_heads))
    if error is not None:
        assert d_head is None, f"a well-formed split was refused: {error}"
        return
    assert d_head is not None, f"split_heads accepted x of shape {shape} with n_heads = {n_heads!r}"
    x = torch.as_tensor(as_numpy(x))
    for head in range(shape[-1] // d_head):
        assert torch.equal(split[:, head], x[..., head * d_head:(head + 1) * d_head])
    merged, error, _ = outcome(lambda: merge_heads(split.numpy() if data.draw(st.booleans()) else split))
    assert error is None and torch.equal(merged, x)
    W_O = data.draw(arrays((data.draw(st.sampled_from([shape[-1], shape[-1] + 1])), 3), special=False))
    per_head, error, _ = outcome(lambda: head_contributions(split, W_O))
    if error is not None:
        assert as_numpy(W_O).shape[0] != shape[-1] or bool in (x.dtype, as_numpy(W_O).dtype) or torch.bool == x.dtype
        return
    expected = merge_heads(split).double() @ torch.from_numpy(as_numpy(W_O).astype(np.float64))
    torch.testing.assert_close(per_head.sum(1).double(), expected, atol=TOLERANCE[per_head.dtype] * 10, rtol=0)


@FUZZ
@given(st.data())
@pytest.mark.slow
def test_softmax_and_numpy_multi_head_attention_work_or_raise_input_error(data):
    scores = data.draw(arrays(tuple(data.draw(st.lists(st.integers(0, 3), max_size=3)))))
    axis = data.draw(st.sampled_from([-1, 0, 1, 2, np.int64(-1), 1.0]))
    weights, error, warned = outcome(lambda: attention_numpy.softmax(scores, axis=axis))
    if error is None and finite_or_warned([weights], warned):
        np.testing.assert_allclose(weights.sum(axis=int(axis)), 1.0, atol=TOLERANCE[weights.dtype] * 10)
    n_heads = data.draw(head_counts)
    x = data.draw(arrays(data.draw(shapes_near((1, 2, 4), data.draw(st.integers(0, 7)) == 0))))
    W = [data.draw(arrays(data.draw(st.sampled_from([(4, 4)] * 7 + [(4, 3)])), special=False)) for _ in range(4)]
    mask, _ = data.draw(masks((1, 2, 2)))
    result, error, warned = outcome(lambda: attention_numpy.multi_head_attention(x, *W, n_heads, mask=mask))
    if error is not None or not finite_or_warned(result, warned):
        return
    layer = MultiHeadAttention(4, n_heads, bias=False, dtype=torch.float64)
    with torch.no_grad():
        for mine, theirs in zip((layer.W_Q, layer.W_K, layer.W_V, layer.W_O), W, strict=True):
            mine.copy_(torch.from_numpy(as_numpy(theirs).astype(np.float64)))
    x64 = torch.from_numpy(as_numpy(x).astype(np.float64))
    expected = layer(x64, mask=None if mask is None else torch.from_numpy(as_numpy(mask)))
    tolerance = TOLERANCE[result.output.dtype]
    np.testing.assert_allclose(result.weights, expected.weights.detach().numpy(), atol=tolerance, rtol=0)
    np.testing.assert_allclose(result.output, expected.output.detach().numpy(), atol=20 * tolerance, rtol=0)


@FUZZ
@given(st.sampled_from([3, np.int64(2), 0, -1, 2.0, True, "3", None]),
       st.lists(st.one_of(st.integers(1, 3), st.sampled_from([0, 2.5, True])), max_size=3),
       st.sampled_from(CONTAINERS), st.sampled_from([None, 3, 1, np.int32(4), 3.0]))
@pytest.mark.slow
def test_mask_builders_work_or_raise_input_error(seq_len, lengths, container, padded_to):
    causal, error, _ = outcome(lambda: mha.causal_mask(seq_len))
    if error is None:
        n = int(seq_len)
        assert torch.equal(causal, torch.tensor([[j <= i for j in range(n)] for i in range(n)]))
    lengths = np.array(lengths) if container == "numpy" else torch.tensor(lengths) if container == "tensor" else lengths
    padding, error, _ = outcome(lambda: mha.padding_mask(lengths, padded_to))
    if error is None:
        given = [int(n) for n in as_numpy(lengths)]
        width = max(given) if padded_to is None else int(padded_to)
        assert padding.tolist() == [[[j < n for j in range(width)]] for n in given]


@pytest.mark.parametrize("n_heads", HEAD_COUNTS)
def test_head_counts_are_whole_numbers_of_at_least_one(n_heads):
    _, error, _ = outcome(lambda: MultiHeadAttention(12, n_heads))
    is_whole = isinstance(n_heads, (int, np.integer)) and not isinstance(n_heads, (bool, np.bool_))
    assert (error is None) == (is_whole and n_heads > 0 and 12 % n_heads == 0)
