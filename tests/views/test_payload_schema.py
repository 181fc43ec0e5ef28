"""The payload's schema, written once in src/mha/views/web/payload.schema.json and checked twice: by Python
(mha.views.widget.check_payload, with fastjsonschema) before a payload leaves the package, and by views.js
(schemaProblem, with the same file joined into the script) when the page or Jupyter opens it. Both must give the
same verdict on every payload, real or broken: the real payloads of each kind and a few odd ones that still fit are
accepted by both, and every malformed one (more than 20, each broken in its own way) is refused by both; the
jsonschema library, an independent implementation of the standard, is the oracle that both agree with. The map
weights (bytes) are not part of it."""

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
from mha.views.widget import PAYLOAD_SCHEMA, check_payload, web_file

torch.set_num_threads(1)

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "src" / "mha" / "views" / "web" / "payload.schema.json"

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
    from mha.views.induction_explorer import InductionLabExplorer
    from mha.views.model_explorer import ModelHeadExplorer
    from mha.views.random_layer_explorer import RandomLayerExplorer
    from mha.views.training_timeline import TrainingTimelineView

    model = ModelHeadExplorer(["Paris is the capital of France ."])
    model.own_sentence.value = "A <b>bold</b> naïve “quote” ."
    assert model.typed_sentences == ["A <b>bold</b> naïve “quote” ."]
    return {"head-explorer": content(site_payload(RandomLayerExplorer("It's <i>a</i> cat .", n_heads=3))),
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
    typed = real["table, typed in the website's page"]

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
        # more ways to break a payload, each refused by a different rule of the schema
        "version missing": (changed(table, delete("version")), False),
        "an opening that is not a layout": (changed(table, set_in(["opening"], "everything")), False),
        "axes without the key's name": (changed(table, lambda p: p["axes"].pop("key")), False),
        "a colour map named by a number": (changed(table, set_in(["axes", "colormap"], 7)), False),
        "guidance without its notice": (changed(table, lambda p: p["guidance"].pop("notice")), False),
        "a palette colour in capitals": (changed(table, set_in(["palette", 0, 0], "#ABCDEF")), False),
        "a palette colour with a line after it": (changed(table, set_in(["palette", 0, 0], "#abcdef\n")), False),
        "a palette entry of three colours": (changed(table, set_in(["palette", 9], ["#000", "#111", "#222"])), False),
        "a control named in capitals": (changed(table, set_in(["controls", 0, "name"], "Layer")), False),
        "a control with no values": (changed(table, set_in(["controls", 0, "values"], [])), False),
        "a control's labels that are numbers": (changed(table, set_in(["controls", 0, "labels"], [0, 1])), False),
        "a view index below 0": (changed(table, set_in(["views", "0|0|0|0"], -1)), False),
        "a map shape of three numbers": (changed(table, set_in(["drawn", 0, "map", "shape"], [2, 2, 2])), False),
        "a map offset below 0": (changed(table, set_in(["drawn", 0, "map", "offset"], -4)), False),
        "a marked cell of three numbers": (changed(table, set_in(["drawn", 0, "map", "marked"], [[0, 1, 2]])), False),
        "a drawn view whose panels are a list": (changed(table, set_in(["drawn", 0, "panels"], [])), False),
        "a table whose strings are an object": (changed(table, set_in(["strings"], {})), False),
        "a d_model that is true": (changed(head, set_in(["d_model"], True)), False),
        "a head count of 2.5": (changed(head, set_in(["max_heads"], 2.5)), False),
        "a head explorer without its sentence": (changed(head, delete("sentence")), False),
        "a timeline step below 0": (changed(timeline, set_in(["steps", 0], -1)), False),
        "a loss that is text": (changed(timeline, set_in(["loss", 0], "high")), False),
        "a sequence length as text": (changed(timeline, set_in(["seq_len"], "16")), False),
        "a sequence without its title": (changed(timeline, lambda p: p["sequences"][0].pop("title")), False),
        "a page model of 2 tokens": (changed(typed, set_in(["page_model", "max_tokens"], 2)), False),
        "a spread of one quantile": (changed(typed, set_in(["page_model", "spread", "quantiles"], [0.5])), False),
        "a download of 0 bytes": (changed(typed, set_in(["page_model", "download_bytes"], 0)), False),
        # and a few more that still fit
        "a loss not measured at a step": (changed(timeline, set_in(["loss", 0], None)), True),
        "no opening": (changed(table, lambda p: p.pop("opening", None)), True),
        "a control whose values are text": (changed(table, set_in(["controls", 0, "values"], ["a", "b"])), True),
    }


