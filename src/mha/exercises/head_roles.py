"""Checks for the exercises of sections 3.1 "A tour of all 72 heads" and 3.2 "Syntax: heads that follow
grammatical relations".

:func:`check_held_out_relation_head` (3.2) draws its cases from the real model instead: all-MiniLM-L6-v2's relation
hits on UD English-EWT dev sentences drawn with the check's ``seed``
(:func:`~mha.analysis.head_roles.seeded_sentences.treebank_relation_hits`), so the hidden variants are other
sentences; the learner's function still receives plain arrays only.

Each ``check_*`` takes the learner's function, runs it on small seeded
attention maps whose answers are known, and compares with the package's own
implementation (:func:`mha.analysis.head_roles.role_table.head_role_table`,
:func:`mha.analysis.head_roles.role_table.fixed_offset_baseline`, :func:`mha.pretrained.word_maps.word_attention`),
which ``tests/analysis/head_roles/test_role_table.py`` and ``tests/pretrained/test_word_maps.py`` test on hand-made
maps. When an answer is wrong the message also says which common slip it
matches (the next token instead of the previous one, a row read instead of
a column, a mean instead of a sum ...).

Convention, as everywhere in :mod:`mha`: a map is (seq_q, seq_k), ROW =
query = the token attending FROM, COLUMN = key = the token attended TO, and
each row sums to 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from mha.analysis.head_roles.role_table import AttentionRecord, fixed_offset_baseline, head_role_table
from mha.analysis.head_roles.seeded_sentences import RELATIONS, treebank_relation_hits
from mha.corpora.templates import AnnotatedSentence, Relation
from mha.pretrained.word_maps import word_attention

from .checking import (
    CheckResult,
    answer_number,
    answer_tuple,
    array_or_none,
    compare_array,
    compare_number,
    describe_value,
    one_hot_attention,
    random_attention_maps,
    run_check,
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
]


# --- helpers ---------------------------------------------------------------------------------

def _sentence_tokens(seq: int) -> tuple[list[str], list[int | None]]:
    """[CLS] w0 ... [SEP]: tokens and word ids for a map of ``seq`` tokens."""
    tokens = ["[CLS]", *[f"w{i}" for i in range(seq - 2)], "[SEP]"]
    return tokens, [None, *range(seq - 2), None]


def _table_for(maps: Sequence[np.ndarray], tokens: Sequence[Sequence[str]] | None = None, **options):
    """head_role_table of one head (1 layer, 1 head) over several maps."""
    records = []
    for index, weights in enumerate(maps):
        if tokens is None:
            own_tokens, word_ids = _sentence_tokens(len(weights))
        else:
            own_tokens = list(tokens[index])
            word_ids = [None if t.startswith("[") else 0 for t in own_tokens]
            counter = 0
            for position, word in enumerate(word_ids):  # number the non-special tokens 0, 1, 2, ...
                if word is not None:
                    word_ids[position], counter = counter, counter + 1
        records.append(AttentionRecord(np.asarray(weights, dtype=float)[None, None], own_tokens, word_ids))
    return head_role_table(records, **options).iloc[0]


# --- chapter 3, section 1: a tour of all 72 heads --------------------------------------------

def check_previous_token_share(previous_token_share: Callable[[np.ndarray], float], seed: int = 0) -> CheckResult:
    """``previous_token_share(weights)``: one (seq, seq) map -> a float, the mean weight a row puts on the token just
    before it, over the rows that have one."""
    rng = np.random.default_rng(seed)

    def cases() -> Iterator:
        named = [
            ("a previous-token head: row i puts all its weight on column i-1", one_hot_attention([0, 0, 1, 2, 3, 4])),
            ("a next-token head: row i puts all its weight on column i+1", one_hot_attention([1, 2, 3, 4, 5, 5])),
            ("a random 5 x 5 map", random_attention_maps(rng, (5, 5))),
            ("a random 9 x 9 map", random_attention_maps(rng, (9, 9))),
            ("a random 14 x 14 map", random_attention_maps(rng, (14, 14))),
        ]
        for label, weights in named:
            want = float(_table_for([weights])["prev_token_share"])
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
    rng = np.random.default_rng(seed)

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
            want = float(_table_for([weights], [tokens], **options)[column])
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
    rng = np.random.default_rng(seed)

    def previous_head(seq: int, miss_rows: Sequence[int] = (), spread: float = 0.0) -> np.ndarray:
        # argmax of row i on column i-1 (row 0 on itself); rows in miss_rows put their maximum elsewhere
        targets = [0] + list(range(seq - 1))
        weights = one_hot_attention(targets) * (1 - spread) + spread / seq
        for row in miss_rows:
            weights[row] = one_hot_attention([(row + 2) % seq] * seq)[0] * (1 - spread) + spread / seq
        return weights

    def next_head(seq: int) -> np.ndarray:
        return one_hot_attention(list(range(1, seq)) + [seq - 1])

    def half_and_half(seq: int) -> np.ndarray:
        targets = [min(i + 1, seq - 1) if i % 2 else max(i - 1, 0) for i in range(seq)]
        return one_hot_attention(targets)

    def cases() -> Iterator:
        named = [
            ("a previous-token head on sentences of 5 and 6 tokens (row 0 has no previous token)",
             [previous_head(5), previous_head(6)]),
            ("a next-token head (the largest weight of row i is on column i+1)", [next_head(6), next_head(8)]),
            ("the largest weight is always on the previous token, but only 0.4 of it: argmax, not share, decides",
             [previous_head(12, spread=0.6), previous_head(10, spread=0.6)]),
            ("the previous token wins in 17 of 20 rows (85%): below the 90% threshold",
             [previous_head(11, miss_rows=(3, 7)), previous_head(11, miss_rows=(5,))]),
            ("half the rows look back, half look forward: neither direction reaches 90%",
             [half_and_half(9), half_and_half(12)]),
            ("random maps", [random_attention_maps(rng, (7, 7)), random_attention_maps(rng, (10, 10))]),
        ]
        for label, maps in named:
            want = bool(_table_for(maps)["positional"])
            yield label, ([m.copy() for m in maps],), {}, want

    def compare(got, want) -> str | None:
        if not isinstance(got, (bool, np.bool_)):
            return f"return True or False, got {describe_value(got)}."
        if bool(got) == want:
            return None
        return (f"you said {bool(got)}, the answer is {want}. A head is positional when the argmax of a row is on the "
                "previous token (rows 1..seq-1) or on the next token (rows 0..seq-2) in at least 90% of the rows of "
                "all sentences pooled; count each direction on its own.")

    return run_check(is_positional, cases(), compare, "classifies positional heads")


# --- chapter 3, section 2: syntax ----------------------------------------------------------

_DIRECTIONS = ("source_to_target", "target_to_source")


def _annotated(n_words: int, pairs: Sequence[tuple[int, int]]) -> AnnotatedSentence:
    """A sentence of n placeholder words with one det_noun relation per (source, target) pair."""
    return AnnotatedSentence(tuple(f"w{i}" for i in range(n_words)),
                             tuple(Relation("det_noun", s, t) for s, t in pairs))


def _reference_relation_accuracy(word_maps, pairs, direction: str, ignore_self: bool = True) -> float:
    records = [AttentionRecord(np.asarray(m, dtype=float)[None, None], [f"w{i}" for i in range(len(m))],
                               list(range(len(m))), _annotated(len(m), p)) for m, p in zip(word_maps, pairs)]
    column = "det_noun_acc" if direction == "source_to_target" else "noun_det_acc"
    return float(head_role_table(records, ignore_self=ignore_self, min_relation_count=1).iloc[0][column])


def check_relation_accuracy(relation_accuracy: Callable[[Sequence[np.ndarray], Sequence, str], float],
                            seed: int = 0) -> CheckResult:
    """``relation_accuracy(word_maps, pairs, direction)``: share of gold pairs, pooled over sentences, whose
    row's largest weight (a word's own column excluded) is on the other word of the pair. ``pairs[s]`` lists
    (source, target) word indices of sentence s; ``"source_to_target"`` reads the source's row."""
    rng = np.random.default_rng(seed)

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
            want = _reference_relation_accuracy(maps, pairs, direction)
            other = "target_to_source" if direction == "source_to_target" else "source_to_target"
            n_pairs = sum(len(p) for p in pairs)
            per_sentence = float(np.mean([_reference_relation_accuracy([m], [p], direction)
                                          for m, p in zip(maps, pairs) if p]))
            slips = {
                "self": (_reference_relation_accuracy(maps, pairs, direction, ignore_self=False),
                         "A word's own column took part in the argmax: exclude it (e.g. set the diagonal to -inf)."),
                "direction": (_reference_relation_accuracy(maps, pairs, other), f"That is the accuracy in the other "
                              f"direction ({other}): with {direction} read the "
                              f"{'source' if direction == 'source_to_target' else 'target'} word's ROW."),
                "per sentence": (per_sentence, f"You averaged per-sentence accuracies; pool all {n_pairs} pairs "
                                 "and divide the hits by the number of pairs."),
            }
            yield label, ([m.copy() for m in maps], [list(p) for p in pairs], direction), {}, (want, slips)

    return run_check(relation_accuracy, cases(),
                     lambda got, want: compare_number(got, want[0], want[1], "the accuracy"),
                     "scores a head on a relation")


