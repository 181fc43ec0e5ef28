"""Checks for the exercises of sections 3.5 "Induction heads" and 3.6 "Heads are not preassigned".

:func:`check_phase_change_step` (3.5) runs on real training runs instead: the held-out loss curves of the tiny
induction models of the section's phase-change spread (``induction_phase_spread.json``), other runs for other seeds.
In :func:`check_trained_previous_token_head` (any head within NEAR_BEST of the best counts) and
:func:`check_induction_scores` the learner's own code trains or loads the model (``tools``), as the check does.

Each other ``check_*`` runs the learner's function on small seeded inputs (hand-made or random attention maps and
weight matrices: no model needed), and compares with the package's own implementation
(:mod:`mha.lab.circuit_scores`, :mod:`mha.lab.induction`,
:mod:`mha.lab.permutation`), which their own tests check on hand-made
answers. When an answer is wrong the message says which common slip it
matches (the next token instead of the previous one, the earlier copy
instead of the token after it, the paper's column-vector formula copied into
the book's row-vector convention, ...).

Conventions, as everywhere in :mod:`mha`: a map is (seq_q, seq_k), ROW =
query = the position attending FROM, COLUMN = key = the position attended
TO; vectors are rows, so a head computes ``x @ W_Q`` and writes ``z @ W_O``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch

from mha.core.geometry import ov_circuit, qk_circuit
from mha.core.validation import check_seed
from mha.lab.checkpoints import load_checkpoint
from mha.lab.circuit_scores import (
    attention_pattern_scores,
    k_composition_score,
    prefix_matching_score,
    previous_token_score,
)
from mha.lab.induction import (
    INDUCTION_CHECKPOINTS,
    PREVIOUS_TOKEN_HEAD_STEPS,
    heads_with_role,
    phase_spread_curves,
    train_fast_model,
    uniform_causal_weights,
)
from mha.lab.permutation import permute_head_weights
from mha.lab.tasks import InductionTask
from mha.lab.training import TrainingLog, steepest_drop

from .checking import (
    AnswerError,
    CheckResult,
    answer_number,
    answer_tuple,
    array_or_none,
    compare_array,
    compare_number,
    describe_difference,
    describe_value,
    matches,
    named_slip,
    one_hot_attention,
    random_attention_maps,
    run_check,
    uses_tools,
)

__all__ = [
    "check_phase_change_step",
    "check_previous_token_score",
    "check_prefix_matching_score",
    "check_k_composition",
    "check_heads_with_role",
    "check_permute_heads",
    "check_uniform_previous_token_score",
    "check_trained_previous_token_head",
    "check_induction_scores",
]


# --- helpers ---------------------------------------------------------------------------------

def _tokens_with_repeats(rng: np.random.Generator, seq: int, vocab: int) -> np.ndarray:
    """(seq,) token ids drawn from a small vocabulary so that tokens repeat, with no token twice in a row."""
    tokens = [int(rng.integers(vocab))]
    while len(tokens) < seq:
        token = int(rng.integers(vocab))
        if token != tokens[-1]:
            tokens.append(token)
    return np.array(tokens)


# --- chapter 3, section 5: induction heads ---------------------------------------------------

def check_previous_token_score(previous_token_score_fn: Callable[[np.ndarray], np.ndarray],
                               seed: int = 0) -> CheckResult:
    """``previous_token_score_fn(weights)``: weights (batch, heads, seq, seq) -> (heads,), each head's mean weight
    from a query to the token just before it, over the batch and the queries that have one."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        previous = one_hot_attention([0, 0, 1, 2, 3, 4])  # a previous-token head
        own = one_hot_attention([0, 1, 2, 3, 4, 5])  # every position attends to itself
        named = [
            ("1 sequence, 2 hand-made heads: previous token / own token", np.stack([previous, own])[None]),
            ("2 sequences, 3 random causal heads, 7 positions", random_attention_maps(rng, (2, 3, 7, 7), causal=True)),
            ("4 sequences, 4 random causal heads, 12 positions",
             random_attention_maps(rng, (4, 4, 12, 12), causal=True)),
            ("3 sequences, 1 sharp random head, 20 positions",
             random_attention_maps(rng, (3, 1, 20, 20), sharpness=5.0, causal=True)),
        ]
        for label, weights in named:
            want = previous_token_score(torch.from_numpy(weights)).numpy()  # (heads,)
            below = np.diagonal(weights, offset=-1, axis1=-2, axis2=-1)  # (batch, heads, seq - 1)
            seq = weights.shape[-1]
            slips = {
                "next": (np.diagonal(np.swapaxes(weights, -1, -2), offset=-1, axis1=-2, axis2=-1).mean(axis=(0, -1)),
                         "That is weights[i - 1, i]: rows and columns swapped. Row i is the query; the previous "
                         "token is column i - 1, just below the diagonal."),
                "own": (np.diagonal(weights, axis1=-2, axis2=-1)[..., 1:].mean(axis=(0, -1)),
                        "That is the weight of each position on itself (the main diagonal); the previous token of "
                        "row i is column i - 1."),
                "all rows": (below.sum(axis=-1).mean(axis=0) / seq,
                             "You divided by seq; row 0 has no previous token, so average over the seq - 1 rows "
                             "1..seq-1."),
            }
            yield label, (weights.copy(),), {}, (want, slips)

    return run_check(previous_token_score_fn, cases(),
                     lambda got, want: compare_array(got, want[0], want[1], "the score array", head_axis=0),
                     "computes the previous-token score")


