/* The "timeline" view (chapters 3.5 and 3.6): attention maps of every head of a tiny model recorded during
   training, with the loss; a scrubber (and a play button) walks through the recorded steps. With
   payload.page_training, the reader can train the model in the page (trainer_bridge.js) and see their run's
   repeat loss and best prefix matching drawn beside the stored run's. */

import { contentWidth, make, makeSvg } from "./dom.js";
import { afterInput, button, frame, menu, slider } from "./frame.js";
import { wholeNumber } from "./address.js";
import { finish, showState } from "./tools.js";
import { canTrainInPage, trainingPanel } from "./trainer_bridge.js";

/* A polyline through (step, value) points, skipping missing values. */
function line(points, x, y, className) {
  const drawn = points.filter(([, value]) => value !== null && Number.isFinite(value))
    .map(([step, value]) => `${x(step).toFixed(1)},${y(value).toFixed(1)}`).join(" ");
  return makeSvg("polyline", { points: drawn, class: className });
}

/* The loss curve: the repeat loss at every logged step, chance as a dotted line, the phase change as a dashed
   one, and a cursor at the step on show. With `yours` (the rows of the reader's run, mhaTrainer.train's), the
   stored run's best last-layer prefix matching (0 to 1, right axis) and the reader's run are drawn too, with a
   legend. Drawn `width` px wide (at most 380), never scaled, so that its text keeps its size on a phone. */
function lossCurve(payload, width, yours) {
  const [height, left, right, top, bottom] = [yours ? 236 : 210, 46, 26, 30, yours ? 66 : 40];
  const steps = payload.curve.steps;
  const losses = payload.curve.loss;
  const last = Math.max(steps[steps.length - 1] || 1, ...(yours || []).map((row) => row.step));
  const high = Math.max(payload.chance_loss, ...losses.filter((value) => value !== null),
    ...(yours || []).map((row) => row.repeat_loss).filter(Number.isFinite)) * 1.05;
  const x = (step) => left + ((width - left - right) * step) / last;
  const y = (loss) => top + (height - top - bottom) * (1 - loss / high);
  const yScore = (score) => top + (height - top - bottom) * (1 - score);
  const svg = makeSvg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", class: "mha-map mha-curve",
    "aria-label": `Repeat loss over training, from ${losses[0]} at step 0 to ${losses[losses.length - 1]} at step ` +
      `${last}; the phase change is at step ${payload.phase_change.step}` });
  svg.append(makeSvg("text", { x: left, y: 12, class: "mha-map-title" }, "repeat loss (nats) over training"));
  const points = steps.map((step, index) => (losses[index] === null ? null : `${x(step).toFixed(1)},${y(losses[index]).toFixed(1)}`))
    .filter(Boolean).join(" ");
  svg.append(makeSvg("line", { x1: left, x2: width - right, y1: y(payload.chance_loss), y2: y(payload.chance_loss),
    class: "mha-chance" }));
  svg.append(makeSvg("text", { x: left + 4, y: y(payload.chance_loss) + 13 }, "chance"));
  const phase = x(payload.phase_change.step);
  svg.append(makeSvg("line", { x1: phase, x2: phase, y1: top, y2: height - bottom, class: "mha-phase" }));
  svg.append(makeSvg("text", { x: phase, y: top - 4, "text-anchor": "middle" }, `phase change, step ${payload.phase_change.step}`));
  svg.append(makeSvg("polyline", { points, class: "mha-loss-line" }));
  svg.append(makeSvg("line", { x1: left, x2: left, y1: top, y2: height - bottom, class: "mha-tick" }));
  svg.append(makeSvg("line", { x1: left, x2: width - right, y1: height - bottom, y2: height - bottom, class: "mha-tick" }));
  for (const value of [0, Math.round(high / 2), Math.floor(high)]) {
    svg.append(makeSvg("text", { x: left - 4, y: y(value) + 4, "text-anchor": "end" }, String(value)));
  }
  for (const step of [0, Math.round(last / 2), last]) {
    svg.append(makeSvg("text", { x: x(step), y: height - bottom + 14, "text-anchor": "middle" }, step.toLocaleString("en")));
  }
  svg.append(makeSvg("text", { x: (left + width) / 2, y: height - bottom + 28, "text-anchor": "middle",
    class: "mha-axis" }, "training step"));
  if (yours) {
    const stored = payload.steps.map((step, at) => [step, Math.max(...payload.prefix_matching[at][payload.n_layers - 1]
      .map((value) => (value === null ? -Infinity : value)))]);
    svg.append(line(stored, x, yScore, "mha-score-line"));
    svg.append(line(yours.map((row) => [row.step, row.repeat_loss]), x, y, "mha-your-loss"));
    svg.append(line(yours.map((row) => [row.step, row.best_prefix_matching]), x, yScore, "mha-your-score"));
    for (const score of [0, 1]) {
      svg.append(makeSvg("text", { x: width - right + 4, y: yScore(score) + 4 }, String(score)));
    }
    const legend = makeSvg("g", { class: "mha-curve-legend" });
    const entry = (at, row, className, text) => {
      legend.append(makeSvg("line", { x1: at, x2: at + 18, y1: row - 4, y2: row - 4, class: className }));
      legend.append(makeSvg("text", { x: at + 22, y: row }, text));
    };
    entry(left - 30, height - 20, "mha-loss-line", "stored run");
    entry(left + 70, height - 20, "mha-your-loss", "your run");
    entry(left - 30, height - 5, "mha-score-line", "dashed: prefix matching, 0–1 at right");
    svg.append(legend);
  }
  const cursor = makeSvg("line", { y1: top, y2: height - bottom, class: "mha-cursor" });
  svg.append(cursor);
  return { svg, width, moveTo: (step) => { cursor.setAttribute("x1", x(step)); cursor.setAttribute("x2", x(step)); } };
}

