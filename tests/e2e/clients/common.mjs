// Helpers shared by the client end-to-end scripts.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Tokenizer } = require('../../parity/node_modules/tokenizers');

// An admin call to the gateway; asserts 200 and returns the JSON body.
export function adminClient(base, adminKey) {
  return async (path, body) => {
    const r = await fetch(base + path, { method: 'POST', headers: { Authorization: `Bearer ${adminKey}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    const text = await r.text();
    assert.equal(r.status, 200, `${path}: ${r.status} ${text}`);
    return JSON.parse(text);
  };
}

// Ends a session with its own key.
export async function endSession(base, apiKey) {
  const r = await fetch(`${base}/rl/end_session`, { method: 'POST', headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' }, body: '{}' });
  assert.equal(r.status, 200, await r.text());
}

// Decodes each trained span (loss_mask runs) of an exported row with
// Hugging Face's tokenizer, dropping a final turn-end token, and checks each
// equals what the client saw.
export async function assertTrainedSpansEqual(row, seen, tokenizerDir) {
  const tok = Tokenizer.fromFile(`${tokenizerDir}/tokenizer.json`);
  const stopIds = new Set([tok.tokenToId('<|im_end|>'), tok.tokenToId('<|endoftext|>')]);
  const spans = [];
  let span = [];
  for (let i = 0; i <= row.input_ids.length; i++) {
    if (i < row.input_ids.length && row.loss_mask[i] === 1) span.push(row.input_ids[i]);
    else if (span.length) {
      spans.push(span);
      span = [];
    }
  }
  assert.equal(spans.length, seen.length, `trained spans: ${spans.length}, turns seen: ${seen.length}`);
  for (let t = 0; t < seen.length; t++) {
    const ids = spans[t].filter((id, k) => !(k === spans[t].length - 1 && stopIds.has(id)));
    assert.equal(await tok.decode(ids, false), seen[t], `turn ${t}: trained tokens differ from what the client saw`);
  }
}
