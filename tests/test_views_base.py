"""The explorer base and the map renderer: errors as escaped text, the last good view kept, every control redraws,
and the data a view computes is exactly what it draws and lists."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
import torch
from ipywidgets import IntSlider, Text
from matplotlib.figure import Figure

from mha.views.explorer import Explorer, ExplorerView, problem_html
from mha.views.heatmaps import AttentionMap, AttentionPNG, attention_table_html, draw_attention

torch.set_num_threads(1)


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


def table_numbers(table: str) -> np.ndarray:
    """The weights written in an attention table's cells, row by row."""
    rows = re.findall(r"<tr><th scope='row'.*?</tr>", table)
    return np.array([[float(v) for v in re.findall(r">([0-9.]+)</td>", row)] for row in rows])


def test_bad_input_is_escaped_text_and_the_last_good_view_stays():
    explorer = CountingExplorer()
    good = bytes(explorer.image.value), explorer.map_table.value
    assert good[0].startswith(b"\x89PNG")
    explorer.words.value = "<img/src=x/onerror=alert(1)>"
    assert explorer.last_refresh_seconds > 0
    message = explorer.message.value
    assert message.startswith("<b style='color:#b35806'>Cannot draw this:</b> type at least 3 words")
    assert "<img" not in message and "&lt;img/src=x/onerror=alert(1)&gt;" in message
    assert (bytes(explorer.image.value), explorer.map_table.value) == good
    assert explorer.words.value == "<img/src=x/onerror=alert(1)>"  # the reader's text is left as typed


def test_an_unexpected_error_is_named_escaped_and_keeps_the_view():
    explorer = CountingExplorer()
    good = bytes(explorer.image.value)
    explorer.words.value = "boom"
    assert "an unexpected TypeError (&lt;b&gt;surprise&lt;/b&gt;)" in explorer.message.value
    assert bytes(explorer.image.value) == good
    assert problem_html(TypeError("<b>surprise</b>")) == explorer.message.value


def test_a_drawing_that_fails_changes_nothing(monkeypatch):
    explorer = CountingExplorer()
    before = explorer.message.value, bytes(explorer.image.value), explorer.map_table.value

    def broken(attention_map):
        raise RuntimeError("no more memory")
    monkeypatch.setattr(explorer.renderer, "render", broken)
    explorer.size.value = 4
    assert "unexpected RuntimeError (no more memory)" in explorer.message.value
    assert (bytes(explorer.image.value), explorer.map_table.value) == before[1:]
    assert explorer.first.max == 2  # a slider's range follows only a view that was drawn


def test_every_control_redraws_once_and_a_range_follows_quietly():
    explorer = CountingExplorer()
    seen = {bytes(explorer.image.value)}
    for name, control, value in (("size", explorer.size, 5), ("first", explorer.first, 4),
                                 ("words", explorer.words, "v w x y z")):
        count = explorer.refreshes
        control.value = value
        assert explorer.refreshes == count + 1, f"moving {name} should redraw exactly once"
        seen.add(bytes(explorer.image.value))
    assert len(seen) == 4
    count = explorer.refreshes
    explorer.size.value = 2  # the 'first' slider shrinks to 0..1 and its value follows, without a second redraw
    assert explorer.refreshes == count + 1
    assert explorer.first.max == 1 and explorer.first.value == 1


def test_view_data_is_plain_data_and_touches_no_widget():
    explorer = CountingExplorer()
    before = explorer.values(), explorer.message.value, bytes(explorer.image.value)
    view = explorer.view_data(words="p q r s", size=4, first=3)
    assert view.attention_map.query_labels == ["p", "q", "r", "s"] and view.shown == {"first": 3}
    np.testing.assert_allclose(view.attention_map.weights.sum(-1), 1.0)
    assert (explorer.values(), explorer.message.value, bytes(explorer.image.value)) == before
    assert explorer.choices() == {"size": [2, 3, 4, 5], "first": [0, 1, 2]}


def test_guidance_and_the_text_form():
    explorer = CountingExplorer()
    assert explorer.guidance() == "Try: Type <words> and move the size. Notice: Rows sum to 1."
    assert "&lt;words&gt;" in explorer.guide.value and explorer.guide in explorer.widget.children
    text = "CountingExplorer(words='a b c d e', size=3, first=0): run the notebook to use it."
    assert repr(explorer) == text and explorer._repr_mimebundle_()["text/plain"] == text


# --- the four views of the book ------------------------------------------------------------------------------


def head_explorer():
    from mha.views.head_explorer import HeadExplorer
    return HeadExplorer()


def model_explorer():
    from mha.views.model_explorer import ModelHeadExplorer
    return ModelHeadExplorer(["The keys to the cabinet are on the table .", "Paris is the capital of France ."])


def induction_explorer():
    from mha.views.induction_explorer import InductionLabExplorer
    return InductionLabExplorer(["induction_2layer_seed0", "induction_2layer_seed1"], n_sequences=4)


def head_count_explorer():
    from mha.views.head_count_explorer import HeadCountExplorer
    return HeadCountExplorer(n_heads=2)


@pytest.fixture(scope="module", params=[head_explorer, model_explorer, induction_explorer, head_count_explorer],
                ids=lambda make: make.__name__)
def view(request):
    return request.param()


