"""Checks for the two background pages: "The transformer in brief" and "A statistics toolkit for reading heads".

The primer's checks: :func:`check_stream_after_each_layer` (heads add their outputs into the residual stream),
:func:`check_words_from_wordpieces` (``##`` pieces glued back into words, ``[CLS]`` and ``[SEP]`` dropped) and
:func:`check_cross_entropy` (the loss every model of the book is trained on). The toolkit's checks:
:func:`check_sign_flip_p_value` (one head's permutation test), :func:`check_holm_adjusted` (Holm's family-wise
correction, against :func:`mha.analysis.p_value_adjustment.holm_adjusted`) and :func:`check_bootstrap_interval`
(a percentile interval over resampled sentences). Each runs the learner's function on seeded, hand-made or random
inputs (never the network) and names the usual slip when the answer matches one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from mha.analysis.p_value_adjustment import bonferroni_adjusted, holm_adjusted
from mha.analysis.statistics import familywise_p_values
from mha.core.validation import check_seed

from .checking import (
    AnswerError,
    CheckResult,
    answer_number,
    answer_tuple,
    array_or_none,
    compare_array,
    compare_number,
    describe_value,
    run_check,
)

__all__ = ["check_bootstrap_interval", "check_cross_entropy", "check_holm_adjusted", "check_sign_flip_p_value",
           "check_stream_after_each_layer", "check_words_from_wordpieces"]

SPECIAL_TOKENS = ("[CLS]", "[SEP]", "[PAD]")


# --- The transformer in brief -----------------------------------------------------------------------

def _stream(embeddings: np.ndarray, writes: np.ndarray) -> np.ndarray:
    """(seq, d), (layers, heads, seq, d) -> (layers + 1, seq, d): the stream before layer 0 and after each layer."""
    return np.concatenate([embeddings[None], embeddings[None] + np.cumsum(writes.sum(axis=1), axis=0)])


def check_stream_after_each_layer(stream_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(embeddings (seq, d_model), writes (layers, heads, seq, d_model)) -> (layers + 1, seq, d_model)``.

    Entry 0 is the embeddings; entry ``l + 1`` is entry ``l`` plus the sum of what every head of layer ``l``
    wrote: the residual stream of an attention-only model.
    """
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for layers, heads, seq, d_model in ((1, 1, 3, 4), (2, 3, 4, 6), (3, 4, 5, 8), (6, 12, 7, 16)):
            embeddings = rng.normal(size=(seq, d_model))
            writes = rng.normal(scale=0.5, size=(layers, heads, seq, d_model))
            label = f"{layers} layers of {heads} heads, seq = {seq}, d_model = {d_model}"
            yield label, (embeddings.copy(), writes.copy()), {}, (embeddings, writes)

    def compare(got, case) -> str | None:
        embeddings, writes = case
        slips = {
            "mean": (_stream(embeddings, writes / writes.shape[1]),
                     "You averaged the heads' outputs; each head ADDS its output, so sum over heads."),
            "replace": (np.concatenate([embeddings[None], writes.sum(axis=1)]),
                        "Each layer's output replaced the stream; it is ADDED to what was there (the skip "
                        "connection)."),
        }
        return compare_array(got, _stream(embeddings, writes), slips, "the stream")

    return run_check(stream_fn, cases(), compare, "follows the residual stream through the layers")


def _words(tokens: list[str]) -> list[str]:
    words: list[str] = []
    for token in tokens:
        if token in SPECIAL_TOKENS:
            continue
        if token.startswith("##") and words:
            words[-1] += token[2:]
        else:
            words.append(token)
    return words


def _random_wordpieces(seed: int) -> list[list[str]]:
    """Sentences of wordpieces drawn from a few words, some split into ## pieces, with special tokens and padding."""
    rng = np.random.default_rng(check_seed("seed", seed))
    words = ["attention", "heads", "the", "gardener", "watered", "begonias", "softmax", "query", "keys", "values",
             "unbelievable", "layer", "tokens", "!", ".", "residual", "stream"]
    sentences = []
    for _ in range(4):
        tokens = ["[CLS]"]
        for word in rng.choice(words, size=int(rng.integers(2, 8))).tolist():
            cuts = sorted(set(rng.integers(1, len(word), size=int(rng.integers(0, 3))).tolist())) if len(word) > 3 \
                else []
            pieces = [word[a:b] for a, b in zip([0, *cuts], [*cuts, len(word)], strict=True)]
            tokens += [pieces[0]] + ["##" + piece for piece in pieces[1:]]
        sentences.append(tokens + ["[SEP]"] + ["[PAD]"] * int(rng.integers(0, 4)))
    return sentences


