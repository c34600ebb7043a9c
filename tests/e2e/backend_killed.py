#!/usr/bin/python3
"""Drives backend_killed.sh's gateway with Debian's python3-aiohttp.

    backend_killed.py BASE_URL ADMIN_KEY PID_OF_FIRST_SERVER PID_OF_SECOND_SERVER
"""
import asyncio
import json
import os
import signal
import sys

from aiohttp import ClientSession

BASE, ADMIN, FIRST, SECOND = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
MESSAGES = [{"role": "user", "content": "Count to forty."}]


async def kill_later(pid, seconds):
    await asyncio.sleep(seconds)
    os.kill(pid, signal.SIGKILL)


async def main():
    admin = {"Authorization": f"Bearer {ADMIN}"}
    async with ClientSession(base_url=BASE, headers=admin) as s:
        started = await (await s.post("/rl/start_session", json={"task_id": "killed"})).json()
    key = {"Authorization": f"Bearer {started['api_key']}"}
    async with ClientSession(base_url=BASE, headers=key) as s:
        # 1. A normal call; the session's calls go to the first server (affinity).
        r = await s.post("/v1/chat/completions", json={"model": "m", "messages": MESSAGES, "max_tokens": 8})
        assert r.status == 200, await r.text()
        first = await r.json()
        # 2. The first server dies mid-generation: the plugin resubmits prompt +
        #    tokens so far to the second; the client sees one whole answer.
        killer = asyncio.create_task(kill_later(FIRST, 0.4))
        r = await s.post("/v1/chat/completions", json={"model": "m", "messages": MESSAGES, "max_tokens": 40, "temperature": 0.7})
        await killer
        assert r.status == 200, await r.text()
        second = await r.json()
        assert second["usage"]["completion_tokens"] == 40, second["usage"]
        assert second["choices"][0]["finish_reason"] == "length", second["choices"][0]
        # 3. The last server dies mid-stream: deltas, then an in-band 502 error.
        killer = asyncio.create_task(kill_later(SECOND, 0.4))
        r = await s.post("/v1/chat/completions", json={"model": "m", "messages": MESSAGES, "max_tokens": 40, "stream": True})
        assert r.status == 200, await r.text()
        events = []
        async for raw in r.content:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[6:]))
        await killer
        errors = [e["error"] for e in events if "error" in e]
        assert len(errors) == 1, events[-3:]
        assert errors[0]["code"] == "backend_unavailable", errors[0]
        assert any(e.get("choices") and e["choices"][0]["delta"].get("content") for e in events), "no content before the failure"
        # 4. No server left: a plain call is a 502 with OpenAI's error body.
        r = await s.post("/v1/chat/completions", json={"model": "m", "messages": MESSAGES, "max_tokens": 4})
        assert r.status == 502, (r.status, await r.text())
        body = await r.json()
        assert body["error"]["code"] == "backend_unavailable" and body["error"]["message"], body
        # 4b. A session whose only call failed still finalizes (and frees its
        #     capacity); the answer says the reward had nowhere to go.
        async with ClientSession(base_url=BASE, headers=admin) as a:
            lonely = await (await a.post("/rl/start_session", json={"task_id": "lonely"})).json()
        lk = {"Authorization": f"Bearer {lonely['api_key']}"}
        r = await s.post("/v1/chat/completions", headers=lk, json={"model": "m", "messages": MESSAGES, "max_tokens": 4})
        assert r.status == 502, await r.text()
        r = await s.post("/rl/v1/finalize", headers=lk, json={"final_reward": 1.0})
        assert r.status == 200, await r.text()
        fin = await r.json()
        assert fin["final_reward_applied"] is False and fin["reason"], fin
        r = await s.post("/rl/set_reward", headers=lk, json={"reward": 1.0})
        assert r.status == 410, await r.text()  # ended
        # 5. "The last call" for a reward is the last one that answered.
        # The plugin counts what happened on /metrics.
        metrics = await (await s.get("/metrics")).text()
        counted = {l.split()[0]: float(l.split()[1]) for l in metrics.splitlines() if l.startswith("areal_inference_")}
        kind = counted and next(iter(counted)).split('backend="')[1].split('"')[0]
        assert counted.get(f'areal_inference_server_failures_total{{backend="{kind}"}}', 0) >= 2, counted
        assert counted.get(f'areal_inference_retries_total{{backend="{kind}"}}', 0) >= 1, counted
        assert counted.get(f'areal_inference_request_errors_total{{backend="{kind}"}}', 0) >= 1, counted
        r = await s.post("/rl/set_reward", json={"reward": 0.75})
        assert r.status == 200, await r.text()
        r = await s.post("/rl/end_session", json={})
        assert r.status == 200, await r.text()
    async with ClientSession(base_url=BASE, headers=admin) as s:
        r = await s.post("/export_trajectories", json={"session_id": started["session_id"], "discount": 1.0, "style": "individual"})
        assert r.status == 200, await r.text()
        exported = await r.json()
    rows = {row["interaction_id"]: row for row in exported["rows"]}
    assert set(rows) == {first["id"], second["id"]}, list(rows)
    row = rows[second["id"]]
    assert sum(row["loss_mask"]) == 40, sum(row["loss_mask"])
    assert row["reward"] == 0.75, row["reward"]
    assert rows[first["id"]]["reward"] == 0.0
    for r in rows.values():
        assert len(r["input_ids"]) == len(r["loss_mask"]) == len(r["logprobs"]) == len(r["versions"])
        assert all(lp <= 0.0 for lp, m in zip(r["logprobs"], r["loss_mask"]) if m)
    print("backend killed: every check passed")


asyncio.run(main())
