"""Checks for the exercises of chapter 4, "Caveats".

Section "Attention is not explanation": :func:`check_norm_based_attention`,
:func:`check_attention_rollout`, :func:`check_rank_correlation`. Section
"Redundancy and pruning": :func:`check_sentence_embedding`, :func:`check_attention_without_head`,
:func:`check_ranking_accuracy`, :func:`check_michel_importance`,
:func:`check_heads_removable`.

Each check runs the learner's function on small seeded inputs (random
attention maps, values, hidden states, similarities; no model needed),
compares with the package's own implementation (:mod:`mha.analysis.caveats.norms`,
:mod:`mha.analysis.caveats.attention_flow`, :mod:`mha.pretrained.sentence_embedding`,
:mod:`mha.corpora.paraphrases`, :mod:`mha.analysis.caveats.ablation`, and
``scipy.stats.spearmanr``), and names the slip when the answer matches a
typical wrong one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache

import numpy as np
import torch
from scipy.stats import spearmanr

from mha.analysis.caveats.ablation import heads_removable, michel_importance
from mha.analysis.caveats.attention_flow import attention_rollout
from mha.analysis.caveats.norms import norm_based_attention, transformed_value_norms
from mha.analysis.head_roles.seeded_sentences import treebank_sentences
from mha.core.validation import check_seed
from mha.corpora.paraphrases import ranking_accuracy
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.sentence_embedding import sentence_embeddings

from .checking import (
    CheckResult,
    answer_number,
    array_or_none,
    compare_array,
    describe_difference,
    matches,
    random_attention_maps,
    run_check,
    scalar_difference,
)

__all__ = [
    "check_norm_based_attention",
    "check_attention_rollout",
    "check_rank_correlation",
    "check_sentence_embedding",
    "check_ranking_accuracy",
    "check_michel_importance",
    "check_heads_removable",
    "check_attention_without_head",
    "treebank_trace",
]


# --- Attention is not explanation -------------------------------------------------------------------

def check_norm_based_attention(norm_attention_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(attention (heads, n, n), values (heads, n, d_head), W_O (heads, d_head, d_model)) -> (heads, n, n)``."""
    rng = np.random.default_rng(seed)

    def cases() -> Iterator:
        for heads, n, d_head, d_model in ((1, 3, 2, 4), (2, 5, 4, 6), (4, 7, 8, 12), (3, 9, 8, 16)):
            attention = random_attention_maps(rng, (heads, n, n))
            values = rng.normal(size=(heads, n, d_head)) * rng.uniform(0.05, 3.0, size=(heads, n, 1))  # long and short
            W_O = rng.normal(size=(heads, d_head, d_model))
            label = f"attention {attention.shape}, values {values.shape}, W_O {W_O.shape}"
            yield label, (attention.copy(), values.copy(), W_O.copy()), {}, (attention, values, W_O)

    def compare(got, case) -> str | None:
        attention, values, W_O = case
        expected = norm_based_attention(attention, transformed_value_norms(values, W_O))
        problem = describe_difference("the result", got, expected, head_axis=0)
        if problem is None:
            return None
        unscaled = attention * transformed_value_norms(values, W_O)[:, None, :]
        raw_value_norms = np.linalg.norm(values, axis=-1)
        if matches(got, unscaled):
            return problem + " Those are the weighted norms themselves: divide each row by its sum so rows sum to 1."
        if matches(got, norm_based_attention(attention, raw_value_norms)):
            return problem + (" You used ||v_j||; what reaches the residual stream is v_j @ W_O^h, so measure "
                              "||v_j @ W_O^h|| (each head with its own slice of W_O).")
        per_query = attention * transformed_value_norms(values, W_O)[:, :, None]
        if matches(got, per_query / per_query.sum(-1, keepdims=True)):
            return problem + " The norm belongs to the KEY j (a column), not to the query i (a row)."
        return problem

    return run_check(norm_attention_fn, cases(), compare, "weighs each key by the length of what it sends")


