// Runs the page's model (model.js, joined by mha.views.widget from src/mha/views/web/model/) under Node: for the site
// build (website/view_payloads.py measures the page model's agreement with the package), tests/site/test_web_model.py
// and scripts/bench_web_model.py, all through website/model_in_node.py, which writes the joined model.js for it.
// node website/model_in_node.js MODEL_JS MODEL_FOLDER REQUEST.json OUT_FOLDER
// REQUEST: {"simd": true|false, "sentences": [{"text": ..., "removed": [[layer, head], ...], "run": true}],
//           "time_runs": 0}
// Writes OUT_FOLDER/results.json ({"backend", "open_error", "results": [{ids, tokens, wordIds, error, n}],
// "times_ms"}) and, for each sentence i that ran, i.attention.f32, i.hidden.f32, i.vector.f32 (raw float32).
"use strict";
const fs = require("fs");
const path = require("path");

async function main() {
  const [script, folder, requestPath, out] = process.argv.slice(2);
  require(path.resolve(script)); // sets globalThis.mhaModel
  const request = JSON.parse(fs.readFileSync(requestPath, "utf8"));
  const readPart = async (name) => new Uint8Array(fs.readFileSync(path.join(folder, name + ".bin")));
  const report = { backend: null, open_error: null, results: [], times_ms: [] };
  let model;
  try {
    model = await globalThis.mhaModel.open(readPart, { simd: request.simd !== false });
  } catch (error) {
    report.open_error = error.message;
    fs.writeFileSync(path.join(out, "results.json"), JSON.stringify(report));
    return;
  }
  report.backend = model.backend;
  for (const [index, sentence] of request.sentences.entries()) {
    const result = { error: null };
    try {
      Object.assign(result, model.tokenize(sentence.text));
      if (sentence.run !== false) {
        const ran = await model.run(result.ids, { removed: sentence.removed || [] });
        result.n = ran.n;
        for (const key of ["attention", "hidden"]) fs.writeFileSync(path.join(out, `${index}.${key}.f32`), ran[key]);
        fs.writeFileSync(path.join(out, `${index}.vector.f32`), ran.sentenceVector);
      }
    } catch (error) {
      result.error = error.message;
    }
    report.results.push(result);
  }
  if (request.time_runs) { // time the forward pass on the first sentence
    const ids = model.tokenize(request.sentences[0].text).ids;
    await model.run(ids);
    for (let r = 0; r < request.time_runs; r++) {
      const start = performance.now();
      await model.run(ids);
      report.times_ms.push(performance.now() - start);
    }
  }
  report.bytes_loaded = model.bytesLoaded;
  fs.writeFileSync(path.join(out, "results.json"), JSON.stringify(report));
}

main().catch((error) => { console.error(error); process.exit(1); });
