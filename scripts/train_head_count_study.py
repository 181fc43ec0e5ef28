"""Train the fair head-count study and the mechanism controls of section 3.7 into data/lab/head_count_study.json.

Run from the repository root (``make lab`` runs it after ``scripts/train_checkpoints.py``):

    python scripts/train_head_count_study.py            # everything, 2 single-thread worker processes
    python scripts/train_head_count_study.py --workers 1

Two parts, both stored per run (no weights: the page only needs the numbers):

* ``study`` - the two-relation task of 3.7 with the sweep's model (1 layer, attention only, d_model 32, so the same
  11,904 parameters for every h), for h in HEAD_COUNTS, each at every learning rate of LEARNING_RATES, from SEEDS.
  Every LOG_EVERY steps the accuracy at the ask positions is measured on two fixed batches: the *validation* batch
  (the trainer's own evaluation batch, used to choose each h's learning rate) and a *held-out* batch (HELD_OUT_SEED,
  used to report). A run trains at least MIN_STEPS steps (the fixed budget at which accuracy is compared) and stops
  as soon as both batches reach the strictest threshold, or at MAX_STEPS (a censored run).
* ``controls`` - :class:`~mha.lab.tasks.PairRecallTask` (name the two tokens before ``?``): the two sources from
  one shared vocabulary, from two typed vocabularies, and a one-relation control, each with 1 head, 2 heads, and
  2 layers of 1 head, at CONTROL_LEARNING_RATE, from CONTROL_SEEDS; each run stops once solved (or at
  CONTROL_MAX_STEPS). For one-head runs the final attention from ``?`` to the two sources is stored too.

Each run is a single-thread training whose numbers do not depend on which worker ran it; only the ``seconds`` fields
differ between machines. The study trains about 128,000 steps in all (h = 32 costs about twice as much per step as
the others): about 25 minutes of single-core time, so about 12 to 13 minutes with 2 workers on 2 free cores (measured
per step with evaluation on a lightly loaded 2-core machine; the committed file was made with other work running, in
38 minutes). ``--reuse`` and ``--assemble-only`` rebuild the file from runs saved with ``--progress-file``.
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

from mha.lab.checkpoints import LAB_DIRECTORY, record_file
from mha.lab.head_count_sweep import STUDY_FILE
from mha.lab.tasks import PairRecallTask, TwoRelationTask
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig
from mha.lab.training import TrainingConfig, evaluate, train

SCRIPT = "python scripts/train_head_count_study.py"

TASK = TwoRelationTask()
D_MODEL = 32
HEAD_COUNTS = (1, 2, 4, 32)
LEARNING_RATES = (1e-3, 3e-3, 1e-2)
SEEDS = (0, 1, 2, 3, 4)
THRESHOLDS = (0.95, 0.99, 0.999)  # held-out accuracy that counts as "solved"; the strictest one stops a run
LOG_EVERY = 50
MIN_STEPS = 1000  # the fixed budget: every run is measured here
MAX_STEPS = 3000  # a run that has not solved the task by then is censored
HELD_OUT_SEED, HELD_OUT_SIZE = 20_000, 256
BASE_TRAINING = dict(batch_size=32, log_every=LOG_EVERY, eval_batch_size=256)

CONTROL_TASKS = {"shared": PairRecallTask(typed=False, answer="pair"),
                 "typed": PairRecallTask(typed=True, answer="pair"),
                 "one_relation": PairRecallTask(typed=False, answer="second")}
CONTROL_MODELS = {"1 head": (1, 1), "2 heads": (1, 2), "2 layers x 1 head": (2, 1)}  # (layers, heads)
CONTROL_SEEDS = (0, 1, 2)
CONTROL_MIN_STEPS, CONTROL_MAX_STEPS = 100, 1500
CONTROL_LEARNING_RATE = 3e-3


class _Solved(Exception):
    """Raised from the trainer's callback to stop a run once it is solved."""


def _config(task, n_layers: int, n_heads: int) -> TinyTransformerConfig:
    return TinyTransformerConfig(vocab_size=task.vocab_size, max_seq_len=task.seq_len, d_model=D_MODEL,
                                 n_layers=n_layers, n_heads=n_heads)


