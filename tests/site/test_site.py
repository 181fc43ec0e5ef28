"""The website in a real browser, page by page as a reader meets it: every page loads files from the site itself and
nothing from outside, throws no error, shows every formula typeset, carries a policy that stops an injected script,
weighs at most 3 MB, and has no serious accessibility problem on a laptop or a phone, in either colour mode; two pages
are opened straight from disk too.

Headless Chromium (Debian's ``chromium``, driven by Playwright) opens each page of the site that ``built_site``
(conftest.py) builds, served on 127.0.0.1; a request to any other host is recorded and aborted, so a page that
still needs a CDN fails here as it would for an offline reader. Each page opens as on a first visit (nothing
stored, nothing cached), once, in the ``visits`` fixture, a few at a time: what it loaded and did is read, then
axe-core checks it (tests/page_audit.py says how), then a script is injected; one test per page and check then reads
what its page did. A page with a problem leaves a screenshot in pytest's temporary folder, and its test names the
file.
"""

import asyncio
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import CHROMIUM_ARGS, POLL, load_script, offline_context, served, toc_pages
from page_audit import AXE, LAPTOP, MODES, PHONE, PHONE_MODE, Audit, audit, serious

WEIGHTS = load_script("page_weights")  # how a page's weight is counted, and the budget
SECONDS = 1000  # Playwright counts milliseconds
AT_ONCE = 3  # pages loading together: the browser then keeps both cores of a CI machine busy
PAGES = toc_pages()
# opened from disk too: the page with the most notation, and one with a bertviz view (require.js, d3, jQuery)
FROM_DISK = ["chapters/notation.html", "chapters/3_head_roles/3_coreference.html"]

# A fresh visit: the theme stores the reader's colour mode; a first visit has none
FIRST_VISIT = "try { localStorage.clear(); } catch (error) {}"
# Read once the page has loaded and MathJax has typeset it: every formula inside an mjx-container, no MathJax
# error, no TeX left in the text a reader sees (code may show TeX on purpose), whether bertviz drew its views,
READ_PAGE = r"""async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  const root = document.querySelector("article.bd-article") || document.body;
  const shown = (text) => text.trim().replace(/\s+/g, " ").slice(0, 80);
  const untypeset = [...root.querySelectorAll(".math")].filter((el) => !el.querySelector("mjx-container"))
    .map((el) => shown(el.textContent));
  const failed = [...root.querySelectorAll("mjx-merror, [data-mjx-error]")]
    .map((el) => el.getAttribute("data-mjx-error") || shown(el.textContent));
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {acceptNode: (node) =>
    node.parentElement.closest("pre, code, script, style, textarea, mjx-container, .highlight")
      ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
  const raw = [];
  while (walker.nextNode()) {
    const text = walker.currentNode.nodeValue;
    if (/\$\$|\\\(|\\\)|\\\[|\\\]|\\begin\{|\\(frac|text|mathrm|mathbf|sum|top)\b/.test(text)) raw.push(shown(text));
  }
  const cells = [...root.querySelectorAll(".cell")];
  const skippable = (cell) => getComputedStyle(cell).contentVisibility === "auto";
  return {typeset: root.querySelectorAll("mjx-container").length, untypeset, failed, raw,
          cells: [cells.filter((cell) => !cell.querySelector(".mha-view")).map(skippable),
                  cells.filter((cell) => cell.querySelector(".mha-view")).map(skippable)]};
}"""
# bertviz draws each view into its container once require.js has loaded d3 and jQuery
BERTVIZ_DRAWN = """() => [...document.querySelectorAll("[id^='bertviz-']")]
  .every((view) => view.querySelector("svg"))"""


# A script put into the page after it loaded, as an injection would: the page's Content-Security-Policy (written by
# website/content_policy.py) must stop it; returns the policy and whether the script ran
INJECT = """() => {
  const meta = document.querySelector('meta[http-equiv="Content-Security-Policy"]');
  window.mhaInjected = false;
  const script = document.createElement("script");
  script.textContent = "window.mhaInjected = true";
  document.head.append(script);
  return {policy: meta ? meta.content : null, ran: window.mhaInjected};
}"""