def check_prefix_matching_score(prefix_matching_fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
                                seed: int = 0) -> CheckResult:
    """``prefix_matching_fn(weights, tokens)``: weights (heads, seq, seq) for one sequence, tokens (seq,) ->
    (heads,): for each query i whose token occurred earlier (at j < i), the weight on the keys j + 1 that
    followed those earlier copies, summed, then averaged over such queries (Olsson et al. 2022)."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def induction_map(tokens: np.ndarray) -> np.ndarray:
        # row i: all weight on the token after the most recent earlier copy of tokens[i], else on itself
        targets = []
        for i, token in enumerate(tokens):
            earlier = [j for j in range(i) if tokens[j] == token]
            targets.append(earlier[-1] + 1 if earlier else i)
        return one_hot_attention(targets)

    def duplicate_map(tokens: np.ndarray) -> np.ndarray:
        # row i: all weight on the most recent earlier copy of tokens[i] itself, else on itself
        targets = []
        for i, token in enumerate(tokens):
            earlier = [j for j in range(i) if tokens[j] == token]
            targets.append(earlier[-1] if earlier else i)
        return one_hot_attention(targets)

    def cases() -> Iterator:
        repeated = np.array([3, 7, 1, 5, 3, 7, 1, 5])  # a block, repeated: every query in the repeat has one copy
        thrice = np.array([2, 9, 4, 2, 9, 4, 2, 9, 4])  # three copies: several earlier copies per query
        random_tokens = _tokens_with_repeats(rng, 14, 5)
        named = [
            ("hand-made heads on 3 7 1 5 3 7 1 5: induction / duplicate-token / previous-token", repeated,
             np.stack([induction_map(repeated), duplicate_map(repeated),
                       one_hot_attention([0, *range(len(repeated) - 1)])])),
            ("a block of 3 tokens appearing three times: every follower of every earlier copy counts", thrice,
             np.stack([induction_map(thrice), random_attention_maps(rng, (9, 9), causal=True)])),
            ("random causal maps, 4 heads, 14 tokens from a vocabulary of 5", random_tokens,
             random_attention_maps(rng, (4, 14, 14), causal=True)),
        ]
        for label, tokens, weights in named:
            # (heads,)
            want = prefix_matching_score(torch.from_numpy(weights)[None], torch.from_numpy(tokens)[None]).numpy()
            seq = len(tokens)
            copy_keys = np.zeros((seq, seq), dtype=bool)  # (query, key): key holds an earlier copy of the query
            for i in range(seq):
                for j in range(i):
                    copy_keys[i, j] = tokens[j] == tokens[i]
            followers = np.zeros_like(copy_keys)
            followers[:, 1:] = copy_keys[:, :-1]
            scored = followers.any(axis=1)  # (seq,)
            on_copies = (weights * copy_keys).sum(-1)  # (heads, seq)
            on_followers = (weights * followers).sum(-1)  # (heads, seq)
            last = [max(np.flatnonzero(copy_keys[i]), default=-1) + 1 for i in range(seq)]  # 0: no earlier copy
            on_last_follower = weights[:, np.arange(seq), last] * scored  # (heads, seq)
            slips = {
                "copy itself": (on_copies[:, scored].mean(-1),
                                "That is the weight on the earlier COPY of the query's token (a duplicate-token "
                                "score). Prefix matching looks one step further: at the token that FOLLOWED it, "
                                "key j + 1."),
                "all queries": (on_followers.mean(-1),
                                "You averaged over every query; average only over the queries whose token occurred "
                                "earlier (the others have nothing to match)."),
                "last copy only": (on_last_follower[:, scored].mean(-1), "You counted only the token after the MOST "
                                   "RECENT earlier copy; sum the weight on the followers of every earlier copy."),
            }
            yield label, (weights.copy(), tokens.copy()), {}, (want, slips)

    return run_check(prefix_matching_fn, cases(),
                     lambda got, want: compare_array(got, want[0], want[1], "the score array", head_axis=0),
                     "computes the prefix-matching score")


def check_k_composition(k_composition_fn: Callable[..., float], seed: int = 0) -> CheckResult:
    """``k_composition_fn(W_Q, W_K, W_V, W_O)``: the later head's W_Q, W_K (d_model, d_head) and the earlier
    head's W_V (d_model, d_head), W_O (d_head, d_model) -> the K-composition score, a float, as section 3.5 defines
    it (vectors as rows); checked on head pairs that compose and pairs that do not."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        d_model, d_head = 8, 2
        eye = np.eye(d_model)
        # earlier head writes into features 0, 1; later head's keys read 0, 1 (composes) or 4, 5 (does not)
        writes_01 = (rng.normal(size=(d_model, d_head)), eye[:2] * 1.0)  # W_V, W_O (d_head, d_model)
        reads_01 = (rng.normal(size=(d_model, d_head)), eye[:, :2] * 1.0)  # W_Q, W_K (d_model, d_head)
        reads_45 = (rng.normal(size=(d_model, d_head)), eye[:, 4:6] * 1.0)
        named = [
            ("keys read exactly the features the earlier head writes", (*reads_01, *writes_01)),
            ("keys read features the earlier head never writes: the score is 0", (*reads_45, *writes_01)),
            ("random matrices, d_model = 8, d_head = 2", tuple(rng.normal(size=s) for s in
                                                               ((8, 2), (8, 2), (8, 2), (2, 8)))),
            ("random matrices, d_model = 32, d_head = 8", tuple(rng.normal(size=s) for s in
                                                                ((32, 8), (32, 8), (32, 8), (8, 32)))),
        ]
        for label, (W_Q, W_K, W_V, W_O) in named:
            torch_args = [torch.from_numpy(m) for m in (W_Q, W_K, W_V, W_O)]
            W_QK, W_OV = qk_circuit(*torch_args[:2]), ov_circuit(*torch_args[2:])
            want = k_composition_score(W_QK, W_OV)
            norms = np.linalg.norm(W_QK.numpy()) * np.linalg.norm(W_OV.numpy())
            slips = {
                "columns": (float(np.linalg.norm(W_QK.numpy() @ W_OV.numpy()) / norms),
                            "That is ||W_QK @ W_OV||: the paper's formula, written for vectors as COLUMNS, copied "
                            "as it is. With vectors as rows the earlier head writes y @ W_OV and the key score is "
                            "x_q @ W_QK @ (y @ W_OV).T, so the product is W_QK @ W_OV.T."),
                "query side": (float(np.linalg.norm(W_OV.numpy() @ W_QK.numpy()) / norms),
                               "That is W_OV @ W_QK, Q-composition: the earlier head feeding the QUERY side. "
                               "K-composition is about the keys: W_QK @ W_OV.T."),
                "no normalisation": (float(np.linalg.norm(W_QK.numpy() @ W_OV.numpy().T)),
                                     "That is the norm of the product alone; divide by ||W_QK||_F * ||W_OV||_F so "
                                     "that the score does not depend on the matrices' sizes."),
            }
            yield label, tuple(m.copy() for m in (W_Q, W_K, W_V, W_O)), {}, (want, slips)

    return run_check(k_composition_fn, cases(),
                     lambda got, want: compare_number(got, want[0], want[1], "the score", atol=1e-6),
                     "computes the K-composition score")


