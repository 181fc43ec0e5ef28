"""The training timeline of the lab's induction model, step by step (sections 3.5 "Induction heads" and 3.6).

A reader scrubs training from step 0 to the end of the recorded run (:mod:`mha.lab.timeline`) and watches the
induction head form: the maps of every head on a few held-out sequences at the chosen step, each head's
previous-token and prefix-matching scores, and the loss curve with the phase change marked. The view is drawn by
``views.js`` (:mod:`mha.views.widget`) from :meth:`TrainingTimelineView.site_payload` (kind ``"timeline"``), which
holds every frame: in a notebook through anywidget, on the website from the payload the book's build embeds.
"""

from __future__ import annotations

import math

import numpy as np

from mha.book import head_label
from mha.core.validation import check_whole_number
from mha.lab.checkpoints import load_json
from mha.lab.induction import ROLE_SCORE_THRESHOLD
from mha.lab.timeline import TIMELINE_FILE, load_induction_timeline
from mha.views import payloads
from mha.views.induction_explorer import prefix_matching_keys
from mha.views.widget import ViewWidget

__all__ = ["PAGE_TRAINER_SPREAD_FILE", "TrainingTimelineView", "page_training"]

PAGE_TRAINER_SPREAD_FILE = "web_trainer_spread.json"  # written by scripts/web_trainer_spread.py
PAGE_GRADIENT_TOLERANCE = 1e-4  # tests/views/test_web_trainer.py: the page's one-step gradients against PyTorch's


def _numbers(values: np.ndarray, digits: int) -> list:
    """Nested lists of floats rounded to ``digits`` decimals, NaN as None (the payload's JSON has no NaN)."""
    rounded = np.round(np.asarray(values, dtype=np.float64), digits)
    return np.where(np.isnan(rounded), None, rounded).tolist()


def page_training(file_name: str = PAGE_TRAINER_SPREAD_FILE) -> dict:
    """What the timeline's "Train one in your page" needs to place the reader's run (section 3.5): the setting the
    page's trainer (trainer.js) uses, and the formation steps of the same setting trained by the package (PyTorch)
    over the seeds of ``file_name`` in the lab's folder."""
    study = load_json(file_name)
    steps = sorted(run["formation_step"] for run in study["kernel_runs"] if run["formed"])
    if not steps:
        raise ValueError(f"{file_name} holds no kernel run that formed an induction head; regenerate it with "
                         "python -m scripts.web_trainer_spread")
    return {"setting": study["setting"], "threshold": study["threshold"], "score_every": study["score_every"],
            "kernel_formation": {"seeds": len(study["kernel_runs"]), "formed": len(steps), "min": steps[0],
                                 "max": steps[-1]},
            "gradient_tolerance": PAGE_GRADIENT_TOLERANCE, "source": f"data/lab/{file_name}"}