@dataclass
class Visit:
    """What one page did while it loaded."""

    problems: list[str] = field(default_factory=list)
    bytes_loaded: int = 0
    formulas: int = 0
    cells: list = field(default_factory=list)  # [cells without a view, cells with one]: is each skipped off screen
    policy: str | None = None
    injected_ran: bool | None = None
    audits: dict[str, Audit] = field(default_factory=dict)  # colour mode -> what axe found (served pages only)


def some(problems, shown: int = 8) -> list[str]:
    """The first few of a kind of problem, and how many more there are."""
    problems = list(problems)
    return problems[:shown] + ([f"... and {len(problems) - shown} more like these"] if len(problems) > shown else [])


async def visit(context, site: str, url: str, screenshots: Path, axe: str | None,
                sampled: dict[str, set[str]]) -> Visit:
    """Open url in a new page, let it load, typeset and draw, weigh it, have axe check it (page_audit.audit, unless
    ``axe`` is None), inject a script, and return what went wrong."""
    seen, outside, errors, broken = Visit(), [], [], []
    page = await context.new_page()
    page.on("request", lambda request: None if request.url.startswith((site, "data:", "blob:"))
            else outside.append(request.url))
    injecting = []  # the refusal of the injected script is what the test wants, not a problem
    page.on("console", lambda message: errors.append(f"console error: {message.text} ({message.location})")
            if message.type == "error" and not (injecting and "inline script" in message.text
                                                and "Content Security Policy" in message.text)
            else None)
    page.on("pageerror", lambda error: errors.append(f"page error: {error}"))
    page.on("response", lambda response: broken.append(f"{response.status} {response.url}")
            if response.status >= 400 else None)
    from playwright.async_api import Error as PlaywrightError

    try:
        if url == site + "index.html":
            # the site's root sends the reader on to the landing page at once (a meta refresh), which may start before
            # the root's own load event: wait for the landing page, not for a load that the refresh can cut short
            await page.goto(url, wait_until="commit", timeout=30 * SECONDS)
            await page.wait_for_url(site + "chapters/index.html", wait_until="load", timeout=30 * SECONDS)
        else:
            await page.goto(url, wait_until="load", timeout=30 * SECONDS)
        read = await page.evaluate(READ_PAGE)
        seen.formulas, seen.cells = read["typeset"], read["cells"]
        seen.problems += some(f"formula not typeset: {text!r}" for text in read["untypeset"])
        seen.problems += some(f"MathJax error: {text!r}" for text in read["failed"])
        seen.problems += some(f"raw TeX in the text: {text!r}" for text in read["raw"])
        try:
            await page.wait_for_function(BERTVIZ_DRAWN, timeout=10 * SECONDS, polling=POLL)
        except PlaywrightError:
            seen.problems.append("a bertviz view was not drawn within 10 s")
        # its weight: everything it loaded, lazily loaded images included, as scripts/page_weights.py counts it
        await page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        try:
            await page.wait_for_load_state("networkidle", timeout=15 * SECONDS)
        except PlaywrightError:
            pass  # still loading on a busy machine: weigh what has come; test_every_page_... says if it is too much
        seen.bytes_loaded = sum(size for _, size in await page.evaluate(WEIGHTS.RESPONSES))
        if axe is not None:
            await page.evaluate("window.scrollTo(0, 0)")
            seen.audits = await audit(page, axe, sampled)
        injecting.append(True)
        injected = await page.evaluate(INJECT)
        await page.wait_for_timeout(50)  # the refusal's console message arrives after the script is refused
        seen.policy, seen.injected_ran = injected["policy"], injected["ran"]
    except PlaywrightError as error:
        seen.problems.append(f"the page did not load: {error}")
    seen.problems += some(f"requested from outside the site: {address}" for address in dict.fromkeys(outside))
    seen.problems += some(errors) + some(f"the site answered {line}" for line in broken)
    if seen.problems:
        screenshots.mkdir(parents=True, exist_ok=True)
        shot = screenshots / (re.sub(r"\W+", "_", url.split("://", 1)[1]).strip("_") + ".png")
        await page.screenshot(path=str(shot), full_page=True)
        seen.problems.append(f"screenshot: {shot}")
    await page.close()
    return seen


