"""Drive a running Railyard daemon with the real OpenAI Python SDK; print what it saw as JSON.

Usage: python openai_client.py BASE_URL   (e.g. http://127.0.0.1:8080/v1, daemon on --demo-backend)
"""
import json
import sys

import openai

client = openai.OpenAI(base_url=sys.argv[1], api_key="demo-key")  # the bundled config's demo key
weather = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}]
out = {}

r = client.chat.completions.create(
    model="demo", messages=[{"role": "user", "content": "mail me at jane.doe@example.com"}])
out["plain"] = r.choices[0].message.content
out["plain_railyard"] = (r.model_extra or {}).get("railyard")

chunks = client.chat.completions.create(
    model="demo", stream=True,
    messages=[{"role": "user", "content": "my card is 4111 1111 1111 1111, thanks " + "and more words " * 30}])
out["stream"] = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)

r = client.chat.completions.create(
    model="demo", tools=weather,
    messages=[{"role": "user", "content": 'call get_weather {"city": "Paris"}'}])
call = r.choices[0].message.tool_calls[0]
out["tool_call"] = {"name": call.function.name, "arguments": json.loads(call.function.arguments),
                    "finish_reason": r.choices[0].finish_reason}

calls = {}
for c in client.chat.completions.create(
        model="demo", stream=True, tools=weather,
        messages=[{"role": "user", "content": 'call get_weather {"city": "Oslo"}'}]):
    for d in (c.choices[0].delta.tool_calls or []) if c.choices else []:
        entry = calls.setdefault(d.index, {"name": "", "arguments": ""})
        entry["name"] += (d.function.name or "") if d.function else ""
        entry["arguments"] += (d.function.arguments or "") if d.function else ""
out["stream_tool_call"] = calls.get(0)

r = client.chat.completions.create(
    model="demo", tools=weather,
    messages=[{"role": "user", "content": "call delete_database {}"}])
out["blocked"] = {"content": r.choices[0].message.content, "finish_reason": r.choices[0].finish_reason,
                  "railyard": (r.model_extra or {}).get("railyard")}

try:
    for _ in client.chat.completions.create(
            model="demo", stream=True, tools=weather,
            messages=[{"role": "user", "content": "call delete_database {}"}]):
        pass
    out["blocked_stream"] = None
except openai.APIError as e:
    out["blocked_stream"] = str(e)

print(json.dumps(out))
