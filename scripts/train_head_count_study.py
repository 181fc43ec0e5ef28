"""Train section 3.7's head-count study and mechanism controls: data/lab/head_count_study.json and the checkpoints.

Run from the repository root (``make lab`` runs it after ``scripts/train_checkpoints.py``):

    python -m scripts.train_head_count_study            # everything, 2 single-thread worker processes
    python -m scripts.train_head_count_study --workers 1

Two parts:

* ``study`` - the two-relation task of 3.7 with a 1-layer attention-only model of d_model 32 (the same 11,904
  parameters for every h), for h in HEAD_COUNTS, each at every learning rate of LEARNING_RATES, from the choice
  SEEDS. Every LOG_EVERY steps the accuracy at the ask positions is measured on two fixed batches: the *validation*
  batch (the trainer's own evaluation batch, used to stop runs and to choose each h's learning rate) and a
  *held-out* batch (HELD_OUT_SEED, used to report), with the held-out loss; every ROLE_EVERY steps (and at the
  last) what each head attends to on the run's analysis batch and which half of the answer is right (the role
  curve). A run trains at least MIN_STEPS steps (the fixed budget at which accuracy is compared) and then stops
  for one of three reasons, stored with it: "solved" (both batches at the strictest threshold), "plateau" (its best
  validation accuracy has gained less than PLATEAU_GAIN over the last PLATEAU_WINDOW steps) or "cap" (MAX_STEPS, a
  safety cap that a run still improving should not meet). When every rate of an h has been trained from the
  choice seeds, its rate is chosen on the validation batch (:func:`mha.lab.head_count_study.best_learning_rates`:
  the smallest restricted mean steps to CHOICE_THRESHOLD up to MAX_STEPS) and the REPORT_SEEDS are trained at that
  rate alone, to report it on seeds the choice never saw. The final weights of the chosen rate's runs from the
  choice seeds are saved as ``head_count_h{h}_seed{seed}``: the models the chapter's analyses and explorer read.
* ``controls`` - :class:`~mha.lab.tasks.PairRecallTask` (name the two tokens before ``?``): the two sources from
  one shared vocabulary, from two typed vocabularies, and a one-relation control, each with 1 head, 2 heads, and
  2 layers of 1 head, at CONTROL_LEARNING_RATE, from CONTROL_SEEDS; each run stops once solved (or at
  CONTROL_MAX_STEPS). For one-head runs the final attention from ``?`` to the two sources is stored too.

Each run is a single-thread training whose numbers do not depend on which worker ran it or how many ran beside it;
its ``seconds`` (wall) and ``cpu_seconds`` (its process's CPU time) fields do. On another CPU model the last digits
of float arithmetic can differ, and over thousands of steps the curves then drift apart a little. ``--reuse`` and
``--assemble-only`` rebuild the file from runs saved with ``--progress-file`` (which then holds the weights too).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

import torch

from mha.lab.checkpoints import LAB_DIRECTORY, record_file, save_checkpoint
from mha.lab.head_count_study import STUDY_FILE, best_learning_rates, study_from_content
from mha.lab.head_count_sweep import analysis_batch, answer_part_accuracy, relation_shares
from mha.lab.tasks import PairRecallTask, TwoRelationTask
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig
from mha.lab.training import TrainingConfig, evaluate, train

SCRIPT = "python -m scripts.train_head_count_study"

TASK = TwoRelationTask()
D_MODEL = 32
HEAD_COUNTS = (1, 2, 4, 8, 16, 32)  # d_head 32 down to 1
LEARNING_RATES = (3e-3, 1e-2, 3e-2)  # a first grid, (1e-3, 3e-3, 1e-2), chose its top rate for every h
SEEDS = (0, 1, 2, 3, 4)  # every rate is trained from these, and each h's rate chosen on them
REPORT_SEEDS = (5, 6, 7, 8, 9)  # trained at each h's chosen rate only: the report
THRESHOLDS = (0.95, 0.99, 0.999)  # held-out accuracy that counts as "solved"; the strictest one stops a run
LOG_EVERY = 50
MIN_STEPS = 500  # the fixed budget: every run is measured here
PLATEAU_WINDOW, PLATEAU_GAIN = 2500, 0.005  # stop when the best validation accuracy gained < 0.005 in 2,500 steps
MAX_STEPS = 10_000  # the safety cap, and the horizon of the restricted mean that chooses each h's rate
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


def plateaued(steps: list[int], validation: list[float]) -> bool:
    """True if the best validation accuracy has gained less than PLATEAU_GAIN over the last PLATEAU_WINDOW steps."""
    if steps[-1] - steps[0] < PLATEAU_WINDOW:
        return False
    before = max(accuracy for step, accuracy in zip(steps, validation, strict=True)
                 if step <= steps[-1] - PLATEAU_WINDOW)
    return max(validation) - before < PLATEAU_GAIN


def train_until_solved(task, n_layers: int, n_heads: int, learning_rate: float, seed: int, min_steps: int,
                       max_steps: int, on_log=None) -> tuple[TinyTransformer, dict]:
    """Train one model, measuring validation and held-out accuracy every LOG_EVERY steps, until it is solved on both,
    or its validation accuracy has plateaued, or ``max_steps``; the record's ``stopped`` says which.

    ``on_log(step, model, last)`` is called at every measurement (``last``: the run stops here).
    """
    torch.set_num_threads(1)
    model = TinyTransformer(_config(task, n_layers, n_heads), seed=seed)
    training = TrainingConfig(steps=max_steps, learning_rate=learning_rate, seed=seed, **BASE_TRAINING)
    held_out = task.sample(HELD_OUT_SIZE, HELD_OUT_SEED)
    curve = {"step": [], "validation": [], "held_out": [], "held_out_loss": []}
    strictest = max(THRESHOLDS)
    stopped = ["cap"]

    def measure(step: int, current: TinyTransformer, log) -> None:
        validation = log.rows[-1]["accuracy"]  # the trainer's own evaluation batch
        held = evaluate(current, task, held_out)
        curve["step"].append(step)
        curve["validation"].append(validation)
        curve["held_out"].append(held["accuracy"])
        curve["held_out_loss"].append(held["loss"])
        solved = step >= min_steps and validation >= strictest and held["accuracy"] >= strictest
        plateau = not solved and step >= min_steps and plateaued(curve["step"], curve["validation"])
        if on_log is not None:
            on_log(step, current, solved or plateau or step == max_steps)
        if solved or plateau:
            stopped[0] = "solved" if solved else "plateau"
            raise _Solved

    began, cpu_began = time.perf_counter(), time.process_time()
    try:
        train(model, task, training, progress=False, checkpoint_every=LOG_EVERY, on_checkpoint=measure)
    except _Solved:
        pass
    model.eval()
    record = {"learning_rate": learning_rate, "seed": seed, "n_layers": n_layers, "n_heads": n_heads,
              "steps_trained": curve["step"][-1], "seconds": time.perf_counter() - began,
              "cpu_seconds": time.process_time() - cpu_began, "stopped": stopped[0],
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


def choose_rate(n_heads: int, runs: list[dict]) -> float:
    """h's learning rate, chosen on the validation batch from its runs of the choice seeds at every rate."""
    header = {"task": TASK.to_dict(), "d_model": D_MODEL, "head_counts": [n_heads],
              "learning_rates": list(LEARNING_RATES), "seeds": list(SEEDS), "thresholds": list(THRESHOLDS),
              "min_steps": MIN_STEPS, "max_steps": MAX_STEPS,
              "held_out": {"seed": HELD_OUT_SEED, "size": HELD_OUT_SIZE},
              "controls": {}, "runs": [{k: v for k, v in run.items() if k != "state"} for run in runs]}
    return best_learning_rates(study_from_content(rounded(header)), CHOICE_THRESHOLD)[n_heads]


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
    parser.add_argument("--skip", nargs="+", default=[], metavar="H:RATE",
                        help="arms not to train (e.g. 32:0.03); they are listed as incomplete, with --why-incomplete")
    parser.add_argument("--why-incomplete", help="why some arms lack seeds (stored in the file)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    # the one-head grid first (its runs are the longest), then the costliest per step (many heads; a low rate
    # trains longer); each h's report seeds join the queue as soon as its rate is chosen (the one head's at the
    # front), and the short controls come last, so that the workers finish at about the same time
    order = [1] + [h for h in sorted(HEAD_COUNTS, reverse=True) if h != 1]
    grid = [(study_run, (h, lr, seed)) for h in order for lr in sorted(LEARNING_RATES) for seed in SEEDS]
    control_jobs = [(control_run, (variant, model_name, CONTROL_LEARNING_RATE, seed)) for variant in CONTROL_TASKS
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
    skipped = {(int(arm.split(":")[0]), float(arm.split(":")[1])) for arm in args.skip}
    key_of = {id(job): (job[0].__name__, *job[1]) for job in grid + control_jobs}
    queue = deque(job for job in grid + control_jobs if key_of[id(job)] not in results
                  and not (job[0] is study_run and (job[1][0], job[1][1]) in skipped))
    if args.assemble_only:
        print(f"assembling {len(results)} finished runs; not trained: {[key_of[id(job)] for job in queue]}",
              flush=True)
        queue.clear()
    chosen: dict[int, float] = {}

    def grid_runs(h: int) -> list[dict] | None:
        keys = [("study_run", h, lr, seed) for lr in LEARNING_RATES for seed in SEEDS if (h, lr) not in skipped]
        if not all(key in results for key in keys) and not args.assemble_only:  # assembling: choose from what is there
            return None
        return [record for key, record in results.items() if key[0] == "study_run" and key[1] == h
                and key[3] in SEEDS]

    def choose_when_ready() -> None:  # each h whose grid is complete: choose its rate, queue its report seeds
        for h in HEAD_COUNTS:
            runs = grid_runs(h)
            if h in chosen or runs is None:
                continue
            chosen[h] = choose_rate(h, runs)
            print(f"  h = {h}: rate {chosen[h]:g} chosen on the validation batch", flush=True)
            report = [(study_run, (h, chosen[h], seed)) for seed in REPORT_SEEDS]
            todo = [job for job in report if ("study_run", h, chosen[h], job[1][2]) not in results]
            if not args.assemble_only:
                queue.extendleft(reversed(todo)) if h == 1 else queue.extend(todo)

    def save_progress(key: tuple, record: dict) -> None:
        if args.progress_file:
            exact = {"state": {k: v.tolist() for k, v in record["state"].items()}} if "state" in record else {}
            with open(args.progress_file, "a") as progress:  # the weights exactly, the numbers rounded
                fields = {k: v for k, v in record.items() if k != "state"}
                progress.write(json.dumps({"job": list(key), **rounded(fields), **exact}) + "\n")

    choose_when_ready()
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        running: dict = {}
        while queue or running:
            while queue and len(running) < args.workers:
                function, arguments = queue.popleft()
                running[pool.submit(function, *arguments)] = (function.__name__, *arguments)
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                key = running.pop(future)
                record = future.result()
                results[key] = record
                save_progress(key, record)
                print(f"  {key}: {record['steps_trained']} steps ({record['stopped']}), held-out "
                      f"{record['curve']['held_out'][-1]:.4f}, {record['seconds']:.0f} s ({len(results)} runs done)",
                      flush=True)
            choose_when_ready()
    study = [record for key, record in results.items() if key[0] == "study_run"]
    states = {(r["n_heads"], r["learning_rate"], r["seed"]): r.pop("state", None) for r in study}
    head_counts = sorted({record["n_heads"] for record in study})
    incomplete = []  # arms not trained from every seed (--skip or --assemble-only, when time ran out)
    for h in head_counts:
        arms = [(lr, SEEDS) for lr in LEARNING_RATES] + ([(chosen[h], REPORT_SEEDS)] if h in chosen else [])
        for lr, wanted in arms:
            seeds = sorted(r["seed"] for r in study if r["n_heads"] == h and r["learning_rate"] == lr
                           and r["seed"] in wanted)
            if seeds != sorted(wanted):
                incomplete.append({"n_heads": h, "learning_rate": lr, "seeds": seeds,
                                   "report": wanted is REPORT_SEEDS, "why": args.why_incomplete or "not trained"})
    controls = [record for key, record in results.items() if key[0] == "control_run"]
    content = {"task": TASK.to_dict(), "d_model": D_MODEL, "n_layers": 1, "head_counts": head_counts,
               "learning_rates": list(LEARNING_RATES), "seeds": list(SEEDS), "report_seeds": list(REPORT_SEEDS),
               "thresholds": list(THRESHOLDS), "log_every": LOG_EVERY, "min_steps": MIN_STEPS,
               "max_steps": MAX_STEPS, "horizon": MAX_STEPS,
               "plateau": {"window": PLATEAU_WINDOW, "gain": PLATEAU_GAIN, "split": "validation"},
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
    # the choice seeds' runs at each h's chosen rate: their final weights are the chapter's models
    names = {}
    for h, rate in sorted(chosen.items()):
        for seed in SEEDS:
            record = next(r for r in study if (r["n_heads"], r["learning_rate"], r["seed"]) == (h, rate, seed))
            if states[(h, rate, seed)] is None:
                raise ValueError(f"the run (h = {h}, rate {rate:g}, seed {seed}) was reused without its weights; "
                                 f"train it again (leave it out of --reuse).")
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
                         "learning_rates": {str(h): rate for h, rate in sorted(chosen.items())},
                         "checkpoints": names}
    print("chosen learning rates: " + ", ".join(f"h = {h}: {rate:g}" for h, rate in sorted(chosen.items())),
          flush=True)
    study_from_content(rounded(content))  # the file about to be written passes its own checks
    path = LAB_DIRECTORY / STUDY_FILE
    path.write_text(json.dumps(rounded(content), separators=(",", ":")) + "\n")
    record_file(
        path,
        directory=LAB_DIRECTORY,
        regenerate=SCRIPT,
        description="one head or many, fairly: every (h, learning rate, seed) run's "
        "validation and held-out accuracy curves, role curves and stopping reason, each h's chosen rate and its "
        "report seeds, and the mechanism controls",
    )
    print(f"wrote {path} in {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
