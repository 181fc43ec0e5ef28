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
from mha.pretrained.web_export import export_web_model
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
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        export_web_model(folder / "parts")
        (folder / "model.js").write_text(web_file("model.js"), encoding="utf-8")  # as the site serves it
        (folder / "bench.html").write_text(PAGE)
        node = node_times(folder / "parts", args.runs)
        simd, plain, from_disk, cancel = asyncio.run(chromium_times(folder, args.runs))
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
    if not same or "cancelled" not in cancel:
        raise SystemExit("the page's model misbehaved; see above")


if __name__ == "__main__":
    main()
