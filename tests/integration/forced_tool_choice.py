"""forced_tool_choice.sh's client (stdlib only): forced calls on every API."""
import json
import sys
import urllib.request

URL, ADMIN = sys.argv[1], sys.argv[2]
TOOLS = [
    {"type": "function", "function": {"name": "add", "description": "Adds two integers.", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"],
        "additionalProperties": False}}},
    {"type": "function", "function": {"name": "set_mode", "description": "Sets a mode.", "parameters": {
        "type": "object", "properties": {"mode": {"enum": ["fast", "slow"]}, "loud": {"type": "boolean"}}, "required": ["mode"],
        "additionalProperties": False}}},
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def post(path, body, key, stream=False):
    req = urllib.request.Request(URL + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        assert r.status == 200, r.status
        text = r.read().decode()
        return text if stream else json.loads(text)


def check_args(name, args):
    """The arguments satisfy the tool's schema (the subset used here)."""
    assert name in SCHEMAS, name
    s = SCHEMAS[name]
    assert isinstance(args, dict), args
    assert set(args) <= set(s["properties"]) and set(s["required"]) <= set(args), (name, args)
    for k, v in args.items():
        p = s["properties"][k]
        if p.get("type") == "integer":
            assert isinstance(v, int) and not isinstance(v, bool), (k, v)
        if p.get("type") == "boolean":
            assert isinstance(v, bool), (k, v)
        if "enum" in p:
            assert v in p["enum"], (k, v)


def events(text):
    return [json.loads(l[6:]) for l in text.splitlines() if l.startswith("data: ") and l != "data: [DONE]"]


s = post("/rl/start_session", {"task_id": "forced"}, ADMIN)
key = s["api_key"]
msgs = [{"role": "user", "content": "Do something with a tool."}]
calls = 0
for seed in range(6):
    for choice, want in (("required", None), ({"type": "function", "function": {"name": "set_mode"}}, "set_mode"),
                         ({"type": "function", "function": {"name": "add"}}, "add")):
        body = {"model": "m", "messages": msgs, "tools": TOOLS, "tool_choice": choice, "seed": seed, "temperature": 1.0,
                "max_tokens": 120, "logprobs": True}
        r = post("/v1/chat/completions", body, key)
        m = r["choices"][0]["message"]
        assert r["choices"][0]["finish_reason"] == "tool_calls", r
        assert m.get("tool_calls") and not (m.get("content") or "").strip(), m
        lps = r["choices"][0]["logprobs"]["content"]
        assert len(lps) == r["usage"]["completion_tokens"] and all(l["logprob"] <= 0 for l in lps), r["usage"]
        for c in m["tool_calls"]:
            assert want is None or c["function"]["name"] == want, c
            check_args(c["function"]["name"], json.loads(c["function"]["arguments"]))
        calls += 1
        # Streamed: the call arrives as a tool_calls delta, the text deltas carry no markup.
        text = post("/v1/chat/completions", {**body, "stream": True}, key, stream=True)
        ev = events(text)
        content = "".join(e["choices"][0]["delta"].get("content") or "" for e in ev if e.get("choices"))
        streamed = [tc for e in ev if e.get("choices") for tc in e["choices"][0]["delta"].get("tool_calls", [])]
        assert streamed and "<tool_call>" not in content and not content.strip(), (content, ev[-3:])
        for c in streamed:
            check_args(c["function"]["name"], json.loads(c["function"]["arguments"]))
        assert ev[-1]["choices"][0]["finish_reason"] == "tool_calls", ev[-1]
        calls += 1
print(f"chat: {calls} forced calls (required and named, plain and streamed), each a valid call")

# Anthropic: tool_choice any / tool.
atools = [{"name": t["function"]["name"], "description": t["function"]["description"], "input_schema": t["function"]["parameters"]} for t in TOOLS]
for seed, (choice, want) in enumerate((({"type": "any"}, None), ({"type": "tool", "name": "add"}, "add")) * 2):
    r = post("/v1/messages", {"model": "m", "max_tokens": 120, "messages": msgs, "tools": atools, "tool_choice": choice,
                              "metadata": {"user_id": "x"}, "temperature": 1.0}, key)
    uses = [b for b in r["content"] if b["type"] == "tool_use"]
    assert r["stop_reason"] == "tool_use" and uses, r
    assert not any(b["type"] == "text" and "<tool_call>" in b["text"] for b in r["content"]), r
    for b in uses:
        assert want is None or b["name"] == want, b
        check_args(b["name"], b["input"])
print("anthropic: tool_choice any and tool, each a valid tool_use")

# Responses: tool_choice required / a named function.
rtools = [{"type": "function", "name": t["function"]["name"], "parameters": t["function"]["parameters"]} for t in TOOLS]
for choice, want in (("required", None), ({"type": "function", "name": "set_mode"}, "set_mode")):
    r = post("/v1/responses", {"model": "m", "input": "Do something.", "tools": rtools, "tool_choice": choice,
                               "max_output_tokens": 120}, key)
    fcs = [o for o in r["output"] if o["type"] == "function_call"]
    assert fcs, r["output"]
    for o in fcs:
        assert want is None or o["name"] == want, o
        check_args(o["name"], json.loads(o["arguments"]))
print("responses: tool_choice required and named, each a valid function_call")
