#!/usr/bin/python3
"""The seed-000 agent flow with Debian's python3-aiohttp against areal-host serve:
chat through /v1/chat/completions, an intermediate reward by completion_id,
/rl/v1/finalize with the terminal reward, then the admin export.

    seed000_aiohttp.py BASE_URL ADMIN_KEY
"""
import asyncio
import sys

from aiohttp import ClientSession

BASE, ADMIN = sys.argv[1], sys.argv[2]


class MyAgent:
    """The seed's agent, unchanged but for the session key it is given."""

    def __init__(self, api_key):
        self.headers = {"Authorization": f"Bearer {api_key}"}

    async def run(self, prompt):
        async with ClientSession(base_url=BASE, headers=self.headers) as session:
            response = await session.post("/v1/chat/completions", json={
                "model": "gpt-3.5-turbo",
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": 6,
            })
            assert response.status == 200, await response.text()
            completion_data = await response.json()
            r = await session.post("/rl/v1/set_reward", json={"completion_id": completion_data["id"], "reward": 0.5})
            assert r.status == 200, await r.text()
            second = await session.post("/v1/chat/completions", json={
                "model": "gpt-3.5-turbo",
                "messages": [{"role": "user", "content": prompt + " Again."}],
                "max_tokens": 6,
            })
            assert second.status == 200, await second.text()
            r = await session.post("/rl/v1/finalize", json={"final_reward": 1.0})
            assert r.status == 200, await r.text()
            assert (await r.json())["interaction_count"] == 2
            # The session is over: its key no longer works.
            late = await session.post("/rl/v1/set_reward", json={"completion_id": completion_data["id"], "reward": 0.1})
            assert late.status == 410, await late.text()
            return completion_data["id"]


async def main():
    admin = {"Authorization": f"Bearer {ADMIN}"}
    async with ClientSession(base_url=BASE, headers=admin) as s:
        started = await (await s.get("/rl/v1/start_session")).json()
    first_id = await MyAgent(started["api_key"]).run("What is RL?")
    async with ClientSession(base_url=BASE, headers=admin) as s:
        r = await s.post("/export_trajectories", json={"session_id": started["session_id"], "discount": 1.0})
        assert r.status == 200, await r.text()
        exported = await r.json()
    rows = {row["interaction_id"]: row for row in exported["rows"]}
    assert len(rows) == 2, exported
    assert rows[first_id]["reward"] == 0.5, rows[first_id]["reward"]  # the intermediate reward, kept
    last = [row for rid, row in rows.items() if rid != first_id][0]
    assert last["reward"] == 1.0  # final_reward went to the last completion
    for row in rows.values():
        assert len(row["input_ids"]) == len(row["loss_mask"]) == len(row["logprobs"]) == len(row["versions"])
        assert sum(row["loss_mask"]) > 0
    print("seed-000 aiohttp flow: 1 passed, 0 failed")


asyncio.run(main())
