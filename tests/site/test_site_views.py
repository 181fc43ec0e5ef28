"""Every view of the book works on the website, in a real browser, without a kernel.

The site that ``built_site`` (conftest.py) builds is served on 127.0.0.1, every request to another address refused
(sent to a proxy that refuses every connection) and reported, and opened in headless Chromium (Debian's
``chromium``, driven by Playwright). For every page that shows a view:

- each view is drawn, from files of the site alone, with no console or page error;
- moving each control, with the mouse's events or the keyboard, changes what is drawn, and what is drawn equals
  what the package itself gives for that setting: the view is rebuilt here from the recipe the page carries
  (``mha.views.payloads.view_from_recipe``) and its message, map title, labels and every number of its table
  are compared;
- the chapter-1 random-layer explorer computes its maps in the page: for several sentences (typed ones included)
  and head counts, the browser's weights equal ``mha.views.random_layer_explorer.head_attention_maps`` to 1e-5;
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
from conftest import CHROMIUM_ARGS, POLL, offline_proxy, served

from mha.views.heatmaps import weight_hundredths
from mha.views.payloads import view_from_recipe
from mha.views.random_layer_explorer import head_attention_maps

ROOT = Path(__file__).resolve().parents[2]
SECONDS = 1000  # Playwright counts milliseconds
HOSTILE = ["<img src=x onerror=alert(1)>", "</script><script>alert(1)</script>"]
# sentences for the in-page computation: the default, contractions, punctuation, accents, digits, one word
TYPED = ["The animal did not cross the street because it was too tired .",
         "It's a dog's life, isn't it?", "Café naïve: 3 émigrés met 12 señoras in São Paulo!", "Hello"]

# what a view shows, read in the page: message, map title, row and column labels, and every number of its table
READ_VIEW = """async (root) => {
  const details = root.querySelector("details.mha-details");
  if (details && !details.open) {  // the table is written when a reader opens it
    const opened = new Promise((resolve) => details.addEventListener("toggle", resolve, { once: true }));
    details.open = true;
    await opened;
  }
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


# Each view's updates, counted by cause on the view's root as it announces them ("mha-view-updated"); a sentence typed
# into a chapter-3 view counts as "typed" once the view has answered it (a map or a message).
COUNT_UPDATES = """document.addEventListener("mha-view-updated", (event) => {
  const seen = event.target.mhaUpdates || (event.target.mhaUpdates = {});
  seen[event.detail.cause] = (seen[event.detail.cause] || 0) + 1;
});"""
TYPED_COUNT = "(v) => (v.mhaUpdates || {}).typed || 0"


def pages_with_views() -> list[str]:
    """The pages that show a view: a notebook's output, or a page's own HTML, carries a placeholder for the site."""
    found = []
    for source in sorted([*(ROOT / "chapters").rglob("*.ipynb"), *(ROOT / "chapters").rglob("*.md")]):
        if "mha-view' data-mha-recipe" in source.read_text():
            found.append(str(source.relative_to(ROOT).with_suffix(".html")))
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
        launched = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Page:
    """A tab of the browser showing one page of the site, with what went wrong since that page opened."""

    def __init__(self, tabs: Tabs, site: str) -> None:
        self.tabs, self.site = tabs, site
        self.context = tabs.context(site)
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        self.added: list[tuple[str, object]] = []
        self.page.on("console", lambda message: self.problems.append(f"console error: {message.text}")
                     if message.type == "error" else None)
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on("request", lambda request: None if request.url.startswith((site, "data:", "blob:"))
                     else self.problems.append(f"requested from outside the site: {request.url}"))
        self.page.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))
        self.page.add_init_script(COUNT_UPDATES)

    def open(self, path: str, screenshots: Path) -> None:
        """Load ``path`` as a new document (even where only the part after # differs from the page shown)."""
        self.page.goto("about:blank")
        self.problems.clear()
        self.dialogs.clear()
        self.path, self.screenshots = path, screenshots
        self.page.goto(self.site + path, wait_until="load", timeout=30 * SECONDS)
        self.page.wait_for_function("() => [...document.querySelectorAll('.mha-view')].every((v) => v.dataset.ready)",
                                    timeout=20 * SECONDS, polling=POLL)
        self.views = self.page.locator(".mha-view")

    def on(self, event: str, handler) -> None:
        """Listen to the tab's ``event`` until the test gives the tab back."""
        self.page.on(event, handler)
        self.added.append((event, handler))

    def read(self, index: int) -> dict:
        return self.views.nth(index).evaluate(READ_VIEW)

    def address(self, index: int = 0) -> str:
        """The page's address once it holds view ``index``'s state: a view writes it just after its new frame is
        drawn, and its "Link to this view" at once; they must come to agree (within 30 s, for a busy machine)."""
        link = self.views.nth(index).locator("a.mha-link")
        self.page.wait_for_function("(link) => location.hash === link.getAttribute('href')",
                                    arg=link.element_handle(), timeout=30 * SECONDS, polling=POLL)
        return self.page.evaluate("location.hash")

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
        """Give the tab back, without the listeners and routes the test added, for the next test to open a page in."""
        if self in self.tabs.idle[self.site]:
            return
        for event, handler in self.added:
            self.page.remove_listener(event, handler)
        self.added.clear()
        self.page.unroute_all(behavior="ignoreErrors")
        self.tabs.idle[self.site].append(self)


class Tabs:
    """The module's browser contexts, one per site (served, or from disk), and their tabs that no test holds.

    Each page opens in a tab already open, in a context that keeps the browser's cache: the browser neither starts
    a context nor fetches every file of the theme again for each page. The contexts stay offline as every browser
    test's do (conftest.offline_proxy).
    """

    def __init__(self, browser) -> None:
        self.browser = browser
        self.contexts: dict[str, object] = {}
        self.idle: dict[str, list[Page]] = {}

    def context(self, site: str):
        if site not in self.contexts:
            self.contexts[site] = self.browser.new_context(viewport={"width": 1200, "height": 900},
                                                           proxy=offline_proxy(site))
            self.idle[site] = []
        return self.contexts[site]

    def borrow(self, site: str) -> Page:
        self.context(site)
        return self.idle[site].pop() if self.idle[site] else Page(self, site)

    def close(self) -> None:
        for context in self.contexts.values():
            context.close()


@pytest.fixture(scope="module")
def tabs(browser):
    opened = Tabs(browser)
    yield opened
    opened.close()


