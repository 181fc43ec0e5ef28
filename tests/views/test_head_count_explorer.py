"""The chapter-3 head-count explorer: quick to update, explains bad input, keeps the last good view, trains live."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha.lab.head_count_sweep import analysis_batch, token_names, train_two_relation_model
from mha.lab.training import TrainingConfig
from mha.views.head_count_explorer import (
    LIVE_TRAINING,
    N_EXAMPLES,
    HeadCountStudyExplorer,
    parse_head_count,
    shares_table_html,
)
from mha.views.heatmaps import weight_hundredths
from mha.views.payloads import decode_payload, stored_weights

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def explorer():
    return HeadCountStudyExplorer()


def model_maps(model, study, seed: int) -> np.ndarray:
    """The first N_EXAMPLES maps (sequences, heads, seq, seq) of ``model`` on the analysis batch of ``seed``."""
    with torch.no_grad():
        return model(analysis_batch(study.task, seed).inputs).attention_weights[0][:N_EXAMPLES].numpy()


def kept(explorer) -> tuple:
    """What must survive a refusal: the last good view, and the panels on screen."""
    return explorer.current, explorer.curves.value, explorer.shares_view.value


def test_first_view_shows_a_stored_model(explorer):
    assert "h = 1 heads of d_head = 32" in explorer.message.value
    assert "11,904 parameters" in explorer.message.value
    drawn = explorer.current.attention_map
    batch = analysis_batch(explorer.study.task, 0)
    assert drawn.query_labels == token_names(explorer.study.task, batch.inputs[0].tolist())
    assert any(label.startswith("ask k") for label in drawn.query_labels)
    np.testing.assert_allclose(drawn.weights, model_maps(explorer.study.model(1, 0), explorer.study, 0)[0, 0],
                               atol=1e-6)
    assert explorer.shares_view.value.count("<td>head ") == 1
    assert explorer.curves.value.startswith("<svg") and "polyline" in explorer.curves.value


def test_picking_a_head_count_updates_every_part(explorer):
    explorer.heads_picker.value = 8
    assert explorer.head_slider.max == 7
    assert explorer.shares_view.value.count("<td>head ") == 8
    assert "h = 8 heads of d_head = 4" in explorer.message.value
    explorer.head_slider.value = 7
    explorer.heads_picker.value = 2
    assert explorer.head_slider.max == 1 and explorer.head_slider.value == 1
    assert explorer.current.attention_map.title.startswith("head 1 of 2, held-out sequence 0")
    np.testing.assert_allclose(explorer.current.attention_map.weights,
                               model_maps(explorer.study.model(2, 0), explorer.study, 0)[0, 1], atol=1e-6)


@pytest.mark.parametrize("n_heads, seed, words", [(3, 0, "does not divide d_model = 32"), (64, 0, "does not divide"),
                                                  (12, 0, "1, 2, 4, 8, 16, 32"), ("four", 0, "whole number"),
                                                  (4, 42, "no run with seed 42")])
def test_asking_for_a_run_that_does_not_exist_explains_and_keeps_the_view(explorer, n_heads, seed, words):
    assert explorer.show(4, 0)
    before = kept(explorer)
    assert not explorer.show(n_heads, seed)
    assert "Cannot show this" in explorer.message.value and words in explorer.message.value
    assert kept(explorer) == before
    assert explorer.heads_picker.value == 4 and explorer.seed_picker.value == 0


@pytest.mark.parametrize("typed, words", [("5", "cannot split d_model = 32"), ("0", "cannot split"),
                                          ("64", "type one of 1, 2, 4, 8, 16, 32"), ("four", "not a whole number"),
                                          ("<b>2</b>", "&lt;b&gt;")])
def test_a_bad_head_count_to_train_is_explained_without_training(explorer, typed, words):
    explorer.train_heads.value = typed
    assert not explorer.retrain()
    assert explorer.progress.value == 0  # refused before a single training step
    assert "Cannot train this" in explorer.status.value and words in explorer.status.value


def test_parse_head_count():
    assert parse_head_count(" 16 ", 32) == 16
    with pytest.raises(ValueError, match="1, 2, 3, 4, 6, 8, 12, 24"):
        parse_head_count(5, 24)


def test_every_control_redraws_the_view(explorer):
    # How fast each update is belongs to the benchmark (scripts/bench_views.py, budget 50 ms), not to a timed test.
    seen = set()
    for n_heads in (1, 2, 4, 8, 16, 32):  # first visit of each: loads a checkpoint, measures, draws the curves
        explorer.show(n_heads, 1)
        assert explorer.shares_view.value.count("<td>head ") == n_heads
        seen.add(explorer.shares_view.value)
    assert len(seen) == 6
    for control, values in ((explorer.head_slider, range(explorer.head_slider.max + 1)),
                            (explorer.example_slider, (1, 2, 3))):
        weights, titles = set(), set()
        for value in values:
            control.value = value
            assert explorer.last_refresh_seconds is not None
            weights.add(explorer.current.attention_map.weights.tobytes())
            titles.add(explorer.current.attention_map.title)
        assert len(weights) > 1, f"moving {control.description!r} changed nothing in the map"
        assert len(titles) == len(values), f"moving {control.description!r} did not retitle the map"


@pytest.mark.slow
def test_live_retrain_shows_the_new_model_and_fits_the_time_budget(explorer):
    explorer.seed_picker.value = 0
    explorer.train_heads.value = "32"  # the slowest head count; its time is measured by scripts/bench_views.py
    steps = 150
    assert explorer.retrain(steps=steps)
    assert explorer.progress.value == steps and explorer.progress.max == steps
    assert "The model you trained live" in explorer.message.value and "h = 32" in explorer.message.value
    assert "Trained h = 32, seed 0" in explorer.status.value
    assert explorer.shares_view.value.count("<td>head ") == 32
    assert explorer.current.attention_map.title.startswith(f"head {explorer.head_slider.value} of 32,")
    explorer.heads_picker.value = 4  # back to the stored models
    assert "The model you trained live" not in explorer.message.value


@pytest.mark.slow
def test_in_jupyter_the_view_shows_the_model_trained_live_then_the_stored_ones_again():
    explorer = HeadCountStudyExplorer(n_heads=4, seed=1)
    assert explorer.status in explorer.widget.children
    stored = explorer.view_widget.payload
    steps = 5
    assert explorer.retrain("2", steps=steps)
    payload = decode_payload(explorer.view_widget.payload)
    controls = payload["controls"]
    assert [control["name"] for control in controls] == ["head", "sequence"]  # the live model has no heads or seed
    assert controls[0]["values"] == [0, 1] and controls[1]["values"] == list(range(N_EXAMPLES))
    assert len(payload["views"]) == len(payload["drawn"]) == 2 * N_EXAMPLES
    # the maps are those of the model that the same training gives again
    training = TrainingConfig(**{**LIVE_TRAINING.to_dict(), "seed": 1, "steps": steps})
    model, _ = train_two_relation_model(explorer.study.config(2), explorer.study.task, training, seed=1)
    maps = model_maps(model, explorer.study, 1)  # (sequences, 2 heads, seq, seq)
    for key, index in payload["views"].items():
        head, sequence = (int(part) for part in key.split("|"))
        drawn = payload["drawn"][index]
        assert payload["strings"][drawn["map"]["title"]].startswith(f"head {head} of 2, held-out sequence {sequence}")
        assert "The model you trained live</b>: h = 2 heads" in payload["strings"][drawn["message"]]
        np.testing.assert_array_equal(stored_weights(payload, drawn["map"]), weight_hundredths(maps[sequence, head]))
    assert explorer.show(4, 1)  # a stored run in code: the view on screen is the stored study's again
    assert explorer.view_widget.payload == stored


def test_html_views_reject_wrong_shapes():
    with pytest.raises(ValueError, match=r"\(heads, 3\)"):
        shares_table_html(np.zeros((4, 2)))


@pytest.mark.parametrize("typed", ["<img src=x onerror=alert(1)>", "<script>alert(1)</script>", "\ud800", "9" * 5000])
def test_anything_typed_as_a_head_count_is_answered_as_text(explorer, typed):
    explorer.train_heads.value = typed
    assert not explorer.retrain()
    status = explorer.status.value
    assert "Cannot train this" in status and "<img" not in status and "<script" not in status


@pytest.mark.parametrize("n_heads, seed", [([4], 0), (None, 0), (4, [0]), (4.5, 0)])
def test_odd_values_passed_to_show_get_a_message(explorer, n_heads, seed):
    assert explorer.show(4, 0)
    assert not explorer.show(n_heads, seed)
    assert "Cannot show this" in explorer.message.value


def test_a_run_that_cannot_be_loaded_is_a_message_not_a_dead_view(explorer, monkeypatch):
    from mha.lab.checkpoints import CheckpointError

    assert explorer.show(4, 0)
    before = kept(explorer)

    def damaged(n_heads, seed):
        raise CheckpointError("checkpoint file head_count_h2_seed3.safetensors is corrupted <b>")
    monkeypatch.setattr(explorer, "_stored_view", damaged)
    assert not explorer.show(2, 3)
    assert "Cannot show this" in explorer.message.value and "unexpected CheckpointError" in explorer.message.value
    assert "corrupted &lt;b&gt;" in explorer.message.value
    assert kept(explorer) == before


def test_a_live_run_that_fails_says_why_and_keeps_the_view(explorer, monkeypatch):
    import mha.views.head_count_explorer

    assert explorer.show(4, 0)
    before = kept(explorer)

    def failing(*args, **kwargs):
        raise RuntimeError("out of memory")
    monkeypatch.setattr(mha.views.head_count_explorer, "train_two_relation_model", failing)
    assert not explorer.retrain("2", steps=10)
    assert "unexpected RuntimeError (out of memory)" in explorer.status.value
    assert not explorer.train_button.disabled
    assert kept(explorer) == before
