// The trainer's Web Workers (chapter 3, "Induction heads"): training runs its batch's parts (parts.js) on the page's
// other cores, one part per worker, and the page's own thread only adds the parts' gradients and takes the optimiser
// step, so it stays free to paint. Each worker runs a copy of trainer.js, started from a blob of the script's own
// text (joined_script.js), which works from file:// as well as served. Where workers cannot start (no Worker, a
// policy that forbids them, a worker that fails), the caller runs the parts itself: the numbers are the same.

import { joinedScriptText } from "../joined_script.js";
import { createEngine } from "./matmul.js";
import { modelWithValues } from "./model.js";
import { forwardPiece, partGradient } from "./parts.js";

// How many workers to start for `parts` parts: one per part, at most the machine's logical cores.
export function workerCount(parts) {
  var cores = typeof navigator === "object" && navigator.hardwareConcurrency > 0 ? navigator.hardwareConcurrency : 2;
  return Math.max(1, Math.min(parts, cores));
}

// Started workers {size, ask(index, request) -> a promise of the reply, close()}, or null where none can start.
// A request is {kind: "gradient", config, values, simd, part, divisor} -> {loss, gradient} or {kind: "forward",
// config, values, simd, piece} -> {attention, logits, outputRows}; it goes to worker index % size. A failed worker
// rejects every request in flight with an Error named "WorkerError".
export function startWorkers(count) {
  if (typeof Worker !== "function" || typeof Blob !== "function" || typeof URL !== "function") return null;
  var address = null, workers = [], waiting = new Map(), next = 0;
  function failAll(message) {
    waiting.forEach(function (pending) {
      var error = new Error("A training worker failed: " + message);
      error.name = "WorkerError";
      pending.reject(error);
    });
    waiting.clear();
  }
  try {
    address = URL.createObjectURL(new Blob([joinedScriptText() + "globalThis.mhaTrainer.serveWorker(self);\n"],
      { type: "text/javascript" }));
    for (var w = 0; w < count; w++) workers.push(new Worker(address));
  } catch { // a page that forbids workers: the caller trains alone
    workers.forEach(function (worker) { worker.terminate(); });
    if (address) URL.revokeObjectURL(address);
    return null;
  }
  workers.forEach(function (worker) {
    worker.onmessage = function (event) {
      var reply = event.data, pending = waiting.get(reply.id);
      if (!pending) return;
      waiting.delete(reply.id);
      if (!reply.error) return pending.resolve(reply);
      var error = new Error("A training worker failed: " + reply.error);
      error.name = "WorkerError";
      pending.reject(error);
    };
    worker.onerror = function (event) {
      event.preventDefault();
      failAll(event.message || "it stopped");
    };
  });
  return {
    size: workers.length,
    ask: function (index, request) {
      return new Promise(function (resolve, reject) {
        var id = next++;
        waiting.set(id, { resolve: resolve, reject: reject });
        workers[index % workers.length].postMessage(Object.assign({ id: id }, request));
      });
    },
    close: function () {
      workers.forEach(function (worker) { worker.terminate(); });
      failAll("the run ended");
      URL.revokeObjectURL(address);
    },
  };
}

// In a worker: answer the page's requests (startWorkers) on `scope` (the worker's global scope).
export function serveWorker(scope) {
  var engines = {};
  scope.onmessage = function (event) {
    var request = event.data, reply;
    try {
      var simd = request.simd !== false, engine = engines[simd] || (engines[simd] = createEngine(simd));
      var model = modelWithValues(request.config, request.values);
      if (request.kind === "gradient") {
        reply = partGradient(model, engine, request.part, request.divisor);
        scope.postMessage({ id: request.id, loss: reply.loss, gradient: reply.gradient }, [reply.gradient.buffer]);
      } else if (request.kind === "forward") {
        reply = forwardPiece(model, engine, request.piece);
        scope.postMessage({ id: request.id, attention: reply.attention, logits: reply.logits,
          outputRows: reply.outputRows }, reply.attention.map(function (a) { return a.buffer; }).concat([reply.logits.buffer]));
      } else {
        throw new Error("a training worker was asked for " + JSON.stringify(request.kind) + "; it runs \"gradient\" and \"forward\".");
      }
    } catch (problem) {
      scope.postMessage({ id: request.id, error: String(problem && problem.message || problem) });
    }
  };
}
