"""The website in a real browser: every page loads files from the site itself and nothing from outside,
throws no error, and shows every formula typeset, whether served over http or opened straight from disk.

Headless Chromium (Debian's ``chromium``, driven by Playwright) opens each page of the site that ``built_site``
(conftest.py) builds, served on 127.0.0.1; a request to any other host is recorded and aborted, so a page that
still needs a CDN fails here as it would for an offline reader. Each page opens as on a first visit (nothing
stored, nothing cached). The pages load a few at a time, once, in the ``visits`` fixture; one test per page then
reads what its page did. A page with a problem leaves a screenshot in pytest's temporary folder, and its test
names the file.
"""

import asyncio
import functools
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import CHROMIUM_ARGS, QuietHandler, QuietServer, load_script, offline_context, toc_pages

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
  return {typeset: root.querySelectorAll("mjx-container").length, untypeset, failed, raw};
}"""
# bertviz draws each view into its container once require.js has loaded d3 and jQuery
BERTVIZ_DRAWN = """() => [...document.querySelectorAll("[id^='bertviz-']")]
  .every((view) => view.querySelector("svg"))"""


# A script put into the page after it loaded, as an injection would: the page's Content-Security-Policy (written by
# site/content_policy.py) must stop it; returns the policy and whether the script ran
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
    policy: str | None = None
    injected_ran: bool | None = None



def some(problems, shown: int = 8) -> list[str]:
    """The first few of a kind of problem, and how many more there are."""
    problems = list(problems)
    return problems[:shown] + ([f"... and {len(problems) - shown} more like these"] if len(problems) > shown else [])


async def visit(context, site: str, url: str, screenshots: Path) -> Visit:
    """Open url in a new page, let it load, typeset and draw, and return what went wrong."""
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
        await page.goto(url, wait_until="load", timeout=30 * SECONDS)
        if url == site + "index.html":  # the site's root redirects to the landing page
            await page.wait_for_url(site + "chapters/index.html", timeout=10 * SECONDS)
            await page.wait_for_load_state("load")
        read = await page.evaluate(READ_PAGE)
        seen.formulas = read["typeset"]
        seen.problems += some(f"formula not typeset: {text!r}" for text in read["untypeset"])
        seen.problems += some(f"MathJax error: {text!r}" for text in read["failed"])
        seen.problems += some(f"raw TeX in the text: {text!r}" for text in read["raw"])
        try:
            await page.wait_for_function(BERTVIZ_DRAWN, timeout=10 * SECONDS)
        except PlaywrightError:
            seen.problems.append("a bertviz view was not drawn within 10 s")
        # its weight: everything it loaded, lazily loaded images included, as scripts/page_weights.py counts it
        await page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        try:
            await page.wait_for_load_state("networkidle", timeout=15 * SECONDS)
        except PlaywrightError:
            pass  # still loading on a busy machine: weigh what has come; test_every_page_... says if it is too much
        seen.bytes_loaded = sum(size for _, size in await page.evaluate(WEIGHTS.RESPONSES))
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


async def visit_all(chromium: str, targets: dict[str, tuple[str, str]], screenshots: Path) -> dict[str, Visit]:
    """Visit each target (name -> (site, url)), AT_ONCE at a time, in one browser whose requests to anywhere but
    the page's own site are aborted."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        sites = {site for site, _ in targets.values()}
        contexts = {site: await offline_context(browser, site) for site in sites}
        for context in contexts.values():
            await context.add_init_script(FIRST_VISIT)
        slots = asyncio.Semaphore(AT_ONCE)

        async def one(site, url):
            async with slots:
                return await visit(contexts[site], site, url, screenshots)

        visits = await asyncio.gather(*(one(site, url) for site, url in targets.values()))
        await browser.close()
    return dict(zip(targets, visits))


@pytest.fixture(scope="module")
def visits(built_site, site_address, tmp_path_factory, chromium) -> dict[str, Visit]:
    """Every page served over http (named by its path), and the FROM_DISK pages opened as files ("file:" + path)."""
    on_disk = built_site.as_uri() + "/"
    targets = {path: (site_address, site_address + path) for path in PAGES}
    targets |= {f"file:{path}": (on_disk, on_disk + path) for path in FROM_DISK}
    return asyncio.run(visit_all(chromium, targets, tmp_path_factory.mktemp("site-screenshots")))


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


def test_no_page_or_site_script_names_an_outside_script(built_site):
    """Even a script the site never runs (the theme's Thebe address) is not named: every page and every script the
    site ships are read as text, not only what a visit requests."""
    assert OUTSIDE_SCRIPT.search('<script>const THEBE_JS_URL = "https://unpkg.com/thebe@0.8.2/lib/index.js"</script>')
    files = [path for path in built_site.rglob("*") if path.suffix in (".html", ".js")
             and "_sources" not in path.relative_to(built_site).parts]
    named = [f"{path.relative_to(built_site)}: {match.group(0)!r}" for path in files
             for match in OUTSIDE_SCRIPT.finditer(path.read_text(errors="replace"))]
    assert len(files) > 20 and named == [], "\n".join(named)


@pytest.mark.parametrize("path", FROM_DISK)
def test_page_opened_from_disk_typesets_its_formulas(visits, path):
    """Opened as a file (file://), where a page may not fetch its own files: formulas and views still work."""
    seen = visits[f"file:{path}"]
    assert not seen.problems, f"{path} opened from disk:\n" + "\n".join(seen.problems)
    assert seen.formulas > 0, f"{path} opened from disk shows no typeset formula"


def test_every_page_weighs_at_most_3_mb(visits):
    """What each page loads on a first visit, in bytes of the files' bodies (printed with -s; by kind of file:
    python scripts/page_weights.py): the heaviest page stays within 3 MB."""
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

    elsewhere = QuietServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(built_site)))
    threading.Thread(target=elsewhere.serve_forever, daemon=True).start()
    other = f"http://127.0.0.1:{elsewhere.server_address[1]}/"
    fetch = "(url) => fetch(url, {mode: 'no-cors'}).then(() => 'answered', () => 'stopped')"

    async def fetched() -> dict[str, str]:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            context = await offline_context(browser, site_address)
            page = await context.new_page()
            urls = (site_address + "index.html", other + "index.html")
            found = {url: await page.evaluate(fetch, url) for url in urls}
            await browser.close()
            return found

    try:
        found = asyncio.run(fetched())
    finally:
        elsewhere.shutdown()
        elsewhere.server_close()
    assert found == {site_address + "index.html": "answered", other + "index.html": "stopped"}, found
