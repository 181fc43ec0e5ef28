"""Checks for the exercises of sections 3.1 "A tour of all 72 heads" and 3.2 "Syntax: heads that follow
grammatical relations".

:func:`check_held_out_relation_head` (3.2) draws its cases from the real model instead: all-MiniLM-L6-v2's relation
hits on UD English-EWT dev sentences drawn with the check's ``seed``
(:func:`~mha.analysis.head_roles.seeded_sentences.treebank_relation_hits`), so the hidden variants are other
sentences; the learner's function receives arrays, but that of :func:`check_model_previous_token_share` (3.1) and
:func:`check_model_pair_accuracy` (3.2) receives the encoder and runs it itself.

Each ``check_*`` takes the learner's function, runs it on small seeded attention maps whose answers are known, and
compares with the package's own implementation (:func:`mha.analysis.head_roles.role_table.head_role_table`,
:func:`mha.corpora.baselines.fixed_offset_baseline`, :func:`mha.pretrained.word_maps.word_attention`),
which ``tests/analysis/head_roles/test_role_table.py`` and ``tests/pretrained/test_word_maps.py`` test on hand-made
maps. When an answer is wrong the message also says which common slip it matches (the next token instead of the
previous one, a row read instead of a column, a mean instead of a sum ...).

Convention, as everywhere in :mod:`mha`: a map is (seq_q, seq_k), ROW = query = the token attending FROM, COLUMN =
key = the token attended TO, and each row sums to 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from mha.analysis.head_roles import seeded_sentences
from mha.analysis.head_roles import synthetic_scores as synthetic
from mha.analysis.head_roles.role_table import head_role_table
from mha.analysis.head_roles.seeded_sentences import RELATIONS, treebank_relation_hits
from mha.core.validation import check_seed
from mha.corpora.baselines import fixed_offset_baseline
from mha.pretrained.corpus_encoding import encode_records
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.word_maps import word_attention

from .checking import (
    CheckResult,
    answer_number,
    answer_tuple,
    array_or_none,
    compare_array,
    compare_number,
    describe_value,
    named_slip,
    one_hot_attention,
    random_attention_maps,
    run_check,
    uses_tools,
)

__all__ = [
    "check_previous_token_share",
    "check_special_token_share",
    "check_is_positional",
    "check_distance_matched_lift",
    "check_held_out_relation_head",
    "check_relation_accuracy",
    "check_best_offset",
    "check_word_attention",
    "check_model_previous_token_share",
    "check_model_pair_accuracy",
]


# --- chapter 3, section 1: a tour of all 72 heads --------------------------------------------

def check_previous_token_share(previous_token_share: Callable[[np.ndarray], float], seed: int = 0) -> CheckResult:
    """``previous_token_share(weights)``: one (seq, seq) map -> a float, the mean weight a row puts on the token just
    before it, over the rows that have one."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        named = [
            ("a previous-token head: row i puts all its weight on column i-1", one_hot_attention([0, 0, 1, 2, 3, 4])),
            ("a next-token head: row i puts all its weight on column i+1", one_hot_attention([1, 2, 3, 4, 5, 5])),
            ("a random 5 x 5 map", random_attention_maps(rng, (5, 5))),
            ("a random 9 x 9 map", random_attention_maps(rng, (9, 9))),
            ("a random 14 x 14 map", random_attention_maps(rng, (14, 14))),
        ]
        for label, weights in named:
            want = float(synthetic.one_head_table([weights])["prev_token_share"])
            below = np.diagonal(weights, offset=-1)  # weights[i, i-1], i = 1..seq-1
            above = np.diagonal(weights, offset=1)  # weights[i, i+1]
            slips = {
                "next": (float(above.mean()), "That is the weight on column i+1, the NEXT token (or the previous-token "
                         "diagonal read with rows and columns swapped). Rows attend FROM: token i looks back at column "
                         "i-1."),
                "all rows": (float(below.sum() / len(weights)), "You divided by seq; row 0 has no previous token, so "
                             "average over the seq - 1 rows 1..seq-1."),
                "sum": (float(below.sum()), "That is a sum; the share is the mean over rows 1..seq-1."),
                "same": (float(np.diagonal(weights).mean()), "That is the weight of each token on itself (the main "
                         "diagonal); the previous token of row i is column i-1, just below the diagonal."),
            }
            yield label, (weights.copy(),), {}, (want, slips)

    return run_check(previous_token_share, cases(),
                     lambda got, want: compare_number(got, want[0], want[1], "the share"),
                     "computes the previous-token share")


