"""Bad input gets an InputError (a ValueError) that names the problem and the fix; NaN gets a warning."""

import warnings

import numpy as np
import pytest
import torch

import mha
from mha.core import attention_numpy
from mha.core.attention import MultiHeadAttention, head_contributions, merge_heads, split_heads
from mha.core.validation import InputError, NonFiniteWarning, head_counts_that_divide


def test_head_count_that_does_not_divide_lists_the_ones_that_do():
    with pytest.raises(ValueError, match=r"d_model = 384 is not divisible by n_heads = 5") as error:
        MultiHeadAttention(384, 5)
    assert "1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 384" in str(error.value)
    assert head_counts_that_divide(12) == [1, 2, 3, 4, 6, 12]


@pytest.mark.parametrize("n_heads", [0, -2, 2.0, True, "4"])
def test_head_count_must_be_a_positive_whole_number(n_heads):
    with pytest.raises(ValueError, match="n_heads must be"):
        MultiHeadAttention(8, n_heads)


def test_split_heads_reports_the_divisibility_problem():
    with pytest.raises(ValueError, match="not divisible"):
        split_heads(torch.zeros(1, 2, 10), 3)


def test_input_with_the_wrong_width_names_both_sizes():
    layer = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"query has shape \(1, 3, 6\).*d_model = 8"):
        layer(torch.zeros(1, 3, 6))
    with pytest.raises(ValueError, match=r"query has shape \(3, 8\).*\(batch, seq, d_model\)"):
        layer(torch.zeros(3, 8))


def test_key_and_value_lengths_must_match():
    layer = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"key has shape \(1, 4, 8\) but value has shape \(1, 5, 8\)"):
        layer(torch.zeros(1, 3, 8), torch.zeros(1, 4, 8), torch.zeros(1, 5, 8))


def test_query_and_key_sizes_must_match_in_the_plain_function():
    with pytest.raises(ValueError, match=r"k has shape \(3, 5\).*d_k.*= 4"):
        mha.scaled_dot_product_attention(torch.zeros(2, 4), torch.zeros(3, 5), torch.zeros(3, 5))
    with pytest.raises(ValueError, match=r"k has shape \(3, 4\) and v has shape \(2, 4\)"):
        attention_numpy.scaled_dot_product_attention(np.zeros((2, 4)), np.zeros((3, 4)), np.zeros((2, 4)))


def test_mask_must_be_boolean():
    with pytest.raises(ValueError, match=r"dtype torch.float32.*mask.bool\(\)"):
        mha.scaled_dot_product_attention(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(3, 4), torch.ones(3, 3))
    with pytest.raises(ValueError, match=r"dtype int64.*astype\(bool\)"):
        attention_numpy.scaled_dot_product_attention(np.zeros((3, 4)), np.zeros((3, 4)), np.zeros((3, 4)),
                                                     np.ones((3, 3), dtype=np.int64))


def test_mask_of_the_wrong_shape_gives_both_shapes():
    with pytest.raises(ValueError, match=r"mask has shape \(4, 4\).*\(3, 3\)"):
        mha.scaled_dot_product_attention(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(3, 4), mha.causal_mask(4))


def test_fully_masked_query_is_reported_instead_of_returning_nan():
    mask = mha.causal_mask(3).clone()
    mask[1] = False
    with pytest.raises(ValueError, match=r"blocks every key for the query at mask index \(1,\).*NaN"):
        mha.scaled_dot_product_attention(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(3, 4), mask)
    with pytest.raises(ValueError, match="NaN"):
        attention_numpy.scaled_dot_product_attention(np.zeros((3, 4)), np.zeros((3, 4)), np.zeros((3, 4)), mask.numpy())


def test_padding_mask_rejects_empty_sequences_and_short_seq_len():
    with pytest.raises(ValueError, match="at least one real token"):
        mha.padding_mask([3, 0])
    with pytest.raises(ValueError, match="seq_len = 2 is shorter than the longest sequence"):
        mha.padding_mask([3, 1], seq_len=2)
    assert mha.padding_mask([2, 3]).tolist() == [[[True, True, False]], [[True, True, True]]]