def train_until_solved(task, n_layers: int, n_heads: int, learning_rate: float, seed: int, min_steps: int,
                       max_steps: int) -> tuple[TinyTransformer, dict]:
    """Train one model, measuring validation and held-out accuracy every LOG_EVERY steps; stop once both are solved."""
    torch.set_num_threads(1)
    model = TinyTransformer(_config(task, n_layers, n_heads), seed=seed)
    training = TrainingConfig(steps=max_steps, learning_rate=learning_rate, seed=seed, **BASE_TRAINING)
    held_out = task.sample(HELD_OUT_SIZE, HELD_OUT_SEED)
    curve = {"step": [], "validation": [], "held_out": []}
    strictest = max(THRESHOLDS)

    def measure(step: int, current: TinyTransformer, log) -> None:
        validation = log.rows[-1]["accuracy"]  # the trainer's own evaluation batch
        held = evaluate(current, task, held_out)["accuracy"]
        curve["step"].append(step)
        curve["validation"].append(validation)
        curve["held_out"].append(held)
        if step >= min_steps and validation >= strictest and held >= strictest:
            raise _Solved

    began = time.perf_counter()
    try:
        train(model, task, training, progress=False, checkpoint_every=LOG_EVERY, on_checkpoint=measure)
    except _Solved:
        pass
    model.eval()
    record = {"learning_rate": learning_rate, "seed": seed, "n_layers": n_layers, "n_heads": n_heads,
              "steps_trained": curve["step"][-1], "seconds": time.perf_counter() - began,
              "solved_before_cap": curve["held_out"][-1] >= strictest and curve["validation"][-1] >= strictest,
              "curve": curve}
    return model, record


def study_run(n_heads: int, learning_rate: float, seed: int) -> dict:
    _, record = train_until_solved(TASK, 1, n_heads, learning_rate, seed, MIN_STEPS, MAX_STEPS)
    return record


def control_run(variant: str, model_name: str, learning_rate: float, seed: int) -> dict:
    task = CONTROL_TASKS[variant]
    n_layers, n_heads = CONTROL_MODELS[model_name]
    model, record = train_until_solved(task, n_layers, n_heads, learning_rate, seed, CONTROL_MIN_STEPS,
                                       CONTROL_MAX_STEPS)
    record.update(variant=variant, model=model_name)
    if n_layers == 1 and n_heads == 1:  # where does the one head look from "?"
        batch = task.sample(HELD_OUT_SIZE, HELD_OUT_SEED)
        with torch.no_grad():
            weights = model(batch.inputs).attention_weights[0, :, 0]  # (batch, seq, seq)
        rows, queries = torch.nonzero(batch.loss_mask, as_tuple=True)  # (n_scored,) each
        to_first = weights[rows, queries, batch.details["first_position"][rows, queries]]  # (n_scored,)
        to_second = weights[rows, queries, batch.details["second_position"][rows, queries]]
        record["attention_to_first"] = float(to_first.mean())
        record["attention_to_second"] = float(to_second.mean())
    return record


