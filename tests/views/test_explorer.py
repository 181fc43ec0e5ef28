"""The explorer base: errors as escaped text, the last good view kept, every control changes what is shown, and in
Jupyter each view is its payload, drawn by views.js, with what the view computes exactly what it stores."""

from __future__ import annotations

import html
from collections.abc import Mapping

import numpy as np
import pytest
import torch
from IPython.core.formatters import format_display_data
from ipywidgets import IntSlider, Text, VBox, Widget
from matplotlib.figure import Figure

from mha.views.contract import OPENINGS, ExplorerView, SiteView, TableView
from mha.views.explorer import Explorer, problem_html
from mha.views.heatmaps import AttentionMap, draw_attention, weight_hundredths
from mha.views.payloads import SITE_VIEWS, decode_payload, site_payload, stored_weights
from mha.views.widget import ViewWidget, check_payload

torch.set_num_threads(1)

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class CountingExplorer(Explorer):
    """A small view for the base alone: a uniform-ish map of ``size`` tokens named by the typed words."""

    what_to_try = "Type <words> and move the size."
    what_to_notice = "Rows sum to 1."

    def __init__(self) -> None:
        self.words = Text(value="a b c d e")
        self.size = IntSlider(value=3, min=2, max=5)
        self.first = IntSlider(value=0, min=0, max=2)
        self.refreshes = 0
        super().__init__({"words": self.words, "size": self.size, "first": self.first})

    def refresh(self) -> bool:
        self.refreshes += 1
        return super().refresh()

    def view_data(self, *, words: str, size: int, first: int) -> ExplorerView:
        if words == "boom":
            raise TypeError("<b>surprise</b>")
        labels = words.split()[:size]
        if len(labels) < size:
            raise ValueError(f"type at least {size} words; {words!r} has {len(labels)}")
        first = min(first, size - 1)
        weights = np.full((size, size), 1.0 / (2 * size))
        weights[:, first] += 0.5  # (size, size), rows sum to 1
        return ExplorerView(f"<code>{html.escape(' '.join(labels))}</code>",
                            AttentionMap(weights, labels, title=f"{size} words, column {first} bright"),
                            slider_max={"first": size - 1}, shown={"first": first})


def shown(explorer: Explorer) -> tuple:
    """What the view shows (its last good map), hashable: title, row labels, and the weights' shape and bytes."""
    drawn = explorer.current.attention_map
    return drawn.title, tuple(drawn.query_labels), drawn.weights.shape, drawn.weights.tobytes()


def test_bad_input_is_escaped_text_and_the_last_good_view_stays():
    explorer = CountingExplorer()
    good = explorer.current
    assert shown(explorer)[:2] == ("3 words, column 0 bright", ("a", "b", "c"))
    explorer.words.value = "<img/src=x/onerror=alert(1)>"
    assert explorer.last_refresh_seconds > 0
    message = explorer.message.value
    assert message.startswith("<b style='color:#b35806'>Cannot draw this:</b> type at least 3 words")
    assert "<img" not in message and "&lt;img/src=x/onerror=alert(1)&gt;" in message
    assert explorer.current is good and shown(explorer)[:2] == ("3 words, column 0 bright", ("a", "b", "c"))
    assert explorer.words.value == "<img/src=x/onerror=alert(1)>"  # the reader's text is left as typed
    assert explorer.refresh() is False


def test_an_unexpected_error_is_named_escaped_and_keeps_the_view():
    explorer = CountingExplorer()
    good = explorer.current
    explorer.words.value = "boom"
    assert "an unexpected TypeError (&lt;b&gt;surprise&lt;/b&gt;)" in explorer.message.value
    assert explorer.current is good
    assert problem_html(TypeError("<b>surprise</b>")) == explorer.message.value


