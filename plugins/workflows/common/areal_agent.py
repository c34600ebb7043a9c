"""What areal's Python agent hosts share (the agent_pool worker and the inline
runtime): loading `module:Class` agents and turning what `run` returned into
the reply of the worker protocol (docs/agent-workflows.md). Standard library only."""
import importlib
import inspect
import json
import math
import urllib.error
import urllib.request


def load(spec):
    """The callable `run(data, **kwargs)` named by spec (module:Class, module:function or
    module); a class is instantiated once."""
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    target = getattr(module, attr) if attr else getattr(module, "run")
    if inspect.isclass(target):
        target = target().run
    if not callable(target):
        raise TypeError(f"{spec} is not callable")
    return target


def check_reward(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"{what} must be a finite number, got {value!r}")
    return float(value)


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


def check_result(result):
    """run()'s return value -> (reward or None, {completion_id: reward} or None); raises on garbage."""
    if result is None:
        return None, None
    if isinstance(result, dict):
        return None, {str(k): check_reward(v, f"the reward of completion {k!r}") for k, v in result.items()}
    return check_reward(result, f"run() returned {type(result).__name__}; the reward"), None


def result_reply(reward, rewards):
    reply = {"op": "result", "reward": reward}
    if rewards is not None:
        reply["rewards"] = rewards
    return reply
