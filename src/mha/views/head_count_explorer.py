"""The head-count view (chapter 3, "One big head or many"): pick a head count and a seed, or train one live.

:class:`HeadCountStudyExplorer` shows, for a saved model of the head-count study
(:mod:`mha.lab.head_count_study`: each h at the learning rate chosen for it):
one head's attention map on a held-out two-relation sequence, every head's
attention shares at the ask positions (matching fact, previous token,
elsewhere) with a one-word role, and the run's learning curve next to the
other seeds of the same head count. A button trains a fresh model of the same
shape in the notebook, with a progress bar, using a short, fast schedule
(:data:`LIVE_TRAINING`: 600 steps at learning rate 1e-2), and then shows that
model the same way.

The map is drawn like every view's (:mod:`mha.views.heatmaps`, with a table of
its numbers), the share table as HTML and the learning curves as a small
hand-made SVG rather than a matplotlib figure, so that picking a run redraws
well within the book's 50 ms budget (a run is loaded and measured once, then
cached). Bad input (a head count that was not trained or does not divide
``d_model``, text that is not a number) shows a message and keeps the last good
view; so does any other error (a damaged checkpoint, a failed live run), shown
as a message rather than a traceback (:class:`mha.views.explorer.Explorer`).
"""

from __future__ import annotations

import html
import time
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
from ipywidgets import HTML, Button, Dropdown, HBox, IntProgress, IntSlider, Layout, Text, Widget

from mha.core.validation import (
    LARGEST_D_MODEL_LISTED,
    as_real_array,
    check_items,
    check_type,
    check_whole_number,
    head_counts_that_divide,
)
from mha.lab.checkpoints import LAB_DIRECTORY
from mha.lab.head_count_study import HeadCountStudy, load_study
from mha.lab.head_count_sweep import (
    ANALYSIS_BATCH_SEED,
    analysis_batch,
    head_role,
    relation_shares,
    token_names,
    train_two_relation_model,
)
from mha.lab.training import TrainingConfig
from mha.views.contract import ExplorerView
from mha.views.explorer import Explorer
from mha.views.heatmaps import AttentionMap
from mha.views.training_timeline import PAGE_GRADIENT_TOLERANCE

__all__ = ["LIVE_TRAINING", "N_EXAMPLES", "shares_table_html", "CurveLine",
           "loss_curves_svg", "head_count_messages", "parse_head_count", "HeadCountStudyExplorer"]

LIVE_TRAINING = TrainingConfig(steps=600, batch_size=32, learning_rate=1e-2, log_every=50, eval_batch_size=128)
"""The live retrain: 600 steps at 1e-2 (h = 32, the slowest, within 20 s on 2 cores)."""
N_EXAMPLES = 8
"""How many held-out sequences the reader can step through."""

_ROLE_COLOURS = {"fact": "#21918c", "previous": "#fde725", "elsewhere": "#d9d9d9"}


def shares_table_html(shares: np.ndarray) -> str:
    """Every head's mean attention at the ask positions (heads, 3: fact, previous, elsewhere) as bars and a role."""
    shares = as_real_array("shares", shares)
    if shares.ndim != 2 or shares.shape[1] != 3:
        raise ValueError(f"shares has shape {shares.shape}; pass (heads, 3) from "
                         "mha.lab.head_count_sweep.relation_shares.")
    rows = []
    for head, (fact, previous, elsewhere) in enumerate(shares):
        bar = "".join(f"<span title='{part}: {value:.2f}' style='display:inline-block;height:12px;"
                      f"width:{max(value, 0.0) * 160:.0f}px;background:{_ROLE_COLOURS[part]}'></span>"
                      for part, value in (("fact", fact), ("previous", previous), ("elsewhere", elsewhere)))
        rows.append(f"<tr><td>head {head}</td><td style='text-align:right'>{fact:.2f}</td>"
                    f"<td style='text-align:right'>{previous:.2f}</td><td style='text-align:right'>{elsewhere:.2f}</td>"
                    f"<td>{bar}</td><td>{head_role(fact, previous)}</td></tr>")
    key = " ".join(f"<span style='background:{colour};color:#000;padding:0 6px'>{part}</span>"
                   for part, colour in _ROLE_COLOURS.items())
    return ("<div><b>Where each head looks from the ask positions</b> (mean over 256 held-out sequences)<br>"
            f"<small>{key}</small><table style='font-size:12px'><tr><th>head</th><th>fact</th><th>previous</th>"
            f"<th>elsewhere</th><th>shares</th><th>role</th></tr>{''.join(rows)}</table></div>")


