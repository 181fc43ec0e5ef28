"""How fast each view of the website answers the reader, in Chromium, on a laptop and on a slowed phone.

Serves the built site (``make book`` writes it to _build/html) on 127.0.0.1, opens every page with a view in
Debian's Chromium, and on each view: moves every control (sliders, menus, checkboxes, the compare menu, typed text)
to up to ``--moves`` of its values, opens the grid of every head and one map from it, and moves the readout's focus
cell with the arrow keys. Each input is timed here, in the page, from its event to the frame painted after the view
announces that it has drawn it (views.js dispatches ``mha-view-updated`` on the view after each update; the
bench's own script, :data:`TIMING`, listens for both). Two profiles:

- laptop: a 1366 x 768 window at the machine's own speed; budget 50 ms median and 100 ms worst per input;
- phone: 390 x 844 with the CPU slowed 4 times (Chromium's CPU throttling); budget 200 ms worst per input;
- typed (laptop): on a view that runs the model in the page, six sentences of about 20 tokens typed in turn, from
  Enter (the form's submit event) to the frame painted after the view has answered (``mha-view-updated`` with
  cause "typed"); the first loads the model and is reported apart; budget 150 ms median for the others.

Prints the median and worst per view and profile, and exits with status 1 if any is over its budget.

    python -m scripts.bench_site_views [--site _build/html] [--moves 6] [--profile laptop|phone|both]
                                       [--page TEXT] [--each] [--repeats N]

``--page`` keeps the pages whose path contains TEXT; ``--each`` also prints every input's time. A wall-clock time
also counts whatever else the machine runs meanwhile: ``--repeats N`` opens each page N times, makes the same inputs
each time and keeps each input's shortest time (what the view itself costs, less the time lost to other work);
the machine's load average (``os.getloadavg``) is printed with each profile.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
from pathlib import Path

if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.bench_site_views")
from scripts.browser_harness import CHROMIUM_ARGS, find_chromium, offline_proxy, served

ROOT = Path(__file__).resolve().parents[1]
TYPED_BUDGET = 150.0  # ms, median from Enter to the painted map of a typed sentence, once the model has loaded
PROFILES = {  # name: (viewport, CPU slow-down, median budget ms, worst budget ms)
    "laptop": ({"width": 1366, "height": 768}, 1, 50.0, 100.0),
    "phone": ({"width": 390, "height": 844}, 4, 200.0, 200.0),
}


# Put into every page before its own scripts run. On a view armed by the bench (view.mhaTiming, see ARM), each input
# event inside the view starts the clock (the last one before the update is the one the view answered: it draws
# within that event's handler); a typed sentence's clock starts at its form's submit. When the view announces an
# update of the cause the bench waits for, the clock stops at the next painted frame (the first task after the
# animation frame), and the view's count of timed updates goes up by one.
TIMING = """(() => {
  const started = (event, cause) => {
    const view = event.target instanceof Element ? event.target.closest(".mha-view") : null;
    const timing = view && view.mhaTiming;
    if (timing && timing.cause === cause) timing.start = performance.now();
  };
  for (const type of ["input", "change", "click", "keydown"]) {
    document.addEventListener(type, (event) => started(event, "input"), true);
  }
  document.addEventListener("submit", (event) => started(event, "typed"), true);
  document.addEventListener("mha-view-updated", (event) => {
    const timing = event.target.mhaTiming;
    if (!timing || timing.start === null || event.detail.cause !== timing.cause) return;
    const start = timing.start;
    timing.start = null;
    requestAnimationFrame(() => setTimeout(() => {
      timing.ms = performance.now() - start;
      timing.count += 1;
    }, 0));
  });
})();"""
# Arm a view to time its next update of a cause ("input" or "typed"); returns how many it has timed so far.
ARM = """([view, cause]) => {
  const timing = view.mhaTiming || (view.mhaTiming = { count: 0, ms: null });
  Object.assign(timing, { cause, start: null });
  return timing.count;
}"""
TIMED = "([view, count]) => view.mhaTiming.count > count"


def _timed(page, view, act, cause: str = "input", timeout: float = 30_000) -> float:
    """Do ``act`` and wait for the view to paint; the time from the input event to the painted frame, in ms."""
    count = page.evaluate(ARM, [view.element_handle(), cause])
    act()
    page.wait_for_function(TIMED, arg=[view.element_handle(), count], timeout=timeout)
    return view.evaluate("(v) => v.mhaTiming.ms")


def inputs_of(page, view, moves: int) -> list[tuple[str, float]]:
    """Every input a reader makes on ``view``: its controls, the grid and the readout; (input, paint time in ms)."""
    times = []
    tiles = view.locator(".mha-tile")
    if tiles.count():  # a view that opens on its grid: open one map, then move the controls
        times.append(("open a map from the grid", _timed(page, view, tiles.first.click)))
    for element in view.locator(".mha-controls input, .mha-controls select, select[name=compare]").all():
        kind = element.evaluate("(e) => e.type")
        name = element.evaluate("(e) => e.name || e.getAttribute('aria-label') || e.type")
        for step in range(moves):
            if kind == "range":
                top = int(element.get_attribute("max"))
                act = functools.partial(element.fill, str((step + 1) % (top + 1)))
            elif kind == "select-one":
                options = element.locator("option").count()
                act = functools.partial(element.select_option, index=(step + 1) % options)
            elif kind == "checkbox":
                act = element.click
            else:  # the typed sentence of chapter 1
                def act(text=["The cat sat on the mat .", "It's a dog's life, isn't it?"][step % 2], element=element):
                    element.fill(text)
                    element.press("Enter")
            times.append((f"{name} {step + 1}", _timed(page, view, act)))
    compare = view.locator("select[name=compare]")
    if compare.count():
        compare.select_option(index=0)
    for name in ("show every head of every layer at once", "show every head of this layer at once"):
        grid = view.get_by_role("button", name=name)
        if grid.count():
            times.append((name.removeprefix("show "), _timed(page, view, grid.click)))
            if view.locator(".mha-tile").count():
                times.append(("open a map from the grid", _timed(page, view, view.locator(".mha-tile").last.click)))
    picture = view.locator(".mha-picture")
    picture.focus()
    for key in ["ArrowRight", "ArrowDown", "ArrowDown", "ArrowRight", "ArrowLeft", "ArrowUp"][:moves]:
        times.append((key, _timed(page, view, functools.partial(picture.press, key))))
    return times


TYPED_SENTENCES = [  # about 20 tokens each, [CLS] and [SEP] included
    "The old keys that my sister lost last week were under the kitchen table all along .",
    "A young doctor from the city hospital explained the results to the worried family .",
    "When the train finally arrived , the passengers rushed to find seats near the windows .",
    "The committee will announce its decision about the new library after the summer break .",
    "Our neighbours planted three apple trees in the garden behind their small brick house .",
    "She told him that the meeting had been moved to Thursday because of the storm .",
]


def typed_inputs(page, view) -> tuple[float, list[float]]:
    """A chapter-3 view's own sentences: the first (which loads the model) and then each from Enter to painted map."""
    box = view.locator("input[name=typed]")
    times = []
    for text in TYPED_SENTENCES:
        box.fill(text)
        times.append(_timed(page, view, functools.partial(box.press, "Enter"), cause="typed", timeout=120_000))
    return times[0], times[1:]


