"""Head-role scores on hand-made attention maps whose answers are known (chapter 3).

Row = query = the token attending FROM, column = key = the token attended TO.
"""

import math

import numpy as np
import pandas as pd
import pytest

from mha.analysis.head_roles.attention_patterns import PATTERN_LABELS, block_segments, is_punctuation, pattern_label
from mha.analysis.head_roles.role_table import (
    COLUMN_DESCRIPTIONS,
    RELATION_DIRECTIONS,
    head_role_table,
    relation_scores_long,
)
from mha.corpora.annotation import AnnotatedSentence, Relation
from mha.corpora.baselines import fixed_offset_baseline, nearest_candidate_baseline
from mha.corpora.templates import pronoun_pairs
from mha.pretrained.attention_record import AttentionRecord


def one_hot_map(targets):
    """(seq, seq) map whose row i puts all its weight on column targets[i]."""
    attention = np.zeros((len(targets), len(targets)))
    attention[np.arange(len(targets)), targets] = 1.0
    return attention


def stack_heads(*maps):
    """Several (seq, seq) maps -> (1 layer, heads, seq, seq)."""
    return np.stack(maps)[None]


def plain_record(words, attention, sentence=None):
    """[CLS] + one token per word + [SEP]; ``attention`` is (layers, heads, seq, seq)."""
    tokens = ["[CLS]", *words, "[SEP]"]
    word_ids = [None, *range(len(words)), None]
    return AttentionRecord(attention, tokens, word_ids, sentence)


WORDS = ("The", "old", "dog", "saw", "a", "cat", ".")
SEQ = len(WORDS) + 2  # with [CLS] and [SEP]
PREVIOUS = one_hot_map([0] + list(range(SEQ - 1)))  # row i -> column i-1 (row 0 -> itself)
NEXT = one_hot_map(list(range(1, SEQ)) + [SEQ - 1])  # row i -> column i+1 (last row -> itself)


def test_previous_token_head_scores_one_and_is_not_mistaken_for_next():
    table = head_role_table([plain_record(WORDS, stack_heads(PREVIOUS, NEXT))])
    previous, following = table.iloc[0], table.iloc[1]
    assert previous["prev_token_share"] == 1.0 and previous["next_token_share"] == 0.0
    assert previous["prev_token_argmax_rate"] == 1.0 and previous["next_token_argmax_rate"] == 0.0
    assert following["next_token_share"] == 1.0 and following["prev_token_share"] == 0.0
    assert following["next_token_argmax_rate"] == 1.0 and following["prev_token_argmax_rate"] == 0.0
    assert previous["same_token_share"] == pytest.approx(1 / SEQ)  # only row 0 looks at itself
    assert previous["positional"] and following["positional"]
    assert previous["pattern"] == following["pattern"] == "diagonal"
    # "The" -> [CLS] and "cat" -> "." -> [SEP] land on fixed neighbours, which count for neither pattern
    n_words = len(WORDS)
    assert previous["diagonal_share"] == pytest.approx(6 / n_words) and previous["vertical_share"] == 0.0
    assert following["diagonal_share"] == pytest.approx(5 / n_words) and following["vertical_share"] == 0.0
    assert list(table["layer"]) == [0, 0] and list(table["head"]) == [0, 1]


def test_shares_to_cls_sep_and_punctuation():
    to_cls = one_hot_map([0] * SEQ)
    to_sep = one_hot_map([SEQ - 1] * SEQ)
    to_period = one_hot_map([SEQ - 2] * SEQ)  # "." is the last word
    table = head_role_table([plain_record(WORDS, stack_heads(to_cls, to_sep, to_period))])
    assert list(table["cls_share"]) == [1.0, 0.0, 0.0]
    assert list(table["sep_share"]) == [0.0, 1.0, 0.0]
    assert list(table["punct_share"]) == [0.0, 0.0, 1.0]
    # vertical counts fixed keys two or more positions away; a row next to the fixed token counts for neither
    n_words = len(WORDS)
    assert table["vertical_share"].tolist() == pytest.approx([6 / n_words, 6 / n_words, 5 / n_words])
    assert table["diagonal_share"].tolist() == [0.0, 0.0, 0.0]
    assert list(table["pattern"]) == ["vertical"] * 3