# --- chapter 3, section 6: heads are not preassigned -----------------------------------------

def _as_pairs(got) -> list[tuple[int, int]]:
    """The learner's list of (layer, head) pairs (a list of tuples, or np.argwhere's array) as Python int pairs."""
    array = array_or_none(got)
    flat = " A flat index would hide the layer: give each head as (layer, head)."
    if array is not None and array.ndim == 2 and array.shape[1] == 2:  # np.argwhere / torch.nonzero
        got = list(array)
    if not isinstance(got, (list, tuple)):
        hint = flat if array is not None and array.ndim <= 1 and array.dtype.kind in "iu" else ""
        raise AnswerError(f"return a list of (layer, head) pairs, e.g. [(0, 3)], got {describe_value(got)}.{hint}")
    pairs = []
    for entry in got:
        if (not isinstance(entry, (tuple, list, np.ndarray, torch.Tensor)) or getattr(entry, "ndim", 1) != 1
                or len(entry) != 2):
            hint = flat if array_or_none(entry) is not None and array_or_none(entry).size == 1 else ""
            raise AnswerError(f"each entry should be a (layer, head) pair, e.g. (0, 3); one is "
                              f"{describe_value(entry)}.{hint}")
        pairs.append(tuple(answer_number(v, "a layer or head index", whole=True) for v in entry))
    return pairs


