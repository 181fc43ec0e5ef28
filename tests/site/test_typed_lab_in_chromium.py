"""Chapter 3's typed-text lab in Chromium, on a page of its own: one chapter-3 view (its payload as the site build
embeds it), views.js, model.js and the exported model, served on 127.0.0.1.

- any text up to the model's 512 tokens runs: a 62-token and a 512-token sentence are drawn a 40 × 40 window at a
  time, each cell of the window the package's weight of its own query and key; 513 tokens are refused, saying so;
- behind a weight: the panel of the cell in focus gives its weight, score and the QK circuit's four parts as the
  package computes them (mha.core.geometry.score_terms on MiniLMEncoder's run);
- switching a head off by mean ablation draws "with head" and "without head", the latter the PyTorch layers with
  the head's output replaced by its mean over the sentence's tokens;
- a head's treebank example (its sentence with the highest score on [CLS]) opens in the typed view;
- about 300 tokens of real prose (the opening of Bleak House, from the book's LitBank extract), typed into the grid
  of every head as 3.1 opens it, served and from file://: shown a layer at a time, saying so, then every layer and
  head's weights within 0.002 of transformers' BertModel (eager attention) and its token ids exactly those of
  transformers' tokenizer.
"""

from __future__ import annotations

import base64
import math
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import HARNESS, write_view_page
from test_web_model_lab import mean_ablated

from mha.core.geometry import score_terms
from mha.corpora.litbank import load_litbank
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.web_export import export_web_model
from mha.views.model_explorer import ModelHeadExplorer
from mha.views.payloads import site_payload

SIXTY_TWO = ("The committee that the mayor appointed last spring said on Tuesday that the new bridge over the river "
             "would open to traffic early next year, after the engineers who inspected it had finished their report "
             "on the cables and the concrete of the two towers, and after the council had voted on all the money it "
             "needs.")
WINDOW = 40
COUNT_UPDATES = """(root) => root.addEventListener("mha-view-updated", (event) => {
  root.typedRuns = (root.typedRuns || 0) + (event.detail.cause === "typed" ? 1 : 0); })"""


@pytest.fixture(scope="module")
def lab_site(tmp_path_factory) -> Path:
    """The page: a chapter-3 view with the page's model, as the site build writes its parts."""
    folder = tmp_path_factory.mktemp("lab_site")
    export_web_model(folder / "model")
    explorer = ModelHeadExplorer(["The cat sat on the mat .", "A dog barked ."], layer=0, head=0)
    return write_view_page(folder, site_payload(explorer), ("views.js", "views.css", "model.js"))


@pytest.fixture(scope="module")
def page(lab_site, chromium):
    from playwright.sync_api import sync_playwright

    with HARNESS.served(lab_site) as address, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=HARNESS.CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        tab = context.new_page()
        problems = []
        tab.on("pageerror", lambda error: problems.append(str(error)))
        tab.goto(address + "index.html")
        tab.wait_for_selector(".mha-view[data-ready=true]")
        tab.locator(".mha-view").evaluate(COUNT_UPDATES)
        tab.problems = problems
        yield tab
        browser.close()


def submit(tab, text: str) -> float:
    """Type ``text`` and press Enter; wait for the view's answer and the next painted frame. Milliseconds taken."""
    root = tab.locator(".mha-view")
    runs = root.evaluate("(r) => r.typedRuns || 0")
    root.locator("input[name=typed]").fill(text)
    root.evaluate("(r) => { r.enterAt = performance.now(); }")
    root.locator("input[name=typed]").press("Enter")
    tab.wait_for_function("([r, n]) => (r.typedRuns || 0) > n", arg=[root.element_handle(), runs], timeout=300_000)
    return root.evaluate("(r) => new Promise((done) => requestAnimationFrame(() => setTimeout(() => "
                         "done(performance.now() - r.enterAt), 0)))")


def shown_maps(tab) -> list[dict]:
    return tab.locator(".mha-view").evaluate(
        "(r) => r.mhaView.figures.map((f) => ({title: f.map.title, short: f.map.short || null, rows: f.map.rows, "
        "columns: f.map.columns, hundredths: Array.from(f.map.hundredths)}))")


