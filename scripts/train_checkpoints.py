"""Train every tiny-transformer checkpoint chapter 3 (how specialisation emerges) uses, into data/lab/.

Run from the repository root:

    python -m scripts.train_checkpoints                          # everything
    python -m scripts.train_checkpoints --only induction_2layer  # one group

Groups (each writes its own checkpoints and JSON files, recorded with their
sha256 in data/lab/manifest.json):

* ``induction_2layer`` - the 2-layer attention-only model on the induction task,
  seed 0, with 8 checkpoints spread around its phase change
  (``induction_2layer_seed0_stepNNNNN`` and the final ``induction_2layer_seed0``),
  its loss curve, and held-out head scores every 100 steps;
* ``induction_1layer`` - the same task with one layer (which cannot form an
  induction head);
* ``induction_seeds`` - the 2-layer model from seeds 1-4 (which head takes which
  role differs from seed to seed);
* ``induction_spread`` - the phase-change step over seeds x learning rate x width
  (``scripts/induction_phase_spread.py``; reads the ``induction_seeds`` logs, so it runs after them);

Section 3.7's head-count models are trained by ``scripts/train_head_count_study.py``, and the training
timeline of sections 3.5 and 3.6 is recorded by ``scripts/induction_timeline.py`` (``make lab`` runs both after
this script).

After training, every final induction model is checked on *held-out* repeat
periods (never seen in training): layer 1 of each 2-layer model must have an
induction head (prefix matching > 0.5) and layer 0 a previous-token head
(previous-token score > 0.5), and the 1-layer model neither. The result is
written to ``induction_roles.json``; a failed check exits with status 1.

Everything runs on one thread (``--threads``): on a 2-core machine shared with
other work, two torch processes that each want both cores slow down by an
order of magnitude, and these models are too small to gain from more threads.
The induction models, and the phase-change spread's runs, are independent, so they
are shared out over ``--workers`` single-thread processes (default 2, one per
core); a lock on data/lab keeps their manifest updates from overwriting each other.
Everything here takes 8 to 11 minutes on 2 idle cores (two days' runs).
On one machine and torch build, the same seed and thread count give bit-identical
weights, and :func:`mha.lab.checkpoints.save_checkpoint` writes them canonically
(sorted safetensors metadata, tensors in a fixed order), so every ``.safetensors``
file and its sha256 come out byte-identical; only the wall-clock times differ from
run to run (the ``seconds`` columns of the loss curves and the
``training_seconds`` / ``seconds`` fields, in the JSON result files and in the
manifest's ``extra``). On another CPU the float rounding differs, and over
thousands of steps the weights drift apart (by up to 0.03 after the 5,000 steps
of the induction models), while what the book reads from them holds: retrained on
another machine, all 20 phase-change steps of the spread came out the same.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import multiprocessing
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import torch

from mha.lab.checkpoints import LAB_DIRECTORY, load_checkpoint, record_file, save_checkpoint
from mha.lab.circuit_scores import head_role_scores, k_composition_scores
from mha.lab.tasks import InductionTask
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig
from mha.lab.training import TrainingConfig, TrainingLog, steepest_drop, train

SCRIPT = "python -m scripts.train_checkpoints"
GROUPS = ("induction_2layer", "induction_1layer", "induction_seeds", "induction_spread")

INDUCTION_TASK = InductionTask()  # vocab 64, 40 positions, periods 4..20 minus the held-out 7, 11, 14, 17, 19
INDUCTION_TRAINING = dict(steps=5000, batch_size=32, learning_rate=1e-3, log_every=20, eval_batch_size=256)
INDUCTION_WIDTH = dict(d_model=32, n_heads=4)
INDUCTION_SEEDS = (1, 2, 3, 4)  # seed 0 is the induction_2layer group
SNAPSHOT_EVERY = 100  # steps between held-out head-score measurements (and candidate checkpoints)
HELD_OUT_SEED, HELD_OUT_SIZE = 2024, 512

WORKERS = 2  # processes for the independent trainings (induction models, the spread): one per core of 2 cores

PASS_PREFIX_MATCHING, PASS_PREVIOUS_TOKEN = 0.5, 0.5


def rounded(value, digits: int = 6):
    """Floats to ``digits`` significant digits (nested lists/dicts too), so the JSON files stay small."""
    if isinstance(value, float):
        if not math.isfinite(value):
            return None  # strict JSON has no NaN (the first row's train_loss: no steps yet)
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {key: rounded(item, digits) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(item, digits) for item in value]
    return value


def write_json(name: str, content: dict, regenerate: str, description: str) -> None:
    path = LAB_DIRECTORY / name
    path.write_text(json.dumps(rounded(content), indent=None, separators=(",", ":")) + "\n")
    record_file(path, regenerate=regenerate, description=description)


def held_out_batch():
    return INDUCTION_TASK.held_out().sample(HELD_OUT_SIZE, HELD_OUT_SEED)


def held_out_scores(model: TinyTransformer, batch) -> dict:
    """Head scores (layers x heads lists) and the held-out repeat loss/accuracy for one model."""
    with torch.no_grad():
        output = model(batch.inputs)
    metrics = INDUCTION_TASK.metrics(output.logits, batch)
    scores = head_role_scores(model, batch.inputs, batch.details["repeat_mask"],
                              attention_weights=output.attention_weights)
    return {"repeat_loss": metrics["repeat_loss"], "repeat_accuracy": metrics["repeat_accuracy"],
            **{key: value.tolist() for key, value in scores.items()}}


def pick_phase_change_steps(steepest_step: int, final_step: int) -> list[int]:
    """Eight steps that show the phase change: start, mid-plateau, just before, during, just after, end."""
    def on_grid(step: float) -> int:
        return int(min(max(round(step / SNAPSHOT_EVERY) * SNAPSHOT_EVERY, 0), final_step))

    t = steepest_step
    wanted = [0, on_grid(t / 2), on_grid(t - 400), on_grid(t - 200), on_grid(t), on_grid(t + 200), on_grid(t + 600),
              final_step]
    steps = sorted(set(wanted))
    candidate = 0
    while len(steps) < 8:  # if rounding merged two, fill in with early steps
        candidate += SNAPSHOT_EVERY
        steps = sorted(set(steps) | {candidate})
    return steps


def induction_setup(seed: int, n_layers: int) -> tuple[TinyTransformer, TrainingConfig]:
    """The untrained induction model of ``seed`` with ``n_layers`` layers, and how every induction run trains it."""
    config = TinyTransformerConfig(vocab_size=INDUCTION_TASK.vocab_size, max_seq_len=INDUCTION_TASK.seq_len,
                                   n_layers=n_layers, **INDUCTION_WIDTH)
    return TinyTransformer(config, seed=seed), TrainingConfig(seed=seed, **INDUCTION_TRAINING)


def train_induction(seed: int, n_layers: int, name: str, group: str, keep_series: bool, progress: bool) -> dict:
    """Train one induction model, save its final checkpoint (and the phase-change series), return its record."""
    regenerate = f"{SCRIPT} --only {group}"
    model, training = induction_setup(seed, n_layers)
    config = model.config
    batch = held_out_batch()
    snapshots: dict[int, dict] = {}
    head_score_curve: list[dict] = []

    def on_checkpoint(step: int, current: TinyTransformer, log: TrainingLog) -> None:
        if keep_series:
            snapshots[step] = copy.deepcopy(current.state_dict())
        head_score_curve.append({"step": step, **held_out_scores(current, batch)})

    log = train(model, INDUCTION_TASK, training, progress=progress, checkpoint_steps=(0,),
                checkpoint_every=SNAPSHOT_EVERY, on_checkpoint=on_checkpoint)
    # For a 2-layer model the steepest fall of the repeat loss is the induction phase change; for the
    # 1-layer model it is the earlier, smaller fall that comes from learning to copy tokens from context.
    drop = steepest_drop(log, "repeat_loss", window_steps=200)
    steepest = {"step": int(drop["step"]), "seconds": drop["seconds"], "repeat_loss": drop["repeat_loss"],
                "drop_over_200_steps": drop["drop"]}
    half_solved = next((row for row in log.rows if row["repeat_accuracy"] >= 0.5), None)
    steepest["first_step_repeat_accuracy_0.5"] = None if half_solved is None else half_solved["step"]
    steepest["seconds_at_repeat_accuracy_0.5"] = None if half_solved is None else half_solved["seconds"]

    final_scores = held_out_scores(model, batch)
    extra = {"steepest_repeat_loss_drop": steepest, "held_out_repeat_loss": final_scores["repeat_loss"],
             "training_seconds": log.seconds}
    series = []
    if keep_series:
        live_state = copy.deepcopy(model.state_dict())
        for step in pick_phase_change_steps(steepest["step"], training.steps):
            if step == training.steps:
                continue  # the final checkpoint is saved under the run's own name below
            model.load_state_dict(snapshots[step])
            step_name = f"{name}_step{step:05d}"
            save_checkpoint(model, step_name, seed=seed, steps=step, task=INDUCTION_TASK.to_dict(),
                            training=training.to_dict(), regenerate=regenerate, directory=LAB_DIRECTORY,
                            extra={"series": name, "phase_change_step": steepest["step"]})
            series.append(step_name)
        model.load_state_dict(live_state)
        series.append(name)
        extra["phase_change_series"] = series
    save_checkpoint(model, name, seed=seed, steps=training.steps, task=INDUCTION_TASK.to_dict(),
                    training=training.to_dict(), regenerate=regenerate, directory=LAB_DIRECTORY, extra=extra)
    record = {"name": name, "seed": seed, "config": config.to_dict(), "training": training.to_dict(),
              "task": INDUCTION_TASK.to_dict(), "held_out_periods": list(INDUCTION_TASK.held_out_periods),
              "steepest_repeat_loss_drop": steepest, "phase_change_series": series, "training_seconds": log.seconds,
              "loss_curve": log.rows, "held_out_head_scores": head_score_curve, "final_held_out": final_scores}
    write_json(f"{name}.json", record, regenerate,
               f"loss curve, phase change and held-out head scores every {SNAPSHOT_EVERY} steps of {name}")
    print(f"  {name}: repeat loss falls fastest at step {steepest['step']} ({steepest['seconds']:.1f} s of training); "
          f"held-out repeat loss {final_scores['repeat_loss']:.3f}, training took {log.seconds:.0f} s", flush=True)
    return record


def _induction_job(job: tuple, threads: int) -> None:
    """One induction training in a worker process (it saves its own files; the manifest is locked while written)."""
    torch.set_num_threads(threads)
    train_induction(*job, progress=False)


def run_induction(jobs: list[tuple], workers: int, threads: int, progress: bool) -> None:
    """Train the induction models: one after another, or shared out over ``workers`` single-thread processes."""
    if workers <= 1 or len(jobs) == 1:
        for job in jobs:
            train_induction(*job, progress=progress)
        return
    # spawn, not fork: a forked child of a process that has used torch's thread pools can hang
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for future in as_completed([pool.submit(_induction_job, job, threads) for job in jobs]):
            future.result()  # re-raise a worker's error here


def verify_induction_roles() -> bool:
    """Check the induction claims on held-out periods for every final induction model; write induction_roles.json."""
    batch = held_out_batch()
    names = [f"induction_2layer_seed{seed}" for seed in (0, *INDUCTION_SEEDS)] + ["induction_1layer_seed0"]
    models, all_pass = {}, True
    for name in names:
        model, info = load_checkpoint(name)
        scores = held_out_scores(model, batch)
        previous, prefix = torch.tensor(scores["previous_token"]), torch.tensor(scores["prefix_matching"])
        record = {"seed": info.seed, "n_layers": info.config.n_layers, **scores}
        if info.config.n_layers == 2:
            record["previous_token_heads_layer0"] = [head for head, score in enumerate(previous[0].tolist())
                                                     if score > PASS_PREVIOUS_TOKEN]
            record["induction_heads_layer1"] = [head for head, score in enumerate(prefix[1].tolist())
                                                if score > PASS_PREFIX_MATCHING]
            record["k_composition"] = k_composition_scores(model).tolist()
            passed = bool(record["previous_token_heads_layer0"]) and bool(record["induction_heads_layer1"])
        else:
            passed = prefix.max() < 0.2 and previous.max() < PASS_PREVIOUS_TOKEN
        record["claim_holds"] = bool(passed)
        all_pass &= bool(passed)
        models[name] = record
        print(f"  {name}: previous-token {format_scores(previous)}, prefix-matching {format_scores(prefix)}, "
              f"held-out repeat loss {scores['repeat_loss']:.3f} -> {'ok' if passed else 'CLAIM FAILS'}", flush=True)
    write_json("induction_roles.json",
               {"held_out_periods": list(INDUCTION_TASK.held_out_periods),
                "held_out_batch": {"size": HELD_OUT_SIZE, "seed": HELD_OUT_SEED},
                "thresholds": {"prefix_matching": PASS_PREFIX_MATCHING, "previous_token": PASS_PREVIOUS_TOKEN},
                "models": models},
               f"{SCRIPT} --only verify", "which head plays which role, per seed, on held-out repeat periods")
    return all_pass


def format_scores(scores: torch.Tensor) -> str:
    return " | ".join(" ".join(f"{value:.2f}" for value in layer) for layer in scores.tolist())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=(*GROUPS, "verify"), help="train only these groups (default: all)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1; see the module docstring)")
    parser.add_argument("--workers", type=int, default=WORKERS,
                        help=f"single-thread processes for the independent trainings (default {WORKERS})")
    parser.add_argument("--no-progress", action="store_true", help="hide the tqdm progress bars")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    LAB_DIRECTORY.mkdir(parents=True, exist_ok=True)
    groups = args.only or (*GROUPS, "verify")
    progress = not args.no_progress
    timings = {}
    started = time.perf_counter()

    def timed(group: str, work) -> None:
        print(f"[{group}]", flush=True)
        began = time.perf_counter()
        work()
        timings[group] = time.perf_counter() - began

    induction_jobs = []  # (seed, layers, name, group, keep the phase-change series)
    if "induction_2layer" in groups:
        induction_jobs.append((0, 2, "induction_2layer_seed0", "induction_2layer", True))
    if "induction_1layer" in groups:
        induction_jobs.append((0, 1, "induction_1layer_seed0", "induction_1layer", False))
    if "induction_seeds" in groups:
        induction_jobs += [(seed, 2, f"induction_2layer_seed{seed}", "induction_seeds", False)
                           for seed in INDUCTION_SEEDS]
    if induction_jobs:
        timed("induction", lambda: run_induction(induction_jobs, args.workers, args.threads, progress))
    # --- induction_spread (section 3.5): its own script, scripts/induction_phase_spread.py ---
    if "induction_spread" in groups:
        if not __package__:  # run as a file, it could not import the other tool
            sys.exit("induction_spread runs another tool: python -m scripts.train_checkpoints --only induction_spread")
        from scripts.induction_phase_spread import main as induction_spread_main

        timed("induction_spread", lambda: induction_spread_main(["--workers", str(args.workers)]))
    # --- end induction_spread ---
    verdict = True
    if "verify" in groups:
        print("[verify] held-out periods", INDUCTION_TASK.held_out_periods, flush=True)
        began = time.perf_counter()
        verdict = verify_induction_roles()
        timings["verify"] = time.perf_counter() - began
    total = time.perf_counter() - started
    size = sum(path.stat().st_size for path in Path(LAB_DIRECTORY).iterdir() if path.is_file())
    print("timings: " + ", ".join(f"{group} {seconds:.0f} s" for group, seconds in timings.items())
          + f"; total {total:.0f} s")
    print(f"data/lab holds {size / 1e6:.2f} MB")
    if not verdict:
        print("an induction claim failed on held-out periods; see induction_roles.json", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
