"""What the tests share: the site, built once per run (whatever the number of workers), served on 127.0.0.1, and
Debian's Chromium; and a loader for the tools in scripts/.

The suite runs on two workers (pytest-xdist, ``-n 2 --dist loadfile`` in pyproject.toml): each test file, and so
each notebook with its cells in order, runs whole on one worker. Each worker and the kernels it starts use one CPU
thread (below), so two busy processes share two cores instead of fighting over them; every stored output is the
same at one thread and at two (README, "The same verdict on every CPU").
"""

import functools
import importlib
import os

# one thread per worker and per notebook kernel (kernels inherit the environment); set before torch is imported
for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str):
    """A tool of scripts/ (``scripts.<name>``, the package that the repository's root holds; pyproject.toml puts the
    root on the tests' path), for the tests of what it does."""
    return importlib.import_module(f"scripts.{name}")


def _start_kernel_on_unix_sockets(startup_timeout: float = 60, kernel_name: str = "python3", **kwargs):
    """nbval's kernel, started as jupyter_client's ``start_new_kernel`` starts it but on Unix sockets (files named
    after its own connection file) instead of TCP ports: two workers starting kernels at once could otherwise both
    pick the same free port, and one kernel would fail to start ("Address already in use"). The sockets live in a
    fresh temporary folder of their own, not in the notebook's folder, where two kernels would share names."""
    import tempfile

    from jupyter_client import KernelManager
    from nbval.kernel import NbvalKernelspecManager  # knows --nbval-current-env's kernel, this very environment

    sockets = Path(tempfile.mkdtemp(prefix="nbval-kernel-")) / "socket"  # short: a socket's path is at most 107
    manager = KernelManager(kernel_name=kernel_name, kernel_spec_manager=NbvalKernelspecManager(), transport="ipc",
                            ip=str(sockets))
    manager.start_kernel(**kwargs)
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=startup_timeout)
    except RuntimeError:
        client.stop_channels()
        manager.shutdown_kernel()
        raise
    return manager, client


# The browser, the quiet file server and the offline proxy, shared with the scripts that weigh and time the site
HARNESS = load_script("browser_harness")
CHROMIUM_ARGS, offline_proxy, served = HARNESS.CHROMIUM_ARGS, HARNESS.offline_proxy, HARNESS.served


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """Build the whole book once, as `make book` does, with warnings as errors; returns the html folder.

    Built once per run: the first worker that needs it builds it under a lock in the run's shared temporary folder,
    and the others wait and reuse it. To test a site already built (while working on the browser tests), name its
    html folder in MHA_BUILT_SITE.
    """
    if os.environ.get("MHA_BUILT_SITE") and os.environ.get("CI") != "true":
        return Path(os.environ["MHA_BUILT_SITE"])
    shared = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else \
        tmp_path_factory.getbasetemp()
    return _site_in(shared)


def _site_in(shared: Path) -> Path:
    """The site built in ``shared``/site, built here unless another process built it or is building it (a lock)."""
    from filelock import FileLock

    output = shared / "site"
    with FileLock(str(shared / "site.lock")):
        if (output / "built").exists():
            return output / "_build" / "html"
        output.mkdir(exist_ok=True)
        html = _build_site(output)
        (output / "built").write_text("ok")
        return html


WORKER_NICENESS = 5
"""How much lower the workers' CPU priority is than the site build's (Linux niceness; their kernels inherit it)."""


def pytest_sessionstart(session):
    """On a whole run with workers, start building the site at once, beside them, in the run's shared folder.

    The workers take the test files in turn, and the first to need the site would otherwise build it while the other
    worker ran on and then waited for it too; started here, the build overlaps the notebooks and unit tests, and the
    workers' ``built_site`` waits on the same lock. A run of chosen files (pytest tests/test_x.py) builds only if a
    test asks for the site.

    The workers run at a lower CPU priority (:data:`WORKER_NICENESS`): on two cores, two workers and their kernels
    would otherwise leave the build a third of the time, and the site's tests, which come last, would wait for it
    with nothing else left to run. Given the build's share first, it is ready before the notebooks are done.
    """
    if os.environ.get("PYTEST_XDIST_WORKER") and hasattr(os, "nice"):
        os.nice(WORKER_NICENESS)
    config = session.config
    # `pytest` with no paths (and not --quick): the whole suite
    whole_run = config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.getoption("quick")
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None) or not whole_run \
            or os.environ.get("MHA_BUILT_SITE") and os.environ.get("CI") != "true":
        return
    shared = config._tmp_path_factory.getbasetemp()
    threading.Thread(target=_build_quietly, args=(shared,), daemon=True).start()


