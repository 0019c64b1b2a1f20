"""The request bodies bench/cpu.sh and bench/load.sh send, written as JSON files into the
directory given (its only argument):

- chat, responses, messages: a ~2 KB conversation with one email address (the input rail redacts
  it), ordinary text elsewhere, in each door's shape;
- stream: the chat request, streamed;
- tools: a chat request declaring 3 tools whose reply is one tool call (the demo model calls the
  tool the user names), so the tools, tool_call and output rails all run."""
import json
import sys

s = "The quarterly report is attached; please review the figures before Friday. "
turns = []
for i in range(7):
    t = s * 3 + ("Reach me at jane.doe@example.com if unclear." if i == 6 else "")
    turns.append({"role": "user" if i % 2 == 0 else "assistant", "content": t})
system = "You are a helpful assistant."


def tool(name, desc, props, required):
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": props, "required": required}}}


# The model is "bench", not the demo backend's "demo": the bundled config keeps content-safety
# (a guard model) to "demo", and these requests measure the policies that judge every request.
chat = {"model": "bench", "messages": [{"role": "system", "content": system}] + turns}
bodies = {
    "chat": chat,
    "stream": dict(chat, stream=True),
    "responses": {"model": "bench", "instructions": system, "input": turns},
    "messages": {"model": "bench", "max_tokens": 256, "system": system, "messages": turns},
    "tools": {"model": "bench", "messages": [
        {"role": "system", "content": system},
        {"role": "user", "content": 'call get_weather {"city": "Oslo", "days": 3}'}],
        "tools": [
            tool("get_weather", "Weather forecast for a city", {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1, "maximum": 14}}, ["city"]),
            tool("search_docs", "Search the documentation", {"query": {"type": "string"}},
                 ["query"]),
            tool("lookup_customer", "Look up a customer record", {
                "customer_id": {"type": "string"}}, ["customer_id"]),
        ]},
}
for name, body in bodies.items():
    with open(f"{sys.argv[1]}/{name}.json", "w") as f:
        json.dump(body, f)