def check_special_token_share(special_token_share: Callable[[np.ndarray, Sequence[str], str], float],
                              seed: int = 0) -> CheckResult:
    """``special_token_share(weights, tokens, special)``: mean over ALL rows of the weight on columns whose token is
    ``special``."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        one = ["[CLS]", "the", "dog", "sleeps", ".", "[SEP]"]
        two = ["[CLS]", "it", "rains", ".", "[SEP]", "we", "stay", "in", ".", "[SEP]"]
        for label, tokens, special, weights in (
            ("one sentence, share to [CLS]", one, "[CLS]", random_attention_maps(rng, (len(one), len(one)))),
            ("one sentence, share to [SEP]", one, "[SEP]", random_attention_maps(rng, (len(one), len(one)))),
            ("two segments, share to [CLS]", two, "[CLS]", random_attention_maps(rng, (len(two), len(two)))),
            ("two segments: [SEP] appears twice, both columns count", two, "[SEP]",
             random_attention_maps(rng, (len(two), len(two)))),
            ("two segments, share to '.' (twice)", two, ".", random_attention_maps(rng, (len(two), len(two)))),
        ):
            options = {"cls_token": special} if special != "[SEP]" else {}
            column = "cls_share" if special != "[SEP]" else "sep_share"
            want = float(synthetic.one_head_table([weights], [tokens], **options)[column])
            columns = [j for j, t in enumerate(tokens) if t == special]
            content_rows = [i for i, t in enumerate(tokens) if not t.startswith("[")]
            slips = {
                "row": (float(weights[columns[0]].mean()),
                        "That is the mean of the special token's ROW (where it attends FROM). The share it receives is "
                        "in its COLUMN: weights[:, j]."),
                "first only": (float(weights[:, columns[0]].mean()), f"{special} appears {len(columns)} times; add "
                               "the weight on every column that holds it."),
                "sum": (float(weights[:, columns].sum()), "That is a sum over rows; the share is the mean over rows."),
                "content rows": (float(weights[np.ix_(content_rows, columns)].sum(axis=-1).mean()),
                                 "You averaged over the word rows only; average over all rows, [CLS] and [SEP] "
                                 "included, as the role table does."),
            }
            if len(columns) == 1:
                slips.pop("first only")
            yield label, (weights.copy(), list(tokens), special), {}, (want, slips)

    return run_check(special_token_share, cases(),
                     lambda got, want: compare_number(got, want[0], want[1], "the share"),
                     "computes the share of attention a special token receives")


def check_is_positional(is_positional: Callable[[Sequence[np.ndarray]], bool], seed: int = 0) -> CheckResult:
    """``is_positional(maps)``: one head's maps over several sentences -> True when, pooling all rows, the
    previous token (rows 1..seq-1) or the next token (rows 0..seq-2) is the row's largest weight in >= 90%
    of rows (Voita et al. 2019)."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def previous_head(seq: int, miss_rows: Sequence[int] = (), spread: float = 0.0) -> np.ndarray:
        # argmax of row i on column i-1 (row 0 on itself); rows in miss_rows put their maximum elsewhere
        targets = [0] + list(range(seq - 1))
        weights = one_hot_attention(targets) * (1 - spread) + spread / seq
        for row in miss_rows:
            weights[row] = one_hot_attention([(row + 2) % seq] * seq)[0] * (1 - spread) + spread / seq
        return weights

    def cases() -> Iterator:
        named = [
            ("a previous-token head on sentences of 5 and 6 tokens (row 0 has no previous token)",
             [previous_head(5), previous_head(6)]),
            ("a next-token head (the largest weight of row i is on column i+1)",
             [one_hot_attention([*range(1, n), n - 1]) for n in (6, 8)]),
            ("the largest weight is always on the previous token, but only 0.4 of it: argmax, not share, decides",
             [previous_head(12, spread=0.6), previous_head(10, spread=0.6)]),
            ("the previous token wins in 17 of 20 rows (85%): below the 90% threshold",
             [previous_head(11, miss_rows=(3, 7)), previous_head(11, miss_rows=(5,))]),
            ("half the rows look back, half look forward: neither direction reaches 90%",
             [one_hot_attention([min(i + 1, n - 1) if i % 2 else max(i - 1, 0) for i in range(n)]) for n in (9, 12)]),
            ("random maps", [random_attention_maps(rng, (7, 7)), random_attention_maps(rng, (10, 10))]),
        ]
        for label, maps in named:
            want = bool(synthetic.one_head_table(maps)["positional"])
            yield label, ([m.copy() for m in maps],), {}, (want, _positional_slips(maps))

    def compare(got, expected) -> str | None:
        (want, slips), answer = expected, got
        if not isinstance(answer, (bool, np.bool_)):
            return f"return True or False, got {describe_value(answer)}."
        if bool(answer) == want:
            return None
        hint = named_slip(answer, slips)
        return (f"you said {bool(answer)}, the answer is {want}. A head is positional when the argmax of a row is on "
                "the previous token (rows 1..seq-1) or on the next token (rows 0..seq-2) in at least 90% of the rows "
                "of all sentences pooled; count each direction on its own." + (f" {hint}" if hint else ""))

    return run_check(is_positional, cases(), compare, "classifies positional heads")


