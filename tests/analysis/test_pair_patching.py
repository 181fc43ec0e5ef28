"""Minimal pairs under patching: a head against the other heads of its layer, several readouts at once, a subset of
heads, and the stored form (sections 3.2, 3.3, 4.1; mha.analysis.pair_patching)."""

import numpy as np
import pytest
from scipy.stats import bootstrap

from mha.analysis.pair_patching import PairPatching, patch_between_halves
from mha.pretrained.encoder import MiniLMEncoder


def _synthetic(pairs=400, seed=0):
    rng = np.random.default_rng(seed)
    difference = 1 + 0.1 * rng.standard_normal(pairs)
    carried = 0.02 * rng.standard_normal((pairs, 3, 4))
    carried[:, 1, 2] += 0.3 * difference  # one head carries about 30% of each pair's difference
    return PairPatching(tuple(str(i) for i in range(pairs)), difference, carried)


def test_a_head_against_its_layer_is_the_hand_computed_means_with_bootstrap_intervals():
    result = _synthetic()
    shares = result.carried / result.difference.mean()
    own, others = shares[:, 1, 2], shares[:, 1, [0, 1, 3]].mean(axis=1)
    found = result.against_layer(1, 2)
    assert found.pairs == 400
    assert found.share == pytest.approx(own.mean()) and found.others == pytest.approx(others.mean())
    assert found.excess == pytest.approx(own.mean() - others.mean())
    reference = bootstrap(((own - others),), np.mean, method="percentile", n_resamples=4000, random_state=1)
    assert found.excess_interval[0] == pytest.approx(reference.confidence_interval.low, abs=0.004)
    assert found.excess_interval[1] == pytest.approx(reference.confidence_interval.high, abs=0.004)
    assert found.share_interval[0] < found.share < found.share_interval[1]
    half = result.against_layer(1, 2, pairs=np.arange(200))
    assert half.pairs == 200 and half.share == pytest.approx(own[:200].mean())
    with pytest.raises(ValueError, match="not one of"):
        result.against_layer(3, 0)


def test_the_stored_form_keeps_only_the_patched_layers_and_comes_back_with_nan_elsewhere():
    result = _synthetic(pairs=5)
    result.carried[:, 0] = np.nan  # layer 0 not patched
    stored = result.to_dict(decimals=6, layers=[1, 2])
    assert stored["layers"] == [1, 2] and np.asarray(stored["carried"]).shape == (5, 2, 4)
    back = PairPatching.from_dict(stored, n_layers=3)
    assert np.isnan(back.carried[:, 0]).all()
    np.testing.assert_allclose(back.carried[:, 1:], np.round(result.carried[:, 1:], 6))
    assert back.pair_ids == result.pair_ids
    whole = PairPatching.from_dict(_synthetic(pairs=5).to_dict())
    assert whole.carried.shape == (5, 3, 4)
    with pytest.raises(ValueError, match="n_layers"):
        PairPatching.from_dict(stored)
    with pytest.raises(ValueError, match="pair_ids"):
        PairPatching.from_dict({"difference": []})


@pytest.fixture(scope="module")
def encoder():
    return MiniLMEncoder.load()


def test_two_readouts_at_once_and_a_subset_of_heads_agree_with_the_plain_patching(encoder):
    first = [["the", "cat", "sat", "on", "the", "mat"], ["she", "read", "a", "good", "book"]]
    second = [["the", "dog", "sat", "on", "the", "mat"], ["she", "wrote", "a", "good", "book"]]

    def norm_of(word):
        def readout(target, states):
            states = target.hidden_states[-1] if states is None else states
            return states[:, word].norm(dim=-1).double().numpy()  # (rows,)
        return readout

    def both(target, states):
        return np.stack([norm_of(1)(target, states), norm_of(2)(target, states)])  # (2, rows)

    plain_difference, plain_moved = patch_between_halves(encoder, first, second, norm_of(2))
    difference, moved = patch_between_halves(encoder, first, second, both)
    assert difference.shape == (2, 2) and moved.shape == (2, 6, 12, 2)
    np.testing.assert_allclose(difference[1], plain_difference, atol=1e-6)
    np.testing.assert_allclose(moved[..., 1], plain_moved, atol=1e-5)
    heads = [(5, head) for head in range(12)]
    sub_difference, sub_moved = patch_between_halves(encoder, first, second, norm_of(2), heads)
    np.testing.assert_allclose(sub_difference, plain_difference, atol=1e-6)
    np.testing.assert_allclose(sub_moved[:, 5], plain_moved[:, 5], atol=1e-5)
    assert np.isnan(sub_moved[:, :5]).all()
