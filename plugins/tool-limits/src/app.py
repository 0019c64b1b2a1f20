"""tool-limits policy plugin (rail: tool_call), written in Python and built into a WebAssembly
component with componentize-py against wit/policy.wit (world `policy`).

This file is only the WIT glue: the `plugin` export, and the `host` and `state` imports. The decision logic is
in tool_limits.py, which imports nothing from the bindings and is unit-tested under CPython
(test/test_tool_limits.py).
"""

import json

from wit_world import exports
from componentize_py_types import Err
from wit_world.imports import host, state
from wit_world.imports.types import (
    CallRef,
    Info,
    Level,
    Rail,
    Rejection,
    Target_ToolCall,
    Verdict_Allow,
    Verdict_Block,
    Verdict_Reject,
)

import tool_limits

# Set by configure(); evaluate() before configure() refuses every governed call (there is no
# sensible default config: the plugin exists to enforce one).
_config = None


class Plugin(exports.Plugin):
    def describe(self) -> Info:
        return Info(
            name=tool_limits.NAME,
            version=tool_limits.VERSION,
            rails=[Rail.TOOL_CALL],
            config_schema=json.dumps(tool_limits.CONFIG_SCHEMA),
        )

    def configure(self, config: str) -> None:
        global _config
        try:
            _config = tool_limits.parse_config(config)
        except tool_limits.ConfigError as e:
            raise Err(str(e))

    def evaluate(self, request):
        # result<verdict, string>: an exception becomes the `err`, a fault whose message (what
        # and where, never the request's content) reaches the daemon's log and decision record.
        try:
            return self._evaluate(request)
        except Exception as e:
            raise Err(describe_error(e))

    def _evaluate(self, request):
        if _config is None:
            host.log(Level.ERROR, "evaluate called before configure")
            return Verdict_Block("tool-limits is not configured")
        outcome = tool_limits.evaluate(_config, request, counter)
        if outcome[0] == "allow":
            return Verdict_Allow()
        if outcome[0] == "block":
            return Verdict_Block(outcome[1])
        _, rejections, message_index = outcome
        return Verdict_Reject(
            [
                Rejection(target=Target_ToolCall(CallRef(message=message_index, call=ci)), message=text)
                for ci, text in rejections
            ]
        )


def counter(key: str, delta: int, limit: int, window_s: int):
    """A counter in the daemon's state store (contract 0.3's `state`): the new value, or None
    when the addition would pass `limit`. A store that cannot answer (or a plugin entry without
    `state = true`) raises: the call is a fault, and the entry's `on_error` decides."""
    try:
        return state.add(key, delta, limit, window_s)
    except Err as e:
        kind = type(e.value).__name__.rsplit("_", 1)[-1].lower()
        raise RuntimeError(f"the state store gave no answer ({kind}: {e.value.value})") from None


def describe_error(e: BaseException) -> str:
    """`Name: message (line N in function)`, from an exception and its innermost frame."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" (line {tb.tb_lineno} in {tb.tb_frame.f_code.co_name})" if tb is not None else ""
    return f"{type(e).__name__}: {e}{where}"
