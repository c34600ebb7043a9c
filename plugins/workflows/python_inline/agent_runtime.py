"""The asyncio side of areal's inline Python workflows (plugin python_inline).

The plugin embeds the interpreter, runs `serve()` on a thread of its own (the
event loop), and schedules each episode with `submit()` from any host thread;
the result comes back through `_areal_inline.done(token, reply)`, a function
the plugin provides, so host threads only hold the GIL to schedule. Replies use
the agent_pool worker protocol's shape (docs/agent-workflows.md).
"""
import asyncio
import importlib
import inspect
import json
import math
import traceback

import _areal_inline

_loop = None
_run = None
_http_client = None


def load(spec):
    """The agent's run callable; a class is instantiated once."""
    global _run
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    target = getattr(module, attr) if attr else getattr(module, "run")
    if inspect.isclass(target):
        target = target().run
    if not callable(target):
        raise TypeError(f"{spec} is not callable")
    _run = target


def serve():
    """Runs the event loop on the calling thread until stop(); says ready (token 0) once it runs."""
    global _loop, _http_client
    _http_client = None
    _loop = asyncio.new_event_loop()
    asyncio.set_event_loop(_loop)
    _loop.call_soon(_areal_inline.done, 0, json.dumps({"op": "ready"}))
    try:
        _loop.run_forever()
    finally:
        if _http_client is not None:
            _loop.run_until_complete(_http_client.aclose())
        _loop.close()


def stop():
    _loop.call_soon_threadsafe(_loop.stop)


def _client():
    """One shared httpx.AsyncClient when httpx imports (the seeds' http_client), else None."""
    global _http_client
    if _http_client is None:
        try:
            import httpx
        except ImportError:
            return None
        _http_client = httpx.AsyncClient(timeout=None)
    return _http_client


def _reward(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{what} must be a finite number, got {value!r}")
    return float(value)


async def _set_rewards(base_url, api_key, rewards):
    def post():
        import urllib.error
        import urllib.request
        for completion_id, reward in rewards.items():
            body = json.dumps({"interaction_id": completion_id, "reward": reward}).encode()
            req = urllib.request.Request(base_url.rstrip("/") + "/rl/set_reward", data=body, method="POST",
                                         headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"})
            try:
                urllib.request.urlopen(req, timeout=60).read()
            except urllib.error.HTTPError as e:
                raise ValueError(f"reward for {completion_id!r}: the gateway answered {e.code}: {e.read().decode(errors='replace')}") from None
    await asyncio.to_thread(post)


async def _episode(request, timeout):
    base_url, api_key = request["base_url"], request["api_key"]
    kwargs = {"base_url": base_url, "api_key": api_key}
    client = _client()
    if client is not None:
        kwargs["http_client"] = client
    if inspect.iscoroutinefunction(_run) or inspect.iscoroutinefunction(getattr(_run, "__call__", None)):
        work = _run(request["data"], **kwargs)
    else:  # a sync run would block every other episode: it runs on a worker thread
        work = asyncio.to_thread(_run, request["data"], **kwargs)
    try:
        result = await asyncio.wait_for(work, timeout)
    except asyncio.TimeoutError:
        raise TimeoutError(f"run() took longer than timeout_seconds ({timeout:g} s) and was cancelled") from None
    if inspect.isawaitable(result):
        result = await result
    if result is None:
        return {"op": "result", "reward": None}
    if isinstance(result, dict):
        rewards = {str(k): _reward(v, f"the reward of completion {k!r}") for k, v in result.items()}
        await _set_rewards(base_url, api_key, rewards)
        return {"op": "result", "reward": None, "rewards": rewards}
    return {"op": "result", "reward": _reward(result, f"run() returned {type(result).__name__}; the reward")}


async def _guarded(token, request, timeout):
    try:
        reply = await _episode(request, timeout)
    except BaseException as e:  # noqa: BLE001 - any failure is the episode's, never the loop's
        if isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise
        reply = {"op": "error", "message": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
    _areal_inline.done(token, json.dumps(reply))


def submit(token, request_json, timeout):
    """From any thread: schedules one episode on the loop."""
    request = json.loads(request_json)
    asyncio.run_coroutine_threadsafe(_guarded(token, request, timeout), _loop)