@pytest.fixture(scope="module")
def cases(real) -> dict[str, tuple[dict, bool]]:
    return {**{name: (payload, True) for name, payload in real.items()}, **broken_and_odd(real)}


@pytest.fixture(scope="module")
def js(cases, tmp_path_factory) -> dict:
    """What views.js says of each case (its problem, or None), with the schema and version it checks against."""
    node = shutil.which("node")
    if node is None:
        assert os.environ.get("CI") != "true", "CI must install Node.js (apt-get install -y nodejs)"
        pytest.skip("Node.js is not installed here: `apt-get install -y nodejs` to check views.js's checker")
    payloads = {name: payload for name, (payload, _) in cases.items()}
    views_js = tmp_path_factory.mktemp("schema") / "views.js"  # the script the site serves and Jupyter runs
    views_js.write_text(web_file("views.js"), encoding="utf-8")
    result = subprocess.run([node, "-e", JS_VERDICTS, str(views_js)], input=json.dumps(payloads), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout)


def oracle_fits(payload: dict) -> bool:
    """jsonschema's verdict on the payload's JSON (the weights left out, as check_payload leaves them out)."""
    import jsonschema

    content = {key: value for key, value in payload.items() if key != "weights"}
    return jsonschema.validators.validator_for(PAYLOAD_SCHEMA)(PAYLOAD_SCHEMA).is_valid(content)


def python_problem(payload: dict) -> str | None:
    try:
        check_payload(payload)
    except ValueError as problem:
        return str(problem)
    return None


@pytest.mark.browser
def test_python_and_views_js_check_the_same_schema_the_one_file(js):
    written = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert PAYLOAD_SCHEMA == written and js["schema"] == written and js["version"] == 2


@pytest.mark.browser
def test_python_and_views_js_accept_and_refuse_the_same_payloads(cases, js):
    assert sum(not fits for _, fits in cases.values()) >= 20 and sum(fits for _, fits in cases.values()) >= 5
    for name, (payload, fits) in cases.items():
        assert oracle_fits(payload) == fits, f"jsonschema on {name}"
        assert (python_problem(payload) is None) == fits, f"Python on {name}: {python_problem(payload)}"
        assert (js["problems"][name] is None) == fits, f"views.js on {name}: {js['problems'][name]}"


@pytest.mark.parametrize("change, where", [
    (lambda p: p.update(version=3), "at version: it must be one of [2]"),
    (lambda p: p.pop("guidance"), "at the payload: it must contain ['guidance']"),
    (lambda p: p.pop("drawn"), "at the payload: it must contain ['drawn']"),
    (lambda p: p["palette"].append(["#000000", "#ffffff"]), "at palette: it must contain less than or equal to 256"),
    (lambda p: p["palette"].__setitem__(7, ["#000000"]), "at palette/7: it must contain at least 2 items"),
    (lambda p: p["controls"][2].__setitem__("start", -2), "at controls/2/start: it must be bigger than or equal to 0"),
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
def test_checking_a_payload_hides_nothing_and_leaves_jsonschema_unimported():
    """The check compiles the one file's schema with fastjsonschema on the first payload: jsonschema (whose import
    compiles an IRI grammar, seconds of CPU in a kernel) is not imported, and nothing is hidden from any library
    (sys.modules gains no placeholder)."""
    probe = ("import sys\nimport mha.views.widget as widget\n"
             "hidden = {name for name, module in sys.modules.items() if module is None}\n"
             "from mha.views.payloads import site_payload\n"
             "from mha.views.random_layer_explorer import RandomLayerExplorer\n"
             "widget.check_payload(site_payload(RandomLayerExplorer('a cat', n_heads=2)))\n"
             "print('fastjsonschema' in sys.modules, 'jsonschema' in sys.modules)\n"
             "print(sorted({name for name, module in sys.modules.items() if module is None} - hidden))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["True", "False", "[]"], result.stdout
