"""The quickstart's task as a seed-style Python agent: "Which digit comes after D?"
(examples/quickstart_agent/agent.mjs is the same agent as an npm program). Used by
bench/agent_modes to compare inline, subproc-pool, process-per-episode and online modes.
Standard library plus the injected httpx client; no other packages."""
import asyncio
import json
import urllib.request


def reward(reply, answer):
    text = reply.strip()
    if text == str(answer):
        return 1.0
    return 0.5 if text.startswith(str(answer)) else 0.0


class DigitAgent:
    async def run(self, data, **extra_kwargs):
        d = int(data.get("digit", 0))
        body = {"model": "default", "messages": [{"role": "user", "content": f"Which digit comes after {d}?"}],
                "max_tokens": 4, "temperature": 1.0}
        headers = {"Authorization": f"Bearer {extra_kwargs['api_key']}", "Content-Type": "application/json"}
        url = extra_kwargs["base_url"] + "/chat/completions"
        client = extra_kwargs.get("http_client")
        if client is not None:
            resp = await client.post(url, json=body, headers=headers)
            resp.raise_for_status()
            r = resp.json()
        else:
            def post():
                req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
                return json.loads(urllib.request.urlopen(req, timeout=120).read())
            r = await asyncio.to_thread(post)
        return reward(r["choices"][0]["message"]["content"] or "", d + 1)
