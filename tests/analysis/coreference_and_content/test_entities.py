"""Entity heads on LitBank: spans and mention links scored from attention maps (section 3.3).

The scores are checked against attention maps written by hand, the stored file against its recorded hash and its
own counts, and bad input against the message it gets.
"""


import hashlib

import numpy as np
import pytest

from mha.analysis.coreference_and_content.entities import (
    LINK_RULES,
    LITBANK_ENTITIES_SCORES_PATH,
    OFFSETS,
    EntityScores,
    link_rule_hits,
    link_scores,
    litbank_entity_windows,
    load_entity_scores,
    span_scores,
)
from mha.analysis.statistics import bootstrap_ratio_interval
from mha.corpora.litbank_entities import MentionLink
from mha.data_files import DATA_DIRECTORY, SHA256_LIST

# five words; rows = the word attending. Word 1 looks at 2, word 2 at itself then 0, word 3 at 2.
MAPS = np.array([[0.6, 0.1, 0.1, 0.1, 0.1],
                 [0.1, 0.2, 0.5, 0.1, 0.1],
                 [0.3, 0.1, 0.4, 0.1, 0.1],
                 [0.1, 0.1, 0.6, 0.1, 0.1],
                 [0.2, 0.2, 0.2, 0.2, 0.2]])


def test_span_scores_leave_a_words_own_column_out_and_match_a_hand_calculation():
    hits, shares, offsets = span_scores(MAPS, (1, 3))  # the span "w1 w2 w3"
    assert hits.tolist() == [True, False, True]  # w2's largest other weight is w0, outside the span
    assert np.allclose(shares, [0.5 + 0.1, 0.1 + 0.1, 0.1 + 0.6])
    expected = [[1 <= q + k <= 3 for k in OFFSETS] for q in (1, 2, 3)]
    assert offsets.tolist() == expected
    stacked = np.stack([MAPS, MAPS.T])  # leading axes are kept: (2, words, words) -> (span words, 2)
    assert span_scores(stacked, (1, 3))[0].shape == (3, 2)


def test_link_scores_average_the_mentions_rows_and_weigh_each_candidate_by_its_best_word():
    link = MentionLink((3, 4), "PER", ((0, 0), (1, 2)), (False, True), (False, False))
    # rows 3 and 4 averaged: [0.15, 0.15, 0.4, 0.15, 0.15]; candidate (0,0) gets 0.15, candidate (1,2) gets 0.4
    assert bool(link_scores(MAPS, link)) is True
    assert bool(link_scores(MAPS, MentionLink((3, 4), "PER", ((0, 0), (1, 2)), (True, False), (False, False)))) is False
    assert link_rule_hits(link) == {"nearest candidate": 1.0, "shared word": 1.0, "chance": 0.5}
    shared_first = MentionLink((3, 4), "PER", ((0, 0), (1, 2)), (True, False), (True, False))
    assert link_rule_hits(shared_first) == {"nearest candidate": 0.0, "shared word": 1.0, "chance": 0.5}
    assert tuple(link_rule_hits(link)) == LINK_RULES


def test_rates_pool_over_works_and_intervals_resample_whole_works():
    rng = np.random.default_rng(0)
    words = rng.integers(5, 20, size=6)
    hits = rng.integers(0, 5, size=(6, 2, 3)).astype(float)
    scores = EntityScores(tuple("abcdef"), words, hits, hits / 2, np.zeros((6, len(OFFSETS))), words, hits,
                          {name: np.zeros(6) for name in LINK_RULES})
    pooled = (hits[0] + hits[2]) / (words[0] + words[2])
    assert np.allclose(scores.rate(scores.span_hits, scores.span_words, [0, 2]), pooled)
    low, high = scores.interval(scores.span_hits, scores.span_words, [1, 3, 5])
    oracle = bootstrap_ratio_interval(hits[[1, 3, 5]], words[[1, 3, 5]].astype(float))
    assert np.allclose(low, oracle[0]) and np.allclose(high, oracle[1])
    selection, report = scores.split_works(seed=0)
    assert sorted(np.r_[selection, report].tolist()) == list(range(6)) and len(selection) == 3


def test_bad_input_is_refused_in_plain_words(tmp_path):
    with pytest.raises(ValueError, match="a span of two words or more inside it"):
        span_scores(MAPS, (2, 2))
    with pytest.raises(ValueError, match=r"maps of the window the link was made in"):
        link_scores(MAPS[:3, :3], MentionLink((3, 4), "PER", ((0, 0),), (True,), (False,)))
    path = tmp_path / "scores.json"
    path.write_text('{"works": ["a"]}')
    with pytest.raises(ValueError, match="python -m scripts.litbank_entities"):
        load_entity_scores(path)


def test_a_window_longer_than_the_models_positions_is_refused_before_anything_is_traced():
    from mha.pretrained.encoder import MiniLMEncoder

    with pytest.raises(ValueError, match=r"max_pieces must be a whole number in 3\.\.512 \(the tokens of a window"):
        litbank_entity_windows(MiniLMEncoder.load(), [], [], max_pieces=600)


def test_the_stored_scores_are_the_recorded_ones_and_add_up():
    lines = (DATA_DIRECTORY / SHA256_LIST).read_text().splitlines()
    recorded = next(line.split()[0] for line in lines if line.split()[1] == "litbank_entities.json")
    assert hashlib.sha256(LITBANK_ENTITIES_SCORES_PATH.read_bytes()).hexdigest() == recorded
    scores = load_entity_scores()
    assert len(scores.works) == 80
    assert (scores.span_hits <= scores.span_words[:, None, None]).all()
    assert (scores.link_hits <= scores.links[:, None, None]).all()
    assert (scores.rule_hits["chance"] <= scores.links).all()
    assert (scores.offset_hits <= scores.span_words[:, None]).all()
    check = load_entity_scores(check=True)
    row = scores.works.index(check.works[0])
    assert np.array_equal(check.span_hits[0], scores.span_hits[row])
