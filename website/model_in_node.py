"""Run the page's model (``model.js``, joined from src/mha/views/web/model/) under Node.js on the exported parts: the
one way the site build, tests/site/test_web_model.py and scripts/bench_web_model.py call website/model_in_node.js
(chapter 3, "A tour of all 72 heads")."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np

from mha.views.widget import web_file

SCRIPT = Path(__file__).resolve().parent / "model_in_node.js"


def run_model_in_node(folder: Path, sentences: list[dict], out: Path, *, simd: bool = True, time_runs: int = 0,
                      timeout: int = 300) -> dict:
    """model.js on the parts in ``folder``, for ``sentences`` ({"text", "removed", "run"} each), writing into ``out``.

    Returns model_in_node.js's report; each sentence that ran also gets ``attention`` (layers, heads, n, n),
    ``hidden`` (layers + 1, n, d_model) and ``vector`` (d_model,) as float32 arrays, read back from ``out``.
    """
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("running the page's model needs Node.js (apt install nodejs)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    request = out / "request.json"
    request.write_text(json.dumps({"simd": simd, "sentences": sentences, "time_runs": time_runs}))
    script = out / "model.js"  # the script the pages load, joined from its modules as the site build writes it
    script.write_text(web_file("model.js"), encoding="utf-8")
    ran = subprocess.run([node, str(SCRIPT), str(script), str(folder), str(request), str(out)], capture_output=True,
                         text=True, timeout=timeout)
    if ran.returncode != 0:
        raise RuntimeError(f"model.js failed under Node: {ran.stderr[-2000:]}")
    report = json.loads((out / "results.json").read_text())
    for index, result in enumerate(report["results"]):
        if result.get("n"):
            n = result["n"]
            vector = np.fromfile(out / f"{index}.vector.f32", np.float32)  # (d_model,)
            hidden = np.fromfile(out / f"{index}.hidden.f32", np.float32)
            layers = hidden.size // (n * vector.size) - 1
            attention = np.fromfile(out / f"{index}.attention.f32", np.float32)
            result["vector"] = vector
            result["hidden"] = hidden.reshape(layers + 1, n, vector.size)
            result["attention"] = attention.reshape(layers, attention.size // (layers * n * n), n, n)
    return report