def set_slider(tab, name: str, value: int) -> None:
    tab.locator(f".mha-view input[name={name}]").fill(str(value))


def assert_window(shown: dict, tokens: list[str], weights: np.ndarray, row: int, column: int) -> None:
    """The drawn map is the window of ``weights`` (n, n) at (row, column), labelled by position and token."""
    assert shown["rows"] == [f"{row + i} {tokens[row + i]}" for i in range(WINDOW)]
    assert shown["columns"] == [f"{column + i} {tokens[column + i]}" for i in range(WINDOW)]
    drawn = np.array(shown["hundredths"]).reshape(WINDOW, WINDOW)
    expected = np.rint(weights[row:row + WINDOW, column:column + WINDOW] * 100)
    assert np.abs(drawn - expected).max() <= 1


def test_a_62_token_sentence_is_drawn_a_window_at_a_time_and_each_weight_looked_behind(page):
    encoder = MiniLMEncoder.load()
    trace = encoder.trace(SIXTY_TWO)
    tokens = list(trace.sentence().tokens)
    assert len(tokens) == 62
    submit(page, SIXTY_TWO)
    message = page.locator(".mha-view .mha-message").inner_text()
    assert "cannot be read" not in message and "62 rows and columns" in message, message
    set_slider(page, "layer", 2)
    set_slider(page, "head", 9)
    set_slider(page, "window_row", 15)
    set_slider(page, "window_column", 22)
    assert_window(shown_maps(page)[0], tokens, trace.sentence().attention[2, 9], 15, 22)
    # the focus cell, moved by keyboard: the readout names the cell, the panel looks behind its weight
    picture = page.locator(".mha-view .mha-picture")
    picture.focus()
    for key in ["ArrowRight"] + ["ArrowDown"] * 3 + ["ArrowRight"] * 2:
        picture.press(key)
    query, key = 15 + 3, 22 + 2
    assert f"Row 3 “{query} {tokens[query]}”" in page.locator(".mha-view .mha-readout").inner_text()
    panel = page.locator(".mha-view .mha-panel-weight").inner_text()
    assert f"(query {query})" in panel and f"(key {key})" in panel, panel
    weight = float(re.search(r"weight (\d\.\d{6})", panel).group(1))
    assert abs(weight - float(trace.attention_weights[2, 0, 9, query, key])) < 1e-3
    w = encoder.head_weights(2, 9)
    x = trace.hidden_states[2][0]
    terms = score_terms(x, x, w.W_Q, w.W_K, w.b_Q, w.b_K)
    for name in ("bilinear", "query_only", "key_only", "constant"):
        line = re.search(rf"{name}\t[^\t]+\t(−?\d+\.\d+)", panel).group(1)
        assert abs(float(line.replace("−", "-")) - float(getattr(terms, name)[query, key])) < 1e-2, name
    score = float(((x[query] @ w.W_Q + w.b_Q) @ (x[key] @ w.W_K + w.b_K)) / math.sqrt(encoder.config.d_head))
    assert abs(float(re.search(r"√32 = (−?\d+\.\d+)", panel).group(1).replace("−", "-")) - score) < 1e-2
    assert not page.problems, page.problems


def test_mean_ablation_draws_with_head_and_without_head(page):
    text = "The keys to the old cabinet that my grandmother left us are on the kitchen table."
    submit(page, text)
    set_slider(page, "layer", 3)
    set_slider(page, "head", 0)
    page.locator(".mha-view select[name=ablation]").select_option("mean")
    page.get_by_role("button", name="Switch this head off").click()
    page.wait_for_function("() => document.querySelector('.mha-view').mhaView.figures.length === 3", timeout=60_000)
    maps = shown_maps(page)
    assert [m["short"] for m in maps] == ["with head", "without head", "with − without"]
    assert maps[0]["title"] == "with head: L4H0" and maps[1]["title"] == "without head: L4H0"
    attention, _ = mean_ablated(MiniLMEncoder.load(), text, [[3, 0]])
    drawn = np.array(maps[1]["hundredths"]).reshape(attention.shape[-2:])
    assert np.abs(drawn - np.rint(attention[4, 0] * 100)).max() <= 1
    assert "mean ablation" in page.locator(".mha-view select[name=sentence]").evaluate(
        "(s) => Array.from(s.options).map((o) => o.textContent).join('|')")
    address = page.evaluate("location.href")
    assert re.search(r"compare_off=mean(%3A|:)3\.0", address), address
    assert not page.problems, page.problems
    # the address opens the same comparison
    again = page.context.new_page()
    again.goto(address)
    again.wait_for_function("() => (document.querySelector('.mha-view').mhaView || {figures: []}).figures.length === 3",
                            timeout=120_000)
    assert [m["short"] for m in shown_maps(again)][:2] == ["with head", "without head"]
    again.close()


