"""The OpenAI Agents SDK, with its default model (the Responses API) and a function tool, through
a running Railyard daemon on --demo-backend; print what it saw as JSON.

Usage: python agents_client.py BASE_URL
"""
import json
import sys

from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled
from openai import AsyncOpenAI

set_tracing_disabled(True)  # traces would go to OpenAI's servers
set_default_openai_client(AsyncOpenAI(base_url=sys.argv[1], api_key="demo-key"))
seen = []


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    seen.append(city)
    return f"sunny in {city}, ask ops@example.com"


agent = Agent(name="weather", instructions="Answer with the weather.", tools=[get_weather])
result = Runner.run_sync(agent, 'call get_weather {"city": "Paris"}')
print(json.dumps({"final": result.final_output, "tool_ran_with": seen}))