async def visit_all(chromium: str, targets: dict[str, tuple[str, str]], screenshots: Path,
                    audited: set[str]) -> dict[str, Visit]:
    """Visit each target (name -> (site, url)), AT_ONCE at a time, in one browser whose requests to anywhere but
    the page's own site are aborted; axe checks the pages of the sites in ``audited``."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        sites = {site for site, _ in targets.values()}
        # a laptop's screen in the light mode, which the accessibility checks start from
        contexts = {site: await offline_context(browser, site, viewport=LAPTOP, color_scheme="light")
                    for site in sites}
        for context in contexts.values():
            await context.add_init_script(FIRST_VISIT)
        slots = asyncio.Semaphore(AT_ONCE)
        axe = AXE.read_text(encoding="utf-8")
        sampled = {mode: set() for mode in MODES}  # the kinds of code block whose token colours were checked

        async def one(site, url):
            async with slots:
                return await visit(contexts[site], site, url, screenshots, axe if site in audited else None, sampled)

        visits = await asyncio.gather(*(one(site, url) for site, url in targets.values()))
        await browser.close()
    return dict(zip(targets, visits, strict=True))


@pytest.fixture(scope="module")
def visits(built_site, site_address, tmp_path_factory, chromium) -> dict[str, Visit]:
    """Every page served over http (named by its path), and the FROM_DISK pages opened as files ("file:" + path)."""
    on_disk = built_site.as_uri() + "/"
    targets = {path: (site_address, site_address + path) for path in PAGES}
    targets |= {f"file:{path}": (on_disk, on_disk + path) for path in FROM_DISK}
    assert AXE.exists(), "axe-core is missing from node_modules/: run `npm ci` (make book does)"
    return asyncio.run(visit_all(chromium, targets, tmp_path_factory.mktemp("site-screenshots"), {site_address}))


def test_every_page_of_the_site_is_visited(built_site):
    built = sorted(str(page.relative_to(built_site)) for page in built_site.rglob("*.html")
                   if not page.relative_to(built_site).parts[0].startswith("_"))
    assert built == sorted(PAGES), "the site's pages and the pages test_site.py opens differ: update toc_pages()"


@pytest.mark.parametrize("path", PAGES)
def test_page_loads_only_from_the_site_without_errors_and_typesets_its_formulas(visits, path, record_property):
    seen = visits[path]
    record_property("bytes_loaded", seen.bytes_loaded)
    assert not seen.problems, f"{path}:\n" + "\n".join(seen.problems)
    assert seen.bytes_loaded > 0, "the page's weight was not measured"


@pytest.mark.parametrize("path", [*PAGES, *(f"file:{path}" for path in FROM_DISK)])
def test_page_carries_a_content_security_policy_that_stops_an_injected_script(visits, path):
    """Only the site's own scripts run: the policy names no outside host and no 'unsafe-inline', and a script put into
    the page after it loaded does not run (served, and from disk, where only a meta tag can carry a policy)."""
    seen = visits[path]
    assert seen.policy, f"{path} has no Content-Security-Policy"
    directives = dict(part.strip().split(" ", 1) for part in seen.policy.split(";"))
    assert directives["object-src"] == "'none'" and directives["base-uri"] == "'none'", seen.policy
    assert "'unsafe-inline'" not in directives["script-src"] and "'unsafe-eval'" not in directives["script-src"]
    assert not re.search(r"https?:|\*", directives["script-src"]), directives["script-src"]
    assert seen.injected_ran is False, f"{path}: a script injected after loading ran"


# A script named by an address outside the site: a <script src>, sphinx-thebe's THEBE_JS_URL, a script element's src
# set in code, a dynamic import or a worker's importScripts
OUTSIDE_SCRIPT = re.compile(r"""<script\b[^>]*\bsrc\s*=\s*["']?(?:https?:)?//|THEBE_JS_URL\s*=\s*["'](?:https?:)?//"""
                            r"""|\.src\s*=\s*["'](?:https?:)?//|\bimport\s*\(\s*["'](?:https?:)?//"""
                            r"""|importScripts\(\s*["'](?:https?:)?//""", re.IGNORECASE)


# Every match of OUTSIDE_SCRIPT begins with one of these (lower-cased); a text without any cannot match, and the
# model's parts (megabytes of base64 in classic scripts) are passed over at the speed of a substring search
OUTSIDE_SCRIPT_STARTS = ("<script", "thebe_js_url", ".src", "import")


