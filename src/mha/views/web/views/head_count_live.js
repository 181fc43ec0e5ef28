/* Section 3.7's "train live" on the website: the reader types a head count that divides d_model, and the page
   trains a fresh one-layer model of that shape on the two-relation task with the notebook's schedule (payload
   .live_training: mha.views.head_count_explorer.LIVE_TRAINING), in JavaScript (trainer.js, loaded on demand by
   trainer_bridge.js; its twoRelation part mirrors mha.lab.head_count_sweep), then shows it as a stored run is shown:
   its attention maps on held-out sequences, every head's shares and role at the ask positions, and its learning
   curve beside the stored seeds' curves. The table view (table.js) draws the stored runs; this module wraps its
   redraw while a live model is shown, and the heads or seed menu goes back to the stored runs. */

import { make, makeSvg, pythonRepr } from "./dom.js";
import { canTrainInPage, loadTrainer, trainingRefusal } from "./trainer_bridge.js";

const COLOURS = { fact: "#21918c", previous: "#fde725", elsewhere: "#d9d9d9" };
/* What the notebook's view says of a head count it cannot use, or of a failed run (Explorer.show_problem). */
const refusal = (text) => trainingRefusal(text, "Cannot train this:");

/* The head count typed, or throws parse_head_count's message: int(text.strip()), then it must divide d_model. */
export function parseHeadCount(text, live) {
  const stripped = text.trim();
  if (!/^[+-]?[0-9]+(?:_[0-9]+)*$/.test(stripped)) {
    throw new Error(live.messages.not_a_number.replace("{text}", pythonRepr(text)));
  }
  const count = BigInt(stripped.replace(/_/g, ""));
  if (count < 1n || BigInt(live.config.d_model) % count !== 0n) {
    throw new Error(live.messages.does_not_divide.replace("{n_heads}", count.toString()));
  }
  return Number(count);
}

/* Every head's shares at the ask positions with a bar and a role, as shares_table_html draws them. */
function sharesTable(measured) {
  const rows = measured.shares.map(([fact, previous, elsewhere], head) => {
    const bar = make("td", {}, ...[["fact", fact], ["previous", previous], ["elsewhere", elsewhere]].map(([part, value]) =>
      make("span", { title: `${part}: ${value.toFixed(2)}`, style: `display:inline-block;height:12px;width:` +
        `${Math.round(Math.max(value, 0) * 160)}px;background:${COLOURS[part]}` })));
    return make("tr", {}, make("td", {}, `head ${head}`), ...[fact, previous, elsewhere].map((value) =>
      make("td", { style: "text-align:right" }, value.toFixed(2))), bar, make("td", { class: "mha-live-role" },
      measured.roles[head]));
  });
  const key = Object.entries(COLOURS).map(([part, colour]) =>
    make("span", { style: `background:${colour};color:#000;padding:0 6px` }, part));
  return make("div", {}, make("b", {}, "Where each head looks from the ask positions"),
    ` (mean over 256 held-out sequences of the page's own draw)`, make("br"), make("small", {}, ...key),
    make("table", { style: "font-size:12px" }, make("tr", {}, ...["head", "fact", "previous", "elsewhere", "shares",
      "role"].map((name) => make("th", {}, name))), ...rows));
}

/* Held-out loss curves on a log scale, as loss_curves_svg draws them: the stored seeds' in grey, the page's run. */
function curvesSvg(lines, title, maxStep) {
  const [width, left, right, top, bottom, plotH] = [320, 58, 22, 26, 44, 174];
  const labelled = lines.filter((line) => line.label);
  const plotW = width - left - right;
  const [low, high] = [-7, 1];
  const x = (step) => left + (plotW * step) / maxStep;
  const y = (loss) => top + (plotH * (high - Math.log10(Math.min(Math.max(loss, 1e-7), 10)))) / (high - low);
  const svg = makeSvg("svg", { width, height: top + plotH + bottom + 16 * labelled.length, role: "img",
    "font-family": "sans-serif", "font-size": 12, class: "mha-live-curves" });
  svg.append(makeSvg("title", {}, title), makeSvg("text", { x: left + plotW / 2, y: 15, "text-anchor": "middle",
    "font-size": 13 }, title), makeSvg("rect", { x: left, y: top, width: plotW, height: plotH, fill: "none",
    stroke: "#444" }));
  for (let exponent = low; exponent <= high; exponent += 1) {
    const at = y(10 ** exponent).toFixed(1);
    svg.append(makeSvg("line", { x1: left, x2: left + plotW, y1: at, y2: at, stroke: "#eee" }),
      makeSvg("text", { x: left - 4, y: Number(at) + 3, "text-anchor": "end" },
        exponent === 0 ? "1" : exponent === 1 ? "10" : `1e${exponent}`));
  }
  for (let index = 0; index < 5; index += 1) {
    svg.append(makeSvg("text", { x: x((index * maxStep) / 4).toFixed(1), y: top + plotH + 14, "text-anchor": "middle" },
      Math.round((index * maxStep) / 4).toLocaleString("en")));
  }
  svg.append(makeSvg("text", { x: left + plotW / 2, y: top + plotH + 31, "text-anchor": "middle" }, "training step"),
    makeSvg("text", { transform: `translate(13,${top + plotH / 2}) rotate(-90)`, "text-anchor": "middle" },
      "held-out loss (nats, log)"));
  let legendY = top + plotH + bottom + 8;
  for (const line of lines) {
    const points = line.steps.map((step, index) => [step, line.losses[index]]).filter(([step]) => step <= maxStep)
      .map(([step, loss]) => `${x(step).toFixed(1)},${y(loss).toFixed(1)}`).join(" ");
    svg.append(makeSvg("polyline", { points, fill: "none", stroke: line.colour, "stroke-width": line.width,
      class: line.className || "" }));
    if (line.label) {
      svg.append(makeSvg("line", { x1: left, x2: left + 18, y1: legendY - 3, y2: legendY - 3, stroke: line.colour,
        "stroke-width": line.width }), makeSvg("text", { x: left + 22, y: legendY }, line.label));
      legendY += 16;
    }
  }
  return svg;
}

