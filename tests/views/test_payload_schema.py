"""The payload's schema, written once in views.js and checked twice: by Python (mha.views.widget.check_payload, with
jsonschema) before a payload leaves the package, and by views.js (schemaProblem) when the page or Jupyter opens it.
Both must give the same verdict on every payload, real or broken; the map weights (bytes) are not part of it."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mha.views.payloads import site_payload
from mha.views.widget import PAYLOAD_SCHEMA, check_payload

torch.set_num_threads(1)

VIEWS_JS = Path(__file__).resolve().parents[2] / "src" / "mha" / "views" / "web" / "views.js"

# Node runs views.js as the page does (it sets globalThis.mhaViews), then checks each payload read from stdin
JS_VERDICTS = """
require(process.argv[1]);
const views = globalThis.mhaViews;
const payloads = JSON.parse(require("fs").readFileSync(0, "utf8"));
const problems = Object.fromEntries(Object.entries(payloads).map(
  ([name, payload]) => [name, views.schemaProblem(payload, views.PAYLOAD_SCHEMA, "the payload")]));
process.stdout.write(JSON.stringify({schema: views.PAYLOAD_SCHEMA, version: views.PAYLOAD_VERSION, problems}));
"""


def content(payload: dict) -> dict:
    """The JSON part of a payload: everything but the map weights, which travel beside it as bytes."""
    return {key: value for key, value in payload.items() if key != "weights"}


@pytest.fixture(scope="module")
def real():
    """One real payload of each kind, as the views give them (Jupyter's, with a typed sentence, for the model's)."""
    from mha.views.head_explorer import HeadExplorer
    from mha.views.induction_explorer import InductionLabExplorer
    from mha.views.model_explorer import ModelHeadExplorer
    from mha.views.training_timeline import TrainingTimelineView

    model = ModelHeadExplorer(["Paris is the capital of France ."])
    model.own_sentence.value = "A <b>bold</b> naïve “quote” ."
    assert model.typed_sentences == ["A <b>bold</b> naïve “quote” ."]
    return {"head-explorer": content(site_payload(HeadExplorer("It's <i>a</i> cat .", n_heads=3))),
            "table": content(site_payload(InductionLabExplorer(["induction_2layer_seed0"], n_sequences=2))),
            "table, typed in Jupyter": content(site_payload(model, hosted=True)),
            "table, typed in the website's page": content(site_payload(model)),
            "timeline": content(site_payload(TrainingTimelineView()))}


def changed(payload: dict, change) -> dict:
    """A deep copy of ``payload`` with ``change`` (a function that edits it in place) applied."""
    copied = copy.deepcopy(payload)
    change(copied)
    return copied


def broken_and_odd(real: dict) -> dict[str, tuple[dict, bool]]:
    """Variants of the real payloads, each with whether it still fits the schema."""
    table, head, timeline = real["table"], real["head-explorer"], real["timeline"]

    def set_in(path, value):
        def change(payload):
            *parents, last = path
            for part in parents:
                payload = payload[part]
            payload[last] = value
        return change

    def delete(key):
        return lambda payload: payload.pop(key)

    return {
        "version 3": (changed(table, set_in(["version"], 3)), False),
        "version '2' as text": (changed(table, set_in(["version"], "2")), False),
        "no kind": (changed(table, delete("kind")), False),
        "an unknown kind": (changed(table, set_in(["kind"], "movie")), False),
        "no palette": (changed(table, delete("palette")), False),
        "a palette of 255 colours": (changed(table, lambda p: p["palette"].pop()), False),
        "a palette colour by name": (changed(table, set_in(["palette", 3, 0], "red")), False),
        "a table without its strings": (changed(table, delete("strings")), False),
        "a menu that is a knob": (changed(table, set_in(["controls", 0, "kind"], "knob")), False),
        "a start below 0": (changed(table, set_in(["controls", 1, "start"], -1)), False),
        "a start that is true": (changed(table, set_in(["controls", 1, "start"], True)), False),
        "a start of 1.0": (changed(table, set_in(["controls", 1, "start"], 1.0)), True),  # a whole number still
        "a view that is text": (changed(table, set_in(["views", "0|0|0|0"], "0")), False),
        "a map of no rows": (changed(table, set_in(["drawn", 0, "map", "shape"], [0, 7])), False),
        "a drawn view without its message": (changed(table, lambda p: p["drawn"][0].pop("message")), False),
        "guidance that is not text": (changed(table, set_in(["guidance", "try"], None)), False),
        "a key the schema does not name": (changed(table, set_in(["extra"], {"anything": [1, None]})), True),
        "no note": (changed(table, delete("note")), True),
        "a head explorer without W_Q": (changed(head, delete("W_Q")), False),
        "a refusal that is a number": (changed(head, set_in(["refusals", "5"], 5)), False),
        "a timeline of no steps": (changed(timeline, set_in(["steps"], [])), False),
        "a timeline without its sequences": (changed(timeline, delete("sequences")), False),
    }


@pytest.fixture(scope="module")
def cases(real) -> dict[str, tuple[dict, bool]]:
    return {**{name: (payload, True) for name, payload in real.items()}, **broken_and_odd(real)}


@pytest.fixture(scope="module")
def js(cases) -> dict:
    """What views.js says of each case (its problem, or None), with the schema and version it checks against."""
    node = shutil.which("node")
    if node is None:
        assert os.environ.get("CI") != "true", "CI must install Node.js (apt-get install -y nodejs)"
        pytest.skip("Node.js is not installed here: `apt-get install -y nodejs` to check views.js's checker")
    payloads = {name: payload for name, (payload, _) in cases.items()}
    result = subprocess.run([node, "-e", JS_VERDICTS, str(VIEWS_JS)], input=json.dumps(payloads), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout)


def python_problem(payload: dict) -> str | None:
    try:
        check_payload(payload)
    except ValueError as problem:
        return str(problem)
    return None


@pytest.mark.browser
def test_python_and_views_js_check_the_same_schema(js):
    assert js["schema"] == PAYLOAD_SCHEMA and js["version"] == 2


@pytest.mark.browser
def test_python_and_views_js_accept_and_refuse_the_same_payloads(cases, js):
    assert len(cases) >= 10
    for name, (payload, fits) in cases.items():
        assert (python_problem(payload) is None) == fits, f"Python on {name}: {python_problem(payload)}"
        assert (js["problems"][name] is None) == fits, f"views.js on {name}: {js['problems'][name]}"


@pytest.mark.parametrize("change, where", [
    (lambda p: p.update(version=3), "at version: 3 is not one of [2]"),
    (lambda p: p.pop("guidance"), "at the payload: 'guidance' is a required property"),
    (lambda p: p.pop("drawn"), "at the payload: 'drawn' is a required property"),
    (lambda p: p["palette"].append(["#000000", "#ffffff"]), "at palette: "),
    (lambda p: p["palette"].__setitem__(7, ["#000000"]), "at palette/7: "),
    (lambda p: p["controls"][2].__setitem__("start", -2), "at controls/2/start: -2 is less than the minimum of 0"),
])
@pytest.mark.slow
def test_a_payload_that_does_not_fit_is_refused_naming_where(real, change, where):
    payload = changed(real["table"], change)
    with pytest.raises(ValueError, match="^the view's payload does not fit its schema ") as refused:
        check_payload(payload)
    assert where in str(refused.value)


@pytest.mark.slow
def test_the_weights_travel_beside_the_json_and_are_not_checked(real):
    payload = {**real["table"], "weights": b"\x00\x64" * 10}
    assert check_payload(payload) is payload


@pytest.mark.slow
def test_checking_a_payload_imports_no_format_grammar_and_leaves_it_importable():
    """jsonschema's optional "iri" format grammar (rfc3987_syntax, a second of CPU to import) stays out of a kernel
    that shows a view, since the schema checks no string format; another library can still import it afterwards."""
    probe = ("import sys\nfrom mha.views.widget import check_payload\nfrom mha.views.payloads import site_payload\n"
             "from mha.views.head_explorer import HeadExplorer\n"
             "check_payload(site_payload(HeadExplorer('a cat', n_heads=2)))\n"
             "import jsonschema\nprint('rfc3987_syntax' in sys.modules)\n"
             "import rfc3987_syntax\nprint(rfc3987_syntax.__name__)\n")
    result = subprocess.run([sys.executable, "-c", probe],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["False", "rfc3987_syntax"], result.stdout
