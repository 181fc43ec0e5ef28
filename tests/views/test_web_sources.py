"""The views' JavaScript sources: ES modules of at most 500 lines, clean under ESLint, joined into the classic scripts
the site and Jupyter run (mha.views.widget.join_modules).

- every .js file under src/ has at most 500 lines, and ESLint (eslint.config.js: its recommended rules and
  max-lines 500) finds nothing in any JavaScript file of the repository;
- the joined views.js, model.js and trainer.js, run under Node.js as classic scripts, give the same API as the entry
  modules imported as ES modules (Node runs those natively), and add no global but their entry points;
- each joined module sees only what it imports; the join follows renamed imports and embeds a JSON import;
- an import or export the join does not support, an import cycle, a name a module does not export and a missing
  module are refused with a message that names the file;
- a built wheel carries every source and the schema, and joins to the same scripts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import load_script

from mha.views.widget import ENTRIES, JoinError, join_modules, web_file

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "src" / "mha" / "views" / "web"
LONGEST = 500
IN_CI = os.environ.get("CI") == "true"


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None:
        assert not IN_CI, "CI must install Node.js (apt-get install -y nodejs npm)"
        pytest.skip("Node.js is not installed here: `apt-get install -y nodejs npm` to check the views' scripts")
    return node


def run_node(code: str, *args: str, cwd: Path = ROOT) -> str:
    result = subprocess.run([node_or_skip(), "--input-type=module", "-e", code, *args], capture_output=True, text=True,
                            timeout=120, cwd=cwd)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


# --- size and lint ---------------------------------------------------------------------------------------------

def test_no_javascript_file_under_src_is_over_500_lines():
    lengths = {path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
               for path in (ROOT / "src").rglob("*.js")}
    assert len(lengths) >= 20  # the walk found the sources
    long = {path: n for path, n in lengths.items() if n > LONGEST}
    assert not long, f"split these along a seam into modules of at most {LONGEST} lines: {long}"


@pytest.mark.browser
def test_eslint_finds_nothing_in_any_javascript_file():
    npx = shutil.which("npx")
    if npx is None or shutil.which("node") is None:
        assert not IN_CI, "CI must install Node.js and npm (apt-get install -y nodejs npm)"
        pytest.skip("Node.js and npm are not installed here: `apt-get install -y nodejs npm`, then `npm ci`")
    if not (ROOT / "node_modules" / ".bin" / "eslint").exists():
        assert not IN_CI, "CI must install the npm packages, ESLint among them (npm ci; the Makefile's NODE_STAMP)"
        pytest.skip("ESLint is not installed: run `npm ci` (package-lock.json) to lint the JavaScript")
    result = subprocess.run([npx, "--no-install", "eslint", "--max-warnings", "0", "."], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    listed = subprocess.run([npx, "--no-install", "eslint", "--format", "json", "."], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    linted = {Path(report["filePath"]).relative_to(ROOT).as_posix() for report in json.loads(listed.stdout)}
    expected = {path.relative_to(ROOT).as_posix() for folder in ("src", "site")
                for path in (ROOT / folder).rglob("*.js")}
    assert expected <= linted, f"ESLint did not look at {sorted(expected - linted)}"


# --- the joined scripts against the modules --------------------------------------------------------------------

# The API a script gives, as plain data: every member's type, the schema, and what the pure parts compute on a
# small sentence.
DESCRIBE = """
const describe = (object) => Object.fromEntries(Object.entries(object).map(([name, value]) =>
  [name, value && typeof value === "object" && !Array.isArray(value) && name !== "PAYLOAD_SCHEMA"
    ? describe(value) : typeof value]));