def check_heads_with_role(heads_with_role_fn: Callable[[np.ndarray, float], list], seed: int = 0) -> CheckResult:
    """``heads_with_role_fn(scores, threshold)``: scores (layers, heads) -> the list of every (layer, head) whose
    score is above ``threshold``, in (layer, head) order."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        one = np.array([[0.08, 0.09, 0.09, 0.86], [0.04, 0.04, 0.04, 0.04]])
        several = np.array([[0.62, 0.72, 0.84, 0.76], [0.08, 0.08, 0.08, 0.08]])
        random_scores = rng.uniform(size=(3, 6))
        reordered = "These are case 1's scores with the heads reordered: find heads by their score, not by index."
        named = [
            ("one previous-token head, at index 3", one, 0.5, ""),
            ("the same scores with the heads in another order", one[:, [3, 0, 1, 2]], 0.5, reordered),
            ("all four heads of layer 0 pass", several, 0.5, ""),
            ("no head passes", several, 0.9, "When no score is above the threshold, return an empty list."),
            ("random scores, 3 layers x 6 heads, threshold 0.3", random_scores, 0.3, ""),
            ("a score of exactly 0.5 is not above 0.5", np.array([[0.5, 0.75], [0.25, 0.5]]), 0.5, ""),
        ]
        for label, scores, threshold, hint in named:
            want = heads_with_role(torch.from_numpy(scores), threshold)
            yield label, (scores.copy(), threshold), {}, (want, scores, threshold, hint)

    def compare(got, expected) -> str | None:
        want, scores, threshold, hint = expected
        as_pairs = _as_pairs(got)
        if as_pairs == want:
            return None
        at_or_above = [(int(l), int(h)) for l, h in np.argwhere(scores >= threshold)]
        best = [tuple(int(v) for v in np.unravel_index(np.argmax(scores), scores.shape))]
        if as_pairs == at_or_above:
            return (f"you returned {as_pairs}, expected {want}: a score equal to the threshold is not ABOVE it "
                    f"(use >, not >=).")
        if sorted(as_pairs) == want:
            return f"you returned {as_pairs}: the right heads, but list them in (layer, head) order: {want}."
        if as_pairs == best and len(want) != 1:
            return (f"you returned only the best head {as_pairs}; every head above the threshold has the role "
                    f"(expected {want}). Several heads can share a role, or none.")
        return f"you returned {as_pairs}, expected {want}. {hint}".rstrip()

    return run_check(heads_with_role_fn, cases(), compare, "finds the heads by score")


def check_permute_heads(permute_heads_fn: Callable, seed: int = 0) -> CheckResult:
    """``permute_heads_fn(W_Q, W_K, W_V, W_O, order)``: all (d_model, d_model) -> the four matrices with the heads
    reordered so that new head k is old head order[k] (n_heads = len(order))."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for label, d_model, order in (
            ("2 heads swapped, d_model = 4", 4, [1, 0]),
            ("4 heads, order [3, 0, 1, 2], d_model = 8", 8, [3, 0, 1, 2]),
            ("4 heads, order [2, 3, 1, 0] (not its own inverse), d_model = 12", 12, [2, 3, 1, 0]),
            ("3 heads left as they are, d_model = 9", 9, [0, 1, 2]),
        ):
            matrices = tuple(rng.normal(size=(d_model, d_model)) for _ in range(4))
            want = permute_head_weights(*matrices, order)
            yield label, (*(m.copy() for m in matrices), list(order)), {}, (want, matrices, order)

    def compare(got, expected) -> str | None:
        want, matrices, order = expected
        got = answer_tuple(got, ("W_Q", "W_K", "W_V", "W_O"), "the four matrices as a tuple")
        n_heads, d_model = len(order), matrices[0].shape[0]
        d_head = d_model // n_heads
        inverse = list(np.argsort(order))
        names = ("W_Q", "W_K", "W_V", "W_O")
        for name, got_matrix, want_matrix, original in zip(names, got, want, matrices, strict=True):
            problem = describe_difference(name, got_matrix, want_matrix)
            if problem is None:
                continue
            if name == "W_O":
                columns = [old * d_head + f for old in order for f in range(d_head)]
                if matches(got_matrix, original[:, columns]):
                    return (f"{problem} You moved the COLUMNS of W_O. Head k owns a block of d_head ROWS of W_O "
                            f"(it writes z_k @ W_O[k*d_head:(k+1)*d_head]); its columns are the d_model output "
                            f"features, shared by all heads.")
            if order != inverse:
                inverse_want = permute_head_weights(*matrices, inverse)[names.index(name)]
                if matches(got_matrix, inverse_want):
                    return (f"{problem} You applied the inverse order: old head k went to position order[k]. "
                            f"The new head k should be the old head order[k].")
            if matches(got_matrix, original):
                return f"{problem} {name} is unchanged: its blocks of d_head features belong to the heads and move too."
            return problem
        return None

    return run_check(permute_heads_fn, cases(), compare, "reorders the heads without changing the layer's output")


