"""The analysis on top of the interventions: mask builders, gradient importance, pruning curves, column means."""

import numpy as np
import pytest
import torch

from mha.analysis.caveats.ablation import (
    column_means,
    head_mask_gradients,
    heads_removable,
    keep_one_head_masks,
    michel_importance,
    pruning_masks,
    single_head_masks,
)
from mha.corpora.paraphrases import (
    contrastive_loss,
    distractor_accuracy,
    pair_set,
    similarity_scores,
    split_triples,
    unrelated_accuracy,
)
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.sentence_embedding import sentence_embeddings

SENTENCES = ["The trophy does not fit in the suitcase because it is too big .", "A short one ."]  # padded batch


def test_mask_builders():
    single = single_head_masks(2, 3)
    assert single.shape == (6, 2, 3) and (single.sum(axis=(1, 2)) == 5).all() and single[4, 1, 1] == 0
    keep = keep_one_head_masks(2, 3, layer=1, keep=[0, 2])
    assert keep[1].tolist() == [[1, 1, 1], [0, 0, 1]]
    pruned = pruning_masks([5, 0, 3, 1, 2, 4], [0, 2, 6], 2, 3)
    assert pruned[0].all() and pruned[1].ravel().tolist() == [0, 1, 1, 1, 1, 0] and not pruned[2].any()
    with pytest.raises(ValueError, match="distinct"):
        pruning_masks([0, 0], [1], 2, 3)


@pytest.mark.slow
def test_gradients_predict_the_effect_of_small_mask_changes():
    encoder = MiniLMEncoder.load()
    inputs = encoder.tokenize(SENTENCES)

    def loss(vectors):  # a scalar of the sentence vectors
        return (vectors[0] * vectors[1]).sum()

    gradients = head_mask_gradients(encoder, inputs, loss)
    assert gradients.shape == (2, 6, 12)
    # finite difference on one head, scaled in both sentences
    epsilon, (layer, head) = 1e-2, (4, 7)
    mask = torch.ones(6, 12)
    mask[layer, head] = 1 - epsilon
    with torch.no_grad():
        base, nudged = (encoder(inputs, head_mask=m) for m in (torch.ones(6, 12), mask))
        value = [float(loss(sentence_embeddings(t.hidden_states[-1], inputs.real_tokens))) for t in (base, nudged)]
    assert (value[0] - value[1]) / epsilon == pytest.approx(gradients[:, layer, head].sum(), rel=0.05, abs=1e-5)
    with pytest.raises(ValueError, match="configs, 6, 12"):
        head_mask_gradients(encoder, inputs, loss, mask=np.ones((12, 6)))


def test_michel_importance():
    gradients = np.array([[[1.0, -3.0], [0.0, 2.0]], [[-1.0, 1.0], [0.0, -2.0]]])  # (examples, layers, heads)
    raw = michel_importance(gradients, normalize_layers=False)
    assert np.allclose(raw, [[1.0, 2.0], [0.0, 2.0]])
    assert np.allclose(michel_importance(gradients), [[1 / np.sqrt(5), 2 / np.sqrt(5)], [0.0, 1.0]])


def test_heads_removable_reads_the_first_crossing():
    counts = [0, 10, 20, 30, 40]
    assert heads_removable(counts, [1.0, 0.99, 0.95, 0.99, 0.5], reference=1.0, max_drop=0.02) == 10
    assert heads_removable(counts, [1.0] * 5, reference=1.0, max_drop=0.02) == 40
    with pytest.raises(ValueError, match="increase"):
        heads_removable([0, 20, 10], [1, 1, 1], 1.0, 0.1)


def test_column_means():
    attention = np.array([[1.0, 0.0], [0.5, 0.5]])
    assert np.allclose(column_means(attention), [0.75, 0.25])
    with pytest.raises(ValueError, match=r"should be attention weights \(\.\.\., query, key\)"):
        column_means([1.0, 0.0])


def test_removable_at_thresholds_reads_every_curve_at_every_threshold():
    from mha.analysis.caveats.ablation import removable_at_thresholds

    counts = [0, 4, 8, 12]
    curves = np.array([[1.0, 0.97, 0.9, 0.8], [1.0, 0.88, 0.95, 0.5]])
    table = removable_at_thresholds(counts, curves, (0.85, 0.9, 0.95))
    assert table.tolist() == [[8, 8, 4], [8, 0, 0]]  # at 0.9 the dip at 4 ends the count though 8 recovers
    assert removable_at_thresholds(counts, curves[0], (0.85,)).tolist() == [[8]]
    with pytest.raises(ValueError, match="thresholds"):
        removable_at_thresholds(counts, curves, (1.5,))


def test_held_out_pruning_curve_starts_at_one_and_refuses_shared_triples():
    from mha.analysis.caveats.ablation import held_out_pruning_curve

    encoder = MiniLMEncoder.load()
    curve = held_out_pruning_curve(encoder, [0, 1], [2, 3], [0, 36, 72], order="random", seed=0)
    assert curve["ranking_kept"][0] == pytest.approx(1.0) and curve["ranking_kept"][1] < 1.0
    assert sorted(curve["order"].tolist()) == list(range(72))
    with pytest.raises(ValueError, match="share"):
        held_out_pruning_curve(encoder, [0, 1], [1, 2], [0, 8])
    with pytest.raises(ValueError, match="start at 0"):
        held_out_pruning_curve(encoder, [0], [1], [8, 16])


