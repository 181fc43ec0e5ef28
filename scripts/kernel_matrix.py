"""Run the notebooks under nbval once for each family of CPU kernels this machine can emulate.

    python -m scripts.kernel_matrix                       # every notebook, every family the machine can run
    python -m scripts.kernel_matrix --skip avx2           # leave out a family another run already covered
    python -m scripts.kernel_matrix chapters/4_caveats/4_limits_of_probing.ipynb --families default

The notebooks are committed executed, and nbval compares each fresh output with the stored one, so a stored output
that depends on the CPU passes on one machine and fails on the next. CI machines differ in the SIMD kernels their
libraries pick: torch's ATen kernels (``ATEN_CPU_CAPABILITY``), MKL's (``MKL_ENABLE_INSTRUCTIONS``) and OpenBLAS's,
which numpy and scipy use (``OPENBLAS_CORETYPE``). Each can be told to use an older family than the CPU's own, never
a newer one, so a machine with AVX-512 can run all three families, one with AVX2 the older two.

Each family runs in its own pytest process (the suite's two workers), with the environment variables set before
anything is imported. Before it runs, a child process confirms that torch really uses that family; a family the
machine cannot run is reported and left out, never run under another family's name. Exits non-zero if any notebook
fails under any family, with a table of what passed where.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class KernelFamily:
    """One family of SIMD kernels, as the three libraries name it."""

    name: str
    aten: str  # torch.backends.cpu.get_cpu_capability() reports it in upper case
    mkl: str
    openblas: str

    def environment(self) -> dict[str, str]:
        return {"ATEN_CPU_CAPABILITY": self.aten, "MKL_ENABLE_INSTRUCTIONS": self.mkl,
                "OPENBLAS_CORETYPE": self.openblas}


FAMILIES = (
    KernelFamily("avx512", aten="avx512", mkl="AVX512", openblas="SkylakeX"),
    KernelFamily("avx2", aten="avx2", mkl="AVX2", openblas="Haswell"),
    KernelFamily("default", aten="default", mkl="SSE4_2", openblas="Sandybridge"),
)
FAMILY_NAMES = tuple(family.name for family in FAMILIES)


def notebooks() -> list[Path]:
    """Every notebook of the book, in the order of its folders."""
    return sorted(path for path in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in path.parts)


def family_in_use(family: KernelFamily | None, python: str = sys.executable) -> str:
    """The capability torch reports in a fresh process with ``family``'s variables set (None: the machine's own, with
    any such variable this process was given taken away)."""
    environment = {name: value for name, value in os.environ.items() if name not in FAMILIES[0].environment()}
    environment.update(family.environment() if family else {})
    code = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    return subprocess.run([python, "-c", code], env=environment, capture_output=True, text=True, check=True,
                          timeout=300).stdout.strip()


def runnable(family: KernelFamily, own: str, in_use: str) -> bool:
    """Whether this CPU can run ``family``: it is the CPU's own (``own``) or an older one, and torch reports it in use
    once asked. torch reports any family it is asked for, even one the CPU lacks, and OpenBLAS told to use
    instructions the CPU lacks dies of an illegal instruction, so the CPU's own family bounds what is tried."""
    order = [known.aten.upper() for known in FAMILIES]  # newest first
    if own.upper() not in order:  # another architecture (ARM): only its own kernels
        return False
    return order.index(family.aten.upper()) >= order.index(own.upper()) and in_use.upper() == family.aten.upper()


def parse_families(text: str) -> list[KernelFamily]:
    """``"avx2,default"`` -> those families, in the order given; an unknown name says which ones exist."""
    chosen = []
    for name in (part.strip() for part in text.split(",") if part.strip()):
        family = next((family for family in FAMILIES if family.name == name), None)
        if family is None:
            raise SystemExit(f"unknown kernel family {name!r}: choose from {', '.join(FAMILY_NAMES)}")
        chosen.append(family)
    return chosen


def run_family(family: KernelFamily, paths: list[Path], extra: list[str]) -> int:
    """nbval on ``paths`` under ``family``'s kernels (the suite's own options: its workers, sanitizers)."""
    environment = {**os.environ, **family.environment()}
    command = [sys.executable, "-m", "pytest", "-q", *extra, *map(str, paths)]
    print(f"\n== {family.name}: {' '.join(f'{k}={v}' for k, v in family.environment().items())}", flush=True)
    return subprocess.run(command, cwd=ROOT, env=environment).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: every notebook)")
    parser.add_argument("--families", default=",".join(FAMILY_NAMES),
                        help=f"comma-separated families to try (default: {','.join(FAMILY_NAMES)})")
    parser.add_argument("--skip", default="", help="comma-separated families to leave out (covered elsewhere)")
    args, extra = parser.parse_known_args(argv)
    paths = [path.resolve() for path in args.notebooks] or notebooks()
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        raise SystemExit(f"no such notebook: {', '.join(missing)}")
    skipped = {family.name for family in parse_families(args.skip)}
    own = family_in_use(None)
    outcomes: dict[str, str] = {}
    for family in parse_families(args.families):
        if family.name in skipped:
            outcomes[family.name] = "skipped (--skip)"
            continue
        in_use = family_in_use(family)
        if not runnable(family, own, in_use):
            outcomes[family.name] = f"not run: newer than this CPU's own kernels ({own})"
            continue
        status = run_family(family, paths, extra)
        outcomes[family.name] = "passed" if status == 0 else f"FAILED (pytest exit status {status})"
    print(f"\nKernel families, {len(paths)} notebook(s), this machine's own kernels {own}:")
    for name, outcome in outcomes.items():
        print(f"  {name:8} {outcome}")
    if not any(outcome == "passed" or outcome.startswith("FAILED") for outcome in outcomes.values()):
        print("no family was run here: the suite's own run covers this machine's kernels")
    return 1 if any(outcome.startswith("FAILED") for outcome in outcomes.values()) else 0

if __name__ == "__main__":
    sys.exit(main())
