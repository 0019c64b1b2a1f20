"""Drive a running Railyard daemon (on --demo-backend) through the Responses API with the real
OpenAI Python SDK; print what it saw as JSON.

Usage: python responses_client.py BASE_URL [finish]
  finish: the daemon runs with on_block_stream = "finish" (a block ends the stream normally)
The daemon allows per-request rail overrides: "input": false lets PII reach the model, so the
output rail has to catch it, split across stream events.
"""
import json
import sys

import openai

client = openai.OpenAI(base_url=sys.argv[1], api_key="demo-key")  # the bundled config's demo key
finish = len(sys.argv) > 2 and sys.argv[2] == "finish"
weather = [{"type": "function", "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                           "required": ["city"]}}]
no_input_rail = {"railyard": {"rails": {"input": False}}}
out = {}

r = client.responses.create(model="demo", input="mail me at jane.doe@example.com")
out["plain"] = r.output_text
out["plain_railyard"] = (r.model_extra or {}).get("railyard")

# PII from the model, split across output_text.delta events (the demo echoes in 6-char pieces).
text, done_text, completed = "", None, None
with client.responses.create(model="demo", stream=True, extra_body=no_input_rail,
                             input="my card is 4111 1111 1111 1111, thanks " + "and more " * 40) as s:
    for e in s:
        if e.type == "response.output_text.delta":
            text += e.delta
        elif e.type == "response.output_text.done":
            done_text = e.text
        elif e.type == "response.completed":
            completed = e.response.output_text
out["stream"] = {"deltas": text, "done": done_text, "completed": completed}

# A whole tool loop: the model calls get_weather, the app answers with function_call_output.
r = client.responses.create(model="demo", tools=weather,
                            input='call get_weather {"city": "Paris"}')
call = next(i for i in r.output if i.type == "function_call")
out["tool_call"] = {"name": call.name, "arguments": json.loads(call.arguments)}
r2 = client.responses.create(model="demo", tools=weather, input=[
    {"role": "user", "content": 'call get_weather {"city": "Paris"}'},
    {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
    {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, write to ops@example.com"},
])
out["tool_loop"] = r2.output_text

# Streamed call: assembled from the events the SDK reads.
args, name = "", None
with client.responses.create(model="demo", stream=True, tools=weather,
                             input='call get_weather {"city": "Oslo"}') as s:
    for e in s:
        if e.type == "response.output_item.added" and e.item.type == "function_call":
            name = e.item.name
        elif e.type == "response.function_call_arguments.delta":
            args += e.delta
out["stream_tool_call"] = {"name": name, "arguments": args}

def refusal(**kw):
    r = client.responses.create(model="demo", **kw)
    return {"text": r.output_text, "blocked": ((r.model_extra or {}).get("railyard") or {}).get("blocked")}

out["undeclared"] = refusal(tools=weather, input="call delete_database {}")
out["bad_arguments"] = refusal(tools=weather, input='call get_weather {"town": "Oslo"}')
out["unlinked_result"] = refusal(tools=weather, input=[
    {"role": "user", "content": "hi"},
    {"type": "function_call_output", "call_id": "call_never_made", "output": "42"},
])

try:
    text, status = "", None
    with client.responses.create(model="demo", stream=True, tools=weather,
                                 input="call delete_database {}") as s:
        for e in s:
            if e.type == "response.output_text.delta":
                text += e.delta
            elif e.type == "response.completed":
                status = e.response.status
    out["blocked_stream"] = {"text": text, "status": status}
except openai.APIError as e:
    out["blocked_stream"] = {"error": str(e)}

out["models"] = [m.id for m in client.models.list()]
print(json.dumps(out))
