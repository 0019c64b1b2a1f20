"""Ask each model door for a stream that a policy refuses before the model answers, with the real
SDKs, and print as JSON what each SDK made of it: the text it read and how it ended, or the
exception it raised. Usage: refused_stream.py BASE_URL (the daemon, e.g. http://127.0.0.1:8080)."""

import json
import sys

import anthropic
import openai

base = sys.argv[1]
oai = openai.OpenAI(base_url=f"{base}/v1", api_key="demo-key", max_retries=0)
ant = anthropic.Anthropic(base_url=base, api_key="demo-key", max_retries=0)
ask = "please refuse this"
out = {}


def run(name, body):
    try:
        out[name] = body()
    except (openai.APIError, anthropic.APIError) as e:
        out[name] = {"raised": type(e).__name__, "message": str(e)}


def chat():
    text, finish = "", None
    for chunk in oai.chat.completions.create(model="m", stream=True,
                                             messages=[{"role": "user", "content": ask}]):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return {"text": text, "finish": finish}


def responses():
    text, status = "", None
    for event in oai.responses.create(model="m", stream=True, input=ask):
        if event.type == "response.output_text.delta":
            text += event.delta
        if event.type == "response.completed":
            status = event.response.status
            text = event.response.output_text or text
    return {"text": text, "finish": status}


def messages():
    with ant.messages.stream(model="m", max_tokens=50,
                             messages=[{"role": "user", "content": ask}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    return {"text": text, "finish": final.stop_reason}


run("chat", chat)
run("responses", responses)
run("messages", messages)
print(json.dumps(out))