def _positional_slips(maps: Sequence[np.ndarray]) -> dict[str, tuple[bool, str]]:
    """Voita et al.'s rule applied the classic wrong ways to ``maps``: each slip's verdict and how to fix it."""
    rows = sum(len(m) - 1 for m in maps)
    hits = [sum(int((m.argmax(1)[max(-d, 0):len(m) - max(d, 0)] == np.arange(len(m) - 1) + max(d, 0)).sum())
                for m in maps) for d in (-1, 1)]  # (previous, next) hits
    shares = [sum(np.diagonal(m, offset=d).sum() for m in maps) / rows for d in (-1, 1)]
    return {
        "share": (max(shares) >= 0.9, "You compared the mean WEIGHT on the neighbour with 0.9; the rule counts the "
                  "rows whose largest weight (argmax) is on it, however large that weight is."),
        "both directions": ((hits[0] + hits[1]) / rows >= 0.9, "You added the previous-token and next-token hits; "
                            "count each direction on its own: one of the two shares must reach 0.9."),
        "every row": (max(hits) / sum(len(m) for m in maps) >= 0.9, "You divided by every row; row 0 has no "
                      "previous token (and the last row no next one), so divide by the seq - 1 rows that could hit."),
    }


# --- chapter 3, section 2: syntax ----------------------------------------------------------