def check_uniform_previous_token_score(uniform_score_fn: Callable[[int], float], seed: int = 0) -> CheckResult:
    """``uniform_score_fn(seq)``: the previous-token score of a causal head that spreads its weight evenly over
    every position it may see (itself and all earlier ones), on a sequence of ``seq`` positions."""
    seed = check_seed("seed", seed)
    lengths = (2, 3, 5, 10, 40) if seed == 0 else tuple(int(n) for n in np.random.default_rng(seed).integers(2, 200, 5))

    def cases() -> Iterator:
        for seq in lengths:
            want = float(previous_token_score(uniform_causal_weights(seq).double())[0])
            slips = {
                "not causal": (1 / seq, "1 / seq is a head that spreads over ALL positions, later ones included; "
                               "a causal query i sees only the i + 1 positions 0..i, so its weight on i - 1 is "
                               "1 / (i + 1)."),
                "1/i": (float(np.mean([1 / i for i in range(1, seq)])),
                        "Query i sees i + 1 positions (0..i, itself included), so each gets 1 / (i + 1), not 1 / i."),
                "row 0": (float(sum(1 / (i + 1) for i in range(1, seq)) / seq),
                          "You divided by seq; query 0 has no previous token, so average over the seq - 1 queries "
                          "1..seq-1."),
            }
            yield f"seq = {seq}", (seq,), {}, (want, slips)

    return run_check(uniform_score_fn, cases(),
                     lambda got, want: compare_number(got, want[0], want[1], "the chance level", atol=1e-6),
                     "computes the chance level of the previous-token score")