def test_a_view_that_fails_to_compute_changes_nothing(monkeypatch):
    explorer = CountingExplorer()
    good = explorer.current

    def broken(**values):
        raise RuntimeError("no more memory")
    monkeypatch.setattr(explorer, "view_data", broken)
    explorer.size.value = 4
    assert "unexpected RuntimeError (no more memory)" in explorer.message.value
    assert explorer.current is good
    assert explorer.first.max == 2  # a slider's range follows only a view that was computed


def test_every_control_redraws_once_and_a_range_follows_quietly():
    explorer = CountingExplorer()
    seen = {shown(explorer)}
    for name, control, value in (("size", explorer.size, 5), ("first", explorer.first, 4),
                                 ("words", explorer.words, "v w x y z")):
        count = explorer.refreshes
        control.value = value
        assert explorer.refreshes == count + 1, f"moving {name} should redraw exactly once"
        seen.add(shown(explorer))
    assert len(seen) == 4
    assert shown(explorer)[:2] == ("5 words, column 4 bright", ("v", "w", "x", "y", "z"))
    count = explorer.refreshes
    explorer.size.value = 2  # the 'first' slider shrinks to 0..1 and its value follows, without a second redraw
    assert explorer.refreshes == count + 1
    assert explorer.first.max == 1 and explorer.first.value == 1
    np.testing.assert_array_equal(explorer.current.attention_map.weights, [[0.25, 0.75], [0.25, 0.75]])


def test_view_data_is_plain_data_and_touches_no_widget():
    explorer = CountingExplorer()
    before = explorer.values(), explorer.message.value, explorer.current
    view = explorer.view_data(words="p q r s", size=4, first=3)
    assert view.attention_map.query_labels == ["p", "q", "r", "s"] and view.shown == {"first": 3}
    np.testing.assert_allclose(view.attention_map.weights.sum(-1), 1.0)
    assert (explorer.values(), explorer.message.value, explorer.current) == before
    assert explorer.choices() == {"size": [2, 3, 4, 5], "first": [0, 1, 2]}


def test_guidance_and_the_text_form():
    explorer = CountingExplorer()
    assert explorer.guidance() == "Try: Type <words> and move the size. Notice: Rows sum to 1."
    text = "CountingExplorer(words='a b c d e', size=3, first=0): run the notebook to use it."
    assert repr(explorer) == text and format_display_data(explorer)[0]["text/plain"] == text


def test_in_jupyter_the_view_is_its_payload_and_publish_sends_the_new_one():
    explorer = CountingExplorer()
    assert explorer.view_widget is None
    explorer.publish()  # nothing on screen yet: nothing to send
    widget = explorer.widget
    assert explorer.widget is widget and widget.children == (explorer.view_widget,)  # no kernel widgets
    payload = decode_payload(explorer.view_widget.payload)
    assert payload["guidance"] == {"try": explorer.what_to_try, "notice": explorer.what_to_notice}
    assert [control["name"] for control in payload["controls"]] == ["size", "first"]  # typed text has no list
    sent = explorer.view_widget.payload
    explorer.words.value = "v w x y z"  # moving a control redraws, but only publish() sends a payload
    assert explorer.view_widget.payload == sent
    explorer.publish()
    assert decode_payload(explorer.view_widget.payload)["strings"] != payload["strings"]
    assert "<code>v w x</code>" in decode_payload(explorer.view_widget.payload)["strings"]


# --- the four views of the book ------------------------------------------------------------------------------


def random_layer_explorer():
    from mha.views.random_layer_explorer import RandomLayerExplorer
    return RandomLayerExplorer()


def model_explorer():
    from mha.views.model_explorer import ModelHeadExplorer
    return ModelHeadExplorer(["The keys to the cabinet are on the table .", "Paris is the capital of France ."])


def induction_explorer():
    from mha.views.induction_explorer import InductionLabExplorer
    return InductionLabExplorer(["induction_2layer_seed0", "induction_2layer_seed1"], n_sequences=4)


def head_count_explorer():
    from mha.views.head_count_explorer import HeadCountStudyExplorer
    return HeadCountStudyExplorer(n_heads=2)