def rounded(value, digits: int = 6):
    if isinstance(value, float):
        return None if not math.isfinite(value) else float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {key: rounded(item, digits) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded(item, digits) for item in value]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="single-thread worker processes (default 2)")
    parser.add_argument("--progress-file", help="append each finished run's record to this JSON-lines file")
    parser.add_argument("--reuse", nargs="+", help="progress files whose finished runs are not trained again")
    parser.add_argument("--assemble-only", action="store_true",
                        help="train nothing: write the result file from the --reuse runs alone (listing what is missing)")
    parser.add_argument("--why-incomplete", help="with --assemble-only: why some arms lack seeds (stored in the file)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    # the controls and the cheap head counts first; h = 32 (d_head 1) costs about ten times as much per step
    jobs = [(control_run, (variant, model_name, CONTROL_LEARNING_RATE, seed)) for variant in CONTROL_TASKS
            for model_name in CONTROL_MODELS for seed in CONTROL_SEEDS]
    jobs += [(study_run, (h, lr, seed)) for h in sorted(HEAD_COUNTS) for lr in sorted(LEARNING_RATES, reverse=True)
             for seed in SEEDS]
    results: dict[tuple, dict] = {}
    for path in args.reuse or ():  # runs finished earlier (same code, same seeds: the same numbers)
        with open(path) as previous:
            for line in previous:
                record = json.loads(line)
                results[tuple(record.pop("job"))] = record
    if args.assemble_only:
        missing = [(function.__name__, *arguments) for function, arguments in jobs
                   if (function.__name__, *arguments) not in results]
        jobs = [(function, arguments) for function, arguments in jobs if (function.__name__, *arguments) in results]
        print(f"assembling {len(jobs)} finished runs; not trained: {missing}", flush=True)
    todo = [(function, arguments) for function, arguments in jobs if (function.__name__, *arguments) not in results]
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(function, *arguments): (function.__name__, *arguments) for function, arguments in todo}
        for future in as_completed(futures):
            key = futures[future]
            record = future.result()
            results[key] = record
            if args.progress_file:
                with open(args.progress_file, "a") as progress:
                    progress.write(json.dumps({"job": list(key), **rounded(record)}) + "\n")
            print(f"  {key}: {record['steps_trained']} steps, held-out {record['curve']['held_out'][-1]:.4f}, "
                  f"{record['seconds']:.0f} s ({len(results)}/{len(jobs)})", flush=True)
    study = [results[(study_run.__name__, *arguments)] for function, arguments in jobs if function is study_run]
    head_counts = sorted({record["n_heads"] for record in study})
    incomplete = []  # arms not trained from every seed (only with --assemble-only, when time ran out)
    for h in head_counts:
        for lr in LEARNING_RATES:
            seeds = sorted(r["seed"] for r in study if r["n_heads"] == h and r["learning_rate"] == lr)
            if seeds != sorted(SEEDS):
                incomplete.append({"n_heads": h, "learning_rate": lr, "seeds": seeds,
                                   "why": args.why_incomplete or "not trained"})
    controls = [results[(control_run.__name__, *arguments)] for function, arguments in jobs if function is control_run]
    content = {"task": TASK.to_dict(), "d_model": D_MODEL, "n_layers": 1, "head_counts": head_counts,
               "learning_rates": list(LEARNING_RATES), "seeds": list(SEEDS), "thresholds": list(THRESHOLDS),
               "log_every": LOG_EVERY, "min_steps": MIN_STEPS, "max_steps": MAX_STEPS,
               "held_out": {"seed": HELD_OUT_SEED, "size": HELD_OUT_SIZE},
               "validation": "the trainer's evaluation batch: task.sample(256, Generator seeded with seed + 1000003)",
               "training": {key: value for key, value in TrainingConfig(**BASE_TRAINING).to_dict().items()
                            if key not in ("seed", "steps", "learning_rate")},
               "runs": sorted(study, key=lambda r: (r["n_heads"], r["learning_rate"], r["seed"])),
               "incomplete": incomplete,
               "controls": {"tasks": {name: task.to_dict() for name, task in CONTROL_TASKS.items()},
                            "models": {name: list(shape) for name, shape in CONTROL_MODELS.items()},
                            "seeds": list(CONTROL_SEEDS), "learning_rate": CONTROL_LEARNING_RATE,
                            "min_steps": CONTROL_MIN_STEPS,
                            "max_steps": CONTROL_MAX_STEPS,
                            "runs": sorted(controls, key=lambda r: (r["variant"], r["model"], r["learning_rate"],
                                                                    r["seed"]))}}
    path = LAB_DIRECTORY / STUDY_FILE
    path.write_text(json.dumps(rounded(content), separators=(",", ":")) + "\n")
    record_file(path, regenerate=SCRIPT, description="one head or many, fairly: every (h, learning rate, seed) run's "
                "validation and held-out accuracy curves, and the mechanism controls")
    print(f"wrote {path} in {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
