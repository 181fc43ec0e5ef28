"""The website's form of the views (mha.views.payloads): what a notebook stores is stable text, a recipe rebuilds
the same view, every stored view equals the package's, and the payload is compact and round-trips exactly.
The browser's side is tested in test_site_views.py."""

from __future__ import annotations

import html
import json
import re

import numpy as np
import pytest
import torch
from IPython.core.formatters import format_display_data

from mha.core.toy_sentences import embed_tokens, word_vector
from mha.views.head_count_explorer import HeadCountStudyExplorer
from mha.views.heatmaps import weight_hundredths, weight_texts
from mha.views.induction_explorer import InductionLabExplorer
from mha.views.payloads import (
    SITE_VIEWS,
    decode_payload,
    encode_payload,
    placeholder_html,
    site_payload,
    stored_weights,
    view_from_recipe,
)
from mha.views.random_layer_explorer import RandomLayerExplorer, head_attention_maps

torch.set_num_threads(1)


def recipe_in(placeholder: str) -> dict:
    return json.loads(html.unescape(re.search(r'data-mha-recipe="([^"]*)"', placeholder).group(1)))


def test_the_notebook_stores_a_placeholder_that_rebuilds_the_same_view():
    explorer = RandomLayerExplorer("Bob's <b>cat</b> sat .", n_heads=6)
    bundle, _ = format_display_data(explorer)  # what Jupyter gets
    assert "application/vnd.jupyter.widget-view+json" in bundle  # the live view, in Jupyter
    placeholder = bundle["text/html"]
    assert placeholder == placeholder_html(RandomLayerExplorer("Bob's <b>cat</b> sat .", n_heads=6))  # stable: nbval
    assert "<b>cat" not in placeholder and "&lt;b&gt;cat" in placeholder  # typed markup stays text
    rebuilt = view_from_recipe(recipe_in(placeholder))
    assert type(rebuilt) is RandomLayerExplorer and rebuilt.values() == explorer.values()


def test_a_recipe_names_only_the_books_views():
    assert {"RandomLayerExplorer", "ModelHeadExplorer", "InductionLabExplorer", "HeadCountStudyExplorer"} <= set(
        SITE_VIEWS)
    with pytest.raises(ValueError, match="not one of the book's views"):
        view_from_recipe({"view": "os.system", "arguments": {}})
    with pytest.raises(ValueError, match="a mapping with 'view' and 'arguments'"):
        view_from_recipe({"view": "RandomLayerExplorer"})


def test_a_view_built_in_code_that_cannot_be_rebuilt_says_so():
    import dataclasses

    from mha.lab.head_count_study import load_study

    study = load_study()
    assert HeadCountStudyExplorer(study).recipe() is not None  # the stored study can be loaded again
    other = HeadCountStudyExplorer(dataclasses.replace(study, directory="elsewhere"))
    assert other.recipe() is None
    assert "needs a running notebook" in placeholder_html(other)


@pytest.mark.slow
def test_every_stored_view_is_the_packages_view_and_the_payload_round_trips():
    explorer = InductionLabExplorer(n_sequences=3, layer=0, head=1)
    payload = site_payload(explorer)
    encoded = encode_payload(payload)
    assert encode_payload(payload) == encoded  # the same page for the same book
    decoded = decode_payload(encoded)
    assert decoded["weights"] == payload["weights"] and decoded["views"] == payload["views"]
    controls = decoded["controls"]
    assert [control["name"] for control in controls] == ["model", "layer", "head", "sequence"]
    assert len(decoded["views"]) == np.prod([len(control["values"]) for control in controls])
    for key, index in list(decoded["views"].items())[::7]:
        chosen = zip(controls, key.split("|"), strict=True)
        values = {control["name"]: control["values"][int(i)] for control, i in chosen}
        expected = explorer.view_data(**values, typed="")
        drawn = decoded["drawn"][index]
        assert decoded["strings"][drawn["message"]] == expected.message
        assert decoded["strings"][drawn["map"]["title"]] == expected.attention_map.title
        assert np.array_equal(stored_weights(decoded, drawn["map"]), weight_hundredths(expected.attention_map.weights))
        assert drawn["map"]["marked"] == [list(cell) for cell in expected.attention_map.marked]


def test_what_a_reader_typed_in_the_kernel_never_reaches_the_website():
    explorer = InductionLabExplorer(["induction_2layer_seed0"], n_sequences=2)
    explorer.own_tokens.value = "5 17 42 8 5 17 42"
    in_jupyter = decode_payload(explorer.payload())
    assert all("your 7 tokens" in in_jupyter["strings"][drawn["message"]] for drawn in in_jupyter["drawn"])
    # the website's build rebuilds the view from the recipe the notebook stores: the held-out sequences
    rebuilt = view_from_recipe(recipe_in(placeholder_html(explorer)))
    on_the_site = site_payload(rebuilt)
    messages = [on_the_site["strings"][drawn["message"]] for drawn in on_the_site["drawn"]]
    assert all("On held-out sequence" in message and "your 7 tokens" not in message for message in messages)
    assert on_the_site["note"] == InductionLabExplorer.site_note and in_jupyter["note"] == ""


