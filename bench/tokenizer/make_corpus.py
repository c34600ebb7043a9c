#!/usr/bin/env python3
"""Builds the tokenizer benchmark corpus: real English prose and code from this
repository (docs/*.md, core/**/*.cpp) plus the multilingual, emoji and
whitespace cases of tests/parity/corpus.jsonl, cut into ~2 KB documents and
written as JSONL ({"text": ...} per line). Deterministic."""
import json, pathlib, sys

root = pathlib.Path(__file__).resolve().parents[2]
out = pathlib.Path(sys.argv[1])
parts = []
for p in sorted(root.glob("docs/*.md")) + sorted(root.glob("core/**/*.cpp")):
    parts.append(p.read_text(encoding="utf-8"))
for line in (root / "tests/parity/corpus.jsonl").read_text(encoding="utf-8").splitlines():
    case = json.loads(line)
    if "text" in case:
        parts.append(case["text"] * 8)
text = "\n".join(parts)
docs, size = [], 2048
for i in range(0, len(text), size):
    docs.append(text[i:i + size])
docs = docs * max(1, (4 << 20) // max(1, len(text.encode("utf-8"))))  # about 4 MB in all
out.write_text("".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
print(f"corpus: {len(docs)} documents, {sum(len(d.encode('utf-8')) for d in docs) / 1e6:.2f} MB -> {out}")