# --- Induction heads: the phase change of real training runs ------------------------------------------

def check_phase_change_step(phase_change_step: Callable, seed: int = 0) -> CheckResult:
    """``fn(steps (n,) ints, losses (n,) floats, window_steps int) -> int``: the logged step midway through the
    ``window_steps`` of training where the loss falls most, on real training runs (3.5)."""
    rng = np.random.default_rng(check_seed("seed", seed))
    curves = phase_spread_curves()

    def cases() -> Iterator:
        for index, window in zip(rng.choice(len(curves), size=4, replace=False), (200, 400, 200, 600), strict=True):
            d_model, rate, run_seed, steps, losses = curves[index]
            label = (f"the held-out repeat loss of a run with d_model {d_model}, learning rate {rate:g}, seed "
                     f"{run_seed} ({len(steps)} rows, every {steps[1] - steps[0]} steps), window {window}")
            yield label, (list(steps), list(losses), window), {}, (steps, losses, window)

    def compare(got, case) -> str | None:
        steps, losses, window = case

        def steepest(values, window_steps) -> int:
            rows = [{"step": s, "repeat_loss": v} for s, v in zip(steps, values, strict=True)]
            return int(steepest_drop(TrainingLog(rows=rows), "repeat_loss", window_steps=window_steps)["step"])

        want = steepest(losses, window)
        at, half = steps.index(want), window // (steps[1] - steps[0]) // 2
        slips = {
            "start": (steps[max(at - half, 0)], "That is where the steepest window STARTS; return its middle."),
            "end": (steps[min(at + half, len(steps) - 1)], "That is where the steepest window ENDS; return "
                    "its middle."),
            "index": (at, "That is the row's position in the list; return its step."),
            "neighbours": (steepest(losses, steps[1] - steps[0]), "That compares neighbouring rows only; compare "
                           "rows window_steps apart, so one noisy evaluation is not taken for the phase change."),
            "rise": (steepest([-v for v in losses], window), "That is where the loss RISES most: a fall is the "
                     "loss at the window's start minus the loss at its end."),
        }
        return compare_number(got, want, {name: slip for name, slip in slips.items() if slip[0] != want}, "the step")

    return run_check(phase_change_step, cases(), compare, "finds the phase change on real training runs")


# --- Induction heads: a head found on a model the learner's own code trains or loads -------------------

NEAR_BEST = 0.05  # a head within this of the best score is right too: two heads can share a role
GENERIC_SLIPS = (
    (lambda layer, head, shape: divmod(layer * shape[1] + head, shape[0]), "That is the flat argmax unravelled with "
     "the wrong size: index i of the flattened (layers, heads) array is (i // n_heads, i % n_heads)."),
    (lambda layer, head, shape: (head, layer), "That is (head, layer); return (layer, head), the layer first."))


def _head_answer(got, scores: np.ndarray, slips: dict, role: str) -> str | None:
    """None when ``got`` is a (layer, head) whose ``role`` score (``scores``, (layers, heads)) is within NEAR_BEST of
    the best; else what is wrong, naming a slip: of ``slips`` (name -> ((layer, head), hint)) or GENERIC_SLIPS."""
    pair = tuple(answer_number(v, "a layer or head index", whole=True) for v in answer_tuple(got, ("layer", "head")))
    near_best = heads_with_role(torch.from_numpy(scores), float(scores.max()) - NEAR_BEST)
    accepted = sorted(near_best, key=lambda at: -scores[at])  # the best first
    if pair in accepted:
        return None
    named = {tuple(int(i) for i in at) for at, _ in slips.values()}  # a specific slip wins over a generic one
    slips = {**slips, **{(k, at): (slip(*at, scores.shape), text) for k, (slip, text) in enumerate(GENERIC_SLIPS)
                         for at in accepted if tuple(slip(*at, scores.shape)) not in named}}
    slips = {name: (np.array(at), text) for name, (at, text) in slips.items() if tuple(at) not in accepted}
    hint, (layers, heads) = named_slip(np.array(pair), slips), scores.shape
    score = f"its {role} score is {scores[pair]:.2f}" if 0 <= pair[0] < layers and 0 <= pair[1] < heads \
        else f"the model has layers 0..{layers - 1} and heads 0..{heads - 1}"
    others = f" (or {', '.join(map(str, accepted[1:]))}, within {NEAR_BEST})" if len(accepted) > 1 else ""
    return f"you returned {pair}; {score}, but the best head is {accepted[0]}{others} with {scores.max():.2f}. " \
        + (hint or "")