def test_head_mask_and_override_shapes_are_checked():
    layer = MultiHeadAttention(8, 2)
    x = torch.zeros(1, 3, 8)
    with pytest.raises(ValueError, match=r"head_mask has shape \(3,\).*\(2,\)"):
        layer(x, head_mask=torch.ones(3))
    with pytest.raises(ValueError, match="attention_override"):
        layer(x, attention_override=lambda w: w[..., :2])
    with pytest.raises(ValueError, match="head must be in 0..1"):
        layer.head_weights(2)


def test_head_contributions_checks_w_o_rows():
    with pytest.raises(ValueError, match=r"W_O has shape \(6, 8\).*need 8 rows"):
        head_contributions(torch.zeros(1, 2, 3, 4), torch.zeros(6, 8))


# bad input never escapes as a raw torch error or a silent NaN


def test_errors_are_input_errors_and_still_value_errors():
    assert issubclass(InputError, ValueError)
    with pytest.raises(InputError, match="not divisible"):
        MultiHeadAttention(6, 4)


@pytest.mark.parametrize("convert", [lambda x: x.double(), lambda x: x.half(), lambda x: x.numpy(),
                                     lambda x: x.double().numpy(), lambda x: x.tolist()],
                         ids=["float64", "float16", "numpy", "numpy float64", "list"])
def test_layer_computes_in_its_own_dtype_whatever_the_input_container(convert):
    layer = MultiHeadAttention(8, 2, seed=1)
    x = (torch.arange(48, dtype=torch.float32).view(2, 3, 8) % 5) / 4  # exact in float16
    result = layer(convert(x))
    assert result.output.dtype == torch.float32 and isinstance(result.output, torch.Tensor)
    torch.testing.assert_close(result.output, layer(x).output)


def test_float64_input_keeps_its_gradient_through_a_float32_layer():
    x = torch.randn(1, 3, 8, dtype=torch.float64, requires_grad=True)
    MultiHeadAttention(8, 2)(x).output.sum().backward()
    assert x.grad is not None and x.grad.dtype == torch.float64


def test_integer_input_is_read_as_numbers_and_boolean_input_is_refused():
    layer = MultiHeadAttention(4, 2)
    ints = torch.tensor([[[1, 0, 0, 1], [0, 2, 1, 0]]])
    torch.testing.assert_close(layer(ints).output, layer(ints.float()).output)
    with pytest.raises(InputError, match=r"query has dtype torch.bool.*mask=.*query.float\(\)"):
        layer(ints > 0)
    with pytest.raises(InputError, match=r"q has dtype bool.*q.astype\(float\)"):
        attention_numpy.scaled_dot_product_attention(np.ones((2, 2), bool), np.ones((2, 2)), np.ones((2, 2)))


def test_torch_function_computes_in_the_widest_float_given():
    q = torch.ones(2, 4, dtype=torch.float16)
    output, weights = mha.scaled_dot_product_attention(q, np.ones((3, 4)), [[1, 2, 3, 4]] * 3)
    assert output.dtype == weights.dtype == torch.float64
    assert mha.scaled_dot_product_attention([[1, 0]], [[1, 0]], [[1, 0]])[0].dtype == torch.get_default_dtype()