def check_relation_accuracy(relation_accuracy: Callable[[Sequence[np.ndarray], Sequence, str], float],
                            seed: int = 0) -> CheckResult:
    """``relation_accuracy(word_maps, pairs, direction)``: share of gold pairs, pooled over sentences, whose
    row's largest weight (a word's own column excluded) is on the other word of the pair. ``pairs[s]`` lists
    (source, target) word indices of sentence s; ``"source_to_target"`` reads the source's row."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for label, sizes, direction, boost in (
            ("3 sentences, source row -> target column", (6, 8, 5), "source_to_target", 0.0),
            ("3 sentences, target row -> source column", (6, 8, 5), "target_to_source", 0.0),
            ("maps with a strong diagonal: a word's own column must not count", (7, 9, 6), "source_to_target", 8.0),
            ("4 sentences with different numbers of pairs", (5, 10, 7, 8), "target_to_source", 1.0),
        ):
            maps, pairs = [], []
            for n in sizes:
                weights = random_attention_maps(rng, (n, n), diagonal_boost=boost, sharpness=1.0)
                # make the gold word win in about half the rows, so the accuracy is not trivially 0
                chosen = rng.choice(n - 1, size=max(1, n // 3), replace=False)
                sentence_pairs = [(int(s), int(s) + 1 + int(rng.integers(0, min(2, n - 1 - s)))) for s in chosen]
                sentence_pairs = [(s, t) for s, t in sentence_pairs if t < n and t != s]
                for s, t in sentence_pairs:
                    row, col = (s, t) if direction == "source_to_target" else (t, s)
                    if rng.random() < 0.5:
                        weights[row, col] += 0.5
                        weights[row] /= weights[row].sum()
                maps.append(weights)
                pairs.append(sentence_pairs)
            want = synthetic.relation_accuracy_on_maps(maps, pairs, direction)
            other = "target_to_source" if direction == "source_to_target" else "source_to_target"
            n_pairs = sum(len(p) for p in pairs)
            per_sentence = float(np.mean([synthetic.relation_accuracy_on_maps([m], [p], direction)
                                          for m, p in zip(maps, pairs, strict=True) if p]))
            slips = {
                "self": (synthetic.relation_accuracy_on_maps(maps, pairs, direction, ignore_self=False),
                         "A word's own column took part in the argmax: exclude it (e.g. set the diagonal to -inf)."),
                "direction": (synthetic.relation_accuracy_on_maps(maps, pairs, other), f"That is the accuracy in "
                              f"the other direction ({other}): with {direction} read the "
                              f"{'source' if direction == 'source_to_target' else 'target'} word's ROW."),
                "per sentence": (per_sentence, f"You averaged per-sentence accuracies; pool all {n_pairs} pairs "
                                 "and divide the hits by the number of pairs."),
            }
            yield label, ([m.copy() for m in maps], [list(p) for p in pairs], direction), {}, (want, slips)

    return run_check(relation_accuracy, cases(),
                     lambda got, want: compare_number(got, want[0], want[1], "the accuracy"),
                     "scores a head on a relation")


def check_best_offset(best_offset: Callable[..., tuple[float, int]], seed: int = 0) -> CheckResult:
    """``best_offset(pairs, direction, offsets=range(-5, 6))`` -> (accuracy, offset): the fixed offset that most
    often lands on the gold word. For ``"source_to_target"`` the guess for the source at i is the word at
    i + offset; for ``"target_to_source"`` the guess for the target at j is j + offset. 0 is never a guess;
    ties go to the smallest |offset|, then the negative one. A seed other than 0 draws other sentences."""

    def cases() -> Iterator:
        for label, pairs, direction, offsets in synthetic.random_offset_cases(seed) if check_seed("seed", seed) else (
            ("determiner-like pairs: the noun mostly follows", [(0, 1), (3, 4), (2, 4), (5, 6), (1, 2)],
             "source_to_target", None),
            ("the same pairs read from the target: the sign flips", [(0, 1), (3, 4), (2, 4), (5, 6), (1, 2)],
             "target_to_source", None),
            ("object-like pairs two words apart", [(1, 3), (2, 4), (4, 5), (0, 2), (6, 9)], "source_to_target", None),
            ("a tie between +1 and -1 goes to -1", [(2, 3), (5, 4), (7, 8), (9, 8)], "source_to_target", None),
            ("the most common gap (+7) is outside the offsets tried", [(0, 7), (1, 8), (2, 9), (3, 5), (4, 6)],
             "source_to_target", tuple(range(-3, 4))),
        ):
            sentences = [synthetic.placeholder_sentence(max(max(p) for p in pairs) + 1, pairs)]
            kwargs = {} if offsets is None else {"offsets": offsets}
            want = fixed_offset_baseline(sentences, "det_noun", direction, **kwargs)
            flipped = fixed_offset_baseline(sentences, "det_noun",
                                            synthetic.DIRECTIONS[direction == "source_to_target"], **kwargs)
            gaps = [t - s if direction == "source_to_target" else s - t for s, t in pairs]
            slips = {
                "flipped": (flipped[1], f"the sign is flipped. With {direction} the guess is read from the "
                            f"{direction.split('_')[0]} word: offset = (guessed word) - (word whose row is read)."),
                "ties": (max(sorted((k for k in offsets or range(-5, 6) if k), key=lambda k: (abs(k), -k)),
                             key=gaps.count), "a tie goes to the smallest |offset|, then to the NEGATIVE one: sort "
                         "the candidates by (|k|, k) before taking the most common."),
                "outside": (max(sorted(set(gaps), key=lambda k: (abs(k), k)), key=gaps.count), "that gap is not "
                            "among `offsets`: choose only among the offsets you are given (0 excluded)."),
            }
            yield label, ([tuple(p) for p in pairs], direction), kwargs, (want, slips)

    def compare(got, want) -> str | None:
        (accuracy, offset), slips = want
        got_accuracy, got_offset = answer_tuple(got, ("accuracy", "offset"))
        got_offset = answer_number(got_offset, "the offset")
        if got_offset != offset:
            hint = named_slip(got_offset, slips)
            return f"you chose offset {got_offset:+g}, the answer is {offset:+d}" + (
                f": {hint}" if hint else " (ties: smallest |offset|, then negative).")
        percentage = (100 * accuracy, "Give a fraction between 0 and 1, not a percentage.")
        problem = compare_number(got_accuracy, accuracy, {"percentage": percentage}, "its accuracy", atol=1e-9)
        return None if problem is None else f"offset {offset:+d} is right, but {problem}"

    return run_check(best_offset, cases(), compare, "finds the best fixed-offset baseline")


def check_word_attention(merge: Callable[[np.ndarray, Sequence[int | None]], np.ndarray], seed: int = 0) -> CheckResult:
    """``merge(weights, word_ids)``: token map (seq, seq) -> word map (words, words): the columns of a word's
    pieces are SUMMED (attention received), their rows AVERAGED (attention sent), special tokens (word id
    None) dropped (Clark et al. 2019)."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for label, word_ids in (
            ("one piece per word", [None, 0, 1, 2, 3, None]),
            ("'unbelievable' in three pieces", [None, 0, 1, 1, 1, 2, None]),
            ("two split words", [None, 0, 0, 1, 2, 2, 3, None]),
            ("two segments", [None, 0, 1, 1, None, 2, 3, 3, 3, None]),
        ):
            weights = random_attention_maps(rng, (len(word_ids), len(word_ids)))
            want = word_attention(weights, word_ids)
            ids = np.array([-1 if w is None else w for w in word_ids])
            n_words = ids.max() + 1
            pieces = [np.flatnonzero(ids == w) for w in range(n_words)]
            mean_columns = np.array([[weights[np.ix_(r, c)].mean() for c in pieces] for r in pieces])  # (words, words)
            sum_rows = np.array([[weights[np.ix_(r, c)].sum() for c in pieces] for r in pieces])  # (words, words)
            yield label, (weights.copy(), list(word_ids)), {}, (want, {
                "mean columns": (mean_columns, "The columns of a word's pieces must be SUMMED: attending to any "
                                 "piece is attending to the word."),
                "sum rows": (sum_rows, "The rows of a word's pieces must be AVERAGED, so each word's row is still a "
                             "distribution (it would otherwise sum to the number of pieces)."),
            })

    def compare(got, want) -> str | None:
        expected, slips = want
        problem = compare_array(got, expected, slips, "the word map")
        got_array = array_or_none(got)
        if (problem is not None and got_array is not None and got_array.ndim == 2
                and got_array.shape[0] > expected.shape[0]):
            problem += " Drop the special tokens ([CLS], [SEP]: word id None)."
        return problem

    return run_check(merge, cases(), compare, "merges word pieces into words")


