"""Record how the induction head of ``induction_2layer_seed0`` forms, step by step, into data/lab/ (sections 3.5, 3.6).

Run from the repository root (``make lab`` runs it after ``scripts/train_checkpoints.py``):

    python -m scripts.induction_timeline

Trains the 2-layer induction model exactly as ``python -m scripts.train_checkpoints --only induction_2layer``
trains ``induction_2layer_seed0``: the same model, seed, task, data and 5,000 steps, built by that script's
``induction_setup`` and trained by :func:`mha.lab.training.train`, whose ``on_checkpoint`` callback does the
recording. After every logged step (every 20) it keeps the training loss and the repeat loss on the fixed
evaluation batch (the run's loss curve), the held-out repeat loss and each head's previous-token and
prefix-matching scores on the held-out batch (:func:`mha.lab.induction.held_out_batch`, scored as
``train_checkpoints.held_out_scores`` scores it), and the attention maps of every head of both layers on a few
fixed held-out sequences. The phase change is marked as section 3.5 defines it: the steepest 200-step fall of
the repeat loss (:func:`mha.lab.training.steepest_drop`). The timeline's frames are every 100 steps and, around
the phase change, every 20 steps; the loss curve keeps every logged step.

Writes ``data/lab/induction_timeline_seed0.json``, recorded with its sha256 in ``data/lab/manifest.json``, and
read by :func:`mha.lab.timeline.load_induction_timeline`. The maps are stored as whole hundredths (one byte
each, as the website's views store them), gzip-compressed and base64-encoded; nothing that depends on the
clock is stored, so a rerun on the same machine writes the same bytes.

The recording is its own run, not read from the stored checkpoints. It starts from exactly the weights of the
stored step-0 checkpoint (the model is seeded at construction), and on the machine that trained the stored
checkpoints, and on this project's 2-core machine, it retraces the whole series bit for bit, as every run of
``train_checkpoints.py`` does. On another CPU the float rounding differs and the weights drift apart over
thousands of steps, so the recorded maps and scores may differ a little from what the stored checkpoints give:
the script prints how far its weights are from each stored checkpoint of the series, and
``tests/lab/test_timeline.py`` checks the stored timeline against them.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import sys
import time

import numpy as np
import torch

from mha.lab.checkpoints import LAB_DIRECTORY, CheckpointError, checkpoint_names, load_checkpoint
from mha.lab.timeline import REGENERATE_TIMELINE, TIMELINE_FILE, frame_steps, timeline_sequences
from mha.lab.training import TrainingLog, steepest_drop, train

if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.induction_timeline")
from scripts.train_checkpoints import (
    HELD_OUT_SEED,
    HELD_OUT_SIZE,
    INDUCTION_TASK,
    held_out_batch,
    held_out_scores,
    induction_setup,
    write_json,
)

SEED, N_LAYERS, MODEL_NAME = 0, 2, "induction_2layer_seed0"


def encode_maps(maps: np.ndarray) -> dict:
    """Maps (steps, sequences, layers, heads, seq, seq) of uint8 hundredths as the JSON entry the loader reads.

    Stored with the step axis last, so that each cell's weights over training lie side by side: they change
    slowly, and gzip packs them twice as tightly as frame after frame.
    """
    by_cell = np.ascontiguousarray(np.moveaxis(maps.astype(np.uint8), 0, -1))  # (sequences, ..., seq, steps)
    return {"shape": list(by_cell.shape), "dtype": "uint8", "units": "hundredths of attention weight",
            "order": "sequence, layer, head, query (row), key (column), step",
            "encoding": "base64 of gzip", "data": base64.b64encode(gzip.compress(by_cell.tobytes(), compresslevel=9,
                                                                                 mtime=0)).decode("ascii")}


def drift_from_stored(snapshots: dict[int, dict]) -> list[str]:
    """How far the recorded weights are from each stored checkpoint of the series (largest absolute difference)."""
    lines = []
    for step, state in sorted(snapshots.items()):
        name = MODEL_NAME if step == max(snapshots) else f"{MODEL_NAME}_step{step:05d}"
        try:
            stored, _ = load_checkpoint(name)
        except CheckpointError:
            continue  # not stored (yet): nothing to compare with
        differences = [float((state[key] - value).abs().max()) for key, value in stored.state_dict().items()]
        lines.append(f"step {step}: {'identical' if max(differences) == 0 else f'up to {max(differences):.2g}'}")
    return lines


def record(progress: bool) -> dict:
    """Train the model once, recording every logged step; return the timeline file's content."""
    model, training = induction_setup(SEED, N_LAYERS)
    batch = held_out_batch()
    indices = timeline_sequences(batch.details["period"].tolist())
    tokens = batch.inputs[indices]  # (sequences, seq)
    rows: list[dict] = []
    maps: list[np.ndarray] = []
    stored_steps = {int(name[-5:]) for name in _series_names()} | {training.steps}
    snapshots: dict[int, dict] = {}

    def on_checkpoint(step: int, current, log: TrainingLog) -> None:
        if log.rows[-1]["step"] != step:
            raise RuntimeError(f"step {step} was not logged; record only at multiples of log_every.")
        scores = held_out_scores(current, batch)
        rows.append({"step": step, "held_out_loss": scores["repeat_loss"],
                     "previous_token": scores["previous_token"], "prefix_matching": scores["prefix_matching"]})
        with torch.no_grad():
            weights = current(tokens).attention_weights  # (layers, sequences, heads, seq, seq)
        hundredths = np.rint(weights.transpose(0, 1).numpy().astype(np.float64) * 100)  # (sequences, layers, ...)
        maps.append(np.clip(hundredths, 0, 100).astype(np.uint8))
        if step in stored_steps:
            snapshots[step] = {key: value.clone() for key, value in current.state_dict().items()}

    log = train(model, INDUCTION_TASK, training, progress=progress, checkpoint_steps=(0,),
                checkpoint_every=training.log_every, on_checkpoint=on_checkpoint)
    phase = steepest_drop(log, "repeat_loss", window_steps=200)  # section 3.5's phase change
    phase_step = int(phase["step"])
    logged = [int(row["step"]) for row in log.rows]
    frames = frame_steps(logged, phase_step)
    keep = [logged.index(step) for step in frames]
    print("weights against the stored checkpoints: " + ("; ".join(drift_from_stored(snapshots)) or "none stored"))
    periods, starts = batch.details["period"][indices], batch.details["repeat_start"][indices]
    return {
        "name": TIMELINE_FILE.removesuffix(".json"), "model": MODEL_NAME, "seed": SEED,
        "config": model.config.to_dict(), "training": training.to_dict(), "task": INDUCTION_TASK.to_dict(),
        "held_out_batch": {"size": HELD_OUT_SIZE, "seed": HELD_OUT_SEED},
        "phase_change": {"step": phase_step, "repeat_loss": phase["repeat_loss"], "drop_over_200_steps": phase["drop"],
                         "definition": "mha.lab.training.steepest_drop(log, 'repeat_loss', window_steps=200)"},
        "curve": {"steps": logged, "train_loss": log.column("train_loss"), "loss": log.column("repeat_loss")},
        "frames": {"steps": frames, **{key: [rows[i][key] for i in keep]
                                       for key in ("held_out_loss", "previous_token", "prefix_matching")}},
        "sequences": {"indices": indices, "tokens": tokens.tolist(), "period": periods.tolist(),
                      "repeat_start": starts.tolist()},
        "maps": encode_maps(np.stack([maps[i] for i in keep])),
    }


def _series_names() -> list[str]:
    """The stored checkpoints of the series along the way (``induction_2layer_seed0_stepNNNNN``), if any."""
    try:
        return [name for name in checkpoint_names() if name.startswith(f"{MODEL_NAME}_step")]
    except CheckpointError:
        return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-progress", action="store_true", help="hide the tqdm progress bar")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as train_checkpoints.py: one thread, the fastest and reproducible choice here
    LAB_DIRECTORY.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    content = record(progress=not args.no_progress)
    write_json(TIMELINE_FILE, content, REGENERATE_TIMELINE,
               f"the training timeline of {MODEL_NAME}: loss curve, held-out head scores and every head's maps "
               f"on {len(content['sequences']['indices'])} held-out sequences, step by step, phase change marked")
    size = (LAB_DIRECTORY / TIMELINE_FILE).stat().st_size
    print(f"{TIMELINE_FILE}: {len(content['frames']['steps'])} frames, phase change at step "
          f"{content['phase_change']['step']}, {size / 1e3:.0f} kB; took {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