def _random_offset_cases(seed: int) -> list:
    """(label, pairs, direction, offsets) for random sentences whose pairs mostly sit one gap apart."""
    rng = np.random.default_rng(seed)
    found = []
    for index in range(5):
        n_words, gap = int(rng.integers(8, 20)), int(rng.choice([-3, -2, -1, 1, 2, 3]))
        sources = rng.choice(n_words, size=int(rng.integers(3, 7)), replace=False)
        pairs = []
        for source in sources.tolist():
            target = source + gap if rng.random() < 0.6 else int(rng.integers(0, n_words))
            if 0 <= target < n_words and target != source:
                pairs.append((source, target))
        pairs = pairs or [(0, 1)]
        direction = ("source_to_target", "target_to_source")[index % 2]
        offsets = tuple(range(-3, 4)) if index == 4 else None
        found.append((f"random pairs in a sentence of {n_words} words", pairs, direction, offsets))
    return found


def check_best_offset(best_offset: Callable[..., tuple[float, int]], seed: int = 0) -> CheckResult:
    """``best_offset(pairs, direction, offsets=range(-5, 6))`` -> (accuracy, offset): the fixed offset that most
    often lands on the gold word. For ``"source_to_target"`` the guess for the source at i is the word at
    i + offset; for ``"target_to_source"`` the guess for the target at j is j + offset. 0 is never a guess;
    ties go to the smallest |offset|, then the negative one. A seed other than 0 draws other sentences."""

    def cases() -> Iterator:
        for label, pairs, direction, offsets in _random_offset_cases(seed) if seed else (
            ("determiner-like pairs: the noun mostly follows", [(0, 1), (3, 4), (2, 4), (5, 6), (1, 2)],
             "source_to_target", None),
            ("the same pairs read from the target: the sign flips", [(0, 1), (3, 4), (2, 4), (5, 6), (1, 2)],
             "target_to_source", None),
            ("object-like pairs two words apart", [(1, 3), (2, 4), (4, 5), (0, 2), (6, 9)], "source_to_target", None),
            ("a tie between +1 and -1 goes to -1", [(2, 3), (5, 4), (7, 8), (9, 8)], "source_to_target", None),
            ("the most common gap (+7) is outside the offsets tried", [(0, 7), (1, 8), (2, 9), (3, 5), (4, 6)],
             "source_to_target", tuple(range(-3, 4))),
        ):
            sentences = [_annotated(max(max(p) for p in pairs) + 1, pairs)]
            kwargs = {} if offsets is None else {"offsets": offsets}
            want = fixed_offset_baseline(sentences, "det_noun", direction, **kwargs)
            flipped = fixed_offset_baseline(sentences, "det_noun", _DIRECTIONS[direction == "source_to_target"],
                                            **kwargs)
            yield label, ([tuple(p) for p in pairs], direction), kwargs, (want, flipped, direction)

    def compare(got, want) -> str | None:
        (accuracy, offset), flipped, direction = want
        got_accuracy, got_offset = answer_tuple(got, ("accuracy", "offset"))
        got_offset = answer_number(got_offset, "the offset")
        if got_offset == flipped[1] and got_offset != offset:
            return (f"you chose offset {got_offset:+g}, the answer is {offset:+d}: the sign is flipped. With "
                    f"{direction} the guess is read from the "
                    f"{'source' if direction == 'source_to_target' else 'target'} word: offset = (guessed word) - "
                    "(word whose row is read).")
        if got_offset != offset:
            return (f"you chose offset {got_offset:+g}, the answer is {offset:+d} (ties: smallest |offset|, then "
                    "negative).")
        percentage = (100 * accuracy, "Give a fraction between 0 and 1, not a percentage.")
        problem = compare_number(got_accuracy, accuracy, {"percentage": percentage}, "its accuracy", atol=1e-9)
        return None if problem is None else f"offset {offset:+d} is right, but {problem}"

    return run_check(best_offset, cases(), compare, "finds the best fixed-offset baseline")


