"""The views' counts go through the package's one whole-number check (mha.core.validation.check_whole_number): a
numpy integer is a count like any other, and a bool, a float or a count out of range is refused with a message that
names the argument, the range and what the number is."""

from __future__ import annotations

import json

import numpy as np
import pytest
from matplotlib.figure import Figure

from mha.views.block_diagram import draw_residual_stream, draw_transformer_layer
from mha.views.induction_explorer import InductionLabExplorer
from mha.views.training_timeline import TrainingTimelineView

REFUSED = [(True, r"got True \(bool\)"), (2.0, r"got 2\.0 \(float\)\. Use int\(2\.0\)"), (-1, "got -1")]
"""Values every count refuses, and what the message says of each."""


def test_the_timeline_opens_at_a_numpy_step_and_its_recipe_stays_json():
    view = TrainingTimelineView(step=np.int64(0))
    assert type(view.step) is int and view.start == 0
    assert json.loads(json.dumps(view.recipe()))["arguments"]["step"] == 0


@pytest.mark.parametrize("step, said", REFUSED)
def test_the_timeline_refuses_a_step_that_is_no_count(step, said):
    with pytest.raises(ValueError, match=rf"step must be a whole number of at least 0 \(a recorded .*{said}"):
        TrainingTimelineView(step=step)


def test_the_lab_explorer_takes_a_numpy_count_of_sequences():
    explorer = InductionLabExplorer(["induction_2layer_seed0"], n_sequences=np.int64(2))
    assert type(explorer.n_sequences) is int and explorer.sequence_slider.max == 1
    assert json.loads(json.dumps(explorer.recipe()))["arguments"]["n_sequences"] == 2


@pytest.mark.parametrize("n_sequences, said", [*REFUSED[:2], (0, "got 0"), (10**6, "got 1000000")])
def test_the_lab_explorer_refuses_a_count_of_sequences_that_it_cannot_show(n_sequences, said):
    with pytest.raises(ValueError, match=rf"n_sequences must be a whole number in 1\.\.\d+ \(how many .*{said}"):
        InductionLabExplorer(["induction_2layer_seed0"], n_sequences=n_sequences)


def test_the_diagrams_take_numpy_sizes():
    layer_ax, stream_ax = Figure().subplots(1, 2)
    draw_transformer_layer(layer_ax, n_heads=np.int64(4), d_model=np.int64(8), d_mlp=np.int32(16))
    draw_residual_stream(stream_ax, n_layers=np.int64(2), n_heads=np.int16(3))
    assert layer_ax.patches and stream_ax.patches


@pytest.mark.parametrize("value, said", [*REFUSED, (0, "got 0")])
@pytest.mark.parametrize("draw, name", [(draw_transformer_layer, "n_heads"), (draw_transformer_layer, "d_mlp"),
                                        (draw_residual_stream, "n_layers"), (draw_residual_stream, "n_heads")])
def test_the_diagrams_refuse_a_size_that_is_no_count(draw, name, value, said):
    with pytest.raises(ValueError, match=rf"{name} must be a whole number of at least 1 \(.*{said}"):
        draw(Figure().subplots(), **{name: value})
