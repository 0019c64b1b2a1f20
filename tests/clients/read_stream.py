"""One streamed reply through a real SDK; prints what a client reads of it as JSON: every text
the SDK's events carried, by kind, and the SDK's own final message (or the error it raised);
for a Responses stream, also the request echo (instructions, metadata) its lifecycle events and
final response carry.
Usage: read_stream.py BASE_URL DOOR REQUEST_JSON, DOOR `responses` (the OpenAI SDK's
`responses.stream`) or `messages` (the Anthropic SDK's `messages.stream`)."""

import json
import sys

base, door, request = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
seen = {}


def add(kind, text):
    if text:
        seen[kind] = seen.get(kind, "") + text


try:
    if door == "responses":
        import openai

        client = openai.OpenAI(base_url=base, api_key="demo-key", max_retries=0)
        request.pop("stream", None)
        with client.responses.stream(**request) as stream:
            echo = {}
            for e in stream:
                if e.type in ("response.created", "response.in_progress"):
                    echo[e.type] = {"instructions": e.response.instructions,
                                    "metadata": e.response.metadata}
                if e.type.endswith(".delta") and isinstance(getattr(e, "delta", None), str):
                    add(e.type, e.delta)
                elif e.type == "response.output_text.annotation.added":
                    add(e.type, json.dumps(e.annotation if isinstance(e.annotation, dict)
                                           else e.annotation.model_dump()))
            final = stream.get_final_response()
        echo["final"] = {"instructions": final.instructions, "metadata": final.metadata}
        print(json.dumps({"events": seen, "output_text": final.output_text,
                          "output": [i.model_dump() for i in final.output], "echo": echo}))
    else:
        import anthropic

        client = anthropic.Anthropic(base_url=base, api_key="demo-key", max_retries=0)
        request.pop("stream", None)
        with client.messages.stream(**request) as stream:
            for e in stream:
                if e.type == "content_block_delta":
                    d = e.delta
                    for key in ("text", "thinking", "partial_json"):
                        add(f"{d.type}", getattr(d, key, None))
                    if d.type == "citations_delta":
                        add(d.type, json.dumps(d.citation.model_dump()))
            final = stream.get_final_message()
        print(json.dumps({"events": seen, "text": "".join(
            b.text for b in final.content if b.type == "text"),
            "content": [b.model_dump() for b in final.content]}))
except Exception as e:  # what the SDK raised is the answer
    print(json.dumps({"raised": type(e).__name__, "message": str(e)}))
