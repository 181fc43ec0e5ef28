"""Tests for mha.core.low_rank_fitting: hand-made targets, exact minimum widths, and small fits with known outcomes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from conftest import load_script

from mha.core.low_rank_fitting import (
    PATTERN_FITS_PATH,
    REGENERATE_PATTERN_FITS,
    PatternFitsError,
    dense_random_pattern,
    first_token_pattern,
    fit_head_patterns,
    load_pattern_fits,
    min_head_width,
    pattern_error,
    permutation_pattern,
    previous_token_pattern,
    row_centred,
)

torch.set_num_threads(1)
f64 = torch.float64


def test_target_patterns_by_hand():
    assert torch.equal(previous_token_pattern(3), torch.tensor([[1.0, 0, 0], [1, 0, 0], [0, 1, 0]], dtype=f64))
    assert torch.equal(first_token_pattern(3), torch.tensor([[1.0, 0, 0], [1, 0, 0], [1, 0, 0]], dtype=f64))
    permutation = permutation_pattern(6, seed=3)
    assert torch.equal(permutation.sum(0), torch.ones(6, dtype=f64)) and torch.equal(
        permutation.sum(1), torch.ones(6, dtype=f64)
    )
    assert torch.equal(permutation, permutation_pattern(6, seed=3))
    dense = dense_random_pattern(5, seed=1)
    assert bool((dense > 0).all()) and torch.allclose(dense.sum(-1), torch.ones(5, dtype=f64))
    with pytest.raises(ValueError, match="at least 2"):
        previous_token_pattern(1)


def test_row_centred_rows_sum_to_zero_and_keep_the_softmax():
    scores = torch.tensor([[1.0, 2.0, 6.0], [0.0, 0.0, 3.0]], dtype=f64)
    centred = row_centred(scores)
    assert torch.allclose(centred, torch.tensor([[-2.0, -1.0, 3.0], [-1.0, -1.0, 2.0]], dtype=f64))
    assert torch.allclose(centred.softmax(-1), scores.softmax(-1))


def test_min_head_width_recovers_the_rank_of_the_scores_that_made_a_pattern():
    g = torch.Generator().manual_seed(0)
    for rank in (1, 2, 5):
        Q, K = torch.randn(9, rank, generator=g, dtype=f64), torch.randn(9, rank, generator=g, dtype=f64)
        shift = torch.randn(9, 1, generator=g, dtype=f64)  # a constant per row changes nothing
        pattern = (Q @ K.T + shift).softmax(-1)
        assert min_head_width(pattern) == rank
    assert min_head_width(dense_random_pattern(9, seed=0)) == 8  # n - 1: centring removes one dimension
    soft_first = 0.9 * first_token_pattern(9) + 0.1 / 9  # every query prefers key 0 by the same margin
    assert min_head_width(soft_first) == 1
    with pytest.raises(ValueError, match="strictly positive"):
        min_head_width(first_token_pattern(9))


def test_pattern_error_is_the_mean_total_variation_distance():
    target = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=f64)
    fitted = torch.tensor([[0.75, 0.25], [0.5, 0.5]], dtype=f64)
    assert float(pattern_error(fitted, target)) == pytest.approx((0.25 + 0.5) / 2)
    assert float(pattern_error(target, target)) == 0.0
    with pytest.raises(ValueError, match="n_q, n_k"):
        pattern_error(fitted, torch.ones(3, 3))


@pytest.mark.slow
def test_fits_are_exact_where_the_width_allows_and_not_below():
    n = 6
    tokens = torch.randn(n, 12, generator=torch.Generator().manual_seed(0), dtype=f64)
    targets = torch.stack([first_token_pattern(n), dense_random_pattern(n, seed=1)])
    fit = fit_head_patterns(tokens, targets, d_heads=[1, 5], steps=300, restarts=2, seed=0)
    assert fit.error.shape == (2, 2) and fit.fitted.shape == (2, 2, n, n)
    assert float(fit.error[0, 0]) < 0.01  # one width suffices to send everyone to token 0
    assert float(fit.error[1, 1]) < 0.01  # width n - 1 reproduces any positive pattern
    assert float(fit.error[1, 0]) > 0.05  # width 1 cannot
    assert torch.allclose(pattern_error(fit.fitted, targets[:, None]), fit.error)
    again = fit_head_patterns(tokens, targets, d_heads=[1, 5], steps=300, restarts=2, seed=0)
    assert torch.equal(fit.error, again.error), "fits are deterministic for a given seed"


@pytest.mark.slow
def test_score_cap_bounds_the_scores():
    n = 5
    tokens = torch.randn(n, 8, generator=torch.Generator().manual_seed(1), dtype=f64)
    targets = permutation_pattern(n, seed=0)[None]
    free = fit_head_patterns(tokens, targets, d_heads=[4], steps=200, restarts=1)
    capped = fit_head_patterns(tokens, targets, d_heads=[4], steps=200, restarts=1, score_cap=2.0)
    assert float(capped.scores.abs().max()) <= 2.0
    assert float(free.score_range()[0, 0]) > float(capped.score_range()[0, 0])


def test_fit_head_patterns_rejects_bad_inputs():
    tokens = torch.zeros(4, 8, dtype=f64)
    with pytest.raises(ValueError, match="sum to 1"):
        fit_head_patterns(tokens, torch.ones(1, 4, 4, dtype=f64), d_heads=[1])
    with pytest.raises(ValueError, match="4 tokens"):
        fit_head_patterns(tokens, first_token_pattern(5)[None], d_heads=[1])
    with pytest.raises(ValueError, match="positive"):
        fit_head_patterns(tokens, first_token_pattern(4)[None], d_heads=[1], score_cap=0.0)


def test_the_stored_fits_match_the_setup_they_declare_and_the_script():
    stored = load_pattern_fits()
    script = load_script("fit_head_patterns")  # its setup constants
    assert stored.path == PATTERN_FITS_PATH and stored.regenerate == REGENERATE_PATTERN_FITS
    assert stored.targets == tuple(script.TARGET_RECIPES) and stored.target_recipes == script.TARGET_RECIPES
    assert stored.widths == script.WIDTHS and len(stored.seeds) >= 2
    assert stored.score_caps == script.REGIMES
    assert stored.setup == {"n": script.N, "d_model": script.D_MODEL, "token_seed": script.TOKEN_SEED,
                            "steps": script.STEPS, "lr": script.LR, "restarts": script.RESTARTS}
    shape = (len(stored.seeds), len(stored.targets), len(stored.widths))
    for regime in stored.regimes:
        assert stored.error[regime].shape == shape and stored.score_range[regime].shape == shape
    stored.check_setup(n=16, d_model=64, targets=list(script.TARGET_RECIPES), widths=script.WIDTHS, steps=300,
                       restarts=2)
    with pytest.raises(PatternFitsError, match="widths: the file has"):
        stored.check_setup(n=16, d_model=64, targets=list(script.TARGET_RECIPES), widths=(1, 2), steps=300, restarts=2)


def test_the_stored_fits_obey_what_is_known_exactly():
    stored = load_pattern_fits()
    capped = stored.error["scores capped at ±5"]
    first, dense = stored.targets.index("first token"), stored.targets.index("dense random")
    # scores within ±5 put at most e^5 / (e^5 + 15 e^-5) on one key of 16: a one-hot row misplaces at least this
    floor = 15 / (math.exp(10) + 15)
    assert float(capped[:, first].min()) >= round(floor, 4) - 1e-12
    assert float(stored.error["free scores"][:, first].max()) < 0.01  # width 1 suffices for "everyone looks at token 0"
    assert float(stored.error["free scores"][:, dense, 0].min()) > 0.1  # width 1 cannot give a dense graded pattern
    assert float(stored.score_range["scores capped at ±5"].max()) <= 10.0  # largest minus smallest, within ±5


def _write(tmp_path, data) -> Path:
    path = tmp_path / "pattern_fits.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_load_pattern_fits_names_the_regeneration_command_when_the_file_is_missing_or_unreadable(tmp_path):
    with pytest.raises(PatternFitsError, match="missing") as missing:
        load_pattern_fits(tmp_path / "absent.json")
    assert REGENERATE_PATTERN_FITS in str(missing.value)
    with pytest.raises(PatternFitsError, match="not a regular file") as folder:
        load_pattern_fits(tmp_path)
    assert REGENERATE_PATTERN_FITS in str(folder.value)
    with pytest.raises(PatternFitsError, match="cannot be read as JSON") as broken:
        load_pattern_fits(_write(tmp_path, '{"format": 1, "setup": '))
    assert REGENERATE_PATTERN_FITS in str(broken.value)


def test_load_pattern_fits_rejects_malformed_contents(tmp_path):
    good = json.loads(PATTERN_FITS_PATH.read_text(encoding="utf-8"))
    assert load_pattern_fits(_write(tmp_path, good)).targets == load_pattern_fits().targets

    def broken(change):
        data = json.loads(json.dumps(good))
        change(data)
        return _write(tmp_path, data)

    regime = next(iter(good["regimes"]))
    cases = [
        (lambda d: d.clear(), "no field 'format'"),
        (lambda d: d.update(format=2), "format 2"),
        (lambda d: d["setup"].pop("steps"), "no field 'steps'"),
        (lambda d: d.update(widths=[1, 1]), "distinct head widths"),
        (lambda d: d["regimes"][regime]["error"].pop(), "list of"),  # one seed short
        (lambda d: d["regimes"][regime]["error"][0][0].append(0.0), "list of"),  # one width too many
        (lambda d: d["regimes"][regime]["error"][0][0].__setitem__(0, 1.5), r"number in \[0.0, 1.0\]"),
        (lambda d: d["regimes"][regime]["score_range"][0][0].__setitem__(0, "big"), "number in"),
        (lambda d: d["regimes"][regime].update(score_cap=-1), "positive number"),
        (lambda d: d.update(regimes=[]), "non-empty object"),
    ]
    for change, message in cases:
        with pytest.raises(PatternFitsError, match=message) as error:
            load_pattern_fits(broken(change))
        assert "malformed" in str(error.value) and REGENERATE_PATTERN_FITS in str(error.value)
    with pytest.raises(PatternFitsError, match="JSON object"):
        load_pattern_fits(_write(tmp_path, "[1, 2]"))
