"""The book itself: notebooks are committed executed and follow the section skeleton, and the site builds
with warnings treated as errors (``jupyter-book build -W -n --keep-going``)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def test_there_are_notebooks_and_every_one_is_in_the_table_of_contents():
    assert len(NOTEBOOKS) >= 2
    toc = (ROOT / "_toc.yml").read_text()
    missing = [str(p.relative_to(ROOT)) for p in NOTEBOOKS if f"file: {p.relative_to(ROOT).with_suffix('')}" not in toc]
    assert not missing, f"notebooks not in _toc.yml (the book would not show them): {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_executed(path):
    cells = json.loads(path.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    not_run = [i for i, c in enumerate(code) if c.get("execution_count") is None and "remove-cell" not in c["metadata"].get("tags", [])]
    assert not not_run, f"code cells {not_run} of {path.name} were never executed: run `make notebooks` and commit"
    assert sum(bool(c["outputs"]) for c in code) >= len(code) // 2, f"{path.name} has too few outputs for nbval to compare"
    errors = [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    assert not errors, f"{path.name} was committed with an error output"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_follows_the_section_skeleton(path):
    cells = json.loads(path.read_text())["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert re.search(r"\*\*After this section you will be able to\*\*", markdown), "open with what the reader will be able to do"
    assert "## Summary" in markdown and "## Exercises" in markdown
    exercises = re.findall(r"```\{exercise\}\n:label: ([\w-]+)", markdown)
    solutions = re.findall(r"```\{solution-start\} ([\w-]+)\n:class: dropdown", markdown)
    assert len(exercises) >= 3, "at least three exercises per section"
    assert exercises == solutions, "every exercise needs a solution in a dropdown, in the same order"
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert len(re.findall(r"^check_\w+\(", code, flags=re.M)) >= 2 * len(exercises), "each exercise is checked twice: learner stub and solution"
    assert "sys.path" not in code, "notebooks import the installed package, never edit sys.path"


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    """Build the whole book once, as `make book` does, with warnings as errors; returns the html folder."""
    jupyter_book = shutil.which("jupyter-book", path=str(Path(sys.executable).parent))
    assert jupyter_book, "jupyter-book is not installed in this environment"
    output = tmp_path_factory.mktemp("site")
    # nbval executes every notebook and compares it with its stored outputs, so the site is built from those stored
    # outputs rather than executing each notebook a second time: the same configuration, execution off.
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["execute"]["execute_notebooks"] = "off"
    (output / "_config.yml").write_text(yaml.safe_dump(config))
    result = subprocess.run([jupyter_book, "build", str(ROOT), "--path-output", str(output), "--config",
                             str(output / "_config.yml"), "-W", "-n", "--keep-going"],
                            capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return output / "_build" / "html"


def notebook_pages(html: Path) -> list[Path]:
    return [html / path.relative_to(ROOT).with_suffix(".html") for path in NOTEBOOKS]


def test_book_builds_without_warnings_and_renders_its_parts(built_site):
    section = (built_site / "chapters" / "1_mechanism" / "1_attention_from_scratch.html").read_text()
    assert 'class="solution' in section and "dropdown" in section, "solutions rendered as dropdowns"
    assert "Vaswani" in section, "citations resolve to the bibliography"
    assert re.search(r"largest of 16\s+weights averages <span[^>]*>0\.\d{3}", section), "glued numbers appear in the prose"
    assert "Vaswani" in (built_site / "chapters" / "references.html").read_text()


@pytest.mark.parametrize("index", range(len(NOTEBOOKS)), ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_page_has_launch_buttons_and_alt_text(built_site, index):
    page = notebook_pages(built_site)[index].read_text()
    assert "mybinder.org/v2/gh/" in page and "colab.research.google.com/github/" in page, "Binder and Colab launch buttons"
    images = re.findall(r"<img [^>]*>", page)
    output_images = [tag for tag in images if "_images/" in tag]
    assert output_images, "each section shows at least one figure"
    missing = [tag for tag in output_images if not re.search(r'alt="[^"]{15,}"', tag)]
    assert not missing, f"figures without alt text: {missing}"


def test_internal_links_resolve(built_site):
    broken = []
    for page in built_site.rglob("*.html"):
        for target in re.findall(r'href="([^"#:?]+\.html)(?:#[^"]*)?"', page.read_text()):
            if not (page.parent / target).resolve().exists():
                broken.append(f"{page.relative_to(built_site)} -> {target}")
    assert not broken, broken


def chromium_or_skip() -> str:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        # CI installs Chromium (.ci/run), so there the browser test always runs.
        assert os.environ.get("CI") != "true", "CI must install chromium (apt-get install -y chromium)"
        pytest.skip("Chromium is not installed here: `apt-get install -y chromium` to run the browser test")
    return chromium


def test_solutions_open_in_a_real_browser(built_site):
    from playwright.sync_api import sync_playwright

    chromium = chromium_or_skip()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        page = browser.new_page()
        page.goto((built_site / "chapters" / "1_mechanism" / "1_attention_from_scratch.html").as_uri())
        solution = page.locator("details.solution, .solution.dropdown").first
        body = solution.locator("pre").first
        assert not body.is_visible(), "solutions start closed"
        solution.locator("summary, .summary-title, p.admonition-title").first.click()
        body.wait_for(state="visible", timeout=5000)
        assert "solution_softmax" in body.inner_text()
        browser.close()


def test_every_exercise_is_in_the_instructors_index():
    guide = (ROOT / "chapters" / "instructors.md").read_text()
    labels = [label for path in NOTEBOOKS
              for label in re.findall(r"```\{exercise\}\n:label: ([\w-]+)", "".join(
                  "".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown"))]
    missing = [label for label in labels if f"{{ref}}`{label}`" not in guide]
    assert not missing, f"exercises missing from chapters/instructors.md: {missing}"
    assert len(labels) == len(set(labels)), "exercise labels must be unique across the book"