def test_stored_pruning_spread_is_what_its_script_describes():
    from mha.analysis.caveats.ablation import load_pruning_spread
    from mha.corpora.paraphrases import split_triples

    spread = load_pruning_spread()
    counts = spread["counts"]
    assert counts[0] == 0 and counts[-1] == 72
    assert all(b - a == spread["step"] for a, b in zip(counts, counts[1:], strict=False))
    assert len(spread["splits"]) >= 3
    for split in spread["splits"]:
        assert (split["selection"], split["held_out"]) == split_triples(seed=split["seed"])
        for curve in split["ranking_kept"].values():
            assert len(curve) == len(counts) and curve[0] == pytest.approx(1.0)
        # with every head removed both orders prune the same model
        assert split["ranking_kept"]["gradient"][-1] == split["ranking_kept"]["random"][-1]


@pytest.mark.slow
def test_stored_single_removals_match_heads_removed_from_scratch_and_refuse_a_bad_file(tmp_path):
    from scipy.stats import spearmanr

    from mha.analysis.caveats.ablation import REMOVAL_MEASURES, load_single_removals

    stored = load_single_removals()  # part -> measure -> (72,)
    assert set(stored) == {"all", "selection", "held_out"}
    encoder = MiniLMEncoder.load()
    pairs = pair_set()
    selection, _ = split_triples(seed=0)

    def vectors(head_mask=None):  # the whole model rerun with the mask, pooled as the model does
        trace = encoder.trace(pairs.sentences, head_mask=head_mask)
        return sentence_embeddings(trace.hidden_states[-1], trace.real_tokens).numpy()  # (72, 384)

    full = vectors()
    largest = int(np.argmax(stored["all"]["vector change (1 - cos)"]))
    for flat in sorted({largest, 0, 40}):
        removed = vectors(encoder.head_mask([divmod(flat, 12)]))
        for part, rows in (("all", np.arange(len(full))), ("selection", pairs.rows_of(selection))):
            similarity, reference = similarity_scores(removed[rows]), similarity_scores(full[rows])
            expected = {"vector change (1 - cos)": 1 - (removed[rows] * full[rows]).sum(-1).mean(),
                        "similarity ranking kept": spearmanr(similarity.ravel(), reference.ravel())[0],
                        "paraphrase vs unrelated": unrelated_accuracy(similarity),
                        "paraphrase vs distractor": distractor_accuracy(similarity),
                        "loss change": float(contrastive_loss(similarity)) - float(contrastive_loss(reference))}
            for name in REMOVAL_MEASURES:
                assert stored[part][name][flat] == pytest.approx(float(expected[name]), abs=2e-5), (flat, part, name)
    malformed = tmp_path / "removals.json"  # in a folder without a list of sha256s: read, then checked
    malformed.write_text('{"parts": {"all": {"loss change": [1.0]}}}')
    with pytest.raises(ValueError, match="(?s)need 'parts', with 'all'.*scripts.single_removals"):
        load_single_removals(malformed)


@pytest.mark.slow
def test_stored_triples_pruning_matches_a_pruned_model_run_from_scratch(tmp_path):
    from scipy.stats import spearmanr

    from mha.analysis.caveats.ablation import load_single_removals, load_triples_pruning

    stored = load_triples_pruning()
    encoder = MiniLMEncoder.load()
    selection, held_out = split_triples(seed=0)
    # the orders: chosen on the selection half only
    gradients = head_mask_gradients(encoder, encoder.tokenize(pair_set(selection).sentences),
                                    lambda vectors: contrastive_loss(similarity_scores(vectors)))
    np.testing.assert_allclose(stored["importance"], michel_importance(gradients), atol=1e-5)
    single = load_single_removals()["selection"]
    orders = stored["orders"]
    assert orders["gradient importance (Michel et al.)"].tolist() == np.argsort(stored["importance"].ravel(),
                                                                                kind="stable").tolist()
    assert orders["single removal: loss change"].tolist() == np.argsort(-single["loss change"], kind="stable").tolist()
    assert orders["random (seed 1)"].tolist() == np.random.default_rng(1).permutation(72).tolist()
    # two points of two curves: the whole model rerun on the held-out sentences with those heads removed
    held = pair_set(held_out)

    def vectors(head_mask=None):
        trace = encoder.trace(held.sentences, head_mask=head_mask)
        return sentence_embeddings(trace.hidden_states[-1], trace.real_tokens).numpy()  # (36, 384)

    full = vectors()
    reference = similarity_scores(full)
    for name, point in (("gradient importance (Michel et al.)", 3), ("random (seed 1)", 5)):
        mask = np.ones(72, dtype=np.float32)
        mask[orders[name][:stored["counts"][point]]] = 0
        pruned = vectors(torch.from_numpy(mask.reshape(6, 12)))
        similarity = similarity_scores(pruned)
        expected = {"vector change (1 - cos)": 1 - (pruned * full).sum(-1).mean(),
                    "similarity ranking kept": spearmanr(similarity.ravel(), reference.ravel())[0],
                    "paraphrase vs unrelated": unrelated_accuracy(similarity),
                    "paraphrase vs distractor": distractor_accuracy(similarity)}
        for measure, value in expected.items():
            assert stored["curves"][name][measure][point] == pytest.approx(float(value), abs=2e-5), (name, measure)
    malformed = tmp_path / "pruning.json"  # in a folder without a list of sha256s: read, then checked
    malformed.write_text('{"importance": [[1.0]], "counts": [0, 8], "orders": {"a": [0]}, "curves": {"a": {"x": [1]}}}')
    with pytest.raises(ValueError, match="(?s)each curve one value per count.*scripts.triples_pruning"):
        load_triples_pruning(malformed)
