"""One verdict per claim, glued once by the chapter that tests it and pasted by the claims page (all chapters).

A chapter states its verdict on a claim with :func:`glue_verdict`, under a name ending in ``_verdict``; its own
verdict sentence shows it (``*Verdict:* **{eval}`glue.text("coref_nominal_verdict")`**``) and the claims page
pastes the same record (``{glue:text}`3_head_roles/3_coreference.ipynb::coref_nominal_verdict:s```). The two can
then not disagree; ``tests/book/test_claim_verdicts.py`` checks that every verdict on the claims page is such a
paste, and that the chapter shows the same record in its own verdict. See the claims page for what each word means.
"""

from __future__ import annotations

from mha.book.prose import glue

__all__ = ["VERDICTS", "glue_verdict", "parse_verdict", "verdict_text"]

# The words a verdict starts with, as the claims page defines them.
VERDICTS = ("holds", "holds with a qualifier", "fails on this model", "not shown")
VERDICT_SUFFIX = "_verdict"


def verdict_text(verdict: str, qualifier: str | None = None) -> str:
    """The verdict as the prose shows it: ``"holds with a qualifier: small but real"`` from its word and qualifier."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict {verdict!r} is not one of the book's verdicts {VERDICTS}; the claims page says "
                         "what each means.")
    if qualifier is None:
        return verdict
    if not isinstance(qualifier, str) or not qualifier.strip() or qualifier != qualifier.strip():
        raise ValueError(f"the qualifier {qualifier!r} must be a non-empty phrase without leading or trailing spaces, "
                         "or None.")
    return f"{verdict}: {qualifier}"


def parse_verdict(text: str) -> tuple[str, str | None]:
    """``(verdict, qualifier)`` from a verdict's text, the inverse of :func:`verdict_text`."""
    if not isinstance(text, str):
        raise TypeError(f"a verdict is text, not {type(text).__name__}.")
    for verdict in sorted(VERDICTS, key=len, reverse=True):  # "holds with a qualifier" before "holds"
        if text == verdict:
            return verdict, None
        if text.startswith(verdict + ": "):
            qualifier = text[len(verdict) + 2:]
            if not qualifier.strip() or qualifier != qualifier.strip():
                raise ValueError(f"{text!r}: the qualifier after one of the book's verdicts {VERDICTS} is empty or "
                                 "padded with spaces.")
            return verdict, qualifier
    raise ValueError(f"{text!r} does not start with one of the book's verdicts {VERDICTS}.")


def glue_verdict(name: str, verdict: str, qualifier: str | None = None) -> str:
    """Glue a claim's verdict under ``name`` (ending in ``_verdict``) for the chapter and the claims page; returns
    the text glued, ``verdict`` or ``"verdict: qualifier"``."""
    if not isinstance(name, str) or not name.endswith(VERDICT_SUFFIX):
        raise ValueError(f"a verdict's glue name ends in {VERDICT_SUFFIX!r} (such as 'coref_nominal_verdict'), "
                         f"not {name!r}.")
    text = verdict_text(verdict, qualifier)
    glue(name, text)
    return text
