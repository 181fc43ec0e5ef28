"""What each page of the built site weighs in a real browser (the heaviest page stays within 3 MB).

    python -m scripts.page_weights [HTML_FOLDER]    # default _build/html (`make book` builds it)

serves the built site on 127.0.0.1, opens every page in headless Chromium (Debian's ``chromium``, driven by
Playwright) as on a first visit (a fresh browser context: nothing cached, nothing stored), lets it load everything
it will (until no request has been in flight for a second, then again after scrolling to its end, so that anything
loaded lazily counts), and prints a table of the bytes of every response the page received, as Chromium's Resource
Timing counts them (the page's HTML, and the CSS, scripts, fonts and images it loaded; the body as sent, which
`make serve` and this script send uncompressed), split by kind, heaviest page first. The site's index.html sends
the reader on to chapters/index.html, so its row weighs that page. Requests to anywhere but the site are aborted
and listed. Exits with status 1 when a page weighs more than BUDGET or asked for anything outside the site.
tests/site/test_site.py runs the same measurement on the site the tests build.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.page_weights")
from scripts.browser_harness import CHROMIUM_ARGS, find_chromium, served

ROOT = Path(__file__).resolve().parents[1]
BUDGET = 3_000_000  # bytes: the heaviest page stays within 3 MB
AT_ONCE = 4  # pages loading together
QUIET = 0.3  # seconds without a request in flight, after which a page has loaded all it will
SECONDS = 1000  # Playwright counts milliseconds
KINDS = ("html", "css", "js", "font", "image", "other")
# a file's name -> the column of the table it counts in
KIND_OF = {"html": re.compile(r".*\.html?|"), "css": re.compile(r".*\.css"), "js": re.compile(r".*\.js"),
           "font": re.compile(r".*\.(woff2?|ttf|otf|eot)"), "image": re.compile(r".*\.(png|jpe?g|gif|svg|webp|ico)")}
# every response the page received, as the browser counts it (Resource Timing): the page itself, then each file it
# loaded, with the bytes of its body as they came over the wire
RESPONSES = """() => [...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource")]
  .map((entry) => [entry.name, entry.encodedBodySize])"""


@dataclass
class Weight:
    """The bytes one page received, by kind, and the requests that carried them."""

    by_kind: Counter = field(default_factory=Counter)
    requests: int = 0
    outside: list[str] = field(default_factory=list)  # requests to anywhere but the site (aborted, so unweighed)

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())


def site_pages(html: Path) -> list[str]:
    """Every page of the built site: each .html file outside the folders Sphinx and the book keep assets in."""
    return sorted(str(page.relative_to(html).as_posix()) for page in html.rglob("*.html")
                  if not page.relative_to(html).parts[0].startswith("_"))


async def _settle(in_flight: set, quiet: float = QUIET, limit: float = 60) -> None:
    """Until no request has been in flight for `quiet` seconds: what a script loads after the load event (bertviz's
    views fetch d3 and jQuery through require.js) is weighed too."""
    loop = asyncio.get_running_loop()
    deadline = quiet_since = loop.time()
    deadline += limit
    while loop.time() < deadline:
        await asyncio.sleep(0.05)
        if in_flight:
            quiet_since = loop.time()
        elif loop.time() - quiet_since >= quiet:
            return


async def _weigh(browser, site: str, path: str) -> Weight:
    weight, in_flight = Weight(), set()
    context = await browser.new_context()  # a first visit: empty cache and storage
    await context.route(re.compile(f"^(?!{re.escape(site)}|data:|blob:)"), lambda route: route.abort())
    page = await context.new_page()

    def started(request):
        if request.url.startswith((site, "data:", "blob:")):
            in_flight.add(request)
        else:
            weight.outside.append(request.url)

    page.on("request", started)
    page.on("requestfinished", lambda request: in_flight.discard(request))
    page.on("requestfailed", lambda request: in_flight.discard(request))
    await page.goto(site + path, wait_until="load", timeout=60 * SECONDS)
    await _settle(in_flight)
    await page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")  # what loads lazily, loads
    await _settle(in_flight)
    for url, size in await page.evaluate(RESPONSES):
        weight.by_kind[_kind(url)] += size
        weight.requests += 1
    await context.close()
    return weight


def _kind(url: str) -> str:
    name = url.split("?")[0].split("#")[0].rsplit("/", 1)[-1].lower()
    return next((kind for kind, pattern in KIND_OF.items() if pattern.fullmatch(name)), "other")


async def _weigh_all(chromium: str, site: str, paths: list[str]) -> dict[str, Weight]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        slots = asyncio.Semaphore(AT_ONCE)

        async def one(path):
            async with slots:
                return await _weigh(browser, site, path)

        weights = await asyncio.gather(*(one(path) for path in paths))
        await browser.close()
    return dict(zip(paths, weights, strict=True))


def weigh(chromium: str, site: str, paths: list[str]) -> dict[str, Weight]:
    """Each page's weight: paths relative to site, the address the site is served at."""
    return asyncio.run(_weigh_all(chromium, site, paths))


def measure(html: Path, chromium: str) -> dict[str, Weight]:
    """Every page's weight, the built site (its html folder) served on 127.0.0.1."""
    with served(html) as site:
        return weigh(chromium, site, site_pages(html))


def table(weights: dict[str, Weight]) -> str:
    """A Markdown table of every page's weight in MB (10^6 bytes), heaviest first, with its split by kind."""
    rows = ["| page | total (MB) | " + " | ".join(KINDS) + " | requests |",
            "| --- | ---: | " + " | ".join("---:" for _ in KINDS) + " | ---: |"]
    for path, weight in sorted(weights.items(), key=lambda item: (-item[1].total, item[0])):
        rows.append(f"| {path} | {weight.total / 1e6:.2f} | "
                    + " | ".join(f"{weight.by_kind[kind] / 1e6:.3f}" for kind in KINDS) + f" | {weight.requests} |")
    heaviest = max(weights, key=lambda path: weights[path].total)
    rows.append(f"\nheaviest page: {heaviest}, {weights[heaviest].total / 1e6:.2f} MB "
                f"(budget {BUDGET / 1e6:g} MB); {len(weights)} pages")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html", nargs="?", type=Path, default=ROOT / "_build" / "html",
                        help="the built site (default: _build/html)")
    args = parser.parse_args()
    chromium = find_chromium()
    if chromium is None:
        sys.exit("Chromium is not installed: apt-get install -y chromium")
    if not (args.html / "index.html").exists():
        sys.exit(f"no built site in {args.html}: run `make book` first")
    weights = measure(args.html, chromium)
    print(table(weights))
    outside = sorted({url for weight in weights.values() for url in weight.outside})
    if outside:
        print("requested from outside the site (aborted, not weighed):", *outside, sep="\n  ")
    return 1 if max(weight.total for weight in weights.values()) > BUDGET or outside else 0


if __name__ == "__main__":
    sys.exit(main())
