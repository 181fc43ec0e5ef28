"""mha.book.prose: glue stores a number for the prose at the precision the prose shows, as the record myst-nb's
glue displays, without loading myst-nb or nbformat in the kernel."""

import subprocess
import sys

import numpy as np
import pytest

from mha.book import GLUE_RECORD, glue


def test_glue_asks_floats_for_the_format_the_prose_uses():
    with pytest.raises(ValueError, match="needs the format"):
        glue("share", 0.25)
    with pytest.raises(ValueError, match="cannot show"):
        glue("share", float("nan"), ".2f")
    with pytest.raises(ValueError, match="plain identifier"):
        glue("a share", 0.25, ".2f")
    with pytest.raises(TypeError, match="number or a string"):
        glue("share", [0.25], ".2f")


def test_glue_displays_the_record_that_myst_nb_glue_displays(monkeypatch):
    import IPython.display
    import myst_nb.ext.glue

    from mha.book.prose import _GLUED

    ours, theirs = [], []
    monkeypatch.setattr(IPython.display, "display", lambda *shown, **options: ours.append((shown, options)))
    monkeypatch.setattr(myst_nb.ext.glue, "ipy_display", lambda *shown, **options: theirs.append((shown, options)))
    for name, value, fmt in (("share", 0.123456, ".1%"), ("heads", np.int64(7), None), ("best", "L0H2", None),
                             ("found", True, None), ("tiny", -1e-9, ".2f")):
        glue(name, value, fmt)
        myst_nb.ext.glue.glue(name, _GLUED[name], display=False)  # myst-nb's own glue, given the rounded value
    assert ours == theirs and len(ours) == 5
    assert ours[0] == (({GLUE_RECORD: "0.123"},), {"raw": True, "metadata": {
        "scrapbook": {"name": "share", "mime_prefix": "application/papermill.record/"}}})


@pytest.mark.slow
def test_glue_leaves_myst_nb_and_nbformat_unloaded():
    """The kernel of every notebook glues; myst-nb's glue module would load nbformat and jsonschema with it."""
    code = ("import sys; from mha.book import glue; glue('share', 0.25, '.2f'); "
            "print(sorted({'myst_nb', 'nbformat', 'jsonschema'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
