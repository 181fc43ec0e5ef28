"""Pronoun -> candidate scoring, flips and baselines, on hand-made maps and on the book's minimal pairs."""

import numpy as np
import pytest

from mha.analysis.coreference_and_content.coreference import (
    antecedent_preference,
    baseline_picks,
    candidate_picks,
    candidate_weights,
    count_flips,
    flip_scores,
    pair_halves,
)
from mha.corpora.annotation import AnnotatedSentence
from mha.corpora.templates import pronoun_pairs


def test_candidate_weights_read_the_pronoun_row():
    maps = np.zeros((1, 2, 5, 5))
    maps[0, 0, 4, 1], maps[0, 0, 4, 2] = 0.7, 0.2   # head 0: the pronoun (word 4) looks at word 1
    maps[0, 1, 4, 1], maps[0, 1, 4, 2] = 0.1, 0.6   # head 1: at word 2
    maps[0, 1, 1, 4] = 0.9                          # a column entry that must not count
    weights = candidate_weights(maps, pronoun=4, candidates=(1, 2))
    assert weights.shape == (1, 2, 2)
    assert candidate_picks(weights).tolist() == [[0, 1]]


def test_flip_scores_and_counts():
    answers_first, answers_second = np.array([0, 1, 0]), np.array([1, 0, 1])
    picks_first = np.array([[0, 0, 1], [1, 0, 0], [0, 0, 1]])   # (pairs, heads)
    picks_second = np.array([[1, 0, 0], [0, 0, 1], [1, 0, 0]])
    scores = flip_scores(picks_first, picks_second, answers_first, answers_second)
    assert scores[:, 0].tolist() == [1, 1, 1]      # head 0 flips the right way every time
    assert scores[:, 1].tolist() == [0, 0, 0]      # head 1 always picks the first candidate
    assert scores[:, 2].tolist() == [-1, -1, -1]   # head 2 flips, the wrong way round
    counts = count_flips(picks_first, picks_second, answers_first, answers_second)
    assert counts.right.tolist() == [3, 0, 0] and counts.wrong.tolist() == [0, 0, 3]
    assert counts.accuracy.tolist() == [1.0, 0.5, 0.0]


def test_a_head_that_never_flips_scores_one_half_on_balanced_pairs():
    items = pronoun_pairs()
    first, second = pair_halves(items)
    answers = np.array([s.candidates.index(s.antecedent) for s in items])
    always_first = np.zeros((len(first), 1), dtype=int)
    counts = count_flips(always_first, always_first, answers[first], answers[second])
    assert counts.accuracy[0] == 0.5 and counts.unchanged[0] == len(first)


def test_baselines_on_the_book_pairs_score_one_half():
    items = pronoun_pairs()
    answers = np.array([s.candidates.index(s.antecedent) for s in items])
    for rule in ("nearest", "first"):
        assert (baseline_picks(items, rule) == answers).mean() == 0.5
    assert set(baseline_picks(items, "nearest").tolist()) == {1}  # both nouns precede the pronoun


def test_nearest_rule_with_a_candidate_after_the_pronoun():
    item = AnnotatedSentence(("he", "said", "the", "man", "left"), (), pronoun=0, candidates=(3,), antecedent=3)
    assert baseline_picks([item], "nearest").tolist() == [0]


def test_antecedent_preference():
    weights = np.array([[[0.6, 0.1]], [[0.6, 0.1]]])   # (items, heads, candidates): the same in both halves
    answers = np.array([0, 1])
    preference = antecedent_preference(weights, answers)
    assert preference[:, 0].tolist() == pytest.approx([0.5, -0.5])
    assert preference.mean() == pytest.approx(0.0)   # ignoring the flipping word averages out


def test_pair_halves_validates_pairs():
    items = pronoun_pairs()
    first, second = pair_halves(items)
    assert len(first) == len(second) == 22
    with pytest.raises(ValueError, match="exactly 2"):
        pair_halves(items[:3])


