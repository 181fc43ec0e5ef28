"""What more heads cost in compute at a fixed d_model: data/lab/head_cost.json, read by section 3.7.

Run from the repository root:

    python -m scripts.bench_head_cost              # 15 repeats of every measurement
    python -m scripts.bench_head_cost --repeats 3  # quicker, noisier

Section 3.7's model (:class:`~mha.lab.tiny_model.TinyTransformer`, one attention-only layer, d_model 32, the same
parameters for every head count) on its two-relation task, for each head count of HEAD_COUNTS, on one torch thread:

* **time per training step**: :func:`mha.lab.training.train` itself (sample a batch of BATCH_SIZE sequences,
  forward, loss, backward, clipping, AdamW), its own clock of the steps, divided by STEPS_PER_REPEAT;
* **time per forward pass**: the model on one batch under ``torch.inference_mode``, FORWARD_CALLS times;
* **peak memory**: the most bytes of tensors alive at once during one training step (``train`` for one step, on
  an evaluation batch of one sequence) and during one forward pass, from torch's profiler
  (``export_memory_timeline``), which sees every allocation torch makes on the CPU.

And one attention layer alone (:class:`~mha.core.attention.MultiHeadAttention`, the layer every model of the book is
built on), for each (d_model, seq_len) of LAYER_SETTINGS: the toy's width, MiniLM's (384) and BERT-base's (768), at
the toy's 24 tokens and at 128 and 512, over the head counts of LAYER_HEAD_COUNTS that divide d_model:

* **time per forward pass** of the layer on a batch of random sequences (the setting's batch) under
  ``torch.inference_mode``, on one thread; each measurement runs as many calls as make about LAYER_TARGET_SECONDS
  (counted once, for one head, and used for every head count of that setting).

Each repeat measures every head count once, in turn (the layer's arms in a rotated order, so that no head count
always runs first or last), so that a slow moment of the machine falls on all of them; the
file keeps every repeat, the median, and the median of each repeat's ratio to one head, which a change of the
machine's load during the run moves less. Times depend on the machine (its description is stored with them), so
the book reads them as ratios to one head; the peak bytes depend on torch's allocations only. The file is recorded in
data/lab/manifest.json with its sha256, as the lab's other results are.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from mha.core.attention import MultiHeadAttention
from mha.lab.checkpoints import LAB_DIRECTORY, record_file
from mha.lab.tasks import TwoRelationTask
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig
from mha.lab.training import TrainingConfig, torch_threads, train

SCRIPT = "python -m scripts.bench_head_cost"
OUTPUT = LAB_DIRECTORY / "head_cost.json"
TASK = TwoRelationTask()
D_MODEL = 32  # as in scripts/train_head_count_study.py
HEAD_COUNTS = (1, 2, 4, 8, 16, 32)
BATCH_SIZE = 32  # the study's batch
THREADS = 1
STEPS_PER_REPEAT = 30
FORWARD_CALLS = 60
WARMUP_STEPS = 20
# the attention layer alone, (d_model, seq_len, batch): the toy's width (its study's batch of 32 at its 24 tokens),
# MiniLM's and BERT-base's; fewer sequences where they are longer or wider, to keep a repeat within a few seconds
LAYER_SETTINGS = ((32, 24, 32), (32, 128, 4), (32, 512, 1),
                  (384, 24, 8), (384, 128, 2), (384, 512, 1),
                  (768, 24, 8), (768, 128, 2), (768, 512, 1))
LAYER_HEAD_COUNTS = (1, 2, 4, 8, 12, 16, 24, 32, 48)
LAYER_TARGET_SECONDS = 0.02


def model_with(n_heads: int) -> TinyTransformer:
    """The study's model shape with ``n_heads`` heads."""
    config = TinyTransformerConfig(vocab_size=TASK.vocab_size, max_seq_len=TASK.seq_len, d_model=D_MODEL, n_layers=1,
                                   n_heads=n_heads)
    return TinyTransformer(config, seed=0)


def training(steps: int, eval_batch_size: int = 1) -> TrainingConfig:
    """The study's optimiser settings for ``steps`` steps, evaluating one sequence only at the first and last step."""
    return TrainingConfig(steps=steps, batch_size=BATCH_SIZE, learning_rate=1e-2, log_every=steps,
                          eval_batch_size=eval_batch_size, threads=THREADS)