def test_entropy_against_uniform_and_mean_distance():
    uniform = np.full((SEQ, SEQ), 1 / SEQ)
    table = head_role_table([plain_record(WORDS, stack_heads(uniform, PREVIOUS))])
    flat, sharp = table.iloc[0], table.iloc[1]
    assert flat["entropy"] == pytest.approx(math.log(SEQ))
    assert flat["uniform_entropy"] == pytest.approx(math.log(SEQ))
    assert flat["entropy_ratio"] == pytest.approx(1.0)
    assert sharp["entropy"] == pytest.approx(0.0) and sharp["entropy_ratio"] == pytest.approx(0.0)
    # uniform: mean |i - j| over all pairs = (n^2 - 1) / (3n); previous token: 1 for every row but row 0
    assert flat["mean_distance"] == pytest.approx((SEQ**2 - 1) / (3 * SEQ))
    assert sharp["mean_distance"] == pytest.approx((SEQ - 1) / SEQ)
    assert flat["pattern"] == "heterogeneous"


def test_causal_uniform_baseline():
    causal_uniform = np.tril(np.ones((SEQ, SEQ)))
    causal_uniform /= causal_uniform.sum(-1, keepdims=True)  # row i uniform over keys 0..i
    table = head_role_table([plain_record(WORDS, stack_heads(causal_uniform))], causal=True)
    assert table.loc[0, "entropy_ratio"] == pytest.approx(1.0)
    assert table.loc[0, "uniform_entropy"] == pytest.approx(np.mean(np.log(np.arange(1, SEQ + 1))))


# The old dog saw a cat .   det->noun at offsets +2 and +1: a fixed offset gets only half right
SENTENCE = AnnotatedSentence(WORDS, (
    Relation("det_noun", 0, 2), Relation("adj_noun", 1, 2), Relation("subj_verb", 2, 3),
    Relation("verb_obj", 3, 5), Relation("det_noun", 4, 5),
))


def head_from_word_targets(word_targets):
    """One-piece-per-word head: word i's row -> word word_targets[i]'s column; [CLS]/[SEP] rows -> themselves."""
    targets = [0] + [t + 1 for t in word_targets] + [SEQ - 1]
    return one_hot_map(targets)


def test_a_determiner_head_beats_the_fixed_offset_baseline_and_a_positional_head_only_matches_it():
    # syntactic head: each determiner looks at its noun, every other word at itself
    determiner_head = head_from_word_targets([2, 1, 2, 3, 5, 5, 6])
    table = head_role_table(
        [plain_record(WORDS, stack_heads(determiner_head, NEXT, PREVIOUS), SENTENCE) for _ in range(10)],
        min_relation_count=1,
    )
    syntactic, next_token, previous_token = table.iloc[0], table.iloc[1], table.iloc[2]
    assert syntactic["det_noun_acc"] == 1.0
    assert syntactic["det_noun_baseline_acc"] == 0.5 and syntactic["det_noun_baseline_offset"] == 1
    assert syntactic["det_noun_count"] == 20
    assert syntactic["best_relation"] == "det_noun" and syntactic["best_relation_gain"] == pytest.approx(0.5)
    assert syntactic["syntactic"]
    # the next-token head gets "The old" wrong and "a cat" right: exactly the +1 baseline, no gain
    assert next_token["det_noun_acc"] == 0.5 == next_token["det_noun_baseline_acc"]
    assert next_token["adj_noun_acc"] == 1.0 == next_token["adj_noun_baseline_acc"]
    assert next_token["best_relation_gain"] == pytest.approx(0.0) and not next_token["syntactic"]
    # reverse direction: the noun's row; the previous-token head finds "a" from "cat" but not "The" from "dog"
    assert previous_token["noun_det_acc"] == 0.5
    assert previous_token["noun_det_baseline_offset"] == -1 and previous_token["noun_det_baseline_acc"] == 0.5
    assert (
        previous_token["det_noun_acc"] == 0.0
    )  # direction not confused: a determiner's previous word is never its noun
    assert previous_token["verb_subj_acc"] == 1.0 and previous_token["obj_verb_acc"] == 0.0


