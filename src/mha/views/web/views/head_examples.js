/* "Find where a head does this": for the head on show, the treebank sentences (UD English-EWT, dev split) where
   each of its scores (on the previous token, on [CLS], on the token itself, on punctuation) is highest and lowest,
   chosen when the site was built
   (mha.views.model_explorer); each opens in the typed view, run through the page's model. */

import { hundredthsText, make } from "./dom.js";
import { headLabel } from "./scores.js";

const cut = (text) => (text.length > 70 ? `${text.slice(0, 69)}…` : text);

/* The block for head (layer, head), or null where the payload has no examples. `typed.openText(text)` runs a
   sentence as if typed. */
export function examplesBlock(typed, layer, head) {
  const examples = typed.examples;
  if (!examples) return null;
  const index = layer * typed.nHeads + head;
  const example = (label, sentence, hundredths) => {
    const text = examples.texts[sentence];
    const button = make("button", { type: "button", class: "mha-button mha-example", title: text },
      `${label} ${hundredthsText(hundredths)}: “${cut(text)}”`);
    button.addEventListener("click", () => {
      typed.ui.box.value = text;
      typed.openText(text);
    });
    return make("li", {}, button);
  };
  const rows = Object.entries(examples.scores).map(([name, found]) => make("li", {}, `${name}: `,
    make("ul", {}, example("highest", found.highest[index], found.highest_values[index]),
      example("lowest", found.lowest[index], found.lowest_values[index]))));
  return make("div", { class: "mha-examples" }, make("b", {}, `Find where ${headLabel(layer, head)} does this`),
    ` in ${examples.source}: the sentences where its share is highest and lowest. Each opens here, run in your page.`,
    make("ul", {}, ...rows));
}
