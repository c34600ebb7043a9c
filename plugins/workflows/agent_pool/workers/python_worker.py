"""areal agent_pool worker for Python agents.

    python3 python_worker.py module:Class | module:function | module

Imports the agent once, answers {"op": "ready"} on fd 4, then runs one
episode per JSON line read on fd 3 and answers one JSON line on fd 4
(docs/agent-workflows.md, "Worker protocol"). stdout and stderr stay the
agent's own; the host logs them. Standard library only.
"""
import asyncio
import inspect
import json
import os
import sys
import traceback

from areal_agent import check_result, load, result_reply, set_rewards

REQUESTS, REPLIES = 3, 4


def send(out, message):
    out.write(json.dumps(message) + "\n")
    out.flush()


async def _await(awaitable):
    return await awaitable


def run_episode(run, request):
    base_url, api_key = request["base_url"], request["api_key"]
    # AReaL's subproc mode: the agent may read these instead of its kwargs.
    os.environ.update({"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": api_key,
                       "ANTHROPIC_BASE_URL": request.get("anthropic_base_url", base_url), "ANTHROPIC_API_KEY": api_key,
                       "AREAL_EPISODE_ID": request.get("episode_id", "")})
    result = run(request["data"], base_url=base_url, api_key=api_key)
    if inspect.isawaitable(result):
        result = asyncio.run(_await(result))
    reward, rewards = check_result(result)
    if rewards:
        set_rewards(base_url, api_key, rewards)
    return result_reply(reward, rewards)


def main():
    os.set_inheritable(REQUESTS, False)  # commands the agent starts must not hold the protocol pipes
    os.set_inheritable(REPLIES, False)
    requests = os.fdopen(REQUESTS, "r", encoding="utf-8")
    replies = os.fdopen(REPLIES, "w", encoding="utf-8")
    if len(sys.argv) != 2:
        send(replies, {"op": "fatal", "message": "usage: python_worker.py module:Class", "traceback": ""})
        return 2
    sys.path.insert(0, os.getcwd())
    try:
        run = load(sys.argv[1])
    except BaseException as e:  # noqa: BLE001 - any import failure is reported, then the worker exits
        send(replies, {"op": "fatal", "message": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})
        return 1
    send(replies, {"op": "ready", "pid": os.getpid(), "python": sys.version.split()[0]})
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            reply = run_episode(run, request)
        except BaseException as e:  # noqa: BLE001 - the episode fails, the worker lives on
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            reply = {"op": "error", "message": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        send(replies, reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
