"""How fast each view of the website answers its controls, in Chromium (issue 9): the budget is 50 ms per move.

Serves the built site (``make book`` writes it to _build/html) on 127.0.0.1, opens every page with a view in
Debian's Chromium, and moves each control of each view to each of up to ``--moves`` values. A view records, for
every move, the time from the input event to the next painted frame (``data-paint-ms``, set by site/views.js);
this prints the median and worst per view and exits with status 1 if a median is over the budget.

    python scripts/bench_site_views.py [--site _build/html] [--moves 8]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import shutil
import statistics
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET_MS = 50.0


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def moves_of(page, view, moves: int) -> list[float]:
    """Move every control of ``view`` to up to ``moves`` of its values; the paint time of each move, in ms."""
    times = []
    for element in view.locator("input, select").all():
        kind = element.evaluate("(e) => e.type")
        for step in range(moves):
            count = int(view.get_attribute("data-updates") or 0)
            if kind == "range":
                top = int(element.get_attribute("max"))
                element.fill(str((step + 1) % (top + 1)))
            elif kind == "select-one":
                options = element.locator("option").count()
                element.select_option(str((step + 1) % options))
            elif kind == "checkbox":
                element.click()
            else:  # the typed sentence of chapter 1
                element.fill(["The cat sat on the mat .", "It's a dog's life, isn't it?"][step % 2])
                element.press("Enter")
            page.wait_for_function("([v, n]) => Number(v.dataset.updates || 0) > n", arg=[view.element_handle(), count])
            times.append(float(view.get_attribute("data-paint-ms")))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", default=str(ROOT / "_build" / "html"))
    parser.add_argument("--moves", type=int, default=8)
    args = parser.parse_args()
    site = Path(args.site)
    pages = sorted(str(p.relative_to(site)) for p in site.glob("chapters/**/*.html") if "mha-view-payload" in p.read_text())
    if not pages:
        print(f"no page with a view under {site}: build the book first (make book)")
        return 1
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("needs Debian's chromium: apt-get install -y chromium")
        return 1
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"http://127.0.0.1:{server.server_address[1]}/"
    from playwright.sync_api import sync_playwright

    over = 0
    print(f"{'page, view':<58} {'moves':>5} {'median ms':>10} {'worst ms':>9}  within budget")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        context = browser.new_context()
        context.route(lambda url: not url.startswith((address, "data:", "blob:")), lambda route: route.abort())
        for path in pages:
            page = context.new_page()
            page.goto(address + path)
            page.wait_for_function("() => [...document.querySelectorAll('.mha-view')].every((v) => v.dataset.ready)")
            views = page.locator(".mha-view")
            for index in range(views.count()):
                times = moves_of(page, views.nth(index), args.moves)
                median, worst = statistics.median(times), max(times)
                ok = median <= BUDGET_MS
                over += not ok
                print(f"{path + f', view {index}':<58} {len(times):>5} {median:>10.1f} {worst:>9.1f}  "
                      f"{'yes' if ok else 'NO'}")
            page.close()
        browser.close()
    server.shutdown()
    print(f"budget: median move <= {BUDGET_MS:.0f} ms, from the input event to the painted frame; {over} over budget")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