def seconds_per_step(model: TinyTransformer) -> float:
    """Seconds per training step: the trainer's own clock of STEPS_PER_REPEAT steps, divided by the steps."""
    log = train(model, TASK, training(STEPS_PER_REPEAT), progress=False)
    return log.seconds / STEPS_PER_REPEAT


def seconds_per_forward(model: TinyTransformer, inputs: torch.Tensor) -> float:
    """The wall-clock time of one forward pass on ``inputs`` (batch, seq), averaged over FORWARD_CALLS calls."""
    with torch_threads(THREADS), torch.inference_mode():
        started = time.perf_counter()
        for _ in range(FORWARD_CALLS):
            model(inputs)
        return (time.perf_counter() - started) / FORWARD_CALLS


def peak_bytes(run) -> int:
    """The most bytes of CPU tensors alive at once while ``run()`` runs, from torch's profiler memory timeline."""
    with torch_threads(THREADS), profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                                         with_stack=True) as profiler:
        run()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "timeline.json"
        with warnings.catch_warnings():  # torch marks it deprecated in favour of CUDA-only tools; it still reads CPU
            warnings.simplefilter("ignore", FutureWarning)
            profiler.export_memory_timeline(str(path), device="cpu")
        _, sizes = json.loads(path.read_text())  # (events,) times and (events, categories) bytes
    return int(max(sum(row) for row in sizes))


def summary(times: dict[int, list[float]]) -> dict:
    """Every repeat's seconds, their median per head count, and the median over repeats of each repeat's ratio to
    one head: a repeat measures every head count within about a second, so its ratios share the machine's load."""
    counts = list(times)  # one head first
    ratios = [statistics.median(t / one for t, one in zip(times[h], times[counts[0]], strict=True)) for h in counts]
    return {"median": [statistics.median(times[h]) for h in counts],
            "median_ratio_to_one_head": ratios, "repeats": [times[h] for h in counts]}


def layer_head_counts(d_model: int) -> list[int]:
    """The head counts of LAYER_HEAD_COUNTS that divide ``d_model``."""
    return [h for h in LAYER_HEAD_COUNTS if d_model % h == 0]


def layer_seconds(layer: MultiHeadAttention, inputs: torch.Tensor, calls: int) -> float:
    """The wall-clock time of one forward pass of ``layer`` on ``inputs``, averaged over ``calls`` calls."""
    with torch_threads(THREADS), torch.inference_mode():
        started = time.perf_counter()
        for _ in range(calls):
            layer(inputs)
        return (time.perf_counter() - started) / calls


