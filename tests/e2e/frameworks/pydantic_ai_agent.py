"""Pydantic AI's agent loop (pydantic-ai-slim[openai]) on its OpenAI Chat
Completions model. The first model request is forced: Pydantic AI refuses a
static tool_choice "required" (the agent could never answer), so the agent's
model settings are a callable of the run step that forces step 1 and leaves
later steps "auto"; the answer is the agent's text output (output_type str,
no output tool). Environment: AREAL_BASE_URL, AREAL_API_KEY,
AREAL_FRAMEWORK_MODE (agent_frameworks.sh)."""
import json
import os
from typing import Annotated

from openai import AsyncOpenAI
from pydantic import Field
from pydantic_ai import Agent, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import UsageLimits

client = AsyncOpenAI(base_url=os.environ["AREAL_BASE_URL"] + "/v1", api_key=os.environ["AREAL_API_KEY"], max_retries=0)
model = OpenAIChatModel("areal", provider=OpenAIProvider(openai_client=client))


def settings(ctx: RunContext[None]) -> ModelSettings:
    return ModelSettings(temperature=0, max_tokens=48, max_retries=0,
                         tool_choice="required" if ctx.run_step == 1 else "auto")


agent = Agent(model, output_type=str, model_settings=settings)
runs = []


@agent.tool_plain
def get_weather(city: Annotated[str, Field(max_length=24)]) -> str:
    """The weather in a city."""
    output = f"Sunny, 21 C in {city}"
    runs.append({"name": "get_weather", "args": {"city": city}, "output": output})
    return output


result = agent.run_sync("What is the weather in Paris?", usage_limits=UsageLimits(request_limit=4))
print(json.dumps({"forced": True, "tool_runs": runs, "answer": result.output}))
