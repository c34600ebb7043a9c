"""Checks one framework's tool loop (agent_frameworks.sh) from three records
that share nothing: what the framework's HTTP client sent (the recording
proxy's log), what the framework says it did (the client's summary line) and
what the gateway recorded (the session's export).

    check_tool_loop.py CLIENT MODE WORK_DIR [REPLIES_JSON]
"""
import json
import re
import sys

client, mode, work = sys.argv[1:4]
replies = json.load(open(sys.argv[4])) if len(sys.argv) > 4 and sys.argv[4] else []
MODEL_ROUTES = ("/v1/chat/completions", "/v1/responses", "/v1/messages")

requests = [json.loads(line) for line in open(f"{work}/requests.jsonl")]
calls = [r["body"] for r in requests if r["method"] == "POST" and r["path"].split("?")[0] in MODEL_ROUTES]
summary = json.load(open(f"{work}/summary.json"))
exported = json.load(open(f"{work}/export.json"))
assert calls, f"{client}: the framework made no model call"
# A tool must run, unless the first call was not forced (a framework that cannot
# force one) and the model is the random one (constrained): it may just answer.
unforced_random = mode == "constrained" and not summary.get("forced")
assert summary["tool_runs"] or unforced_random, f"{client}: the framework ran no tool: {summary}"


def tool_results(body):
    """The tool results a request carries back, on any API, as (channel, text):
    a tool message, a tool_result block, a function_call_output item, or (for
    frameworks that write the loop as prose, no tool_calls) a user message's text."""
    results = []
    def text_of(content):
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
        return json.dumps(content)
    for m in body.get("messages") or []:
        if m.get("role") == "tool":
            results.append(("tool message", text_of(m.get("content"))))
        if m.get("role") == "user" and isinstance(m.get("content"), list):
            results += [("tool_result block", text_of(b.get("content"))) for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
            results += [("user text", b.get("text", "")) for b in m["content"] if isinstance(b, dict) and b.get("type") in ("text", "input_text")]
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            results.append(("user text", m["content"]))
    if isinstance(body.get("input"), list):
        results += [("function_call_output", text_of(i.get("output"))) for i in body["input"] if isinstance(i, dict) and i.get("type") == "function_call_output"]
    return results


def tool_call_turn_content(body):
    """How the request writes an assistant turn that made tool calls (Chat)."""
    shapes = []
    for m in body.get("messages") or []:
        if m.get("role") == "assistant" and m.get("tool_calls"):
            c = m["content"] if "content" in m else "<absent>"
            shapes.append("absent" if c == "<absent>" else "null" if c is None else "empty" if c == "" else
                          "parts" if isinstance(c, list) else "text")
    return shapes


def is_forced(choice):
    if choice == "required":
        return True
    return isinstance(choice, dict) and choice.get("type") in ("function", "any", "tool")


# 1. Every call the framework made is in the export, each token with its log-prob and version.
rows = exported["rows"]
turns = sum(r["turns"] for r in rows)
assert turns == len(calls), f"{client}: the framework made {len(calls)} model calls, the export holds {turns} turns"
for r in rows:
    n = len(r["input_ids"])
    assert n == len(r["loss_mask"]) == len(r["logprobs"]) == len(r["versions"]) and sum(r["loss_mask"]) > 0, f"{client}: malformed row"

# 2. Each tool's result went back to the model in a later call (the user's own
# prompt, sent with every call, cannot carry it: the result is made up by the tool).
channels = set()
later = [r for body in calls[1:] for r in tool_results(body)]
for run in summary["tool_runs"]:
    found = [channel for channel, text in later if str(run["output"]) in text]
    assert found, f"{client}: the result of {run['name']} ({run['output']!r}) never went back: {later}"
    channels.add(found[0])

# 3. A forced first call was sent as forced (and answered with a call, or no tool would have run).
if summary.get("forced"):
    choice = calls[0].get("tool_choice")
    assert is_forced(choice), f"{client}: the first call was meant to be forced, tool_choice was {choice!r}"

# 4. Scripted: the tools ran with exactly the scripted arguments, and the answer is the script's.
if mode == "scripted":
    def calls_in(text):
        """A reply's tool calls: hermes blocks, or (forced: the gateway wrote the opening) the bare JSON call."""
        blocks = re.findall(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", text, re.S)
        if blocks:
            return [json.loads(b) for b in blocks]
        try:
            call = json.loads(text.replace("<|im_end|>", ""))
        except ValueError:
            return []
        return [call] if isinstance(call, dict) and "name" in call and "arguments" in call else []
    scripted_calls = [c for text in replies for c in calls_in(text)]
    for run in summary["tool_runs"]:
        match = [c for c in scripted_calls if c["name"] == run["name"] and c["arguments"] == run["args"]]
        assert match, f"{client}: {run['name']} ran with {run['args']}, which no scripted call sent ({scripted_calls})"
    last = replies[-1].replace("<|im_end|>", "").strip()
    finals = [c for c in scripted_calls if "answer" in c["arguments"]]
    expected = str(finals[-1]["arguments"]["answer"]) if calls_in(replies[-1]) and finals else last
    assert expected in str(summary["answer"]), f"{client}: the answer {summary['answer']!r} is not the scripted {expected!r}"

shapes = sorted({s for body in calls for s in tool_call_turn_content(body)})
forced = f", first call forced ({json.dumps(calls[0].get('tool_choice'))})" if summary.get("forced") else ", first call not forced"
if not summary["tool_runs"]:
    forced += " (no tool run: the random model answered the unforced call)"
print(f"{client} ({mode}): {len(calls)} calls, all {turns} in the export; tools run: "
      f"{[r['name'] for r in summary['tool_runs']]}, results sent back as {sorted(channels)}; tool-call turns sent back with content {shapes or ['(no assistant turn with tool_calls)']}{forced}")
