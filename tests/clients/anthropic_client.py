"""Drive a running Railyard daemon (on --demo-backend) through the Anthropic Messages API with the
real Anthropic Python SDK; print what it saw as JSON.

Usage: python anthropic_client.py BASE_URL   (BASE_URL without /v1: the SDK adds it)
"""
import json
import sys

import anthropic

client = anthropic.Anthropic(base_url=sys.argv[1], api_key="demo-key")  # sent as x-api-key
weather = [{"name": "get_weather", "description": "Weather",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                             "required": ["city"]}}]
no_input_rail = {"railyard": {"rails": {"input": False}}}
out = {}

def text_of(message):
    return "".join(b.text for b in message.content if b.type == "text")

m = client.messages.create(model="demo", max_tokens=100,
                           messages=[{"role": "user", "content": "mail me at jane.doe@example.com"}])
out["plain"] = text_of(m)
out["plain_railyard"] = (m.model_extra or {}).get("railyard")

text = ""
with client.messages.stream(model="demo", max_tokens=100, extra_body=no_input_rail, messages=[
        {"role": "user", "content": "my card is 4111 1111 1111 1111, thanks " + "and more " * 40}]) as s:
    for chunk in s.text_stream:
        text += chunk
    final = s.get_final_message()
out["stream"] = {"deltas": text, "final": text_of(final)}

m = client.messages.create(model="demo", max_tokens=100, tools=weather, messages=[
    {"role": "user", "content": 'call get_weather {"city": "Paris"}'}])
use = next(b for b in m.content if b.type == "tool_use")
out["tool_call"] = {"name": use.name, "input": use.input, "stop_reason": m.stop_reason}
m2 = client.messages.create(model="demo", max_tokens=100, tools=weather, messages=[
    {"role": "user", "content": 'call get_weather {"city": "Paris"}'},
    {"role": "assistant", "content": [{"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                  "content": "sunny, write to ops@example.com"}]},
])
out["tool_loop"] = text_of(m2)

with client.messages.stream(model="demo", max_tokens=100, tools=weather, messages=[
        {"role": "user", "content": 'call get_weather {"city": "Oslo"}'}]) as s:
    final = s.get_final_message()
use = next(b for b in final.content if b.type == "tool_use")
out["stream_tool_call"] = {"name": use.name, "input": use.input}

def refusal(**kw):
    m = client.messages.create(model="demo", max_tokens=100, **kw)
    return {"text": text_of(m), "stop_reason": m.stop_reason,
            "blocked": ((m.model_extra or {}).get("railyard") or {}).get("blocked")}

out["undeclared"] = refusal(tools=weather, messages=[{"role": "user", "content": "call delete_database {}"}])
out["bad_arguments"] = refusal(tools=weather, messages=[
    {"role": "user", "content": 'call get_weather {"town": "Oslo"}'}])
out["unlinked_result"] = refusal(tools=weather, messages=[
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_never", "content": "42"}]},
])

try:
    with client.messages.stream(model="demo", max_tokens=100, tools=weather, messages=[
            {"role": "user", "content": "call delete_database {}"}]) as s:
        final = s.get_final_message()
    out["blocked_stream"] = {"text": text_of(final), "stop_reason": final.stop_reason}
except anthropic.APIError as e:
    out["blocked_stream"] = {"error": str(e)}

try:
    anthropic.Anthropic(base_url=sys.argv[1], api_key="wrong-key").messages.create(
        model="demo", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    out["wrong_key"] = None
except anthropic.AuthenticationError as e:
    out["wrong_key"] = {"status": e.status_code, "type": e.body["error"]["type"]}

print(json.dumps(out))
