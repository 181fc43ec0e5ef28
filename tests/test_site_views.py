"""Every view of the book works on the website, in a real browser, without a kernel (issue 9).

The site that ``built_site`` (conftest.py) builds is served on 127.0.0.1, every request to another host aborted,
and opened in headless Chromium (Debian's ``chromium``, driven by Playwright). For every page that shows a view:

- each view is drawn, from files of the site alone, with no console or page error;
- moving each control, with the mouse's events or the keyboard, changes what is drawn, and what is drawn equals
  what the package itself gives for that setting: the view is rebuilt here from the recipe the page carries
  (``mha.views.static_form.view_from_recipe``) and its message, map title, labels and every number of its table
  are compared;
- the chapter-1 head explorer computes its maps in the page: for several sentences (typed ones included) and head
  counts, the browser's weights equal ``mha.views.head_explorer.head_attention_maps`` to 1e-5;
- text typed into a view is shown as text: markup never runs and opens no dialog.

A failing page leaves a screenshot of each of its views in pytest's temporary folder, named in the failure.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

from mha.views.head_explorer import head_attention_maps
from mha.views.heatmaps import weight_hundredths
from mha.views.static_form import view_from_recipe

ROOT = Path(__file__).resolve().parents[1]
SECONDS = 1000  # Playwright counts milliseconds
HOSTILE = ["<img src=x onerror=alert(1)>", "</script><script>alert(1)</script>"]
# sentences for the in-page computation: the default, contractions, punctuation, accents, digits, one word
TYPED = ["The animal did not cross the street because it was too tired .",
         "It's a dog's life, isn't it?", "Café naïve: 3 émigrés met 12 señoras in São Paulo!", "Hello"]

# what a view shows, read in the page: message, map title, row and column labels, and every number of its table
READ_VIEW = """(root) => {
  const table = root.querySelector("table.mha-numbers");
  const text = (node) => node ? node.innerText.replace(/\\s+/g, " ").trim() : "";
  return {
    message: text(root.querySelector(".mha-message")),
    picture: root.querySelector(".mha-picture").innerHTML + root.querySelector(".mha-message").innerHTML
      + (root.querySelector(".mha-panels") || {innerHTML: ""}).innerHTML,
    title: table ? table.querySelector("caption b").textContent : null,
    columns: table ? [...table.querySelectorAll("th.mha-key")].map((th) => th.textContent) : [],
    rows: table ? [...table.querySelectorAll("tr")].slice(1).map((tr) => tr.querySelector("th").textContent) : [],
    numbers: table ? [...table.querySelectorAll("tr")].slice(1)
      .map((tr) => [...tr.querySelectorAll("td")].map((td) => td.textContent)) : [],
    key: root.dataset.key || null,
  };
}"""


def pages_with_views() -> list[str]:
    """The pages whose notebooks display a view: each such output carries a placeholder for the site."""
    found = []
    for notebook in sorted((ROOT / "chapters").rglob("*.ipynb")):
        if "mha-view' data-mha-recipe" in notebook.read_text():
            found.append(str(notebook.relative_to(ROOT).with_suffix(".html")))
    return found


PAGES = pages_with_views()


def message_text(message_html: str) -> str:
    """A view's HTML message as the reader sees its text."""
    text = re.sub(r"<br\s*/?>", " ", message_html)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", text))).strip()


@pytest.fixture(scope="module")
def browser(chromium):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        yield launched
        launched.close()


