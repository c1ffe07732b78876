// Class membership, code point by code point, linserve (the hf_classes
// program) against the Rust `tokenizers` library (@anush008/tokenizers): the
// Punctuation and Digits pre-tokenizers and the regex classes \p{L}, \p{N},
// \p{M}, \p{P}, \s; and NFC/NFKC of each code point in four contexts (after
// a starter and before marks, alone before a mark, after a mark, after "e").
// Prints the differences as ranges (the tables of
// engine/text/hf_unicode_compat.cc are made from them); exits 1 if any.
//
//   NODE_PATH=... node hf_unicode_classes.js HF_CLASSES GPT2_TOKENIZER_JSON
'use strict';

const { execFileSync } = require('child_process');
const fs = require('fs');
const t = require('@anush008/tokenizers');

const [hfClasses, baseJson] = process.argv.slice(2);
const ours = {};
const text = execFileSync(hfClasses, [], { maxBuffer: 1 << 28 }).toString();
for (const line of text.split('\n')) {
  if (!line) continue;
  const parts = line.split(' ');
  ours[parts[0]] = new Set(parts.slice(1).map(Number));
}
const codePoints = [];
for (let c = 1; c <= 0x10ffff; ++c) if (c < 0xd800 || c > 0xdfff) codePoints.push(c);

// Every code point between separators: the pieces that are exactly one code
// point are the ones the pre-tokenizer isolated, the class's members.
function members(preTokenizer, separator) {
  const set = new Set();
  for (let i = 0; i < codePoints.length; i += 20000) {
    const s = codePoints.slice(i, i + 20000).map((c) => String.fromCodePoint(c))
      .filter((c) => c !== separator).join(separator);
    for (const [piece] of preTokenizer.preTokenizeString(s)) {
      const chars = Array.from(piece);
      if (chars.length === 1 && piece !== separator) set.add(chars[0].codePointAt(0));
    }
  }
  return set;
}

function ranges(list) {
  list.sort((a, b) => a - b);
  const r = [];
  for (const c of list) {
    if (r.length && r[r.length - 1][1] === c - 1) r[r.length - 1][1] = c;
    else r.push([c, c]);
  }
  return r.map(([a, b]) => `{0x${a.toString(16).toUpperCase()}, 0x${b.toString(16).toUpperCase()}}`)
    .join(', ');
}

let differ = false;
function compare(name, library) {
  const onlyOurs = [...ours[name]].filter((c) => !library.has(c));
  const onlyLibrary = [...library].filter((c) => !ours[name].has(c));
  if (onlyOurs.length || onlyLibrary.length) differ = true;
  console.log(`${name}: only linserve ${onlyOurs.length} ${ranges(onlyOurs)}; ` +
    `only the library ${onlyLibrary.length} ${ranges(onlyLibrary)}`);
}

compare('punct', members(t.punctuationPreTokenizer('isolated'), 'a'));
compare('numeric', members(t.digitsPreTokenizer(true), 'a'));
const base = JSON.parse(fs.readFileSync(baseJson, 'utf8'));
for (const [pattern, separator] of [['\\p{L}', '!'], ['\\p{N}', '!'], ['\\p{M}', '!'],
  ['\\p{P}', 'a'], ['\\s', 'a']]) {
  // splitPreTokenizer takes a literal; a tokenizer.json's Split takes a regex.
  base.pre_tokenizer = { type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated',
    invert: false };
  compare(pattern, members(t.Tokenizer.fromString(JSON.stringify(base)).getPreTokenizer(),
    separator));
}
const normalizers = { nfc: t.nfcNormalizer(), nfkc: t.nfkcNormalizer() };
for (const form of ['nfc', 'nfkc']) {
  const probes = [];
  const probed = codePoints.filter((c) => c >= 0x80);
  for (const c of probed) {
    const x = String.fromCodePoint(c);
    probes.push('a' + x + '\u0301\u0316', x + '\u0301', 'a\u0316' + x, 'e' + x);
  }
  const oursNormalized = execFileSync(hfClasses, ['--normalize=' + form],
    { input: probes.join('\n') + '\n', maxBuffer: 1 << 30 }).toString().split('\n');
  const differing = new Set();
  for (let i = 0; i < probes.length; i += 50000) {
    const chunk = probes.slice(i, i + 50000);
    const theirs = normalizers[form].normalizeString(chunk.join('\n')).split('\n');
    for (let k = 0; k < chunk.length; ++k) {
      if (theirs[k] !== oursNormalized[i + k]) differing.add(probed[Math.floor((i + k) / 4)]);
    }
  }
  if (differing.size) differ = true;
  console.log(`${form}: ${differing.size} code points normalize differently ${ranges([...differing])}`);
}
process.exit(differ ? 1 : 0);
