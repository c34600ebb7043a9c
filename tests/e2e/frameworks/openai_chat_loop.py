"""The plain `openai` package's tool loop, as its docs write it: the
assistant message goes back as the SDK returned it (content None beside
tool_calls), then the tool's result. The baseline of the framework suite.
Environment: AREAL_BASE_URL, AREAL_API_KEY, AREAL_FRAMEWORK_MODE (agent_frameworks.sh)."""
import json
import os

from openai import OpenAI

client = OpenAI(base_url=os.environ["AREAL_BASE_URL"] + "/v1", api_key=os.environ["AREAL_API_KEY"], max_retries=0)
tools = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24}}, "required": ["city"]}}}]
runs = []
messages = [{"role": "user", "content": "What is the weather in Paris?"}]
tool_choice = "required"
for _ in range(4):
    reply = client.chat.completions.create(model="areal", messages=messages, tools=tools, tool_choice=tool_choice, max_tokens=48, temperature=0)
    message = reply.choices[0].message
    if not message.tool_calls:
        break
    messages.append(message.model_dump(exclude_unset=True))
    for call in message.tool_calls:
        args = json.loads(call.function.arguments)
        output = f"Sunny, 21 C in {args['city']}"
        runs.append({"name": call.function.name, "args": args, "output": output})
        messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    tool_choice = "auto"
print(json.dumps({"forced": True, "tool_runs": runs, "answer": message.content or ""}))