def outside_scripts(text: str) -> list[re.Match]:
    """OUTSIDE_SCRIPT's matches in text, searched only in texts holding one of the words a match begins with."""
    lowered = text.lower()
    return list(OUTSIDE_SCRIPT.finditer(text)) if any(start in lowered for start in OUTSIDE_SCRIPT_STARTS) else []


def test_no_page_or_site_script_names_an_outside_script(built_site):
    """Even a script the site never runs (the theme's Thebe address) is not named: every page and every script the
    site ships are read as text, not only what a visit requests."""
    assert outside_scripts('<script>const THEBE_JS_URL = "https://unpkg.com/thebe@0.8.2/lib/index.js"</script>')
    assert [outside_scripts(f"x {case} y") != [] for case in ("<SCRIPT src='//cdn.example/a.js'>", "el.src = 'https://a.b/c.js'",
            "import('https://a.b/c.js')", "importScripts('//a.b/c.js')")] == [True] * 4
    files = [path for path in built_site.rglob("*") if path.suffix in (".html", ".js")
             and "_sources" not in path.relative_to(built_site).parts]
    named = [f"{path.relative_to(built_site)}: {match.group(0)!r}" for path in files
             for match in outside_scripts(path.read_text(errors="replace"))]
    assert len(files) > 20 and named == [], "\n".join(named)


def test_the_root_page_names_the_books_icon(built_site):
    """The root page shows for a moment before it sends the reader on; without an icon of its own, the browser asks
    for /favicon.ico, which the site does not have, and logs a 404 (now and then, as the moment is long enough)."""
    root = (built_site / "index.html").read_text(encoding="utf-8")
    icon = re.search(r'<link rel="icon" href="([^"]+)"', root)
    assert icon and (built_site / icon.group(1)).is_file(), root[:600]


def test_cells_off_screen_wait_to_be_drawn_and_views_never_do(visits):
    """A notebook's cells are drawn only as the reader scrolls near them (website/theme.css), except those that hold a
    view, which must answer wherever the page is scrolled to."""
    plain, with_views = ([skipped for path in PAGES for skipped in visits[path].cells[kind]] for kind in (0, 1))
    assert len(plain) > 100 and all(plain), f"{plain.count(False)} of {len(plain)} cells are always drawn"
    assert len(with_views) >= 8 and not any(with_views), f"{sum(with_views)} cells with a view wait to be drawn"


@pytest.mark.parametrize("path", FROM_DISK)
def test_page_opened_from_disk_typesets_its_formulas(visits, path):
    """Opened as a file (file://), where a page may not fetch its own files: formulas and views still work."""
    seen = visits[f"file:{path}"]
    assert not seen.problems, f"{path} opened from disk:\n" + "\n".join(seen.problems)
    assert seen.formulas > 0, f"{path} opened from disk shows no typeset formula"


def test_every_page_weighs_at_most_3_mb(visits):
    """What each page loads on a first visit, in bytes of the files' bodies (printed with -s; by kind of file:
    python -m scripts.page_weights): the heaviest page stays within 3 MB."""
    weights = {path: visits[path].bytes_loaded for path in PAGES}
    print("\nbytes loaded by each page on a first visit:")
    for path, size in sorted(weights.items(), key=lambda item: -item[1]):
        print(f"  {size / 1e6:6.2f} MB  {path}")
    assert WEIGHTS.BUDGET == 3_000_000
    heavy = {path: f"{size / 1e6:.2f} MB" for path, size in weights.items() if size > WEIGHTS.BUDGET}
    assert not heavy, f"pages heavier than 3 MB (see the list above): {heavy}"


def test_the_offline_context_aborts_requests_outside_the_site_and_only_those(built_site, site_address, chromium):
    """The browser tests' context (conftest.offline_context) lets the site's own files through and stops a request to
    anywhere else, here another server on this machine that would answer it."""
    from playwright.async_api import async_playwright

    fetch = "(url) => fetch(url, {mode: 'no-cors'}).then(() => 'answered', () => 'stopped')"

    async def fetched(other: str) -> dict[str, str]:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            context = await offline_context(browser, site_address)
            page = await context.new_page()
            urls = (site_address + "index.html", other + "index.html")
            found = {url: await page.evaluate(fetch, url) for url in urls}
            await browser.close()
            return found

    with served(built_site) as other:
        found = asyncio.run(fetched(other))
    assert found == {site_address + "index.html": "answered", other + "index.html": "stopped"}, found


