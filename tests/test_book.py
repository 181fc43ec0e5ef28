"""The book itself: notebooks are committed executed and follow the section skeleton, and the site builds
with warnings treated as errors (``jupyter-book build -W -n --keep-going``; the build is the ``built_site``
fixture in conftest.py, shared with test_site.py)."""

import ast
import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import CHROMIUM_ARGS

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
PAGES = sorted(p for p in (ROOT / "chapters").rglob("*.md") if p.name != "notation.md")  # notation.md shows the others
HIDDEN = {"hide-input", "remove-input", "remove-cell"}
GLUE_RECORD = "application/papermill.record/text/plain"
# A head is written L3H1 (layer 3, head 1, both from 0) and nothing else: not "L3 H1", "L3-H1", "layer 3, head 1" ...
OTHER_HEAD_SPELLINGS = re.compile(r"\bL\d+[ _-]H\d+\b|\blayer \d+,? head \d+\b|\blayer \d+'s head \d+\b")
# ... and code makes labels with mha.book.head_label, never with an f-string of its own
HAND_MADE_LABEL = re.compile(r"""L\{[^}]*\} ?H\{|"L\{\} ?H\{\}"|"L" \+ .* \+ " ?H" \+""")


def test_there_are_notebooks_and_every_one_is_in_the_table_of_contents():
    assert len(NOTEBOOKS) >= 2
    toc = (ROOT / "_toc.yml").read_text()
    missing = [str(p.relative_to(ROOT)) for p in NOTEBOOKS if f"file: {p.relative_to(ROOT).with_suffix('')}" not in toc]
    assert not missing, f"notebooks not in _toc.yml (the book would not show them): {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_executed(path):
    cells = json.loads(path.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    not_run = [
        i
        for i, c in enumerate(code)
        if c.get("execution_count") is None and "remove-cell" not in c["metadata"].get("tags", [])
    ]
    assert not not_run, f"code cells {not_run} of {path.name} were never executed: run `make notebooks` and commit"
    assert sum(bool(c["outputs"]) for c in code) >= len(code) // 2, (
        f"{path.name} has too few outputs for nbval to compare"
    )
    errors = [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
    assert not errors, f"{path.name} was committed with an error output"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_follows_the_section_skeleton(path):
    cells = json.loads(path.read_text())["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert re.search(r"\*\*After this section you will be able to\*\*", markdown), (
        "open with what the reader will be able to do"
    )
    assert "## Summary" in markdown and "## Exercises" in markdown
    exercises = re.findall(r"```\{exercise\}[^\n]*\n:label: ([\w-]+)", markdown)
    # predictions, explanations and investigations have no stub; every other exercise is checked twice
    unchecked = len(re.findall(r"^\*\*(?:Predict, then check|Explain in words|Open investigation)\*\* · ", markdown,
                               flags=re.M))
    solutions = re.findall(r"```\{solution-start\} ([\w-]+)\n:class: dropdown", markdown)
    assert len(exercises) >= 3, "at least three exercises per section"
    assert exercises == solutions, "every exercise needs a solution in a dropdown, in the same order"
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert len(re.findall(r"^(?:print\()?check_\w+\(", code, flags=re.M)) >= 2 * (len(exercises) - unchecked), \
        "each exercise is checked twice: learner stub and solution"
    assert "sys.path" not in code, "notebooks import the installed package, never edit sys.path"


def notebook_pages(html: Path) -> list[Path]:
    return [html / path.relative_to(ROOT).with_suffix(".html") for path in NOTEBOOKS]


def test_book_builds_without_warnings_and_renders_its_parts(built_site):
    section = (built_site / "chapters" / "1_mechanism" / "1_attention_from_scratch.html").read_text()
    assert 'class="solution' in section and "dropdown" in section, "solutions rendered as dropdowns"
    assert "Vaswani" in section, "citations resolve to the bibliography"
    assert re.search(r"largest of 16\s+weights averages <span[^>]*>0\.\d{3}", section), (
        "glued numbers appear in the prose"
    )
    assert "Vaswani" in (built_site / "chapters" / "references.html").read_text()


@pytest.mark.parametrize("index", range(len(NOTEBOOKS)), ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_page_has_launch_buttons_and_alt_text(built_site, index):
    page = notebook_pages(built_site)[index].read_text()
    assert "mybinder.org/v2/gh/" in page and "colab.research.google.com/github/" in page, (
        "Binder and Colab launch buttons"
    )
    # every launch button opens the reader edition (website/reader_buttons.py): the reader branch, the notebook at
    # its path; the ".ipynb" download button its copy in the site, which the build wrote; the repository button
    # still opens the source
    notebook = NOTEBOOKS[index].relative_to(ROOT).as_posix()
    reader = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]["reader_edition_branch"]
    launches = re.findall(r'href="(https://(?:mybinder\.org|colab\.research\.google\.com|[^"]*git-pull)[^"]*)"',
                          page)
    assert len(launches) >= 2 and all(reader in launch and notebook in launch for launch in launches), launches
    assert all(f"/blob/{reader}/{notebook}" in launch or f"/{reader}?urlpath=" in launch
               or f"branch={reader}" in launch for launch in launches), launches
    downloads = [link for link in re.findall(r'href="([^"]+\.ipynb)"', page) if not link.startswith("http")]
    assert downloads and not [link for link in downloads if "_sources" in link], downloads
    for link in downloads:
        assert (notebook_pages(built_site)[index].parent / link).resolve() == \
            (built_site / "notebooks" / notebook).resolve(), link
    assert (built_site / "notebooks" / notebook).is_file()
    assert re.search(r'href="https://github\.com/[^"/]+/[^"/]+"', page), "the repository button"
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



def test_solutions_open_in_a_real_browser(built_site, chromium):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.goto((built_site / "chapters" / "1_mechanism" / "1_attention_from_scratch.html").as_uri())
        solution = page.locator("details.solution, .solution.dropdown").first
        body = solution.locator("pre").first
        assert not body.is_visible(), "solutions start closed"
        solution.locator("summary, .summary-title, p.admonition-title").first.click()
        body.wait_for(state="visible", timeout=30_000)
        assert "solution_softmax" in body.inner_text()
        browser.close()


def test_every_exercise_is_in_the_exercise_index():
    guide = (ROOT / "chapters" / "exercise_index.md").read_text()  # generated by scripts/exercise_index.py
    labels = [label for path in NOTEBOOKS
              for label in re.findall(r"```\{exercise\}[^\n]*\n:label: ([\w-]+)", "".join(
                  "".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown"))]
    missing = [label for label in labels if f"{{ref}}`{label}`" not in guide and f"<{label}>`" not in guide]
    assert not missing, f"exercises missing from chapters/exercise_index.md: {missing}"
    assert len(labels) == len(set(labels)), "exercise labels must be unique across the book"


def code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def calls(source: str, name: str) -> int:
    """How many times a cell's code calls the function `name` (IPython magics are read as `pass`)."""
    lines = [line[:len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("%", "!")) else line
             for line in source.splitlines()]
    tree = ast.parse("\n".join(lines))
    return sum(isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
               for node in ast.walk(tree))


def is_hidden(cell) -> bool:
    return bool(HIDDEN & set(cell["metadata"].get("tags", [])))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_visible_code_cell_calls_glue(path):
    """Storing numbers for the prose is bookkeeping: glue calls live in hidden (remove-input) cells."""
    visible = [i for i, c in enumerate(code_cells(path)) if not is_hidden(c) and calls("".join(c["source"]), "glue")]
    assert not visible, (f"{path.name}: code cells {visible} (counting code cells from 0) call glue( in view; move the "
                         "glue calls into a following cell tagged remove-input")
    glued = sum(calls("".join(c["source"]), "glue") for c in code_cells(path))
    records = sum(GLUE_RECORD in o.get("data", {}) for c in code_cells(path) for o in c["outputs"])
    assert records >= 1 or glued == 0, f"{path.name}: the hidden glue cells must keep their outputs (the glue records)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_figure_styling_code_is_folded_away(path):
    """A cell that lays out a matplotlib figure is behind hide-input: the page shows the figure, not the styling."""
    exposed = [i for i, c in enumerate(code_cells(path))
               if "plt.subplots(" in "".join(c["source"]) and not is_hidden(c)]
    assert not exposed, f"{path.name}: code cells {exposed} draw a figure in view; tag them hide-input"


def stored_head_texts(path):
    """(where, text) for everything a reader sees of a notebook: prose, alt text and every stored text output."""
    for index, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] == "markdown":
            yield f"cell {index} (prose)", "".join(cell["source"])
            continue
        alt = cell["metadata"].get("mystnb", {}).get("image", {}).get("alt")
        if alt:
            yield f"cell {index} (alt text)", alt
        for output in cell.get("outputs", []):
            if output["output_type"] == "stream":
                yield f"cell {index} (output)", "".join(output["text"])
            for mime, data in output.get("data", {}).items():
                if mime.startswith("text/") or mime == GLUE_RECORD:
                    yield f"cell {index} (output)", data if isinstance(data, str) else "".join(data)


@pytest.mark.parametrize("path", NOTEBOOKS + PAGES, ids=lambda p: p.name)
def test_heads_are_named_one_way(path):
    """Prose, tables, printouts and figure labels write a head as L3H1; code makes the label with head_label."""
    if path.suffix == ".md":
        texts = [("prose", path.read_text())]
    else:
        texts = list(stored_head_texts(path))
        texts += [(f"code cell {i}", "".join(c["source"])) for i, c in enumerate(code_cells(path))]
    other = [f"{where}: {match.group(0)!r}" for where, text in texts for match in OTHER_HEAD_SPELLINGS.finditer(text)]
    assert not other, f"{path.name} spells heads another way than L3H1 (see chapters/notation.md):\n" + "\n".join(other)
    hand_made = [f"{where}: {match.group(0)!r}" for where, text in texts if where.startswith("code")
                 for match in HAND_MADE_LABEL.finditer(text)]
    assert not hand_made, f"{path.name} builds head labels by hand; use mha.book.head_label:\n" + "\n".join(hand_made)


def test_the_spelling_check_catches_the_old_spellings():
    for text in ("L0 H2", "L3-H1", "layer 1, head 4", "layer 0's head 9", "L{l} H{h}"):
        assert OTHER_HEAD_SPELLINGS.search(text) or HAND_MADE_LABEL.search(text), text
    for text in ("L0H2", "L11H10", "layer 0", "head 3", "f\"{head_label(l, h)}\"", "8-11"):
        assert not (OTHER_HEAD_SPELLINGS.search(text) or HAND_MADE_LABEL.search(text)), text


def test_the_notation_page_is_in_the_book_and_linked_from_the_landing_page():
    toc = (ROOT / "_toc.yml").read_text()
    assert "file: chapters/notation" in toc
    assert "{doc}`notation`" in (ROOT / "chapters" / "index.md").read_text()
    notation = (ROOT / "chapters" / "notation.md").read_text()
    for term in ("d_\\text{model}", "d_\\text{head}", "W_{QK}", "W_{OV}", "L3H1", "[CLS]", "[SEP]", "wordpiece",
                 "(batch, heads, seq, d_head)", "sums to 1", "may attend"):
        assert term in notation, f"the notation page should explain {term}"