def test_numpy_and_list_masks_are_accepted_everywhere():
    layer = MultiHeadAttention(8, 2, seed=0)
    x = torch.randn(1, 3, 8, generator=torch.Generator().manual_seed(0))
    expected = layer(x, mask=mha.causal_mask(3)).weights
    expected_plain = mha.scaled_dot_product_attention(x, x, x, mha.causal_mask(3))[1]
    for mask in (np.tril(np.ones((3, 3), dtype=bool)), np.tril(np.ones((3, 3), dtype=bool)).tolist()):
        torch.testing.assert_close(layer(x, mask=mask).weights, expected)
        torch.testing.assert_close(mha.scaled_dot_product_attention(x, x, x, mask)[1], expected_plain)
        _, numpy_weights = attention_numpy.scaled_dot_product_attention(x.numpy(), x.numpy(), x.numpy(), mask)
        np.testing.assert_allclose(numpy_weights, expected_plain.numpy(), atol=1e-6)
    with pytest.raises(InputError, match=r"mask has dtype float64.*astype\(bool\)"):
        layer(x, mask=np.ones((3, 3)))


def test_query_and_key_batches_must_match():
    layer = MultiHeadAttention(8, 2)
    with pytest.raises(InputError, match=r"query has shape \(2, 3, 8\) but key has shape \(3, 4, 8\).*same batch size"):
        layer(torch.zeros(2, 3, 8), torch.zeros(3, 4, 8))
    with pytest.raises(InputError, match=r"leading axes.*equal or 1"):
        mha.scaled_dot_product_attention(torch.zeros(2, 3, 4), torch.zeros(3, 5, 4), torch.zeros(3, 5, 4))


def test_keys_and_values_need_a_positions_axis():
    with pytest.raises(InputError, match=r"k has shape \(4,\) \(1 dimensions\).*\(\.\.\., seq_k, d_k\)"):
        mha.scaled_dot_product_attention(torch.zeros(3, 4), torch.zeros(4), torch.zeros(4))
    with pytest.raises(InputError, match=r"v has shape \(2,\)"):
        attention_numpy.scaled_dot_product_attention(np.zeros((3, 4)), np.zeros((2, 4)), np.zeros(2))


def test_split_and_merge_heads_name_the_axes_they_need():
    with pytest.raises(InputError, match=r"x has shape \(3, 8\).*\(batch, seq, d_model\).*x\[None\]"):
        split_heads(torch.zeros(3, 8), 2)
    with pytest.raises(InputError, match=r"z has shape \(3, 8\).*\(batch, heads, seq, d_head\)"):
        merge_heads(torch.zeros(3, 8))
    x = np.arange(12.0).reshape(1, 2, 6)[:, ::-1]  # numpy, reversed: still split correctly
    assert torch.equal(merge_heads(split_heads(x, np.int64(3))), torch.from_numpy(x.copy()))


@pytest.mark.parametrize("call", [
    lambda: MultiHeadAttention(8, 2)(torch.zeros(1, 0, 8)),
    lambda: MultiHeadAttention(8, 2)(torch.zeros(1, 3, 8), torch.zeros(1, 0, 8)),
    lambda: mha.scaled_dot_product_attention(torch.zeros(0, 4), torch.zeros(3, 4), torch.zeros(3, 4)),
    lambda: mha.scaled_dot_product_attention(torch.zeros(2, 4), torch.zeros(0, 4), torch.zeros(0, 4)),
    lambda: attention_numpy.scaled_dot_product_attention(np.zeros((2, 4)), np.zeros((0, 4)), np.zeros((0, 4))),
    lambda: attention_numpy.multi_head_attention(np.zeros((1, 0, 4)), *[np.eye(4)] * 4, 2),
], ids=["module queries", "module keys", "torch queries", "torch keys", "numpy keys", "numpy multi-head"])
def test_empty_sequences_are_an_error_not_an_empty_or_zero_result(call):
    with pytest.raises(InputError, match=r"there are no (queries|keys|positions).*drop empty sequences"):
        call()


def test_vectors_without_features_are_an_error_not_nan():
    with pytest.raises(InputError, match=r"d_k = 0"):
        attention_numpy.scaled_dot_product_attention(np.zeros((2, 0)), np.zeros((2, 0)), np.zeros((2, 3)))