@pytest.mark.slow
def test_score_pronoun_items_on_the_model_and_layer_zero_never_flips():
    from mha.analysis.coreference_and_content.coreference import candidate_similarity, score_pronoun_items
    from mha.pretrained.encoder import MiniLMEncoder

    encoder = MiniLMEncoder.load()
    items = pronoun_pairs()[:6]
    trace = encoder.trace([list(s.words) for s in items], is_split_into_words=True)
    scores = score_pronoun_items(trace, items)
    assert scores.weights.shape == (6, 6, 12, 2) and scores.first.tolist() == [0, 2, 4]
    assert np.all(scores.weights >= 0) and np.all(scores.weights.sum(-1) <= 1 + 1e-6)
    # layer 0 sees only word + position embeddings: the ratio of the two candidates' weights cannot
    # depend on a word elsewhere in the sentence, so no layer-0 head ever flips its pick
    log_ratio = np.log(scores.weights[..., 0]) - np.log(scores.weights[..., 1])  # (items, layers, heads)
    assert np.abs(log_ratio[scores.first, 0] - log_ratio[scores.second, 0]).max() < 1e-4
    assert scores.flips().unchanged[0].tolist() == [3] * 12
    similarity = candidate_similarity(trace, items)
    assert similarity.shape == (6, 2) and np.all(np.abs(similarity) <= 1 + 1e-6)
    with pytest.raises(ValueError, match="sentences"):
        score_pronoun_items(trace, items[:4])


# ---------------------------------------------------------------- patching heads between the halves of a pair


@pytest.fixture(scope="module")
def encoder():
    from mha.pretrained.encoder import MiniLMEncoder

    return MiniLMEncoder.load()


@pytest.fixture(scope="module")
def two_pairs_patched(encoder):
    from mha.analysis.coreference_and_content.coreference import pair_patching

    return pair_patching(encoder, pronoun_pairs()[:4])  # the first two pairs: every head patched both ways


@pytest.mark.slow
def test_pair_patching_measures_the_pair_difference_and_what_one_head_carries(encoder, two_pairs_patched):
    from mha.analysis.coreference_and_content.coreference import candidate_similarity, lean_to_first_candidate
    from mha.pretrained.patching import final_states_with_heads_patched

    items = pronoun_pairs()[:4]  # the first half's answer is the first noun in the first pair
    result = two_pairs_patched
    assert result.pair_ids == (items[0].pair_id, items[2].pair_id) and result.carried.shape == (2, 6, 12)
    # the difference is the preference for the correct noun (cos to it minus cos to the other), summed over halves
    trace = encoder.trace([list(item.words) for item in items], is_split_into_words=True)
    similarity = candidate_similarity(trace, items)
    answers = np.array([item.candidates.index(item.antecedent) for item in items])
    preference = similarity[np.arange(4), answers] - similarity[np.arange(4), 1 - answers]
    np.testing.assert_allclose(result.difference, preference[[0, 2]] + preference[[1, 3]], atol=1e-6)
    # one head by hand, patched as a set of one: how far each half's lean moves toward its twin's, averaged
    pair = items[:2]
    target = encoder.trace([list(item.words) for item in pair], is_split_into_words=True)
    source = encoder.trace([list(item.words) for item in pair[::-1]], is_split_into_words=True)
    before = lean_to_first_candidate(target, pair)
    after = lean_to_first_candidate(target, pair, final_states_with_heads_patched(encoder, target, source, [(3, 1)]))
    assert answers[0] == 0
    np.testing.assert_allclose(result.carried[0, 3, 1], ((before[0] - after[0]) + (after[1] - before[1])) / 2,
                               atol=1e-6)
    assert np.abs(result.carried).max() > 1e-3


@pytest.mark.slow
def test_pair_patching_does_not_depend_on_which_half_comes_first(encoder, two_pairs_patched):
    from mha.analysis.coreference_and_content.coreference import pair_patching

    items = pronoun_pairs()[:4]
    swapped = pair_patching(encoder, [items[1], items[0], items[3], items[2]])
    result = two_pairs_patched
    np.testing.assert_allclose(swapped.difference, result.difference, atol=1e-6)
    np.testing.assert_allclose(swapped.carried, result.carried, atol=1e-6)