class Page:
    """One page of the site, open in the browser, with what went wrong while it was open."""

    def __init__(self, browser, site: str, path: str, screenshots: Path) -> None:
        self.context = browser.new_context(viewport={"width": 1200, "height": 900})
        self.context.route(lambda url: not url.startswith((site, "data:", "blob:")), lambda route: route.abort())
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda message: self.problems.append(f"console error: {message.text}")
                     if message.type == "error" else None)
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on("request", lambda request: None if request.url.startswith((site, "data:", "blob:"))
                     else self.problems.append(f"requested from outside the site: {request.url}"))
        self.page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))
        self.path, self.screenshots = path, screenshots
        self.page.goto(site + path, wait_until="load", timeout=30 * SECONDS)
        self.page.wait_for_function("() => [...document.querySelectorAll('.mha-view')].every((v) => v.dataset.ready)",
                                    timeout=20 * SECONDS)
        self.views = self.page.locator(".mha-view")

    def read(self, index: int) -> dict:
        return self.views.nth(index).evaluate(READ_VIEW)

    def screenshot_views(self) -> list[str]:
        self.screenshots.mkdir(parents=True, exist_ok=True)
        shots = []
        for index in range(self.views.count()):
            name = re.sub(r"\W+", "_", self.path)
            shot = self.screenshots / f"{name}_view{index}.png"
            self.views.nth(index).screenshot(path=str(shot))
            shots.append(str(shot))
        return shots

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def open_page(browser, site_address, tmp_path_factory):
    """Open a page of the served site; on a failing test, screenshots of its views are named in the failure."""
    opened = []
    screenshots = tmp_path_factory.mktemp("view-screenshots")

    def opener(path: str, site: str | None = None) -> Page:
        page = Page(browser, site or site_address, path, screenshots)
        opened.append(page)
        return page

    yield opener
    for page in opened:
        page.close()


def checked(page: Page, test) -> None:
    """Run ``test``; if it fails, add screenshots of the page's views to the failure."""
    try:
        test()
    except AssertionError as failure:
        shots = page.screenshot_views()
        raise AssertionError(f"{failure}\nscreenshots of {page.path}'s views: {', '.join(shots)}") from None


_EXPLORERS: dict[str, object] = {}


def explorer_for(recipe_text: str):
    """The package's own view for a recipe, built once per test session."""
    if recipe_text not in _EXPLORERS:
        _EXPLORERS[recipe_text] = view_from_recipe(json.loads(recipe_text))
    return _EXPLORERS[recipe_text]


def assert_same_as_package(shown: dict, expected_view, where: str) -> None:
    """The page shows the package's message, and its map: title, labels and each weight to two decimals."""
    assert shown["message"] == message_text(expected_view.message), where
    drawn = expected_view.attention_map
    assert shown["title"] == drawn.title, where
    assert shown["rows"] == list(drawn.query_labels) and shown["columns"] == list(drawn.key_labels), where
    in_page = np.array([[float(value) for value in row] for row in shown["numbers"]])
    assert in_page.shape == drawn.weights.shape, where
    # exactly the package's hundredths, where the package's own weight is not within 1e-5 of a rounding boundary
    # (the page computes the chapter-1 maps in double precision, the package in float32)
    near_boundary = np.abs(drawn.weights * 100 - np.floor(drawn.weights * 100) - 0.5) < 1e-3
    exact = np.where(near_boundary, np.rint(in_page * 100), weight_hundredths(drawn.weights))
    assert np.array_equal(np.rint(in_page * 100), exact), f"{where}: the numbers differ from the package's"


def control_values(page: Page, index: int, payload_controls: list[dict]) -> dict:
    """The values the view's controls stand at, read from its key (each control's option index)."""
    key = page.read(index)["key"]
    return {control["name"]: control["values"][int(position)]
            for control, position in zip(payload_controls, key.split("|"))}


def payload_controls(page: Page, index: int) -> list[dict]:
    """The controls of a stored view, as the page built them: name, kind and values of each."""
    return page.views.nth(index).evaluate(
        "(root) => root.mhaView.payload.controls.map((c) => ({name: c.name, kind: c.kind, values: c.values}))")


def test_the_views_are_on_the_pages_the_book_says(built_site):
    """Every page with a view in its notebook has one in the site, and the chapter-1 and chapter-3 views are there."""
    assert len(PAGES) >= 7, PAGES
    for path in PAGES:
        page = (built_site / path).read_text()
        assert page.count("class='mha-view-payload'") == page.count("data-mha-recipe="), path
        assert "_vendor/mha/views.js" in page, path
    assert not any("_vendor/mha/views.js" in (built_site / path).read_text()
                   for path in ["chapters/notation.html", "chapters/2_geometry/1_subspaces_and_circuits.html"]), \
        "pages without a view load views.js"


