"""The three layouts of attention weights are checked where they enter: a wrong layout fails at once, naming the
layout it looks like and how to turn it into the one wanted (mha.core.layouts)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest
import torch

import mha
from mha.core.layouts import (
    BATCH_HEADS,
    LAYERS_BATCH_HEADS,
    LAYERS_HEADS,
    LAYOUTS,
    check_attention_layout,
    takes_attention,
)
from mha.core.validation import InputError


def test_each_layout_accepts_its_own_shape_in_every_container():
    for layout, shape in ((BATCH_HEADS, (2, 3, 4, 5)), (LAYERS_BATCH_HEADS, (6, 2, 3, 4, 5)),
                          (LAYERS_HEADS, (6, 3, 4, 4))):
        array = np.zeros(shape)
        assert check_attention_layout("w", array, layout) == shape
        assert check_attention_layout("w", torch.zeros(shape), layout) == shape
        assert check_attention_layout("w", array.tolist(), layout) == shape


def test_a_sentence_of_a_batch_passed_as_a_sentence_names_the_batch_axis_and_the_fix():
    with pytest.raises(InputError) as error:
        check_attention_layout("attention", np.zeros((6, 1, 12, 9, 9)), LAYERS_HEADS)
    message = str(error.value)
    assert "(6, 1, 12, 9, 9)" in message and "(layers, heads, seq, seq)" in message
    assert "(layers, batch, heads, query, key)" in message and "attention[:, b]" in message


def test_one_layer_where_every_layer_is_wanted_names_both_four_axis_layouts():
    with pytest.raises(InputError) as error:
        check_attention_layout("weights", torch.zeros(2, 4, 5, 5), LAYERS_BATCH_HEADS)
    message = str(error.value)
    assert "(batch, heads, query, key)" in message and "weights[None]" in message
    assert "(layers, heads, seq, seq)" in message and "weights[:, None]" in message


def test_a_sentence_map_must_be_square_and_pinned_sizes_must_match():
    with pytest.raises(InputError, match=r"last two axes \(9, 8\) should be equal"):
        check_attention_layout("attention", np.zeros((6, 12, 9, 8)), LAYERS_HEADS)
    with pytest.raises(InputError, match="heads axis has 12 entries, but it should have 4"):
        check_attention_layout("attention", np.zeros((6, 12, 9, 9)), LAYERS_HEADS, heads=4)
    assert check_attention_layout("attention", np.zeros((6, 12, 9, 9)), LAYERS_HEADS, heads=12, seq=9) == (6, 12, 9, 9)


def test_leading_axes_are_allowed_only_where_the_layout_says_so():
    any_prefix = BATCH_HEADS.with_leading(2)
    assert any_prefix.name == "(..., batch, heads, query, key)"
    assert check_attention_layout("w", np.zeros((7, 2, 3, 4, 4)), any_prefix) == (7, 2, 3, 4, 4)
    with pytest.raises(InputError, match="heads axis has 3 entries"):  # axes are read from the end
        check_attention_layout("w", np.zeros((7, 2, 3, 4, 4)), any_prefix, heads=2)
    with pytest.raises(InputError, match=r"\(3 axes\)"):
        check_attention_layout("w", np.zeros((3, 4, 4)), any_prefix)
    with pytest.raises(InputError, match=r"\(5 axes\)"):
        check_attention_layout("w", np.zeros((7, 2, 3, 4, 4)), BATCH_HEADS)


@pytest.mark.parametrize("value, words", [("weights", "not str"), ({"a": 1}, "not dict"), (3, "not int"),
                                          ([[1.0, 2.0], [3.0]], "different lengths")])
def test_what_is_not_an_array_of_numbers_is_refused_in_words(value, words):
    with pytest.raises(InputError, match=words):
        check_attention_layout("weights", value, BATCH_HEADS)


@pytest.mark.parametrize("layout", [3, "LAYERS_HEADS", [], [BATCH_HEADS, "x"]])
def test_a_layout_that_is_not_one_is_refused(layout):
    with pytest.raises(InputError, match="layout should be one of BATCH_HEADS"):
        check_attention_layout("weights", np.zeros((1, 2, 3, 3)), layout)


def test_the_decorator_checks_before_the_body_runs_and_leaves_none_alone():
    calls = []

    @takes_attention(weights=BATCH_HEADS)
    def mean_weight(weights, scale=1.0):
        """A doc."""
        calls.append(weights)
        return 0.0 if weights is None else float(np.mean(weights)) * scale

    assert mean_weight(np.ones((1, 2, 3, 3)), scale=2.0) == 2.0
    assert mean_weight(weights=None) == 0.0
    with pytest.raises(InputError, match="weights has shape"):
        mean_weight(np.ones((2, 3, 3)))
    assert len(calls) == 2  # the refused call never reached the body
    assert mean_weight.__doc__ == "A doc." and mean_weight.__name__ == "mean_weight"
    assert mean_weight.__attention_layouts__ == {"weights": BATCH_HEADS}
    with pytest.raises(TypeError, match="no parameter"):
        takes_attention(attention=LAYERS_HEADS)(mean_weight.__wrapped__)


def _checked_functions():
    found = {}
    for info in pkgutil.walk_packages(mha.__path__, "mha."):
        if info.name.startswith("mha.data"):
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if callable(value) and hasattr(value, "__attention_layouts__") and value.__module__ == info.name:
                found[f"{info.name}.{name}"] = value
    return found


CHECKED = _checked_functions()


def test_the_public_functions_that_take_attention_state_its_layout():
    assert {"mha.analysis.popular_story.fox_role_weights", "mha.lab.circuit_scores.head_role_scores",
            "mha.lab.circuit_scores.previous_token_score", "mha.lab.circuit_scores.prefix_matching_score",
            "mha.lab.circuit_scores.attention_to_key_positions"} <= set(CHECKED)
    assert all(layout.axes in {each.axes for each in LAYOUTS}
               for function in CHECKED.values() for value in function.__attention_layouts__.values()
               for layout in ([value] if hasattr(value, "axes") else value))


def _wrong_shape(layouts) -> tuple[int, ...]:
    """A shape in none of ``layouts``: one axis too few for the shortest."""
    layouts = [layouts] if hasattr(layouts, "axes") else list(layouts)
    return (2,) * (min(len(layout.axes) for layout in layouts) - 1)


@pytest.mark.parametrize("qualified", sorted(CHECKED))
def test_a_wrong_layout_fails_where_it_enters(qualified):
    function = CHECKED[qualified]
    parameters = inspect.signature(function).parameters
    for parameter, layouts in function.__attention_layouts__.items():
        # every other argument is None: the check must refuse the weights before anything reads the rest
        arguments = {name: None for name, p in parameters.items()
                     if p.default is inspect.Parameter.empty and p.kind is not p.VAR_POSITIONAL and p.kind
                     is not p.VAR_KEYWORD}
        arguments[parameter] = torch.zeros(_wrong_shape(layouts))
        with pytest.raises(InputError, match=f"{parameter} has shape"):
            function(**arguments)
