"""What the views say in words, checked without a browser (the views are drawn in tests/site/test_site_views.py).

- a head's score on a typed sentence that ties with many of the treebank's sentences says "tied" rather than a share
  "lower" that counts the ties as lower (scores.js, against shares worked out by hand);
- no view that takes a sentence typed by the reader counts the sentences of its menu in its guidance ("all five
  sentences"), which stops being true when the reader's own sentence joins the menu.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from test_web_sources import WEB, run_node

ROOT = Path(__file__).resolve().parents[2]
LEVELS = [step / 20 for step in range(21)]  # the treebank spread's quantile levels, 0 to 1 by 0.05


def standing(value: float, levels: list[float], quantiles: list[float]) -> str:
    """scores.js's text for where ``value`` stands among the treebank's sentences."""
    code = ("const scores = await import(process.argv[1] + '/views/scores.js');\n"
            "const [value, levels, quantiles] = JSON.parse(process.argv[2]);\n"
            "process.stdout.write(JSON.stringify(scores.standingText(value, levels, quantiles)));")
    return json.loads(run_node(code, WEB.as_uri(), json.dumps([value, levels, quantiles])))


def test_a_score_tied_with_the_treebank_says_tied_and_not_all_lower():
    # every sentence of the treebank scores 1.00, as this one does: none scores lower, all score the same
    assert standing(1.0, LEVELS, [1.0] * 21) == "all tied"
    # half the sentences score 1.00 (levels 0.5 to 1), the others between 0.90 and 0.945: by hand, the share below
    # 0.995 is 0.45 + 0.05 * (0.995 - 0.945) / (1.0 - 0.945) = 0.4955, so 50% lower and the other 50% tied
    plateau = [0.9 + level / 10 if level < 0.5 else 1.0 for level in LEVELS]
    assert standing(1.0, LEVELS, plateau) == "50% lower, 50% tied"
    # no tie: the interpolated share, 0.5 + 0.5 * (0.3 - 0.2) / (0.6 - 0.2) = 0.625, and above every sentence, 100%
    assert standing(0.3, [0, 0.5, 1], [0.1, 0.2, 0.6]) == "63%"
    assert standing(0.7, [0, 0.5, 1], [0.1, 0.2, 0.6]) == "100%"


COUNTED = re.compile(r"\b(?:all|the|each of the|every one of the)\s+"
                     r"(?:two|three|four|five|six|seven|eight|nine|ten|\d+)\s+sentences\b", re.IGNORECASE)
RECIPE = re.compile(r"""data-mha-recipe="([^"]*)\"""")


def view_recipes() -> list[tuple[str, dict]]:
    """Every view recipe the book's pages carry (a notebook's stored output, or a page's own HTML), with its file."""
    found = []
    for source in sorted([*(ROOT / "chapters").rglob("*.ipynb"), *(ROOT / "chapters").rglob("*.md")]):
        texts = [source.read_text()]
        if source.suffix == ".ipynb":
            texts = ["".join(output.get("data", {}).get("text/html", []))
                     for cell in json.loads(texts[0])["cells"] for output in cell.get("outputs", [])]
        for text in texts:
            found += [(source.name, json.loads(html.unescape(match))) for match in RECIPE.findall(text)]
    return found


def test_no_view_that_takes_typed_sentences_counts_its_sentences_in_its_guidance():
    recipes = view_recipes()
    typed = [(name, recipe) for name, recipe in recipes if recipe["view"] == "ModelHeadExplorer"]
    assert len(typed) >= 5, [name for name, _ in recipes]  # 3.1 to 3.4 and the home page
    counted = [(name, found.group(0)) for name, recipe in typed
               for key in ("what_to_try", "what_to_notice")
               for found in COUNTED.finditer(recipe["arguments"].get(key) or "")]
    assert not counted, f"the menu grows by each sentence the reader types, so these counts stop being true: {counted}"
