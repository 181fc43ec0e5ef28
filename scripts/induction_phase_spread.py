"""When does the induction phase change come? Its spread over seeds, learning rate and width (chapter 3.5).

Run from the repository root (``python -m scripts.train_checkpoints --only induction_spread`` runs it too):

    python -m scripts.induction_phase_spread [--workers 2]

Trains the 2-layer, 4-head attention-only model of section 3.5 on the induction
task for every (d_model, learning rate, seed) in the grid below (the stored
checkpoints' own setting, d_model 32 and learning rate 1e-3, is read from their
logs, ``induction_2layer_seed{0..4}.json``, rather than trained again), each run until
its phase change has passed (:func:`mha.lab.induction.train_until_induction`:
the repeat loss on training periods below 0.5 nats, then 200 steps more; at
most 6000 steps), and writes ``data/lab/induction_phase_spread.json``: per run
the step and seconds of the steepest fall of the repeat loss, the first step at
which the best held-out prefix-matching and previous-token scores pass 0.3, 0.5
and 0.7, and the held-out head scores every 100 steps (so other thresholds can
be read off). It also measures every run's final model on sequences holding 3
to 5 copies of a held-out block (:func:`mha.lab.induction.repeated_block_batch`),
a layout training never shows. No weights are saved. Each run is a one-thread
process; ``--workers`` share them out, fastest settings first (3 to 5 minutes on
2 idle cores). The file is rewritten after every finished run (``complete`` is
false until the last), so an interrupted study still leaves its finished runs.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

import torch

from mha.lab.checkpoints import LAB_DIRECTORY, load_checkpoint, load_json, record_file
from mha.lab.circuit_scores import head_role_scores
from mha.lab.induction import (
    SETTLED_REPEAT_LOSS,
    first_step_above,
    held_out_batch,
    repeated_block_batch,
    train_until_induction,
)
from mha.lab.tasks import InductionTask
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig
from mha.lab.training import TrainingConfig, TrainingLog, steepest_drop

FILE_NAME = "induction_phase_spread.json"
REGENERATE = "python -m scripts.induction_phase_spread"
WIDTHS = (32, 64)
LEARNING_RATES = (1e-3, 3e-3)
SEEDS = (0, 1, 2, 3, 4)
STORED = (32, 1e-3)  # the stored checkpoints' (d_model, learning rate): read from their logs, not retrained
MAX_STEPS = 6000
TRAINING = dict(batch_size=32, log_every=20, eval_batch_size=256)  # as the stored checkpoints of section 3.5
THRESHOLDS = (0.3, 0.5, 0.7)
COPIES = (2, 3, 4, 5)
REPEATED_SIZE, REPEATED_SEED = 512, 4048


def rounded(value, digits: int = 5):
    """Floats to ``digits`` significant digits, nested; NaN/inf to None (strict JSON)."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}") if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: rounded(item, digits) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(item, digits) for item in value]
    return value


def repeated_scores(model: TinyTransformer, task: InductionTask) -> list[dict]:
    """Loss and accuracy on the third and later copies, and head scores, for 2..5 copies of a held-out block."""
    rows = []
    for copies in COPIES:
        batch = repeated_block_batch(task, copies, REPEATED_SIZE, REPEATED_SEED)
        with torch.no_grad():
            output = model(batch.inputs)
        logits = output.logits  # (batch, seq, vocab)
        metrics = task.metrics(logits, batch)
        late = batch.details["copy_index"] >= 3  # (batch, seq): positions in the third copy or later
        late_accuracy = None
        if copies >= 3:
            late_accuracy = float((logits.argmax(-1) == batch.targets)[late].float().mean())
        scores = head_role_scores(model, batch.inputs, batch.details["repeat_mask"],
                                  attention_weights=output.attention_weights)
        rows.append({"copies": copies, "periods": sorted(set(batch.details["period"].tolist())),
                     "repeat_loss": metrics["repeat_loss"], "repeat_accuracy": metrics["repeat_accuracy"],
                     "accuracy_third_copy_on": late_accuracy,
                     "best_prefix_matching": float(scores["prefix_matching"][-1].max()),
                     "best_previous_token": float(scores["previous_token"][0].max())})
    return rows


def run_one(d_model: int, learning_rate: float, seed: int) -> dict:
    """One run of the grid (in a worker process, one thread)."""
    torch.set_num_threads(1)
    task = InductionTask()
    config = TinyTransformerConfig(vocab_size=task.vocab_size, max_seq_len=task.seq_len, d_model=d_model,
                                   n_layers=2, n_heads=4)
    model = TinyTransformer(config, seed=seed)
    training = TrainingConfig(steps=MAX_STEPS, learning_rate=learning_rate, seed=seed, **TRAINING)
    began = time.perf_counter()
    result = train_until_induction(model, task, training, held_out_batch(task))
    scores = result["head_scores"]
    return {"d_model": d_model, "learning_rate": learning_rate, "seed": seed, "formed": result["formed"],
            "phase_step": result["phase_step"], "phase_seconds": result["phase_seconds"],
            "settled_step": result["settled_step"], "steps": result["steps"], "training_seconds": result["seconds"],
            "wall_seconds": time.perf_counter() - began,
            "first_step_prefix_matching_above": {str(t): first_step_above(scores, "best_prefix_matching", t)
                                                 for t in THRESHOLDS},
            "first_step_previous_token_above": {str(t): first_step_above(scores, "best_previous_token", t)
                                                for t in THRESHOLDS},
            "final_held_out_repeat_loss": scores[-1]["repeat_loss"],
            "repeated_blocks": repeated_scores(model, task), "head_scores": scores}


