"""The stored training timeline of the lab's induction model, its loader, and the payload the website draws.

The oracles are the stored checkpoints of the same run (``induction_2layer_seed0_stepNNNNN`` and the final model)
and that run's own log (``induction_2layer_seed0.json``): the timeline is a second recording of the same training.
"""

from __future__ import annotations

import html
import json
import re
import shutil

import numpy as np
import pytest
import torch

from mha.lab.checkpoints import LAB_DIRECTORY, checkpoint_names, load_checkpoint, load_json, record_file
from mha.lab.circuit_scores import head_role_scores
from mha.lab.induction import held_out_batch
from mha.lab.timeline import (
    TIMELINE_FILE,
    TIMELINE_PERIODS,
    TimelineError,
    frame_steps,
    load_induction_timeline,
    timeline_sequences,
)
from mha.lab.training import TrainingLog, steepest_drop
from mha.views import payloads
from mha.views.training_timeline import TrainingTimelineView

MODEL = "induction_2layer_seed0"
PLACEHOLDER = re.compile(r"""<div class=['"]mha-view['"] data-mha-recipe="([^"]*)">""")  # as website/view_payloads.py


@pytest.fixture(scope="module")
def timeline():
    return load_induction_timeline()


@pytest.fixture(scope="module")
def stored_run():
    return load_json(f"{MODEL}.json")


def stored_series() -> list[tuple[int, str]]:
    """(step, checkpoint name) for every stored checkpoint of the run, the final one included."""
    steps = [(int(name[-5:]), name) for name in checkpoint_names() if name.startswith(f"{MODEL}_step")]
    return sorted(steps) + [(load_checkpoint(MODEL)[1].steps, MODEL)]


def test_shapes_follow_the_model_and_the_frames(timeline):
    n_steps = len(timeline.steps)
    assert timeline.maps.shape == (n_steps, len(TIMELINE_PERIODS), 2, 4, 40, 40)
    assert timeline.maps.dtype == np.uint8
    assert timeline.previous_token.shape == timeline.prefix_matching.shape == (n_steps, 2, 4)
    assert timeline.loss.shape == timeline.held_out_loss.shape == timeline.train_loss.shape == (n_steps,)
    assert timeline.steps[0] == 0 and timeline.steps[-1] == 5000
    assert list(timeline.steps) == frame_steps(timeline.curve_steps.tolist(), timeline.phase_change_step)
    assert timeline.periods.tolist() == list(TIMELINE_PERIODS)


@pytest.mark.parametrize("step, name", stored_series())
@pytest.mark.slow
def test_maps_and_scores_agree_with_the_stored_checkpoint_of_that_step(timeline, step, name):
    model, _ = load_checkpoint(name)
    frame = timeline.frame_at(step)
    with torch.no_grad():
        weights = model(torch.as_tensor(timeline.tokens)).attention_weights  # (layers, sequences, heads, seq, seq)
    expected = np.rint(weights.transpose(0, 1).numpy().astype(np.float64) * 100)  # (sequences, layers, heads, ...)
    assert np.abs(timeline.maps[frame].astype(int) - expected).max() <= 1  # a hundredth, for rounding on another CPU
    batch = held_out_batch()
    scores = head_role_scores(model, batch.inputs, batch.details["repeat_mask"])
    np.testing.assert_allclose(timeline.prefix_matching[frame], scores["prefix_matching"].numpy(), atol=1e-3)
    np.testing.assert_allclose(timeline.previous_token[frame], scores["previous_token"].numpy(), atol=1e-3)


def test_the_recorded_sequences_are_the_held_out_ones():
    batch = held_out_batch()
    indices = timeline_sequences(batch.details["period"].tolist())
    stored = load_induction_timeline()
    assert np.array_equal(stored.tokens, batch.inputs[indices].numpy())
    assert stored.repeat_starts.tolist() == batch.details["repeat_start"][indices].tolist()


def test_the_loss_curve_is_the_stored_runs_and_so_is_the_phase_change(timeline, stored_run):
    rows = stored_run["loss_curve"]
    assert timeline.curve_steps.tolist() == [row["step"] for row in rows]
    np.testing.assert_allclose(timeline.curve_loss, [row["repeat_loss"] for row in rows], rtol=1e-4)
    # the package's definition (section 3.5), applied to the stored curve
    curve = TrainingLog(rows=[{"step": int(s), "repeat_loss": float(v)}
                              for s, v in zip(timeline.curve_steps, timeline.curve_loss, strict=True)])
    assert timeline.phase_change_step == int(steepest_drop(curve, "repeat_loss", window_steps=200)["step"])
    assert timeline.phase_change_step == stored_run["steepest_repeat_loss_drop"]["step"]
    held_out = {row["step"]: row["repeat_loss"] for row in stored_run["held_out_head_scores"]}
    for step, loss in zip(timeline.steps.tolist(), timeline.held_out_loss, strict=True):
        if step in held_out:
            assert loss == pytest.approx(held_out[step], rel=1e-4)


def test_the_loss_at_step_0_is_the_untrained_models(timeline):
    model, _ = load_checkpoint(f"{MODEL}_step00000")
    batch = held_out_batch()
    from mha.lab.tasks import InductionTask

    with torch.no_grad():
        loss = InductionTask().metrics(model(batch.inputs).logits, batch)["repeat_loss"]
    assert timeline.held_out_loss[0] == pytest.approx(loss, rel=1e-5)


@pytest.fixture
def copied(tmp_path):
    """A lab folder holding the timeline and a manifest that records it, to alter in a test."""
    shutil.copyfile(LAB_DIRECTORY / TIMELINE_FILE, tmp_path / TIMELINE_FILE)
    (tmp_path / "manifest.json").write_text(json.dumps({"checkpoints": {}, "files": {}}))
    record_file(tmp_path / TIMELINE_FILE, regenerate="python -m scripts.induction_timeline", description="copy",
                directory=tmp_path)
    return tmp_path


