// Typesets the book's formulas at build time, so that no page needs MathJax in the browser.
//
// website/offline_site.py starts this script once per build, under Node.js, and talks to it one JSON line at a time:
//   {"formulas": [["W_{QK} = W_Q W_K^\\top", false], ...], "share": true}  (TeX, displayed?: a page's formulas)
//     -> {"typeset": [{"html": "<mjx-container ...>...</mjx-container>"} or {"error": "Missing close brace"}, ...],
//         "glyphs": "<svg style=\"display: none;\" ...><defs><path id=\"MJX-TEX-I-1D44A\" d=...></defs></svg>"}
//   {"stylesheet": true}  ->  {"css": "mjx-container[jax=\"SVG\"] {..."}
// MathJax is the npm package in node_modules (package-lock.json), with every TeX extension, as the pages loaded
// it before: SVG output, so a page needs no font and fetches nothing to draw a formula (the same from file://), and
// each formula's MathML beside it (assistive-mml) for screen readers. MathJax writes each glyph's outline into every
// formula that uses it; with "share", the formulas refer instead to one copy of each outline, in "glyphs", which
// the page carries once (a third of the bytes). A TeX error, or a macro TeX does not know, is an error here (not
// red text on the page): the build reports it as a warning.
"use strict";

const path = require("path");
const readline = require("readline");

const reply = (message) => process.stdout.write(JSON.stringify(message) + "\n");
console.log = console.info = console.warn = console.error;  // stdout carries the replies only

require(path.join(process.argv[2] || process.cwd(), "node_modules", "mathjax")).init({
  loader: {load: ["input/tex-full", "output/svg", "a11y/assistive-mml"]},
  tex: {
    packages: {"[-]": ["noundefined"]},  // an unknown macro is an error, not red text
    formatError: (jax, error) => { throw error; },
  },
  svg: {fontCache: "local"},
  startup: {typeset: false},
}).then((MathJax) => {
  const adaptor = MathJax.startup.adaptor;

  // Move a formula's glyph outlines (its <defs>, ids "MJX-<formula>-TEX-<variant>-<character>") into glyphs, under
  // ids without the formula's number, and point its <use> elements there.
  const share = (formula, glyphs) => {
    const shared = new Map();
    for (const defs of adaptor.tags(formula, "defs")) {
      for (const outline of adaptor.tags(defs, "path")) {
        const id = adaptor.getAttribute(outline, "id");
        shared.set(`#${id}`, id.replace(/^MJX-\d+-/, "MJX-"));
        glyphs.set(id.replace(/^MJX-\d+-/, "MJX-"), adaptor.getAttribute(outline, "d"));
      }
      adaptor.remove(defs);
    }
    for (const use of adaptor.tags(formula, "use")) {
      const id = shared.get(adaptor.getAttribute(use, "xlink:href"));
      if (id === undefined) throw new Error("a glyph outside the formula's own <defs>");
      adaptor.setAttribute(use, "xlink:href", `#${id}`);
    }
  };

  readline.createInterface({input: process.stdin, terminal: false}).on("line", (line) => {
    const request = JSON.parse(line);
    if (request.stylesheet) {
      reply({css: adaptor.textContent(MathJax.svgStylesheet())});
      return;
    }
    const glyphs = new Map();  // shared id -> outline
    const typeset = request.formulas.map(([tex, display]) => {
      try {
        const formula = MathJax.tex2svg(tex, {display});
        if (request.share) share(formula, glyphs);
        return {html: adaptor.outerHTML(formula)};
      } catch (error) {
        return {error: String(error.message || error)};
      }
    });
    const outlines = [...glyphs].map(([id, d]) => `<path id="${id}" d="${d}"></path>`).join("");
    reply({typeset, glyphs: outlines && `<svg xmlns="http://www.w3.org/2000/svg" style="display: none;" ` +
                                       `aria-hidden="true"><defs>${outlines}</defs></svg>`});
  });
}).catch((error) => {
  console.error("website/render_math.js: MathJax did not start:", error);
  process.exit(1);
});