@pytest.fixture
def open_page(tabs, site_address, tmp_path_factory):
    """Open a page of the served site in a tab of its own; on a failing test, screenshots of its views are named in
    the failure."""
    opened = []
    screenshots = tmp_path_factory.mktemp("view-screenshots")

    def opener(path: str, site: str | None = None) -> Page:
        page = tabs.borrow(site or site_address)
        opened.append(page)
        page.open(path, screenshots)
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
            for control, position in zip(payload_controls, key.split("|"), strict=True)}


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


def test_the_tabs_reach_the_site_and_nothing_else(tabs, site_address, built_site):
    """The tabs' proxy (conftest.offline_proxy) lets the served site's pages through and refuses anywhere else, here
    another server on this machine that would answer; the request to it is reported as a problem too."""
    from playwright.sync_api import Error

    page = Page(tabs, site_address)  # a tab of its own, closed after: its last page is the browser's error page
    with served(built_site) as elsewhere:
        other = elsewhere + "chapters/notation.html"
        try:
            assert page.page.goto(site_address + "chapters/notation.html").ok
            page.problems.clear()
            with pytest.raises(Error, match="ERR_PROXY_CONNECTION_FAILED"):
                page.page.goto(other)
        finally:
            page.page.close()
    assert f"requested from outside the site: {other}" in page.problems, page.problems


TIMELINE = "chapters/3_head_roles/5_induction_heads.html"


@pytest.mark.parametrize("path", [path for path in PAGES if not path.startswith("chapters/1_") and path != TIMELINE])
def test_every_control_redraws_the_view_with_the_packages_numbers(open_page, path):
    page = open_page(path)

    def test():
        for index in range(page.views.count()):
            view = page.views.nth(index)
            recipe = view.get_attribute("data-mha-recipe")
            explorer = explorer_for(recipe)
            controls = payload_controls(page, index)
            open_one_map(view)
            assert_every_map_has_its_scale(page)
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


# --- what every attention view offers: scale, readout, grid, pairs, address, export, phone ---------------------

TOUR = "chapters/3_head_roles/1_tour_of_heads.html"
PAIRS = "chapters/3_head_roles/3_coreference.html"
READ_FIGURES = "(root) => root.mhaView.figures.map((f) => ({title: f.map.title, rows: f.map.rows, " \
               "columns: f.map.columns, hundredths: Array.from(f.map.hundredths), scale: f.map.scale}))"


def open_one_map(view) -> None:
    """A view that opens on its grid of every head: open the first map, as a reader would."""
    if view.locator(".mha-tile").count():
        view.locator(".mha-tile").first.click()


def package_view(page: Page, index: int = 0, **changes):
    """The package's own view for the page's view ``index`` at its current setting, with ``changes`` made."""
    view = page.views.nth(index)
    explorer = explorer_for(view.get_attribute("data-mha-recipe"))
    values = {**control_values(page, index, payload_controls(page, index)), **changes}
    return explorer.view_data(**explorer.site_arguments(values))


SCALES = """() => [...document.querySelectorAll('.mha-view svg.mha-map:not(.mha-curve)')].map((svg) => {
    const scale = svg.querySelector('.mha-scale');
    return scale ? [...scale.querySelectorAll('text')].map((t) => t.textContent) : null; })"""


def assert_every_map_has_its_scale(page: Page) -> None:
    """Each map on the page shows its colour scale, labelled 0, 0.5 and 1, named "weight"."""
    scales = page.page.evaluate(SCALES)
    assert scales, f"{page.path}: no map drawn"
    assert all(scale == ["1", "0.5", "0", "weight"] for scale in scales), f"{page.path}: {scales}"


@pytest.mark.parametrize("path", [CHAPTER_1, TIMELINE])  # the other pages: in the test of their controls
def test_every_map_shows_its_labelled_colour_scale(open_page, path):
    page = open_page(path)

    def test():
        for index in range(page.views.count()):
            open_one_map(page.views.nth(index))
        assert_every_map_has_its_scale(page)
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


def test_the_readout_reads_any_cell_by_keyboard_and_pointer(open_page):
    page = open_page(TOUR)
    view = page.views.first

    def test():
        open_one_map(view)
        expected = package_view(page).attention_map
        picture = view.locator(".mha-picture")
        picture.focus()
        for key in ["ArrowRight", "ArrowDown", "ArrowDown", "ArrowRight", "ArrowRight", "End", "ArrowUp"]:
            picture.press(key)
        row, column = 1, len(expected.key_labels) - 1  # (0, 0), then right, down twice, right twice, End, up
        readout = view.locator(".mha-readout").inner_text()
        weight = f"{weight_hundredths(expected.weights)[row, column] / 100:.2f}"
        assert f"Row {row} “{expected.query_labels[row]}”" in readout and readout.endswith(f": {weight}."), readout
        assert f"column {column} “{expected.key_labels[column]}”" in readout, readout
        lit = view.evaluate("(root) => [...root.querySelectorAll('svg .mha-lit')].map((t) => t.textContent)")
        assert lit == [expected.query_labels[row], expected.key_labels[column]], lit
        assert view.locator("svg .mha-bands").first.evaluate("(g) => g.style.display") == ""
        # a pointer (mouse or touch) on a cell reads that cell
        cells = view.locator("svg.mha-map .mha-cells canvas").first
        box = cells.bounding_box()
        n_rows, n_columns = len(expected.query_labels), len(expected.key_labels)
        cells.click(position={"x": (3 + 0.5) * box["width"] / n_columns, "y": (2 + 0.5) * box["height"] / n_rows})
        readout = view.locator(".mha-readout").inner_text()
        assert readout.startswith("Row 2 ") and "column 3 " in readout, readout
        assert readout.endswith(f": {weight_hundredths(expected.weights)[2, 3] / 100:.2f}."), readout
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


