"""Hugging Face smolagents' ToolCallingAgent on its OpenAI-compatible model
class (OpenAIModel, alias OpenAIServerModel). The agent sends tool_choice
"required" on every step, the first included, and finishes by calling its
built-in final_answer tool, whose `answer` argument is the answer: a scripted
loop is a get_weather call, then a final_answer call. It writes the loop into
plain messages: the call goes back as assistant text ("Calling tools: ...") and
the result as a user message ("Observation: ..."), not as tool_calls and role
"tool". Environment: AREAL_BASE_URL, AREAL_API_KEY, AREAL_FRAMEWORK_MODE
(agent_frameworks.sh)."""
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing from the Hub, ever

from smolagents import OpenAIModel, Tool, ToolCallingAgent
from smolagents.monitoring import LogLevel

runs = []


class GetWeather(Tool):
    name = "get_weather"
    description = "The weather in a city."
    inputs = {"city": {"type": "string", "description": "The city.", "maxLength": 24}}
    output_type = "string"

    def forward(self, city: str) -> str:
        output = f"Sunny, 21 C in {city}."  # not ending in the city: the agent strips the result it sends back
        runs.append({"name": self.name, "args": {"city": city}, "output": output})
        return output


model = OpenAIModel("areal", api_base=os.environ["AREAL_BASE_URL"] + "/v1", api_key=os.environ["AREAL_API_KEY"],
                    client_kwargs={"max_retries": 0}, retry=False, temperature=0, max_tokens=48)
# Bounded: past max_steps the agent asks the model once more, without tools, for an answer.
agent = ToolCallingAgent(tools=[GetWeather()], model=model, max_steps=3, verbosity_level=LogLevel.OFF)
answer = agent.run("What is the weather in Paris?")
print(json.dumps({"forced": True, "tool_runs": runs, "answer": str(answer)}))
