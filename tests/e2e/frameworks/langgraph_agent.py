"""LangGraph's ReAct tool loop as LangChain 1.x builds it: `create_agent`
(langchain.agents, the successor of langgraph.prebuilt.create_react_agent,
which langgraph 1.x deprecates in its favour) compiles a LangGraph graph of a
model node and a tool node, here on langchain-openai's ChatOpenAI. The first
model call is forced by a wrap_model_call middleware that sets tool_choice
"required" while no model turn exists yet; later calls are the agent's
own (tool_choice left unset). A model-call limit bounds the loop. Environment:
AREAL_BASE_URL, AREAL_API_KEY, AREAL_FRAMEWORK_MODE (agent_frameworks.sh)."""
import json
import os

from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware, wrap_model_call
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

runs = []


class City(BaseModel):
    city: str = Field(description="The city.", max_length=24)


@tool(args_schema=City)
def get_weather(city: str) -> str:
    """The weather in a city."""
    output = f"Sunny, 21 C in {city}"
    runs.append({"name": "get_weather", "args": {"city": city}, "output": output})
    return output


@wrap_model_call
def force_first_call(request, handler):
    if not any(isinstance(m, AIMessage) for m in request.messages):
        request = request.override(tool_choice="required")
    return handler(request)


model = ChatOpenAI(model="areal", base_url=os.environ["AREAL_BASE_URL"] + "/v1", api_key=os.environ["AREAL_API_KEY"],
                   temperature=0, max_tokens=48, max_retries=0)
agent = create_agent(model, [get_weather], middleware=[force_first_call, ModelCallLimitMiddleware(run_limit=4)])
state = agent.invoke({"messages": [{"role": "user", "content": "What is the weather in Paris?"}]})
print(json.dumps({"forced": True, "tool_runs": runs, "answer": state["messages"][-1].text}))
