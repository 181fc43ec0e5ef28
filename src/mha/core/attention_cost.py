"""What one multi-head attention layer costs, counted from its shape: operations and bytes, step by step.

Section 3.7 ("One big head or many") asks what more heads cost at a fixed ``d_model``. Counting the steps of
:class:`~mha.core.attention.MultiHeadAttention` answers where the cost can come from before anything is timed:

* the projections (``W_Q``, ``W_K``, ``W_V``, ``W_O``) cost ``2 · batch · n · d_model²`` each, whatever ``h`` is;
* the scores ``Q Kᵀ`` and the weighted sum ``A V`` cost ``2 · batch · h · n² · d_head = 2 · batch · n² · d_model``
  each: ``h`` maps of ``n²`` dot products, each ``d_model / h`` long, so the same total for every ``h``;
* what does grow with ``h`` is the work done once per attention weight (the scaling of the scores and the
  softmax) and the memory of the maps: ``batch · h · n²`` scores and as many weights.

A multiply and an add count as two operations. The softmax counts :data:`SOFTMAX_OPERATIONS_PER_WEIGHT` per weight
(the row's maximum, the subtraction, the exponential, the row's sum, the division); the scaling of a score by
``1/sqrt(d_head)`` counts one. Bytes are those of the tensor each step writes, ``bytes_per_number`` each (4 for
float32), so ``bytes_written["scores"] + bytes_written["softmax"]`` is the memory of the two maps a forward pass builds.
"""

from __future__ import annotations

from typing import NamedTuple

from mha.core.validation import check_head_count, check_whole_number

__all__ = ["COMPONENTS", "SOFTMAX_OPERATIONS_PER_WEIGHT", "AttentionCost", "attention_cost"]

COMPONENTS = ("Q, K, V projections", "scores", "softmax", "weighted sum", "output projection")
"""The steps of one multi-head attention layer, in the order it runs them."""
SOFTMAX_OPERATIONS_PER_WEIGHT = 5  # max, subtract, exp, sum, divide
"""Operations the softmax counts per attention weight."""


class AttentionCost(NamedTuple):
    """What :func:`attention_cost` returns: per step of :data:`COMPONENTS`, its operations, the operations of its
    matrix product alone (no bias, no scaling; 0 for the softmax) and the bytes of the tensor it writes."""

    operations: dict[str, int]  # step -> floating-point operations (a multiply-add counts 2)
    product_operations: dict[str, int]  # step -> the operations of its matrix product alone
    bytes_written: dict[str, int]  # step -> bytes of the tensor the step writes

    @property
    def total_operations(self) -> int:
        """Every step's operations together."""
        return sum(self.operations.values())

    @property
    def total_product_operations(self) -> int:
        """The matrix products' operations together: ``4 · batch · n · d_model · (2 d_model + n)`` for any ``h``."""
        return sum(self.product_operations.values())

    @property
    def per_weight_operations(self) -> int:
        """The operations done once per attention weight, the scaling and the softmax: they grow with ``h``."""
        return self.operations["softmax"] + self.operations["scores"] - self.product_operations["scores"]

    @property
    def map_bytes(self) -> int:
        """The bytes of the attention maps a forward pass holds: the scores and the weights, (batch, h, n, n) each."""
        return self.bytes_written["scores"] + self.bytes_written["softmax"]


def attention_cost(d_model: int, n_heads: int, seq_len: int, batch: int = 1, *,
                   bytes_per_number: int = 4) -> AttentionCost:
    """Operations and bytes of one forward pass of self-attention over ``batch`` sequences of ``seq_len`` tokens.

    The layer is :class:`~mha.core.attention.MultiHeadAttention` with ``d_model`` features in ``n_heads`` heads of
    ``d_head = d_model // n_heads``, biases included (one addition per output number). Returns an
    :class:`AttentionCost` whose dictionaries map each step of :data:`COMPONENTS` to an integer. Section 3.7, "What
    more heads cost in compute".
    """
    d_head = check_head_count(d_model, n_heads)
    check_whole_number("seq_len", seq_len, minimum=1, meaning="tokens per sequence")
    check_whole_number("batch", batch, minimum=1, meaning="sequences in the batch")
    check_whole_number("bytes_per_number", bytes_per_number, minimum=1, meaning="4 for float32, 8 for float64")
    d, h, n, b = int(d_model), int(n_heads), int(seq_len), int(batch)
    tokens = b * n
    weights = b * h * n * n  # (batch, heads, n, n): one score and one weight each
    projection = 2 * tokens * d * d  # x @ W: (tokens, d) times (d, d)
    products = {
        "Q, K, V projections": 3 * projection,
        "scores": 2 * weights * d_head,  # q @ kᵀ per head: (n, d_head) times (d_head, n)
        "softmax": 0,
        "weighted sum": 2 * weights * d_head,  # A @ v per head: (n, n) times (n, d_head)
        "output projection": projection,
    }
    operations = dict(products)
    operations["Q, K, V projections"] += 3 * tokens * d  # the biases
    operations["scores"] += weights  # / sqrt(d_head)
    operations["softmax"] += SOFTMAX_OPERATIONS_PER_WEIGHT * weights
    operations["output projection"] += tokens * d  # the bias
    bytes_written = {
        "Q, K, V projections": 3 * tokens * d * bytes_per_number,
        "scores": weights * bytes_per_number,
        "softmax": weights * bytes_per_number,
        "weighted sum": tokens * d * bytes_per_number,  # (batch, heads, n, d_head)
        "output projection": tokens * d * bytes_per_number,
    }
    return AttentionCost(operations, products, bytes_written)