def test_the_grid_shows_every_head_of_a_layer_and_of_the_model_and_opens_one(open_page):
    page = open_page(TOUR)
    view = page.views.first

    def test():
        view.get_by_role("button", name="show every head of this layer at once").click()
        tiles = view.locator(".mha-tile")
        assert tiles.count() == 12
        titles = [tiles.nth(head).inner_text() for head in range(12)]
        assert titles == [package_view(page, head=head).attention_map.title for head in range(12)]
        # each tile's pixels are the package's weights on the palette: the part of the grid's one picture that the
        # tile's background shows, read back at one pixel per cell
        pixels = tiles.nth(7).locator(".mha-tile-map").evaluate("""async (shown) => {
            const style = getComputedStyle(shown);
            const picture = new Image();
            picture.src = style.backgroundImage.slice(5, -2);
            await picture.decode();
            const [shownWidth, shownHeight] = style.backgroundSize.split(" ").map(parseFloat);
            const [perX, perY] = [picture.naturalWidth / shownWidth, picture.naturalHeight / shownHeight];
            const top = -parseFloat(style.backgroundPositionY) * perY;
            const [width, height] = [shown.clientWidth * perX, shown.clientHeight * perY].map(Math.round);
            const canvas = document.createElement("canvas");
            [canvas.width, canvas.height] = [width, height];
            const context = canvas.getContext("2d");
            context.drawImage(picture, 0, Math.round(top), width, height, 0, 0, width, height);
            return Array.from(context.getImageData(0, 0, width, height).data);
        }""")
        palette = view.evaluate("(root) => root.mhaView.payload.palette")
        weights = weight_hundredths(package_view(page, head=7).attention_map.weights)
        expected = [palette[round(h / 100 * 255)][0] for h in weights.ravel()]
        found = ["#{:02x}{:02x}{:02x}".format(*pixels[i:i + 3]) for i in range(0, len(pixels), 4)]
        assert found == expected, "the grid's map of head 7 differs from the package's weights"
        view.get_by_role("button", name="show every head of every layer at once").click()
        assert tiles.count() == 72
        tiles.nth(5 * 12 + 9).focus()
        page.page.keyboard.press("Enter")  # opens layer 5, head 9
        assert tiles.count() == 0
        opened = control_values(page, 0, payload_controls(page, 0))
        assert (opened["layer"], opened["head"]) == (5, 9), opened
        assert_same_as_package(page.read(0), package_view(page), "the map opened from the grid")
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


def test_a_map_opened_from_the_grid_was_built_beforehand_and_comes_unfocused(open_page):
    # the first input of a view that opens on its grid is opening a map: its figure is built with the view, so the
    # click only recolours it; a figure kept from before the grid comes back without its focused cell
    page = open_page(TOUR)
    view = page.views.first

    def test():
        assert view.locator(".mha-tile").count() == 72
        page.page.evaluate("() => new Promise((done) => requestIdleCallback(() => setTimeout(done, 0)))")
        page.page.evaluate("""() => {
            window.svgsMade = 0;
            const made = document.createElementNS.bind(document);
            document.createElementNS = (space, name) => {
                if (name === "svg") window.svgsMade += 1;
                return made(space, name);
            };
        }""")
        view.locator(".mha-tile").nth(3).click()  # layer 0, head 3: same sentence, other head than the prepared one
        assert page.page.evaluate("() => window.svgsMade") == 0, "opening the map built a new figure"
        assert_same_as_package(page.read(0), package_view(page), "the map opened from the grid")
        picture = view.locator(".mha-picture")
        picture.focus()
        picture.press("ArrowRight")
        assert view.locator("svg .mha-bands").first.evaluate("(g) => g.style.display") == ""
        view.get_by_role("button", name="show every head of every layer at once").click()
        view.locator(".mha-tile").nth(12 + 2).click()  # layer 1, head 2
        assert page.page.evaluate("() => window.svgsMade") == 0, "the figure was not kept while the grid was shown"
        assert view.locator("svg .mha-bands").first.evaluate("(g) => g.style.display") == "none"
        assert_same_as_package(page.read(0), package_view(page), "the second map opened from the grid")
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


def test_a_minimal_pair_is_drawn_side_by_side_with_its_difference(open_page):
    page = open_page(PAIRS)
    view = page.views.first

    def test():
        controls = payload_controls(page, 0)
        sentences = next(control for control in controls if control["name"] == "sentence")["values"]
        first = control_values(page, 0, controls)["sentence"]
        second = next(s for s in sentences if s != first and len(s.split()) == len(first.split()))
        view.locator("select[name=compare]").select_option(str(sentences.index(second)))
        figures = view.evaluate(READ_FIGURES)
        assert len(figures) == 3, [figure["title"] for figure in figures]
        a = weight_hundredths(package_view(page).attention_map.weights).astype(int)
        b = weight_hundredths(package_view(page, sentence=second).attention_map.weights).astype(int)
        assert figures[0]["hundredths"] == a.ravel().tolist()
        assert figures[1]["hundredths"] == b.ravel().tolist()
        assert figures[2]["hundredths"] == (a - b).ravel().tolist(), "the difference is not first minus second"
        assert figures[2]["scale"]["kind"] == "difference"
        assert figures[2]["scale"]["limit"] >= np.abs(a - b).max()
        difference_scale = view.locator("svg.mha-map").nth(2).evaluate(
            "(svg) => [...svg.querySelectorAll('.mha-scale text')].map((text) => text.textContent)")
        assert difference_scale[-1] == "difference" and difference_scale[1] == "0", difference_scale
        # the readout gives all three values of the focused cell
        view.locator(".mha-picture").focus()
        page.page.keyboard.press("ArrowDown")
        readout = view.locator(".mha-readout").inner_text()
        assert "first: " in readout and "second: " in readout and "first − second: " in readout, readout
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


# Two frames after an input: how tall the view is (the page under it moves by as much as that changes), and how tall
# its picture's maps are
HELD = """(root) => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => {
  const picture = root.querySelector('.mha-picture');
  const maps = Math.max(...[...picture.children].map((child) => child.getBoundingClientRect().bottom))
    - picture.getBoundingClientRect().top;
  done([Math.round(root.getBoundingClientRect().height), Math.round(maps)]);
})))"""