def check_word_attention(merge: Callable[[np.ndarray, Sequence[int | None]], np.ndarray], seed: int = 0) -> CheckResult:
    """``merge(weights, word_ids)``: token map (seq, seq) -> word map (words, words): the columns of a word's
    pieces are SUMMED (attention received), their rows AVERAGED (attention sent), special tokens (word id
    None) dropped (Clark et al. 2019)."""
    rng = np.random.default_rng(seed)

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

    rng = np.random.default_rng(seed)

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

def _pooled_best(hits: np.ndarray, pairs: np.ndarray, items: np.ndarray) -> tuple[int, float]:
    """The flat head with the highest pooled accuracy over ``items`` (first on ties), and that accuracy."""
    accuracy = hits[items].sum(axis=0).ravel() / pairs[items].sum()  # (layers * heads,)
    best = int(np.argmax(accuracy))
    return best, float(accuracy[best])



def check_held_out_relation_head(held_out_relation_head: Callable, seed: int = 0) -> CheckResult:
    """``fn(hits (sentences, layers, heads), pairs (sentences,), selection, held_out) -> (layer, head, selection
    accuracy, held-out accuracy)``, on the real model's hits for one relation on treebank sentences (3.2)."""
    rng = np.random.default_rng(seed)

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
        best, best_acc = _pooled_best(hits, pairs, selection)
        if (layer, head) != divmod(best, n_heads):
            per_sentence = np.where(pairs[selection, None, None] > 0,
                                    hits[selection] / np.maximum(pairs[selection], 1)[:, None, None], np.nan)
            slips = {
                divmod(_pooled_best(hits, pairs, held_out)[0], n_heads):
                    "That head is the best on the HELD-OUT sentences: choose using the selection sentences only.",
                divmod(_pooled_best(hits, pairs, np.arange(len(pairs)))[0], n_heads):
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
            "best held out": (_pooled_best(hits, pairs, held_out)[1],
                              "That is the best held-out accuracy of any head; report the CHOSEN head's."),
        }, "the held-out accuracy")

    return run_check(held_out_relation_head, cases(), compare,
                     "chooses a head on some sentences and reports it on others")