@pytest.fixture(scope="module", ids=lambda make: make.__name__, params=[
    random_layer_explorer, pytest.param(model_explorer, marks=pytest.mark.slow), induction_explorer,
    pytest.param(head_count_explorer, marks=pytest.mark.slow)])
def view(request):
    return request.param()


@pytest.fixture(scope="module")
def site_form(view) -> dict:
    """The view's website payload, computed once for the tests that read it (its guidance and its note)."""
    return site_payload(view)


def training_timeline():
    from mha.views.training_timeline import TrainingTimelineView
    return TrainingTimelineView()


BUILDERS = {"RandomLayerExplorer": random_layer_explorer, "ModelHeadExplorer": model_explorer,
            "InductionLabExplorer": induction_explorer, "HeadCountStudyExplorer": head_count_explorer,
            "TrainingTimelineView": training_timeline}
"""One way to build each view a recipe can name (payloads.SITE_VIEWS)."""


def protocol_members(protocol: type) -> tuple[set[str], set[str]]:
    """The data attributes and the methods that ``protocol`` lists, its bases' included."""
    data, methods = set(), set()
    for part in protocol.__mro__:
        if part in (SiteView, TableView):
            data |= set(part.__annotations__)
            methods |= {name for name, value in vars(part).items() if callable(value) and not name.startswith("_")}
    return data, methods


def check_meets(view, protocol: type) -> None:
    """``view`` has every member of ``protocol``, of the kind the payloads read: text, an opening, widgets, methods."""
    assert isinstance(view, protocol), f"{type(view).__name__} lacks part of {protocol.__name__}"
    data, methods = protocol_members(protocol)
    for name in data - {"controls"}:
        assert isinstance(getattr(view, name), str), name
    assert view.opening in OPENINGS
    if "controls" in data:
        assert isinstance(view.controls, Mapping) and all(isinstance(c, Widget) for c in view.controls.values())
    assert all(callable(getattr(view, name)) for name in methods)


def test_a_check_of_the_contract_builds_every_view_a_recipe_can_name():
    assert set(BUILDERS) == set(SITE_VIEWS)  # `view` builds the explorers, the test after it the timeline


def test_each_explorer_meets_the_contract_of_a_table_view(view):
    check_meets(view, TableView)
    assert view.page_model() is None or type(view).__name__ == "ModelHeadExplorer"  # only it runs in the page


def test_the_timeline_meets_the_contract_of_a_view_but_is_no_table():
    timeline = training_timeline()
    check_meets(timeline, SiteView)
    assert not isinstance(timeline, TableView) and timeline.page_model() is None


def start_view(payload: dict) -> dict:
    """The stored view a table payload opens at: the one of every control's start."""
    return payload["drawn"][payload["views"]["|".join(str(control["start"]) for control in payload["controls"])]]


def test_each_view_says_what_to_try_and_what_to_notice(view, site_form):
    assert len(view.what_to_try) > 40 and len(view.what_to_notice) > 40
    assert site_form["guidance"] == {"try": view.what_to_try, "notice": view.what_to_notice}


def test_displayed_in_jupyter_each_view_is_a_checked_payload_for_views_js(view, site_form):
    bundle, _ = format_display_data(view)  # what Jupyter gets
    assert bundle[WIDGET_VIEW]["model_id"] == view.widget.model_id
    assert isinstance(view.widget, VBox) and isinstance(view.widget.children[0], ViewWidget)
    assert view.widget.children[0] is view.view_widget
    assert bundle["text/plain"] == view.describe() and 'data-mha-recipe="' in bundle["text/html"]
    payload = decode_payload(view.view_widget.payload)
    assert check_payload(payload) is payload
    assert payload["version"] == 2
    assert payload["kind"] == ("head-explorer" if type(view).__name__ == "RandomLayerExplorer" else "table")
    assert payload["guidance"] == {"try": view.what_to_try, "notice": view.what_to_notice}
    assert payload["note"] == ""  # the kernel can type and train: the website's note on what it cannot is left out
    assert site_form["note"] == view.site_note
    assert view.view_widget.payload == view.payload()  # the same view gives the same text


