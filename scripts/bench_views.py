"""Time every interactive view's update (the budget is 50 ms per update on 2 CPU cores), and a live retrain.

    python -m scripts.bench_views

Each view is built once, then each control is moved through several values; the table gives the median and the
worst update time over those moves (the first draw, which warms caches, is reported separately).
"""

from __future__ import annotations

import statistics
import sys
import time

BUDGET_MS = 50.0
RETRAIN_BUDGET_S = 20.0  # the head-count explorer's live retrain of the slowest model (h = 32), full length


def time_random_layer_explorer() -> tuple[float, list[float]]:
    from mha.views.random_layer_explorer import RandomLayerExplorer

    start = time.perf_counter()
    explorer = RandomLayerExplorer()
    first = time.perf_counter() - start
    timings = []
    for n_heads in (1, 2, 3, 4, 6, 8, 12, 4):
        explorer.heads_slider.value = n_heads
        timings.append(explorer.last_refresh_seconds)
    for head in (0, 1, 2, 3):
        explorer.head_slider.value = head
        timings.append(explorer.last_refresh_seconds)
    for sentence in (
        "A short one .",
        "The keys to the cabinet are on the table .",
        "Colourless green ideas sleep furiously .",
    ):
        explorer.sentence_box.value = sentence
        timings.append(explorer.last_refresh_seconds)
    return first, timings


def time_model_explorer() -> tuple[float, list[float]]:
    from mha.views.model_explorer import ModelHeadExplorer

    start = time.perf_counter()
    explorer = ModelHeadExplorer(["The keys to the cabinet are on the table .",
                                  "The trophy does not fit in the suitcase because it is too big ."])
    first = time.perf_counter() - start
    timings = []
    for layer in (1, 2, 3, 4, 5, 0):  # start away from the initial layer, so every move is a real update
        explorer.layer_slider.value = layer
        timings.append(explorer.last_refresh_seconds)
    for head in (3, 7, 11):
        explorer.head_slider.value = head
        timings.append(explorer.last_refresh_seconds)
    explorer.word_level.value = True
    timings.append(explorer.last_refresh_seconds)
    for typed in ("My sister's dog chased the neighbours' cat .", "Paris is the capital of France ."):
        explorer.own_sentence.value = typed  # a new sentence: tokenise, run the model, draw
        timings.append(explorer.last_refresh_seconds)
    return first, timings


def time_every_control(make_view) -> tuple[float, list[float]]:
    """Build a view, then move each of its sliders and menus through a few values, timing every update."""
    start = time.perf_counter()
    explorer = make_view()
    first = time.perf_counter() - start
    timings = []
    for control, values in _controls_of(explorer):
        for value in values:
            if value == control.value:
                continue  # not a move: no update to time
            control.value = value
            timings.append(explorer.last_refresh_seconds)
    return first, timings


def time_head_count_study_explorer() -> tuple[float, list[float]]:
    from mha.views.head_count_explorer import HeadCountStudyExplorer

    return time_every_control(HeadCountStudyExplorer)


def time_lab_explorer() -> tuple[float, list[float]]:
    from mha.views.induction_explorer import InductionLabExplorer

    return time_every_control(InductionLabExplorer)


def time_live_retrain() -> float:
    """Seconds for the head-count explorer to retrain its slowest model (32 heads) for the full live run."""
    from mha.views.head_count_explorer import HeadCountStudyExplorer

    explorer = HeadCountStudyExplorer()
    explorer.seed_picker.value = 0
    explorer.train_heads.value = "32"
    started = time.perf_counter()
    if not explorer.retrain():
        raise RuntimeError(f"the live retrain failed: {explorer.status.value}")
    return time.perf_counter() - started


def _controls_of(explorer) -> list:
    """Every slider or dropdown of a view (mha.views.explorer.Explorer.controls), with a few values to move it to."""
    from ipywidgets import Dropdown, IntSlider

    moves = []
    for control in explorer.controls.values():
        if isinstance(control, IntSlider):
            moves.append((control, [v for v in (control.max, control.min, (control.min + control.max) // 2)]))
        elif isinstance(control, Dropdown):
            moves.append(
                (control, [option[1] if isinstance(option, tuple) else option for option in control.options][:4])
            )
    return moves


VIEWS = {"chapter 1: RandomLayerExplorer": time_random_layer_explorer,
         "chapter 3: ModelHeadExplorer": time_model_explorer,
         "chapter 3: InductionLabExplorer": time_lab_explorer,
         "chapter 3: HeadCountStudyExplorer": time_head_count_study_explorer}


def main() -> int:
    print(f"{'view':40s} {'first draw ms':>14s} {'median ms':>10s} {'worst ms':>9s}  within budget")
    over = 0
    for name, measure in VIEWS.items():
        first, timings = measure()
        median, worst = statistics.median(timings) * 1000, max(timings) * 1000
        ok = median <= BUDGET_MS
        over += not ok
        print(f"{name:40s} {first * 1000:14.0f} {median:10.0f} {worst:9.0f}  {'yes' if ok else 'NO'}")
    print(f"budget: median update <= {BUDGET_MS:.0f} ms; {over} over budget")
    seconds = time_live_retrain()
    ok = seconds <= RETRAIN_BUDGET_S
    over += not ok
    print(f"live retrain of h = 32 in the head-count explorer: {seconds:.1f} s (budget {RETRAIN_BUDGET_S:.0f} s) "
          f"{'yes' if ok else 'NO'}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