def run_from_stored(seed: int) -> dict:
    """The stored checkpoint run of ``seed`` (d_model 32, lr 1e-3, 5000 steps) summarised as :func:`run_one` does."""
    record = load_json(f"induction_2layer_seed{seed}.json")
    log = TrainingLog(rows=record["loss_curve"], seconds=record["training_seconds"])
    phase = steepest_drop(log, "repeat_loss", window_steps=200)
    scores = [{"step": row["step"], "repeat_loss": row["repeat_loss"],
               "best_previous_token": max(row["previous_token"][0]),
               "best_prefix_matching": max(row["prefix_matching"][-1])} for row in record["held_out_head_scores"]]
    settled = next((row["step"] for row in log.rows if row["repeat_loss"] < SETTLED_REPEAT_LOSS), None)
    model, _ = load_checkpoint(f"induction_2layer_seed{seed}")
    return {"d_model": STORED[0], "learning_rate": STORED[1], "seed": seed, "formed": settled is not None,
            "phase_step": int(phase["step"]), "phase_seconds": phase["seconds"], "settled_step": settled,
            "steps": int(log.rows[-1]["step"]), "training_seconds": log.seconds, "wall_seconds": None,
            "from_stored_checkpoint": f"induction_2layer_seed{seed}",
            "first_step_prefix_matching_above": {str(t): first_step_above(scores, "best_prefix_matching", t)
                                                 for t in THRESHOLDS},
            "first_step_previous_token_above": {str(t): first_step_above(scores, "best_previous_token", t)
                                                for t in THRESHOLDS},
            "final_held_out_repeat_loss": scores[-1]["repeat_loss"],
            "repeated_blocks": repeated_scores(model, InductionTask()), "head_scores": scores}


def write(runs: dict, complete: bool) -> None:
    """Write the study's JSON (finished runs in grid order) and record it in the manifest."""
    grid = [(d, lr, seed) for d in WIDTHS for lr in LEARNING_RATES for seed in SEEDS]
    content = {"task": InductionTask().to_dict(), "n_layers": 2, "n_heads": 4, "widths": list(WIDTHS),
               "learning_rates": list(LEARNING_RATES), "seeds": list(SEEDS), "max_steps": MAX_STEPS,
               "training": TRAINING, "settled_repeat_loss": SETTLED_REPEAT_LOSS, "settle_steps": 200,
               "thresholds": list(THRESHOLDS), "copies": list(COPIES),
               "repeated_batch": {"size": REPEATED_SIZE, "seed": REPEATED_SEED},
               "phase_change": "mha.lab.training.steepest_drop(log, 'repeat_loss', window_steps=200)",
               "complete": complete, "runs": [runs[job] for job in grid if job in runs]}
    write_study(FILE_NAME, content, REGENERATE,
                "phase-change step over seeds x learning rate x width, and scores on repeated blocks")


def write_study(name: str, content: dict, regenerate: str, description: str) -> None:
    """Write a lab study's JSON (numbers :func:`rounded`, compact) to ``data/lab/name`` and record it in the lab's
    manifest with the command that regenerates it and what it holds."""
    path = LAB_DIRECTORY / name
    path.write_text(json.dumps(rounded(content), separators=(",", ":")) + "\n")
    record_file(path, regenerate=regenerate, description=description)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="single-thread processes (default 2)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    started = time.perf_counter()
    runs = {(*STORED, seed): run_from_stored(seed) for seed in SEEDS}
    jobs = [(d, lr, seed) for d in WIDTHS for lr in LEARNING_RATES for seed in SEEDS if (d, lr) != STORED]
    jobs.sort(key=lambda job: (-job[1], -job[0], job[2]))  # large learning rate, wide model first: the fastest
    write(runs, complete=False)
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(run_one, *job): job for job in jobs}
        for future in as_completed(futures):
            run = future.result()
            runs[futures[future]] = run
            write(runs, complete=len(runs) == len(WIDTHS) * len(LEARNING_RATES) * len(SEEDS))
            print(f"  d_model {run['d_model']}, lr {run['learning_rate']:g}, seed {run['seed']}: phase change at step "
                  f"{run['phase_step']} ({run['phase_seconds'] or float('nan'):.1f} s of training), stopped at "
                  f"{run['steps']} ({len(runs)}/{len(WIDTHS) * len(LEARNING_RATES) * len(SEEDS)})", flush=True)
    print(f"wrote {LAB_DIRECTORY / FILE_NAME} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
