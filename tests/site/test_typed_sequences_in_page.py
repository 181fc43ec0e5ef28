"""Section 3.6's view on the website takes typed token ids (views/typed_sequences.js), in Chromium, served and from
file://: a page of its own with the view's payload as the site build embeds it, views.js, views.css and trainer.js.

- trainer.js loads on the first good Enter only; a bad sequence is refused before it loads;
- the page's attention for a typed sequence is PyTorch's (load_checkpoint, the model's attention weights) within 1e-4
  for every layer and head, for two models; the scores in the message are the package's view's own
  (InductionLabExplorer.view_data on the same typed ids), a sequence with no repeat included;
- letters, an id outside the vocabulary, too many ids and markup get parse_token_ids's message, and the map stays;
  the markup is shown as text, never run;
- the table of numbers and the CSV export give the typed map;
- the address carries the typed ids (text=...), and opening it draws them;
- no console error, and no request leaves the page's folder.
"""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
import torch
from conftest import HARNESS, write_view_page
from test_typed_lab_in_chromium import COUNT_UPDATES
from test_typed_lab_in_chromium import submit as enter

from mha.lab.checkpoints import load_checkpoint
from mha.views.induction_explorer import InductionLabExplorer, induction_model_names, parse_token_ids
from mha.views.payloads import site_payload

REPEATING = "5 17 42 8 5 17 42 9"
NO_REPEAT = "5 17 42 8 9 3"
SHOWN = "(r) => { const m = r.mhaView.figures[0].map; return {rows: m.rows, values: Array.from(m.values || []), " \
        "hundredths: Array.from(m.hundredths), marked: m.marked}; }"


@pytest.fixture(scope="module")
def explorer():
    return InductionLabExplorer(induction_model_names()[:2], n_sequences=2, layer=1, head=0)


@pytest.fixture(scope="module")
def folder(tmp_path_factory, explorer):
    return write_view_page(tmp_path_factory.mktemp("typed_sequences"), site_payload(explorer),
                           ("views.js", "views.css", "trainer.js"))


@pytest.fixture(scope="module", params=["served", "file"])
def page(request, folder, chromium):
    from playwright.sync_api import sync_playwright

    with HARNESS.served(folder) as address, sync_playwright() as playwright:
        base = address if request.param == "served" else folder.as_uri() + "/"
        browser = playwright.chromium.launch(executable_path=chromium, args=HARNESS.CHROMIUM_ARGS)
        tab = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
        tab.problems, tab.outside = [], []
        tab.on("pageerror", lambda error: tab.problems.append(str(error)))
        tab.on("console", lambda message: message.type == "error" and tab.problems.append(message.text))
        tab.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base)
                  else (tab.outside.append(route.request.url), route.abort()))
        tab.base = base
        tab.goto(base + "index.html")
        tab.wait_for_selector(".mha-view[data-ready=true]")
        tab.locator(".mha-view").evaluate(COUNT_UPDATES)
        yield tab
        browser.close()


def choose(tab, layer: int, head: int, model: int | None = None) -> dict:
    if model is not None:
        tab.locator(".mha-view select[name=model]").select_option(str(model))
    tab.locator(".mha-view input[name=layer]").fill(str(layer))
    tab.locator(".mha-view input[name=head]").fill(str(head))
    return tab.locator(".mha-view").evaluate(SHOWN)


def pytorch_attention(name: str, ids: list[int]) -> list[np.ndarray]:
    model, _ = load_checkpoint(name)
    with torch.no_grad():
        return [weights[0].numpy() for weights in model(torch.tensor([ids])).attention_weights]  # (heads, n, n)


def scores_line(message_html: str) -> str:
    text = html.unescape(re.sub(r"<[^>]+>", "", message_html.replace("<br>", "\n")))
    return re.search(r"On your .*", text).group(0)


def check_every_head(tab, explorer, text: str) -> None:
    ids = parse_token_ids(text, 64, 40)
    for model, name in enumerate(explorer.views):
        expected = pytorch_attention(name, ids)
        for layer, weights in enumerate(expected):
            for head in range(weights.shape[0]):
                shown = choose(tab, layer, head, model)
                assert shown["rows"] == [str(position) for position in range(len(ids))]
                drawn = np.array(shown["values"]).reshape(len(ids), len(ids))
                assert np.abs(drawn - weights[head]).max() < 1e-4, (name, layer, head)
                package = explorer.view_data(model=name, layer=layer, head=head, sequence=0, typed=text)
                message = tab.locator(".mha-view .mha-message").inner_text()
                assert scores_line(package.message) in message, (message, layer, head)
                assert [list(cell) for cell in package.attention_map.marked] == shown["marked"]
                assert " ".join(map(str, ids)) in message


