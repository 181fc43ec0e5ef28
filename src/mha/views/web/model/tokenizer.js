// The tokenizer of all-MiniLM-L6-v2 (BERT's uncased WordPiece), as the package's tokenizer splits a text: BERT's
// normaliser, pre-tokenizer and WordPiece as the tokenizers library runs them: clean the text, put spaces around CJK
// characters, strip accents (NFD, drop non-spacing marks), lower-case each character, split on whitespace and
// around punctuation, then longest-match-first wordpieces; [CLS] first and [SEP] last.

import { CONTROL, WHITESPACE, isCjk, isPunctuation, keptAfterNfd, tableDifference } from "./unicode_tables.js";

export function Tokenizer(vocab, settings, special) {
  this.ids = new Map(vocab.map(function (token, id) { return [token, id]; }));
  this.vocab = vocab;
  this.settings = settings;
  this.special = special;
}

function loneSurrogate(text) { // [code point position, code unit] of the first lone surrogate, or null
  for (var i = 0, position = 0; i < text.length; i++, position++) {
    var unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      var next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) { i++; continue; }
    }
    if (unit >= 0xd800 && unit <= 0xdfff) return [position, unit, i];
  }
  return null;
}

Tokenizer.prototype.normalize = function (text) {
  var s = this.settings, out = [];
  for (var ch of text) {
    var cp = ch.codePointAt(0);
    if (s.clean_text) {
      if (cp === 0 || cp === 0xfffd) continue;
      if (ch === "\t" || ch === "\n" || ch === "\r") { out.push(" "); continue; }
      var difference = tableDifference(cp);
      if (difference === 2 || (difference === -1 && CONTROL.test(ch))) continue;
      if (WHITESPACE.test(ch)) { out.push(" "); continue; }
    }
    out.push(s.tokenize_chinese_chars && isCjk(cp) ? " " + ch + " " : ch);
  }
  var text2 = out.join("");
  if (s.strip_accents) text2 = Array.from(text2.normalize("NFD")).filter(keptAfterNfd).join("");
  if (s.do_lower_case) text2 = Array.from(text2, function (c) { return c.toLowerCase(); }).join("");
  return text2;
};

Tokenizer.prototype.words = function (normalized) { // split on whitespace, and around each punctuation character
  var words = [], current = "";
  for (var ch of normalized) {
    if (WHITESPACE.test(ch)) { if (current) words.push(current); current = ""; }
    else if (isPunctuation(ch)) { if (current) words.push(current); words.push(ch); current = ""; }
    else current += ch;
  }
  if (current) words.push(current);
  return words;
};

Tokenizer.prototype.wordpieces = function (word) {
  var chars = Array.from(word), unk = this.vocab[this.special.UNK], prefix = this.settings.continuing_subword_prefix;
  if (chars.length > this.settings.max_input_chars_per_word) return [unk];
  var pieces = [], start = 0;
  while (start < chars.length) {
    var end = chars.length, found = null;
    while (start < end) {
      var piece = (start > 0 ? prefix : "") + chars.slice(start, end).join("");
      if (this.ids.has(piece)) { found = piece; break; }
      end--;
    }
    if (found === null) return [unk];
    pieces.push(found);
    start = end;
  }
  return pieces;
};

Tokenizer.prototype.tokenize = function (text, maxPositions) {
  if (typeof text !== "string") throw new Error("the text must be a string, got " + typeof text + ".");
  if (!text.trim()) throw new Error("the text is empty or only whitespace; type a sentence to run the model on.");
  var lone = loneSurrogate(text);
  if (lone) {
    throw new Error("the text holds a broken character at position " + lone[0] + " (U+" + lone[1].toString(16).toUpperCase() +
      ", after " + JSON.stringify(text.slice(Math.max(0, lone[2] - 10), lone[2])) + "): half of a UTF-16 pair, as left " +
      "behind when an emoji or another character is cut in half. It is not a character, so it cannot be read. " +
      "Delete it, or retype that character.");
  }
  var self = this, tokens = [this.vocab[this.special.CLS]], wordIds = [null];
  this.words(this.normalize(text)).forEach(function (word, index) {
    self.wordpieces(word).forEach(function (piece) { tokens.push(piece); wordIds.push(index); });
  });
  tokens.push(this.vocab[this.special.SEP]); wordIds.push(null);
  if (tokens.length <= 2) throw new Error("the text holds no characters the tokenizer keeps (only control or zero-width characters); type some words.");
  if (tokens.length > maxPositions) {
    throw new Error("the text is " + tokens.length + " tokens long ([CLS] and [SEP] included), but the model has only " +
                    maxPositions + " positions; shorten it or split it into pieces.");
  }
  return { ids: tokens.map(function (t) { return self.ids.get(t); }), tokens: tokens, wordIds: wordIds };
};
