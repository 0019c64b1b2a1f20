"""One Responses request through the real OpenAI Python SDK; prints what the SDK made of it as
JSON: the response (for a stream, the one `response.completed` carried) and the `railyard`
object, or the error it raised.
Usage: one_response.py BASE_URL API_KEY REQUEST_JSON (the request's fields, passed as the SDK's
arguments)."""

import json
import sys

import openai

client = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0)
request = json.loads(sys.argv[3])
try:
    r = client.responses.create(**request)
    if request.get("stream"):
        done = None
        for event in r:
            if event.type == "response.completed":
                done = event.response
        r = done
    print(json.dumps({"output": [i.model_dump(exclude_none=True) for i in r.output],
                      "railyard": (r.model_extra or {}).get("railyard")}))
except openai.APIError as e:
    print(json.dumps({"raised": type(e).__name__, "message": str(e)}))
