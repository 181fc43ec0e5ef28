/* Small DOM helpers, and the sanitizer of the HTML a payload carries.

   Strings become text nodes, never HTML: make() and makeSvg() append text as text. The only HTML a view writes is
   what the package wrote and escaped (a table payload's messages and panels), and setHtml() keeps of it the elements
   and attributes listed here. */

export const SVG = "http://www.w3.org/2000/svg";

export function make(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

export function makeSvg(tag, attributes, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

/* The width of a node's content box in whole px (its width less its padding), or Infinity while it is hidden. */
export function contentWidth(node) {
  const style = getComputedStyle(node);
  const inner = Math.floor(node.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight));
  return inner > 0 ? inner : Infinity;
}

/* A weight in hundredths (an integer) as the package writes it: "0.07", "−0.30". */
export function hundredthsText(hundredths) {
  const sign = hundredths < 0 ? "−" : "";
  const size = Math.abs(hundredths);
  return `${sign}${Math.floor(size / 100)}.${String(size % 100).padStart(2, "0")}`;
}

/* The package's "Cannot draw this:" message, for a problem found here. */
export function problem(text) {
  return [make("b", { class: "mha-problem" }, "Cannot draw this:"), " " + text];
}

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}

/* What a payload's HTML may hold: the package writes messages and panels with these elements and attributes
   only. Anything else is unwrapped (its text kept as text) or dropped, so a payload edited to carry a script, an
   event handler or a link runs nothing and fetches nothing. */
const SAFE_ELEMENTS = new Set(["b", "i", "em", "strong", "small", "code", "br", "span", "div", "p", "sub", "sup",
  "ul", "ol", "li", "table", "caption", "thead", "tbody", "tr", "th", "td", "svg", "g", "text", "line", "polyline",
  "rect", "circle", "title"]);
const SAFE_ATTRIBUTES = new Set(["class", "style", "title", "role", "aria-label", "colspan", "rowspan", "scope",
  "xmlns", "viewbox", "width", "height", "x", "y", "x1", "x2", "y1", "y2", "cx", "cy", "r", "points", "fill",
  "stroke", "stroke-width", "text-anchor", "transform", "font-size", "font-family", "font-weight", "opacity"]);
const UNSAFE_STYLE = /url\s*\(|image\s*\(|image-set|@import|expression|\\/i;
const DROPPED = new Set(["script", "style", "template", "iframe", "object", "embed", "noscript"]);

function keepSafeAttributes(element) {
  const attributes = element.attributes;
  for (let index = attributes.length - 1; index >= 0; index -= 1) {  /* backwards: the list is live */
    const { name, value } = attributes[index];
    const lower = name.toLowerCase();
    if (!SAFE_ATTRIBUTES.has(lower) || (lower === "style" && UNSAFE_STYLE.test(value))) element.removeAttribute(name);
  }
}

/* Not an element and not text: comments, processing instructions, CDATA sections (NodeFilter's SHOW_ bits). */
const NOT_TEXT = 0x80 | 0x40 | 0x08;

/* The parsed HTML kept to SAFE_ELEMENTS, in place. Every element is visited once, the innermost first (the reverse
   of document order), so an element is unwrapped with its content already cleaned. */
function cleaned(fragment) {
  const others = document.createTreeWalker(fragment, NOT_TEXT);
  const removed = [];
  while (others.nextNode()) removed.push(others.currentNode);
  for (const node of removed) node.remove();
  const elements = fragment.querySelectorAll("*");
  for (let index = elements.length - 1; index >= 0; index -= 1) {
    const element = elements[index];
    const name = element.localName.toLowerCase();
    if (DROPPED.has(name)) {
      element.remove();
    } else if (!SAFE_ELEMENTS.has(name)) {
      element.replaceWith(...element.childNodes);  /* unwrapped: its text stays, as text */
    } else if (element.hasAttributes()) {
      keepSafeAttributes(element);
    }
  }
  return fragment;
}

/* The cleaned HTML of the strings shown last (a payload's messages and panels), each kept to be copied again: a
   view that comes back to a setting copies its panel instead of parsing and cleaning it again. */
const CLEANED_KEPT = 64;
const cleanedOf = new Map();

/* HTML the package wrote and escaped, kept to SAFE_ELEMENTS. */
export function setHtml(node, written) {
  const text = String(written);
  let fragment = cleanedOf.get(text);
  if (fragment === undefined) {
    const template = document.createElement("template");
    template.innerHTML = text;  /* a template's content is inert: nothing in it runs or loads */
    fragment = cleaned(template.content);
    if (cleanedOf.size >= CLEANED_KEPT) cleanedOf.delete(cleanedOf.keys().next().value);
  } else {
    cleanedOf.delete(text);  /* the most recent goes last */
  }
  cleanedOf.set(text, fragment);
  node.replaceChildren(fragment.cloneNode(true));
}

/* Python's repr() of a str, as the package's messages quote what was typed (parse_head_count, parse_token_ids). */
export function pythonRepr(text) {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  const escaped = Array.from(text, (character) => {
    const code = character.codePointAt(0);
    if (character === "\\" || character === quote) return `\\${character}`;
    if (character === "\n") return "\\n";
    if (character === "\r") return "\\r";
    if (character === "\t") return "\\t";
    if (code < 0x20 || (code >= 0x7f && code <= 0xa0) || code === 0xad) return `\\x${code.toString(16).padStart(2, "0")}`;
    return character;
  }).join("");
  return quote + escaped + quote;
}
