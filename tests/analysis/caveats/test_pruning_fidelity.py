"""Pruning judged on real sentences: pairwise similarities, fidelity, the self-retrieval loss, the stored curves."""

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from mha.analysis.caveats.pruning_fidelity import (
    embeddings_in_length_chunks,
    fidelity_pruning_curve,
    load_pruning_treebank,
    pairwise_similarities,
    resampled_removable,
    self_retrieval_loss,
    similarity_fidelity,
)
from mha.pretrained.encoder import MiniLMEncoder


def test_pairwise_similarities_are_the_upper_triangle_of_cosines():
    vectors = np.random.default_rng(0).normal(size=(5, 7))
    got = pairwise_similarities(vectors)
    expected = [np.dot(vectors[i], vectors[j]) / np.linalg.norm(vectors[i]) / np.linalg.norm(vectors[j])
                for i in range(5) for j in range(i + 1, 5)]  # a hand loop over the pairs
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    with pytest.raises(ValueError, match="at least 2"):
        pairwise_similarities(vectors[:1])


def test_similarity_fidelity_is_scipys_spearman_over_sentence_pairs():
    rng = np.random.default_rng(1)
    full = rng.normal(size=(9, 4))
    changed = full + rng.normal(scale=[[[0.1]], [[1.0]]], size=(2, 9, 4))  # (2 configs, 9, 4)
    got = similarity_fidelity(changed, full)
    for config in range(2):
        expected = spearmanr(pairwise_similarities(changed[config]), pairwise_similarities(full))[0]
        assert got[config] == pytest.approx(expected, abs=1e-12)
    assert got[0] > got[1]  # more noise, less fidelity
    assert similarity_fidelity(full, full) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="same sentences"):
        similarity_fidelity(changed[:, :5], full)


def test_self_retrieval_loss_is_torchs_cross_entropy_and_has_a_gradient_at_the_full_model():
    rng = np.random.default_rng(2)
    reference = torch.tensor(rng.normal(size=(6, 5)))
    vectors = reference.clone().requires_grad_(True)
    loss = self_retrieval_loss(vectors, reference, scale=20.0)
    unit = reference / reference.norm(dim=-1, keepdim=True)
    logits = 20.0 * unit @ unit.T
    expected = -torch.log_softmax(logits, dim=-1).diagonal().mean()  # hand-written cross-entropy
    assert float(loss) == pytest.approx(float(expected), rel=1e-10)
    (gradient,) = torch.autograd.grad(loss, vectors)
    assert float(gradient.abs().max()) > 1e-6  # unlike a distance to the full vectors, not 0 at the full model
    with pytest.raises(ValueError, match="n, d_model"):
        self_retrieval_loss(vectors[:3], reference)


def test_length_chunks_give_the_vectors_of_one_padded_batch():
    from mha.pretrained.sentence_embedding import sentence_embeddings

    encoder = MiniLMEncoder.load()
    sentences = ["A short one.", "This sentence is quite a bit longer than the first one is.", "Mid length here.",
                 "Tiny."]
    trace = encoder.trace(sentences)
    expected = sentence_embeddings(trace.hidden_states[-1], trace.real_tokens).numpy()
    full, changed = embeddings_in_length_chunks(encoder, sentences, np.ones((1, 6, 12)), chunk=2)
    np.testing.assert_allclose(full, expected, atol=2e-5)
    np.testing.assert_allclose(changed[0], expected, atol=2e-5)  # the all-ones mask is the full model
    with pytest.raises(ValueError, match="non-empty"):
        embeddings_in_length_chunks(encoder, ["fine", ""])


def test_fidelity_curve_starts_at_one_and_refuses_shared_sentences():
    encoder = MiniLMEncoder.load()
    selection = ["The cat sat on the mat.", "It rained all day.", "We left early."]
    report = ["Prices rose again.", "She read the letter twice.", "The train was late.", "He fixed the bike."]
    curve = fidelity_pruning_curve(encoder, selection, report, [0, 36, 72], order="gradient")
    assert curve["similarity_kept"][0] == pytest.approx(1.0) and curve["vector_kept"][0] == pytest.approx(1.0)
    assert curve["similarity_kept"][2] < 1.0 and sorted(curve["order"].tolist()) == list(range(72))
    with pytest.raises(ValueError, match="share"):
        fidelity_pruning_curve(encoder, selection, selection[:1] + report, [0, 8])
    with pytest.raises(ValueError, match="start at 0"):
        fidelity_pruning_curve(encoder, selection, report, [8, 16], order="random")


def test_resampled_removable_reads_each_resample_like_the_full_curve():
    rng = np.random.default_rng(3)
    full = rng.normal(size=(30, 6))
    pruned = np.stack([full, full + rng.normal(scale=0.05, size=full.shape), rng.normal(size=full.shape)])
    counts = [0, 4, 8]
    draws = resampled_removable(counts, pruned, full, (0.85, 0.95), n_resamples=20, seed=0)
    assert draws.shape == (20, 2) and set(np.unique(draws)) <= {0, 4, 8}
    assert (draws[:, 0] == 4).all()  # slight noise keeps 0.85 in every resample; random vectors never do



@pytest.mark.slow
def test_stored_treebank_pruning_is_what_its_script_describes():
    from mha.corpora.treebank import EWT_DEV_PATH, read_conllu, split_sentences

    stored = load_pruning_treebank()
    counts = stored["counts"]
    assert counts[0] == 0 and counts[-1] == 72 and all(b - a == stored["step"] for a, b in zip(counts, counts[1:]))
    treebank = read_conllu(EWT_DEV_PATH)
    kept = [i for i, s in enumerate(treebank) if 5 <= len(s.words) <= 40]
    assert stored["sentences"] == len(kept) and len(stored["splits"]) >= 3
    for split in stored["splits"]:
        selection, report = split_sentences(kept, 0.5, seed=split["seed"])
        assert split["selection"] == selection[:stored["n_selection"]]
        assert split["report"] == report[:stored["n_report"]]
        for name, curve in split["orders"].items():
            assert curve["similarity_kept"][0] == pytest.approx(1.0), name
            assert sorted(curve["order"]) == list(range(72))
            low, high = curve["removable_resampled"]["2.5%"], curve["removable_resampled"]["97.5%"]
            assert all(a <= b for a, b in zip(low, high))
            assert len(curve["similarity_kept"]) <= len(counts) and min(curve["similarity_kept"]) < stored["stop_below"]
        # the gradient order is chosen on the selection sentences: it differs from the triples' order
        assert split["orders"]["gradient"]["order"] != split["orders"]["triples"]["order"]
