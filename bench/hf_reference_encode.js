// The Rust `tokenizers` library's encode speed, for linserve-tokenizer-bench:
//   node hf_reference_encode.js TOKENIZER_JSON TEXT_FILE REPEATS
// prints "ids N", "hash H" (of the ids: h = h * 31 + id mod 2^32) and "mbps M" (median of REPEATS single-call encodes of the
// whole file, add_special_tokens false, after one warm-up; 1 MB = 10^6 bytes).
// A single encode runs on one thread (the library parallelizes only batches).
'use strict';

const fs = require('fs');
const { Tokenizer } = require('@anush008/tokenizers');

(async () => {
  const [tokenizerJson, textFile, repeatsArg] = process.argv.slice(2);
  const tokenizer = Tokenizer.fromFile(tokenizerJson);
  const text = fs.readFileSync(textFile, 'utf8');
  const megabytes = Buffer.byteLength(text, 'utf8') / 1e6;
  const options = { addSpecialTokens: false };
  const warm = await tokenizer.encode(text, null, options);
  const rates = [];
  for (let r = 0; r < Number(repeatsArg); ++r) {
    const start = process.hrtime.bigint();
    await tokenizer.encode(text, null, options);
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    rates.push(megabytes / seconds);
  }
  rates.sort((a, b) => a - b);
  let hash = 0;
  for (const id of warm.getIds()) hash = (Math.imul(hash, 31) + id) >>> 0;
  console.log(`ids ${warm.getIds().length}`);
  console.log(`hash ${hash}`);
  console.log(`mbps ${rates[rates.length >> 1]}`);
})().catch((e) => { console.error(e); process.exit(1); });