class TrainingTimelineView:
    """Scrub the recorded training of the 2-layer induction model, frame by frame (sections 3.5 and 3.6).

    ``file_name`` is the timeline in the lab's folder (default :data:`mha.lab.timeline.TIMELINE_FILE`); ``step``
    the recorded step the view opens at (default 0, before training).
    """

    what_to_try = ("Press play and watch layer 1 while the loss curve drops; stop at the phase change and step "
                   "through it a frame at a time; compare a short period (7) with a long one (19).")
    what_to_notice = ("A layer-0 head turns to the previous token first; only then does a layer-1 head begin to "
                      "put its weight on the circles (the token after an earlier copy), and the repeat loss falls "
                      "as that head forms. The sequences are held out: their periods were never trained on.")
    opening = "layers"  # every head of the model at once
    site_note = ("The frames are one recorded run of the model trained for section 3.5: every 100 steps, and every "
                 "20 steps around the phase change.")

    def __init__(self, file_name: str = TIMELINE_FILE, *, step: int = 0) -> None:
        self.file_name = file_name
        self.timeline = load_induction_timeline(file_name)
        step = check_whole_number("step", step, minimum=0, meaning="a recorded training step, e.g. 0 or 1000")
        self.start = self.timeline.frame_at(step)  # ValueError naming the nearest recorded steps
        self.step = step

    def recipe(self) -> dict:
        """How the book's build rebuilds this view for the website: its class name and arguments."""
        return {"view": type(self).__name__, "arguments": {"file_name": self.file_name, "step": self.step}}

    def page_model(self) -> None:
        """No model runs in the page: every frame is recorded in the payload."""
        return None

    def describe(self) -> str:
        """One line saying what the view shows."""
        timeline = self.timeline
        return (f"Training timeline of {timeline.model}: {len(timeline.steps)} frames from step 0 to "
                f"{int(timeline.steps[-1]):,}, phase change at step {timeline.phase_change_step:,}, opening at "
                f"step {self.step:,}")

    def __repr__(self) -> str:
        return f"TrainingTimelineView({self.describe()})"

    def _repr_mimebundle_(self, **kwargs) -> dict:
        payload = payloads.encode_payload(payloads.site_payload(self, hosted=True))
        return payloads.notebook_bundle(self, ViewWidget(payload=payload), **kwargs)

    def site_payload(self) -> dict:
        """Everything the page needs to draw every frame, as ``payloads.encode_payload`` packs it.

        Per frame (``n_steps``): ``steps``; ``loss`` (repeat loss on the evaluation batch of training periods),
        ``train_loss`` and ``held_out_loss``, nats (None where not defined); ``previous_token`` and
        ``prefix_matching`` (n_steps, n_layers, n_heads) on the held-out batch. ``curve`` holds the loss curve at
        every logged step, ``phase_change`` its step, ``chance_loss`` log(vocabulary). ``sequences`` give each
        sequence's ``tokens``, axis ``labels``, ``period``, ``repeat_start``, ``title`` and the ``marked`` (query,
        key) cells an induction head attends to. ``page_training`` (:func:`page_training`) lets the reader train
        the model in the page and place their run. ``weights`` is bytes: every map in whole hundredths, laid out as
        ``maps["shape"]`` = (sequences, layers, heads, query, key, steps), so a cell's weights over training lie
        side by side.
        """
        timeline = self.timeline
        n_sequences, n_layers, n_heads, seq = timeline.maps.shape[1:5]
        by_cell = np.ascontiguousarray(np.moveaxis(timeline.maps, 0, -1))  # (sequences, layers, heads, seq, seq, steps)
        sequences = []
        for tokens, period, start in zip(timeline.tokens.tolist(), timeline.periods.tolist(),
                                         timeline.repeat_starts.tolist(), strict=True):
            sequences.append({"tokens": tokens, "labels": [str(token) for token in tokens], "period": period,
                              "repeat_start": start, "marked": [list(cell) for cell in prefix_matching_keys(tokens)],
                              "title": f"held-out period {period} (never trained on), repeat from position {start}"})
        return {
            "kind": "timeline", "model": timeline.model, "n_layers": n_layers, "n_heads": n_heads, "seq_len": seq,
            "n_sequences": n_sequences, "n_steps": len(timeline.steps),
            "head_labels": [[head_label(layer, head) for head in range(n_heads)] for layer in range(n_layers)],
            "steps": timeline.steps.tolist(), "start": self.start,
            "loss": _numbers(timeline.loss, 4), "train_loss": _numbers(timeline.train_loss, 4),
            "held_out_loss": _numbers(timeline.held_out_loss, 4),
            "previous_token": _numbers(timeline.previous_token, 3),
            "prefix_matching": _numbers(timeline.prefix_matching, 3),
            "curve": {"steps": timeline.curve_steps.tolist(), "loss": _numbers(timeline.curve_loss, 4),
                      "train_loss": _numbers(timeline.curve_train_loss, 4)},
            "chance_loss": round(math.log(timeline.vocab_size), 4),
            "phase_change": {"step": timeline.phase_change_step,
                             "label": "phase change: the steepest 200-step fall of the repeat loss"},
            "threshold": ROLE_SCORE_THRESHOLD,
            "sequences": sequences,
            "maps": {"offset": 0, "shape": list(by_cell.shape), "units": "hundredths",
                     "order": "sequence, layer, head, query (row), key (column), step"},
            "guidance": {"try": self.what_to_try, "notice": self.what_to_notice}, "note": self.site_note,
            "page_training": page_training(),
            "weights": by_cell.tobytes(),
        }