def test_each_view_says_what_to_try_and_what_to_notice(view):
    assert len(view.what_to_try) > 40 and len(view.what_to_notice) > 40
    assert view.guide.value == view.guidance_html() and view.widget.children[0] is view.guide


def test_each_view_draws_the_numbers_its_data_method_returns(view):
    assert view.refresh()
    data = view.view_data(**view.values())
    assert data.message == view.message.value
    drawn = np.asarray(view.renderer.image.get_array())
    np.testing.assert_array_equal(drawn, data.attention_map.weights)
    np.testing.assert_allclose(table_numbers(view.map_table.value), data.attention_map.weights, atol=0.005)
    for label in data.attention_map.query_labels:
        assert f">{html.escape(label)}</th>" in view.map_table.value
    assert data.attention_map.title in view.image.tooltip


def test_each_menu_and_slider_of_each_view_redraws_it(view):
    for name, values in view.choices().items():
        control = view.controls[name]
        start = control.value
        before = bytes(view.image.value), view.message.value
        control.value = next(value for value in values if value != start)
        assert (bytes(view.image.value), view.message.value) != before, f"moving {name} changed nothing"
        assert "Cannot" not in view.message.value
        control.value = start
        assert (bytes(view.image.value), view.message.value) == before, f"moving {name} back did not restore it"


# --- the renderer --------------------------------------------------------------------------------------------


def test_the_png_is_the_same_for_the_same_map_whatever_was_drawn_between():
    renderer = AttentionPNG()
    first = AttentionMap(np.eye(3), ["a", "b", "c"], title="one", marked=[(1, 1)])
    other = AttentionMap(np.full((5, 5), 0.2), list("vwxyz"), title="two")
    png = renderer.render(first)
    assert renderer.render(other) != png
    assert renderer.render(first) == png  # from the cached background
    renderer.cached_backgrounds = 1
    renderer.render(other)
    assert renderer.render(first) == png  # background drawn again


def test_a_map_must_match_its_labels():
    with pytest.raises(ValueError, match="one head's map, with one row per query token"):
        AttentionMap(np.zeros((3, 4)), ["a", "b", "c"])
    assert AttentionMap(np.zeros((2, 3)), ["q1", "q2"], ["k1", "k2", "k3"]).key_labels == ["k1", "k2", "k3"]


def test_the_table_lists_every_weight_under_escaped_labels():
    weights = np.array([[0.25, 0.75], [1.0, 0.0]])
    table = attention_table_html(weights, ["<i>", "b"], "a <title>")
    np.testing.assert_allclose(table_numbers(table), weights)
    assert "<i>" not in table and "&lt;i&gt;" in table and "a &lt;title&gt;" in table
    assert "rows: query, the position attending FROM" in table and "columns: key, the position attended TO" in table
    assert "title='&lt;i&gt; → b: 0.750'" in table


def test_figures_ring_the_marked_cells():
    ax = Figure().subplots()
    draw_attention(ax, np.eye(3), ["a", "b", "c"], marked=[(2, 0), (1, 1)])
    rings = ax.collections
    assert len(rings) == 2
    np.testing.assert_array_equal(rings[0].get_offsets(), [[0, 2], [1, 1]])  # x = key column, y = query row


def test_labels_and_title_are_drawn_and_a_label_too_long_for_its_margin_is_cut():
    from mha.views.heatmaps import _font, _label_mask

    renderer = AttentionPNG()
    weights = np.eye(3)
    plain = renderer.render(AttentionMap(weights, ["a", "b", "c"], title="t"))
    assert renderer.render(AttentionMap(weights, ["a", "b", "x"], title="t")) != plain
    assert renderer.render(AttentionMap(weights, ["a", "b", "c"], title="u")) != plain
    assert renderer.render(AttentionMap(weights, ["a", "b", "w" * 500], title="t" * 500)).startswith(b"\x89PNG")
    ink = _label_mask("w" * 500, 7, 50, True)  # upright: its height is its length
    assert ink.shape[0] <= 50 and _font(7).getlength("w" * 500) > 50


def test_the_text_form_is_what_the_notebooks_store():
    # nbval compares these lines with the text/plain outputs stored in sections 1.2, 3.1 and 3.6-3.7
    from mha.views.head_count_explorer import HeadCountExplorer
    from mha.views.head_explorer import HeadExplorer
    from mha.views.induction_explorer import InductionLabExplorer
    from mha.views.model_explorer import ModelHeadExplorer

    sentence = "The animal did not cross the street because it was too tired ."
    assert repr(HeadExplorer(sentence, n_heads=4, d_model=24)) == (
        f"HeadExplorer(sentence={sentence!r}, heads=4, head=0, d_model=24): run the notebook to use it.")
    menu = ["The keys to the old cabinet are on the table .", "A second sentence ."]
    assert ModelHeadExplorer(menu, layer=0, head=2)._repr_mimebundle_()["text/plain"] == (
        f"ModelHeadExplorer(sentence={menu[0]!r}, layer=0, head=2): run the notebook to use it.")
    assert repr(InductionLabExplorer(n_sequences=16, layer=0, head=3)) == (
        "InductionLabExplorer(model='induction_2layer_seed0', layer=0, head=3, sequence=0): run the notebook to use it.")
    assert repr(HeadCountExplorer(n_heads=1, seed=0)) == (
        "HeadCountExplorer(heads=1, seed=0, head=0, sequence=0): run the notebook to use it.")