class CurveLine(NamedTuple):
    """One line of :func:`loss_curves_svg`: x (n,), y (n,) positive losses, colour, width, legend label."""

    steps: np.ndarray
    losses: np.ndarray
    colour: str
    width: float
    label: str


def loss_curves_svg(lines: Sequence[CurveLine], title: str, max_step: int, low: float = 1e-7,
                    high: float = 10.0) -> str:
    """Loss curves as a small inline SVG: x = training step (linear), y = loss (log scale, ``low`` to ``high``).

    Drawn by hand rather than with matplotlib so that a redraw takes a millisecond, not a tenth of a
    second. Losses below ``low`` are drawn at ``low`` (chapter 3, "One big head or many"). Narrow enough for a phone's
    screen (320 px) with its text at 12 px, so that a page never has to shrink it.
    """
    lines = check_items("lines", lines, "a list of CurveLines")
    labelled = [line for line in lines if line.label]
    width, left, right, top, bottom, plot_h = 320, 58, 22, 26, 44, 174
    height = top + plot_h + bottom + 16 * len(labelled)  # the legend sits under the plot
    plot_w = width - left - right
    log_low, log_high = np.log10(low), np.log10(high)

    def x_of(step):
        return left + plot_w * np.asarray(step, dtype=float) / max_step

    def y_of(loss):
        value = np.log10(np.clip(np.asarray(loss, dtype=float), low, high))
        return top + plot_h * (log_high - value) / (log_high - log_low)

    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img' "
             f"font-family='sans-serif' font-size='12'><title>{html.escape(title)}</title>",
             f"<text x='{left + plot_w / 2}' y='15' text-anchor='middle' font-size='13'>{html.escape(title)}</text>",
             f"<rect x='{left}' y='{top}' width='{plot_w}' height='{plot_h}' fill='none' stroke='#444'/>"]
    for exponent in range(int(np.ceil(log_low)), int(np.floor(log_high)) + 1):
        y = float(y_of(10.0 ** exponent))
        label = "1" if exponent == 0 else ("10" if exponent == 1 else f"1e{exponent}")
        parts.append(f"<line x1='{left}' x2='{left + plot_w}' y1='{y:.1f}' y2='{y:.1f}' stroke='#eee'/>"
                     f"<text x='{left - 4}' y='{y + 3:.1f}' text-anchor='end'>{label}</text>")
    tick = max_step / 4
    for index in range(5):
        x = float(x_of(index * tick))
        parts.append(f"<text x='{x:.1f}' y='{top + plot_h + 14}' text-anchor='middle'>{index * tick:,.0f}</text>")
    parts.append(f"<text x='{left + plot_w / 2}' y='{top + plot_h + 31}' text-anchor='middle'>training step</text>"
                 f"<text transform='translate(13,{top + plot_h / 2}) rotate(-90)' text-anchor='middle'>"
                 f"held-out loss (nats, log)</text>")
    legend_y = top + plot_h + bottom + 8
    for line in lines:
        keep = np.asarray(line.steps) <= max_step
        points = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(x_of(np.asarray(line.steps)[keep]),
                                                              y_of(np.asarray(line.losses)[keep]), strict=True))
        parts.append(f"<polyline points='{points}' fill='none' stroke='{line.colour}' "
                     f"stroke-width='{line.width}'/>")
        if line.label:
            parts.append(f"<line x1='{left}' x2='{left + 18}' y1='{legend_y - 3}' "
                         f"y2='{legend_y - 3}' stroke='{line.colour}' stroke-width='{line.width}'/>"
                         f"<text x='{left + 22}' y='{legend_y}'>{html.escape(line.label)}</text>")
            legend_y += 16
    parts.append("</svg>")
    return "".join(parts)


