"""The GPU check's agent (scripts/gpu_check.sh, part b): a seed-style Python
agent run by the agent_pool workflow. A random-init model answers noise, so
a task like math gives every answer reward 0 and GRPO no gradient; this one
rewards the share of the reply's characters that are ASCII letters or
spaces, which varies between a group's answers from the first step and
which the policy can learn. Standard library only (urllib)."""
import json
import os
import urllib.request


class AsciiAgent:
    def run(self, data, **extra_kwargs):
        body = {"model": "default", "max_tokens": 12, "temperature": 1.0,
                "messages": [{"role": "user", "content": data["question"]}]}
        req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}",
                                              "Content-Type": "application/json"})
        reply = json.loads(urllib.request.urlopen(req, timeout=300).read())["choices"][0]["message"]["content"] or ""
        return sum(c.isascii() and (c.isalpha() or c == " ") for c in reply) / max(1, len(reply))
