// Reading the model's parts: each one's bytes checked against the manifest (length and sha256) and gunzipped, and
// a load that its AbortSignal can stop.

import { gunzip, sha256Hex } from "./bytes.js";

export function cancelled() {
  var error = new Error("Loading the model was cancelled (its signal was aborted); nothing was kept. Open it again to load it.");
  error.name = "AbortError";
  return error;
}

// `promise`, or a rejection with cancelled() as soon as `signal` aborts.
export function abortable(promise, signal) {
  if (!signal) return promise;
  return new Promise(function (resolve, reject) {
    function onAbort() { reject(cancelled()); }
    if (signal.aborted) { onAbort(); return; }
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(function () { signal.removeEventListener("abort", onAbort); });
  });
}

// Read, check and gunzip one part; `part` is its manifest entry.
export function loadPart(readPart, part, signal) {
  return abortable(Promise.resolve(readPart(part.name, signal)), signal).then(function (bytes) {
    if (!(bytes instanceof Uint8Array)) bytes = new Uint8Array(bytes);
    if (bytes.length !== part.bin_bytes) {
      throw new Error("the model part \"" + part.name + "\" has " + bytes.length + " bytes, but the manifest says " +
                      part.bin_bytes + "; it is damaged or from another export. Export the model again.");
    }
    return sha256Hex(bytes).then(function (digest) {
      if (digest !== null && digest !== part.sha256) {
        throw new Error("the model part \"" + part.name + "\" does not match its sha256 in the manifest (" + digest +
                        " instead of " + part.sha256 + "); it was changed or damaged. Export the model again.");
      }
      return abortable(gunzip(bytes), signal);
    });
  });
}
