"""AutoGen AgentChat's AssistantAgent (autogen-agentchat) on autogen-ext's
OpenAIChatCompletionClient. NOT FORCED ("forced": false): the agent calls its
model client without a tool_choice (the client's "auto"), and no agent setting
changes that; only the reflection call after the tools, tool_choice "none",
is the agent's own choice. reflect_on_tool_use makes that second call write
the answer, and max_tool_iterations 1 bounds the loop at two calls. Offline:
"areal" is no OpenAI model, so its model_info is given here; tiktoken (which
would download its encodings) is only reached by count_tokens/
remaining_tokens, which the agent's default, unbounded model context never
calls. Environment: AREAL_BASE_URL, AREAL_API_KEY, AREAL_FRAMEWORK_MODE
(agent_frameworks.sh)."""
import asyncio
import json
import os

from autogen_agentchat.agents import AssistantAgent
from autogen_core.models import ModelFamily, ModelInfo
from autogen_ext.models.openai import OpenAIChatCompletionClient

runs = []


async def get_weather(city: str) -> str:
    """The weather in a city."""
    output = f"Sunny, 21 C in {city}"
    runs.append({"name": "get_weather", "args": {"city": city}, "output": output})
    return output


async def main():
    client = OpenAIChatCompletionClient(
        model="areal", base_url=os.environ["AREAL_BASE_URL"] + "/v1", api_key=os.environ["AREAL_API_KEY"],
        temperature=0, max_tokens=48, max_retries=0,
        model_info=ModelInfo(vision=False, function_calling=True, json_output=False,
                             family=ModelFamily.UNKNOWN, structured_output=False))
    agent = AssistantAgent("assistant", model_client=client, tools=[get_weather],
                           reflect_on_tool_use=True, max_tool_iterations=1)
    result = await agent.run(task="What is the weather in Paris?")
    await client.close()
    return result.messages[-1].to_text()


answer = asyncio.run(main())
print(json.dumps({"forced": False, "tool_runs": runs, "answer": answer}))