def head_count_messages(d_model: int) -> dict[str, str]:
    """What :func:`parse_head_count` says, with ``{text}`` (the typed text, as Python's repr) and ``{n_heads}`` left
    to fill: the page's head-count box (views/head_count_live.js) says the same."""
    d_model = check_whole_number("d_model", d_model, minimum=1, meaning="the model's width, e.g. 32")
    options = (", ".join(str(h) for h in head_counts_that_divide(d_model)) if d_model <= LARGEST_D_MODEL_LISTED
               else "a divisor of d_model")  # a huge width is not factored for a message
    return {"not_a_number": f"{{text}} is not a whole number; type a head count that divides d_model = {d_model}: "
                            f"{options}.",
            "does_not_divide": f"{{n_heads}} heads cannot split d_model = {d_model} features into equal heads; "
                               f"type one of {options}."}


def parse_head_count(text: object, d_model: int) -> int:
    """The head count typed by the reader, as an int; ``ValueError`` saying what to type if it cannot be used."""
    messages = head_count_messages(d_model)
    try:
        n_heads = int(str(text).strip())
    except ValueError:
        raise ValueError(messages["not_a_number"].replace("{text}", repr(str(text)))) from None
    if n_heads < 1 or d_model % n_heads:
        raise ValueError(messages["does_not_divide"].replace("{n_heads}", str(n_heads)))
    return n_heads