const trained = () => {
  const T = globalThis.mhaTrainer, config = {vocab_size: 64, max_seq_len: 40, d_model: 16, n_layers: 1, n_heads: 2};
  const net = T.createModel(config, 1), engine = T.createEngine(true), batch = T.inductionTask().sample(2, 3);
  const gradient = new Float32Array(net.values.length);
  const pass = T.forward(net, engine, batch.inputs, 2, 40);
  return {trainer: describe(T), inputs: Array.from(batch.inputs.subarray(0, 8)),
    loss: T.lossAndGradient(net, engine, pass, batch, gradient).loss, gradient: Array.from(gradient.subarray(0, 8))};
};
const api = () => {
  const views = globalThis.mhaViews, model = globalThis.mhaModel;
  const tokens = ["[CLS]", "the", "keys", "##tone", "are", "[SEP]"];
  const n = tokens.length, weights = Float64Array.from({length: n * n}, (_, i) => ((i * 7) % 11) / (11 * n));
  const words = views.parts.wordsOf(tokens);
  return {views: describe(views), model: describe(model), schema: views.PAYLOAD_SCHEMA,
    version: views.PAYLOAD_VERSION, words,
    scores: views.parts.sentenceScores(weights, n, words.ids),
    merged: Array.from(views.parts.wordWeights(weights, n, words.units)),
    below: views.parts.shareBelow(0.3, [0, 0.5, 1], [0.1, 0.2, 0.6]),
    problem: views.schemaProblem({version: 2, kind: "table"}, views.PAYLOAD_SCHEMA, "the payload")};
};
"""


@pytest.fixture(scope="module")
def joined_files(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("joined")
    for name in ENTRIES:
        (folder / name).write_text(web_file(name), encoding="utf-8")
    return folder


@pytest.mark.browser
def test_the_joined_scripts_give_the_api_of_the_modules_they_are_joined_from(joined_files):
    from_modules = run_node(DESCRIBE + """
