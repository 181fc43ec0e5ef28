"""scripts/kernel_matrix.py: the notebooks under each family of CPU kernels the machine can emulate, and never under
a family it cannot run."""

import platform
from pathlib import Path

import pytest
from conftest import ROOT, load_script, toc_pages

MATRIX = load_script("kernel_matrix")
x86_only = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the kernel families are x86's")


def family(name):
    return next(known for known in MATRIX.FAMILIES if known.name == name)


def test_families_are_named_and_an_unknown_one_lists_the_choices():
    assert [f.name for f in MATRIX.parse_families(" default, avx2 ")] == ["default", "avx2"]
    with pytest.raises(SystemExit, match="choose from avx512, avx2, default"):
        MATRIX.parse_families("avx2,sse9")
    assert family("default").environment() == {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
                                               "OPENBLAS_CORETYPE": "Sandybridge"}


def test_a_family_newer_than_the_cpus_own_is_never_run_even_when_torch_claims_it():
    # torch reports whatever family it is asked for; the CPU's own family is the bound
    assert not MATRIX.runnable(family("avx512"), own="AVX2", in_use="AVX512")
    assert MATRIX.runnable(family("avx2"), own="AVX2", in_use="AVX2")
    assert MATRIX.runnable(family("default"), own="AVX512", in_use="DEFAULT")
    assert not MATRIX.runnable(family("default"), own="AVX2", in_use="AVX2")  # the switch did not take
    assert not MATRIX.runnable(family("default"), own="SVE256", in_use="DEFAULT")  # another architecture


@x86_only
@pytest.mark.slow
def test_the_oldest_family_is_really_switched_on_in_a_fresh_process(monkeypatch):
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")  # as .ci/run leaves it: the CPU's own is still found
    own = MATRIX.family_in_use(None)
    flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").exists() else []
    assert own in (("AVX512", "AVX2") if "avx2" in flags else ("DEFAULT",))
    assert MATRIX.family_in_use(family("default")) == "DEFAULT"


def test_a_missing_notebook_is_named_before_anything_runs():
    with pytest.raises(SystemExit, match="no such notebook: .*nowhere.ipynb"):
        MATRIX.main([str(ROOT / "chapters" / "nowhere.ipynb")])


def test_every_notebook_of_the_table_of_contents_is_in_the_default_selection():
    found = {path.relative_to(ROOT).with_suffix("").as_posix() for path in MATRIX.notebooks()}
    in_the_book = {page.removesuffix(".html") for page in toc_pages() if (ROOT / page).with_suffix(".ipynb").is_file()}
    assert len(in_the_book) >= 17 and in_the_book <= found