/* The held-out scores of every head at the step on show; a score at or above the threshold is a role, in bold. */
function heldOutScores(payload, stepNames, at) {
  const header = make("tr", {}, make("th", { scope: "col" }, "head"), make("th", { scope: "col" }, "previous-token"),
    make("th", { scope: "col" }, "prefix-matching"));
  const body = make("tbody");
  for (let l = 0; l < payload.n_layers; l += 1) {
    for (let h = 0; h < payload.n_heads; h += 1) {
      const cells = [payload.previous_token[at][l][h], payload.prefix_matching[at][l][h]].map((value) => {
        const text = value === null ? "–" : value.toFixed(2);
        return make("td", value !== null && value >= payload.threshold ? { class: "mha-strong" } : {}, text);
      });
      body.append(make("tr", {}, make("th", { scope: "row" }, payload.head_labels[l][h]), ...cells));
    }
  }
  return make("table", { class: "mha-scores" }, make("caption", {}, `Held-out scores at ${stepNames[at]} ` +
    `(bold: at least ${payload.threshold}, a role)`), make("thead", {}, header), body);
}

/* Where the step on show lies, said in the view's message. */
function stepMessage(payload, stepNames, at) {
  const nSteps = payload.steps.length;
  const loss = payload.loss[at];
  const phase = payload.phase_change.step;
  const where = payload.steps[at] < phase ? `${phase - payload.steps[at]} steps before the phase change`
    : payload.steps[at] === phase ? "the phase change" : `${payload.steps[at] - phase} steps after the phase change`;
  return `${stepNames[at]} of ${payload.steps[nSteps - 1].toLocaleString("en")} (${where}): ` +
    `repeat loss ${loss === null ? "–" : loss.toFixed(2)} nats (chance ${payload.chance_loss.toFixed(2)}).`;
}

/* What the address holds of the view (the step by its number, not its index), and how it reads it back. */
function describe(view, payload, stepNames) {
  const [nLayers, nHeads, nSteps] = [payload.n_layers, payload.n_heads, payload.steps.length];
  view.stateNames = ["step", "sequence", "layer", "head"];
  view.addressValue = (name) => (name === "step" ? payload.steps[view.state.step] : view.state[name]);
  view.valueOf = (name, text) => {
    if (name === "step") {
      const wanted = wholeNumber(text, 0, payload.steps[nSteps - 1], "step");
      const index = payload.steps.indexOf(wanted);
      if (index < 0) {
        const after = payload.steps.findIndex((recorded) => recorded > wanted);
        throw new Error(`step ${wanted} was not recorded; the nearest recorded steps are ` +
          `${payload.steps[Math.max(after - 1, 0)]} and ${payload.steps[after]}`);
      }
      return index;
    }
    const top = { sequence: payload.sequences.length, layer: nLayers, head: nHeads }[name];
    return wholeNumber(text, 0, top - 1, name);
  };
  view.gridNames = ["layer", "head"];
  view.range = (name) => Array.from({ length: name === "layer" ? nLayers : nHeads }, (_, index) => index);
  view.compareName = "step";
  view.compareControl = { label: "step", labels: stepNames };
}

