"""The layouts of attention weights are checked where they enter: a wrong layout fails at once, naming the layout
it looks like and how to turn it into the one wanted (mha.core.layouts). Every public function of core, lab,
pretrained and analysis that takes attention maps carries the check, or is listed here with the reason it does not."""

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
    HEADS,
    LAYERS_BATCH_HEADS,
    LAYERS_HEADS,
    LAYERS_HEADS_WORDS,
    LAYOUTS,
    QUERY_KEY,
    WORDS,
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
            if getattr(value, "__module__", None) != info.name:
                continue
            if callable(value) and hasattr(value, "__attention_layouts__"):
                found[f"{info.name}.{name}"] = value
            if inspect.isclass(value):  # methods too: CoreferenceSums.add
                found.update({f"{info.name}.{name}.{method}": function for method, function in vars(value).items()
                              if hasattr(function, "__attention_layouts__")})
    return found


CHECKED = _checked_functions()


def test_the_public_functions_that_take_attention_state_its_layout():
    assert {"mha.analysis.popular_story.fox_role_weights", "mha.lab.circuit_scores.head_role_scores",
            "mha.lab.circuit_scores.previous_token_score", "mha.lab.circuit_scores.prefix_matching_score",
            "mha.lab.circuit_scores.attention_to_key_positions"} <= set(CHECKED)
    assert all(layout.axes in {each.axes for each in LAYOUTS}
               for function in CHECKED.values() for value in function.__attention_layouts__.values()
               for layout in ([value] if hasattr(value, "axes") else value))


class _Poison:
    """An argument whose every use fails loudly: a call refused with it in hand was refused before any work."""

    def __getattr__(self, name):
        raise AssertionError(f"a poisoned argument was used (.{name})")

    def __iter__(self):
        raise AssertionError("a poisoned argument was used (iterated over)")

    __len__ = __array__ = __float__ = __index__ = __iter__


def _layouts(spec) -> list:
    return [spec] if hasattr(spec, "axes") else list(spec)


def _ranks(spec) -> list[int]:
    return [len(layout.axes) + extra for layout in _layouts(spec) for extra in layout.leading]


def _weights(rank: int) -> torch.Tensor:
    """Maps of ``rank`` axes, 3 entries each: square, rows summing to 1."""
    return torch.full((3,) * rank, 1 / 3, dtype=torch.float64)


# the functions that take a list of maps check each map in their body (a decorator checks one argument):
# name -> (function, the list parameter, the layout of each map)
def _list_checked() -> dict:
    from mha.analysis.head_roles import long_range, synthetic_scores

    return {"mha.analysis.head_roles.long_range.distance_baseline":
            (long_range.distance_baseline, "word_maps", LAYERS_HEADS_WORDS),
            "mha.analysis.head_roles.long_range.pair_lifts": (long_range.pair_lifts, "word_maps", LAYERS_HEADS_WORDS),
            "mha.analysis.head_roles.synthetic_scores.one_head_table": (synthetic_scores.one_head_table, "maps",
                                                                        QUERY_KEY),
            "mha.analysis.head_roles.synthetic_scores.relation_accuracy_on_maps":
            (synthetic_scores.relation_accuracy_on_maps, "word_maps", WORDS)}


LIST_CHECKED = _list_checked()


def _cases() -> list:
    """(name, function, parameter, layout spec, whether the argument is a list of maps) for every checked boundary."""
    cases = [(name, function, parameter, spec, False) for name, function in CHECKED.items()
             for parameter, spec in function.__attention_layouts__.items()]
    return cases + [(name, function, parameter, layout, True)
                    for name, (function, parameter, layout) in LIST_CHECKED.items()]


CASES = _cases()


