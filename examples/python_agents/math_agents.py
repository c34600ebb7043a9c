"""The agent-workflow seeds' math agents, as areal runs them (docs/agent-workflows.md).

Any class with `run(data, **extra_kwargs)` is an agent workflow. areal calls it once per
episode with `base_url` and `api_key` of that episode's gateway session (also in
OPENAI_BASE_URL / OPENAI_API_KEY), and trains on every call the agent makes there.

The chat helper uses the `openai` package when it is installed, else aiohttp, else the
standard library, so the examples run with Debian's python3 as well as in a venv.
"""
import asyncio
import json
import os
import re
import urllib.request


async def chat(messages, base_url, api_key, http_client=None, max_tokens=16, **extra):
    """One chat completion; returns (completion id, reply text). http_client is the
    httpx.AsyncClient areal injects in inline mode (None in subproc mode)."""
    body = {"model": "default", "messages": messages, "max_tokens": max_tokens, **extra}
    try:
        from openai import AsyncOpenAI
    except ImportError:
        AsyncOpenAI = None
    if AsyncOpenAI is not None:
        client = AsyncOpenAI(base_url=base_url, api_key=api_key, http_client=http_client, max_retries=0)
        r = await client.chat.completions.create(**body)
        return r.id, r.choices[0].message.content or ""
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    if http_client is not None:
        resp = await http_client.post(f"{base_url}/chat/completions", json=body, headers=headers)
        resp.raise_for_status()
        r = resp.json()
        return r["id"], r["choices"][0]["message"]["content"] or ""
    try:
        import aiohttp
    except ImportError:
        aiohttp = None
    if aiohttp is not None:
        async with aiohttp.ClientSession() as s:
            async with s.post(f"{base_url}/chat/completions", json=body, headers=headers) as resp:
                resp.raise_for_status()
                r = await resp.json()
    else:
        def post():
            req = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(body).encode(), headers=headers)
            return json.loads(urllib.request.urlopen(req, timeout=120).read())
        r = await asyncio.to_thread(post)
    return r["id"], r["choices"][0]["message"]["content"] or ""


def correct(reply, answer):
    numbers = re.findall(r"-?\d+", reply)
    return bool(numbers) and numbers[-1] == str(answer)


class MathAgent:
    """Single turn: ask, reward 1 for the right final number."""

    async def run(self, data, **extra_kwargs):
        messages = [{"role": "user", "content": data["question"]}]
        _, reply = await chat(messages, extra_kwargs["base_url"], extra_kwargs["api_key"], extra_kwargs.get("http_client"))
        return 1.0 if correct(reply, data["answer"]) else 0.0


class MultiTurnMathAgent:
    """Retry with feedback, up to `max_turns`; rewards per completion id (the seeds'
    dict form): 1 for the turn that got it right, 0 for the others. With
    rollout.openai.turn_discount < 1, earlier turns also get a discounted share."""

    max_turns = 3

    async def run(self, data, **extra_kwargs):
        base_url, api_key = extra_kwargs["base_url"], extra_kwargs["api_key"]
        messages = [{"role": "user", "content": data["question"]}]
        rewards = {}
        for _ in range(self.max_turns):
            cid, reply = await chat(messages, base_url, api_key, extra_kwargs.get("http_client"))
            ok = correct(reply, data["answer"])
            rewards[cid] = 1.0 if ok else 0.0
            if ok:
                break
            messages += [{"role": "assistant", "content": reply},
                         {"role": "user", "content": "That is not right. Think again and answer with the number."}]
        return rewards


class SyncMathAgent:
    """Subproc mode allows synchronous code: the base URL comes from the environment."""

    def run(self, data, **extra_kwargs):
        body = {"model": "default", "messages": [{"role": "user", "content": data["question"]}], "max_tokens": 16}
        req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}", "Content-Type": "application/json"})
        reply = json.loads(urllib.request.urlopen(req, timeout=120).read())["choices"][0]["message"]["content"] or ""
        return 1.0 if correct(reply, data["answer"]) else 0.0