export function mountTimeline(root, payload, options) {
  const view = frame(root, payload, options);
  const [nLayers, nHeads, nSteps, size] = [payload.n_layers, payload.n_heads, payload.steps.length, payload.seq_len];
  const expected = payload.sequences.length * nLayers * nHeads * size * size * nSteps;
  if (payload.weights.length !== expected) {
    throw new Error(`the timeline holds ${payload.weights.length} weights where its shape needs ${expected}`);
  }
  const stepNames = payload.steps.map((step) => `step ${step.toLocaleString("en")}`);
  const step = slider(view, "step", "training", nSteps - 1, payload.start || 0);
  const play = button(view.controls, "Play", "play training from this step", () => toggle());
  const sequence = menu(view, "sequence", "sequence", payload.sequences.map((item) => item.title), 0);
  const layer = { value: nLayers - 1 };
  const head = { value: 0 };
  let timer = null;

  function toggle() {
    if (timer) {
      clearInterval(timer);
      timer = null;
    } else {
      if (Number(step.input.value) >= nSteps - 1) step.input.value = "0";
      timer = setInterval(() => {
        const next = Number(step.input.value) + 1;
        if (next >= nSteps) { toggle(); return; }
        step.input.value = String(next);
        view.redraw();
      }, 160);
    }
    play.textContent = timer ? "Pause" : "Play";
    play.setAttribute("aria-label", timer ? "pause training" : "play training from this step");
  }

  /* A head's map at a step: the weights are stored step-last, (sequence, layer, head, cell, step). */
  const mapFor = (state) => {
    const item = payload.sequences[state.sequence];
    const base = ((state.sequence * nLayers + state.layer) * nHeads + state.head) * size * size * nSteps;
    const hundredths = new Uint8Array(size * size);
    for (let cell = 0; cell < size * size; cell += 1) hundredths[cell] = payload.weights[base + cell * nSteps + state.step];
    const label = payload.head_labels[state.layer][state.head];
    const prefix = payload.prefix_matching[state.step][state.layer][state.head];
    return { title: `${label} at ${stepNames[state.step]}`, tile: `${label} · prefix ${prefix === null ? "–" : prefix.toFixed(2)}`,
      rows: item.labels, columns: item.labels, hundredths, marked: item.marked, scale: { kind: "weight" } };
  };
  view.state = { step: Number(step.input.value), sequence: 0, layer: layer.value, head: head.value };
  view.mapAt = mapFor;
  describe(view, payload, stepNames);

  const curveWidth = () => Math.max(280, Math.min(380, view.mapWidth || contentWidth(root)));
  let yours = null;  /* the rows of the reader's run, once one starts */
  let curve = lossCurve(payload, curveWidth(), yours);
  const curvePanel = make("div", { class: "mha-panel mha-panel-curve" }, curve.svg);
  const scores = make("div", { class: "mha-panel mha-panel-scores" });
  view.panels.append(curvePanel, scores);

  view.apply = (state) => {
    step.input.value = String(state.step);
    sequence.value = String(state.sequence);
    layer.value = state.layer;
    head.value = state.head;
    view.redraw();
  };

  view.redraw = () => {
    const at = Number(step.input.value);
    view.state = { step: at, sequence: Number(sequence.value), layer: layer.value, head: head.value };
    step.output.textContent = stepNames[at];
    step.input.setAttribute("aria-valuetext", stepNames[at]);
    view.message.replaceChildren(stepMessage(payload, stepNames, at));
    if (curve.width !== curveWidth()) drawCurve();  /* the screen turned or the window changed: drawn to fit */
    curve.moveTo(payload.steps[at]);
    scores.replaceChildren(heldOutScores(payload, stepNames, at));
    showState(view, mapFor(view.state));
  };

  function drawCurve() {
    curve = lossCurve(payload, curveWidth(), yours);
    curvePanel.replaceChildren(curve.svg);
    curve.moveTo(payload.steps[Number(step.input.value)]);
  }

  if (payload.page_training && canTrainInPage()) {
    view.training = trainingPanel(view, payload.page_training, () => { yours = []; drawCurve(); },
      (row) => { yours.push(row); drawCurve(); });
  }
  step.input.addEventListener("input", afterInput(view, () => view.redraw()));
  sequence.addEventListener("change", afterInput(view, () => view.redraw()));
  return finish(view);
}