def check_distance_matched_lift(lift: Callable[[np.ndarray, int, int], float], seed: int = 0) -> CheckResult:
    """``lift(weights, first, second)``: one (n, n) word map and a pair of word indices, ``first`` < ``second`` ->
    a float, the pair's weight against the head's mean weight at the same distance (3.1, bridging heads)."""
    from mha.analysis.head_roles.long_range import WordPair, distance_baseline, pair_lifts

    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        named = [
            ("a previous-word head, a pair one word apart", one_hot_attention([0, 0, 1, 2, 3, 4]), 2, 3),
            ("a random 6 x 6 map, a pair three words apart", random_attention_maps(rng, (6, 6)), 1, 4),
            ("a random 9 x 9 map, a pair five words apart", random_attention_maps(rng, (9, 9)), 2, 7),
            ("a random 12 x 12 map, a pair two words apart", random_attention_maps(rng, (12, 12)), 8, 10),
        ]
        for label, weights, first, second in named:
            maps = weights[None, None]  # (1, 1, n, n)
            baseline = distance_baseline([maps])
            want = float(pair_lifts([maps], [WordPair(0, first, second, "pair")], baseline)[1][0, 0, 0])
            d, n = second - first, len(weights)
            ahead = np.diagonal(weights, offset=d).mean()  # rows q, columns q + d
            slips = {
                "transposed": (float(weights[first, second] - ahead), "That reads the EARLIER word's row (looking "
                               "ahead). Rows attend FROM: the later word's row is weights[second], its column first."),
                "no baseline": (float(weights[second, first]), "That is the raw weight; subtract what the head gives "
                                "any word d positions back, the mean of np.diagonal(weights, offset=-d)."),
                "both ways": (float(weights[second, first] - (np.diagonal(weights, offset=-d).sum()
                                                              + np.diagonal(weights, offset=d).sum()) / (2 * (n - d))),
                              "Your baseline mixes looking back and looking ahead; the pair looks back, so compare "
                              "with the diagonal below the main one only (offset=-d)."),
                "uniform": (float(weights[second, first] - 1 / n), "1/n is uniform attention; the baseline is this "
                            "head's own mean weight at distance d, which falls with distance."),
            }
            yield label, (weights.copy(), first, second), {}, (want, slips)

    return run_check(lift, cases(), lambda got, want: compare_number(got, want[0], want[1], "the lift"),
                     "computes the distance-matched lift")


