"""Every head's stored guesses on the treebank's gold pairs, and the bounds section 3.2 puts on its nulls."""

import dataclasses

import numpy as np
import pytest

from mha.analysis.equivalence import gain_bounds, ratio_standard_error
from mha.analysis.head_roles.relations import RelationHits, relation_hits, select_and_report
from mha.analysis.head_roles.treebank_heads import (
    SENTENCE_SHARES_STORED,
    gain_table_bounds,
    hits_from_guesses,
    length_standardised_shares,
    load_treebank_guesses,
    load_treebank_sentence_shares,
    relation_guesses,
    without_offset_rules,
)


@pytest.fixture(scope="module")
def ewt_records():
    from mha.corpora.treebank import EWT_DEV_PATH, read_conllu
    from mha.pretrained.corpus_encoding import encode_records
    from mha.pretrained.encoder import MiniLMEncoder

    return encode_records(MiniLMEncoder.load(), read_conllu(EWT_DEV_PATH)[:40])


@pytest.mark.parametrize("options", [{}, {"clark_poss": True}, {"mode": "column"}])
@pytest.mark.slow
def test_hits_from_guesses_count_what_relation_hits_counts(ewt_records, options):
    guesses = relation_guesses(ewt_records, **options)
    part = [31, 2, 17, 0, 9, 25, 38]  # any sentences, in any order
    expected = relation_hits([ewt_records[i] for i in part], **options)
    got = hits_from_guesses(guesses, part)
    assert got.relations == expected.relations and got.offsets == expected.offsets
    for field in ("pairs", "hits", "offset_hits", "guess_at_offset"):
        np.testing.assert_array_equal(getattr(got, field), getattr(expected, field), err_msg=field)
    with pytest.raises(ValueError, match="indices"):
        hits_from_guesses(guesses, [40])


@pytest.mark.slow
def test_stored_guesses_match_a_fresh_count_of_their_first_sentences(ewt_records):
    stored = load_treebank_guesses()
    assert set(stored) == {"row", "row, Clark poss", "column"}
    assert stored["row"].n_sentences == 2001 and stored["column"].relations == ("obj_prep",)
    fresh = relation_guesses(ewt_records)
    first = stored["row"].sentence < len(ewt_records)
    np.testing.assert_array_equal(stored["row"].gold_offset[first], fresh.gold_offset)
    agree = (stored["row"].guess_offset[first] == fresh.guess_offset).mean()
    assert agree > 0.999  # argmaxes: equal up to near-ties that float rounding can break differently


def test_tampered_guesses_are_refused(tmp_path):
    path = tmp_path / "guesses.safetensors"
    path.write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="guesses"):
        load_treebank_guesses(path)


def _two_head_hits(seed):
    """One relation (det_noun) over 300 sentences of 2 pairs; head 0 always guesses offset +1 (the gold offset in
    80% of pairs), head 1 finds the gold word in 85% of pairs wherever it is."""
    rng = np.random.default_rng(seed)
    n = 300
    pairs = np.full((n, 1), 2, dtype=np.int32)
    gold_at_plus_one = rng.binomial(2, 0.8, size=n)
    offset_hits = np.stack([2 - gold_at_plus_one, gold_at_plus_one], axis=1)[:, None, :].astype(np.int32)
    hits = np.zeros((n, 1, 1, 2), dtype=np.int32)
    hits[:, 0, 0, 0] = gold_at_plus_one
    hits[:, 0, 0, 1] = rng.binomial(2, 0.85, size=n)
    guess_at_offset = np.zeros((n, 1, 1, 2, 2), dtype=np.int16)
    guess_at_offset[:, 0, 0, 0, 1] = 2  # head 0: every guess at +1
    guess_at_offset[:, 0, 0, 1, 1] = hits[:, 0, 0, 1]
    return RelationHits(("det_noun",), (-1, 1), pairs, hits, offset_hits, guess_at_offset)