def check_words_from_wordpieces(words_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(tokens: list[str]) -> list[str]``: wordpieces glued back into words, special tokens dropped (other
    sentences for a seed other than 0)."""
    sentences = _random_wordpieces(seed) if check_seed("seed", seed) else [
        ["[CLS]", "the", "cat", "sat", "[SEP]"],
        ["[CLS]", "the", "gardener", "##s", "watered", "the", "beg", "##onia", "##s", ".", "[SEP]"],
        ["[CLS]", "un", "##believ", "##able", "!", "[SEP]", "[PAD]", "[PAD]"],
        ["[CLS]", "heads", "attend", "to", "[SEP]", "[PAD]"],
    ]

    def cases() -> Iterator:
        for tokens in sentences:
            yield f"{len(tokens)} tokens: {' '.join(tokens)}", (list(tokens),), {}, tokens

    def compare(got, tokens) -> str | None:
        want = _words(tokens)
        if not isinstance(got, (list, tuple)) or not all(isinstance(word, str) for word in got):
            raise AnswerError(f"return the words as a list of strings, got {describe_value(got)}.")
        got = list(got)
        if got == want:
            return None
        if any(word in SPECIAL_TOKENS for word in got):
            return f"got {got}, expected {want}. [CLS], [SEP] and [PAD] are added by the tokenizer; they are no words."
        if any(word.startswith("##") for word in got):
            return f"got {got}, expected {want}. A piece that starts with ## continues the word before it: glue it on."
        if [w.replace("##", "") for w in got] == [t.replace("##", "") for t in tokens if t not in SPECIAL_TOKENS]:
            return (f"got {got}, expected {want}. Glue each ## piece onto the word before it instead of keeping it "
                    "apart.")
        return f"got {got}, expected {want}."

    return run_check(words_fn, cases(), compare, "glues wordpieces back into words")


def _cross_entropy(logits: np.ndarray, targets: np.ndarray) -> float:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))  # (n, vocab)
    return float(-log_probs[np.arange(len(targets)), targets].mean())


def check_cross_entropy(cross_entropy_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(logits (n, vocab), targets (n,) ints) -> float``: the mean of -log softmax(logits)[target]."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for n, vocab, scale in ((1, 3, 1.0), (4, 5, 2.0), (16, 10, 3.0), (8, 6, 1000.0)):
            logits = rng.normal(scale=scale, size=(n, vocab))
            targets = rng.integers(0, vocab, size=n)
            label = f"{n} positions, {vocab} tokens" + (", logits in the thousands" if scale > 100 else "")
            yield label, (logits.copy(), targets.copy()), {}, (logits, targets)

    def compare(got, case) -> str | None:
        logits, targets = case
        want = _cross_entropy(logits, targets)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
        picked = probabilities[np.arange(len(targets)), targets]
        slips = {
            "sum": (want * len(targets), "That is the SUM over positions; the loss is the mean."),
            "sign": (-want, "The sign is flipped: the loss is MINUS the log-probability, so it is >= 0."),
            "no log": (float(-picked.mean()), "Take the log of the probability of the target."),
            "base 2": (want / np.log(2), "That is in bits (log base 2); use the natural log, as torch does."),
        }
        value = array_or_none(got)
        if value is not None and value.size == 1 and not np.isfinite(value.astype(float)).all():
            return (f"the loss is {value.reshape(()).item()}, not a finite number. With logits in the thousands exp "
                    "overflows: subtract each row's largest logit before exponentiating (it cancels in the "
                    "log-softmax), as chapter 1's softmax does.")
        return compare_number(got, want, slips, "the loss", atol=1e-6)

    return run_check(cross_entropy_fn, cases(), compare, "computes the cross-entropy loss")


# --- A statistics toolkit for reading heads -----------------------------------------------------------

def _sign_flip_p(differences: np.ndarray, signs: np.ndarray) -> float:
    p_values, _ = familywise_p_values(differences[:, None], signs, statistic="mean")
    return float(p_values[0])


def check_sign_flip_p_value(p_value_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(differences (items,), signs (permutations, items)) -> float``: one head's two-sided sign-flip p-value
    of the mean, ``(1 + #{|mean of signed differences| >= |observed mean|}) / (1 + permutations)``."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for items, permutations, effect in ((6, 20, 0.0), (10, 200, 0.5), (20, 1000, 0.8), (30, 500, -0.6)):
            differences = rng.normal(loc=effect, size=items)
            signs = rng.choice(np.array([-1.0, 1.0]), size=(permutations, items))
            label = f"{items} items, {permutations} relabellings"
            yield label, (differences.copy(), signs.copy()), {}, (differences, signs)

    def compare(got, case) -> str | None:
        differences, signs = case
        null = signs @ differences / len(differences)  # (permutations,)
        observed = differences.mean()
        slips = {
            "no plus one": (float((np.abs(null) >= abs(observed) - 1e-12).sum() / len(signs)),
                            "Count the observed labelling too: (1 + exceedances) / (1 + permutations), so that "
                            "the p-value is never 0."),
            "one-sided": (float((1 + (null >= observed - 1e-12).sum()) / (1 + len(signs))),
                          "Compare absolute values: the test is two-sided, a head may respond either way."),
        }
        expected = _sign_flip_p(differences, signs)
        # a relabelling whose mean equals the observed one up to rounding (all signs alike) is as extreme; an answer
        # that compares without a tolerance may count each such tie or not, as its CPU's rounding falls, and is right
        # either way: every count from none of the ties to all of them is accepted
        ties = int((np.abs(np.abs(null) - abs(observed)) <= 1e-12).sum())
        for uncounted in range(1, ties + 1):
            if compare_number(got, expected - uncounted / (1 + len(signs)), {}, "the p-value") is None:
                return None
        return compare_number(got, expected, slips, "the p-value")

    return run_check(p_value_fn, cases(), compare, "computes a sign-flip permutation p-value")


def check_holm_adjusted(holm_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(p_values (m,)) -> (m,)``: Holm's step-down adjusted p-values, in the order given."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        yield "3 p-values, already sorted", (np.array([0.01, 0.02, 0.03]),), {}, np.array([0.01, 0.02, 0.03])
        yield "4 p-values out of order", (np.array([0.04, 0.001, 0.5, 0.012]),), {}, np.array([0.04, 0.001, 0.5, 0.012])
        p = np.array([0.003, 0.04, 0.004, 0.2, 0.9])
        yield "5 p-values where the step-down must be made monotone", (p.copy(),), {}, p
        p = rng.uniform(0, 0.2, size=72)
        yield "72 random p-values, one per head", (p.copy(),), {}, p

    def compare(got, p) -> str | None:
        m = len(p)
        order = np.argsort(p, kind="stable")
        stepped = (m - np.arange(m)) * p[order]
        not_monotone, uncapped, sorted_order = np.empty(m), np.empty(m), np.sort(holm_adjusted(p))
        not_monotone[order] = np.minimum(1.0, stepped)
        uncapped[order] = np.maximum.accumulate(stepped)
        slips = {
            "bonferroni": (bonferroni_adjusted(p), "That is Bonferroni (every p-value times m); Holm multiplies the "
                                                   "k-th smallest by m - k + 1."),
            "not monotone": (not_monotone, "Make the adjusted values non-decreasing along the sorted order "
                                           "(np.maximum.accumulate): a larger p-value cannot be adjusted below a "
                                           "smaller one."),
            "uncapped": (uncapped, "Cap the adjusted p-values at 1."),
            "sorted": (sorted_order, "These are in sorted order; put each adjusted value back in the place of its "
                                     "p-value."),
        }
        return compare_array(got, holm_adjusted(p), slips, "the adjusted p-values")

    return run_check(holm_fn, cases(), compare, "computes Holm's adjusted p-values")


def _percentile_interval(values: np.ndarray, resamples: np.ndarray, level: float) -> np.ndarray:
    means = values[resamples].mean(axis=1)  # (resamples,)
    tail = (1 - level) / 2
    return np.quantile(means, [tail, 1 - tail])


def check_bootstrap_interval(interval_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(values (items,), resamples (n_resamples, items) ints, level) -> (low, high)``: the percentile bootstrap
    interval of the mean, from the resampled items' means (``np.quantile``'s default interpolation)."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for items, n_resamples, level in ((5, 50, 0.9), (12, 400, 0.95), (30, 1000, 0.95), (40, 2000, 0.99)):
            values = rng.normal(loc=0.3, size=items)
            resamples = rng.integers(0, items, size=(n_resamples, items))
            label = f"{items} items, {n_resamples} resamples, level {level}"
            yield label, (values.copy(), resamples.copy(), level), {}, (values, resamples, level)

    def compare(got, case) -> str | None:
        values, resamples, level = case
        low, high = answer_tuple(got, ("low", "high"))
        got = np.array([answer_number(low, "low"), answer_number(high, "high")])
        means = values[resamples].mean(axis=1)
        standard_error = values.std(ddof=1) / np.sqrt(len(values))
        slips = {
            "one tail": (np.quantile(means, [1 - level, level]),
                         f"Split the {1 - level:.0%} left out between the two tails: quantiles (1 - level) / 2 "
                         "and 1 - (1 - level) / 2."),
            "values": (np.quantile(values, [(1 - level) / 2, 1 - (1 - level) / 2]),
                       "Those are quantiles of the values themselves; take the MEAN of each resample first."),
            "normal": (values.mean() + np.array([-1.96, 1.96]) * standard_error,
                       "That is the normal approximation, mean ± 1.96 standard errors; use the resamples."),
        }
        return compare_array(got, _percentile_interval(values, resamples, level), slips, "(low, high)")

    return run_check(interval_fn, cases(), compare, "computes a percentile bootstrap interval")
