"""Glued numbers and citations read properly in JupyterLab and on the site, from one source.

The notebooks' prose writes a number as ``{eval}`glue.text("name:fmt")``` and a citation as
``{eval}`glue.cite_t("key")```. jupyterlab-myst shows the results stored in each markdown cell's ``user_expressions``
metadata; the site hands the same roles to myst-nb's glue paste and to sphinxcontrib-bibtex
(``website/glued_numbers.py``).
These tests check the stored results against the notebooks' own glue records, the kernel's answer against the stored
one, and what a reader sees: JupyterLab in Chromium, and the built site.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest
from conftest import CHROMIUM_ARGS, POLL, load_script

import mha.book.prose
from mha.book import GLUE_RECORD, PROSE_CITATION, PROSE_NUMBER, citation_text, glue, prose_expression_results
from mha.data_files import DATA_DIRECTORY

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
SHOWN_IN_THE_BROWSER = ROOT / "chapters" / "1_mechanism" / "1_attention_from_scratch.ipynb"
run_notebooks = load_script("run_notebooks")


def stored_results(path: Path) -> dict[str, str]:
    """Every inline expression of a notebook and the text JupyterLab shows for it (quotes of the repr removed)."""
    texts = {}
    for cell in nbformat.read(path, as_version=4).cells:
        for item in cell.metadata.get("user_expressions", []):
            texts[item["expression"]] = item["result"]["data"]["text/plain"][1:-1]
    return texts


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_prose_uses_the_forms_jupyterlab_reads_and_stores_their_results(path):
    notebook = nbformat.read(path, as_version=4)
    prose = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "markdown")
    assert "{glue:text}" not in prose and not re.search(r"\{cite:[a-z]+\}", prose), (
        "write numbers as {eval}`glue.text(\"name:fmt\")` and citations as {eval}`glue.cite_t(\"key\")`: run "
        f"python -m scripts.run_notebooks --prose-only {path.relative_to(ROOT)}")
    expected = prose_expression_results(notebook)
    stored = [cell.metadata.get("user_expressions") for cell in notebook.cells]
    stale = [index for index, (want, have) in enumerate(zip(expected, stored, strict=True)) if want != have]
    assert not stale, (f"cells {stale} store other results than their glue records give: run "
                       f"python -m scripts.run_notebooks --prose-only {path.relative_to(ROOT)}")
    unknown = re.findall(r"\{eval\}`([^`]*)`", prose)
    known = {m[0][len("{eval}`"):-1] for m in [*PROSE_NUMBER.finditer(prose), *PROSE_CITATION.finditer(prose)]}
    assert set(unknown) <= known, f"expressions neither the site nor JupyterLab reads: {set(unknown) - known}"


def test_the_stored_results_are_the_glued_values_as_the_site_formats_them():
    texts = stored_results(SHOWN_IN_THE_BROWSER)
    notebook = nbformat.read(SHOWN_IN_THE_BROWSER, as_version=4)
    record = next(output["data"][GLUE_RECORD] for cell in notebook.cells for output in cell.get("outputs", [])
                  if output.get("metadata", {}).get("scrapbook", {}).get("name") == "std_unscaled_1024")
    assert texts['glue.text("std_unscaled_1024:.1f")'] == format(float(record), ".1f")
    assert texts['glue.cite_p("bahdanau2015neural,vaswani2017attention")'] == \
        "[Bahdanau et al., 2015, Vaswani et al., 2017]"


def test_the_kernel_answers_what_the_notebook_stores(monkeypatch):
    monkeypatch.setattr(mha.book.prose, "_GLUED", {})
    assert glue.text("never_glued:.2f") == "(run the cell that computes never_glued first)"
    glue("share", 0.73259, ".1%")
    glue("count", 12)
    glue("head", "L2H0")
    glue("mean", 3.14159, ".2f")
    assert [glue.text("share:.1%"), glue.text("count"), glue.text("count:d"), glue.text("head"),
            glue.text("mean:.2f")] == ["73.3%", "12", "12", "L2H0", "3.14"]
    assert glue.cite_t("clark2019what") == "Clark et al. [2019]"
    assert glue.cite_p("michel2019sixteen,voita2019analyzing") == "[Michel et al., 2019, Voita et al., 2019]"
    with pytest.raises(ValueError, match="not in the book's bibliography"):
        citation_text("nobody2099", "t")
    with pytest.raises(TypeError, match="one string"):
        glue.text(3)


def test_citation_labels_are_written_from_the_bibliography():
    stored = json.loads((DATA_DIRECTORY / "citations.json").read_text())
    assert stored == run_notebooks.citation_labels(), "run python -m scripts.run_notebooks --prose-only"
    assert stored["abnar2020quantifying"] == {"authors": "Abnar and Zuidema", "year": "2020"}
    assert stored["clark2019what"] == {"authors": "Clark et al.", "year": "2019"}


def test_the_rewrite_turns_myst_nb_markup_into_the_forms_both_read(tmp_path):
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell(
                "",
                outputs=[
                    nbformat.v4.new_output(
                        "display_data", data={GLUE_RECORD: "0.25"}, metadata={"scrapbook": {"name": "share"}}
                    )
                ],
            ),
            nbformat.v4.new_markdown_cell(
                "A share of {glue:text}`share:.0%` {cite:p}`clark2019what, voita2019analyzing`."
            ),
        ]
    )
    run_notebooks.store_prose_numbers(notebook)
    cell = notebook.cells[1]
    assert cell.source == ('A share of {eval}`glue.text("share:.0%")` '
                           '{eval}`glue.cite_p("clark2019what,voita2019analyzing")`.')
    assert [item["result"]["data"]["text/plain"] for item in cell.metadata["user_expressions"]] == \
        ["'25%'", "'[Clark et al., 2019, Voita et al., 2019]'"]
    notebook.cells[1].source = "A share of {eval}`glue.text(\"sahre:.0%\")`."
    with pytest.raises(ValueError, match="never glues"):
        prose_expression_results(notebook)


def test_the_site_shows_the_same_numbers_and_links_citations_to_the_bibliography(built_site):
    page = (built_site / SHOWN_IN_THE_BROWSER.relative_to(ROOT).with_suffix(".html")).read_text()
    texts = stored_results(SHOWN_IN_THE_BROWSER)
    numbers = [text for expression, text in texts.items() if expression.startswith("glue.text")]
    pasted = re.findall(r'<span class="pasted-text">([^<]*)</span>', page)
    assert sorted(set(pasted)) == sorted(set(numbers))
    assert "glue.text(" not in page and "glue.cite" not in page
    cited = re.findall(r'<a class="reference internal" href="[^"]*references\.html#[^"]*"[^>]*>(.*?)</a>', page)
    assert any("Bahdanau" in link for link in cited) and any("Vaswani" in link for link in cited)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def jupyterlab(tmp_path: Path, notebooks: dict[str, str]):
    """JupyterLab serving ``notebooks`` (name -> JSON text) from an empty folder, every cell rendered at once;
    yields its address. Its settings, data and runtime folders are the test's own."""
    jupyter = Path(sys.executable).parent / "jupyter"
    (tmp_path / "book").mkdir()
    for name, text in notebooks.items():
        (tmp_path / "book" / name).write_text(text)
    settings = tmp_path / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    # every cell rendered at once, so that the whole notebook can be read without scrolling it into view
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    port = free_port()
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTER_DATA_DIR=str(tmp_path / "data"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"), JUPYTER_PATH=str(Path(sys.prefix) / "share" / "jupyter"))
    log = open(tmp_path / "server.log", "w")
    server = subprocess.Popen(
        [
            str(jupyter),
            "lab",
            "--no-browser",
            f"--port={port}",
            "--ServerApp.token=",
            "--ServerApp.password=",
            f"--ServerApp.root_dir={tmp_path / 'book'}",
            "--allow-root",
            f"--LabApp.user_settings_dir={tmp_path / 'settings'}",
            f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=10).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "JupyterLab did not start within 60 s"
                time.sleep(0.3)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


VIEWS_NOTEBOOK = [
    "from mha.views.random_layer_explorer import RandomLayerExplorer\n"
    "from mha.views.model_explorer import ModelHeadExplorer\n"
    "RandomLayerExplorer('The cat sat on the mat .', n_heads=4)",
    "ModelHeadExplorer(['The keys to the cabinet are here .', 'A dog barked .'], layer=1, head=3)",
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One JupyterLab for this file's browser tests, serving 1.1 and a notebook that shows two views."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in VIEWS_NOTEBOOK])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebooks = {SHOWN_IN_THE_BROWSER.name: SHOWN_IN_THE_BROWSER.read_text(), "views.ipynb": nbformat.writes(notebook)}
    with jupyterlab(tmp_path_factory.mktemp("jupyterlab"), notebooks) as address:
        yield address


@pytest.fixture(scope="module")
def lab_tabs(chromium):
    """One Chromium context for this file's browser tests, so that the second opens JupyterLab from its cache."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield browser.new_context(viewport={"width": 1300, "height": 1000})
        browser.close()


# every text given is in the notebook's rendered prose, and no role is left unrendered
SHOWS_ALL = """(texts) => {
  const shown = Array.from(document.querySelectorAll('.jp-MarkdownCell .myst')).map(e => e.innerText).join('\\n');
  return texts.every((text) => shown.includes(text)) && !shown.includes('glue.text(') && !shown.includes('glue.cite');
}"""


def test_jupyterlab_shows_glued_numbers_and_citations_before_any_cell_runs(lab, lab_tabs):
    """A reader opens 1.1 in JupyterLab: the prose shows the numbers and "Author et al. [year]", never a raw role."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    texts = stored_results(SHOWN_IN_THE_BROWSER)
    page = lab_tabs.new_page()
    try:
        page.goto(f"{lab}/lab/tree/{SHOWN_IN_THE_BROWSER.name}?reset")
        page.wait_for_selector(".jp-MarkdownCell .myst:has-text('Summary')", timeout=90_000)
        with contextlib.suppress(PlaywrightTimeout):  # what is still missing then is named below
            page.wait_for_function(SHOWS_ALL, arg=list(texts.values()), timeout=30_000, polling=POLL)
        shown = page.evaluate("() => Array.from(document.querySelectorAll('.jp-MarkdownCell .myst'))"
                              ".map(e => e.innerText).join('\\n')")
        not_found = page.locator("[title='Citation Not Found']").count()
    finally:
        page.close()
    missing = [f"{expression} -> {text}" for expression, text in texts.items() if text not in shown]
    assert not missing, f"JupyterLab does not show: {missing}"
    assert not_found == 0 and "glue.text(" not in shown and "glue.cite" not in shown
    assert "[Bahdanau et al., 2015, Vaswani et al., 2017]" in shown


def test_jupyterlab_draws_the_views_with_the_websites_module_and_the_kernel_adds_a_typed_sentence(lab, lab_tabs):
    """The views run in JupyterLab through anywidget with views.js itself: the map and its scale are drawn, a slider
    and the keyboard readout answer, and a sentence typed in the kernel's box joins the view's menu."""
    page = lab_tabs.new_page()
    try:
        problems = []
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.goto(f"{lab}/lab/tree/views.ipynb?reset")  # a fresh workspace: only this notebook open
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
        page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=90_000)  # the kernel is ready
        page.locator(".jp-Cell").first.click()
        page.keyboard.press("Shift+Enter")
        page.keyboard.press("Shift+Enter")
        views = page.locator(".jp-OutputArea .mha-view[data-ready='true']")
        views.nth(1).wait_for(timeout=120_000)
        first, second = views.nth(0), views.nth(1)
        assert first.locator("svg.mha-map .mha-scale").count() == 1
        assert "4 heads × d_head = 6" in first.locator(".mha-message").inner_text()
        first.locator("[name='head']").fill("2")
        assert "showing head 2" in first.locator(".mha-message").inner_text()
        first.locator(".mha-picture").focus()
        page.keyboard.press("ArrowDown")
        assert first.locator(".mha-readout").inner_text().startswith("Row 0 “The” (query) → column 0")
        assert second.locator("select[name=sentence] option").count() == 2
        box = page.locator(".jp-OutputArea input[placeholder='type a sentence, then press Enter']")
        box.fill("Where did the little bird go ?")
        box.press("Enter")
        second = page.locator(".jp-OutputArea .mha-view[data-ready='true']").nth(1)
        page.wait_for_function("() => [...document.querySelectorAll('.jp-OutputArea select[name=sentence] option')]"
                               ".some((o) => o.textContent.startsWith('Where did'))", timeout=60_000, polling=POLL)
        assert "L1H3" in second.locator(".mha-message").inner_text()
        second.locator("details.mha-details > summary").click()  # the table of numbers is written when opened
        assert "little" in second.locator("table.mha-numbers").text_content()
    finally:
        page.close()
    assert not problems, problems