def test_without_offset_rules_leaves_the_best_head_that_is_not_the_rule():
    selection, report = _two_head_hits(0), _two_head_hits(1)
    selection.hits[:, 0, 0, 0] += 1  # make the offset rule the best head on the selection half
    plain = select_and_report(selection, report, n_resamples=200)
    assert plain["head"].iloc[0] == 0 and plain["gain"].iloc[0] == pytest.approx(0.0)  # the rule: 0 by identity
    other = select_and_report(without_offset_rules(selection), report, n_resamples=200)
    assert other["head"].iloc[0] == 1


def test_gain_table_bounds_reads_each_chosen_head_and_offset():
    selection, report = _two_head_hits(0), _two_head_hits(1)
    chosen = select_and_report(without_offset_rules(selection), report, n_resamples=200)
    table = gain_table_bounds(report, chosen, 0.1)
    difference = report.hits[:, 0, 0, 1] - report.offset_hits[:, 0, 1]
    assert table["se"].iloc[0] == pytest.approx(ratio_standard_error(difference, report.pairs[:, 0]))
    assert table["bound"].iloc[0] == pytest.approx(max(abs(table["tost_low"].iloc[0]), abs(table["tost_high"].iloc[0])))
    gain = chosen["gain"].iloc[0]
    expected = ("beats the offset" + (" by less than the margin" if table["tost_high"].iloc[0] < 0.1 else "")
                if gain > 0 else "below the offset")
    assert table["test_p"].iloc[0] < 0.05 and table["verdict"].iloc[0] == expected
    rule = report.hits.copy()
    rule[:, 0, 0, 0] = report.offset_hits[:, 0, 1]  # head 0 guesses exactly what offset +1 guesses
    identical = gain_table_bounds(dataclasses.replace(report, hits=rule), chosen.assign(head=0, gain=0.0), 0.1)
    assert identical["verdict"].iloc[0] == "the head is the offset rule" and np.isnan(identical["bound"].iloc[0])
    with pytest.raises(ValueError, match="positive"):
        gain_bounds(0.0, 0.0, 0.1)  # a standard error of 0 bounds nothing


@pytest.mark.slow
def test_stored_shares_match_a_fresh_scoring_of_their_first_sentences(ewt_records):
    from mha.analysis.head_roles.role_table import sentence_head_scores

    stored = load_treebank_sentence_shares()
    fresh = sentence_head_scores(ewt_records)
    n = len(ewt_records)
    assert stored["cls_share"].shape == (2001, 6, 12)
    for key in SENTENCE_SHARES_STORED:  # [CLS], punctuation, the previous token, the token itself
        np.testing.assert_allclose(stored[key][:n], fresh[key], atol=1e-4, err_msg=key)
    np.testing.assert_array_equal(stored["rows"][:n], fresh["rows"])
    assert stored["tokens"][:n].tolist() == [len(r.tokens) for r in ewt_records]


def test_length_standardised_shares_pool_each_band_and_weigh_bands_equally():
    from mha.analysis.statistics import bootstrap_ratio_interval

    rng = np.random.default_rng(4)
    per_sentence = rng.uniform(size=(60, 3))
    rows = rng.integers(5, 40, size=60)
    lengths = rows + 2
    one = length_standardised_shares(per_sentence, rows, lengths, (0, 1000), n_resamples=300, seed=7)
    pooled = (per_sentence * rows[:, None]).sum(0) / rows.sum()
    np.testing.assert_allclose(one["standardised"], pooled)
    low, high = bootstrap_ratio_interval(per_sentence * rows[:, None], rows, n_resamples=300, seed=7)
    np.testing.assert_allclose(one["low"], low)
    np.testing.assert_allclose(one["high"], high)
    two = length_standardised_shares(per_sentence, rows, lengths, (0, 20, 1000), n_resamples=300)
    short = lengths <= 20
    by_hand = [(per_sentence[m] * rows[m, None]).sum(0) / rows[m].sum() for m in (short, ~short)]
    np.testing.assert_allclose(two["bands"], by_hand)
    np.testing.assert_allclose(two["standardised"], np.mean(by_hand, axis=0))
    assert (two["low"] <= two["standardised"]).all() and (two["standardised"] <= two["high"]).all()
    assert two["sentences"].tolist() == [int(short.sum()), int((~short).sum())]
    with pytest.raises(ValueError, match="wider bands"):
        length_standardised_shares(per_sentence, rows, lengths, (0, 7, 1000))