def test_another_sentence_leaves_the_page_below_the_view_where_it_was(open_page):
    """Within one layout (one map, a comparison, a grid) a view keeps the tallest height it has had: on a phone, where
    each sentence's map is as wide as the screen and so as tall as its shape makes it, the page under the view stays
    where it was from one sentence to the next; a comparison takes more room, and closing it gives that room back."""
    page = open_page(TOUR)
    view = page.views.first

    def test():
        laptop = page.page.viewport_size
        page.page.set_viewport_size({"width": 390, "height": 844})
        open_one_map(view)
        menu = view.locator("select[name=sentence]")
        count = menu.locator("option").count()
        seen = []
        for index in [*range(count), *range(count)]:
            menu.select_option(index=index)
            seen.append(view.evaluate(HELD))
        heights, maps = [height for height, _ in seen], [height for _, height in seen]
        assert len(set(maps)) > 1, f"every sentence's map is as tall ({maps}): nothing to hold"
        assert heights == sorted(heights) and len(set(heights[count:])) == 1, \
            f"the view is {heights} px tall as its maps' heights go {maps}"
        compare = view.locator("select[name=compare]")
        compare.select_option(index=1)
        compared = view.evaluate(HELD)[0]
        compare.select_option(index=0)
        single_again, map_again = view.evaluate(HELD)
        assert compared > heights[-1] >= single_again, (compared, heights[-1], single_again)
        assert single_again - map_again < heights[-1] - min(maps), "closing the comparison left its room behind"
        assert not page.problems, "\n".join(page.problems)
        page.page.set_viewport_size(laptop)

    checked(page, test)


@pytest.mark.parametrize("where", ["served", "file"])
def test_the_address_holds_the_views_state_and_restores_it(open_page, built_site, where):
    site = None if where == "served" else built_site.as_uri() + "/"
    page = open_page(PAIRS, site=site)
    view = page.views.first

    def test():
        view.locator("[name='layer']").fill("4")
        view.locator("[name='head']").fill("6")
        view.locator("select[name=compare]").select_option("1")
        view.locator(".mha-picture").focus()
        for key in ["ArrowRight", "ArrowDown", "ArrowRight"]:
            page.page.keyboard.press(key)
        address = page.address()  # waits until it equals the view's link
        assert "layer=4" in address and "head=6" in address and "compare=1" in address and "cell=1.1" in address
        shown = page.read(0)
        readout = view.locator(".mha-readout").inner_text()
        again = open_page(PAIRS + address, site=site)
        restored = again.views.first
        assert again.read(0)["key"] == shown["key"] and again.read(0)["numbers"] == shown["numbers"]
        assert restored.locator(".mha-readout").inner_text() == readout
        assert restored.locator("svg.mha-map").count() == 3
        assert not again.problems, again.problems
        again.close()  # its tab opens the grid's address next
        # the grid is in the address too
        view.get_by_role("button", name="show every head of every layer at once").click()
        grid = open_page(PAIRS + page.address(), site=site)
        assert grid.views.first.locator(".mha-tile").count() == 72
        assert not page.problems + grid.problems

    checked(page, test)


HOSTILE_ADDRESSES = ["#view-1?layer=99&head=<img src=x onerror=alert(1)>&bogus=1",
                     "#view-1?head=%3Cscript%3Ealert(1)%3C%2Fscript%3E&cell=9999.1",
                     "#view-1?grid=" + "x" * 3000, "#view-1?%E0%A4%A", "#view-1?sentence=-1&word_level=2"]


@pytest.mark.parametrize("address", HOSTILE_ADDRESSES)
def test_a_crafted_address_gets_a_message_and_runs_nothing(open_page, address):
    page = open_page(PAIRS + address)
    view = page.views.first

    def test():
        assert view.get_attribute("data-ready") == "true"
        message = view.locator(".mha-address").inner_text()
        if address != "#view-1?%E0%A4%A":
            assert message.startswith("The address asked for something this view cannot show:"), message
        else:  # not valid percent-encoding: said, and the view's own state shown
            assert "percent-encoding" in message and "default setting is shown" in message, message
        assert view.locator("img").count() == 0 and view.locator("script").count() == 0
        assert page.read(0)["numbers"], "no map is drawn"
        assert page.dialogs == [] and not page.problems, page.dialogs + page.problems

    checked(page, test)


def test_the_map_exports_as_svg_png_and_csv(open_page):
    page = open_page(TOUR)
    view = page.views.first

    def test():
        import xml.etree.ElementTree as ElementTree

        assert view.get_by_role("button", name="download the map as SVG").is_disabled() == \
            (view.locator(".mha-tile").count() > 0), "a grid has no one map to download"
        open_one_map(view)
        shown = page.read(0)
        files = {}
        for format in ("SVG", "PNG", "CSV"):
            with page.page.expect_download() as download:
                view.get_by_role("button", name=f"download the map as {format}").click()
            files[format] = Path(download.value.path()).read_bytes()
            assert download.value.suggested_filename.endswith(f".{format.lower()}")
        svg = ElementTree.fromstring(files["SVG"])
        assert svg.tag.endswith("svg") and shown["title"] in files["SVG"].decode()
        assert files["PNG"].startswith(b"\x89PNG\r\n\x1a\n") and len(files["PNG"]) > 2000
        lines = files["CSV"].decode().strip().split("\n")
        import csv
        rows = list(csv.reader(lines))
        assert rows[0][1:] == shown["columns"] and [row[0] for row in rows[1:]] == shown["rows"]
        assert [[float(value) for value in row[1:]] for row in rows[1:]] == \
            [[float(value) for value in row] for row in shown["numbers"]]
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


def test_a_payload_that_fails_its_schema_gets_a_message(open_page):
    from mha.views.payloads import encode_payload

    page = open_page(TOUR)

    def test():
        good = page.views.first.evaluate("(root) => root.mhaView.payload.palette")
        for broken, problem in [({"version": 1, "kind": "table"}, "lacks"),
                                ({"version": 2, "kind": "table", "guidance": {"try": "", "notice": ""},
                                  "axes": {"key": "", "query": ""}, "palette": good[:3]}, "too few items"),
                                ({"version": 2, "kind": "sheep", "guidance": {"try": "", "notice": ""},
                                  "axes": {"key": "", "query": ""}, "palette": good}, "not one of")]:
            encoded = encode_payload(broken)
            result = page.page.evaluate("""async (encoded) => {
                const root = document.createElement('div'); document.body.append(root);
                await mhaViews.open(root, encoded);
                const answer = [root.dataset.ready, root.innerText]; root.remove(); return answer; }""", encoded)
            assert result[0] == "failed" and "Cannot draw this:" in result[1] and problem in result[1], result
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


TAMPERED_HTML = ['<img src=x onerror="alert(1)">', '<script>alert(2)</script>',
                 '<a href="javascript:alert(3)">link</a>',
                 '<b onclick="alert(4)" style="background:url(http://example.com/x.png)">bold</b>',
                 '<svg><image href="http://example.com/y.png"/>'
                 '<text x="1" onmouseover="alert(5)">svg text</text></svg>']