await import(process.argv[1] + "/views/main.js");
await import(process.argv[1] + "/model/main.js");
await import(process.argv[1] + "/trainer/main.js");
process.stdout.write(JSON.stringify({...api(), ...trained()}));
""", WEB.as_uri())
    from_scripts = run_node(DESCRIBE + """
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const before = new Set(Object.keys(globalThis));
require(process.argv[1] + "/views.js");
require(process.argv[1] + "/model.js");
require(process.argv[1] + "/trainer.js");
const added = Object.keys(globalThis).filter((name) => !before.has(name)).sort();
process.stdout.write(JSON.stringify({...api(), ...trained(), added}));
""", str(joined_files))
    modules, scripts = json.loads(from_modules), json.loads(from_scripts)
    assert scripts.pop("added") == ["mhaModel", "mhaTrainer", "mhaViews"], "the scripts leak names into the page"
    assert scripts == modules
    assert set(modules["views"]) >= {"open", "readPayload", "checkPayload", "schemaProblem", "PAYLOAD_SCHEMA",
                                     "PAYLOAD_VERSION", "parts"}
    assert modules["model"] == {"open": "function", "fetchReader": "function", "scriptReader": "function"}
    assert {"train", "createModel", "modelFromWeights", "inductionTask", "forward", "lossAndGradient",
            "adamW", "clipGradientNorm", "headScores"} <= set(modules["trainer"])
    assert modules["schema"] == json.loads((WEB / "payload.schema.json").read_text(encoding="utf-8"))
    assert set(modules["scores"]) == {"content_prev_token_share", "cls_share", "content_same_token_share",
                                      "strongest_link"}
    assert modules["problem"] == 'the payload lacks "guidance"'


def write_modules(root: Path, sources: dict[str, str]) -> Path:
    for name, text in sources.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.mark.browser
def test_a_joined_module_sees_what_it_imports_and_nothing_else(tmp_path):
    root = write_modules(tmp_path, {
        "app/main.js": ('import {\n  twice as double,\n  LABEL,\n} from "./maths.js";\n'
                        'import DATA from "../data.json" with { type: "json" };\n'
                        'globalThis.result = { value: double(DATA.start), label: LABEL, hidden: typeof secret };\n'),
        "app/maths.js": ('const secret = 3;\nexport const LABEL = "doubled";\n'
                         'export function twice(x) { return 2 * x + secret - secret; }\n'),
        "data.json": '{"start": 21, "note": "line\\u2028break"}',
    })
    script = tmp_path / "joined.js"
    script.write_text(join_modules("app/main.js", root), encoding="utf-8")
    shown = run_node('import { createRequire } from "node:module";\n'
                     'createRequire(import.meta.url)(process.argv[1]);\n'
                     'process.stdout.write(JSON.stringify(globalThis.result));', str(script))
    assert json.loads(shown) == {"value": 42, "label": "doubled", "hidden": "undefined"}


@pytest.mark.parametrize("sources, message", [
    ({"main.js": 'export default function start() {}\n'}, "main.js:1: `export default function start() {}`"),
    ({"main.js": 'const a = 1;\nexport { a };\n'}, "main.js:2: `export { a };`"),
    ({"main.js": 'export let count = 0;\n'}, "main.js:1: `export let count = 0;`"),
    ({"main.js": 'import * as maths from "./maths.js";\n', "maths.js": ""}, "main.js:1: `import * as maths"),
    ({"main.js": 'import "./maths.js";\n', "maths.js": ""}, 'main.js:1: `import "./maths.js";`'),
    ({"main.js": 'import start from "./maths.js";\n', "maths.js": ""}, "main.js:1: `import start from"),
    ({"main.js": 'const later = () => import("./maths.js");\n'}, "main.js:1: `const later = () => import("),
    ({"main.js": 'const here = import.meta.url;\n'}, "main.js:1: `const here = import.meta.url;`"),
    ({"main.js": 'import { max } from "lodash";\n'}, "'lodash' is not a relative path"),
    ({"main.js": 'import { twice } from "./maths.js";\n', "maths.js": "export const LABEL = 1;\n"},
     "main.js imports twice from maths.js, which does not export it (it exports LABEL)"),
    ({"main.js": 'import { a } from "./a.js";\n', "a.js": 'import { b } from "./b.js";\nexport const a = 1;\n',
      "b.js": 'import { a } from "./a.js";\nexport const b = 2;\n'}, "import cycle: a.js -> b.js -> a.js"),
    ({"main.js": 'import { a } from "./gone.js";\n'}, "gone.js: no such module"),
    ({"main.js": 'import { a } from "../outside.js";\n'}, "should name a .js file inside the web folder"),
], ids=["export default", "export list", "export let", "namespace import", "side-effect import", "default import",
        "dynamic import", "import.meta", "bare specifier", "missing export", "cycle", "missing module", "outside"])
def test_the_join_refuses_what_it_does_not_support_naming_the_file(tmp_path, sources, message):
    root = write_modules(tmp_path, sources)
    with pytest.raises(JoinError) as refused:
        join_modules("main.js", root)
    assert message in str(refused.value)
    if "`" in message:
        assert "the join supports `import { a, b as c }" in str(refused.value)


def test_the_shipped_scripts_are_joined_from_the_entry_modules():
    for name, entry in ENTRIES.items():
        text = web_file(name)
        assert text.startswith(f"// {name}: joined by mha.views.widget from {entry} ")
        assert "\nimport " not in text and "\nexport " not in text
    assert "const KERNEL_WASM_BASE64 = " in web_file("model.js")
    schema = json.loads((WEB / "payload.schema.json").read_text(encoding="utf-8"))
    assert f"const SCHEMA = {json.dumps(schema, separators=(',', ':'))};" in web_file("views.js")


@pytest.mark.slow
def test_a_built_wheel_carries_the_sources_and_joins_the_same_scripts(tmp_path):
    wheel = load_script("colab_like_check").build_wheel(tmp_path)  # from a copy of only what it is built from
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        sources = {f"mha/views/web/{path.relative_to(WEB).as_posix()}" for path in WEB.rglob("*")
                   if path.suffix in (".js", ".json", ".css")}
        assert sources <= names, f"the wheel lacks {sorted(sources - names)}"
        archive.extractall(tmp_path / "installed", members=[name for name in names if name.startswith("mha/views/")])
    for name, entry in ENTRIES.items():
        assert join_modules(entry, tmp_path / "installed" / "mha" / "views" / "web", name=name) == web_file(name)