def test_relation_directions_are_scored_from_the_right_row():
    # the noun rows look at their determiners; the determiner rows look at themselves
    noun_to_determiner = head_from_word_targets([0, 1, 0, 3, 4, 4, 6])
    table = head_role_table([plain_record(WORDS, stack_heads(noun_to_determiner), SENTENCE)])
    assert table.loc[0, "noun_det_acc"] == 1.0 and table.loc[0, "det_noun_acc"] == 0.0
    assert table.loc[0, "noun_adj_acc"] == 0.0 and table.loc[0, "adj_noun_acc"] == 0.0


def test_word_pieces_are_merged_before_scoring():
    # "cat" split into "ca ##t": the determiner "a" attends to the second piece, which still counts as "cat"
    tokens = ["[CLS]", "The", "old", "dog", "saw", "a", "ca", "##t", ".", "[SEP]"]
    word_ids = [None, 0, 1, 2, 3, 4, 5, 5, 6, None]
    targets = [0, 3, 2, 3, 4, 7, 6, 7, 8, 9]  # row "a" (position 5) -> "##t" (position 7)
    table = head_role_table([AttentionRecord(stack_heads(one_hot_map(targets)), tokens, word_ids, SENTENCE)])
    assert table.loc[0, "det_noun_acc"] == 1.0


def test_ignore_self_takes_the_best_other_word():
    head = head_from_word_targets([2, 1, 2, 3, 5, 5, 6]) * 0.4 + np.eye(SEQ) * 0.6  # mostly self, then the noun
    record = plain_record(WORDS, stack_heads(head), SENTENCE)
    assert head_role_table([record]).loc[0, "det_noun_acc"] == 0.0
    assert head_role_table([record], ignore_self=True).loc[0, "det_noun_acc"] == 1.0


def pronoun_record(sentence, attend_to):
    """A head whose pronoun row looks at word ``attend_to``; every other row looks at itself."""
    n = len(sentence.words)
    targets = list(range(n))
    targets[sentence.pronoun] = attend_to
    return plain_record(sentence.words, stack_heads(head_from_word_targets_n(targets)), sentence)


def head_from_word_targets_n(word_targets):
    seq = len(word_targets) + 2
    return one_hot_map([0] + [t + 1 for t in word_targets] + [seq - 1])


def test_pronoun_head_against_the_nearest_noun_baseline():
    items = pronoun_pairs()
    right = head_role_table([pronoun_record(s, s.antecedent) for s in items])
    nearest = head_role_table([pronoun_record(s, max(s.candidates)) for s in items])
    assert right.loc[0, "pron_antecedent_acc"] == 1.0
    assert right.loc[0, "pron_antecedent_baseline_acc"] == 0.5
    assert right.loc[0, "pron_antecedent_count"] == len(items)
    assert right.loc[0, "best_relation"] == "pron_antecedent"
    assert nearest.loc[0, "pron_antecedent_acc"] == 0.5  # the nearest-noun head is the baseline
    assert nearest_candidate_baseline(items) == 0.5


def test_rare_token_head():
    # every row looks at "old", the rarest token by the given counts
    to_old = one_hot_map([2] * SEQ)
    counts = {w: 100 for w in WORDS} | {"old": 1}
    table = head_role_table([plain_record(WORDS, stack_heads(to_old, PREVIOUS))], token_counts=counts)
    assert table.loc[0, "rare_token_argmax_rate"] == 1.0
    assert table.loc[1, "rare_token_argmax_rate"] == pytest.approx(1 / len(WORDS))  # only "dog" looks back at "old"


