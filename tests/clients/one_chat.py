"""One chat completion through the real OpenAI Python SDK; prints what the SDK made of it as
JSON (its parsed message, every field it kept, and the finish reason), or the error it raised.
Usage: one_chat.py BASE_URL REQUEST_JSON (the request's fields, passed as the SDK's arguments;
fields the SDK has no argument for go in `extra_body`)."""

import json
import sys

import openai

client = openai.OpenAI(base_url=sys.argv[1], api_key="demo-key", max_retries=0)
request = json.loads(sys.argv[2])
known = {"model", "messages", "tools", "functions", "stream", "user", "metadata", "stop",
         "prediction", "response_format", "tool_choice", "function_call"}
extra = {k: request.pop(k) for k in list(request) if k not in known}
try:
    r = client.chat.completions.create(**request, extra_body=extra or None)
    choice = r.choices[0]
    print(json.dumps({"message": choice.message.model_dump(), "finish": choice.finish_reason,
                      "railyard": (r.model_extra or {}).get("railyard")}))
except openai.APIError as e:
    print(json.dumps({"raised": type(e).__name__, "message": str(e)}))
