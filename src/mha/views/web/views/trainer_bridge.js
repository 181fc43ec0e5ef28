/* "Train one in your page" (section 3.5's timeline): the tiny induction model trained in the reader's page by
   trainer.js (joined by mha.views.widget from src/mha/views/web/trainer/; its API is mhaTrainer.train, documented
   there). trainer.js lies beside views.js and is added with a script tag only when the reader presses the button,
   so no page carries it; it works served and from file://. The reader's rows go to the timeline's chart as they
   come; when the run ends, one line places its formation step among the package's (PyTorch) runs of the same
   setting, payload.page_training (mha.views.training_timeline.page_training). */

import { make } from "./dom.js";
import { wholeNumber } from "./address.js";

/* Where views.js was loaded from, read while it runs (a classic script; null in Jupyter, where it is a module). */
const SCRIPT_URL = typeof document !== "undefined" && document.currentScript ? document.currentScript.src : null;
let trainerLoad = null;  /* one load of trainer.js per page, shared by its views */

/* Whether this page knows where trainer.js is: on the website, yes; in Jupyter (views.js as a module), no, and the
   view offers no button there (a running notebook trains the model in its own cells). */
export function canTrainInPage() {
  return Boolean(SCRIPT_URL || globalThis.mhaTrainer);
}

export function loadTrainer() {
  if (globalThis.mhaTrainer) return Promise.resolve(globalThis.mhaTrainer);
  if (!trainerLoad) {
    trainerLoad = new Promise((resolve, reject) => {
      const script = make("script", { src: new URL("trainer.js", SCRIPT_URL).href });
      script.addEventListener("load", () => resolve(globalThis.mhaTrainer));
      script.addEventListener("error", () => reject(new Error("could not read trainer.js, the script that trains " +
        "the model; check that the site's files are all there, then reload the page")));
      document.head.append(script);
    });
    trainerLoad.catch(() => { trainerLoad = null; });  /* a failed load can be tried again */
  }
  return trainerLoad;
}

/* A refusal to train, in bold, then why: what the training boxes show for bad input or a failed run. */
export function trainingRefusal(text, label = "Cannot train:") {
  return [make("b", { class: "mha-problem" }, label), " " + text];
}
const refusal = (text) => trainingRefusal(text);

/* The note on what runs and how closely it follows the package, in the style of the chapter-3 model's note. */
function trainingNote(training) {
  const setting = training.setting;
  const tolerance = training.gradient_tolerance.toExponential(0).replace("e-", "e−");
  return make("p", { class: "mha-fidelity" }, make("b", {}, "In your page: "),
    "the model trains here, in JavaScript, each batch shared among your computer's cores (Web Workers) " +
    `(d_model ${setting.d_model}, ${setting.n_layers} layers of ` +
    `${setting.n_heads} heads, learning rate ${setting.learning_rate}, batches of ${setting.batch_size}: a faster ` +
    "setting than the stored run's, so it forms within a few hundred steps). Its one-step gradients are within " +
    `${tolerance} of PyTorch's (relative to each tensor's largest entry), as tested; its random numbers are its ` +
    "own, so a seed here does not give PyTorch's run of that seed. trainer.js loads the first time you press the " +
    "button; nothing leaves your computer.");
}

/* How long the run trained, and where: "12 s on 2 cores" (its Web Workers) or "31 s in this tab". */
function timeTaken(result) {
  const where = result.workers > 1 ? `on ${result.workers} cores` : result.workers === 1 ? "on 1 core" : "in this tab";
  return `${result.seconds.toFixed(0)} s ${where}`;
}

/* One line on where the reader's formation step lies among the package's runs of the same setting. */
function resultLine(result, seed, training) {
  const kernel = training.kernel_formation;
  if (!result.formed) {
    return `Your run (seed ${seed}) did not form an induction head in ${result.steps} steps ` +
      `(${timeTaken(result)}); the package's ${kernel.seeds} seeds formed between step ${kernel.min} ` +
      `and ${kernel.max}.`;
  }
  const step = result.formedStep;
  const where = step < kernel.min ? "earlier than" : step > kernel.max ? "later than" : "within the spread of";
  return `Your run (seed ${seed}) formed an induction head at step ${step} (${timeTaken(result)}): ` +
    `${where} the package's ${kernel.seeds} PyTorch runs of this setting, which formed between step ` +
    `${kernel.min} and ${kernel.max} (best last-layer held-out prefix matching above ${training.threshold}).`;
}

/* The seed box, the button, the progress and its Cancel, and the result, placed under the view's controls.
   onStart() is called as a run begins, onRow(row) with each scored row of it (mhaTrainer.train's onProgress). */
export function trainingPanel(view, training, onStart, onRow) {
  const seedBox = make("input", { type: "text", id: `${view.id}-seed`, name: "seed", value: "0", inputmode: "numeric",
    autocomplete: "off", size: 7 });
  const start = make("button", { type: "submit", class: "mha-button mha-train" }, "Train one in your page");
  const form = make("form", { class: "mha-typed mha-training", "aria-label": "train the model in your page" },
    make("label", { for: seedBox.id }, "Seed"), seedBox, start);
  const status = make("span", { class: "mha-loading-text mha-training-status", "aria-live": "polite" });
  const cancel = make("button", { type: "button", class: "mha-button" }, "Cancel");
  const running = make("div", { class: "mha-loading", hidden: "" }, status, cancel);
  const result = make("p", { class: "mha-training-result", "aria-live": "polite" });
  view.controls.after(form, running, result, trainingNote(training));
  let controller = null;
  let lastRow = null;

  cancel.addEventListener("click", () => { if (controller) controller.abort(); });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (controller) return;  /* one run at a time */
    let seed;
    try {
      seed = wholeNumber(seedBox.value.trim(), 0, 999999, "the seed");
    } catch (error) {
      result.replaceChildren(...refusal(`${error.message}; type a whole number from 0 to 999999, e.g. 0.`));
      return;
    }
    controller = new AbortController();
    lastRow = null;
    start.disabled = true;
    running.hidden = false;
    status.textContent = "loading trainer.js…";
    result.replaceChildren();
    try {
      const trainer = await loadTrainer();
      onStart();
      status.textContent = "step 0, 0 s";
      const done = await trainer.train({ seed, signal: controller.signal, onProgress: (row) => {
        lastRow = row;
        status.textContent = `step ${row.step}, ${row.seconds.toFixed(1)} s`;
        onRow(row);
      } });
      result.textContent = resultLine(done, seed, training);
    } catch (error) {
      result.replaceChildren(...(error.name === "AbortError"
        ? [`Cancelled${lastRow ? ` at step ${lastRow.step}` : ""}; press the button to train again.`]
        : refusal(error.message)));
    } finally {
      controller = null;
      start.disabled = false;
      running.hidden = true;
    }
  });
  return { form, seedBox, start, cancel, status, result };
}