class HeadCountStudyExplorer(Explorer):
    """Widgets to pick a saved model (head count, seed), a head and a held-out sequence, or train a model live.

    :meth:`show` picks a run in code (and returns whether it exists); :meth:`retrain` trains a fresh model (what
    the button does), and ``last_train_seconds`` is how long that took. The rest is
    :class:`~mha.views.explorer.Explorer`'s (chapter 3, "One big head or many").
    """

    what_to_try = ("Pick 1, 2, 4 and 32 heads and a few seeds; step through the heads and the held-out sequences; "
                   "type a head count and press train live.")
    what_to_notice = ("With one head, each ask position's row must split its weight between the matching fact and "
                      "the previous token; with two heads, each can look at one place (the table names each head's "
                      "role). The live run takes fewer steps at a higher learning rate, so its curve is not "
                      "comparable step for step with the stored runs'.")
    doing = "show"
    site_note = ("On this page the view shows the stored models of the study, and the box under its controls trains a "
                 "fresh model of any head count in your page, in JavaScript, with the notebook's live schedule.")

    def __init__(self, study: HeadCountStudy | None = None, n_heads: int = 1, seed: int = 0,
                 live_training: TrainingConfig = LIVE_TRAINING) -> None:
        check_type("study", study, (HeadCountStudy, type(None)), "a HeadCountStudy, or None for the book's own")
        # the study stored with the book: the website's build can load it again
        self.stored_study = study is None or study.directory == LAB_DIRECTORY
        self.study = load_study() if study is None else study
        self.study.check(n_heads, seed)
        self.live_training = live_training
        self.last_train_seconds = 0.0
        self._cache: dict[tuple, dict] = {}
        self._curve_images: dict[tuple, str] = {}
        self._live: dict | None = None
        self._showing_live = False
        d_model = self.study.d_model
        self.heads_picker = Dropdown(options=[(f"{h} × d_head {d_model // h}", h) for h in self.study.head_counts],
                                     value=n_heads, description="heads")
        self.seed_picker = Dropdown(options=list(self.study.seeds), value=seed, description="seed")
        self.head_slider = IntSlider(value=0, min=0, max=n_heads - 1, description="head shown")
        self.example_slider = IntSlider(value=0, min=0, max=N_EXAMPLES - 1, description="sequence")
        self.shares_view = HTML()
        self.curves = HTML()
        self.train_heads = Text(value="4", description="heads to train", layout=Layout(width="220px"))
        self.train_button = Button(description=f"train live ({live_training.steps} steps)", button_style="info",
                                   layout=Layout(width="220px"))
        self.progress = IntProgress(value=0, min=0, max=live_training.steps, description="training")
        self.status = HTML(value=(f"Live training: {live_training.steps} steps at learning rate "
                                  f"{live_training.learning_rate:g} (the stored runs: at each h's chosen rate "
                                  f"until solved or plateaued), one CPU thread."))
        self.train_button.on_click(lambda button: self.retrain(self.train_heads.value))
        self.stored_button = Button(description="back to the stored models", layout=Layout(width="220px"))
        self.stored_button.on_click(lambda button: self.show(self.heads_picker.value))
        super().__init__({"heads": self.heads_picker, "seed": self.seed_picker, "head": self.head_slider,
                          "sequence": self.example_slider},
                         panels={"shares": self.shares_view, "curves": self.curves})

    def kernel_widgets(self) -> list[Widget]:
        """Train a model live: a head count, the button, its progress and what it says; the view then shows it."""
        return [HBox([self.train_heads, self.train_button, self.progress, self.stored_button]), self.status]

    # --- data -------------------------------------------------------------------------------------------

    def _measure(self, model, n_heads: int, seed: int) -> dict:
        """Shares over the analysis batch, their table (drawn once for every head and sequence shown) and the example
        maps (N_EXAMPLES, heads, seq, seq) of one model."""
        batch = analysis_batch(self.study.task, seed)
        with torch.no_grad():
            weights = model(batch.inputs).attention_weights[0]  # (batch, heads, seq, seq)
        shares = relation_shares(weights, batch.details["fact_position"]).numpy()  # (heads, 3)
        tokens = [token_names(self.study.task, row) for row in batch.inputs[:N_EXAMPLES].tolist()]
        return {"shares": shares, "shares_table": shares_table_html(shares), "maps": weights[:N_EXAMPLES].numpy(),
                "tokens": tokens, "n_heads": n_heads}

    def _stored_view(self, n_heads: int, seed: int) -> dict:
        key = ("stored", n_heads, seed)
        if key not in self._cache:
            self._cache[key] = self._measure(self.study.model(n_heads, seed), n_heads, seed)
        return self._cache[key]

    def _curves_svg(self, n_heads: int, seed: int, live: dict | None) -> str:
        key = (n_heads, seed, None if live is None else id(live))
        if key not in self._curve_images:
            lines = []
            if n_heads in self.study.head_counts:
                rate = self.study.chosen_learning_rates[n_heads]
                runs = {s: self.study.run(n_heads, rate, s)["curve"] for s in self.study.seeds}
                curves = {s: (np.array(c["step"]), np.array(c["held_out_loss"])) for s, c in runs.items()}
                others = [curves[s] for s in self.study.seeds if s != seed or live is not None]
                label = f"stored (lr {rate:g}), all seeds" if live is not None else "stored, the other seeds"
                lines += [CurveLine(x, y, "#b0b0b0", 1.0, label if i == 0 else "") for i, (x, y) in enumerate(others)]
                if live is None:
                    lines.append(CurveLine(*curves[seed], "#3b528b", 2.5, f"stored, seed {seed} (lr {rate:g})"))
            if live is not None:
                rows = live["log"].rows
                lines.append(CurveLine(np.array([r["step"] for r in rows]), np.array([r["loss"] for r in rows]),
                                       "#e66101", 2.5, f"trained live: {rows[-1]['step']:,} steps, "
                                                       f"lr {self.live_training.learning_rate:g}"))
            # with a live run, zoom in on its steps
            longest = max((run["steps_trained"] for run in self.study.runs if run["seed"] in self.study.seeds
                           and run["learning_rate"] == self.study.chosen_learning_rates.get(run["n_heads"])),
                          default=self.study.max_steps)
            max_step = int(longest) if live is None else int(live["log"].rows[-1]["step"])
            self._curve_images[key] = loss_curves_svg(
                lines, f"Learning curves, h = {n_heads} (d_head = {self.study.d_model // n_heads})", max_step=max_step)
        return self._curve_images[key]

    def _current_view(self) -> ExplorerView:
        if self._showing_live and self._live is not None:
            return self._live_view_data(head=self.head_slider.value, sequence=self.example_slider.value)
        return super()._current_view()

    def view_data(self, *, heads: int, seed: int, head: int, sequence: int) -> ExplorerView:
        """Head ``head`` (clamped to the head count) of the stored model (``heads``, ``seed``) on held-out
        ``sequence``."""
        view = self._stored_view(heads, seed)
        run = self.study.chosen_run(heads, seed)
        curve = run["curve"]
        pairs = zip(curve["step"], curve["held_out"], strict=True)
        solved = next((step for step, accuracy in pairs if accuracy >= 0.9), None)
        intro = (f"h = {heads} heads of d_head = {self.study.d_model // heads} ({run['parameters']:,} parameters, "
                 f"the same for every h), seed {seed}, learning rate {run['learning_rate']:g}: held-out accuracy "
                 f"{curve['held_out'][-1]:.1%} after {run['steps_trained']:,} steps; 90% accuracy "
                 + (f"from step {solved:,}." if solved is not None else "never reached."))
        return self._run_view(intro, view, heads, seed, head, sequence, live=None)

    def _live_view_data(self, *, head: int, sequence: int) -> ExplorerView:
        """The same view of the model trained live."""
        view, n_heads, seed = self._live["view"], self._live["n_heads"], self._live["seed"]
        rows = self._live["log"].rows
        intro = (f"<b>The model you trained live</b>: h = {n_heads} heads of d_head = {self.study.d_model // n_heads}, "
                 f"seed {seed}, {rows[-1]['step']} steps at learning rate {self.live_training.learning_rate:g}: "
                 f"held-out loss {rows[-1]['loss']:.3g}, accuracy {rows[-1]['accuracy']:.1%}. "
                 f"The button under the view goes back to the stored models.")
        return self._run_view(intro, view, n_heads, seed, head, sequence, live=self._live)

    def _run_view(self, intro: str, view: dict, n_heads: int, seed: int, head: int, sequence: int,
                  live: dict | None) -> ExplorerView:
        """Map, share table and learning curves of one measured model (a stored run, or the live one)."""
        head = min(check_whole_number("head", head, minimum=0, meaning="heads are counted from 0"), n_heads - 1)
        sequence = check_whole_number("sequence", sequence, minimum=0, maximum=len(view["maps"]) - 1,
                                      meaning="a held-out sequence, counted from 0")
        attention_map = AttentionMap(
            view["maps"][sequence, head], view["tokens"][sequence],
            title=f"head {head} of {n_heads}, held-out sequence {sequence} (seed {ANALYSIS_BATCH_SEED + seed})")
        panels = {"shares": view["shares_table"], "curves": self._curves_svg(n_heads, seed, live)}
        return ExplorerView(intro, attention_map, panels, slider_max={"head": n_heads - 1}, shown={"head": head})

    def _control_moved(self, name: str) -> None:
        if name in ("heads", "seed"):
            self._showing_live = False  # a stored run was picked
        self.refresh()

    def _state(self) -> dict[str, object]:
        return {"heads": self.heads_picker.value, "seed": self.seed_picker.value, "head": self.head_slider.value,
                "sequence": self.example_slider.value}

    def recipe_arguments(self) -> dict | None:
        if not self.stored_study:
            return None  # a study read from elsewhere cannot be rebuilt by the website's build
        return {"n_heads": self.heads_picker.value, "seed": self.seed_picker.value}

    def site_choices(self) -> dict[str, list]:
        if self._showing_live and self._live is not None:  # the model trained live: its heads and sequences
            return {"head": list(range(self._live["n_heads"])), "sequence": list(range(N_EXAMPLES))}
        return {**self.choices(), "head": list(range(max(self.study.head_counts)))}

    def site_view(self, values: dict[str, object]) -> ExplorerView:
        if self._showing_live and self._live is not None:
            return self._live_view_data(head=values["head"], sequence=values["sequence"])
        return super().site_view(values)

    def site_payload(self) -> dict:
        """The stored runs (a table), and what the page needs to train one live: ``live_training`` (the model's
        shape, the task, :data:`LIVE_TRAINING`, the head counts and messages of :func:`parse_head_count`, and the
        stored seeds' held-out loss curves up to the live run's last step, drawn beside the page's run)."""
        payload = super().site_payload()
        study, training = self.study, self.live_training
        curves = {}
        for n_heads in study.head_counts:
            rate = study.chosen_learning_rates[n_heads]
            runs = [study.run(n_heads, rate, seed)["curve"] for seed in study.seeds]
            curves[str(n_heads)] = {"learning_rate": rate, "runs": [
                {"seed": seed, "step": [int(step) for step in curve["step"] if step <= training.steps],
                 "loss": [float(loss) for step, loss in zip(curve["step"], curve["held_out_loss"], strict=True)
                          if step <= training.steps]} for seed, curve in zip(study.seeds, runs, strict=True)]}
        config = study.config(1).to_dict()
        payload["live_training"] = {
            "config": {name: config[name] for name in ("vocab_size", "max_seq_len", "d_model", "n_layers")},
            "task": study.task.to_dict(), "schedule": training.to_dict(), "examples": N_EXAMPLES,
            "head_counts": head_counts_that_divide(study.d_model), "messages": head_count_messages(study.d_model),
            "curves": curves, "gradient_tolerance": PAGE_GRADIENT_TOLERANCE}
        return payload

    # --- actions ----------------------------------------------------------------------------------------

    def show(self, n_heads: object, seed: object = None) -> bool:
        """Pick the stored model ``(n_heads, seed)`` (seed: keep the current one); False, with a message, if absent."""
        seed = self.seed_picker.value if seed is None else seed
        start = time.perf_counter()
        try:
            self.study.check(n_heads, seed)
        except Exception as problem:  # anything passed in code gets a message, not a traceback
            self.show_problem(problem)
            self.last_refresh_seconds = time.perf_counter() - start
            return False
        self._showing_live = False
        with self.quietly():
            self.heads_picker.value, self.seed_picker.value = int(n_heads), int(seed)
        shown = self.refresh()
        self.publish()
        return shown

    def retrain(self, n_heads: object = None, steps: int | None = None) -> bool:
        """Train a fresh model with ``n_heads`` heads (typed text is fine) and the chosen seed, then show it.

        Uses :data:`LIVE_TRAINING` (``steps`` overrides its step count, e.g. for
        a quick test). Returns False, with a message, for a head count that
        cannot be used or a run that fails; the last good view stays on screen.
        """
        n_heads = self.train_heads.value if n_heads is None else n_heads
        try:
            n_heads = parse_head_count(n_heads, self.study.d_model)
            seed = self.seed_picker.value
            training = TrainingConfig(**{**self.live_training.to_dict(), "seed": seed,
                                         **({} if steps is None else {"steps": steps})})
        except Exception as problem:  # whatever was typed, the view answers with a message
            self.show_problem(problem, "train", self.status)
            return False
        self.progress.max, self.progress.value = training.steps, 0
        self.train_button.disabled = True
        started = time.perf_counter()

        def on_log(step, model, log) -> None:
            self.progress.value = step
            self.status.value = (f"training h = {n_heads}, seed {seed}: step {step:,} of {training.steps:,}, "
                                 f"held-out loss {log.rows[-1]['loss']:.3f}")

        try:
            model, log = train_two_relation_model(self.study.config(n_heads), self.study.task, training, seed=seed,
                                                  on_log=on_log)
            measured = self._measure(model, n_heads, seed)
        except Exception as problem:  # a failed run leaves the last good view and says why
            self.show_problem(problem, "train", self.status)
            return False
        finally:
            self.train_button.disabled = False
        self.last_train_seconds = time.perf_counter() - started
        # curves of the previous live run go: their key holds id() of a dict that may now be reused
        self._curve_images = {key: svg for key, svg in self._curve_images.items() if key[2] is None}
        self._live = {"n_heads": n_heads, "seed": seed, "log": log, "view": measured}
        self._showing_live = True
        self.status.value = (f"Trained h = {n_heads}, seed {seed} in {self.last_train_seconds:.1f} s "
                             f"({training.steps:,} steps at learning rate {training.learning_rate:g}).")
        self.refresh()
        self.publish()
        return True