INLINE_HANDLER_BLOCKED = re.compile(r"^console error: Executing inline event handler violates the following "
                                    r"Content Security Policy directive 'script-src .*The action has been blocked\.$")


def test_a_tampered_payload_runs_nothing_and_loads_nothing(open_page, built_site):
    """A payload edited to carry markup in its messages: the view keeps the package's elements, drops the rest."""
    from mha.views.payloads import decode_payload, encode_payload

    page = open_page(TOUR)

    def test():
        encoded = re.search(r"class='mha-view-payload'>([^<]*)<", (built_site / TOUR).read_text()).group(1)
        payload = decode_payload(encoded)
        for drawn in payload["drawn"]:  # whichever the view opens on
            payload["strings"][drawn["message"]] = "kept <code>code</code> " + " ".join(TAMPERED_HTML)
        shown = page.page.evaluate("""async (encoded) => {
            const root = document.createElement('div'); document.body.append(root);
            await mhaViews.open(root, encoded);
            const message = root.querySelector('.mha-message');
            return {ready: root.dataset.ready, text: message.textContent,
                    elements: [...message.querySelectorAll('*')].map((e) => e.localName),
                    attributes: [...message.querySelectorAll('*')]
                        .flatMap((e) => [...e.attributes].map((a) => a.name))};
        }""", encode_payload(payload))
        assert shown["ready"] == "true", shown
        assert "kept code" in shown["text"] and "bold" in shown["text"] and "svg text" in shown["text"], shown
        assert set(shown["elements"]) <= {"code", "b", "svg", "text"}, shown["elements"]
        assert not {"onerror", "onclick", "onmouseover", "href", "src", "style"} & set(shown["attributes"]), shown
        page.page.wait_for_timeout(300)  # an image or a handler would have fired by now
        # Newer Chromium reports each inline handler that its HTML parser meets, even in a template's inert content
        # (the browser's own Element.setHTML does the same), as the page's policy blocking it: the second wall
        # (website/content_policy.py) held. Nothing else may be reported: no request, no error, no dialog.
        others = [problem for problem in page.problems if not INLINE_HANDLER_BLOCKED.search(problem)]
        assert not page.dialogs and not others, (page.dialogs, others)

    checked(page, test)


def test_the_training_timeline_scrubs_the_run_and_matches_its_checkpoints(open_page):
    """Each frame's maps equal the stored checkpoint of that step, run here on the same sequence (to a hundredth)."""
    import torch

    from mha.lab.checkpoints import load_checkpoint

    page = open_page(TIMELINE)
    view = page.views.first

    def test():
        payload = view.evaluate("(root) => ({steps: root.mhaView.payload.steps, sequences: root.mhaView.payload"
                                ".sequences.map((s) => s.tokens), phase: root.mhaView.payload.phase_change.step})")
        assert view.locator(".mha-tile").count() == 8, "the timeline opens on every head of the model"
        for step in (0, 2900, 5000):
            view.locator("[name='step']").fill(str(payload["steps"].index(step)))
            view.locator("select[name=sequence]").select_option("2")
            assert f"step {step:,} of 5,000" in view.locator(".mha-message").inner_text()
            name = f"induction_2layer_seed0_step{step:05d}" if step < 5000 else "induction_2layer_seed0"
            model, _ = load_checkpoint(name)
            with torch.no_grad():
                weights = model(torch.tensor([payload["sequences"][2]])).attention_weights  # per layer (1, heads, T, T)
            for layer, head in [(0, 1), (1, 2)]:
                shown = view.evaluate("(root, [l, h]) => Array.from(root.mhaView.mapAt({...root.mhaView.state, layer: "
                                      "l, head: h}).hundredths)", [layer, head])
                expected = weight_hundredths(weights[layer][0, head].numpy()).ravel()
                assert np.abs(np.array(shown) - expected).max() <= 1, f"step {step}, L{layer}H{head}"
        # the loss curve's cursor follows the step, and the phase change is marked where the run says
        cursor = float(view.locator(".mha-cursor").get_attribute("x1"))
        view.locator("[name='step']").fill("0")
        assert float(view.locator(".mha-cursor").get_attribute("x1")) < cursor
        assert f"phase change, step {payload['phase']}" in view.locator(".mha-curve").inner_html()
        # play moves through the frames on its own
        view.get_by_role("button", name="play training from this step").click()
        page.page.wait_for_function("(root) => root.mhaView.state.step >= 3", arg=view.element_handle(), polling=POLL)
        view.get_by_role("button", name="pause training").click()
        # a tile opens one head; the address names the recorded step
        view.locator(".mha-tile").nth(6).click()
        address = page.address()
        assert "layer=1" in address and "head=2" in address and re.search(r"step=\d+", address), address
        page.page.goto(page.page.url.split("#")[0] + "#view-1?step=2861")
        assert "step 2861 was not recorded" in view.locator(".mha-address").inner_text()
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


CLAIMS = ROOT / "chapters" / "claims.md"
VIEW_LINK = re.compile(r'href="([^"]+\.html)#(view-\d+\?[^"]*)"')


def claims_links() -> dict[str, list[tuple[str, str]]]:
    """Each claim of the claims page (its ## section, the overview table left out) -> the view links of its verdict
    (page, view state), from the page's source."""
    sections = re.split(r"^## ", CLAIMS.read_text(), flags=re.MULTILINE)[1:]
    return {section.split("\n", 1)[0]: VIEW_LINK.findall(section.split("*Verdict:*", 1)[-1])
            for section in sections if not section.startswith("At a glance")}


def test_every_verdict_of_the_claims_page_links_to_a_view_state():
    links = claims_links()
    assert len(links) >= 16, list(links)
    missing = [claim for claim, found in links.items() if not found]
    assert not missing, f"verdicts with no link to the view state that shows them: {missing}"


