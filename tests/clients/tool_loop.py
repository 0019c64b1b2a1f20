"""A real tool loop with the OpenAI Python SDK through Railyard: the model calls a tool, the
client runs it and sends the conversation back (the SDK's own message objects, as agents do),
streamed and not. Prints what it saw as JSON.

Usage: python tool_loop.py BASE_URL KEY   (daemon on --demo-backend)
"""
import json
import sys

import openai

client = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2])
tools = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]
out = {}


def run_tool(call):
    return json.dumps({"city": json.loads(call["arguments"])["city"], "temperature_c": 21})


# Not streamed: the assistant message goes back as the SDK returned it.
messages = [{"role": "user", "content": 'call get_weather {"city": "Paris"}'}]
r = client.chat.completions.create(model="demo", tools=tools, messages=messages)
message = r.choices[0].message
call = message.tool_calls[0]
out["ids"] = [call.id]
messages.append(message)
messages.append({"role": "tool", "tool_call_id": call.id,
                 "content": run_tool({"arguments": call.function.arguments})})
r = client.chat.completions.create(model="demo", tools=tools, messages=messages)
out["answer"] = r.choices[0].message.content

# Streamed: the call assembled from deltas, sent back as a dict.
messages = [{"role": "user", "content": 'call get_weather {"city": "Oslo"}'}]
calls = {}
for c in client.chat.completions.create(model="demo", stream=True, tools=tools, messages=messages):
    for d in (c.choices[0].delta.tool_calls or []) if c.choices else []:
        entry = calls.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
        entry["id"] += d.id or ""
        entry["name"] += (d.function.name or "") if d.function else ""
        entry["arguments"] += (d.function.arguments or "") if d.function else ""
call = calls[0]
out["ids"].append(call["id"])
messages.append({"role": "assistant", "content": None, "tool_calls": [
    {"id": call["id"], "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}]})
messages.append({"role": "tool", "tool_call_id": call["id"], "content": run_tool(call)})
text = ""
for c in client.chat.completions.create(model="demo", stream=True, tools=tools, messages=messages):
    if c.choices:
        text += c.choices[0].delta.content or ""
out["stream_answer"] = text
print(json.dumps(out))