def audited(visits: dict[str, Visit], path: str, mode: str) -> Audit:
    """What axe found on a page in a colour mode; a page that did not load has no audit, and says why."""
    seen = visits[path]
    return seen.audits.get(mode) or Audit(mode=mode, problems=["not checked:", *seen.problems])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", PAGES)
def test_page_has_no_serious_accessibility_problem(visits, path, mode):
    seen = audited(visits, path, mode)
    assert not seen.problems, f"{path} ({mode}):\n" + "\n".join(seen.problems)
    assert "laptop" in seen.violations and ("phone" in seen.violations or mode != PHONE_MODE), \
        f"{path} ({mode}) was not checked at every size"
    problems = serious(seen)
    assert not problems, f"axe-core on {path} in the {mode} mode:\n" + "\n".join(problems)


TOKEN_CLASSES_AT_LEAST = 40  # the highlighter's stylesheet colours about 70 token classes; a sample with far fewer
# means the stylesheet was not read


@pytest.mark.parametrize("mode", MODES)
def test_every_kind_of_code_block_has_every_token_colour_checked(visits, mode):
    """Every kind of code block the site shows (background, text colour and font) had a sample of every token class
    its stylesheets colour checked for contrast in this colour mode (the page tests above find no problem in it)."""
    shown = {kind for path in PAGES for kind in audited(visits, path, mode).code_kinds}
    checked = {kind: classes for path in PAGES for kind, classes in audited(visits, path, mode).token_classes.items()}
    assert shown, f"no page shows a code block in the {mode} mode, so the code's colours were never checked"
    assert shown <= set(checked), \
        f"kinds of code block shown but not sampled in the {mode} mode: {shown - set(checked)}"
    assert min(checked.values()) >= TOKEN_CLASSES_AT_LEAST, \
        f"a token sample held fewer than {TOKEN_CLASSES_AT_LEAST} classes, or axe did not judge them: {checked}"


@pytest.mark.parametrize("path", PAGES)
def test_page_fits_a_phone_screen(visits, path):
    """No page pans sideways on a 390 px wide phone: a wide formula, table or map scrolls inside itself; no part of
    a view sticks out, and a view's text is at least 11 px."""
    seen = audited(visits, path, PHONE_MODE)
    assert not seen.problems, f"{path}:\n" + "\n".join(seen.problems)
    assert 0 < seen.phone_width <= PHONE["width"], \
        f"{path} is {seen.phone_width} px wide on a {PHONE['width']} px phone screen"
    views = seen.views_on_a_phone
    assert views.get("wide") == [], f"{path}: parts of a view stick out past a phone's screen: {views.get('wide')}"
    assert views.get("smallest") is None or views["smallest"] >= 12, \
        f"{path}: a view's text is {views['smallest']} px on a phone"


@pytest.mark.parametrize("opened", ["served", "from file://"])
def test_search_finds_a_word_offline_and_only_its_page_reads_the_index(built_site, site_address, chromium, opened):
    """search.html answers from the site's own index, served and from disk; a chapter's page does not load the index
    (website/templates/layout.html: the theme's search-as-you-type is off, so nothing there would read it)."""
    from playwright.sync_api import sync_playwright

    base = site_address if opened == "served" else built_site.as_uri() + "/"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        tab = browser.new_page()
        scripts = []
        tab.on("request", lambda request: scripts.append(request.url))
        tab.goto(base + "chapters/3_head_roles/5_induction_heads.html")
        assert not [url for url in scripts if url.endswith(("searchindex.js", "searchtools.js"))], scripts
        tab.goto(base + "search.html?q=induction")
        tab.wait_for_function("() => document.querySelectorAll('#search-results li').length > 0", timeout=60_000,
                              polling=POLL)
        found = tab.locator("#search-results li a").all_inner_texts()
        assert any("Induction" in title for title in found), found
        browser.close()