def rewrite(folder, change) -> None:
    """Change the copied timeline's content and record its new sha256, so that only the loader's checks can object."""
    path = folder / TIMELINE_FILE
    content = json.loads(path.read_text())
    change(content)
    path.write_text(json.dumps(content))
    record_file(path, regenerate="python -m scripts.induction_timeline", description="copy", directory=folder)


def test_an_unaltered_copy_loads(copied):
    assert load_induction_timeline(directory=copied).phase_change_step == load_induction_timeline().phase_change_step


def test_a_tampered_file_is_refused_by_its_sha256(copied):
    path = copied / TIMELINE_FILE
    path.write_text(path.read_text().replace('"seed":0', '"seed":1', 1))
    with pytest.raises(ValueError, match="sha256") as raised:
        load_induction_timeline(directory=copied)
    assert str(path) in str(raised.value) and "python -m scripts.induction_timeline" in str(raised.value)


def test_a_missing_file_is_refused(copied):
    (copied / TIMELINE_FILE).unlink()
    with pytest.raises(TimelineError, match="(?s)missing.*python -m scripts.induction_timeline"):
        load_induction_timeline(directory=copied)


@pytest.mark.parametrize("change, complaint", [
    (lambda c: c["frames"]["prefix_matching"].pop(), r"frames.prefix_matching has shape"),
    (lambda c: c["maps"]["shape"].__setitem__(0, 2), r"maps hold .* bytes, but their shape"),
    (lambda c: c["sequences"]["tokens"][0].__setitem__(3, 64), r"outside the vocabulary"),
    (lambda c: c["phase_change"].__setitem__("step", 3000), r"steepest 200-step fall .* step 2860"),
    (lambda c: c["frames"]["steps"].__setitem__(1, 101), r"frames.steps are not"),
    (lambda c: c["maps"].__setitem__("data", "not base64!"), r"cannot be decoded"),
], ids=["scores", "maps", "tokens", "phase change", "steps", "encoding"])
def test_content_that_does_not_hold_together_is_refused(copied, change, complaint):
    rewrite(copied, change)
    with pytest.raises(TimelineError, match=complaint) as raised:
        load_induction_timeline(directory=copied)
    message = str(raised.value)
    assert str(copied / TIMELINE_FILE) in message and "python -m scripts.induction_timeline" in message


@pytest.mark.slow
def test_maps_that_are_not_attention_weights_are_refused(copied):
    import base64
    import gzip

    def shifted(content):  # every map's weights moved one key to the right: weight on a later key
        shape = content["maps"]["shape"]
        maps = np.frombuffer(gzip.decompress(base64.b64decode(content["maps"]["data"])), np.uint8).reshape(shape)
        content["maps"]["data"] = base64.b64encode(gzip.compress(np.roll(maps, 1, axis=4).tobytes())).decode()

    rewrite(copied, shifted)
    with pytest.raises(TimelineError, match="keys after the query"):
        load_induction_timeline(directory=copied)


@pytest.mark.slow
def test_the_payload_round_trips_with_every_frame(timeline):
    view = TrainingTimelineView()
    payload = view.site_payload()
    decoded = payloads.decode_payload(payloads.encode_payload(payload))
    assert decoded["kind"] == "timeline" and decoded["n_layers"] == 2 and decoded["n_heads"] == 4
    n_steps = len(timeline.steps)
    assert decoded["steps"] == timeline.steps.tolist() and len(decoded["loss"]) == n_steps
    assert np.array(decoded["prefix_matching"]).shape == (n_steps, 2, 4)
    shape = decoded["maps"]["shape"]
    assert shape == [len(TIMELINE_PERIODS), 2, 4, 40, 40, n_steps]
    assert len(decoded["weights"]) == int(np.prod(shape))
    maps = np.frombuffer(decoded["weights"], np.uint8).reshape(shape)
    assert np.array_equal(np.moveaxis(maps, -1, 0), timeline.maps)
    assert decoded["phase_change"]["step"] == timeline.phase_change_step
    assert decoded["steps"][decoded["start"]] == 0
    sequence = decoded["sequences"][0]
    assert sequence["labels"] == [str(token) for token in timeline.tokens[0].tolist()]
    assert all(sequence["tokens"][key - 1] == sequence["tokens"][query] for query, key in sequence["marked"])


@pytest.mark.slow
def test_the_page_gets_the_payload_within_its_budget():
    encoded = payloads.encode_payload(payloads.site_payload(TrainingTimelineView()))
    assert len(encoded) < 1_000_000  # characters of base64 in the page, of its 3 MB


@pytest.mark.slow
def test_the_notebook_placeholder_carries_a_recipe_that_rebuilds_the_view():
    view = TrainingTimelineView(step=2860)
    bundle, _ = view._repr_mimebundle_()
    assert bundle["text/plain"] == view.describe() and "2,860" in bundle["text/plain"]
    recipe = json.loads(html.unescape(PLACEHOLDER.match(bundle["text/html"]).group(1)))
    assert recipe == view.recipe() == {"view": "TrainingTimelineView",
                                       "arguments": {"file_name": TIMELINE_FILE, "step": 2860}}
    rebuilt = TrainingTimelineView(**recipe["arguments"])
    assert rebuilt.site_payload()["start"] == view.site_payload()["start"] == view.timeline.frame_at(2860)


def test_a_step_without_a_frame_names_the_nearest():
    with pytest.raises(ValueError, match=r"no frame at step 2870.*\[2860, 2880\]"):
        TrainingTimelineView(step=2870)
