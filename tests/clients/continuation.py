"""One turn of a stateful Responses tool loop with the real OpenAI Python SDK through Railyard:
`first` asks and prints the call the model made; `next` continues that response
(`previous_response_id`) with only the call's output, as agents that keep state on the server do.
Prints what it saw as JSON.

Usage: python continuation.py BASE_URL KEY first
       python continuation.py BASE_URL KEY next PREVIOUS_RESPONSE_ID CALL_ID OUTPUT
"""
import json
import sys

import openai

client = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2])
tools = [{"type": "function", "name": name,
          "parameters": {"type": "object", "properties": {"arg": {"type": "string"}}}}
         for name in ("fetch_url", "lookup_order", "send_email")]
out = {}
if sys.argv[3] == "first":
    r = client.responses.create(model="m", input="what does the page say?", tools=tools)
    call = next(i for i in r.output if i.type == "function_call")
    out = {"id": r.id, "call_id": call.call_id, "name": call.name}
else:
    previous, call_id, output = sys.argv[4:7]
    r = client.responses.create(model="m", previous_response_id=previous, tools=tools,
                                input=[{"type": "function_call_output", "call_id": call_id,
                                        "output": output}])
    out = {"text": r.output_text, "types": [i.type for i in r.output],
           "railyard": (r.model_extra or {}).get("railyard")}
print(json.dumps(out))
