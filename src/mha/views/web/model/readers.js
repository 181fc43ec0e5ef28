// The two ways a page reads the model's parts: fetch (a served page) and script tags (a page opened from file://,
// where fetch is refused: each part NAME.js hands its bytes, as base64, to globalThis.mhaModelPart).

import { base64ToBytes } from "./bytes.js";
import { cancelled } from "./loading.js";

function withSlash(base) { base = base == null ? "" : String(base); return base && !/\/$/.test(base) ? base + "/" : base; }

export function fetchReader(baseUrl) {
  var base = withSlash(baseUrl);
  return function (name, signal) {
    var url = base + name + ".bin";
    return fetch(url, { signal: signal }).then(function (response) {
      if (!response.ok) throw new Error("could not load the model part \"" + name + "\" from " + url + ": HTTP " + response.status + ".");
      return response.arrayBuffer();
    }).then(function (buffer) { return new Uint8Array(buffer); });
  };
}

var waitingScripts = new Map(); // part name -> set of loads waiting for mhaModelPart(name, ...)
function receivePart(name, text) {
  var waiting = waitingScripts.get(name);
  if (!waiting) return;
  waitingScripts.delete(name);
  var bytes = base64ToBytes(text);
  waiting.forEach(function (load) { load.resolve(bytes); });
}

// One part read through a <script> tag: resolves when the script hands the part over, rejects when it fails to
// load, loads without handing it over, or the signal aborts.
function readByScript(base, name, signal) {
  return new Promise(function (resolve, reject) {
    var url = base + name + ".js", script = document.createElement("script"), settled = false;
    var load = {
      resolve: function (bytes) { finish(); resolve(bytes); },
      reject: function (error) { finish(); reject(error); },
    };
    function finish() {
      settled = true;
      var waiting = waitingScripts.get(name);
      if (waiting) { waiting.delete(load); if (!waiting.size) waitingScripts.delete(name); }
      script.remove();
      if (signal) signal.removeEventListener("abort", onAbort);
    }
    function onAbort() { if (!settled) load.reject(cancelled()); }
    if (signal && signal.aborted) { reject(cancelled()); return; }
    if (!waitingScripts.has(name)) waitingScripts.set(name, new Set());
    waitingScripts.get(name).add(load);
    if (signal) signal.addEventListener("abort", onAbort);
    script.onerror = function () { if (!settled) load.reject(new Error("could not load the model part \"" + name + "\" from " + url + " (is the file there?).")); };
    script.onload = function () { if (!settled) load.reject(new Error(url + " loaded but did not hand over the part \"" + name + "\"; export the model again.")); };
    script.src = url;
    document.head.appendChild(script);
  });
}

export function scriptReader(baseUrl) {
  var base = withSlash(baseUrl);
  globalThis.mhaModelPart = receivePart;
  return function (name, signal) { return readByScript(base, name, signal); };
}
