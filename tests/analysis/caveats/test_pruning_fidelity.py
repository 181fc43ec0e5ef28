"""Pruning judged on real sentences: pairwise similarities, fidelity, the self-retrieval loss, the stored curves."""

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from mha.analysis.caveats.pruning_fidelity import (
    document_split,
    embeddings_in_length_chunks,
    fidelity_pruning_curve,
    load_pruning_treebank,
    pairwise_similarities,
    pruning_claim_verdict,
    resampled_removable,
    self_retrieval_loss,
    similarity_fidelity,
    treebank_document,
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



def test_resampling_documents_draws_whole_documents():
    rng = np.random.default_rng(5)
    full = rng.normal(size=(12, 5))
    pruned = np.stack([full, full + rng.normal(scale=0.3, size=full.shape), full + rng.normal(scale=2.0,
                                                                                              size=full.shape)])
    counts, thresholds = [0, 4, 8], (0.55, 0.9)  # off the values a few tied pairs can give (0.5)
    singletons = resampled_removable(counts, pruned, full, thresholds, n_resamples=30, seed=1,
                                     groups=list(range(12)))
    assert (singletons == resampled_removable(counts, pruned, full, thresholds, n_resamples=30, seed=1)).all()
    groups = ["a"] * 5 + ["b"] * 3 + ["c"] * 4
    draws = resampled_removable(counts, pruned, full, thresholds, n_resamples=30, seed=1, groups=groups)
    # the oracle: scipy's Spearman over the pairs of distinct sentences among the drawn documents' sentences
    members = {"a": range(0, 5), "b": range(5, 8), "c": range(8, 12)}
    unit = lambda v: v / np.linalg.norm(v, axis=-1, keepdims=True)  # noqa: E731
    for r, drawn in enumerate(np.random.default_rng(1).integers(0, 3, size=(30, 3))):
        sentences = [i for g in drawn for i in members["abc"[g]]]
        pairs = [(a, b) for k, a in enumerate(sentences) for b in sentences[k + 1:] if a != b]
        reference = [unit(full[a]) @ unit(full[b]) for a, b in pairs]
        curve = [spearmanr([unit(p[a]) @ unit(p[b]) for a, b in pairs], reference)[0] for p in pruned]
        expected = [max([c for c, v in zip(counts, curve, strict=True)
                         if all(w >= t for w in curve[:counts.index(c) + 1])])
                    for t in thresholds]
        assert draws[r].tolist() == expected
    with pytest.raises(ValueError, match="one label per"):
        resampled_removable(counts, pruned, full, thresholds, groups=groups[:-1])


def test_treebank_document_reads_the_ewt_document_id():
    assert treebank_document("en_ewt-ud-dev.conllu#email-enronsent28_03-0012") == "email-enronsent28_03"
    assert treebank_document("x#reviews-124552-0001") == "reviews-124552"
    for bad in ("no-hash-0001", "x#reviews", "x#reviews-ab"):
        with pytest.raises(ValueError):
            treebank_document(bad)


def test_document_split_takes_runs_of_whole_documents_that_share_none():
    documents = [f"doc{d}" for d, size in enumerate([3, 4, 2, 5, 1, 3, 4, 2, 6, 3]) for _ in range(size)]
    for seed in range(6):
        selection, report = document_split(documents, 5, 5, seed=seed)
        assert len(selection) == len(report) == 5
        assert not {documents[i] for i in selection} & {documents[i] for i in report}
        for part in (selection, report):
            assert part == list(range(part[0], part[0] + 5))  # consecutive sentences of the corpus
            assert part[0] == 0 or documents[part[0] - 1] != documents[part[0]]  # starting at a document's start
    assert document_split(documents, 5, 5, seed=3) == document_split(documents, 5, 5, seed=3)
    with pytest.raises(ValueError, match="two are needed"):
        document_split(documents, 30, 30)


def test_pruning_claim_verdict_follows_its_rule_on_hand_made_counts():
    thresholds = (0.85, 0.90, 0.95)
    many = {"on A": [[20, 16, 16], [24, 20, 16]], "on B": [[28, 20, 16], [32, 24, 20]]}  # a fifth of 72 is 14.4
    assert pruning_claim_verdict(many, many, thresholds, 72) == ("holds", None)
    loose_only = {"on A": [[16, 12, 8], [24, 16, 8]], "on B": [[24, 20, 12], [32, 24, 16]]}
    verdict, qualifier = pruning_claim_verdict(loose_only, loose_only, thresholds, 72)
    assert verdict == "holds with a qualifier"
    assert "of the 72 heads, 16 to 24 on A and 24 to 32 on B can go" in qualifier
    low = {"on A": [[12, 12, 8], [24, 16, 8]], "on B": [[24, 20, 12], [32, 24, 16]]}  # one resampled bound below
    assert pruning_claim_verdict(loose_only, low, thresholds, 72)[0] == "not shown"
    few = {"on A": [[8, 4, 4]], "on B": [[12, 8, 4]]}
    assert pruning_claim_verdict(few, few, thresholds, 72) == ("fails on this model", None)
    with pytest.raises(ValueError, match="same designs"):
        pruning_claim_verdict(many, {"on A": many["on A"]}, thresholds, 72)
    with pytest.raises(ValueError, match="must include"):
        pruning_claim_verdict(many, many, (0.85, 0.9), 72)


@pytest.mark.slow
def test_stored_treebank_pruning_is_what_its_script_describes():
    from mha.corpora.treebank import EWT_DEV_PATH, read_conllu, split_sentences

    stored = load_pruning_treebank()
    counts = stored["counts"]
    assert counts[0] == 0 and counts[-1] == 72
    assert all(b - a == stored["step"] for a, b in zip(counts, counts[1:], strict=False))
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
            assert all(a <= b for a, b in zip(low, high, strict=True))
            assert len(curve["similarity_kept"]) <= len(counts) and min(curve["similarity_kept"]) < stored["stop_below"]
        # the gradient order is chosen on the selection sentences: it differs from the triples' order
        assert split["orders"]["gradient"]["order"] != split["orders"]["triples"]["order"]
    documents = [treebank_document(treebank[i].origin) for i in kept]
    assert len(stored["document_splits"]) >= 3
    for split in stored["document_splits"]:
        selection, report = document_split(documents, stored["n_selection"], stored["n_report"], seed=split["seed"])
        assert split["selection"] == [kept[i] for i in selection] and split["report"] == [kept[i] for i in report]
        assert split["report_documents"] == len({documents[i] for i in report})
        for name, curve in split["orders"].items():
            assert curve["similarity_kept"][0] == pytest.approx(1.0), name
            assert min(curve["similarity_kept"]) < stored["stop_below"]
