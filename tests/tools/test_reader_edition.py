"""The reader edition (scripts/reader_edition.py), which every launch button of the website opens, and the markdown
conversion it shares with the student edition (scripts/readable.py): rendered as plain CommonMark, as Colab or a
plain Jupyter would, no notebook of either edition shows MyST (a role, a directive, a ``(label)=`` target) or holds
a relative link; the reader edition keeps every solution, folded, with the book's code cells and outputs; and the
launch buttons (website/reader_buttons.py) open the reader branch.

The website's own build is not needed here: ``tests/test_book.py`` checks the launch buttons of every notebook page
of the real build.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import load_script
from markdown_it import MarkdownIt

import website.reader_buttons as buttons

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "chapters").rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)
reader = load_script("reader_edition")
student = load_script("student_edition")
readable = load_script("readable")
COMMONMARK = MarkdownIt("commonmark")

# MyST left in a cell, in its source or in the HTML that CommonMark makes of it
RAW_ROLE = re.compile(r"\{[\w:-]+\}`")  # {eval}`...`, {doc}`...`, {ref}`...`, {cite:p}`...`, {math}`...`
RAW_DIRECTIVE = re.compile(r"^[ \t]*(?:`{3,}|:{3,})\{[\w:-]+\}", re.M)
RAW_TARGET = re.compile(r"^\([^()\s]+\)=[ \t]*$", re.M)
RENDERED_ROLE = re.compile(r"\{[\w:-]+\}<code>")  # a role's name before its code span
RENDERED_DIRECTIVE = re.compile(r"<code class=\"language-\{|<p>:{3,}\{")
RENDERED_TARGET = re.compile(r"<p>\([^()\s]+\)=")
LINK = re.compile(r"\b(?:href|src)=\"([^\"]*)\"")


@pytest.fixture(scope="module")
def editions(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("editions")
    assert sorted(reader.write_edition(out / "reader")) == NOTEBOOKS
    assert sorted(student.write_edition(out / "student")) == NOTEBOOKS
    return {"reader": out / "reader", "student": out / "student"}


def markdown_cells(notebook: dict) -> list[str]:
    return ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "markdown"]


def myst_left(text: str) -> list[str]:
    """What of MyST a markdown cell still shows, read in its source and in its CommonMark rendering; and every link
    or image that is neither absolute (http, https) nor in-page (#)."""
    html = COMMONMARK.render(text)
    found = [match[0] for pattern in (RAW_ROLE, RAW_DIRECTIVE, RAW_TARGET) for match in pattern.finditer(text)]
    found += [match[0] for pattern in (RENDERED_ROLE, RENDERED_DIRECTIVE, RENDERED_TARGET)
              for match in pattern.finditer(html)]
    found += [f"relative link {target}" for target in LINK.findall(html) if not re.match(r"https?://|#", target)]
    return found


def test_the_book_itself_holds_the_myst_that_the_editions_convert():
    """The census the editions start from: the book's notebooks are MyST (this test's patterns find it)."""
    left = [item for path in NOTEBOOKS for text in markdown_cells(json.loads((ROOT / path).read_text()))
            for item in myst_left(text)]
    assert sum(item.startswith("{eval}") for item in left) > 1000
    assert any(item.startswith("{doc}") for item in left) and any(item.startswith("{ref}") for item in left)
    assert any(RAW_TARGET.match(item) for item in left) and any("{exercise}" in item for item in left)


@pytest.mark.parametrize("edition", ["reader", "student"])
@pytest.mark.parametrize("path", NOTEBOOKS)
def test_every_notebook_reads_as_plain_commonmark_with_absolute_links(editions, edition, path):
    notebook = json.loads((editions[edition] / path).read_text())
    left = [(index, item) for index, text in enumerate(markdown_cells(notebook)) for item in myst_left(text)]
    assert not left, f"{edition} edition of {path}: MyST or relative links left: {left[:8]}"
    site = readable.site_url()
    links = [target for text in markdown_cells(notebook) for target in LINK.findall(COMMONMARK.render(text))]
    assert all(link.startswith(("#", site, "https://")) for link in links)


def test_links_lead_to_the_pages_of_the_website():
    """{doc} and {ref} roles and relative links become the website's addresses (GitHub Pages of repository.url where
    _config.yml sets no html.baseurl), a label's page found wherever it lies, a citation the references page."""
    site = readable.site_url()
    owner, name = load_script("book_release").repository_url().split("/")[-2:]
    assert site == f"https://{owner.lower()}.github.io/{name}/"
    here = ROOT / "chapters" / "2_geometry" / "2_low_rank_bottleneck.ipynb"
    text = ("See {doc}`../1_mechanism/2_multi_head_attention`, {ref}`why-several-heads`, {ref}`this <ov-sum>`, "
            "[the notation](../notation.md) and [a figure](#fig), {math}`x^2`.\n\n(why-here)=\n## Heading\n")
    shown = readable.readable_markdown(text, {}, here)
    assert "[Multi-head attention" in shown and f"]({site}chapters/1_mechanism/2_multi_head_attention.html)" in shown
    assert f"({site}chapters/1_mechanism/2_multi_head_attention.html#why-several-heads)" in shown
    assert f"[this]({site}chapters/2_geometry/1_subspaces_and_circuits.html#ov-sum)" in shown
    assert f"[the notation]({site}chapters/notation.html)" in shown and "[a figure](#fig)" in shown
    assert "$x^2$" in shown and "(why-here)=" not in shown and "## Heading" in shown


def test_every_kind_of_directive_becomes_plain_markdown():
    here = ROOT / "chapters" / "1_mechanism" / "1_attention_from_scratch.ipynb"
    text = "\n\n".join([
        "```{note}\nA *note*.\n```", ":::{admonition} Careful\n:class: warning\nMind the gap.\n:::",
        "```{dropdown} More\nHidden.\n```", "```{math}\n:label: eq-one\na = b\n```",
        "```{figure} ../images/plot.png\n:alt: A plot\n\nThe caption.\n```", "````{tip}\n```{hint}\nNested.\n```\n````",
        "```{code-block} python\nx = {eval}\n```", "```{margin}\nAside.\n```"])
    shown = readable.readable_markdown(text, {}, here)
    assert not myst_left(shown.replace("x = {eval}", "")), shown
    assert "> **Note**\n>\n> A *note*." in shown and "> **Careful**" in shown
    assert "<details>\n<summary>More</summary>\n\nHidden.\n\n</details>" in shown
    assert "$$\na = b\n$$" in shown and f"![A plot]({readable.site_url()}chapters/images/plot.png)" in shown
    assert "*The caption.*" in shown and "<summary>Hint</summary>" in shown and "```python\nx = {eval}\n```" in shown
    assert "Aside." in shown


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_the_reader_edition_keeps_every_solution_folded_and_every_hint_folded(editions, path):
    book = json.loads((ROOT / path).read_text())
    notebook = json.loads((editions["reader"] / path).read_text())
    exercises = student.exercises(book)
    everything = "\n".join(markdown_cells(notebook))
    solutions = re.findall(r"```\{solution-start\}[ \t]*(\S+)", "\n".join("".join(c["source"]) for c in book["cells"]))
    assert solutions == [exercise.label for exercise in exercises], f"{path}: one solution per exercise"
    for exercise in exercises:
        summary = f"<summary>{reader.SOLUTION_SUMMARY.format(title=exercise.title)}</summary>"
        marker = reader.SOLUTION_CODE.format(title=exercise.title)
        assert summary in everything or marker in everything, f"{path}: the solution of {exercise.label} is gone"
        assert f'<a id="{exercise.label}"></a>' in everything and f"**Exercise: {exercise.title}**" in everything
    hints = sum(exercise.hints for exercise in exercises)
    assert len(re.findall(r"<details>\n<summary>Hint", everything)) == hints
    assert everything.count("<details>") == everything.count("</details>") >= hints + 1
    # the book's code cells, with their outputs, all there and in order; each of a solution after its marker cell
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert [(c["source"], c["outputs"]) for c in code] == \
        [(c["source"], c["outputs"]) for c in book["cells"] if c["cell_type"] == "code"]
    for index, cell in enumerate(notebook["cells"]):
        if reader.SOLUTION_TAG in cell.get("metadata", {}).get("tags", []):
            assert cell["metadata"]["jupyter"]["source_hidden"]
            previous = notebook["cells"][index - 1]
            assert previous["cell_type"] == "code" or "its code (the worked solution" in "".join(previous["source"])
    tagged = sum(reader.SOLUTION_TAG in c.get("metadata", {}).get("tags", []) for c in code)
    assert tagged == sum(len(solution.code) for solution in student.split_notebook(book)[1])


def test_the_reader_branch_holds_the_notebooks_and_binders_files(tmp_path):
    out = reader.write_branch(tmp_path / "reader")
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.ipynb")) == NOTEBOOKS
    assert {p.name for p in (out / "binder").iterdir()} == {"requirements.txt", "postBuild", "runtime.txt"}
    assert "reader edition" in (out / "README.md").read_text()


# ---- the launch buttons (website/reader_buttons.py) ----

def theme_buttons(branch: str) -> list[dict]:
    """One notebook page's header buttons as sphinx-book-theme 1.x writes them (header_buttons/launch.py)."""
    page = "chapters/1_mechanism/1_attention_from_scratch.ipynb"
    return [
        {"type": "group", "label": "download-buttons", "buttons": [
            {"type": "link", "label": "download-source-button", "url": f"../../_sources/{page}"},
            {"type": "link", "label": "download-pdf-button", "url": "#"}]},
        {"type": "group", "label": "launch-buttons", "buttons": [
            {"type": "link", "text": "Binder",
             "url": f"https://mybinder.org/v2/gh/owner/repo/{branch}?urlpath=lab/tree/{page}"},
            {"type": "link", "text": "JupyterHub", "url": "https://hub.example.edu/hub/user-redirect/git-pull?repo="
             f"https%3A//github.com/owner/repo&urlpath=lab/tree/repo/{page}&branch={branch}"},
            {"type": "link", "text": "Colab",
             "url": f"https://colab.research.google.com/github/owner/repo/blob/{branch}/{page}"},
            {"type": "link", "text": "Deepnote", "url": "https://deepnote.com/launch?url=https%3A%2F%2Fgithub.com"
             f"%2Fowner%2Frepo%2Fblob%2F{branch}%2F{page}"}]},
        {"type": "link", "label": "repository-button", "url": "https://github.com/owner/repo"}]


def test_every_launch_button_opens_the_reader_branch_and_the_download_its_notebook():
    page = theme_buttons("main")
    notebook = "../../notebooks/chapters/1_mechanism/1_attention_from_scratch.ipynb"
    assert buttons.redirect_buttons(page, "main", "reader", notebook) == 5
    launch = {button["text"]: button["url"] for button in page[1]["buttons"]}
    assert launch == {button["text"]: button["url"] for button in theme_buttons("reader")[1]["buttons"]}
    assert page[0]["buttons"][0]["url"] == notebook and page[0]["buttons"][1]["url"] == "#"
    assert page[2]["url"] == "https://github.com/owner/repo", "the repository button still opens the source"


def test_a_launch_address_that_names_no_branch_fails_rather_than_open_the_source():
    page = [{"type": "group", "label": "launch-buttons",
             "buttons": [{"type": "link", "text": "Other", "url": "https://launch.example.org/?file=x.ipynb"}]}]
    with pytest.raises(ValueError, match="names no branch"):
        buttons.redirect_buttons(page, "main", "reader", None)


def test_the_website_launches_the_reader_branch_and_the_student_website_its_own():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["sphinx"]["local_extensions"]["reader_buttons"] == "website"
    assert reader.reader_branch() == config["sphinx"]["config"]["reader_edition_branch"] == "reader"
    assert buttons.SITE_FOLDER == reader.SITE_FOLDER
    student_config = load_script("student_site").site_config()
    assert student_config["sphinx"]["config"]["reader_edition_branch"] == ""
    assert student_config["repository"]["branch"] == "student"