def test_512_tokens_are_drawn_and_513_refused(page):
    words = " ".join(["word"] * 510)
    took = submit(page, words)
    print(f"512 tokens: {took:.0f} ms from Enter to the painted map in Chromium")
    message = page.locator(".mha-view .mha-message").inner_text()
    assert "512 rows and columns" in message, message
    maps = shown_maps(page)
    assert len(maps[0]["rows"]) == WINDOW and maps[0]["rows"][0] == "0 [CLS]"
    set_slider(page, "window_row", 500)  # clamped to the last window
    assert shown_maps(page)[0]["rows"][-1] == "511 [SEP]"
    submit(page, words + " word")
    message = page.locator(".mha-view .mha-message").inner_text()
    assert "513 tokens long" in message and "512 positions" in message, message
    assert not page.problems, page.problems


def test_a_heads_treebank_example_opens_in_the_typed_view(page):
    set_slider(page, "layer", 1)
    set_slider(page, "head", 2)
    example = page.locator(".mha-view .mha-examples .mha-example").first
    assert example.inner_text().startswith("highest ")
    text = example.get_attribute("title")
    root = page.locator(".mha-view")
    runs = root.evaluate("(r) => r.typedRuns || 0")
    example.click()
    page.wait_for_function("([r, n]) => (r.typedRuns || 0) > n", arg=[root.element_handle(), runs], timeout=120_000)
    traced = MiniLMEncoder.load().trace(text).sentence()
    shown = shown_maps(page)[0]
    assert shown["title"] == "L1H2" and shown["rows"] == list(traced.tokens)
    drawn = np.array(shown["hundredths"]).reshape(len(traced.tokens), -1)
    assert np.abs(drawn - np.rint(traced.attention[1, 2] * 100)).max() <= 1
    assert page.locator(".mha-view input[name=typed]").input_value() == text
    assert not page.problems, page.problems


PROSE_TOKENS = 300
TRANSFORMERS_TOLERANCE = 0.002
# At the view's first answer on a long text ("typed-shown"), then at its last ("typed"): the grid's tiles and message.
RECORD_ANSWERS = """(root) => { root.answers = [];
  root.addEventListener("mha-view-updated", (event) => root.answers.push({cause: event.detail.cause,
    tiles: root.querySelectorAll(".mha-tile").length, message: root.querySelector(".mha-message").textContent})); }"""
# The newest run's token ids and attention weights (layers, heads, n, n), its float32 bytes in base64.
READ_RUN = """(root) => { const run = root.mhaView.runs[root.mhaView.runs.length - 1];
  const bytes = new Uint8Array(run.attention.buffer, run.attention.byteOffset, run.attention.byteLength);
  let text = "";
  for (let i = 0; i < bytes.length; i += 32768) text += String.fromCharCode.apply(null, bytes.subarray(i, i + 32768));
  return {ids: Array.from(run.ids), layersDone: run.layersDone, attention: btoa(text)}; }"""


