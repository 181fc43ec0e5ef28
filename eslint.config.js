// ESLint's settings for every JavaScript file of the book (npx eslint; tests/views/test_web_sources.py runs it):
// its recommended rules, and no file over 500 lines, blank lines and comments counted. The views' sources under
// src/mha/views/web/ are ES modules that run in the page (mha.views.widget joins them into views.js and model.js);
// the site's build scripts under website/ are CommonJS run by Node.js.
"use strict";

const js = require("@eslint/js");
const globals = require("globals");

const LONGEST = { max: 500, skipBlankLines: false, skipComments: false };

module.exports = [
  { ignores: ["node_modules/", "_build/", ".venv/", "**/_build/"] },
  js.configs.recommended,
  { rules: { "max-lines": ["error", LONGEST] } },
  {
    files: ["src/mha/views/web/**/*.js"],
    languageOptions: { ecmaVersion: "latest", sourceType: "module", globals: { ...globals.browser } },
  },
  {
    files: ["website/**/*.js", "eslint.config.js"],
    languageOptions: { ecmaVersion: "latest", sourceType: "commonjs", globals: { ...globals.node } },
  },
];
