"""Glued numbers and citations read properly on the website and in JupyterLab, from one source.

The notebooks write each number the prose shows as ``{eval}`glue.text("name:fmt")```, and each citation as
``{eval}`glue.cite_t("key")``` or ``{eval}`glue.cite_p("key1,key2")```: MyST's inline-expression role (see
``mha.book``). jupyterlab-myst renders these in JupyterLab from the results stored in the cell's metadata, and
re-evaluates them in the kernel when the reader runs the cell; it cannot read a bibliography, so ``{cite:t}`` would
show its bare key with a "Citation Not Found" mark there. On the website there is no kernel: this Sphinx extension
hands the same roles to myst-nb's ``{glue:text}`` paste, which reads the notebook's stored glue record, and to
sphinxcontrib-bibtex's ``{cite:t}`` and ``{cite:p}``, linked to the bibliography. Any other ``{eval}`` expression
fails the build with a warning that says which forms to use.
"""

from __future__ import annotations

import re

from myst_nb.ext.glue.roles import PasteTextRole

GLUED_TEXT = re.compile(r"""glue\.text\("([^"`]+)"\)""")
CITATION = re.compile(r"""glue\.cite_([tp])\("([\w\-]+(?:,[\w\-]+)*)"\)""")


class GluedNumberRole(PasteTextRole):
    """``{eval}`glue.text("name:fmt")``` pastes the glued ``name`` formatted by ``fmt``, as ``{glue:text}`` does;
    ``{eval}`glue.cite_t("key")``` and ``glue.cite_p(...)`` are sphinxcontrib-bibtex's ``{cite:t}`` and ``{cite:p}``."""

    def __call__(self, name, rawtext, text, lineno, inliner, options=None, content=()):
        self.lineno = lineno  # the cite role takes the line number that the base class turns into source and line
        return super().__call__(name, rawtext, text, lineno, inliner, options, content)

    def run(self):
        text = self.text.strip()
        citation = CITATION.fullmatch(text)
        if citation is not None:
            kind, keys = citation.groups()
            cite_role = self.document.settings.env.get_domain("cite").role(kind)
            return cite_role(f"cite:{kind}", self.rawtext, keys, self.lineno, self.inliner, {}, [])
        number = GLUED_TEXT.fullmatch(text)
        if number is None:
            message = (f"{{eval}}`{self.text}`: the book's pages show glued numbers and citations only; write "
                       '{eval}`glue.text("name:fmt")` with a name a code cell above glues, or '
                       '{eval}`glue.cite_t("key")` / glue.cite_p("key") with keys from references.bib.')
            return [], [self.inliner.reporter.warning(message, line=self.line)]
        self.text = number[1]
        return super().run()


def register_role(app) -> None:
    # myst-nb registers its own {eval} (which needs a live kernel) when it is set up; this runs after every
    # extension's setup, so the book's role is the one pages use.
    app.add_role("eval", GluedNumberRole(), override=True)


def setup(app):
    app.connect("builder-inited", register_role)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