def measure_layers(repeats: int) -> list[dict]:
    """Forward-pass times of the attention layer alone, for every setting of LAYER_SETTINGS and its head counts.

    Each repeat runs every (setting, head count) once, the arms in an order rotated by one from the last repeat."""
    generator = torch.Generator().manual_seed(0)
    arms, inputs, calls = [], {}, {}
    for d_model, seq_len, batch in LAYER_SETTINGS:
        inputs[d_model, seq_len] = torch.randn(batch, seq_len, d_model, generator=generator)
        for h in layer_head_counts(d_model):
            arms.append((d_model, seq_len, h, MultiHeadAttention(d_model, h, seed=0)))
    for d_model, seq_len, h, layer in arms:  # warm-up, and the calls per measurement from one head's time
        layer_seconds(layer, inputs[d_model, seq_len], 2)
        if h == 1:
            once = layer_seconds(layer, inputs[d_model, seq_len], 3)
            calls[d_model, seq_len] = max(1, round(LAYER_TARGET_SECONDS / once))
    times = {(d_model, seq_len, h): [] for d_model, seq_len, h, _ in arms}
    for repeat in range(repeats):
        shift = repeat % len(arms)
        for d_model, seq_len, h, layer in arms[shift:] + arms[:shift]:
            times[d_model, seq_len, h].append(layer_seconds(layer, inputs[d_model, seq_len], calls[d_model, seq_len]))
        print(f"layer repeat {repeat + 1}/{repeats} done", flush=True)
    settings = []
    for d_model, seq_len, batch in LAYER_SETTINGS:
        counts = layer_head_counts(d_model)
        settings.append({"d_model": d_model, "seq_len": seq_len, "batch_size": batch,
                         "head_counts": counts, "calls_per_measurement": calls[d_model, seq_len],
                         "forward_seconds": summary({h: times[d_model, seq_len, h] for h in counts})})
    return settings


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo where there is one, else what :mod:`platform` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="measurements of every head count (default 15)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    inputs = TASK.sample(BATCH_SIZE, 0).inputs  # (batch, seq)
    models = {h: model_with(h) for h in HEAD_COUNTS}
    for model in models.values():  # warm-up: allocator, optimiser code paths, caches
        train(model, TASK, training(WARMUP_STEPS), progress=False)
        seconds_per_forward(model, inputs)
    step_times = {h: [] for h in HEAD_COUNTS}
    forward_times = {h: [] for h in HEAD_COUNTS}
    for repeat in range(args.repeats):
        for h, model in models.items():
            step_times[h].append(seconds_per_step(model))
            forward_times[h].append(seconds_per_forward(model, inputs))
        print(f"repeat {repeat + 1}/{args.repeats}: ms per step " +
              ", ".join(f"h={h} {1e3 * step_times[h][-1]:.2f}" for h in HEAD_COUNTS), flush=True)
    layers = measure_layers(args.repeats)
    step_peaks, forward_peaks = [], []
    for h in HEAD_COUNTS:
        step_peaks.append(peak_bytes(lambda h=h: train(model_with(h), TASK, training(1), progress=False)))
        model = models[h]

        def forward(model=model):
            with torch.inference_mode():
                model(inputs)

        forward_peaks.append(peak_bytes(forward))

    content = {
        "measured_by": SCRIPT,
        "machine": {"cpu": cpu_model(), "cpu_count": os.cpu_count(), "torch": torch.__version__,
                    "threads": THREADS, "python": platform.python_version(), "platform": platform.platform(),
                    "load_average_1min_at_start": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None},
        "setting": {"task": TASK.name, "d_model": D_MODEL, "n_layers": 1, "batch_size": BATCH_SIZE,
                    "seq_len": TASK.seq_len, "repeats": args.repeats, "steps_per_repeat": STEPS_PER_REPEAT,
                    "forward_calls_per_repeat": FORWARD_CALLS,
                    "peak": "most bytes of CPU tensors alive at once (torch profiler memory timeline); the training "
                            "step's includes the model, gradients and AdamW state it creates"},
        "head_counts": list(HEAD_COUNTS),
        "parameters": [models[h].parameter_count() for h in HEAD_COUNTS],
        "train_step_seconds": summary(step_times),
        "forward_seconds": summary(forward_times),
        "train_step_peak_bytes": step_peaks,
        "forward_peak_bytes": forward_peaks,
        "attention_layer": {
            "layer": "mha.core.attention.MultiHeadAttention with biases, self-attention on random float32 inputs, "
                     "forward pass under torch.inference_mode",
            "repeats": args.repeats, "target_seconds_per_measurement": LAYER_TARGET_SECONDS, "settings": layers},
    }
    OUTPUT.write_text(json.dumps(content, indent=1) + "\n")
    record_file(OUTPUT, regenerate=SCRIPT, description="time and peak memory per training step and per forward pass "
                "of section 3.7's model against the head count, and the forward time of one attention layer at "
                "d_model 32, 384 and 768, on one machine (see 'machine')")
    print(f"wrote {OUTPUT}")
    for name in ("train_step_seconds", "forward_seconds"):
        ratios = content[name]["median_ratio_to_one_head"]
        print(f"{name} relative to h=1: "
              + ", ".join(f"h={h} {r:.2f}" for h, r in zip(HEAD_COUNTS, ratios, strict=True)))
    for setting in layers:
        print(f"layer d_model {setting['d_model']}, {setting['seq_len']} tokens, relative to h=1: " + ", ".join(
            f"h={h} {r:.2f}" for h, r in zip(setting["head_counts"],
                                              setting["forward_seconds"]["median_ratio_to_one_head"], strict=True)))
    for name in ("train_step_peak_bytes", "forward_peak_bytes"):
        print(f"{name}: "
              + ", ".join(f"h={h} {b / 1e6:.2f} MB" for h, b in zip(HEAD_COUNTS, content[name], strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