# The longest files, in the order the workers start them (longest first, so that none is left to run alone at the
# end): six notebooks while the site builds, then the site's two longest checks. pytest-xdist hands out files in
# the order they are collected (pyproject.toml turns off its own reordering by test count); a name missing here only
# loses its place.
LONGEST_FIRST = (
    "chapters/3_head_roles/1_tour_of_heads.ipynb", "chapters/4_caveats/2_redundancy_and_pruning.ipynb",
    "chapters/3_head_roles/3_coreference.ipynb", "chapters/3_head_roles/2_syntax.ipynb",
    "chapters/4_caveats/1_attention_is_not_explanation.ipynb", "chapters/4_caveats/4_limits_of_probing.ipynb",
    "tests/site/test_site.py", "tests/site/test_site_views.py",
)


BROWSER_FIXTURES = frozenset({"built_site", "site_address", "chromium"})
"""The fixtures of the built site and the browser: a test that uses one, even through another fixture, is marked
``browser``."""
BROWSER_PATHS = ("tests/site",)
"""The website's own tests, in Chromium or under Node.js: every one is marked ``browser``."""
SLOW_PATHS = (
    "tests/exercises/grading",  # grading in sandboxed processes
    "tests/tools/test_public_api_fuzz.py",  # the fuzz's sample, in a capped child process
    "tests/exercises/test_exercises_on_real_models.py",  # checks on the real model and real training runs
    # a capped child process, and a fresh Python that imports the encoder
    "tests/pretrained/test_tokenizer.py::test_a_pasted_document_is_refused_within_a_memory_cap",
    "tests/pretrained/test_tokenizer.py::test_tokenizing_with_the_encoder_leaves_transformers_unimported",
)
"""Folders, files and tests (``file::name``) marked ``slow`` here; a test may instead carry ``@pytest.mark.slow``."""
SPEED_MARKERS = {
    "notebook": "a notebook's cell, executed by nbval",
    "browser": "needs the built site, Chromium, or Node.js for the site's scripts",
    "slow": "seconds of work: sandboxed grading, wheels, capped or fresh processes, training, the real model "
            "against its reference, fuzzing",
}
"""What ``--quick`` (``make test-quick``) leaves out, and why."""
QUICK = "not (" + " or ".join(SPEED_MARKERS) + ")"
"""The selection of ``--quick``: the unit tests alone."""


def pytest_addoption(parser):
    parser.addoption("--quick", action="store_true",
                     help=f"the unit tests alone, for the edit-and-test loop (make test-quick): -m '{QUICK}'")


def pytest_configure(config):
    """Name the speed markers; under ``--quick``, select the tests that carry none (with any ``-m`` given too); start
    nbval's kernels on Unix sockets."""
    for name, meaning in SPEED_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {meaning}")
    if config.getoption("quick"):
        given = config.option.markexpr
        config.option.markexpr = f"({QUICK}) and ({given})" if given else QUICK
    if getattr(config, "pluginmanager", None) and config.pluginmanager.hasplugin("nbval"):
        import nbval.kernel

        nbval.kernel.start_new_kernel = _start_kernel_on_unix_sockets


def pytest_ignore_collect(collection_path, config):
    """Under ``--quick``, the folders and files of tests/ that hold no quick test are not even imported."""
    if not config.getoption("quick"):
        return None
    whole = [entry for entry in BROWSER_PATHS + SLOW_PATHS if "::" not in entry]
    return any(collection_path == ROOT / entry for entry in whole) or None