@pytest.fixture(scope="module")
def prose_in_transformers() -> tuple[str, list[int], np.ndarray]:
    """Bleak House's first sentences, as many as stay within PROSE_TOKENS tokens; transformers' token ids for them and
    its attention weights (layers, heads, n, n), from the same pretrained files the page's model is exported from."""
    import torch
    from transformers import AutoTokenizer, BertModel

    path = str(MiniLMEncoder.load().model_path)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    text = ""
    for words in load_litbank()[0].sentences:
        longer = f"{text} {' '.join(words)}".strip()
        if len(tokenizer(longer)["input_ids"]) > PROSE_TOKENS:
            break
        text = longer
    model = BertModel.from_pretrained(path, attn_implementation="eager", local_files_only=True).eval()
    inputs = tokenizer(text, return_tensors="pt")
    with torch.inference_mode():
        attentions = model(**inputs, output_attentions=True).attentions
    return text, inputs["input_ids"][0].tolist(), torch.stack(attentions)[:, 0].numpy()


@pytest.mark.parametrize("opened", ["served", "from file://"])
def test_300_tokens_of_prose_match_transformers_a_layer_at_a_time(page, lab_site, prose_in_transformers, opened):
    text, ids, attention = prose_in_transformers
    assert PROSE_TOKENS - 20 <= len(ids) <= PROSE_TOKENS
    context = page.context.browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    problems = []
    tab.on("pageerror", lambda error: problems.append(str(error)))
    tab.goto(page.url if opened == "served" else (lab_site / "index.html").as_uri())
    root = tab.locator(".mha-view[data-ready=true]")
    root.get_by_role("button", name="All layers").click()  # the grid of every head, as 3.1 opens
    root.evaluate(RECORD_ANSWERS)
    root.locator("input[name=typed]").fill(text)
    root.locator("input[name=typed]").press("Enter")
    tab.wait_for_function("(r) => r.answers.some((a) => a.cause === 'typed')", arg=root.element_handle(),
                          timeout=300_000)
    answers = root.evaluate("(r) => r.answers")
    # first the grid's first layer, saying the others are still being computed; then all 72 heads, said no more
    assert [a["cause"] for a in answers] == ["typed-shown", "typed"], answers
    assert answers[0]["tiles"] == 12 and "Still computing" in answers[0]["message"], answers[0]
    assert answers[1]["tiles"] == 72 and "Still computing" not in answers[1]["message"], answers[1]
    run = root.evaluate(READ_RUN)
    assert run["ids"] == ids
    drawn = np.frombuffer(base64.b64decode(run["attention"]), np.float32).reshape(attention.shape)
    difference = np.abs(drawn - attention).max()
    print(f"{len(ids)} tokens of prose, {opened}: largest difference from transformers {difference:.5f}")
    assert difference <= TRANSFORMERS_TOLERANCE
    assert not problems, problems
    context.close()


# The page's model made to fail once, after its first layer of the next run (as a page out of memory would).
FAIL_AFTER_FIRST_LAYER = """(root) => { const model = root.mhaView.typedModel(), real = model.run;
  model.run = (ids, options) => { model.run = real;
    return real.call(model, ids, {...options, onLayer: async (partial) => { await options.onLayer(partial);
      throw new Error("the page ran out of memory"); }}); }; }"""


def test_a_long_run_that_stops_part_way_says_where_and_runs_afresh(page, prose_in_transformers):
    text = prose_in_transformers[0]
    set_slider(page, "layer", 0)  # one map of layer 0: the run is shown once its first layer is done
    submit(page, "The model loads first .")
    root = page.locator(".mha-view")
    root.evaluate(FAIL_AFTER_FIRST_LAYER)
    submit(page, text)
    message = root.locator(".mha-message")
    assert "the page ran out of memory" in message.inner_text()
    set_slider(page, "head", 3)  # a redraw of the part-way run: where it stopped, not "still computing"
    page.wait_for_function("(r) => r.querySelector('.mha-message').textContent.includes('stopped after')",
                           arg=root.element_handle(), timeout=60_000)
    assert "The model stopped after layers 0 to 0 of 6" in message.inner_text()
    assert "Still computing" not in message.inner_text()
    submit(page, text)  # the same text again: a new run, not the stopped one
    page.wait_for_function("(r) => r.mhaView.runs[r.mhaView.runs.length - 1].layersDone === 6",
                           arg=root.element_handle(), timeout=300_000)
    assert "stopped after" not in message.inner_text() and "Still computing" not in message.inner_text()
    assert not page.problems, page.problems
