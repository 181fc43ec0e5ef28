"""Train section 3.7's head-count study and mechanism controls: data/lab/head_count_study.json and the checkpoints.

Run from the repository root (``make lab`` runs it after ``scripts/train_checkpoints.py``):

    python scripts/train_head_count_study.py            # everything, 2 single-thread worker processes
    python scripts/train_head_count_study.py --workers 1

Two parts:

* ``study`` - the two-relation task of 3.7 with a 1-layer attention-only model of d_model 32 (the same 11,904
  parameters for every h), for h in HEAD_COUNTS, each at every learning rate of LEARNING_RATES, from SEEDS.
  Every LOG_EVERY steps the accuracy at the ask positions is measured on two fixed batches: the *validation* batch
  (the trainer's own evaluation batch, used to choose each h's learning rate) and a *held-out* batch (HELD_OUT_SEED,
  used to report), with the held-out loss; every ROLE_EVERY steps (and at the last) what each head attends to on the
  run's analysis batch and which half of the answer is right (the role curve). A run trains at least MIN_STEPS
  steps (the fixed budget at which accuracy is compared) and stops as soon as both batches reach the strictest
  threshold, or at MAX_STEPS (a censored run). Then each h's learning rate is chosen on the validation batch
  (:func:`mha.lab.head_count_sweep.best_learning_rates` at CHOICE_THRESHOLD) and the final weights of that rate's
  runs are saved as ``head_count_h{h}_seed{seed}``: the models the chapter's analyses and explorer read.
* ``controls`` - :class:`~mha.lab.tasks.PairRecallTask` (name the two tokens before ``?``): the two sources from
  one shared vocabulary, from two typed vocabularies, and a one-relation control, each with 1 head, 2 heads, and
  2 layers of 1 head, at CONTROL_LEARNING_RATE, from CONTROL_SEEDS; each run stops once solved (or at
  CONTROL_MAX_STEPS). For one-head runs the final attention from ``?`` to the two sources is stored too.

Each run is a single-thread training whose numbers do not depend on which worker ran it; only the ``seconds`` fields
differ between machines. The study trains about 135,000 steps (h = 32 costs about three times as much per step as
h = 1, and at the highest rate the narrowest heads train to the cap): 13 to 15 minutes with 2 workers on 2 free
cores. ``--reuse`` and ``--assemble-only`` rebuild the file from
runs saved with ``--progress-file`` (which then holds the weights too).
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

from mha.lab.checkpoints import LAB_DIRECTORY, record_file, save_checkpoint
from mha.lab.head_count_sweep import (
    STUDY_FILE,
    analysis_batch,
    answer_part_accuracy,
    best_learning_rates,
    relation_shares,
    study_from_content,
)
from mha.lab.tasks import PairRecallTask, TwoRelationTask
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig
from mha.lab.training import TrainingConfig, evaluate, train

SCRIPT = "python scripts/train_head_count_study.py"

TASK = TwoRelationTask()
D_MODEL = 32
HEAD_COUNTS = (1, 2, 4, 8, 16, 32)  # d_head 32 down to 1
LEARNING_RATES = (3e-3, 1e-2, 3e-2)  # a first grid, (1e-3, 3e-3, 1e-2), chose its top rate for every h
SEEDS = (0, 1, 2, 3, 4)
THRESHOLDS = (0.95, 0.99, 0.999)  # held-out accuracy that counts as "solved"; the strictest one stops a run
LOG_EVERY = 50
MIN_STEPS = 500  # the fixed budget: every run is measured here
MAX_STEPS = 3000  # a run that has not solved the task by then is censored
HELD_OUT_SEED, HELD_OUT_SIZE = 20_000, 256
ROLE_EVERY = 250  # steps between measurements of what each head attends to (and at a run's last step)
CHOICE_THRESHOLD = 0.999  # the accuracy whose median steps choose each h's learning rate (the saved models)
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
                       max_steps: int, on_log=None) -> tuple[TinyTransformer, dict]:
    """Train one model, measuring validation and held-out accuracy every LOG_EVERY steps; stop once both are solved.

    ``on_log(step, model, last)`` is called at every measurement (``last``: the run stops here).
    """
    torch.set_num_threads(1)
    model = TinyTransformer(_config(task, n_layers, n_heads), seed=seed)
    training = TrainingConfig(steps=max_steps, learning_rate=learning_rate, seed=seed, **BASE_TRAINING)
    held_out = task.sample(HELD_OUT_SIZE, HELD_OUT_SEED)
    curve = {"step": [], "validation": [], "held_out": [], "held_out_loss": []}
    strictest = max(THRESHOLDS)

    def measure(step: int, current: TinyTransformer, log) -> None:
        validation = log.rows[-1]["accuracy"]  # the trainer's own evaluation batch
        held = evaluate(current, task, held_out)
        curve["step"].append(step)
        curve["validation"].append(validation)
        curve["held_out"].append(held["accuracy"])
        curve["held_out_loss"].append(held["loss"])
        solved = step >= min_steps and validation >= strictest and held["accuracy"] >= strictest
        if on_log is not None:
            on_log(step, current, solved or step == max_steps)
        if solved:
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
    """One (h, learning rate, seed) run: its record, with the role curve, and its final weights (``state``)."""
    batch = analysis_batch(TASK, seed)
    role_curve = {"step": [], "attention_to_fact": [], "attention_to_previous": [], "value_accuracy": [],
                  "modifier_accuracy": []}

    def measure_roles(step: int, current: TinyTransformer, last: bool) -> None:
        if step % ROLE_EVERY and not last:
            return
        with torch.no_grad():
            output = current(batch.inputs)
        shares = relation_shares(output.attention_weights[0], batch.details["fact_position"])  # (heads, 3)
        parts = answer_part_accuracy(output.logits, batch, TASK)
        for key, value in (("step", step), ("attention_to_fact", shares[:, 0].tolist()),
                           ("attention_to_previous", shares[:, 1].tolist()), ("value_accuracy", parts["value"]),
                           ("modifier_accuracy", parts["modifier"])):
            role_curve[key].append(value)

    model, record = train_until_solved(TASK, 1, n_heads, learning_rate, seed, MIN_STEPS, MAX_STEPS, measure_roles)
    record.update(parameters=model.parameter_count(), role_curve=role_curve)
    return {**record, "state": {key: value.detach().clone() for key, value in model.state_dict().items()}}


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
    parser.add_argument(
        "--assemble-only",
        action="store_true",
        help="train nothing: write the result file from the --reuse runs alone (listing what is missing)",
    )
    parser.add_argument("--why-incomplete", help="with --assemble-only: why some arms lack seeds (stored in the file)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    # the longest runs first (many heads cost more per step; a low rate trains longer), the short controls last,
    # so that the two workers finish at about the same time
    jobs = [(study_run, (h, lr, seed)) for h in sorted(HEAD_COUNTS, reverse=True) for lr in sorted(LEARNING_RATES)
            for seed in SEEDS]
    jobs += [(control_run, (variant, model_name, CONTROL_LEARNING_RATE, seed)) for variant in CONTROL_TASKS
             for model_name in CONTROL_MODELS for seed in CONTROL_SEEDS]
    results: dict[tuple, dict] = {}
    for path in args.reuse or ():  # runs finished earlier (same code, same seeds: the same numbers)
        with open(path) as previous:
            for line in previous:
                record = json.loads(line)
                if "state" in record:
                    record["state"] = {key: torch.tensor(value, dtype=torch.float32)
                                       for key, value in record["state"].items()}
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
                exact = {"state": {k: v.tolist() for k, v in record["state"].items()}} if "state" in record else {}
                with open(args.progress_file, "a") as progress:  # the weights exactly, the numbers rounded
                    fields = {k: v for k, v in record.items() if k != "state"}
                    progress.write(json.dumps({"job": list(key), **rounded(fields), **exact}) + "\n")
            print(f"  {key}: {record['steps_trained']} steps, held-out {record['curve']['held_out'][-1]:.4f}, "
                  f"{record['seconds']:.0f} s ({len(results)}/{len(jobs)})", flush=True)
    study = [results[(study_run.__name__, *arguments)] for function, arguments in jobs if function is study_run]
    states = {(r["n_heads"], r["learning_rate"], r["seed"]): r.pop("state") for r in study}
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
    # each h's learning rate, chosen on the validation batch; that rate's final weights are the chapter's models
    chosen = best_learning_rates(study_from_content(rounded(content)), CHOICE_THRESHOLD)
    names = {}
    for h, rate in chosen.items():
        for seed in SEEDS:
            if (h, rate, seed) not in states:
                continue
            record = next(r for r in study if (r["n_heads"], r["learning_rate"], r["seed"]) == (h, rate, seed))
            model = TinyTransformer(_config(TASK, 1, h), seed=seed)
            model.load_state_dict(states[(h, rate, seed)])
            name = f"head_count_h{h}_seed{seed}"
            training = TrainingConfig(steps=record["steps_trained"], learning_rate=rate, seed=seed, **BASE_TRAINING)
            save_checkpoint(model, name, seed=seed, steps=record["steps_trained"], task=TASK.to_dict(),
                            training=training.to_dict(), regenerate=SCRIPT, directory=LAB_DIRECTORY,
                            extra={"held_out_accuracy": record["curve"]["held_out"][-1],
                                   "chosen_at_threshold": CHOICE_THRESHOLD})
            names[f"{h}/{seed}"] = name
    content["models"] = {"threshold": CHOICE_THRESHOLD, "split": "validation",
                         "learning_rates": {str(h): rate for h, rate in chosen.items()}, "checkpoints": names}
    print("chosen learning rates: " + ", ".join(f"h = {h}: {rate:g}" for h, rate in chosen.items()), flush=True)
    path = LAB_DIRECTORY / STUDY_FILE
    path.write_text(json.dumps(rounded(content), separators=(",", ":")) + "\n")
    record_file(
        path,
        directory=LAB_DIRECTORY,
        regenerate=SCRIPT,
        description="one head or many, fairly: every (h, learning rate, seed) run's "
        "validation and held-out accuracy curves and role curves, each h's chosen rate, and the mechanism "
        "controls",
    )
    print(f"wrote {path} in {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
