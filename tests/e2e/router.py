#!/usr/bin/python3
"""Checks a router gateway over two workers (router.sh), with python3-aiohttp.

    router.py ROUTER_URL ADMIN_KEY WORKER1_URL WORKER2_URL WORKER1_PID
"""
import asyncio
import os
import signal
import sys
import time

from aiohttp import ClientSession

ROUTER, ADMIN, W1, W2, W1_PID = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
admin = {"Authorization": f"Bearer {ADMIN}"}
checks = 0


def ok(what):
    global checks
    checks += 1
    print(f"[PASS] {what}")


async def start(s, task, api_key=None):
    body = {"task_id": task}
    if api_key:
        body["api_key"] = api_key
    r = await s.post(f"{ROUTER}/rl/start_session", json=body, headers=admin)
    assert r.status == 200, await r.text()
    return await r.json()


async def chat(s, key, content, **extra):
    r = await s.post(f"{ROUTER}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                     json={"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": 4, **extra})
    return r


async def sessions_on(s, worker, session_ids):
    """Which of the (active) session_ids a worker holds: asked directly, its
    admin export answers 409 (not ended yet) for those, 404 for others."""
    held = set()
    for sid in session_ids:
        r = await s.post(f"{worker}/export_trajectories", headers=admin, json={"session_id": sid})
        assert r.status in (404, 409), (r.status, await r.text())
        if r.status == 409:
            held.add(sid)
    return held


async def main():
    async with ClientSession() as s:
        # Spreading and pinning: 8 sessions, 3 calls each, all through the router.
        started = [await start(s, f"task-{i}") for i in range(8)]
        for st in started:
            for turn in range(3):
                r = await chat(s, st["api_key"], f"turn {turn}")
                assert r.status == 200, await r.text()
            r = await s.post(f"{ROUTER}/rl/set_reward", headers={"Authorization": f"Bearer {st['api_key']}"}, json={"reward": 1.0})
            assert r.status == 200, await r.text()
        ids = [st["session_id"] for st in started]
        on1, on2 = await sessions_on(s, W1, ids), await sessions_on(s, W2, ids)
        assert on1 and on2 and on1 | on2 == set(ids) and not on1 & on2, (on1, on2)
        ok(f"8 sessions spread over both workers ({len(on1)} + {len(on2)}), each held by one")
        for st in started[:4]:
            r = await s.post(f"{ROUTER}/rl/end_session", headers={"Authorization": f"Bearer {st['api_key']}"}, json={})
            assert r.status == 200, await r.text()
        for st in started[:4]:
            r = await s.post(f"{ROUTER}/export_trajectories", headers=admin, json={"session_id": st["session_id"]})
            assert r.status == 200, await r.text()
            rows = (await r.json())["rows"]
            assert len(rows) == 3, len(rows)  # every call of the session reached the same worker
        ok("every call of a session reached its worker (3 rows per session via the router's export)")

        # Refresh: start_session with a live key ends the old session on its worker
        # (kept for export) and starts the new one there.
        first = started[4]
        refreshed = await start(s, "task-4b", api_key=first["api_key"])
        assert refreshed["api_key"] == first["api_key"] and refreshed["session_id"] != first["session_id"]
        worker = W1 if first["session_id"] in on1 else W2
        assert await sessions_on(s, worker, [refreshed["session_id"]]) == {refreshed["session_id"]}
        r = await s.post(f"{ROUTER}/export_trajectories", headers=admin, json={"session_id": first["session_id"]})
        assert r.status == 200 and len((await r.json())["rows"]) == 3, await r.text()
        r = await chat(s, first["api_key"], "after refresh")
        assert r.status == 200, await r.text()
        ok("a refreshed key stays on its worker: the old session ended with its 3 rows, the new one serves")

        # Streaming passes through as generated: the first content arrives well before the end.
        st = await start(s, "stream")
        t0 = time.monotonic()
        r = await chat(s, st["api_key"], "stream please", stream=True, max_tokens=16)
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
        first_at, done_at = None, None
        async for raw in r.content:
            line = raw.decode().strip()
            if line.startswith("data: {") and '"content"' in line and first_at is None:
                first_at = time.monotonic() - t0
            if line == "data: [DONE]":
                done_at = time.monotonic() - t0
        assert first_at is not None and done_at is not None and first_at < done_at - 0.1, (first_at, done_at)
        ok(f"SSE streams through the router (first content at {first_at:.2f} s, done at {done_at:.2f} s)")

        # The router's own refusals.
        r = await chat(s, "sk-not-a-session-key", "hi")
        assert r.status == 401 and (await r.json())["error"]["code"] == "invalid_api_key", await r.text()
        r = await s.post(f"{ROUTER}/export_trajectories", headers=admin, json={"session_id": "nope"})
        assert r.status == 404, await r.text()
        r = await s.post(f"{ROUTER}/v1/messages", headers={"x-api-key": "sk-unknown", "anthropic-version": "2023-06-01"},
                         json={"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
        assert r.status == 401 and (await r.json())["type"] == "error", await r.text()
        ok("unknown keys get 401 (Anthropic's body on /v1/messages), unknown sessions 404")
        r = await s.post(f"{ROUTER}/v1/chat/completions", headers=admin,
                         json={"model": "m", "messages": [{"role": "user", "content": "no session"}], "max_tokens": 2})
        assert r.status == 200, await r.text()
        ok("a call with the admin key (no session) is served by a worker")

        r = await s.get(f"{ROUTER}/health")
        h = await r.json()
        assert h["mode"] == "router" and h["workers"] == 2, h
        ok("/health reports router mode and both workers")

        # Session-scoped URLs: the router sends /{session id or key}/... to the session's worker,
        # which checks them: the key form needs nothing more, the id form the session's key
        # (the id alone is no credential: 401); unknown sessions are 404, ended ones 410.
        scoped = await start(s, "scoped")
        bogus = {"Authorization": "Bearer anything"}
        own = {"Authorization": f"Bearer {scoped['api_key']}"}
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
        r = await s.post(f"{ROUTER}/{scoped['session_id']}/v1/chat/completions", headers=bogus, json=body)
        assert r.status == 401, (r.status, await r.text())
        for url, h in ((f"{ROUTER}/{scoped['session_id']}/v1/chat/completions", own), (f"{ROUTER}/{scoped['api_key']}/chat/completions", bogus)):
            r = await s.post(url, headers=h, json=body)
            assert r.status == 200, (url, r.status, await r.text())
        r = await s.post(f"{ROUTER}/{scoped['session_id']}/rl/set_reward", headers=bogus, json={"reward": -1000})
        assert r.status == 401, await r.text()
        r = await s.post(f"{ROUTER}/{scoped['api_key']}/rl/set_reward", headers=bogus, json={"reward": 0.5})
        assert r.status == 200, await r.text()
        r = await s.post(f"{ROUTER}/{scoped['session_id']}/rl/end_session", headers=own, json={})
        assert r.status == 200, await r.text()
        r = await s.post(f"{ROUTER}/{scoped['session_id']}/v1/chat/completions", headers=own, json=body)
        assert r.status == 410, (r.status, await r.text())
        r = await s.post(f"{ROUTER}/export_trajectories", headers=admin, json={"session_id": scoped["session_id"]})
        assert r.status == 200, (r.status, await r.text())
        rows = (await r.json())["rows"]
        assert len(rows) == 2 and any(row["reward"] == 0.5 for row in rows), rows
        r = await s.post(f"{ROUTER}/no-such-session-9/v1/chat/completions", headers=bogus, json=body)
        assert r.status == 404, (r.status, await r.text())
        ok("session-scoped URLs through the router reach the session's worker (key form; id form with its key, 401 without; 410 after, 404 unknown)")

        # Ending sessions and reusing their keys keeps the router's counts sane.
        for _ in range(3):
            st = await start(s, "reuse", api_key="sk-reused-key-0001")
            r = await s.post(f"{ROUTER}/rl/end_session", headers={"Authorization": "Bearer sk-reused-key-0001"}, json={})
            assert r.status == 200, await r.text()
        h = await (await s.get(f"{ROUTER}/health")).json()
        assert all(w["sessions"] >= 0 for w in h["routes"]), h
        ok("ending sessions and reusing a key never drives a worker's session count below zero")

        # A worker killed mid-stream: the client's stream ends with an in-band error, not as if complete.
        dead = next(st for st in started[5:] if st["session_id"] in on1)
        killer = asyncio.create_task(asyncio.sleep(0.15))
        r = await chat(s, dead["api_key"], "a long answer", stream=True, max_tokens=16)
        assert r.status == 200
        lines = []
        async def read_all():
            async for raw in r.content:
                lines.append(raw.decode().strip())
        reader = asyncio.create_task(read_all())
        await killer
        os.kill(W1_PID, signal.SIGKILL)
        await reader
        data = [l for l in lines if l.startswith("data: ")]
        assert data and '"backend_unavailable"' in data[-1] and "data: [DONE]" not in data, data[-3:]
        ok("a worker killed mid-stream ends the client's stream with an in-band backend_unavailable error")

        # A dead worker: its sessions get 502, the other worker's keep working.
        await asyncio.sleep(0.2)
        alive = next(st for st in started[5:] if st["session_id"] in on2)
        r = await chat(s, dead["api_key"], "anyone there?")
        assert r.status == 502 and (await r.json())["error"]["code"] == "backend_unavailable", await r.text()
        r = await chat(s, alive["api_key"], "still here?")
        assert r.status == 200, await r.text()
        fresh = await start(s, "after-death")
        r = await chat(s, fresh["api_key"], "new session")
        assert r.status == 200, await r.text()
        ok("a dead worker's sessions get 502; the other worker's sessions and new sessions keep working")
    print(f"router e2e: {checks} passed, 0 failed")


asyncio.run(main())