/* The note on what runs and how closely it follows the package (as section 3.5's "Train one in your page"). */
function fidelityNote(live) {
  const schedule = live.schedule;
  const tolerance = live.gradient_tolerance.toExponential(0).replace("e-", "e−");
  return make("p", { class: "mha-fidelity" }, make("b", {}, "In your page: "),
    `the model trains here, in JavaScript, with the notebook's live schedule (${schedule.steps} steps at learning ` +
    `rate ${schedule.learning_rate}, batches of ${schedule.batch_size}, AdamW, gradients clipped to norm ` +
    `${schedule.grad_clip}). Its one-step gradients are within ${tolerance} of PyTorch's (relative to each tensor's ` +
    "largest entry) for 1, 4 and 32 heads, and its runs end at held-out losses, accuracies and head roles like " +
    "PyTorch's runs of the same setting over several seeds, as tested; its random numbers are its own, so a seed " +
    "here does not give PyTorch's run of that seed. trainer.js loads the first time you press the button; nothing " +
    "leaves your computer.");
}

/* Hook the train-live box into a mounted table view of section 3.7 (called by tools.js's finish, before the first
   drawing); showState is tools.js's, passed in so that this module imports nothing of tools.js. */
export function addLiveTraining(view, showState) {
  const live = view.payload.live_training;
  if (!live || view.hosted || !canTrainInPage()) return;
  const input = (name) => view.controls.querySelector(`[name="${name}"]`);
  const controlOf = (name) => view.payload.controls.find((control) => control.name === name);
  const headsBox = make("input", { type: "text", id: `${view.id}-train-heads`, name: "train_heads", value: "4",
    autocomplete: "off", size: 5, inputmode: "numeric" });
  const start = make("button", { type: "submit", class: "mha-button mha-train" },
    `Train live (${live.schedule.steps} steps)`);
  const form = make("form", { class: "mha-typed mha-training", "aria-label": "train a model live in your page" },
    make("label", { for: headsBox.id }, "heads to train"), headsBox, start);
  const bar = make("progress", { max: live.schedule.steps, value: 0 });
  const status = make("span", { class: "mha-loading-text mha-training-status", "aria-live": "polite" });
  const cancel = make("button", { type: "button", class: "mha-button" }, "Cancel");
  const running = make("div", { class: "mha-loading", hidden: "" }, bar, status, cancel);
  const result = make("p", { class: "mha-training-result", "aria-live": "polite" });
  const back = make("button", { type: "button", class: "mha-button mha-live-back", hidden: "" },
    "Back to the stored models");
  view.controls.after(form, running, result, back, fidelityNote(live));
  let shown = null;  /* the live run on screen: {nHeads, seed, rows, measured, menus} */
  let controller = null;
  const storedRedraw = view.redraw;
  const storedMapAt = view.mapAt;
  const storedRange = view.range;
  const menus = () => `${input("heads").value}|${input("seed").value}`;
  const isLive = (state) => shown && `${state.heads}|${state.seed}` === shown.menus;

  const liveMap = (state) => {
    const { nHeads, measured } = shown;
    const head = Math.min(state.head, nHeads - 1);
    const T = measured.seqLen;
    const from = (state.sequence * nHeads + head) * T * T;
    const values = Float64Array.from(measured.maps.subarray(from, from + T * T));
    const tokens = measured.tokens[state.sequence];
    return { title: `head ${head} of ${nHeads}, held-out sequence ${state.sequence} (page seed ` +
      `${measured.analysisSeed})`, rows: tokens, columns: tokens, marked: [], scale: { kind: "weight" }, values,
      hundredths: Uint8Array.from(values, (weight) => Math.round(weight * 100)) };
  };
  view.mapAt = (state) => (isLive(state) ? liveMap(state) : storedMapAt(state));
  view.range = (name, state) => (name === "head" && isLive(state)
    ? Array.from({ length: shown.nHeads }, (_, index) => index) : storedRange(name, state));

  function panel(name, node) {
    if (!view.panelParts[name]) {
      view.panelParts[name] = make("div", { class: `mha-panel mha-panel-${name}` });
      view.panels.append(view.panelParts[name]);
    }
    view.panelParts[name].replaceChildren(node);
    view.panelParts[name].dataset.shown = "live";  /* a stored view's panel is set again when one is drawn */
  }

  function drawLive() {
    const head = input("head");
    head.max = String(shown.nHeads - 1);
    head.value = String(Math.min(Number(head.value), shown.nHeads - 1));
    for (const name of ["head", "sequence"]) {
      const output = view.controls.querySelector(`output[for="${input(name).id}"]`);
      if (output) output.textContent = input(name).value;
    }
    view.state = Object.fromEntries(view.payload.controls.map((control) => [control.name, Number(input(control.name).value)]));
    view.root.dataset.key = `live|${shown.nHeads}|${shown.seed}`;
    const last = shown.rows[shown.rows.length - 1];
    view.message.replaceChildren(make("b", {}, "The model you trained in your page"), `: h = ${shown.nHeads} heads ` +
      `of d_head = ${live.config.d_model / shown.nHeads}, seed ${shown.seed}, ${last.step} steps at learning rate ` +
      `${live.schedule.learning_rate}: held-out loss ${last.loss.toPrecision(3)}, accuracy ` +
      `${(100 * last.accuracy).toFixed(1)}%. Choose heads or seed above to go back to the stored models.`);
    panel("shares", sharesTable(shown.measured));
    const stored = live.curves[String(shown.nHeads)];
    const lines = stored ? stored.runs.map((run, index) => ({ steps: run.step, losses: run.loss, colour: "#b0b0b0",
      width: 1, label: index === 0 ? `stored (lr ${stored.learning_rate}), all seeds` : "" })) : [];
    lines.push({ steps: shown.rows.map((row) => row.step), losses: shown.rows.map((row) => row.loss),
      colour: "#e66101", width: 2.5, className: "mha-live-loss",
      label: `trained in your page: ${last.step} steps, lr ${live.schedule.learning_rate}` });
    panel("curves", curvesSvg(lines, `Learning curves, h = ${shown.nHeads} (d_head = ` +
      `${live.config.d_model / shown.nHeads})`, last.step));
    showState(view, liveMap(view.state));
  }

  view.redraw = () => {
    if (shown && menus() !== shown.menus) {  /* a stored run was picked */
      shown = null;
      back.hidden = true;
    }
    if (shown) drawLive();
    else storedRedraw();
  };
  back.addEventListener("click", () => {
    shown = null;
    back.hidden = true;
    view.redraw();
  });
  cancel.addEventListener("click", () => { if (controller) controller.abort(); });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (controller) return;  /* one run at a time */
    let nHeads;
    try {
      nHeads = parseHeadCount(headsBox.value, live);
    } catch (error) {
      result.replaceChildren(...refusal(error.message));
      return;
    }
    const seed = controlOf("seed").values[Number(input("seed").value)];
    const schedule = live.schedule;
    controller = new AbortController();
    const signal = controller.signal;
    start.disabled = true;
    running.hidden = false;
    bar.value = 0;
    status.textContent = "loading trainer.js…";
    result.replaceChildren();
    try {
      const trainer = await loadTrainer();
      const task = trainer.twoRelation.task({ nKeys: live.task.n_keys, nValues: live.task.n_values,
        nModifiers: live.task.n_modifiers, nFacts: live.task.n_facts, nQueries: live.task.n_queries });
      const done = await trainer.twoRelation.train({ config: { ...live.config, n_heads: nHeads }, seed, task,
        steps: schedule.steps, logEvery: schedule.log_every, evalBatchSize: schedule.eval_batch_size,
        learningRate: schedule.learning_rate, batchSize: schedule.batch_size, warmupSteps: schedule.warmup_steps,
        weightDecay: schedule.weight_decay, betas: schedule.betas, gradClip: schedule.grad_clip, signal,
        onProgress: (row) => {
          bar.value = row.step;
          status.textContent = `h = ${nHeads}, seed ${seed}: step ${row.step} of ${schedule.steps}, held-out loss ` +
            `${row.loss.toFixed(3)}`;
        } });
      status.textContent = "measuring the heads…";
      const between = () => trainer.pauseUnlessStopped(signal);
      const measured = await trainer.twoRelation.measure(done.model, done.engine, task, seed, live.examples, between);
      const menuIndex = controlOf("heads").values.indexOf(nHeads);
      if (menuIndex >= 0) input("heads").value = String(menuIndex);  /* the menu names the head count shown */
      shown = { nHeads, seed, rows: done.rows, measured, menus: menus() };
      back.hidden = false;
      result.textContent = `Trained h = ${nHeads}, seed ${seed} in your page: ${done.rows[done.rows.length - 1].step} ` +
        `steps in ${done.seconds.toFixed(1)} s of training.`;
      view.redraw();
    } catch (error) {
      result.replaceChildren(...(error.name === "AbortError" ? ["Cancelled; the view is as it was. Press the " +
        "button to train again."] : refusal(error.message)));
    } finally {
      controller = null;
      start.disabled = false;
      running.hidden = true;
    }
  });
}
