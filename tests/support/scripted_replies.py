"""The token ids of scripted replies, for the mock engine's `script` key:
each text of REPLIES.json tokenized by `areal-host tokenize` (no special
tokens added; the texts write their own, e.g. <|im_end|>). Prints
[[ids], ...] on one line.

    scripted_replies.py AREAL_HOST TOKENIZER_DIR REPLIES.json
"""
import json
import subprocess
import sys

host, tok, path = sys.argv[1:4]
ids = []
for text in json.load(open(path)):
    out = subprocess.run([host, "tokenize", "--tokenizer", tok, "--no-special-tokens"], input=text.encode(), capture_output=True, check=True)
    ids.append(json.loads(out.stdout)["ids"])
print(json.dumps(ids, separators=(",", ":")))
