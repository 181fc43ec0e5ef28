"""Checks for the exercises of chapter 4, "Caveats".

Section "Attention is not explanation": :func:`check_norm_based_attention`,
:func:`check_attention_rollout`, :func:`check_rank_correlation`, :func:`check_patched_change` (its learner patches
the real model). Section
"Redundancy and pruning": :func:`check_sentence_embedding`, :func:`check_attention_without_head`,
:func:`check_similarity_without_head` (whose learner runs the model itself),
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
from scipy.stats import rankdata, spearmanr

from mha.analysis.caveats.ablation import heads_removable, load_single_removals, michel_importance
from mha.analysis.caveats.attention_flow import attention_rollout
from mha.analysis.caveats.norms import norm_based_attention, transformed_value_norms
from mha.analysis.head_roles.seeded_sentences import treebank_sentences
from mha.analysis.pair_patching import MINIMAL_PAIRS, sentence_vector_patching
from mha.core.validation import check_seed
from mha.corpora.paraphrases import TRIPLES, ranking_accuracy
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.sentence_embedding import cosine_similarity_matrix, embed, mean_pool, sentence_embeddings

from .checking import (
    CheckResult,
    answer_number,
    array_or_none,
    compare_array,
    compare_number,
    describe_difference,
    matches,
    random_attention_maps,
    run_check,
    scalar_difference,
    uses_tools,
)

__all__ = [
    "check_norm_based_attention",
    "check_attention_rollout",
    "check_rank_correlation",
    "check_patched_change",
    "check_sentence_embedding",
    "check_ranking_accuracy",
    "check_michel_importance",
    "check_heads_removable",
    "check_attention_without_head",
    "treebank_trace",
    "check_similarity_without_head",
]


# --- Attention is not explanation -------------------------------------------------------------------

def check_norm_based_attention(norm_attention_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(attention (heads, n, n), values (heads, n, d_head), W_O (heads, d_head, d_model)) -> (heads, n, n)``."""
    rng = np.random.default_rng(check_seed("seed", seed))

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
    rng = np.random.default_rng(check_seed("seed", seed))

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
    rng = np.random.default_rng(check_seed("seed", seed))

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
        n, squared = len(a), ((rankdata(a) - rankdata(b)) ** 2).sum()
        return compare_number(got, _spearman(a, b), {"shortcut": (1 - 6 * squared / (n * (n * n - 1)), "That is the "
                              "shortcut 1 - 6 Σd² / (n(n² - 1)), exact only without ties: take Pearson's correlation "
                              "of the (average) ranks instead, np.corrcoef(rank_a, rank_b)[0, 1].")}, "the correlation")

    return run_check(rank_correlation_fn, cases(), compare, "computes Spearman's rank correlation")


@uses_tools("mha.pretrained.encoder", "mha.pretrained.sentence_embedding")
def check_patched_change(patched_change: Callable, seed: int = 0) -> CheckResult:
    """``fn(encoder, clean, corrupt, layer, head) -> float``: the share of the pair's sentence-vector difference that
    one head's output carries, patched from ``corrupt`` into ``clean`` by the learner's own runs of the model, against
    :func:`mha.analysis.pair_patching.sentence_vector_patching` (4.1). Another seed: other pairs and heads."""
    def cases() -> Iterator:
        encoder, rng = MiniLMEncoder.load(), np.random.default_rng(check_seed("seed", seed))
        picks = [(0, 5, 9), (2, 2, 8)] if not seed else [(int(i), None, None) for i in rng.choice(6, 2, replace=False)]
        for index, layer, head in picks:
            clean, corrupt = MINIMAL_PAIRS[index]
            for _ in range(12):  # another seed: draw the head until every slip is at least 1e-4 away
                layer, head = (layer, head) if not seed else (int(rng.integers(6)), int(rng.integers(12)))
                want = sentence_vector_patching(encoder, clean, corrupt, [(layer, head)])
                slips = {"reverse": (sentence_vector_patching(encoder, corrupt, clean, [(layer, head)])["share"],
                                     "That patches the wrong way: the CLEAN head's output into the corrupt run. Run "
                                     "the clean sentence, with the head's output taken from the corrupt run."),
                         "layer": (sentence_vector_patching(encoder, clean, corrupt, [(layer, h) for h in range(12)])
                                   ["share"], "That patches the whole layer; copy only the one head's z[:, head]."),
                         "moved": (want["moved"], "That is the move alone; divide by the pair's whole difference, "
                                   "r(e_clean) - r(e_corrupt), to get a share."),
                         "cosine": (want["cosine change"], "That is 1 - cos(e_patched, e_clean); the readout is "
                                    "r(x) = cos(x, e_clean) - cos(x, e_corrupt), and the share is its fall over the "
                                    "pair's difference.")}
                values = [want["share"]] + [value for value, _ in slips.values()]
                if min(abs(a - b) for i, a in enumerate(values) for b in values[i + 1:]) > 1e-4:
                    break
            yield f"{clean!r} patched from {corrupt!r} at L{layer}H{head}", (encoder, clean, corrupt, layer, head), \
                {}, (want["share"], slips)

    return run_check(patched_change, cases(),
                     lambda got, want: compare_number(got, want[0], want[1], "the share", atol=2e-5),
                     "patches one head between a minimal pair")


# --- Redundancy and pruning ------------------------------------------------------------------------

def _reference_embedding(hidden, real_tokens) -> np.ndarray:
    return sentence_embeddings(torch.as_tensor(hidden), torch.as_tensor(real_tokens)).numpy()