@pytest.mark.parametrize("path", [path for path in PAGES if not path.startswith("chapters/1_")])
def test_every_control_redraws_the_view_with_the_packages_numbers(open_page, path):
    page = open_page(path)

    def test():
        for index in range(page.views.count()):
            view = page.views.nth(index)
            recipe = view.get_attribute("data-mha-recipe")
            explorer = explorer_for(recipe)
            controls = payload_controls(page, index)
            before = page.read(index)
            for control in controls:
                name = control["name"]
                element = view.locator(f"[name='{name}']")
                current = control_values(page, index, controls)[name]
                options = control["values"]
                target = options[-1] if options.index(current) != len(options) - 1 else options[0]
                where = f"{path}, view {index}, control {name!r} moved from {current!r} to {target!r}"
                if control["kind"] == "menu":
                    element.select_option(str(options.index(target)))
                elif control["kind"] == "checkbox":
                    element.set_checked(bool(target))
                else:
                    element.fill(str(options.index(target)))
                after = page.read(index)
                assert after["picture"] != before["picture"], f"{where}: nothing drawn changed"
                values = control_values(page, index, controls)
                expected = explorer.view_data(**explorer.site_arguments(values))
                assert_same_as_package(after, expected, where)
                before = after
            # from the keyboard: a slider steps with the arrow keys
            slider = view.locator("input[type=range]").first
            slider.focus()
            slider.press("Home")
            start = page.read(index)
            slider.press("ArrowRight")
            moved = page.read(index)
            assert moved["picture"] != start["picture"], f"{path}: the arrow key did not move the first slider"
            expected = explorer.view_data(**explorer.site_arguments(control_values(page, index, controls)))
            assert_same_as_package(moved, expected, f"{path}, view {index}, after the arrow key")
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


CHAPTER_1 = "chapters/1_mechanism/2_multi_head_attention.html"


def test_the_chapter_1_explorer_computes_the_packages_maps_in_the_page(open_page):
    page = open_page(CHAPTER_1)
    view = page.views.first

    def test():
        for sentence in TYPED:
            for heads in (1, 2, 3, 4, 6, 12):
                found = view.evaluate("(root, [s, h]) => root.mhaView.compute(s, h)", [sentence, heads])
                tokens, weights = head_attention_maps(sentence, heads)  # (heads, seq, seq)
                assert found["tokens"] == tokens, sentence
                difference = np.abs(np.array(found["weights"]) - weights).max()
                assert difference <= 1e-5, f"{sentence!r}, {heads} heads: the page differs by {difference:.2g}"
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


def test_the_chapter_1_explorer_answers_typing_and_every_control(open_page):
    page = open_page(CHAPTER_1)
    view = page.views.first
    explorer = explorer_for(view.get_attribute("data-mha-recipe"))

    def expect(sentence: str, heads: int, head: int, where: str) -> None:
        assert_same_as_package(page.read(0), explorer.view_data(sentence=sentence, heads=heads, head=head), where)

    def test():
        box, heads, head = (view.locator(f"[name='{name}']") for name in ("sentence", "heads", "head"))
        for sentence in TYPED[1:]:
            before = page.read(0)
            box.fill(sentence)
            box.press("Enter")
            assert page.read(0)["picture"] != before["picture"], f"typing {sentence!r} changed nothing"
            expect(sentence, 4, 0, f"typed {sentence!r}")
        heads.fill("5")  # 6 heads: the slider runs from 1 head (0) to 12 (11)
        head.fill("5")
        expect(TYPED[-1], 6, 5, "6 heads, head 5")
        last_good = page.read(0)
        heads.fill("4")  # 5 heads do not divide d_model = 24: refused, the last map stays
        refused = page.read(0)
        assert refused["message"].startswith("Cannot draw this:") and "not divisible" in refused["message"]
        assert refused["numbers"] == last_good["numbers"]
        heads.fill("1")  # 2 heads: the head shown is clamped to the last head
        expect(TYPED[-1], 2, 1, "2 heads after head 5 of 6")
        for hostile in HOSTILE:
            box.fill(hostile)
            box.press("Enter")
            shown = page.read(0)
            assert "<" in shown["message"], "the typed markup is not shown as text"
            assert view.locator("img").count() == 0 and view.locator("script").count() == 0
        assert page.dialogs == [], f"typed text ran: {page.dialogs}"
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


def test_a_view_works_opened_from_disk(open_page, built_site):
    """From file://, where a page cannot fetch its own files: the payload is in the page, and the view reacts."""
    page = open_page(CHAPTER_1, site=built_site.as_uri() + "/")

    def test():
        before = page.read(0)
        page.views.first.locator("[name='head']").fill("2")
        assert page.read(0)["picture"] != before["picture"]
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)