def test_pattern_labels_end_to_end():
    half = 0.5 * PREVIOUS + 0.5 * one_hot_map([SEQ - 1] * SEQ)  # half previous token, half [SEP]
    words = tuple(f"w{i}" for i in range(16))  # halves of 8 words: a block is wider than the diagonal
    seq = len(words) + 2
    block = np.zeros((seq, seq))
    block[0, 0] = block[-1, -1] = 1.0
    for i in range(16):
        own_half = np.arange(8) + 1 + (8 if i >= 8 else 0)
        block[i + 1, own_half] = 1 / 8
    labels = head_role_table([plain_record(WORDS, stack_heads(half, PREVIOUS, one_hot_map([0] * SEQ)))])["pattern"]
    assert list(labels) == ["vertical+diagonal", "diagonal", "vertical"]
    block_table = head_role_table([plain_record(words, stack_heads(block))])
    assert block_table.loc[0, "block_share"] == pytest.approx(1.0)
    assert block_table.loc[0, "pattern"] == "block"


@pytest.mark.parametrize(("vertical", "diagonal", "block", "label"), [
    (0.9, 0.05, 0.0, "vertical"),
    (0.1, 0.8, 0.9, "diagonal"),
    (0.4, 0.4, 0.0, "vertical+diagonal"),
    (0.1, 0.1, 0.85, "block"),
    (0.3, 0.1, 0.5, "heterogeneous"),
])
def test_pattern_label_rules(vertical, diagonal, block, label):
    assert pattern_label(vertical, diagonal, block) == label
    assert label in PATTERN_LABELS


def test_pattern_label_needs_shares_well_above_chance():
    # a 5-token sentence: fixed tokens are 60% of every row even for uniform attention
    assert pattern_label(0.6, 0.1, 0.0) == "vertical"
    assert pattern_label(0.6, 0.1, 0.0, uniform_vertical=0.6) == "heterogeneous"
    assert pattern_label(0.4, 0.3, 0.0, uniform_vertical=0.3, uniform_diagonal=0.3) == "heterogeneous"
    assert pattern_label(0.1, 0.1, 0.85, uniform_block=0.7) == "heterogeneous"


def test_block_segments_single_sentence_and_pair():
    np.testing.assert_array_equal(block_segments(["[CLS]", "a", "b", "##c", "d", "[SEP]"], [None, 0, 1, 1, 2, None]),
                                  [-1, 0, 0, 0, 1, -1])  # 3 words: words 0-1 then word 2; pieces stay together
    pair = block_segments(["[CLS]", "a", "b", "[SEP]", "c", "d", "[SEP]"], [None, 0, 1, None, 2, 3, None])
    np.testing.assert_array_equal(pair, [-1, 0, 0, -1, 1, 1, -1])


def test_fixed_offset_baseline_directions():
    sentences = [SENTENCE] * 3
    assert fixed_offset_baseline(sentences, "det_noun") == (0.5, 1)
    assert fixed_offset_baseline(sentences, "det_noun", "target_to_source") == (0.5, -1)
    assert fixed_offset_baseline(sentences, "verb_obj") == (1.0, 2)
    assert math.isnan(fixed_offset_baseline(sentences, "aux_verb")[0])
    with pytest.raises(ValueError, match="direction"):
        fixed_offset_baseline(sentences, "det_noun", "backwards")


def test_is_punctuation():
    assert is_punctuation(".") and is_punctuation(",") and is_punctuation("##.") and is_punctuation("'")
    assert (
        not is_punctuation("dog")
        and not is_punctuation("##s")
        and not is_punctuation("[SEP]")
        and not is_punctuation("")
    )


