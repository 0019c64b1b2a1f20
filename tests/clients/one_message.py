"""One Messages request through the real Anthropic Python SDK; prints what the SDK made of it as
JSON: the content blocks and the `railyard` object, or the error it raised.
Usage: one_message.py BASE_URL REQUEST_JSON [API_KEY] (BASE_URL without /v1: the SDK adds it; the
request's fields, passed as the SDK's arguments; the key demo-key unless given)."""

import json
import sys

import anthropic

key = sys.argv[3] if len(sys.argv) > 3 else "demo-key"
client = anthropic.Anthropic(base_url=sys.argv[1], api_key=key, max_retries=0)
request = json.loads(sys.argv[2])
# Fields the SDK has no argument for (a beta's `mcp_servers`) go in `extra_body`.
known = {"model", "max_tokens", "messages", "system", "tools", "tool_choice", "stream", "metadata",
         "stop_sequences", "temperature", "top_k", "top_p", "thinking", "service_tier"}
extra = {k: request.pop(k) for k in list(request) if k not in known}
try:
    m = client.messages.create(**request, extra_body=extra or None)
    print(json.dumps({"content": [b.model_dump(exclude_none=True) for b in m.content],
                      "railyard": (m.model_extra or {}).get("railyard")}))
except anthropic.APIError as e:
    print(json.dumps({"raised": type(e).__name__, "message": str(e)}))