# --- real cases: the model on treebank sentences drawn by the seed (3.2) -----------------------------

def check_held_out_relation_head(held_out_relation_head: Callable, seed: int = 0) -> CheckResult:
    """``fn(hits (sentences, layers, heads), pairs (sentences,), selection, held_out) -> (layer, head, selection
    accuracy, held-out accuracy)``, on the real model's hits for one relation on treebank sentences (3.2)."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:  # the model's hits are counted once run_check has seen a function to check
        counts = treebank_relation_hits(seed)
        n = len(counts)
        for case, relation in enumerate(rng.choice(RELATIONS, size=4, replace=False)):
            r = counts.relations.index(str(relation))
            hits, pairs = counts.hits[:, r], counts.pairs[:, r]  # (sentences, layers, heads), (sentences,)
            order = rng.permutation(n)
            cut = (n // 2, 3 * n // 8, 5 * n // 8, n // 2)[case]  # halves of different sizes
            selection, held_out = np.sort(order[:cut]), np.sort(order[cut:])
            label = (f"the model's {relation} hits on {n} treebank sentences, {len(selection)} to choose on, "
                     f"{len(held_out)} held out")
            yield label, (hits.copy(), pairs.copy(), selection.copy(), held_out.copy()), {}, \
                (hits, pairs, selection, held_out)

    def compare(got, case) -> str | None:
        hits, pairs, selection, held_out = case
        n_heads = hits.shape[2]
        layer, head, chosen_acc, held_acc = answer_tuple(
            got, ["layer", "head", "selection_accuracy", "held_out_accuracy"], "a tuple of four")
        layer = answer_number(layer, "the layer", whole=True)
        head = answer_number(head, "the head", whole=True)
        best, best_acc = synthetic.pooled_best_head(hits, pairs, selection)
        if (layer, head) != divmod(best, n_heads):
            per_sentence = np.where(pairs[selection, None, None] > 0,
                                    hits[selection] / np.maximum(pairs[selection], 1)[:, None, None], np.nan)
            slips = {
                divmod(synthetic.pooled_best_head(hits, pairs, held_out)[0], n_heads):
                    "That head is the best on the HELD-OUT sentences: choose using the selection sentences only.",
                divmod(synthetic.pooled_best_head(hits, pairs, np.arange(len(pairs)))[0], n_heads):
                    "That head is the best over ALL sentences: the choice may look at the selection sentences only.",
                divmod(int(np.nanargmax(np.nanmean(per_sentence, axis=0).ravel())), n_heads):
                    "That head has the best mean of per-sentence accuracies; pool instead: all hits over all pairs, "
                    "so a sentence with many pairs counts for more.",
            }
            hint = slips.get((layer, head), "")
            want = divmod(best, n_heads)
            return f"you chose layer {layer}, head {head}; the selection sentences choose layer {want[0]}, " \
                   f"head {want[1]}. {hint}".rstrip()
        held = float(hits[held_out].sum(axis=0)[layer, head] / pairs[held_out].sum())
        problem = compare_number(chosen_acc, best_acc, {}, "the selection accuracy")
        if problem:
            return problem
        return compare_number(held_acc, held, {
            "selection": (best_acc, "That is its accuracy where it was chosen; score the same head on held_out."),
            "best held out": (synthetic.pooled_best_head(hits, pairs, held_out)[1],
                              "That is the best held-out accuracy of any head; report the CHOSEN head's."),
        }, "the held-out accuracy")

    return run_check(held_out_relation_head, cases(), compare,
                     "chooses a head on some sentences and reports it on others")


# --- the learner's function runs the model itself (3.1, 3.2) ----------------------------------------

@uses_tools("mha.pretrained.encoder")
def check_model_previous_token_share(previous_token_share: Callable, seed: int = 0) -> CheckResult:
    """``fn(encoder, sentence, layer, head)`` -> the head's ``prev_token_share`` (3.1) on the sentence, which the
    function traces itself. Seed 0: 3.1's sentence; another seed: treebank sentences and other heads."""
    def cases() -> Iterator:
        encoder = MiniLMEncoder.load()
        for sentence, layer, head in seeded_sentences.previous_token_cases(seed):
            record = encode_records(encoder, [sentence])[0]
            want = float(head_role_table([record]).set_index(["layer", "head"]).loc[(layer, head), "prev_token_share"])
            below = np.diagonal(np.asarray(record.attention, dtype=float), offset=-1, axis1=-2, axis2=-1)  # A[i, i-1]
            slips = {
                "next": (float(np.diagonal(record.attention[layer, head], offset=1).mean()), "That is the weight on "
                         "column i+1, the NEXT token: rows and columns swapped. Row i attends FROM token i; read "
                         "attention[layer, head][i, i - 1], the diagonal just below the main one (offset=-1)."),
                "layer": (float(below[layer].mean()), "That is the mean over all 12 heads of the layer; take the one "
                          "head's map, attention[layer, head]."),
                "from one": (float(below[layer - 1, head - 1].mean()), "That is the head before (layer - 1, head - 1): "
                             "layers and heads are counted from 0, so L0H2 is attention[0, 2]."),
                "words only": (float(below[layer, head, 1:-1].mean()), "You left out the rows at and next to [CLS] "
                               "and [SEP]; the section's share averages every row that has a previous token, rows "
                               "1..seq-1 of the whole map, special tokens included."),
            }
            label = f"L{layer}H{head} on '{sentence}' ({len(record.tokens)} tokens)"
            yield label, (encoder, sentence, layer, head), {}, (want, slips)

    return run_check(previous_token_share, cases(),
                     lambda got, want: compare_number(got, want[0], want[1], "the share", atol=1e-5),
                     "traces the sentence and measures the head's previous-token share")