@pytest.mark.parametrize("n_heads", [np.int64(4), np.int32(4), np.arange(5)[4], 4])
def test_any_whole_number_is_a_head_count(n_heads):
    layer = MultiHeadAttention(np.int64(8), n_heads)
    assert type(layer.n_heads) is int and layer.n_heads == 4 and layer.d_head == 2
    assert split_heads(torch.zeros(1, 2, 8), n_heads).shape == (1, 4, 2, 2)
    assert attention_numpy.multi_head_attention(np.ones((1, 2, 8)), *[np.eye(8)] * 4, n_heads).weights.shape == (
        1,
        4,
        2,
        2,
    )


@pytest.mark.parametrize("n_heads, message", [(np.bool_(True), "whole number"), (2.5, "whole number"),
                                              (np.float64(2.0), r"whole number.*int\(2.0\)"), (0, "at least 1"),
                                              (np.int64(-4), "at least 1"), (None, "whole number")])
def test_head_count_refusals_say_why(n_heads, message):
    with pytest.raises(InputError, match=f"n_heads must be.*{message}" if "whole" in message else message):
        MultiHeadAttention(8, n_heads)


def test_other_counts_follow_the_same_rule():
    assert MultiHeadAttention(8, 2).head_weights(np.int64(1)).W_Q.shape == (8, 4)
    assert torch.equal(MultiHeadAttention(8, 2, seed=np.int64(3)).W_Q, MultiHeadAttention(8, 2, seed=3).W_Q)
    assert mha.causal_mask(np.int64(3)).shape == (3, 3)
    for call, message in (
        (lambda: MultiHeadAttention(8, 2).head_weights(0.5), "head must be a whole number"),
        (lambda: MultiHeadAttention(8, 2, seed=1.5), "seed must be a whole number"),
        (lambda: MultiHeadAttention(8, 2, dtype=torch.int64), "floating-point torch dtype"),
        (lambda: mha.causal_mask(3.0), r"seq_len must be a whole number.*int\(3.0\)"),
        (lambda: mha.padding_mask([2.5, 1]), "whole number of tokens"),
        (lambda: mha.padding_mask([2, 1], seq_len=2.0), "seq_len must be a whole number"),
        (lambda: MultiHeadAttention.from_torch(MultiHeadAttention(8, 2)), "torch.nn.MultiheadAttention"),
    ):
        with pytest.raises(InputError, match=message):
            call()


def test_unreadable_inputs_say_what_to_pass():
    with pytest.raises(InputError, match="rows all have the same length"):
        mha.scaled_dot_product_attention([[1.0, 2.0], [3.0]], [[1.0, 2.0]], [[1.0, 2.0]])
    with pytest.raises(InputError, match="q holds <U"):
        attention_numpy.scaled_dot_product_attention("abc", [[1.0]], [[1.0]])
    with pytest.raises(InputError, match=r"biases should be \(b_Q, b_K, b_V, b_O\)"):
        attention_numpy.multi_head_attention(np.ones((1, 2, 4)), *[np.eye(4)] * 4, 2, biases=(0.0, 0.0))
    with pytest.raises(InputError, match=r"axis = 2 does not exist.*from -2 to 1"):
        attention_numpy.softmax(np.zeros((2, 3)), axis=2)


def _non_finite_warnings(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in caught if issubclass(w.category, NonFiniteWarning)]


def test_nan_input_warns_naming_the_input_it_came_from():
    layer = MultiHeadAttention(8, 2)
    x = torch.randn(1, 3, 8)
    bad = x.clone()
    bad[0, 1, 2] = float("nan")
    result, messages = _non_finite_warnings(lambda: layer(bad))
    assert result.output.isnan().all()  # one NaN token reaches every query through softmax
    assert len(messages) == 1 and "because query holds NaN or inf" in messages[0]
    _, messages = _non_finite_warnings(lambda: layer(x, bad, x))
    assert "because key holds" in messages[0]
    _, messages = _non_finite_warnings(lambda: mha.scaled_dot_product_attention(x, x, bad))
    assert "because v holds" in messages[0]
    _, messages = _non_finite_warnings(lambda: attention_numpy.softmax(np.array([0.0, np.inf])))
    assert messages[0].startswith("softmax(scores) contains NaN or inf because scores holds")