@pytest.mark.slow
def test_a_slider_beyond_its_reach_stores_the_clamped_view():
    explorer = HeadCountStudyExplorer(n_heads=1, seed=0)
    payload = site_payload(explorer)
    names = [control["name"] for control in payload["controls"]]
    assert names == ["heads", "seed", "head", "sequence"]
    heads = payload["controls"][0]["values"]
    one, widest = heads.index(1), heads.index(max(heads))
    # head 5 of a 1-head model is head 0, as the package shows it; head 5 of the widest model is its own view
    assert payload["views"][f"{one}|0|5|0"] == payload["views"][f"{one}|0|0|0"]
    assert payload["views"][f"{widest}|0|5|0"] != payload["views"][f"{widest}|0|0|0"]
    drawn = payload["drawn"][payload["views"][f"{widest}|0|0|0"]]
    assert drawn["top"]["head"] == max(heads) - 1


def test_the_chapter_1_payload_is_the_layer_and_its_refusals():
    explorer = RandomLayerExplorer(max_heads=12, d_model=24)
    payload = site_payload(explorer)
    assert payload["kind"] == "head-explorer"
    assert sorted(int(h) for h in payload["refusals"]) == [5, 7, 9, 10, 11]
    assert all("Cannot draw this:" in message for message in payload["refusals"].values())
    # the maps the page computes come from these projections
    W_Q, b_Q = np.array(payload["W_Q"]), np.array(payload["b_Q"])
    W_K, b_K = np.array(payload["W_K"]), np.array(payload["b_K"])
    tokens, weights = head_attention_maps("It's a cat.", 3)
    x = embed_tokens(tokens, 24)[0].double().numpy()  # (seq, d_model)
    q, k = x @ W_Q + b_Q, x @ W_K + b_K  # (seq, d_model)
    head = 1  # features 8..15 of 24
    scores = q[:, 8:16] @ k[:, 8:16].T / np.sqrt(8)
    expected = np.exp(scores - scores.max(1, keepdims=True))
    assert np.abs(expected / expected.sum(1, keepdims=True) - weights[head]).max() < 1e-5


def test_word_vectors_are_fixed_normal_numbers_of_the_word_alone():
    assert np.array_equal(word_vector("Cat", 24), word_vector("cat", 24))  # lower-cased
    assert not np.allclose(word_vector("cat", 24), word_vector("cat", 24, seed=1))
    assert not np.allclose(word_vector("cat", 24), word_vector("cab", 24))
    assert word_vector("naïve", 5).shape == (5,)
    many = np.stack([word_vector(f"word{i}", 24) for i in range(2000)])  # (2000, 24)
    assert abs(many.mean()) < 0.02 and abs(many.var() - 1.0) < 0.03  # standard normal numbers
    assert abs(np.corrcoef(many[:, 0], many[:, 1])[0, 1]) < 0.06  # features independent


def test_the_table_shows_the_hundredths_the_site_stores():
    weights = np.array([[0.004, 0.996], [0.125, 0.875]])
    assert weight_hundredths(weights).tolist() == [[0, 100], [12, 88]]
    assert weight_texts(weights) == [["0.00", "1.00"], ["0.12", "0.88"]]


def test_bertviz_labels_cannot_end_its_script():
    from bertviz import head_view

    from mha.views.heatmaps import script_safe_labels

    hostile = ["</script><img src=x onerror=alert(1)>", "b"]
    attention = (torch.full((1, 1, 2, 2), 0.5),)  # (batch, heads, seq, seq) for one layer
    unsafe = head_view(attention, hostile, html_action="return").data
    assert "<img src=x" in unsafe  # what bertviz alone would write into the page
    page = head_view(attention, script_safe_labels(hostile), html_action="return").data
    assert "<img" not in page and page.count("<script") == page.count("</script>")
    assert script_safe_labels(hostile)[0] == "‹/script›‹img src=x onerror=alert(1)›"  # it still reads the same
    assert json.dumps(script_safe_labels(hostile)[0]) in page


def test_payloads_reads_of_a_view_exactly_what_the_contract_lists_and_imports_no_view():
    import ast
    from pathlib import Path

    import mha.views.payloads
    from mha.views.contract import SiteView, TableView

    tree = ast.parse(Path(mha.views.payloads.__file__).read_text())
    read = {node.attr for node in ast.walk(tree)  # every function of payloads names the view it is given `explorer`
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "explorer"}
    listed = {name for part in (SiteView, TableView) for name in [*part.__annotations__, *vars(part)]
              if not name.startswith("_")}
    assert read == listed
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)} | {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    views = {"mha.views.explorer", *SITE_VIEWS.values()}
    assert not imported & views, "payloads imports a view (TYPE_CHECKING or not); it should need only the contract"