_PAIR_SLIPS = {
    "column": "You read the source word's COLUMN (which word attends to it most); 3.2 reads its ROW: the word it "
              "attends to most, word_map[source].argmax() with its own column excluded.",
    "self": "A word's own column took part in the argmax; exclude it (set the diagonal of the word map to -inf).",
    "tokens": "You read the token map at the word indices: merge the pieces into words first (word_attention with "
              "the trace's word_ids: pieces' columns summed, rows averaged, [CLS] and [SEP] dropped).",
}


@uses_tools("mha.pretrained.encoder", "mha.pretrained.word_maps")
def check_model_pair_accuracy(pair_accuracy: Callable, seed: int = 0) -> CheckResult:
    """``fn(encoder, words, pairs, layer, head)`` -> the share of gold ``(source, target)`` pairs whose source word's
    row in the word map of the function's own trace has its argmax (self excluded) on the target (3.2); each seed
    draws a treebank sentence and two heads (:func:`~mha.analysis.head_roles.seeded_sentences.relation_pair_case`)."""
    def cases() -> Iterator:
        encoder, (sentence, pairs, heads, accuracies) = MiniLMEncoder.load(), seeded_sentences.relation_pair_case(seed)
        for layer, head in heads:
            slips = {name: (float(accuracies[name][layer, head]), hint) for name, hint in _PAIR_SLIPS.items()}
            label = f"L{layer}H{head} on the treebank sentence '{sentence.text}', {len(pairs)} gold pairs"
            yield label, (encoder, list(sentence.words), list(pairs), layer, head), {}, \
                (float(accuracies["row"][layer, head]), slips)

    return run_check(pair_accuracy, cases(),
                     lambda got, want: compare_number(got, want[0], want[1], "the accuracy", atol=1e-9),
                     "traces a treebank sentence and scores a head on its gold pairs")