def test_nan_parameters_and_overflow_are_named_too():
    layer = MultiHeadAttention(8, 2)
    with torch.no_grad():
        layer.W_V[0, 0] = float("inf")
    _, messages = _non_finite_warnings(lambda: layer(torch.ones(1, 2, 8)))
    assert "the layer's W_V holds NaN or inf" in messages[0]
    big = torch.full((2, 4), 1e30)
    _, messages = _non_finite_warnings(lambda: mha.scaled_dot_product_attention(big, big, big))
    assert "every input is finite: the scores overflowed torch.float32" in messages[0]


def test_finite_input_gives_no_warning_and_masked_nan_keys_are_harmless():
    x = torch.randn(1, 3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        MultiHeadAttention(4, 2)(x)
        k = x[0].clone()
        k[2] = float("nan")  # a garbage key that no query may see
        output, weights = mha.scaled_dot_product_attention(x[0], k, x[0], mask=[[True, True, False]] * 3)
    assert torch.isfinite(output).all() and (weights[:, 2] == 0).all()


@pytest.mark.parametrize("value, whole", [(3, True), (np.int64(3), True), (np.array(3), True), (torch.tensor(3), True),
                                          (-2, True), (True, False), (np.bool_(False), False), (3.0, False),
                                          (np.float32(3), False), ("3", False), (None, False), (np.array([3]), False)])
def test_is_whole_number_accepts_integers_of_any_kind_and_nothing_else(value, whole):
    from mha.core.validation import is_whole_number
    assert is_whole_number(value) is whole


@pytest.mark.parametrize("value, bounds, message", [
    (5, (0, 4), r"head must be a whole number in 0\.\.4 \(in \(0, 5\)\), got 5\."),
    (-1, (0, None), r"head must be a whole number of at least 0 \(in \(0, 5\)\), got -1\."),
    (9, (None, 8), r"head must be a whole number of at most 8 \(in \(0, 5\)\), got 9\."),
    (2.0, (0, 4), r"got 2\.0 \(float\)\. Use int\(2\.0\) if that is what you meant\."),
    ("2", (0, 4), r"got '2' \(str\)\.$"),
])
def test_check_whole_number_names_the_argument_the_bounds_the_value_and_the_fix(value, bounds, message):
    from mha.core.validation import check_whole_number
    with pytest.raises(InputError, match=message):
        check_whole_number("head", value, *bounds, meaning="in (0, 5)")


def test_check_whole_number_returns_a_plain_int_at_the_bounds():
    from mha.core.validation import check_whole_number
    for value in (0, 4, np.int16(4), torch.tensor(0)):
        checked = check_whole_number("head", value, 0, 4)
        assert type(checked) is int and checked == int(value)


@pytest.mark.parametrize("value, real", [(0.5, True), (2, True), (np.float32(0.5), True), (np.int8(1), True),
                                         (float("inf"), True), (float("nan"), False), (np.nan, False),
                                         (True, False), ("0.5", False), (None, False), (1j, False)])
def test_is_real_number_refuses_flags_nan_and_text(value, real):
    from mha.core.validation import is_real_number
    assert is_real_number(value) is real


def test_as_tensor_copies_a_read_only_array_instead_of_warning():
    """pandas' ``to_numpy`` can hand out a read-only array; torch warns when it wraps one (a stray stderr in a
    notebook's output, and only the first time in a process), so the check copies it."""
    from mha.core.validation import as_tensor

    array = np.arange(6.0).reshape(2, 3)
    array.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensor = as_tensor("x", array)
    assert tensor.tolist() == array.tolist() and not np.shares_memory(tensor.numpy(), array)
