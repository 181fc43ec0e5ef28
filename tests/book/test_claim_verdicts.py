"""The claims page and the chapters give one verdict per claim: the chapter glues it once (mha.book.glue_verdict)
and shows it in its own verdict sentence, and the claims page pastes that same record, so the two cannot disagree.

These tests read the committed notebooks and chapters/claims.md; they fail when a verdict on the claims page is
typed rather than pasted, when a pasted verdict is not one the chapter shows, or when a chapter's verdict is missing
from the claims page.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from mha.book import glued_records, parse_verdict

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ROOT / "chapters"
CLAIMS = CHAPTERS / "claims.md"
PASTED_VERDICT = re.compile(r"\{glue:text\}`(?P<notebook>[\w/.-]+\.ipynb)::(?P<name>\w+_verdict)(?::s)?`")
ANY_PASTE = re.compile(r"\{glue:text\}`[^`]*`")
SHOWN_VERDICT = re.compile(r"""glue\.text\("(?P<name>\w+_verdict)(?::s)?"\)""")
VERDICT_WORD = re.compile(r"\b(holds?|fails?|not shown|untested)\b", re.IGNORECASE)


def claims_page() -> str:
    return CLAIMS.read_text(encoding="utf-8")


def glance_rows(page: str) -> list[tuple[str, str]]:
    """(claim, verdict cell) for each row of the at-a-glance table."""
    table = page.split("## At a glance", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("|")][2:]  # past the header and its rule
    cells = [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]
    return [(row[0], row[1]) for row in cells]


def verdict_paragraphs(page: str) -> list[str]:
    """Every paragraph of the claims page that starts with *Verdict:*."""
    return [paragraph for paragraph in page.split("\n\n") if paragraph.lstrip().startswith("*Verdict:*")]


def bold_spans(text: str) -> list[str]:
    return re.findall(r"\*\*(.+?)\*\*", text, flags=re.DOTALL)


def notebook_verdicts(path: Path) -> tuple[dict[str, str], set[str]]:
    """The verdicts a notebook glues (name: text) and the verdict names its own prose shows."""
    notebook = nbformat.read(path, as_version=4)
    glued = {name: value for name, value in glued_records(notebook).items() if name.endswith("_verdict")}
    shown = {match["name"] for cell in notebook.cells if cell.cell_type == "markdown"
             for match in SHOWN_VERDICT.finditer(cell.source)}
    return glued, shown


def test_every_row_of_the_at_a_glance_table_pastes_its_verdict_and_types_none():
    rows = glance_rows(claims_page())
    assert len(rows) >= 10
    for claim, cell in rows:
        assert PASTED_VERDICT.search(cell), f"the verdict of {claim!r} is not pasted from its chapter: {cell!r}"
        typed = VERDICT_WORD.findall(ANY_PASTE.sub("", cell))
        assert not typed, f"the verdict of {claim!r} types {typed} beside the pasted record: {cell!r}"


def test_every_verdict_paragraph_pastes_its_verdict_and_bolds_no_typed_one():
    paragraphs = verdict_paragraphs(claims_page())
    assert len(paragraphs) >= 10
    for paragraph in paragraphs:
        assert PASTED_VERDICT.search(paragraph), f"a verdict paragraph pastes no chapter verdict: {paragraph[:120]!r}"
        for span in bold_spans(paragraph):
            typed = VERDICT_WORD.findall(ANY_PASTE.sub("", span))
            assert not typed, f"a verdict paragraph states {typed} in bold by hand: {span!r}"


def test_every_claim_of_the_table_has_its_verdict_in_its_section():
    page = claims_page()
    in_table = {match["name"] for _, cell in glance_rows(page) for match in PASTED_VERDICT.finditer(cell)}
    in_sections = {match["name"] for paragraph in verdict_paragraphs(page)
                   for match in PASTED_VERDICT.finditer(paragraph)}
    assert in_table <= in_sections, f"in the table but in no section's verdict: {sorted(in_table - in_sections)}"
    unlisted = [paragraph[:100] for paragraph in verdict_paragraphs(page)
                if not {match["name"] for match in PASTED_VERDICT.finditer(paragraph)} & in_table]
    assert not unlisted, f"sections whose verdict is not in the table at a glance: {unlisted}"


def pasted_verdicts() -> list[tuple[str, str]]:
    return sorted({(match["notebook"], match["name"]) for match in PASTED_VERDICT.finditer(claims_page())})


@pytest.mark.parametrize("notebook, name", pasted_verdicts(), ids=lambda value: str(value))
def test_each_pasted_verdict_is_the_one_its_chapter_glues_and_shows(notebook, name):
    path = CHAPTERS / notebook
    assert path.is_file(), f"the claims page pastes {name} from {notebook}, which does not exist"
    glued, shown = notebook_verdicts(path)
    assert name in glued, f"{notebook} glues no {name}; glue it there with mha.book.glue_verdict"
    parse_verdict(eval(glued[name]))  # a string's repr, as myst-nb stores it; raises unless it is a verdict  # noqa: S307
    assert name in shown, f"{notebook} glues {name} but its own prose never shows it; the chapter's verdict " \
                          f"sentence must show the record the claims page pastes"


def test_every_verdict_a_chapter_glues_is_on_the_claims_page():
    pasted = set(pasted_verdicts())
    missing = []
    for path in sorted(CHAPTERS.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        glued, _ = notebook_verdicts(path)
        notebook = path.relative_to(CHAPTERS).as_posix()
        missing += [f"{notebook}::{name}" for name in glued if (notebook, name) not in pasted]
    assert not missing, f"chapters glue verdicts the claims page does not show: {missing}"