def speed_marker(item) -> str | None:
    """The marker that keeps ``item`` out of ``make test-quick``, or None for a unit test that it runs.

    ``notebook`` for a notebook's cell (nbval), ``browser`` for a test of the built site or in Chromium (its
    fixtures, :data:`BROWSER_FIXTURES`, or :data:`BROWSER_PATHS`), ``slow`` for :data:`SLOW_PATHS`. Given from what
    a test uses and where it lives, so that a new notebook or test of the site is never quick by mistake.
    """
    if Path(item.path).suffix == ".ipynb":
        return "notebook"
    if BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())) or is_listed(item, BROWSER_PATHS):
        return "browser"
    return "slow" if is_listed(item, SLOW_PATHS) else None


def is_listed(item, entries: tuple[str, ...]) -> bool:
    """Whether ``item`` lies in one of ``entries``: a folder, a file, or one test of a file (``file::name``, with
    every parametrisation of it)."""
    where = _relative(item.path)
    for entry in entries:
        file, _, name = entry.partition("::")
        if (where == file or where.startswith(file + "/")) and name in ("", getattr(item, "originalname", None)):
            return True
    return False


@functools.cache
def _relative(path: Path) -> str:
    """``path`` from the repository's root, as the entries of :data:`SLOW_PATHS` write it (once per file)."""
    return Path(path).relative_to(ROOT).as_posix() if Path(path).is_relative_to(ROOT) else ""


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these markers
def pytest_collection_modifyitems(session, config, items):
    """Mark the tests that ``make test-quick`` leaves out (:func:`speed_marker`), then order the files: the longest
    first (:data:`LONGEST_FIRST`), then the other notebooks, then the other files that test the built site, and last
    the tests that need no site.

    The workers take whole files in this order (``--dist loadfile``), so while the site builds (started at session
    start, above) they execute notebooks instead of waiting for it, the long checks of the site start early enough to
    end with the rest, and the run ends on the many short files of unit tests, which the two workers share out evenly
    instead of one of them finishing a long file alone. Every worker collects the same items and sorts them the same
    way, as pytest-xdist requires.
    """
    for item in items:
        if marker := speed_marker(item):
            item.add_marker(marker)

    def needs_site(item) -> bool:
        return "built_site" in getattr(item, "fixturenames", ())

    site_files = {item.path for item in items if needs_site(item)}
    first = {ROOT / name: index for index, name in enumerate(LONGEST_FIRST)}

    def rank(path: Path) -> tuple[int, int]:
        if path in first:
            return 0, first[path]
        return (1 if path.suffix == ".ipynb" else 2 if path in site_files else 3), 0

    ranks = {item.path: rank(item.path) for item in items}
    items.sort(key=lambda item: ranks[item.path])  # stable: each file's own order is kept


def _build_quietly(shared: Path) -> None:
    try:
        _site_in(shared)
    except BaseException:  # noqa: BLE001 - a worker's built_site builds again and reports the failure
        pass