def check_sentence_embedding(embedding_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(hidden_states (batch, seq, d) numpy, real_tokens (batch, seq) bool) -> (batch, d)`` unit vectors."""
    rng = np.random.default_rng(check_seed("seed", seed))

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
    rng = np.random.default_rng(check_seed("seed", seed))

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
    rng = np.random.default_rng(check_seed("seed", seed))

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
    rng = np.random.default_rng(check_seed("seed", seed))

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
        within = [c for c, q in zip(counts, quality, strict=True) if q >= reference - max_drop]
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
    rng = np.random.default_rng(check_seed("seed", seed))

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
        removed = z.copy()
        removed[head] = 0.0
        kept = removed.transpose(1, 0, 2).reshape(seq, heads * d_head)  # (seq, d_model), the head's block zero
        reshape = ("You reshaped (heads, seq, d_head) to (seq, heads * d_head) without moving the heads axis, so each "
                   "row mixes the tokens: transpose to (seq, heads, d_head) first, z.transpose(1, 0, 2), then reshape.")
        scrambled = z.reshape(seq, heads * d_head).copy()  # the heads axis not moved first
        scrambled[:, rows] = 0.0
        slips["reshape"] = (scrambled @ W_O + b_O, reshape)
        slips["reshape, head removed first"] = (removed.reshape(seq, heads * d_head) @ W_O + b_O, reshape)
        slips["W_O.T"] = (kept @ W_O.T + b_O, "You used W_O.T, the output projection transposed; vectors are rows "
                          "here, so the layer computes concat @ W_O + b_O with W_O as it is.")
        return compare_array(got, want, slips, "the attention output", atol=2e-4)

    return run_check(attention_without_head, cases(), compare, "removes one head from a real attention layer")


def _similarities(encoder: MiniLMEncoder, pair: tuple[str, str], layer: int, head: int) -> dict[str, float]:
    """The pair's cosine similarity with ``(layer, head)`` removed by the head mask (``"removed"``, the reference
    of :func:`mha.pretrained.sentence_embedding.embed`), and what the classic slips give instead."""
    def cosine(vectors) -> float:
        vectors = np.asarray(vectors, dtype=np.float64)
        return float(cosine_similarity_matrix(vectors[:1], vectors[1:])[0, 0])

    mask = encoder.head_mask([(layer, head)])
    layer_mask = encoder.head_mask([(layer, h) for h in range(encoder.config.n_heads)])
    trace = encoder.trace(list(pair), head_mask=mask)
    pooled = mean_pool(trace.hidden_states[-1], trace.real_tokens).double().numpy()  # (2, d_model)
    return {"removed": cosine(embed(encoder, list(pair), head_mask=mask)), "full": cosine(embed(encoder, list(pair))),
            "layer": cosine(embed(encoder, list(pair), head_mask=layer_mask)),
            "uniform": cosine(embed(encoder, list(pair),
                                    attention_override=encoder.uniform_attention([(layer, head)]))),
            "dot": float(pooled[0] @ pooled[1]), "cls": cosine(trace.hidden_states[-1][:, 0].numpy())}


_SIMILARITY_SLIPS = {
    "full": "That is the full model's similarity: pass head_mask=encoder.head_mask([(layer, head)]) to the trace.",
    "layer": "That removes every head of the layer; the mask should hold a 0 for the one (layer, head) only.",
    "uniform": "That gives the head uniform attention (4.1's intervention); removing it sets its output to 0, "
               "which is what encoder.head_mask([(layer, head)]) does.",
    "dot": "That is the dot product of the mean-pooled vectors; the similarity is their cosine (divide by both "
           "lengths, or normalise the vectors first).",
    "cls": "That compares the [CLS] vectors; the sentence vector is the MEAN of the last layer over the real tokens.",
}


@uses_tools("mha.pretrained.encoder", "mha.pretrained.sentence_embedding")
def check_similarity_without_head(similarity_without_head: Callable, seed: int = 0) -> CheckResult:
    """``fn(encoder, sentence_a, sentence_b, layer, head)`` -> the cosine similarity of the two sentence vectors
    (last layer mean-pooled) of the model with that one head removed by the head mask, which the function runs
    itself (4.2). Seed 0: a triple of 4.2 and two heads; another seed: other pairs and heads, drawn until every slip
    gives another answer."""
    def cases() -> Iterator:
        encoder, rng = MiniLMEncoder.load(), np.random.default_rng(check_seed("seed", seed))
        changes = np.asarray(load_single_removals()["all"]["vector change (1 - cos)"])  # (layers * heads,)
        picks = [(6, "paraphrase", 5, 9), (6, "distractor", 0, 5)] if seed == 0 else [
            (int(t), str(rng.choice(["paraphrase", "distractor"])), None, None)
            for t in rng.choice(len(TRIPLES), 2, replace=False)]
        for triple, partner, layer, head in picks:
            pair = (TRIPLES[triple].anchor, getattr(TRIPLES[triple], partner))
            for _ in range(12):  # another seed: draw the head until all the answers are at least 1e-4 apart
                if seed != 0:  # among the 24 heads whose removal moves the sentence vectors most (stored, 4.2)
                    layer, head = divmod(int(rng.choice(np.argsort(-changes)[:24])), encoder.config.n_heads)
                values = _similarities(encoder, pair, layer, head)
                if seed == 0 or np.diff(sorted(values.values())).min() > 1e-4:
                    break
            slips = {name: (values[name], hint) for name, hint in _SIMILARITY_SLIPS.items()}
            label = f"'{pair[0]}' and its {partner} '{pair[1]}', L{layer}H{head} removed"
            yield label, (encoder, *pair, layer, head), {}, (values["removed"], slips)

    return run_check(similarity_without_head, cases(),
                     lambda got, want: compare_number(got, want[0], want[1], "the similarity", atol=5e-5),
                     "removes one head from the model and measures the similarity")


