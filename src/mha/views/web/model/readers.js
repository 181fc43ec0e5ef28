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
      if (!response.ok) {
        throw new Error("the site did not send the model part \"" + name + "\" (" + url + " answered HTTP " +
                        response.status + "). Reload the page and try again; if it happens again, the site is " +
                        "missing the model's files.");
      }
      return response.arrayBuffer();
    }, function (error) {
      if (signal && signal.aborted) throw cancelled();
      // the browser's own words ("Failed to fetch", "NetworkError ...") say nothing of what to do
      throw new Error("could not download the model part \"" + name + "\": the connection to the site failed " +
                      "(offline, or the site stopped answering; the browser said: " + String(error && error.message) +
                      "). Check the connection, then run the sentence again.");
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
    script.onerror = function () {
      if (!settled) {
        load.reject(new Error("could not read the model part \"" + name + "\" from " + url + ": the file is missing " +
                              "beside this page. Copy the site's whole folder, _vendor/mha/model/ included, and open " +
                              "the page again."));
      }
    };
    script.onload = function () {
      if (!settled) {
        load.reject(new Error(url + " was read but did not hold the model part \"" + name + "\": the file is " +
                              "damaged or from another export of the model. Copy the site's folder again."));
      }
    };
    script.src = url;
    document.head.appendChild(script);
  });
}

export function scriptReader(baseUrl) {
  var base = withSlash(baseUrl);
  globalThis.mhaModelPart = receivePart;
  return function (name, signal) { return readByScript(base, name, signal); };
}