def check_attention_rollout(rollout_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(attention (layers, heads, n, n), residual_weight=0.5) -> (layers, n, n)``, Abnar and Zuidema (2020)."""
    rng = np.random.default_rng(seed)

    def cases() -> Iterator:
        for layers, heads, n, residual in ((1, 1, 3, 0.5), (2, 2, 4, 0.5), (3, 4, 5, 0.5), (6, 3, 6, 0.3)):
            attention = random_attention_maps(rng, (layers, heads, n, n))
            label = f"attention {attention.shape}, residual_weight {residual}"
            yield label, (attention.copy(),), {"residual_weight": residual}, (attention, residual)

    def compare(got, case) -> str | None:
        attention, residual = case
        expected = attention_rollout(attention, residual)
        problem = describe_difference("the rollout", got, expected)
        if problem is None:
            return None
        averaged = attention.mean(axis=1)
        n = attention.shape[-1]
        mixed = (1 - residual) * averaged + residual * np.eye(n)
        if matches(got, attention_rollout(attention, 0.0)):
            return problem + (" Without the residual connection: each layer's map is (1 - r) * A + r * I, because "
                              "every position also keeps its own vector.")
        reversed_order, running = [], np.eye(n)
        for layer_map in mixed:
            running = running @ layer_map
            reversed_order.append(running)
        if matches(got, np.stack(reversed_order)):
            return problem + (" The product is in the wrong order: the new layer acts on the output of the layers "
                              "below, R_l = Ã_l @ R_(l-1).")
        if matches(got, mixed):
            return problem + " Each layer's map is right, but chain them: multiply by the rollout of the layers below."
        return problem

    return run_check(rollout_fn, cases(), compare, "rolls attention out through the layers")


def _spearman(a, b) -> float:
    return float(spearmanr(a, b)[0])


def check_rank_correlation(rank_correlation_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(a (n,), b (n,)) -> float``: Spearman's rank correlation, ties given their average rank."""
    rng = np.random.default_rng(seed)

    def cases() -> Iterator:
        a = rng.normal(size=8)
        yield "8 distinct values, b = a ** 3 (same order)", (a.copy(), a ** 3), {}, (a, a ** 3)
        a, b = rng.normal(size=10), rng.normal(size=10)
        yield "10 distinct random values", (a.copy(), b.copy()), {}, (a, b)
        a = np.array([0.1, 0.1, 0.1, 0.5, 0.2, 0.1, 0.3])  # ties, like attention to special tokens
        b = rng.normal(size=7)
        yield "7 values with a four-way tie in a", (a.copy(), b.copy()), {}, (a, b)
        a, b = np.round(rng.uniform(size=12), 1), np.round(rng.uniform(size=12), 1)
        yield "12 values rounded to one decimal (ties in both)", (a.copy(), b.copy()), {}, (a, b)

    def compare(got, case) -> str | None:
        a, b = case
        problem = scalar_difference("the correlation", got, _spearman(a, b))
        if problem is None:
            return None
        if matches(got, np.corrcoef(a, b)[0, 1]):
            return problem + " That is Pearson's r of the values themselves: correlate their RANKS."
        ordinal = lambda x: np.argsort(np.argsort(x, kind="stable"), kind="stable")  # noqa: E731
        if matches(got, np.corrcoef(ordinal(a), ordinal(b))[0, 1]):
            return problem + (" Tied values got different ranks; give every member of a tie the average of the ranks "
                              "they share (scipy.stats.rankdata does this).")
        return problem

    return run_check(rank_correlation_fn, cases(), compare, "computes Spearman's rank correlation")


# --- Redundancy and pruning ------------------------------------------------------------------------

def _reference_embedding(hidden, real_tokens) -> np.ndarray:
    return sentence_embeddings(torch.as_tensor(hidden), torch.as_tensor(real_tokens)).numpy()


def check_sentence_embedding(embedding_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(hidden_states (batch, seq, d) numpy, real_tokens (batch, seq) bool) -> (batch, d)`` unit vectors."""
    rng = np.random.default_rng(seed)

    def cases() -> Iterator:
        for lengths, seq, d in (([3], 3, 4), ([5, 3], 5, 6), ([4, 7, 2], 7, 8), ([6, 6, 3, 9], 9, 16)):
            hidden = rng.normal(size=(len(lengths), seq, d)) + rng.normal(size=(1, 1, d))
            real = np.arange(seq)[None, :] < np.array(lengths)[:, None]  # (batch, seq)
            hidden[~real] = 50.0  # padding vectors are garbage; they must not count
            label = f"hidden {hidden.shape}, lengths {lengths} (padding holds large garbage values)"
            yield label, (hidden.copy(), real.copy()), {}, (hidden, real)

    def compare(got, case) -> str | None:
        hidden, real = case
        expected = _reference_embedding(hidden, real)
        problem = describe_difference("the embeddings", got, expected, atol=1e-5)
        if problem is None:
            return None
        got_array = array_or_none(got)
        if got_array is not None and got_array.shape == expected.shape:
            norms = np.linalg.norm(got_array, axis=-1)
            if not np.allclose(norms, 1.0, atol=1e-4):
                pooled = (hidden * real[..., None]).sum(1) / real.sum(1, keepdims=True)
                if np.allclose(got_array, pooled, atol=1e-5):
                    return problem + " The mean is right; now scale each vector to length 1 (divide by its norm)."
                return problem + f" The vectors should have length 1, yours have lengths {np.round(norms, 3).tolist()}."
            padded_mean = hidden.mean(1)
            if np.allclose(got_array, padded_mean / np.linalg.norm(padded_mean, axis=-1, keepdims=True), atol=1e-5):
                return problem + " You averaged over the padding too: average only where real_tokens is True."
            inner = real.copy()
            for row, length in enumerate(real.sum(1)):
                inner[row, [0, length - 1]] = False
            if inner.sum(1).min() > 0 and np.allclose(got_array, _reference_embedding(hidden, inner), atol=1e-5):
                return problem + (" You left out [CLS] and [SEP]; the model's pooling averages over every real "
                                  "token, special tokens included.")
        return problem

    return run_check(embedding_fn, cases(), compare, "mean-pools real tokens and normalises")


def check_ranking_accuracy(ranking_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(similarity (n, 2n)) -> float``: share of comparisons won by the paraphrase, ties counting one half."""
    rng = np.random.default_rng(seed)

    def cases() -> Iterator:
        for n, ties in ((2, False), (3, True), (6, False), (12, True)):
            similarity = rng.uniform(-0.2, 1.0, size=(n, 2 * n))
            similarity[np.arange(n), np.arange(n)] += 0.3  # paraphrases are usually, not always, closest
            if ties:
                similarity = np.round(similarity, 1)  # many ties
            label = f"similarity {similarity.shape}" + (", rounded to one decimal (ties)" if ties else "")
            yield label, (similarity.copy(),), {}, similarity

    def compare(got, similarity) -> str | None:
        problem = scalar_difference("the ranking accuracy", got, float(ranking_accuracy(similarity)))
        if problem is None:
            return None
        n = similarity.shape[0]
        right = similarity[np.arange(n), np.arange(n)][:, None]
        wins, ties = (right > similarity).sum(1), (right == similarity).sum(1) - 1
        if matches(got, ((wins + 0.5 * ties) / (2 * n)).mean()):
            return problem + " You divided by 2n: the paraphrase is compared with the OTHER 2n - 1 candidates only."
        if matches(got, (wins / (2 * n - 1)).mean()):
            return problem + " Ties count as losses in your answer; count each tie as one half."
        if matches(got, ((wins + 0.5 * (ties + 1)) / (2 * n - 1)).mean()):
            return problem + " The paraphrase ties with itself: do not count that comparison."
        return problem

    return run_check(ranking_fn, cases(), compare, "scores how often paraphrases win")


def check_michel_importance(importance_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(gradients (examples, layers, heads)) -> (layers, heads)``: mean |gradient|, each layer scaled to norm 1."""
    rng = np.random.default_rng(seed)

    def cases() -> Iterator:
        for examples, layers, heads in ((2, 1, 3), (4, 2, 3), (8, 3, 4), (12, 6, 12)):
            gradients = rng.normal(size=(examples, layers, heads)) * rng.uniform(0.1, 5.0, size=(1, layers, 1))
            label = f"gradients {gradients.shape} (layers on different scales)"
            yield label, (gradients.copy(),), {}, gradients

    def compare(got, gradients) -> str | None:
        expected = michel_importance(gradients)
        problem = describe_difference("the importance", got, expected)
        if problem is None:
            return None
        mean_abs = np.abs(gradients).mean(0)
        abs_mean = np.abs(gradients.mean(0))
        if matches(got, mean_abs):
            return problem + " Right scores, but normalise each LAYER (row) to Euclidean norm 1, as Michel et al. do."
        if matches(got, abs_mean / np.linalg.norm(abs_mean, axis=1, keepdims=True)):
            return problem + (" You averaged the gradients before taking their size: positive and negative examples "
                              "cancel. Take |gradient| per example first, then the mean.")
        if matches(got, mean_abs / np.linalg.norm(mean_abs)):
            return problem + " You normalised over all heads at once; normalise within each layer (each row)."
        return problem

    return run_check(importance_fn, cases(), compare, "computes Michel et al.'s head importance")


def check_heads_removable(removable_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(counts, quality, reference, max_drop) -> int``: heads removed before the first drop of more than
    max_drop."""
    rng = np.random.default_rng(seed)

    def cases() -> Iterator:
        counts = list(range(0, 73, 8))
        curves = [("a curve that never drops", np.full(10, 0.9), 0.9, 0.01),
                  ("a curve that drops, recovers, then falls",
                   np.array([0.90, 0.90, 0.895, 0.88, 0.89, 0.91, 0.85, 0.80, 0.70, 0.60]), 0.90, 0.01),
                  ("points exactly max_drop below the reference (still allowed)",  # exact in binary
                   np.array([1.0, 0.875, 0.75, 0.75, 0.5, 0.5, 0.25, 0.25, 0.0, 0.0]), 1.0, 0.25)]
        quality = np.clip(0.95 - np.cumsum(rng.uniform(0, 0.02, size=10)), 0, 1)
        quality[0] = 0.95
        curves.append(("a steadily falling random curve", quality, 0.95, 0.03))
        for label, quality, reference, max_drop in curves:
            yield label, (list(counts), quality.copy(), reference, max_drop), {}, (counts, quality, reference, max_drop)

    def compare(got, case) -> str | None:
        counts, quality, reference, max_drop = case
        expected = heads_removable(counts, quality, reference, max_drop)
        value = answer_number(got, "the number of removable heads", whole=True)
        if value == expected:
            return None
        message = f"got {value}, expected {expected}."
        within = [c for c, q in zip(counts, quality) if q >= reference - max_drop]
        if within and value == max(within):
            message += (" That is the last count whose quality is within the limit anywhere on the curve; "
                        "stop at the FIRST point that falls too far (later recoveries do not count).")
        elif value in counts:
            position = counts.index(value)
            if position + 1 < len(counts) and counts[position + 1] == expected:
                message += " One step too early: a drop of exactly max_drop is still allowed."
            elif position > 0 and counts[position - 1] == expected:
                message += " One step too far: return the last count BEFORE the first point that drops too far."
        return message

    return run_check(removable_fn, cases(), compare, "reads a pruning curve")


# --- Redundancy and pruning, on the real model ------------------------------------------------------

def treebank_trace(seed: int = 0):
    """The encoder and its trace of one EWT dev sentence drawn with ``seed`` (a batch of one, so no padding)."""
    return _treebank_trace(check_seed("seed", seed))


@lru_cache(maxsize=4)
def _treebank_trace(seed: int):
    encoder = MiniLMEncoder.load()
    sentence = treebank_sentences(10_000 + seed, 1)[0]
    return encoder, encoder.trace([sentence.text])



def check_attention_without_head(attention_without_head: Callable, seed: int = 0) -> CheckResult:
    """``fn(head_outputs (heads, seq, d_head), W_O (d_model, d_model), b_O (d_model,), head int) -> (seq, d_model)``:
    a real attention layer's output with one head removed, against the model run with that head masked (4.2)."""
    rng = np.random.default_rng(seed)

    def cases() -> Iterator:
        encoder, trace = treebank_trace(seed)
        for _ in range(4):
            layer, head = int(rng.integers(encoder.config.n_layers)), int(rng.integers(encoder.config.n_heads))
            attention = encoder.layers[layer].attention
            x = trace.hidden_states[layer]  # (1, seq, d_model): the layer's input
            with torch.no_grad():
                mask = torch.ones(encoder.config.n_heads)
                mask[head] = 0.0
                want = attention(x, head_mask=mask).output[0].numpy()  # (seq, d_model)
                z = trace.head_outputs[layer, 0].numpy()  # (heads, seq, d_head)
            W_O, b_O = attention.W_O.detach().numpy(), attention.b_O.detach().numpy()
            label = f"layer {layer} of the model on a treebank sentence of {z.shape[1]} tokens, head {head} removed"
            yield label, (z.copy(), W_O.copy(), b_O.copy(), head), {}, (want, z, W_O, b_O, head)

    def compare(got, case) -> str | None:
        want, z, W_O, b_O, head = case
        heads, seq, d_head = z.shape
        merged = z.transpose(1, 0, 2).reshape(seq, heads * d_head)  # (seq, d_model)
        rows = slice(head * d_head, (head + 1) * d_head)
        kept_only = np.zeros_like(merged)
        kept_only[:, rows] = merged[:, rows]
        columns_zeroed = W_O.copy()
        columns_zeroed[:, rows] = 0.0
        slips = {
            "no bias": (want - b_O, "Add the bias b_O: the layer adds it whichever heads are kept."),
            "full": (merged @ W_O + b_O, "That is the output with every head kept; set the head's z to 0 first."),
            "kept only": (kept_only @ W_O + b_O, "That keeps ONLY that head; remove it and keep the others."),
            "columns": (merged @ columns_zeroed + b_O, "You zeroed columns of W_O, which are output features; the "
                        "head is read by the ROWS head * d_head to (head + 1) * d_head."),
        }
        scrambled = z.reshape(seq, heads * d_head).copy()  # the heads axis not moved first
        scrambled[:, rows] = 0.0
        slips["reshape"] = (scrambled @ W_O + b_O, "You reshaped (heads, seq, d_head) to (seq, heads * d_head) "
                            "without moving the heads axis: transpose to (seq, heads, d_head) first.")
        return compare_array(got, want, slips, "the attention output", atol=2e-4)

    return run_check(attention_without_head, cases(), compare, "removes one head from a real attention layer")

