// The reference check: linserve's Hugging Face tokenizer (the hf_encode
// program) against the Rust `tokenizers` library itself, through its Node
// binding @anush008/tokenizers, over a seeded generated corpus per fixture.
//
//   node hf_reference_check.js HF_ENCODE FIXTURES_DIR [--strings N] [--seed S]
//
// Needs @anush008/tokenizers resolvable (NODE_PATH; hf_reference_check.sh
// installs it). Also variants of the qwen35-style file for the components no
// fixture uses (see variants()). Prints one line per fixture; on a mismatch,
// the smallest failing input it can find by deleting characters, and exits 1.
'use strict';

const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('@anush008/tokenizers');

const args = process.argv.slice(2);
const hfEncode = args[0];
const fixturesDir = args[1];
let stringsPerFixture = 20000;
let seed = 20261128;
for (let i = 2; i < args.length; i += 2) {
  if (args[i] === '--strings') stringsPerFixture = Number(args[i + 1]);
  else if (args[i] === '--seed') seed = Number(args[i + 1]);
  else throw new Error(`unknown argument ${args[i]}`);
}
const fixtures = ['gpt-2', 'deepseek-llm', 'deepseek-coder', 'falcon', 'qwen35-style'];

// mulberry32: small, seeded, the same corpus on every machine.
function rng(s) {
  let a = s >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function corpus(random, addedTokens, count) {
  const int = (n) => Math.floor(random() * n);
  const pick = (list) => list[int(list.length)];
  const range = (lo, hi) => String.fromCodePoint(lo + int(hi - lo + 1));
  // Code point ranges across the general categories and scripts.
  const ranges = [
    [0x20, 0x7e], [0x20, 0x7e], [0x20, 0x7e], [0x00, 0x1f], [0x7f, 0x9f], [0xa0, 0xff],
    [0x100, 0x24f], [0x250, 0x2ff], [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff],
    [0x530, 0x58f], [0x590, 0x5ff], [0x600, 0x6ff], [0x700, 0x74f], [0x900, 0x97f],
    [0xe00, 0xe7f], [0x10a0, 0x10ff], [0x1100, 0x11ff], [0x1680, 0x1680], [0x180e, 0x180e],
    [0x2000, 0x206f], [0x20a0, 0x20cf], [0x2100, 0x214f], [0x2150, 0x218f], [0x2190, 0x22ff],
    [0x2460, 0x24ff], [0x2500, 0x25ff], [0x3000, 0x303f], [0x3040, 0x30ff], [0x4e00, 0x9fff],
    [0xac00, 0xd7a3], [0xd7b0, 0xd7ff], [0xe000, 0xe0ff], [0xfb00, 0xfb4f], [0xfe00, 0xfe0f],
    [0xfe30, 0xfe4f], [0xfeff, 0xfeff], [0xff00, 0xffef], [0xfff0, 0xfffd], [0x10000, 0x1007f],
    [0x1d400, 0x1d7ff], [0x1f300, 0x1f6ff], [0x1f900, 0x1f9ff], [0x20000, 0x2a6df],
    [0xe0000, 0xe007f], [0x10fff0, 0x10ffff], [0x0378, 0x0379], [0x0085, 0x0085],
    // Scripts of Unicode 14 to 16, where this machine's tables and the library's differ.
    [0x0600, 0x061f], [0x105c0, 0x105ff], [0x10d40, 0x10d8f], [0x11380, 0x113ff],
    [0x11b00, 0x11b0f], [0x11bc0, 0x11bff], [0x11f00, 0x11f5f], [0x16100, 0x1613f],
    [0x16d40, 0x16d7f], [0x1e4d0, 0x1e4ff], [0x1e5d0, 0x1e5ff], [0x2e40, 0x2e5f],
  ];
  const randomUnicode = () => {
    let s = '';
    for (let n = 1 + int(12); n > 0; --n) {
      const [lo, hi] = pick(ranges);
      s += range(lo, hi);
    }
    return s;
  };
  const words = ['hello', 'world', 'The', 'quick', 'brown', "don't", "I'm", "we'll", "they've",
    "It's", 'Führer', 'naïve', 'café', 'résumé', 'Ελληνικά', 'русский', 'עברית', 'العربية',
    'हिन्दी', 'ไทย', '한국어', '日本語', '中文字符', 'ｶﾀｶﾅ', 'ﬁ', 'Å', 'Ǆ', 'ǅ', 'İstanbul', 'ß',
    'STRASSE', "'S", "'LL", "'Re", 'x²', '½', 'Ⅻ', '①', '٣٤', '１２３', '𝐀𝐁𝐂', 'über'];
  const accented = () => {
    const base = pick(words) + pick(['', ' ', '\u0301', '\u0308\u0301', '\u0323\u0302']);
    return random() < 0.5 ? base.normalize('NFD') : base.normalize('NFC');
  };
  const emoji = () => {
    const faces = ['😀', '👍', '👋', '🧑', '👩', '👨', '🏳', '❤', '🇺🇸', '🇯🇵', '✌'];
    const tones = ['', '🏻', '🏼', '🏽', '🏾', '🏿'];
    let s = pick(faces) + pick(tones);
    if (random() < 0.5) s += '\u200d' + pick(faces) + pick(tones);
    if (random() < 0.3) s += '\ufe0f';
    if (random() < 0.2) s += '\u200d👧\u200d👦';
    return s;
  };
  const whitespace = () => {
    const parts = [' ', '  ', '\t', '\n', '\r', '\r\n', '\n\n', ' \n', '\u00a0', '\u3000',
      '\u2028', '\u0085', '\u200b', '\v', '\f'];
    let s = '';
    for (let n = 1 + int(6); n > 0; --n) s += pick(parts);
    return s;
  };
  const digits = () => {
    const sets = ['0123456789', '٠١٢٣٤٥٦٧٨٩', '０１２３４５６７８９', '²³¹', '⁰⁴⁵', '①②③'];
    const set = Array.from(pick(sets));
    let s = '';
    for (let n = 1 + int(12); n > 0; --n) s += pick(set);
    return s;
  };
  const code = () => pick(['def f(x):\n    return x**2\n', 'for (int i = 0; i < n; ++i) {}',
    'if (a && b || !c) { return; }', '#include <stdio.h>', 'const x = {"a": [1, 2.5e-3]};',
    'SELECT * FROM t WHERE id = 42;', '    \t// comment\r\n', '$ ls -la | grep "x"',
    '<div class="a">&amp;</div>', 'x += 1; y -= 2; z **= 3', 'λx.x', 'a_b-c.d/e\\f']);
  const fragment = () => {
    if (addedTokens.length === 0) return pick(words);
    const token = pick(addedTokens);
    const chars = Array.from(token);
    const r = random();
    if (r < 0.5) return token;
    if (r < 0.75) return chars.slice(0, 1 + int(chars.length)).join('');
    return chars.slice(int(chars.length)).join('');
  };
  const makers = [randomUnicode, accented, emoji, whitespace, digits, code, fragment,
    () => pick(words)];
  const strings = [];
  for (let i = 0; i < count; ++i) {
    let s = '';
    for (let n = 1 + int(6); n > 0; --n) {
      s += pick(makers)();
      if (random() < 0.4) s += pick([' ', '', '\n', ' ']);
    }
    strings.push(s);
  }
  return strings;
}

function ours(tokenizerJson, strings, workDir) {
  const input = path.join(workDir, 'strings.jsonl');
  fs.writeFileSync(input, strings.map((s) => JSON.stringify(s)).join('\n') + '\n');
  const out = execFileSync(hfEncode, [tokenizerJson], {
    input: fs.readFileSync(input), maxBuffer: 1 << 30,
  }).toString();
  const lines = out.split('\n');
  return strings.map((_, i) => lines[i]);
}

// "ids<TAB>decode" per string, as hf_encode prints them.
async function theirs(tokenizer, strings) {
  const result = [];
  const batch = 1000;
  for (let i = 0; i < strings.length; i += batch) {
    const encodings = await tokenizer.encodeBatch(strings.slice(i, i + batch),
      { addSpecialTokens: false });
    const ids = encodings.map((e) => Array.from(e.getIds()));
    const texts = await tokenizer.decodeBatch(ids, false);
    ids.forEach((list, k) => result.push(`${list.join(' ')}\t${JSON.stringify(texts[k])}`));
  }
  return result;
}

// Deletes characters (runs of them, halving) while the input still mismatches.
async function shrink(tokenizer, tokenizerJson, text, workDir) {
  let chars = Array.from(text);
  for (let size = Math.max(1, chars.length >> 1); size >= 1; size = size >> 1) {
    let progress = true;
    while (progress) {
      progress = false;
      const candidates = [];
      for (let i = 0; i + size <= chars.length; i += size) {
        candidates.push(chars.slice(0, i).concat(chars.slice(i + size)).join(''));
      }
      if (candidates.length === 0) break;
      const a = ours(tokenizerJson, candidates, workDir);
      const b = await theirs(tokenizer, candidates);
      const failing = candidates.findIndex((_, i) => a[i] !== b[i]);
      if (failing >= 0) {
        chars = Array.from(candidates[failing]);
        progress = true;
      }
    }
  }
  return chars.join('');
}

// Variants of the qwen35-style file for what no fixture has: every Split
// behavior and invert, Digits and Punctuation forms, ByteLevel with its regex
// and prefix space, NFKC, and added tokens with lstrip, rstrip, single_word
// and normalized. Each is checked like a fixture, on fewer strings.
function variants() {
  const base = () => JSON.parse(fs.readFileSync(path.join(fixturesDir, 'qwen35-style',
    'tokenizer.json'), 'utf8'));
  const split = (behavior, invert, pattern) => (t) => {
    t.pre_tokenizer.pretokenizers[0] = { type: 'Split', pattern, behavior, invert };
  };
  const list = [];
  for (const behavior of ['Removed', 'MergedWithPrevious', 'MergedWithNext', 'Contiguous']) {
    list.push([`split-${behavior}`, split(behavior, false, { Regex: '\\s+|\\p{P}' })]);
    list.push([`split-${behavior}-invert`, split(behavior, true, { Regex: '\\p{L}+' })]);
  }
  list.push(['split-string', split('Isolated', false, { String: '. ' })]);
  list.push(['ignore-merges', (t) => { t.model.ignore_merges = true; }]);
  list.push(['digits-punctuation', (t) => {
    t.pre_tokenizer.pretokenizers.splice(0, 1, { type: 'Digits', individual_digits: false },
      { type: 'Punctuation', behavior: 'MergedWithNext' },
      { type: 'Digits', individual_digits: true });
  }]);
  list.push(['bytelevel-regex-prefix', (t) => {
    t.pre_tokenizer = { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true,
      use_regex: true };
    t.normalizer = { type: 'Sequence', normalizers: [{ type: 'NFKC' }, { type: 'NFC' }] };
  }]);
  list.push(['added-token-flags', (t) => {
    const flags = [[true, false, false, false], [false, true, false, true],
      [true, true, true, false], [false, false, true, true]];
    t.added_tokens.forEach((token, i) => {
      const [lstrip, rstrip, singleWord, normalized] = flags[i % flags.length];
      Object.assign(token, { lstrip, rstrip, single_word: singleWord, normalized });
    });
    let id = Math.max(...t.added_tokens.map((a) => a.id)) + 1;
    for (const [content, singleWord, normalized] of [['hello', true, true], ['ｶﾀ', false, true],
      ['é', false, true], ['world', true, false], [' x', false, false]]) {
      t.added_tokens.push({ id: id++, content, single_word: singleWord, lstrip: false,
        rstrip: false, normalized, special: false });
    }
    t.normalizer = { type: 'NFKC' };
  }]);
  return list.map(([name, edit]) => {
    const t = base();
    edit(t);
    return [name, t];
  });
}

(async () => {
  const workDir = fs.mkdtempSync(path.join(require('os').tmpdir(), 'hf-reference-'));
  let failed = false;
  const cases = fixtures.map((f) => [f, path.join(fixturesDir, f, 'tokenizer.json'),
    stringsPerFixture]);
  for (const [name, json] of variants()) {
    const file = path.join(workDir, `${name}.json`);
    fs.writeFileSync(file, JSON.stringify(json));
    cases.push([`qwen35-style/${name}`, file, Math.ceil(stringsPerFixture / 4)]);
  }
  for (const [index, [fixture, tokenizerJson, count]] of cases.entries()) {
    const tokenizer = Tokenizer.fromFile(tokenizerJson);
    const added = JSON.parse(fs.readFileSync(tokenizerJson, 'utf8')).added_tokens
      .map((t) => t.content);
    const strings = corpus(rng(seed + index), added, count);
    const started = Date.now();
    const a = ours(tokenizerJson, strings, workDir);
    const b = await theirs(tokenizer, strings);
    const mismatches = strings.map((_, i) => i).filter((i) => a[i] !== b[i]);
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    if (mismatches.length === 0) {
      console.log(`${fixture}: ${strings.length} strings, all ids and decodes equal (${seconds} s)`);
      continue;
    }
    failed = true;
    const smallest = mismatches.map((i) => strings[i])
      .sort((x, y) => x.length - y.length)[0];
    const shrunk = await shrink(tokenizer, tokenizerJson, smallest, workDir);
    const [oursIds] = ours(tokenizerJson, [shrunk], workDir);
    const [theirIds] = await theirs(tokenizer, [shrunk]);
    console.log(`${fixture}: ${mismatches.length} of ${strings.length} strings differ; ` +
      `smallest failing input ${JSON.stringify(shrunk)}\n  linserve: [${oursIds}]\n` +
      `  library:  [${theirIds}]`);
  }
  fs.rmSync(workDir, { recursive: true, force: true });
  process.exit(failed ? 1 : 0);
})().catch((e) => { console.error(e); process.exit(2); });
