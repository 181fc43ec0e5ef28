"""The paraphrase test set and its scores, on hand-made similarity matrices."""

import numpy as np
import pytest
import torch

from mha.corpora.paraphrases import (
    TRIPLES,
    contrastive_loss,
    distractor_accuracy,
    pair_set,
    ranking_accuracy,
    retrieval_accuracy,
    similarity_rank_correlation,
    similarity_scores,
    split_triples,
    task_scores,
    unrelated_accuracy,
    word_overlap_similarity,
)


def test_triples_are_distinct_sentences():
    sentences = [s for t in TRIPLES for s in (t.anchor, t.paraphrase, t.distractor)]
    assert len(TRIPLES) == 24 and len(set(sentences)) == len(sentences)


def test_split_is_seeded_and_disjoint():
    select, held_out = split_triples(seed=0)
    assert (select, held_out) == split_triples(seed=0) and (select, held_out) != split_triples(seed=1)
    assert sorted(select + held_out) == list(range(24)) and len(select) == 12
    with pytest.raises(ValueError, match="n_select"):
        split_triples(n_select=24)


def test_pair_set_layout():
    pairs = pair_set([3, 5])
    assert pairs.sentences == [TRIPLES[3].anchor, TRIPLES[5].anchor, TRIPLES[3].paraphrase, TRIPLES[5].paraphrase,
                               TRIPLES[3].distractor, TRIPLES[5].distractor]
    assert pairs.anchors.tolist() == [0, 1] and pairs.paraphrases.tolist() == [2, 3]
    everything = pair_set()
    rows = everything.rows_of([3, 5])
    assert [everything.sentences[r] for r in rows] == pairs.sentences
    with pytest.raises(ValueError, match="indices"):
        pair_set([24])


def hand_similarity():
    # 2 anchors; candidates: paraphrase 0, paraphrase 1, distractor 0, distractor 1
    return np.array([[0.9, 0.1, 0.95, 0.2],   # anchor 0: its distractor beats its paraphrase
                     [0.3, 0.8, 0.0, 0.8]])   # anchor 1: a tie with distractor 1


def test_ranking_and_retrieval_accuracy_on_a_hand_example():
    similarity = hand_similarity()
    # anchor 0 beats 2 of 3 others; anchor 1 beats 2 and ties 1 -> 2.5 of 3
    assert ranking_accuracy(similarity) == pytest.approx((2 / 3 + 2.5 / 3) / 2)
    assert retrieval_accuracy(similarity) == pytest.approx(0.5)  # anchor 1's argmax is its paraphrase (first of a tie)
    assert ranking_accuracy(np.stack([similarity, similarity])).shape == (2,)


def test_unrelated_and_distractor_accuracy_on_a_hand_example():
    similarity = hand_similarity()
    assert unrelated_accuracy(similarity) == pytest.approx(1.0)   # 0.9 > 0.1 and 0.8 > 0.3
    assert distractor_accuracy(similarity) == pytest.approx((0.0 + 0.5) / 2)  # anchor 0 loses, anchor 1 ties


def test_similarity_rank_correlation():
    reference = hand_similarity()
    assert similarity_rank_correlation(reference, reference) == pytest.approx(1.0)
    stacked = similarity_rank_correlation(np.stack([reference, 2 * reference + 1, -reference]), reference)
    assert np.allclose(stacked, [1.0, 1.0, -1.0])


def test_word_overlap_baseline():
    pairs = pair_set([6])  # 'He lost his keys on the way home.' / ... / 'He found his keys on the way home.'
    overlap = word_overlap_similarity(pairs)
    assert overlap.shape == (1, 2) and overlap[0, 1] == pytest.approx(7 / 9) and overlap[0, 1] > overlap[0, 0]


def test_contrastive_loss_is_cross_entropy_and_works_in_torch():
    similarity = hand_similarity()
    logits = 20 * similarity
    expected = np.mean([np.log(np.exp(logits[i]).sum()) - logits[i, i] for i in range(2)])
    assert contrastive_loss(similarity) == pytest.approx(expected)
    as_torch = contrastive_loss(torch.tensor(similarity, requires_grad=True))
    assert isinstance(as_torch, torch.Tensor) and as_torch.requires_grad
    assert float(as_torch.detach()) == pytest.approx(expected)


def test_similarity_scores_and_task_scores():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(6, 4))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    similarity = similarity_scores(vectors)
    assert similarity.shape == (2, 4) and np.allclose(similarity[1, 3], vectors[1] @ vectors[5])
    scores = task_scores(similarity)
    assert set(scores) == {"paraphrase vs unrelated", "paraphrase vs distractor", "ranking accuracy",
                           "retrieval accuracy", "contrastive loss"}
    assert all(isinstance(v, float) for v in scores.values())
    with pytest.raises(ValueError, match="3n"):
        similarity_scores(vectors[:5])


def test_complex_or_missing_similarities_are_refused_not_scored():
    """Complex vectors gave complex "similarities"; a NaN similarity lost every comparison and lowered the scores."""
    from mha.core.validation import InputError
    from mha.corpora.paraphrases import contrastive_loss, ranking_accuracy, similarity_scores

    vectors = np.eye(6, 4)
    for complex_vectors in (vectors * (1 + 1j), torch.tensor(vectors * (1 + 1j))):
        with pytest.raises(InputError, match="embeddings holds complex numbers"):
            similarity_scores(complex_vectors)
    with pytest.raises(InputError, match="similarity holds complex numbers"):
        contrastive_loss(torch.ones(2, 4, dtype=torch.complex64))
    with pytest.raises(InputError, match="scale must be a finite number above 0"):
        contrastive_loss(np.zeros((2, 4)), scale=float("nan"))
    with pytest.raises(InputError, match="similarity holds NaN or inf"):
        ranking_accuracy(np.array([[float("nan"), 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]))
    assert similarity_scores(torch.tensor(vectors)).dtype == torch.float64  # real input: unchanged
