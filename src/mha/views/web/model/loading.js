// Reading the model's parts: each one's bytes checked against the manifest (length and sha256) and gunzipped, and
// a load that its AbortSignal can stop.

import { gunzip, sha256Hex } from "./bytes.js";

export function cancelled() {
  var error = new Error("Loading the model was cancelled, as asked; nothing of it was kept. To load it again, run a " +
                        "sentence again (press Enter in the box).");
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
      throw new Error("the model part \"" + part.name + "\" arrived with " + bytes.length + " bytes where " +
                      part.bin_bytes + " were expected, so it was damaged on the way or is from another export of the " +
                      "model. Reload the page and try again; if that does not help, the site's copy of the model is " +
                      "damaged (its build exports the model again).");
    }
    return sha256Hex(bytes).then(function (digest) {
      if (digest !== part.sha256) {
        throw new Error("the model part \"" + part.name + "\" does not match its sha256 in the manifest (" + digest +
                        ", not " + part.sha256 + "): it was changed or damaged on the way. " +
                        "Reload the page and try again; if that does not help, the site's copy of the model is damaged " +
                        "(its build exports the model again).");
      }
      return abortable(gunzip(bytes), signal);
    });
  });
}
