"""What every notebook of the book shares (all chapters): numbers at the precision the text shows, the prose's glued
numbers and citations, one name for each head, and the CPU threads a notebook uses.

- :mod:`~mha.book.rounding`: a number is stored as the reader sees it, rounded to the decimals the prose or the
  table shows, so that the stored outputs agree on every CPU (:func:`shown`, :func:`as_shown`).
- :mod:`~mha.book.prose`: :data:`glue`, which stores a number for the prose and reads it back (``glue.text``), and
  the citations (``glue.cite_t``, ``glue.cite_p``), the same in JupyterLab and on the website.
- :mod:`~mha.book.head_names`: ``L3H1`` for head 1 of layer 3, both counted from 0 (:func:`head_label`).
- :mod:`~mha.book.verdicts`: one verdict per claim, glued by the chapter that tests it and pasted by the claims
  page (:func:`glue_verdict`).
- :mod:`~mha.book.threads`: the two CPU threads a notebook gives torch, one each when the tests run notebooks side
  by side (:func:`set_cpu_threads`).

See "How to run this book" on the landing page, and the README's section on tests.
"""

from mha.book.head_names import head_label, head_labels, label_heads, parse_head_label
from mha.book.prose import (
    CITATION_LABELS,
    GLUE_RECORD,
    PROSE_CITATION,
    PROSE_NUMBER,
    citation_text,
    glue,
    glued_records,
    glued_text,
    prose_expression_results,
)
from mha.book.rounding import as_shown, decimals_shown, shown
from mha.book.threads import set_cpu_threads
from mha.book.verdicts import VERDICTS, glue_verdict, parse_verdict, verdict_text

__all__ = ["CITATION_LABELS", "GLUE_RECORD", "PROSE_CITATION", "PROSE_NUMBER", "VERDICTS", "as_shown", "citation_text",
           "decimals_shown", "glue", "glued_records", "glued_text", "head_label", "head_labels", "label_heads",
           "glue_verdict", "parse_head_label", "parse_verdict", "prose_expression_results", "set_cpu_threads", "shown",
           "verdict_text"]