def test_typed_sequences_run_in_the_page_as_in_pytorch(page, explorer):
    before = choose(page, 1, 0, 0)
    enter(page, "5 x 7")  # refused before trainer.js loads
    assert "'x' is not a token id" in page.locator(".mha-view .mha-typed-problem").inner_text()
    assert page.locator("script[src$='trainer.js']").count() == 0
    assert page.locator(".mha-view").evaluate(SHOWN) == before
    enter(page, REPEATING)
    assert page.locator(".mha-view .mha-typed-problem").inner_text() == ""
    check_every_head(page, explorer, REPEATING)
    enter(page, NO_REPEAT)
    assert "prefix-matching undefined (no token repeats)" in page.locator(".mha-view .mha-message").inner_text()
    check_every_head(page, explorer, NO_REPEAT)


def test_the_numbers_table_and_the_csv_give_the_typed_map(page, explorer):
    enter(page, REPEATING)
    ids = parse_token_ids(REPEATING, 64, 40)
    expected = pytorch_attention(next(iter(explorer.views)), ids)[1][2]  # (n, n)
    choose(page, 1, 2, 0)
    page.locator(".mha-view details.mha-details").evaluate("(details) => { details.open = true; }")
    # the table is written once its details are open: wait for its rows rather than read it at once
    page.wait_for_function("(n) => document.querySelectorAll('.mha-view .mha-table td').length === n",
                           arg=len(ids) ** 2, timeout=60_000)
    cells = page.locator(".mha-view .mha-table td").all_inner_texts()
    numbers = np.array([float(cell.replace("−", "-")) for cell in cells]).reshape(len(ids), len(ids))
    assert np.abs(numbers - expected).max() <= 0.0051  # the table shows two decimals
    with page.expect_download() as download:
        page.locator(".mha-view button[aria-label='download the map as CSV']").click()
    lines = open(download.value.path(), encoding="utf-8").read().splitlines()
    assert len(lines) == len(ids) + 1
    exact = np.array([[float(value) for value in line.split(",")[1:]] for line in lines[1:]])
    assert np.abs(exact - expected).max() < 1e-4


@pytest.mark.parametrize("text", ["5 abc 7", "5 64", " ".join(["1"] * 41), "<img src=x onerror=window.hacked=1>", "9"])
def test_bad_sequences_get_the_packages_message_and_leave_the_map(page, text):
    enter(page, REPEATING)
    before = page.locator(".mha-view").evaluate(SHOWN)
    enter(page, text)
    with pytest.raises(ValueError) as refused:
        parse_token_ids(text, 64, 40)
    assert page.locator(".mha-view .mha-typed-problem").inner_text() == f"Cannot draw this: {refused.value}"
    assert page.locator(".mha-view").evaluate(SHOWN) == before
    assert page.locator(".mha-view img").count() == 0 and page.evaluate("() => window.hacked") is None


def test_the_address_carries_the_typed_ids(page, explorer):
    enter(page, REPEATING)
    page.wait_for_function("() => location.hash.includes('text=')")
    assert "text=5+17+42+8+5+17+42+9" in page.evaluate("() => location.hash")
    page.evaluate("() => { location.hash = location.hash.replace(/text=[^&]*/, 'text=3+4+3+4'); }")
    page.wait_for_function("() => document.querySelector('.mha-view').mhaView.figures[0].map.rows.length === 4")
    page.evaluate("() => { location.hash = location.hash.replace(/text=[^&]*/, 'text=3+99'); }")
    page.wait_for_function("() => /outside the vocabulary/.test(document.querySelector('.mha-address').textContent)")
    assert page.locator(".mha-view").evaluate(SHOWN)["rows"] == ["0", "1", "2", "3"]


def test_no_console_error_and_nothing_requested_outside(page):
    assert page.problems == []
    assert page.outside == []
