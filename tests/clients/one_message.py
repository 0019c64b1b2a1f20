"""One Messages request through the real Anthropic Python SDK; prints what the SDK made of it as
JSON: the content blocks and the `railyard` object, or the error it raised.
Usage: one_message.py BASE_URL REQUEST_JSON (BASE_URL without /v1: the SDK adds it; the request's
fields, passed as the SDK's arguments)."""

import json
import sys

import anthropic

client = anthropic.Anthropic(base_url=sys.argv[1], api_key="demo-key", max_retries=0)
request = json.loads(sys.argv[2])
try:
    m = client.messages.create(**request)
    print(json.dumps({"content": [b.model_dump(exclude_none=True) for b in m.content],
                      "railyard": (m.model_extra or {}).get("railyard")}))
except anthropic.APIError as e:
    print(json.dumps({"raised": type(e).__name__, "message": str(e)}))
