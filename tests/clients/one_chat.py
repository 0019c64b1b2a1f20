"""One chat completion through the real OpenAI Python SDK; prints what the SDK made of it as
JSON (its parsed message, every field it kept, and the finish reason), or the error it raised.
Usage: one_chat.py BASE_URL REQUEST_JSON [API_KEY] (the request's fields, passed as the SDK's
arguments; fields the SDK has no argument for go in `extra_body`; the key demo-key unless given)."""

import json
import sys

import openai

key = sys.argv[3] if len(sys.argv) > 3 else "demo-key"
client = openai.OpenAI(base_url=sys.argv[1], api_key=key, max_retries=0)
request = json.loads(sys.argv[2])
known = {"model", "messages", "tools", "functions", "stream", "user", "metadata", "stop",
         "prediction", "response_format", "tool_choice", "function_call"}
extra = {k: request.pop(k) for k in list(request) if k not in known}
try:
    r = client.chat.completions.create(**request, extra_body=extra or None)
    if not request.get("stream"):
        choice = r.choices[0]
        print(json.dumps({"message": choice.message.model_dump(), "finish": choice.finish_reason,
                          "railyard": (r.model_extra or {}).get("railyard")}))
        sys.exit(0)
    # Streamed: what a client assembles from the deltas, every field of them.
    message, finish, railyard = {}, None, None
    for chunk in r:
        railyard = (chunk.model_extra or {}).get("railyard") or railyard
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            delta = choice.delta.model_dump(exclude_none=True)
            for key, value in delta.items():
                if key == "tool_calls":
                    calls = message.setdefault("tool_calls", {})
                    for c in value:
                        entry = calls.setdefault(c["index"], {})
                        for k, v in c.items():
                            if isinstance(v, dict):
                                part = entry.setdefault(k, {})
                                for kk, vv in v.items():
                                    part[kk] = part.get(kk, "") + vv if isinstance(vv, str) else vv
                            else:
                                entry[k] = v
                elif key == "function_call":
                    fc = message.setdefault("function_call", {"name": "", "arguments": ""})
                    for k in ("name", "arguments"):
                        fc[k] += value.get(k) or ""
                elif isinstance(value, str):
                    message[key] = message.get(key, "") + value
                else:
                    message[key] = value
    if "tool_calls" in message:
        message["tool_calls"] = [message["tool_calls"][i] for i in sorted(message["tool_calls"])]
    print(json.dumps({"message": message, "finish": finish, "railyard": railyard}))
except openai.APIError as e:
    print(json.dumps({"raised": type(e).__name__, "message": str(e)}))
