// The text of the joined script (views.js, model.js or trainer.js) that this module is part of, so the script can
// start a copy of itself in a Web Worker: from a blob, since a page opened from file:// may not start a worker from
// a file. mha.views.widget.join_modules wraps every joined script in one function named joinedScript.
/* global joinedScript */

// The script's text, ready to run: its function and the call of it.
export function joinedScriptText() {
  if (typeof joinedScript !== "function") {
    throw new Error("joined_script.js runs only inside a script joined by mha.views.widget.join_modules.");
  }
  return "(" + joinedScript.toString() + "());\n";
}
