"""areal agent_pool worker for Python agents.

    python3 python_worker.py module:Class | module:function | module

Imports the agent once, answers {"op": "ready"} on fd 4, then runs one
episode per JSON line read on fd 3 and answers one JSON line on fd 4
(docs/agent-workflows.md, "Worker protocol"). stdout and stderr stay the
agent's own; the host logs them. Standard library only.
"""
import asyncio
import importlib
import inspect
import json
import math
import os
import sys
import traceback
import urllib.error
import urllib.request

REQUESTS, REPLIES = 3, 4


def send(out, message):
    out.write(json.dumps(message) + "\n")
    out.flush()


def load(spec):
    """The callable `run(data, **kwargs)` named by spec; a class is instantiated once."""
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    target = getattr(module, attr) if attr else getattr(module, "run")
    if inspect.isclass(target):
        target = target().run
    if not callable(target):
        raise TypeError(f"{spec} is not callable")
    return target


async def _await(awaitable):
    return await awaitable


def set_rewards(base_url, api_key, rewards):
    """A {completion_id: reward} result: each reward goes to its call through the gateway."""
    for completion_id, reward in rewards.items():
        body = json.dumps({"interaction_id": completion_id, "reward": reward}).encode()
        req = urllib.request.Request(base_url.rstrip("/") + "/rl/set_reward", data=body, method="POST",
                                     headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=60).read()
        except urllib.error.HTTPError as e:
            raise ValueError(f"reward for {completion_id!r}: the gateway answered {e.code}: {e.read().decode(errors='replace')}") from None


def check_reward(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def run_episode(run, request):
    base_url, api_key = request["base_url"], request["api_key"]
    # AReaL's subproc mode: the agent may read these instead of its kwargs.
    os.environ.update({"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": api_key,
                       "ANTHROPIC_BASE_URL": request.get("anthropic_base_url", base_url), "ANTHROPIC_API_KEY": api_key,
                       "AREAL_EPISODE_ID": request.get("episode_id", "")})
    result = run(request["data"], base_url=base_url, api_key=api_key)
    if inspect.isawaitable(result):
        result = asyncio.run(_await(result))
    if result is None:
        return {"op": "result", "reward": None}
    if isinstance(result, dict):
        rewards = {str(k): check_reward(v, f"the reward of completion {k!r}") for k, v in result.items()}
        set_rewards(base_url, api_key, rewards)
        return {"op": "result", "reward": None, "rewards": rewards}
    return {"op": "result", "reward": check_reward(result, f"run() returned {type(result).__name__}; the reward")}


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