def _fast_model_scores(train_seed: int, steps: int) -> dict:
    """The reference: the fast model trained here from ``train_seed``, its heads scored on a batch of the task. Not
    cached: the grader times a case against this work, and two hidden seeds may draw the same training seed."""
    return attention_pattern_scores(train_fast_model(train_seed, steps), InductionTask().sample(128, train_seed).inputs)


@uses_tools("mha.lab.training", "mha.lab.tiny_model", "mha.lab.tasks", "mha.lab.induction")
def check_trained_previous_token_head(previous_token_head: Callable, seed: int = 0) -> CheckResult:
    """``fn(seed, steps) -> (layer, head)``: train :func:`mha.lab.induction.train_fast_model`'s model from ``seed``
    for ``steps`` steps and return its head with the highest previous-token score on a batch of the task (3.5)."""
    seeds = [0] if not check_seed("seed", seed) else [int(np.random.default_rng(seed).integers(8, 200))]  # trains once
    cases = ((f"the fast model trained from seed {train_seed} for {PREVIOUS_TOKEN_HEAD_STEPS} steps",
              (train_seed, PREVIOUS_TOKEN_HEAD_STEPS), {}, train_seed) for train_seed in seeds)

    def compare(got, train_seed) -> str | None:
        scores = _fast_model_scores(train_seed, PREVIOUS_TOKEN_HEAD_STEPS)
        previous = scores["previous_token"]  # (layers, heads)
        return _head_answer(got, previous, {
            "own token": (np.unravel_index(scores["own_token"].argmax(), previous.shape), "That head looks at the "
                          "query's OWN token (the main diagonal); the previous token of row i is column i - 1."),
            "layer 1": ((1, int(previous[1].argmax())), "You searched layer 1 only; search every layer (the "
                        "previous-token head forms in layer 0).")}, "previous-token")

    return run_check(previous_token_head, cases, compare, "trains a model and finds its previous-token head")


@uses_tools("mha.lab.checkpoints", "mha.lab.tasks", "mha.lab.tiny_model")
def check_induction_scores(induction_scores: Callable, seed: int = 0) -> CheckResult:
    """``fn(name, seed) -> (layers, heads)``: load the stored checkpoint ``name``, run it on
    ``InductionTask().held_out().sample(256, seed)`` and return every head's prefix-matching score (3.5)."""
    rng = np.random.default_rng(check_seed("seed", seed))
    names = INDUCTION_CHECKPOINTS[:2] if not seed else rng.choice(INDUCTION_CHECKPOINTS[2:], 2, replace=False).tolist()
    cases = ((f"checkpoint {name!r}, batch seed {batch}", (name, batch), {}, (name, batch))
             for name, batch in zip(names, rng.integers(1000, size=2).tolist() if seed else (0, 0), strict=True))

    def compare(got, case) -> str | None:
        tokens = InductionTask().held_out().sample(256, case[1]).inputs
        scores = attention_pattern_scores(load_checkpoint(case[0])[0], tokens)
        counted = float((tokens[:, :, None] == tokens[:, None, :]).tril(-1).any(-1).float().mean())  # has a copy
        return compare_array(got, scores["prefix_matching"], {
            "copy itself": (scores["duplicate_token"], "These are the weights on the earlier COPY of the query's "
                            "token; prefix matching scores the key that FOLLOWED it (shift the mask one key right)."),
            "previous token": (scores["previous_token"], "These are previous-token scores (weight on key i - 1); an "
                               "induction head looks one key after an earlier copy."),
            "every query": (scores["prefix_matching"] * counted, "You averaged over every query; average only over "
                            "the queries whose token occurred earlier (the others have nothing to match).")},
            "the prefix-matching scores", atol=1e-4)

    return run_check(induction_scores, cases, compare, "scores every head of a stored model for induction")
