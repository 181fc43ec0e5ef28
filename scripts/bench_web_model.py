"""Time the page's model (model.js, joined from src/mha/views/web/model/) on a 20-token sentence, under Node and in
headless Chromium.

    python -m scripts.bench_web_model [--runs 20]

Exports the model into a temporary folder (mha.pretrained.web_export), then prints, for each place it runs, the
median and slowest forward pass over ``--runs`` runs (after one warm-up), the time to open the model, and the bytes
of .bin read for the first sentence (manifest, vocabulary, base, six layers and the word chunks its ids fall in).
In Chromium the page is served from a quiet local server and reads the parts with mhaModel.fetchReader; the same page
is then opened from file:// with mhaModel.scriptReader, which must give the same attention weights, and a load
cancelled half-way must reject with the cancellation message. Chromium's forward pass is timed for the WebAssembly
SIMD kernel and for the plain-JavaScript fallback.

Then a long text typed into a chapter-3 view as 3.1 opens it (the grid of every head), once the model has loaded:
about 300 tokens of real prose (Bleak House, from the book's LitBank extract; a different stretch each run), from
Enter to the first painted map (the view shows a long run a layer at a time, "typed-shown") and to the painted grid of
all 72 heads ("typed"), median of ``--typed-runs`` runs, on the laptop profile (1366 x 768) and the phone profile
(390 x 844, the CPU slowed 4 times, as scripts/bench_site_views.py).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path

if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.bench_web_model")
from mha.corpora.litbank import load_litbank
from mha.pretrained.tokenizer import load_tokenizer
from mha.pretrained.web_export import export_web_model
from mha.views.model_explorer import ModelHeadExplorer
from mha.views.payloads import encode_payload, site_payload
from mha.views.widget import web_file
from scripts.browser_harness import CHROMIUM_ARGS, find_chromium, served

SENTENCE = "The committee said on Tuesday that the new bridge would open to traffic early next spring here."

PAGE = """<!doctype html><meta charset="utf-8"><title>model bench</title>
<script src="model.js"></script>
<script>
async function bench(sentence, runs, simd, reader) {
  const read = reader === "script" ? mhaModel.scriptReader("parts/") : mhaModel.fetchReader("parts/");
  const opened = performance.now();
  const model = await mhaModel.open(read, {simd});
  const openMs = performance.now() - opened;
  const ids = model.tokenize(sentence).ids;
  const first = performance.now();
  const result = await model.run(ids);
  const firstMs = performance.now() - first;
  const times = [];
  for (let r = 0; r < runs; r++) {
    const start = performance.now();
    await model.run(ids);
    times.push(performance.now() - start);
  }
  return {backend: model.backend, openMs, firstMs, times, n: ids.length, bytes: model.bytesLoaded,
          attention: Array.from(result.attention.subarray(0, 2000))};
}
async function cancelled() {
  const controller = new AbortController();
  const opening = mhaModel.open(mhaModel.scriptReader("parts/"), {signal: controller.signal,
    onProgress: (p) => { if (p.loaded > 0) controller.abort(); }});
  try { await opening; return "not cancelled"; } catch (error) {
    return error.message + " | scripts left: " + document.querySelectorAll("script[src^='parts/']").length;
  }
}
</script>"""


PROSE_TOKENS = 300
PROFILES = {"laptop": ({"width": 1366, "height": 768}, 1), "phone": ({"width": 390, "height": 844}, 4)}
# From a typed text's submit to the frame painted after the view's first answer ("typed-shown", or "typed" for a text
# the view shows at once) and after its last ("typed"); root.timed collects {first, last} in ms.
TIME_TYPED = """(root) => { root.timed = [];
  root.addEventListener("submit", () => { root.started = performance.now(); root.firstAt = null; }, true);
  const painted = (then) => requestAnimationFrame(() => setTimeout(then, 0));
  root.addEventListener("mha-view-updated", (event) => {
    const at = root.started;
    if (event.detail.cause === "typed-shown") painted(() => { root.firstAt = performance.now() - at; });
    if (event.detail.cause === "typed") painted(() => {
      root.timed.push({first: root.firstAt === null ? performance.now() - at : root.firstAt,
                       last: performance.now() - at}); });
  }); }"""


def prose_texts(count: int) -> list[str]:
    """``count`` stretches of Bleak House's opening, each as many whole sentences as stay within PROSE_TOKENS tokens,
    the k-th starting at its k-th sentence."""
    tokenizer, sentences = load_tokenizer(), [" ".join(words) for words in load_litbank()[0].sentences]
    texts = []
    for start in range(count):
        text = sentences[start]
        for sentence in sentences[start + 1:]:
            if len(tokenizer(f"{text} {sentence}")["input_ids"]) > PROSE_TOKENS:
                break
            text = f"{text} {sentence}"
        texts.append(text)
    return texts


def write_lab_page(folder: Path) -> None:
    """A page of one chapter-3 view that opens on every head's map, as 3.1's does, with views.js and the model."""
    explorer = ModelHeadExplorer(["The cat sat on the mat .", "A dog barked ."], layer=0, head=2, opening="layers")
    for name in ("views.js", "views.css"):
        (folder / name).write_text(web_file(name), encoding="utf-8")
    (folder / "model").symlink_to(folder / "parts")
    (folder / "lab.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><link rel='stylesheet' href='views.css'></head><body>"
        "<div class='mha-view'><script type='application/octet-stream' class='mha-view-payload'>"
        f"{encode_payload(site_payload(explorer))}</script></div><script src='views.js'></script></body></html>")


async def typed_times(folder: Path, runs: int, profiles: list[str]) -> dict[str, list[dict]]:
    """Per profile, {first, last} ms of each of ``runs`` long texts typed into the lab page once the model has loaded
    (a short sentence typed first loads it)."""
    from playwright.async_api import async_playwright

    texts, times = prose_texts(runs), {}
    with served(folder) as address:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
            for profile in profiles:
                viewport, slow_down = PROFILES[profile]
                context = await browser.new_context(viewport=viewport)
                page = await context.new_page()
                if slow_down > 1:
                    await (await context.new_cdp_session(page)).send("Emulation.setCPUThrottlingRate",
                                                                     {"rate": slow_down})
                await page.goto(address + "lab.html")
                root = page.locator(".mha-view[data-ready=true]")
                await root.evaluate(TIME_TYPED)
                for step, text in enumerate([SENTENCE, *texts]):
                    await root.locator("input[name=typed]").fill(text)
                    await root.locator("input[name=typed]").press("Enter")
                    await page.wait_for_function("([r, k]) => r.timed.length > k", arg=[await root.element_handle(),
                                                 step], timeout=600_000)
                times[profile] = (await root.evaluate("(r) => r.timed"))[1:]
                await context.close()
            await browser.close()
    return times


def node_times(folder: Path, runs: int) -> dict:
    from website.model_in_node import run_model_in_node  # the site build's runner of model.js under Node

    with tempfile.TemporaryDirectory() as out:
        return run_model_in_node(folder, [{"text": SENTENCE, "run": True}], Path(out), time_runs=runs)


async def chromium_times(folder: Path, runs: int) -> tuple[dict, dict, dict, str]:
    from playwright.async_api import async_playwright

    with served(folder) as address:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
            page = await browser.new_page()
            await page.goto(address + "bench.html")
            simd = await page.evaluate("([s, r]) => bench(s, r, true, 'fetch')", [SENTENCE, runs])
            await page.reload()
            plain = await page.evaluate("([s, r]) => bench(s, r, false, 'fetch')", [SENTENCE, max(3, runs // 4)])
            await page.goto((folder / "bench.html").as_uri())
            from_disk = await page.evaluate("([s, r]) => bench(s, r, true, 'script')", [SENTENCE, 3])
            await page.reload()
            cancel = await page.evaluate("cancelled()")
            await browser.close()
    return simd, plain, from_disk, cancel


def line(place: str, times: list[float]) -> str:
    return f"{place:<34} median {statistics.median(times):7.1f} ms   slowest {max(times):7.1f} ms   ({len(times)} runs)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--typed-runs", type=int, default=5, help="long texts typed per profile")
    parser.add_argument("--profile", choices=[*PROFILES, "both"], default="both")
    args = parser.parse_args()
    profiles = list(PROFILES) if args.profile == "both" else [args.profile]
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        export_web_model(folder / "parts")
        (folder / "model.js").write_text(web_file("model.js"), encoding="utf-8")  # as the site serves it
        (folder / "bench.html").write_text(PAGE)
        node = node_times(folder / "parts", args.runs)
        simd, plain, from_disk, cancel = asyncio.run(chromium_times(folder, args.runs))
        write_lab_page(folder)
        typed = asyncio.run(typed_times(folder, args.typed_runs, profiles))
    print(f"sentence: {simd['n']} tokens")
    print(line(f"Node ({node['backend']})", node["times_ms"]))
    print(line(f"Chromium ({simd['backend']})", simd["times"]))
    print(line(f"Chromium ({plain['backend']})", plain["times"]))
    print(f"Chromium opens the model in {simd['openMs']:.0f} ms over http (fetch), {from_disk['openMs']:.0f} ms from "
          f"file:// (script tags); first run {simd['firstMs']:.0f} ms (its word chunks included)")
    print(f"bytes read for the first sentence: {simd['bytes']:,} (Node: {node['bytes_loaded']:,})")
    same = simd["attention"] == from_disk["attention"] == plain["attention"]
    print(f"file:// with script tags gives the same attention as http: {same}")
    print(f"a load cancelled half-way: {cancel}")
    for profile, timed in typed.items():
        print(line(f"{profile}: Enter to first map", [t["first"] for t in timed]) + f"  ~{PROSE_TOKENS} tokens")
        print(line(f"{profile}: Enter to all 72 maps", [t["last"] for t in timed]))
    if not same or "cancelled" not in cancel:
        raise SystemExit("the page's model misbehaved; see above")


if __name__ == "__main__":
    main()