def test_table_is_tidy_and_documented():
    table = head_role_table([plain_record(WORDS, np.full((2, 3, SEQ, SEQ), 1 / SEQ), SENTENCE)])
    assert table.shape[0] == 6 and list(table[["layer", "head"]].itertuples(index=False, name=None))[:4] == [
        (0, 0), (0, 1), (0, 2), (1, 0)]
    described = set()
    for column in table.columns:
        generic = column
        for prefix, kind, _ in RELATION_DIRECTIONS:
            if column.startswith(prefix + "_") and not column.startswith("pron"):
                generic = "{relation}" + column[len(prefix):]
            if column == f"{kind}_count":
                generic = "{kind}_count"
        described.add(generic)
    assert described <= set(COLUMN_DESCRIPTIONS)
    assert table.attrs == {"n_sentences": 1, "n_annotated": 1, "n_tokens": SEQ}
    long = relation_scores_long(table)
    assert len(long) == 6 * (len(RELATION_DIRECTIONS) + 1)
    row = long[(long.layer == 0) & (long["head"] == 0) & (long.relation == "noun_det")].iloc[0]
    assert row["kind"] == "det_noun" and row["direction"] == "target_to_source"
    assert row["gain"] == pytest.approx(row["acc"] - row["baseline_acc"])


def test_records_may_be_mappings_and_unannotated():
    table = head_role_table([{"attention": stack_heads(PREVIOUS), "tokens": ["[CLS]", *WORDS, "[SEP]"],
                              "word_ids": [None, *range(len(WORDS)), None]}])
    assert table.loc[0, "prev_token_share"] == 1.0
    assert math.isnan(table.loc[0, "det_noun_acc"]) and table.loc[0, "det_noun_count"] == 0
    assert table.loc[0, "best_relation"] is None
    assert isinstance(table, pd.DataFrame)


def test_bad_records_raise_helpful_errors():
    with pytest.raises(ValueError, match="records is empty"):
        head_role_table([])
    with pytest.raises(ValueError, match="layers, heads, seq, seq"):
        head_role_table([plain_record(WORDS, PREVIOUS)])
    with pytest.raises(ValueError, match="sum to 1"):
        head_role_table([plain_record(WORDS, stack_heads(PREVIOUS * 2))])
    with pytest.raises(ValueError, match="same sequence"):
        head_role_table([plain_record(WORDS[:-1], stack_heads(PREVIOUS))])
    with pytest.raises(ValueError, match="gold sentence has"):
        short = AnnotatedSentence(WORDS[:3], ())
        head_role_table([plain_record(WORDS, stack_heads(PREVIOUS), short)])
    with pytest.raises(ValueError, match="earlier records"):
        head_role_table([plain_record(WORDS, stack_heads(PREVIOUS)), plain_record(WORDS, stack_heads(PREVIOUS, NEXT))])
    with pytest.raises(ValueError, match="needs 'attention'"):
        head_role_table([{"tokens": []}])


@pytest.mark.parametrize("arguments, words", [
    ((float("nan"), float("nan"), float("nan")), r"vertical_share must be a finite number"),
    ((0.2, float("nan"), 0.1), r"diagonal_share must be a finite number"),
    ((0.2, 0.1, 1.7), r"block_share must be a share between 0 and 1"),
    ((0.2, 0.1, 0.5 + 0.5j), r"block_share must be a finite number.*complex"),
])
def test_pattern_label_refuses_nan_and_shares_outside_0_to_1(arguments, words):
    """NaN shares were labelled "heterogeneous", as if measured; a share of 1.7 is no share of a row's attention."""
    from mha.core.validation import InputError

    with pytest.raises(InputError, match=words):
        pattern_label(*arguments)
    with pytest.raises(InputError, match="uniform_block must be a finite number"):
        pattern_label(0.1, 0.1, 0.9, uniform_block=float("nan"))
    with pytest.raises(InputError, match="lift must be a finite number of at least 0"):
        pattern_label(0.1, 0.1, 0.9, lift=float("nan"))
