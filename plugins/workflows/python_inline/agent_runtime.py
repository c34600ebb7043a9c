"""The asyncio side of areal's inline Python workflows (plugin python_inline).

The plugin embeds the interpreter, runs `serve()` on a thread of its own (the
event loop), and schedules each episode with `submit()` from any host thread;
the result comes back through `_areal_inline.done(token, reply)`, a function
the plugin provides, so host threads only hold the GIL to schedule. Replies use
the agent_pool worker protocol's shape (docs/agent-workflows.md).
"""
import asyncio
import inspect
import json
import threading
import traceback

import _areal_inline
from areal_agent import check_result, load as load_agent, result_reply, set_rewards

_loop = None
_run = None
_http_client = None


def load(spec):
    global _run
    _run = load_agent(spec)


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


async def _episode(request, timeout):
    base_url, api_key = request["base_url"], request["api_key"]
    kwargs = {"base_url": base_url, "api_key": api_key}
    client = _client()
    if client is not None:
        kwargs["http_client"] = client
    is_async = inspect.iscoroutinefunction(_run) or inspect.iscoroutinefunction(getattr(_run, "__call__", None))
    # A sync run would block every other episode: it runs on a thread of its own.
    work = _run(request["data"], **kwargs) if is_async else _in_own_thread(_run, request["data"], **kwargs)
    try:
        result = await asyncio.wait_for(work, timeout)
    except asyncio.TimeoutError:
        how = "was cancelled" if is_async else "was abandoned (a thread cannot be stopped: it runs on, holding only itself)"
        raise TimeoutError(f"run() took longer than timeout_seconds ({timeout:g} s) and {how}") from None
    if inspect.isawaitable(result):
        result = await result
    reward, rewards = check_result(result)
    if rewards:
        await asyncio.wait_for(_in_own_thread(set_rewards, base_url, api_key, rewards), timeout)
    return result_reply(reward, rewards)


def _in_own_thread(fn, *args, **kwargs):
    """fn on a daemon thread of its own, as a future of this loop. Not the
    loop's default executor: a sync run that hangs past its timeout cannot be
    stopped, and a few of them would hold every executor thread, so that every
    later sync episode (and every agent's own asyncio.to_thread) would wait."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result, error):
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def body():
        try:
            result = fn(*args, **kwargs)
        except BaseException as e:  # noqa: BLE001 - the episode's failure, reported on the loop
            loop.call_soon_threadsafe(settle, None, e)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=body, daemon=True, name="areal-inline-sync-run").start()
    return future


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