def test_each_view_shows_and_stores_the_numbers_its_data_method_returns(view):
    assert view.refresh()
    data = view.view_data(**view.values())
    assert data.message == view.message.value
    drawn = view.current.attention_map
    assert (drawn.title, drawn.query_labels, drawn.key_labels, drawn.marked) == (
        data.attention_map.title, data.attention_map.query_labels, data.attention_map.key_labels,
        data.attention_map.marked)
    np.testing.assert_array_equal(drawn.weights, data.attention_map.weights)
    payload = decode_payload(view.payload())
    if payload["kind"] != "table":  # the chapter-1 page computes its maps itself, from the controls' values
        assert (payload["sentence"], payload["heads"], payload["head"]) == tuple(view.values().values())
        return
    opening = start_view(payload)  # in Jupyter the view opens where the controls stand
    assert payload["strings"][opening["message"]] == data.message
    assert payload["strings"][opening["map"]["title"]] == data.attention_map.title
    assert payload["strings"][opening["map"]["rows"]] == list(data.attention_map.query_labels)
    np.testing.assert_array_equal(stored_weights(payload, opening["map"]), weight_hundredths(drawn.weights))


def test_each_menu_and_slider_of_each_view_changes_what_is_shown(view):
    for name, values in view.choices().items():
        control = view.controls[name]
        start = control.value
        before = shown(view), view.message.value
        control.value = next(value for value in values if value != start)
        assert (shown(view), view.message.value) != before, f"moving {name} changed nothing"
        assert "Cannot" not in view.message.value
        control.value = start
        assert (shown(view), view.message.value) == before, f"moving {name} back did not restore it"


# --- the maps in Python ----------------------------------------------------------------------------------------


def test_a_map_must_match_its_labels():
    with pytest.raises(ValueError, match="one head's map, with one row per query token"):
        AttentionMap(np.zeros((3, 4)), ["a", "b", "c"])
    assert AttentionMap(np.zeros((2, 3)), ["q1", "q2"], ["k1", "k2", "k3"]).key_labels == ["k1", "k2", "k3"]


def test_figures_ring_the_marked_cells():
    ax = Figure().subplots()
    draw_attention(ax, np.eye(3), ["a", "b", "c"], marked=[(2, 0), (1, 1)])
    rings = ax.collections
    assert len(rings) == 2
    np.testing.assert_array_equal(rings[0].get_offsets(), [[0, 2], [1, 1]])  # x = key column, y = query row


@pytest.mark.slow
def test_the_text_form_is_what_the_notebooks_store():
    # nbval compares these lines with the text/plain outputs stored in sections 1.2, 3.1 and 3.6-3.7
    from mha.views.head_count_explorer import HeadCountStudyExplorer
    from mha.views.induction_explorer import InductionLabExplorer
    from mha.views.model_explorer import ModelHeadExplorer
    from mha.views.random_layer_explorer import RandomLayerExplorer

    sentence = "The animal did not cross the street because it was too tired ."
    assert repr(RandomLayerExplorer(sentence, n_heads=4, d_model=24)) == (
        f"RandomLayerExplorer(sentence={sentence!r}, heads=4, head=0, d_model=24): run the notebook to use it.")
    menu = ["The keys to the old cabinet are on the table .", "A second sentence ."]
    assert format_display_data(ModelHeadExplorer(menu, layer=0, head=2))[0]["text/plain"] == (
        f"ModelHeadExplorer(sentence={menu[0]!r}, layer=0, head=2): run the notebook to use it.")
    assert repr(InductionLabExplorer(n_sequences=16, layer=0, head=3)) == (
        "InductionLabExplorer(model='induction_2layer_seed0', layer=0, head=3, sequence=0): run the notebook to use it."
    )
    assert repr(HeadCountStudyExplorer(n_heads=1, seed=0)) == (
        "HeadCountStudyExplorer(heads=1, seed=0, head=0, sequence=0): run the notebook to use it.")