@pytest.mark.parametrize("target, state", sorted({link for found in claims_links().values() for link in found}))
def test_each_link_of_the_claims_page_opens_the_view_state_it_names(open_page, built_site, target, state):
    """The link is on the built page, and opens its view in the state the address names, with no complaint."""
    assert f'href="{target}#{state}"' in (built_site / "chapters" / "claims.html").read_text()
    address = f"chapters/{target}#{html.unescape(state)}"
    page = open_page(address)
    view = page.views.first

    def test():
        written = dict(part.split("=") for part in page.address().split("?", 1)[1].split("&"))
        complaint = view.locator(".mha-address").inner_text()
        assert complaint == "", f"{address}: {complaint}"
        asked = dict(part.split("=") for part in html.unescape(state).split("?", 1)[1].split("&"))
        assert asked.items() <= written.items(), f"{address}: the view shows {written}, not {asked}"
        assert not page.problems, page.problems

    checked(page, test)


# --- a sentence of the reader's own, run through all-MiniLM-L6-v2 in the page (model.js) ---------------------------

MODEL_FILES = "/_vendor/mha/model/"
TYPED_RUNS = "([v, n]) => ((v.mhaUpdates || {}).typed || 0) > n"  # v's typed sentences answered: more than n


def submit(page: Page, view, text: str) -> None:
    """Type ``text`` into the view's box and press Enter; wait until the view has answered (a map or a message)."""
    runs = view.evaluate(TYPED_COUNT)
    box = view.locator("input[name=typed]")
    box.fill(text)
    box.press("Enter")
    page.page.wait_for_function(TYPED_RUNS, arg=[view.element_handle(), runs], timeout=90 * SECONDS, polling=POLL)


def selected_sentence(view) -> str:
    return view.locator("select[name=sentence]").evaluate("(s) => s.options[s.selectedIndex].textContent")


def open_map(page: Page, view, layer: int, head: int) -> None:
    """Leave the grid (if the view shows it) and set the layer and head sliders."""
    if view.locator(".mha-tile").count():
        view.locator(".mha-tile").first.click()
    for name, value in (("layer", layer), ("head", head)):
        view.locator(f"input[name={name}]").fill(str(value))


def assert_model_map(page: Page, text: str, layer: int, head: int) -> None:
    """The map on show is the package's encoder on ``text``, token by token, every weight within one hundredth."""
    from mha.pretrained.encoder import MiniLMEncoder

    traced = MiniLMEncoder.load().trace(text).sentence()
    shown = page.read(0)
    assert shown["title"] == f"L{layer}H{head}", shown["title"]
    assert shown["rows"] == list(traced.tokens) and shown["columns"] == list(traced.tokens), shown["rows"]
    in_page = np.rint(np.array([[float(v) for v in row] for row in shown["numbers"]]) * 100)
    expected = weight_hundredths(traced.attention[layer, head])
    assert np.abs(in_page - expected).max() <= 1, "the page's model differs from the package's by more than 0.01"


def test_a_typed_sentence_runs_the_model_in_the_page_with_every_tool(open_page):
    page = open_page(TOUR)
    view = page.views.first
    model_bytes: list[int] = []
    page.on("requestfinished", lambda request: model_bytes.append(request.sizes()["responseBodySize"])
            if MODEL_FILES in request.url else None)

    def test():
        # the model's files as a first visit fetches them: another test may have left them in the tab's cache
        page.context.new_cdp_session(page.page).send("Network.clearBrowserCache")
        assert view.locator("input[name=typed]").count() == 1
        assert not model_bytes, "the model loaded with the page"
        submit(page, view, "   ")
        assert "the box is empty" in view.locator(".mha-message").inner_text()
        assert not model_bytes, "an empty box loaded the model"
        text = "The nurse said that she would call the doctor tomorrow ."
        submit(page, view, text)
        assert selected_sentence(view) == f"{text} (typed)"
        assert 0 < sum(model_bytes) <= 25e6, f"the first sentence downloaded {sum(model_bytes) / 1e6:.1f} MB"
        # 3.1's view opens on all 72 heads: the typed sentence's grid, then one map against the package
        assert view.locator(".mha-tile").count() == 72
        open_map(page, view, 3, 7)
        assert_model_map(page, text, 3, 7)
        address = page.address()
        assert "text=" in address and "The+nurse" in address, address
        # the head's scores on this sentence against the treebank's spread
        assert view.locator(".mha-scores tbody tr").count() == 4
        assert "L3H7 on this sentence (run in your page)" in view.locator(".mha-scores caption").inner_text()
        assert "within" in view.locator(".mha-fidelity").inner_text()
        # switch the head off: the view compares the sentence with and without it, from the next layer on
        view.get_by_role("button", name="Switch this head off").click()
        page.page.wait_for_function("(v) => v.mhaView.figures.length === 3", arg=view.element_handle(),
                                    timeout=30 * SECONDS, polling=POLL)
        assert "1 − cos" in view.locator(".mha-message").inner_text()
        assert "L4H7" in view.locator(".mha-map-title").first.text_content()
        assert "compare_off=3.7" in page.address()
        # typed HTML stays text; a sentence longer than a readable map is drawn as a window of it; one over the
        # model's 512 tokens is refused
        submit(page, view, HOSTILE[0] + " is here")
        assert selected_sentence(view).startswith(HOSTILE[0]) and not page.dialogs
        submit(page, view, " ".join(["word"] * 45))
        assert "47 rows and columns" in view.locator(".mha-message").inner_text()
        submit(page, view, "word " * 600)
        assert "602" in view.locator(".mha-message").inner_text() and "512" in view.locator(".mha-message").inner_text()
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


def test_a_typed_sentence_runs_from_disk_and_from_a_link(open_page, built_site):
    """From file:// the model's parts arrive as classic scripts; a link with text= runs the model on opening."""
    page = open_page(TOUR, site=built_site.as_uri() + "/")
    view = page.views.first

    def test():
        text = "Paris is the capital of France ."
        box = view.locator("input[name=typed]")
        box.fill(text)
        box.press("Enter")
        box.press("Enter")  # an impatient second Enter while the model loads: one run, one entry in the menu
        page.page.wait_for_function(TYPED_RUNS, arg=[view.element_handle(), 1], timeout=90 * SECONDS, polling=POLL)
        assert selected_sentence(view) == f"{text} (typed)"
        labels = view.locator("select[name=sentence] option").all_text_contents()
        assert labels.count(f"{text} (typed)") == 1, labels
        open_map(page, view, 0, 1)
        assert_model_map(page, text, 0, 1)
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)
    linked = open_page(TOUR + "#view-1?layer=2&head=5&text=A+short+linked+sentence+.")
    view = linked.views.first

    def test_link():
        linked.page.wait_for_function("(v) => v.querySelector('select[name=sentence]').selectedOptions[0]"
                                      ".textContent.endsWith('(typed)')", arg=view.element_handle(),
                                      timeout=90 * SECONDS, polling=POLL)
        assert_model_map(linked, "A short linked sentence .", 2, 5)
        assert not linked.problems, "\n".join(linked.problems)

    checked(linked, test_link)