def _build_site(output: Path) -> Path:
    jupyter_book = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    assert jupyter_book, "jupyter-book is not installed in this environment"
    # the site's build scripts and assets (MathJax, run by Node.js at build time; require.js, d3, jQuery): `npm ci`
    # from package-lock.json, when it changed
    assert shutil.which("make") and shutil.which("npm"), "the site's build needs make and npm (apt install nodejs npm)"
    npm = subprocess.run(["make", "-s", "-C", str(ROOT), "node_modules/.installed"], capture_output=True, text=True,
                         timeout=600)
    assert npm.returncode == 0, "npm ci failed:\n" + npm.stdout[-4000:] + npm.stderr[-4000:]
    # nbval executes every notebook and compares it with its stored outputs, so the site is built from those stored
    # outputs rather than executing each notebook a second time: the same configuration, execution off. The copy
    # lives elsewhere, and Jupyter Book reads local_extensions' folders relative to the configuration file.
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    local = config["sphinx"].get("local_extensions", {})
    config["sphinx"]["local_extensions"] = {name: str(ROOT / folder) for name, folder in local.items()}
    (output / "_config.yml").write_text(yaml.safe_dump(config))
    result = subprocess.run([jupyter_book, "build", str(ROOT), "--path-output", str(output), "--config",
                             str(output / "_config.yml"), "-W", "-n", "--keep-going"],
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return output / "_build" / "html"


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium for the browser tests; skipped with a message where it is missing, except under CI."""
    path = HARNESS.find_chromium()
    if path is None:
        # CI installs Chromium (.ci/run), so there the browser tests always run.
        assert os.environ.get("CI") != "true", "CI must install chromium (apt-get install -y chromium)"
        pytest.skip("Chromium is not installed here: `apt-get install -y chromium` to run the browser tests")
    return path


def toc_pages() -> list[str]:
    """Every page of the book, as its path in the built site: the table of contents, plus Sphinx's own pages."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections", []))

    for part in toc.get("parts", []):
        walk(part.get("chapters", []))
    return ["index.html", *(f"{name}.html" for name in files), "genindex.html", "search.html"]


POLL = 50
"""Milliseconds between two checks of a condition a browser test waits for (Playwright's ``wait_for_function``):
its default checks on every animation frame, which keeps the page drawing frames all the while it waits."""


async def offline_context(browser, site: str, **options):
    """A new browser context (Playwright, async) in which every request to anywhere but site fails (offline_proxy)."""
    return await browser.new_context(proxy=offline_proxy(site), **options)


@pytest.fixture(scope="session")
def site_address(built_site):
    """The built site served on 127.0.0.1 (a free port), as `make serve` serves it."""
    with served(built_site) as address:
        yield address


# What is not the book's own text: installed packages, built output, caches, the version control's store, and the
# temporary folders of scripts/colab_like_check.py
NOT_THE_BOOKS_OWN = {".git", ".venv", "node_modules", "_build", "build", ".hypothesis", ".pytest_cache", "__pycache__",
                     ".ipynb_checkpoints", "bench-results"}
TEXT_SUFFIXES = {".md", ".yml", ".yaml", ".py", ".txt", ".toml", ".cfg", ".lock", ".ipynb", ".sh", ".js", ".html",
                 ".json", ""}


def book_text_files():
    """Every text file of the book itself (sources, prose, configuration, data records, the Makefile, CI), its
    folders walked once and the others never entered."""
    for folder, folders, files in os.walk(ROOT):
        folders[:] = [name for name in folders if name not in NOT_THE_BOOKS_OWN and not name.startswith("colab-like-")]
        for name in files:
            if Path(name).suffix in TEXT_SUFFIXES:
                yield Path(folder) / name


def write_view_page(folder: Path, payload: dict, scripts: tuple[str, ...]) -> Path:
    """One page holding one view of ``payload`` (its site payload), with the joined ``scripts`` beside it (views.js,
    views.css, and model.js or trainer.js where the view runs a model), as the site build writes a chapter's view."""
    from mha.views.payloads import encode_payload
    from mha.views.widget import web_file

    for name in scripts:
        (folder / name).write_text(web_file(name), encoding="utf-8")
    (folder / "index.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><link rel='stylesheet' href='views.css'></head><body>"
        f"<div class='mha-view'><script type='application/octet-stream' class='mha-view-payload'>"
        f"{encode_payload(payload)}</script></div><script src='views.js'></script></body></html>", encoding="utf-8")
    return folder


def trained_a_little(model, task, steps: int, learning_rate: float, seed: int):
    """``model`` after ``steps`` PyTorch AdamW steps (weight decay 0.01) on batches of 32 from ``task`` (generator
    seeded ``seed``), so that no gradient a trainer test compares is at its initial, special value."""
    import torch

    from mha.lab.tasks import masked_cross_entropy

    optimiser = torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.01)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        batch = task.sample(32, generator)
        optimiser.zero_grad()
        masked_cross_entropy(model(batch.inputs).logits, batch.targets, batch.loss_mask).backward()
        optimiser.step()
    return model
