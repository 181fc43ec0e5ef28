"""Time the page's trainer (trainer.js, joined from src/mha/views/web/trainer/) to a formed induction head, in
headless Chromium (chapter 3, "Induction heads").

    python -m scripts.bench_web_trainer [--seeds 0 1 2] [--profile laptop|phone|both] [--simd-only]

Serves a page that adds trainer.js (as a chapter page does when the reader presses train) and trains each seed with
mhaTrainer.train at the page's setting until a last-layer head's held-out prefix matching passes 0.5. Prints, per
profile (those of scripts/bench_site_views.py: a laptop at the machine's own speed, a phone with the CPU slowed 4
times), the formation step and the seconds to reach it for each seed (wall clock from pressing train, scoring
included, and the training time alone), their medians, the milliseconds per training step, the longest the page
went without yielding (a frame it could not paint) and how many Web Workers ran the batch's parts (one per part, at
most the machine's cores). The plain-JavaScript fallback is timed too on the laptop, unless --simd-only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.bench_web_trainer")
from mha.views.widget import web_file
from scripts.bench_site_views import PROFILES
from scripts.browser_harness import CHROMIUM_ARGS, find_chromium, offline_proxy, served

PAGE = """<!doctype html><meta charset="utf-8"><title>trainer bench</title>
<script>
function loadTrainer() {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = "trainer.js";
    script.onload = resolve;
    script.onerror = () => reject(new Error("trainer.js did not load"));
    document.head.appendChild(script);
  });
}
async function bench(seed, simd) {
  const pressed = performance.now();
  await loadTrainer();
  let longest = 0, last = performance.now(), beat = true;
  function tick() { const now = performance.now(); longest = Math.max(longest, now - last); last = now;
                    if (beat) setTimeout(tick, 0); }
  setTimeout(tick, 0);
  const result = await mhaTrainer.train({seed, simd});
  beat = false;
  return {backend: result.backend, formed: result.formed, step: result.formedStep, steps: result.steps,
          trainingSeconds: result.seconds, wallSeconds: (performance.now() - pressed) / 1000, longestGapMs: longest,
          workers: result.workers, workerProblem: result.workerProblem};
}
</script>
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--profile", choices=[*PROFILES, "both"], default="laptop")
    parser.add_argument("--simd-only", action="store_true", help="skip the plain-JavaScript fallback")
    args = parser.parse_args(argv)
    chromium = find_chromium()
    if chromium is None:
        sys.exit("Chromium is not installed: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    profiles = list(PROFILES) if args.profile == "both" else [args.profile]
    with tempfile.TemporaryDirectory() as folder, served(folder) as address, sync_playwright() as playwright:
        (Path(folder) / "trainer.js").write_text(web_file("trainer.js"), encoding="utf-8")
        (Path(folder) / "index.html").write_text(PAGE, encoding="utf-8")
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        print(f"{'profile':<7} {'backend':<9} {'seed':>4} {'step':>5} {'wall s':>7} {'train s':>8} {'ms/step':>8} "
              f"{'longest gap ms':>15} {'workers':>7}")
        for profile in profiles:
            viewport, slow_down = PROFILES[profile][:2]
            for simd in (True,) if args.simd_only or profile != "laptop" else (True, False):
                walls = []
                for seed in args.seeds:
                    context = browser.new_context(viewport=viewport, proxy=offline_proxy(address))
                    page = context.new_page()
                    if slow_down > 1:
                        context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": slow_down})
                    page.goto(address + "index.html")
                    result = page.evaluate("([seed, simd]) => bench(seed, simd)", [seed, simd])
                    context.close()
                    walls.append(result["wallSeconds"])
                    print(f"{profile:<7} {result['backend']:<9} {seed:>4} {result['step']!s:>5} "
                          f"{result['wallSeconds']:>7.1f} {result['trainingSeconds']:>8.1f} "
                          f"{1000 * result['trainingSeconds'] / max(result['steps'], 1):>8.1f} "
                          f"{result['longestGapMs']:>15.0f} {result['workers']:>7}", flush=True)
                    if result["workerProblem"]:
                        print(f"        the workers stopped: {result['workerProblem']}", flush=True)
                print(f"{profile:<7} median wall seconds to a formed head over seeds {args.seeds}: "
                      f"{statistics.median(walls):.1f}", flush=True)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
