"""The tokenizer reference again, from Python's `tokenizers` (what transformers runs).

Reads the corpus reference.js wrote (the same texts: the fixed corpus, the seeded random
strings and the invalid-UTF-8 cases given as hex) and re-encodes and re-decodes every text with
the Python library, writing the same JSONL format for tokenizer_parity. Python and Node share
HF's Rust core, but not their bindings' handling of strings, offsets and special tokens, nor our
code: a third, independent check of areal's ids.

    .venv-tests/bin/python reference_tokenizers_python.py NODE_REFERENCE.jsonl OUT.jsonl
"""
import json
import sys

import tokenizers


def main(node_reference, out_path):
    cache, n = {}, 0
    with open(node_reference) as src, open(out_path, "w") as out:
        for line in src:
            r = json.loads(line)
            tok = cache.get(r["dir"]) or cache.setdefault(r["dir"], tokenizers.Tokenizer.from_file(r["dir"] + "/tokenizer.json"))
            # Invalid UTF-8 reaches HF as its lossy conversion, as reference.js does.
            text = bytes.fromhex(r["hex"].replace(" ", "")).decode("utf-8", errors="replace") if "hex" in r else r["text"]
            ids = tok.encode(text, add_special_tokens=True).ids
            row = {k: v for k, v in r.items() if k in ("family", "dir", "name", "text", "hex")}
            row.update(ids=ids, ids_no_special=tok.encode(text, add_special_tokens=False).ids,
                       decoded=tok.decode(ids, skip_special_tokens=False), decoded_skip_special=tok.decode(ids, skip_special_tokens=True))
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    print(f"tokenizer reference (Python tokenizers {tokenizers.__version__}): {n} texts -> {out_path}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