def test_a_failed_or_cancelled_load_says_why_and_keeps_the_stored_sentences(open_page, built_site):
    page = open_page(TOUR)
    view = page.views.first
    held = []

    def tampered(route):  # the site's file with one byte flipped
        body = bytearray((built_site / "_vendor" / "mha" / "model" / "layer-2.bin").read_bytes())
        body[len(body) // 2] ^= 0xFF
        route.fulfill(body=bytes(body), content_type="application/octet-stream")

    def test():
        page.page.route("**/_vendor/mha/model/layer-2.bin", tampered)
        submit(page, view, "A sentence for a broken model .")
        message = view.locator(".mha-message").inner_text()
        assert "layer-2" in message and "stored sentences still work" in message, message
        page.page.unroute("**/_vendor/mha/model/layer-2.bin")
        # a download that fails on the way (the connection drops): said in plain words, with what to do
        page.page.route("**/_vendor/mha/model/layer-3.bin", lambda route: route.abort("connectionreset"))
        submit(page, view, "A sentence for a dropped connection .")
        message = view.locator(".mha-message").inner_text()
        assert message.startswith("Cannot draw this: could not download the model part “layer-3”") or \
            'could not download the model part "layer-3"' in message, message
        assert "connection" in message and "run the sentence again" in message, message
        page.page.unroute("**/_vendor/mha/model/layer-3.bin")
        # a load held up in the network, then cancelled
        page.page.route("**/_vendor/mha/model/layer-4.bin", lambda route: held.append(route))
        runs = view.evaluate(TYPED_COUNT)
        view.locator("input[name=typed]").fill("A sentence never run .")
        view.locator("input[name=typed]").press("Enter")
        page.page.wait_for_function("() => document.querySelector('.mha-loading progress').value > 0",
                                    timeout=60 * SECONDS, polling=POLL)
        assert "Loading the model" in view.locator(".mha-loading").inner_text()
        view.get_by_role("button", name="Cancel").click()
        page.page.wait_for_function(TYPED_RUNS, arg=[view.element_handle(), runs], timeout=30 * SECONDS, polling=POLL)
        cancelled = view.locator(".mha-message").inner_text()
        assert "cancelled, as asked" in cancelled and "load it again" in cancelled, cancelled
        assert "signal" not in cancelled, cancelled
        assert view.locator(".mha-loading").is_hidden()
        # the stored sentences still answer
        view.locator("select[name=sentence]").select_option(index=1)
        assert "Cannot" not in view.locator(".mha-message").inner_text()
        expected = ("layer-", "ERR_CONNECTION_RESET")  # the browser reports the parts it could not load
        assert not [p for p in page.problems if not any(part in p for part in expected)], "\n".join(page.problems)

    checked(page, test)


# --- on a reader's screen: the grid by layers, a phone, the home page, messages, exports at full precision ---------

PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1200, "height": 900}  # the tabs' own size (Tabs.context)

# The grid as laid out: each tile's top, each row label with its span, and the shared colour scale
GRID_LAYOUT = """(root) => {
  const box = (node) => { const r = node.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top,
    bottom: r.bottom}; };
  const legend = root.querySelector('.mha-legend');
  return {tiles: [...root.querySelectorAll('.mha-tile')].map((tile) => box(tile)),
          labels: [...root.querySelectorAll('.mha-grid-layer')]
            .map((label) => ({text: label.textContent, ...box(label)})),
          legend: legend && {texts: [...legend.querySelectorAll('text')].map((text) => text.textContent),
                             ...box(legend)},
          width: innerWidth};
}"""


@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_the_grid_of_every_head_has_one_row_per_layer_and_its_colour_scale_in_view(open_page, screen):
    """3.1's 72 heads: a row per layer, labelled with the layer, its 12 heads in order; the colour scale every tile
    shares is under the grid, inside the screen's width even where the grid scrolls sideways (a phone)."""
    page = open_page(TOUR)
    view = page.views.first

    def test():
        if screen == "phone":
            page.page.set_viewport_size(PHONE)
        try:
            shown = view.evaluate(GRID_LAYOUT)
        finally:
            page.page.set_viewport_size(LAPTOP)
        tiles = shown["tiles"]
        assert len(tiles) == 72 and [label["text"] for label in shown["labels"]] == [f"layer {n}" for n in range(6)]
        rows = [tiles[12 * layer:12 * (layer + 1)] for layer in range(6)]
        for layer, row in enumerate(rows):
            assert max(t["top"] for t in row) - min(t["top"] for t in row) < 1, f"layer {layer}'s heads are not one row"
            assert [t["left"] for t in row] == sorted(t["left"] for t in row), f"layer {layer}'s heads are out of order"
            label = shown["labels"][layer]
            assert label["right"] <= row[0]["left"] and row[0]["top"] <= label["top"] < row[0]["bottom"], \
                f"the label of layer {layer} is not at the start of its row"
        assert all(upper[0]["bottom"] <= lower[0]["top"] for upper, lower in zip(rows, rows[1:], strict=False)), \
            "rows overlap"
        legend = shown["legend"]
        assert legend and {"0", "0.5", "1"} <= set(legend["texts"]) and "weight" in " ".join(legend["texts"]), legend
        assert legend["top"] >= rows[-1][0]["bottom"], "the colour scale is not under the grid"
        assert 0 <= legend["left"] and legend["right"] <= shown["width"], f"the colour scale is off screen: {legend}"
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


