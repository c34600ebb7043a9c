"""Agno's Agent on its OpenAI-compatible model class (OpenAILike, Chat
Completions). NOT FORCED ("forced": false): Agno sends the agent's one
tool_choice with every model call of a run (Model.response loops on a fixed
value), so forcing the first call would force them all and the loop would
never end (tool_call_limit only answers further calls with an error result);
no setting forces just the first. The model decides on its own to call the
tool, so the constrained mode, where only a forced call is made valid, cannot
expect a tool run. Agno's own telemetry (a POST to its cloud per run) is off.
Environment: AREAL_BASE_URL, AREAL_API_KEY, AREAL_FRAMEWORK_MODE
(agent_frameworks.sh)."""
import json
import os

os.environ["AGNO_TELEMETRY"] = "false"  # the agent's `telemetry` flag is read from here too

from agno.agent import Agent
from agno.models.openai.like import OpenAILike

runs = []


def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city.
    """
    output = f"Sunny, 21 C in {city}"
    runs.append({"name": "get_weather", "args": {"city": city}, "output": output})
    return output


model = OpenAILike(id="areal", base_url=os.environ["AREAL_BASE_URL"] + "/v1", api_key=os.environ["AREAL_API_KEY"],
                   temperature=0, max_tokens=48, max_retries=0, retries=0, retry_with_guidance=False)
agent = Agent(model=model, tools=[get_weather], tool_call_limit=3, telemetry=False)
result = agent.run("What is the weather in Paris?")
print(json.dumps({"forced": False, "tool_runs": runs, "answer": result.content or ""}))