@pytest.mark.slow
def test_pair_patching_leaves_out_pairs_of_different_lengths_and_says_so(encoder):
    from mha.analysis.coreference_and_content.coreference import pair_patching

    items = pronoun_pairs()
    uneven = [i for i, item in enumerate(items) if item.pair_id == "boat-river"]
    lengths = encoder.tokenize([list(items[i].words) for i in uneven], is_split_into_words=True).lengths
    assert lengths[0] != lengths[1]
    with pytest.raises(ValueError, match="no pair has two halves of the same length"):
        pair_patching(encoder, [items[i] for i in uneven])
    result = pair_patching(encoder, [items[i] for i in uneven] + list(items[:2]))
    assert result.left_out == ("boat-river",) and result.pair_ids == (items[0].pair_id,)


@pytest.mark.slow
def test_stored_pair_patching_matches_a_fresh_run_and_refuses_a_bad_file(two_pairs_patched, tmp_path):
    from mha.analysis.coreference_and_content.coreference import load_pair_patching

    stored = load_pair_patching()
    assert stored.left_out == ("boat-river",) and len(stored.pair_ids) == len(pronoun_pairs()) // 2 - 1
    assert stored.pair_ids[:2] == two_pairs_patched.pair_ids
    np.testing.assert_allclose(two_pairs_patched.carried, stored.carried[:2], atol=1e-5)  # stored at 6 decimals
    assert stored.share().shape == (6, 12)
    low, high = stored.share_interval()
    assert (low <= stored.share()).all() and (stored.share() <= high).all()
    malformed = tmp_path / "patching.json"
    malformed.write_text('{"pair_ids": ["a", "b"], "left_out": [], "difference": [0.1], "carried": [[[0.0]]]}')
    with pytest.raises(ValueError, match="they should be \\(pairs,\\) and \\(pairs, layers, heads\\)"):
        load_pair_patching(malformed)
    malformed.write_text('{"pair_ids": ["a"]}')
    with pytest.raises(ValueError, match="needs 'pair_ids', 'left_out', 'difference'"):
        load_pair_patching(malformed)


@pytest.mark.slow
def test_stored_lean_change_matches_heads_removed_from_scratch_and_refuses_a_bad_file(encoder, tmp_path):
    from mha.analysis.coreference_and_content.coreference import (
        candidate_similarity,
        load_lean_change_without_each_head,
    )

    stored = load_lean_change_without_each_head()  # (layers, heads), at 6 decimals
    assert stored.shape == (6, 12)
    items = pronoun_pairs()
    words = [list(item.words) for item in items]
    answers = np.array([item.candidates.index(item.antecedent) for item in items])
    rows = np.arange(len(items))

    def mean_lean(trace):  # by hand: cos to the correct noun minus to the other, over every item (= both halves)
        similarity = candidate_similarity(trace, items)
        return (similarity[rows, answers] - similarity[rows, 1 - answers]).mean()

    full = mean_lean(encoder.trace(words, is_split_into_words=True))
    largest = np.unravel_index(np.abs(stored).argmax(), stored.shape)
    for layer, head in {(int(largest[0]), int(largest[1])), (0, 0), (5, 11)}:  # the whole model rerun, head masked
        mask = encoder.head_mask([(layer, head)])
        removed = mean_lean(encoder.trace(words, is_split_into_words=True, head_mask=mask))
        assert stored[layer, head] == pytest.approx(removed - full, abs=2e-6), (layer, head)
    malformed = tmp_path / "removal.json"  # in a folder without a list of sha256s: read, then checked
    malformed.write_text('{"change": [1.0, 2.0]}')
    with pytest.raises(ValueError, match="(?s)needs 'change', a \\(layers, heads\\) table.*coreference_removal"):
        load_lean_change_without_each_head(malformed)