# On a phone, everything a view shows: each map with its colour scale, each control's size, each text's size as drawn
# (an SVG's text scaled with its SVG)
ON_A_PHONE = """() => {
  const shown = (node) => node.getClientRects().length > 0;
  const views = [...document.querySelectorAll('.mha-view')];
  const maps = views.flatMap((v) => [...v.querySelectorAll('svg.mha-map:not(.mha-curve)')]).map((svg) => {
    const [map, scale] = [svg.getBoundingClientRect(), svg.querySelector('.mha-scale').getBoundingClientRect()];
    return {title: svg.querySelector('.mha-map-title').textContent, left: Math.min(map.left, scale.left),
            right: Math.max(map.right, scale.right)};
  });
  const controls = views.flatMap((v) => [...v.querySelectorAll('input, select, button, summary, a')]).filter(shown)
    .map((node) => { const r = node.getBoundingClientRect();
      return {what: `${node.localName}[${node.name || node.type || node.textContent.trim().slice(0, 20)}]`,
              height: r.height, width: r.width}; });
  const drawnSize = (node) => {
    const size = parseFloat(getComputedStyle(node).fontSize);
    const svg = node.closest('svg');
    if (!svg || !svg.viewBox.baseVal || !svg.viewBox.baseVal.width) return size;
    return size * svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  };
  const texts = views.flatMap((v) => [...v.querySelectorAll('*')]).filter((node) => shown(node)
      && [...node.childNodes].some((child) => child.nodeType === 3 && child.textContent.trim()))
    .map((node) => ({what: `${node.localName}: ${node.textContent.trim().slice(0, 30)}`, size: drawnSize(node)}));
  return {maps, controls, texts, width: innerWidth};
}"""


@pytest.mark.parametrize("path", PAGES)
def test_on_a_phone_every_map_and_scale_fits_and_controls_and_text_are_large_enough(open_page, path):
    """At 390 px: each map and its colour scale inside the screen, no sideways scroll needed to see both; every
    control at least 24 px tall and wide (WCAG 2.2's target size); every text at least 12 px as drawn."""
    page = open_page(path)

    def test():
        page.page.set_viewport_size(PHONE)
        try:
            page.page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
            grid = page.page.evaluate(ON_A_PHONE)  # a view that opens on its grid, as it opens
            for index in range(page.views.count()):
                open_one_map(page.views.nth(index))
            found = page.page.evaluate(ON_A_PHONE)
        finally:
            page.page.set_viewport_size(LAPTOP)
        assert found["maps"], f"{path}: no map drawn"
        off = [m for m in found["maps"] if m["left"] < 0 or m["right"] > found["width"] + 0.5]
        assert not off, f"{path}: maps or their colour scales reach past the {found['width']} px screen: {off}"
        small = [c for c in grid["controls"] + found["controls"] if c["height"] < 24 or c["width"] < 24]
        assert not small, f"{path}: controls under 24 px: {small[:6]}"
        tiny = [t for t in grid["texts"] + found["texts"] if t["size"] < 11.95]
        assert not tiny, f"{path}: text under 12 px: {tiny[:6]}"
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


HOME = "chapters/index.html"


@pytest.mark.parametrize("screen", ["laptop", "phone"])
def test_the_home_pages_view_starts_on_the_first_screen(open_page, screen):
    page = open_page(HOME)

    def test():
        page.page.set_viewport_size(PHONE if screen == "phone" else LAPTOP)
        try:
            top, height = page.page.evaluate("() => [document.querySelector('.mha-view').getBoundingClientRect().top "
                                             "+ scrollY, innerHeight]")
        finally:
            page.page.set_viewport_size(LAPTOP)
        assert top < height, f"the view starts {top:.0f} px down a {height} px screen"

    checked(page, test)


@pytest.mark.parametrize("address, said", [
    ("#view-1?head=%ZZ", "percent-encoding"),
    ("#view-7?head=2", "names view-7, but this page has one view"),
    ("#view-1head=3", "is not a view's address"),
    ("#view1?head=3", "is not a view's address"),
])
def test_an_address_no_view_can_read_says_what_is_wrong_and_that_the_default_is_shown(open_page, address, said):
    default = open_page(PAIRS)
    key = default.read(0)["key"]
    default.close()
    page = open_page(PAIRS + address)
    view = page.views.first

    def test():
        message = view.locator(".mha-address").inner_text()
        assert message.startswith("This view cannot read the address:") and said in message, message
        assert "default setting is shown" in message, message
        assert page.read(0)["key"] == key, "the view does not show its default setting"
        # a good address next: the complaint goes, and the view shows what it asks
        page.page.evaluate("() => { location.hash = '#view-1?head=3'; }")
        page.page.wait_for_function("(v) => v.querySelector('.mha-address').textContent === ''",
                                    arg=view.element_handle(), polling=POLL)
        assert control_values(page, 0, payload_controls(page, 0))["head"] == 3
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


def test_a_heading_link_is_not_taken_for_a_view_address(open_page):
    page = open_page(PAIRS + "#view-1?head=3")
    view = page.views.first

    def test():
        page.page.evaluate("() => { location.hash = '#viewing-the-maps'; }")
        page.page.wait_for_timeout(100)
        assert view.locator(".mha-address").inner_text() == ""
        assert not page.problems, "\n".join(page.problems)

    checked(page, test)


def csv_download(page: Page, view) -> list[list[str]]:
    import csv

    with page.page.expect_download() as download:
        view.get_by_role("button", name="download the map as CSV").click()
    return list(csv.reader(Path(download.value.path()).read_text().strip().split("\n")))


def test_the_csv_holds_the_maps_numbers_at_full_precision(open_page):
    """Chapter 1 computes its maps in the page: the CSV holds them as computed, within 1e-5 of the package's float32
    weights (not rounded to two decimals, which is 0.005 off at worst). A stored map's CSV holds its stored
    hundredths exactly."""
    page = open_page(CHAPTER_1)

    def test():
        view = page.views.first
        view.locator("[name='head']").fill("1")
        state = view.evaluate("(root) => root.mhaView.state")  # heads: the slider's index, one head fewer
        rows = csv_download(page, view)
        _, weights = head_attention_maps(state["sentence"], state["heads"] + 1)  # (heads, seq, seq)
        found = np.array([[float(value) for value in row[1:]] for row in rows[1:]])
        assert found.shape == weights[state["head"]].shape
        assert np.abs(found - weights[state["head"]]).max() <= 1e-5, "the CSV differs from the package's weights"
        assert np.abs(found - np.round(found, 2)).max() > 1e-4, "the CSV's numbers are rounded"
        stored = open_page(TOUR)
        open_one_map(stored.views.first)
        rows = csv_download(stored, stored.views.first)
        expected = weight_hundredths(package_view(stored).attention_map.weights)
        assert np.array_equal(np.array([[float(value) for value in row[1:]] for row in rows[1:]]), expected / 100)
        assert not page.problems + stored.problems

    checked(page, test)