def shortest(passes) -> list[tuple[str, float]]:
    """Each input's shortest time over passes that made the same inputs in the same order; (input, ms)."""
    passes = list(passes)
    return [(name, min(each[position][1] for each in passes)) for position, (name, _) in enumerate(passes[0])]


def bench(chromium: str, address: str, pages: list[str], args) -> int:
    """Time every view of ``pages`` on the site served at ``address``, print a line per view and profile; returns how
    many are over their budget."""
    from playwright.sync_api import sync_playwright

    over = 0
    profiles = list(PROFILES) if args.profile == "both" else [args.profile]
    print(f"{'profile':<7} {'page, view':<56} {'inputs':>6} {'median ms':>10} {'worst ms':>9}  within budget")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        for profile in profiles:
            viewport, slow_down, median_budget, worst_budget = PROFILES[profile]
            context = browser.new_context(viewport=viewport, proxy=offline_proxy(address))
            context.add_init_script(TIMING)
            print(f"{profile}: load average {' '.join(f'{load:.1f}' for load in os.getloadavg())} "
                  f"({os.cpu_count()} CPUs)", flush=True)
            for path in pages:
                passes, typed = [], None
                for repeat in range(args.repeats):
                    page = context.new_page()
                    if slow_down > 1:
                        context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": slow_down})
                    page.goto(address + path)
                    page.wait_for_function(
                        "() => [...document.querySelectorAll('.mha-view')].every((v) => v.dataset.ready)"
                    )
                    views = page.locator(".mha-view")
                    passes.append([inputs_of(page, views.nth(index), args.moves) for index in range(views.count())])
                    if repeat == 0 and profile == "laptop":
                        typed = {index: typed_inputs(page, views.nth(index)) for index in range(views.count())
                                 if views.nth(index).locator("input[name=typed]").count()}
                    page.close()
                for index in range(len(passes[0])):
                    named = shortest(view_passes[index] for view_passes in passes)
                    times = [ms for _, ms in named]
                    median, worst = statistics.median(times), max(times)
                    slowest = max(named, key=lambda pair: pair[1])[0]
                    ok = median <= median_budget and worst <= worst_budget
                    over += not ok
                    print(f"{profile:<7} {path + f', view {index}':<56} {len(times):>6} {median:>10.1f} {worst:>9.1f}  "
                          f"{'yes' if ok else 'NO'}  (slowest: {slowest})", flush=True)
                    if args.each:
                        print("        " + ", ".join(f"{name}: {ms:.0f}" for name, ms in named), flush=True)
                    if typed and index in typed:
                        first, typed_times = typed[index]
                        typed_ok = statistics.median(typed_times) <= TYPED_BUDGET
                        over += not typed_ok
                        print(f"{'typed':<7} {path + f', view {index}':<56} {len(typed_times):>6} "
                              f"{statistics.median(typed_times):>10.1f} {max(typed_times):>9.1f}  "
                              f"{'yes' if typed_ok else 'NO'}  (first sentence, loading the model: {first:.0f} ms)",
                              flush=True)
            context.close()
        browser.close()
    return over


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", default=str(ROOT / "_build" / "html"))
    parser.add_argument("--moves", type=int, default=6)
    parser.add_argument("--profile", choices=[*PROFILES, "both"], default="both")
    parser.add_argument("--page", default="", help="only the pages whose path contains this text")
    parser.add_argument("--each", action="store_true", help="print every input's time too")
    parser.add_argument("--repeats", type=int, default=1, help="open each page this many times; keep each input's "
                        "shortest time")
    args = parser.parse_args()
    site = Path(args.site)
    pages = sorted(str(p.relative_to(site)) for p in site.glob("**/*.html")
                   if "_vendor" not in p.parts and "mha-view-payload" in p.read_text()
                   and args.page in str(p.relative_to(site)))
    if not pages:
        print(f"no page with a view under {site}: build the book first (make book)")
        return 1
    chromium = find_chromium()
    if chromium is None:
        print("needs Debian's chromium: apt-get install -y chromium")
        return 1
    with served(site) as address:
        over = bench(chromium, address, pages, args)
    print("budgets, from the input event to the painted frame: laptop median <= 50 ms and worst <= 100 ms; phone "
          f"(CPU slowed 4x) worst <= 200 ms; a typed sentence (laptop), median <= {TYPED_BUDGET:.0f} ms from Enter; "
          f"{over} over budget")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