def _call(function, parameter: str, weights, as_list: bool):
    """Call ``function`` with ``weights`` for ``parameter``; every other attention argument None (not checked), every
    other required argument poisoned."""
    others = getattr(function, "__attention_layouts__", {})
    arguments = {name: (None if name in others else _Poison())
                 for name, p in inspect.signature(function).parameters.items()
                 if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    arguments[parameter] = [weights] if as_list else weights
    return function(**arguments)


@pytest.mark.parametrize("name, function, parameter, spec, as_list", CASES, ids=[case[0] for case in CASES])
def test_a_wrong_layout_fails_where_it_enters_naming_the_layout(name, function, parameter, spec, as_list):
    shown = f"{parameter}[0]" if as_list else parameter
    for rank in (min(_ranks(spec)) - 1, max(_ranks(spec)) + 1):  # one axis too few, one too many
        with pytest.raises(InputError) as refused:
            _call(function, parameter, _weights(rank), as_list)
        message = str(refused.value)
        assert message.startswith(f"{shown} has shape {(3,) * rank}"), message
        assert any(layout.name in message for layout in _layouts(spec)), message


@pytest.mark.parametrize("name, function, parameter, spec, as_list", CASES, ids=[case[0] for case in CASES])
def test_the_right_layout_passes_the_check(name, function, parameter, spec, as_list):
    shown = f"{parameter}[0] has shape" if as_list else f"{parameter} has shape"
    for rank in sorted(set(_ranks(spec))):
        try:
            _call(function, parameter, _weights(rank), as_list)  # the body may fail on a poisoned argument later
        except Exception as error:
            message = str(error)
            assert not (message.startswith(shown) and ("should be attention weights" in message
                                                       or ", read as (" in message)), message


ATTENTION_PARAMETERS = {"attention", "attention_weights", "weights", "word_maps", "maps", "pattern"}
SUBPACKAGES = ("mha.core", "mha.lab", "mha.pretrained", "mha.analysis", "mha.corpora", "mha.book", "mha.views")
CANDIDATE_WEIGHTS = "weights are candidate_weights outputs (..., candidates), one number per candidate, not maps"
NOT_ATTENTION_MAPS = {
    "mha.core.layouts.attention_shape": "the check itself",
    "mha.core.layouts.check_attention_layout": "the check itself",
    "mha.analysis.coreference_and_content.coreference.candidate_picks": CANDIDATE_WEIGHTS,
    "mha.analysis.coreference_and_content.coreference.antecedent_preference": CANDIDATE_WEIGHTS,
    "mha.analysis.coreference_and_content.coreference.PronounScores.__init__": CANDIDATE_WEIGHTS,
    "mha.analysis.coreference_and_content.relatedness.crossed_contrast":
        "weights are slot_weights outputs (items, 4, heads...), one number per sentence and head, not maps",
    "mha.analysis.coreference_and_content.rarity.QueryWeights.mean": "weights are resample counts per sentence",
    "mha.analysis.coreference_and_content.rarity.QueryWeights.excess": "weights are resample counts per sentence",
    "mha.pretrained.attention_record.AttentionRecord.__init__":
        "a record type: check_record checks its attention (LAYERS_HEADS) where the role table reads it",
    "mha.pretrained.traces.SentenceTrace.__init__": "a trace type that only the encoder's own forward pass builds",
    "mha.pretrained.traces.EncoderTrace.__init__": "a trace type that only the encoder's own forward pass builds",
    "mha.views.heatmaps.AttentionMap.__init__": "a dataclass: its __post_init__ checks the map (QUERY_KEY)",
    "mha.views.heatmaps.weight_hundredths": "rounds weights of any shape for a view's table, not only maps",
    "mha.views.heatmaps.weight_texts": "writes weights of any shape as a view's table text, not only maps",
    "mha.lab.timeline.InductionTimeline.__init__":
        "a record type that load_induction_timeline builds after checking the stored maps' shape",
}


def _public_callables():
    for info in pkgutil.walk_packages(mha.__path__, "mha."):
        if not info.name.startswith(SUBPACKAGES):
            continue
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name, None)
            if inspect.isclass(value) and value.__module__ == info.name:
                for method, function in vars(value).items():
                    function = getattr(function, "__func__", function)  # classmethods and staticmethods
                    if inspect.isfunction(function) and (method == "__init__" or not method.startswith("_")):
                        yield f"{info.name}.{name}.{method}", function
            elif inspect.isfunction(value) and value.__module__ == info.name:
                yield f"{info.name}.{name}", value


def test_every_public_function_that_takes_attention_maps_checks_their_layout():
    unchecked = []
    for name, function in _public_callables():
        taken = ATTENTION_PARAMETERS & set(inspect.signature(function).parameters)
        checked = set(getattr(function, "__attention_layouts__", {}))
        if name in LIST_CHECKED:
            checked.add(LIST_CHECKED[name][1])
        if taken - checked and name not in NOT_ATTENTION_MAPS:
            unchecked.append(f"{name}({', '.join(sorted(taken - checked))})")
    assert unchecked == [], "state the layout with @takes_attention, or list the function with a reason"
    assert len(CASES) >= 30
    known = {name for name, _ in _public_callables()}
    assert set(NOT_ATTENTION_MAPS) <= known  # no reason kept for a function that is gone


def test_the_new_layouts_name_the_shape_they_look_like_and_the_way_there():
    with pytest.raises(InputError) as error:  # one layer's heads on one sequence, where a batch is wanted
        check_attention_layout("weights", torch.zeros(2, 4, 4), BATCH_HEADS)
    assert "(heads, query, key)" in str(error.value) and "add the 1 missing in front: [None]" in str(error.value)
    with pytest.raises(InputError) as error:  # every head of a model, where one head's map is wanted
        check_attention_layout("pattern", np.zeros((2, 3, 4, 4)), QUERY_KEY)
    assert "pattern[layer, head]" in str(error.value) and "pattern[b, head]" in str(error.value)
    assert "(words" not in str(error.value)  # a token map is far likelier than a word map where token maps are wanted
    with pytest.raises(InputError, match=r"word_maps\[layer, head\]"):
        check_attention_layout("word_maps", np.zeros((2, 3, 4, 4)), WORDS)
    with pytest.raises(InputError) as error:  # a trace's token maps, where word-level maps are wanted
        check_attention_layout("word_maps", np.zeros((6, 1, 12, 9, 9)), LAYERS_HEADS_WORDS)
    assert "word_attention(word_maps[:, b], word_ids)" in str(error.value)
    with pytest.raises(InputError, match=r"last two axes \(4, 5\) should be equal"):
        check_attention_layout("word_maps", np.zeros((2, 4, 5)), WORDS.with_leading(2))
    with pytest.raises(InputError, match=r"\(\.\.\., words, words\), at most 8 axes in all"):
        check_attention_layout("word_maps", np.zeros((1,) * 9), WORDS.with_leading(6))
    assert check_attention_layout("weights", np.zeros((7, 2, 3, 4, 5)), HEADS.with_leading(2)) == (7, 2, 3, 4, 5)
