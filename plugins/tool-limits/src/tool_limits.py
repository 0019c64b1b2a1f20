"""tool-limits: the decision logic, as plain Python over duck-typed request objects.

This module imports nothing from the component bindings, so it runs unchanged under CPython
(see test/test_tool_limits.py) and inside the component (app.py adds the WIT glue).

A request looks like the contract's `request` record: ``request.messages[-1].tool_calls`` is a
list of objects with ``id``, ``name`` and ``arguments`` (JSON text), and
``request.context.principal`` is the authenticated principal or None.
"""

import json
import re
from decimal import Decimal
from itertools import accumulate

NAME = "tool-limits"
VERSION = "0.1.0"

ACTIONS = ("reject", "block")
#: Key of a per-principal map that applies to every principal not listed in it.
ANY = "*"
#: Key of a per-principal map that applies to requests without a principal (else "*" does).
ANONYMOUS = "@anonymous"
#: The checks a rule can make, besides ``required``.
CHECKS = ("max", "min", "max_total", "in", "not_in", "pattern", "max_length")
#: Placeholders a custom rule message may use.
PLACEHOLDERS = ("tool", "argument", "principal", "limit")
#: At most this many problems are spelled out in a block reason.
MAX_REPORTED = 10

_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
_PATH = r"^[A-Za-z0-9_$@-]+(\[\*\]|\[[0-9]+\])*(\.([A-Za-z0-9_$@-]+|\*)(\[\*\]|\[[0-9]+\])*)*$"


def _per_principal(value_schema, description):
    return {
        "description": description
        + " Either one value for everyone, or an object mapping principals to values, where"
        " \"*\" applies to every principal not listed and \"@anonymous\" to requests without a"
        " principal (they fall back to \"*\"). A principal the object does not cover is denied.",
        "oneOf": [
            value_schema,
            {
                "type": "object",
                "minProperties": 1,
                "propertyNames": {"minLength": 1},
                "additionalProperties": value_schema,
            },
        ],
    }


_NUMBER = {"type": "number"}
_COUNT = {"type": "integer", "minimum": 0}
_SCALARS = {
    "type": "array",
    "items": {"type": ["string", "number", "boolean"]},
    "uniqueItems": True,
}
_REGEX = {"type": "string", "minLength": 1, "maxLength": 1000}

CONFIG_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "tool-limits plugin config",
    "type": "object",
    "additionalProperties": False,
    "required": ["tools"],
    "properties": {
        "action": {
            "description": "What a violation does unless the tool or rule says otherwise: reject"
            " (default) removes the offending tool call and leaves the others; block refuses the"
            " whole reply.",
            "enum": list(ACTIONS),
        },
        "tools": {
            "description": "Governed tools, by function name. Calls to other tools are not judged.",
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"minLength": 1, "maxLength": 128},
            "additionalProperties": {"$ref": "#/$defs/tool"},
        },
    },
    "$defs": {
        "tool": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "action": {
                    "description": "Overrides the top-level action for this tool's rules and for"
                    " malformed arguments.",
                    "enum": list(ACTIONS),
                },
                "max_calls": _per_principal(
                    _COUNT,
                    "Most calls of this tool in one reply (calls beyond it are violations; 0"
                    " forbids the tool).",
                ),
                "rules": {
                    "type": "array",
                    "maxItems": 256,
                    "items": {"$ref": "#/$defs/rule"},
                },
                "cumulative": {
                    "description": "Limits across requests and replicas, per principal and"
                    " window: counted in the daemon's state store (the plugin's entry needs"
                    " `state = true`).",
                    "type": "array",
                    "maxItems": 16,
                    "items": {"$ref": "#/$defs/cumulative"},
                },
            },
        },
        "cumulative": {
            "type": "object",
            "additionalProperties": False,
            "required": ["id", "window_s"],
            "properties": {
                "id": {
                    "description": "Name of the limit in reasons and in the store's keys.",
                    "type": "string",
                    "pattern": _ID,
                },
                "calls": _per_principal(
                    _COUNT, "Most calls of the tool per principal in one window."
                ),
                "argument": {
                    "description": "With total: the numeric argument summed (a top-level or"
                    " nested name, one value per call).",
                    "type": "string",
                    "pattern": _PATH,
                },
                "total": _per_principal(
                    _NUMBER,
                    "Largest sum of the argument over the tool's calls per principal in one"
                    " window (kept to a hundredth of the argument's unit).",
                ),
                "window_s": {
                    "description": "Length of the window in seconds; it starts at the first"
                    " counted call (a fixed window), at most 30 days.",
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 2592000,
                },
                "action": {"description": "Overrides the tool's action.", "enum": list(ACTIONS)},
            },
        },
        "rule": {
            "type": "object",
            "additionalProperties": False,
            "required": ["argument"],
            "properties": {
                "id": {
                    "description": "Name of the rule in reasons (default: <tool>.<argument>).",
                    "type": "string",
                    "pattern": _ID,
                },
                "argument": {
                    "description": "Path of the argument: a top-level name (amount), nested"
                    " fields (payee.account), array elements (items[*].qty, items[0]) or any"
                    " field (limits.*). Every value the path reaches is checked.",
                    "type": "string",
                    "pattern": _PATH,
                },
                "required": {
                    "description": "The argument must be present (and not null).",
                    "type": "boolean",
                },
                "max": _per_principal(_NUMBER, "Largest allowed number."),
                "min": _per_principal(_NUMBER, "Smallest allowed number."),
                "max_total": _per_principal(
                    _NUMBER,
                    "Largest allowed sum of this argument over all calls of the tool in one"
                    " reply (against splitting one large call into many small ones).",
                ),
                "in": _per_principal(_SCALARS, "Allowed values (exact match)."),
                "not_in": _per_principal(_SCALARS, "Forbidden values (exact match)."),
                "pattern": _per_principal(
                    _REGEX,
                    "Python regular expression the whole string value must match.",
                ),
                "max_length": _per_principal(
                    _COUNT, "Longest allowed string (characters) or array (items)."
                ),
                "action": {"description": "Overrides the tool's action.", "enum": list(ACTIONS)},
                "message": {
                    "description": "Custom text for a violation of this rule, shown in place of"
                    " the call. Placeholders: {tool}, {argument}, {principal}, {limit}.",
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 500,
                },
            },
        },
    },
}


class ConfigError(Exception):
    """A config problem, reported by configure() as ``err(message)``."""


# ----------------------------------------------------------------------------------------------
# JSON parsing that is exact and strict
# ----------------------------------------------------------------------------------------------


class _Malformed(ValueError):
    pass


def tool_names(name):
    """The names a call goes by, for a rule that restricts it (the Rust SDK's `tool_names`): its
    name as called, and the tool's own inside it, after a provider's MCP server
    (`mcp__<server>__<tool>`) and after a namespace (`<namespace>.<tool>`)."""
    own = name
    if own.startswith("mcp__"):
        rest = own[len("mcp__"):]
        if "__" in rest:
            own = rest.split("__", 1)[1].lstrip("_")
    if "." in own:
        own = own.rsplit(".", 1)[1]
    return [name] if own in ("", name) else [name, own]


def _limited(tools, name):
    """The limits of the tool `name` calls: by its name, then by the tool's own inside it (a
    namespace's or an MCP server's `refund` is limited as `refund` is)."""
    for n in tool_names(name):
        if n in tools:
            return tools[n]
    # Spelled in another case: a client's `REFUND` moves money as `refund` does.
    lowered = {k.lower(): v for k, v in tools.items()}
    for n in tool_names(name):
        if n.lower() in lowered:
            return lowered[n.lower()]
    return None


def _no_duplicates(pairs):
    obj = dict(pairs)
    if len(obj) != len(pairs):
        # Parsers disagree on which duplicate wins: never let one through.
        raise _Malformed("a key appears twice")
    return obj


#: Deepest nesting accepted. The parser recurses per level, and the component's stack runs out
#: somewhere above 1000 levels (a trap, not an exception), so deeper input is refused up front.
MAX_DEPTH = 256
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1
_OPEN_RUN = re.compile(rb"[\[{]{%d}" % (MAX_DEPTH + 1))


def _too_deep(text):
    """Whether the JSON text nests deeper than MAX_DEPTH (brackets inside strings aside).
    Done with C-level string operations only: a Python loop over the text would cost more than
    the parse."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    unescaped = text.replace("\\\\", "").replace('\\"', "")
    outside_strings = "".join(unescaped.split('"')[::2])
    brackets = outside_strings.encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKETS)
    if _OPEN_RUN.search(brackets):
        return True
    # Each pass removes the innermost pairs, which lowers the depth of balanced input by one:
    # wide but shallow input (big arrays of small objects) is done in a few passes. Deeper (or
    # mismatched) input is measured in one linear pass over what is left.
    for passes in range(8):
        if not brackets:
            return False
        shorter = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if shorter == brackets:
            break
        brackets = shorter
    return passes + max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > MAX_DEPTH


def _no_constants(name):
    raise _Malformed(f"{name} is not JSON")


def parse_json(text):
    """Parses JSON with exact decimals, no NaN/Infinity, no duplicate keys and at most
    MAX_DEPTH levels of nesting."""
    if _too_deep(text):
        raise _Malformed(f"nested deeper than {MAX_DEPTH} levels")
    return json.loads(
        text,
        parse_float=Decimal,
        parse_int=int,
        parse_constant=_no_constants,
        object_pairs_hook=_no_duplicates,
    )


def _is_number(v):
    return isinstance(v, (int, Decimal)) and not isinstance(v, bool)


def _same(a, b):
    """JSON equality that keeps types apart (1 is not "1", true is not 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return Decimal(a) == Decimal(b)
    return type(a) is type(b) and a == b


def _fmt(v):
    """A config value for a message."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Decimal):
        return format(v.normalize(), "f") if v == v.to_integral_value() else str(v)
    return str(v)


# ----------------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------------


class PerPrincipal:
    """A value that may differ per principal."""

    def __init__(self, raw, where, convert):
        if isinstance(raw, dict):
            if not raw:
                raise ConfigError(f"{where}: a per-principal object needs at least one entry")
            self.by = {}
            for key, value in raw.items():
                if not isinstance(key, str) or not key:
                    raise ConfigError(f"{where}: principal names must be non-empty strings")
                self.by[key] = convert(value, f"{where}.{key}")
            self.single = None
        else:
            self.by = None
            self.single = convert(raw, where)

    def lookup(self, principal):
        """(value, found): the value for this principal, or (None, False) when not covered."""
        if self.by is None:
            return self.single, True
        if principal is None:
            for key in (ANONYMOUS, ANY):
                if key in self.by:
                    return self.by[key], True
            return None, False
        if principal in self.by:
            return self.by[principal], True
        if ANY in self.by:
            return self.by[ANY], True
        return None, False

    def is_default(self, principal):
        """Whether the principal gets the "*" entry rather than its own."""
        return self.by is not None and (
            (principal is None and ANONYMOUS not in self.by)
            or (principal is not None and principal not in self.by)
        )


def _number(value, where):
    if not _is_number(value):
        raise ConfigError(f"{where} must be a number, not {_json_type(value)}")
    return Decimal(value)


def _count(value, where):
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{where} must be a non-negative integer")
    return value


def _scalars(value, where):
    if not isinstance(value, list):
        raise ConfigError(f"{where} must be an array of strings, numbers or booleans")
    for i, item in enumerate(value):
        if not (isinstance(item, (str, bool)) or _is_number(item)):
            raise ConfigError(f"{where}[{i}] must be a string, number or boolean")
    return list(value)


def _regex(value, where):
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where} must be a non-empty string")
    try:
        return re.compile(value)
    except re.error as e:
        raise ConfigError(f"{where} is not a valid regular expression: {e}") from None


def _json_type(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if _is_number(v):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, list):
        return "an array"
    return "an object"


def _check_keys(obj, allowed, where):
    for key in obj:
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key '{key}' (allowed: {', '.join(allowed)})")


def _action(value, where):
    if value not in ACTIONS:
        raise ConfigError(f"{where} must be one of {', '.join(ACTIONS)}")
    return value


def parse_path(path, where):
    """'items[*].qty' -> ['items', '*', 'qty'] ('*' = every element or field, ints = index)."""
    if not isinstance(path, str) or not re.match(_PATH, path):
        raise ConfigError(
            f"{where} is not an argument path (name, a.b, items[*].qty, items[0], a.*)"
        )
    steps = []
    for part in path.split("."):
        m = re.match(r"^([^\[]+)((?:\[[^\]]+\])*)$", part)
        steps.append(m.group(1))
        for idx in re.findall(r"\[([^\]]+)\]", m.group(2)):
            steps.append("*" if idx == "*" else int(idx))
    return steps


class Rule:
    def __init__(self, tool, raw, index, tool_action):
        where = f"tools.{tool}.rules[{index}]"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} must be an object")
        _check_keys(raw, ("id", "argument", "required", "action", "message") + CHECKS, where)
        if "argument" not in raw:
            raise ConfigError(f"{where} needs an 'argument'")
        self.tool = tool
        self.argument = raw["argument"]
        self.path = parse_path(self.argument, f"{where}.argument")
        if "id" in raw and (not isinstance(raw["id"], str) or not re.match(_ID, raw["id"])):
            raise ConfigError(f"{where}.id must match {_ID}")
        self.id = raw.get("id", f"{tool}.{self.argument}")
        self.required = raw.get("required", False)
        if not isinstance(self.required, bool):
            raise ConfigError(f"{where}.required must be a boolean")
        self.action = _action(raw["action"], f"{where}.action") if "action" in raw else tool_action
        self.message = raw.get("message")
        if self.message is not None:
            if not isinstance(self.message, str) or not self.message:
                raise ConfigError(f"{where}.message must be a non-empty string")
            for name in re.findall(r"\{([^{}]*)\}", self.message):
                if name not in PLACEHOLDERS:
                    raise ConfigError(
                        f"{where}.message uses {{{name}}}; the placeholders are "
                        + ", ".join("{" + p + "}" for p in PLACEHOLDERS)
                    )
        convert = {
            "max": _number,
            "min": _number,
            "max_total": _number,
            "in": _scalars,
            "not_in": _scalars,
            "pattern": _regex,
            "max_length": _count,
        }
        self.checks = {
            name: PerPrincipal(raw[name], f"{where}.{name}", convert[name])
            for name in CHECKS
            if name in raw
        }
        if not self.checks and not self.required:
            raise ConfigError(
                f"{where} ('{self.id}') checks nothing: give required or one of {', '.join(CHECKS)}"
            )
        if "max_total" in self.checks and any(s == "*" for s in self.path):
            raise ConfigError(f"{where}: max_total needs a path to a single value, not '{self.argument}'")


#: Sums are kept in hundredths of the argument's unit (the store counts integers).
SCALE = 100
#: Longest window, in seconds (what the store keeps at most).
MAX_WINDOW_S = 30 * 24 * 3600


class Cumulative:
    """A limit across requests: calls of a tool, or the sum of an argument, per principal and
    window, counted in the daemon's state store."""

    def __init__(self, tool, raw, index, tool_action):
        where = f"tools.{tool}.cumulative[{index}]"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} must be an object")
        _check_keys(raw, ("id", "calls", "argument", "total", "window_s", "action"), where)
        if not isinstance(raw.get("id"), str) or not re.match(_ID, raw["id"]):
            raise ConfigError(f"{where}.id must match {_ID}")
        self.tool = tool
        self.id = raw["id"]
        window = raw.get("window_s")
        if not isinstance(window, int) or isinstance(window, bool) or not 1 <= window <= MAX_WINDOW_S:
            raise ConfigError(f"{where}.window_s must be a whole number of seconds from 1 to {MAX_WINDOW_S}")
        self.window_s = window
        self.action = _action(raw["action"], f"{where}.action") if "action" in raw else tool_action
        self.calls = PerPrincipal(raw["calls"], f"{where}.calls", _count) if "calls" in raw else None
        self.total = PerPrincipal(raw["total"], f"{where}.total", _number) if "total" in raw else None
        if (self.calls is None) == (self.total is None):
            raise ConfigError(f"{where} ('{self.id}') needs one of calls or total")
        if self.total is not None:
            if "argument" not in raw:
                raise ConfigError(f"{where} ('{self.id}'): total needs the argument it sums")
            self.argument = raw["argument"]
            self.path = parse_path(self.argument, f"{where}.argument")
            if any(step == "*" for step in self.path):
                raise ConfigError(f"{where}: total needs a path to a single value, not '{self.argument}'")
        elif "argument" in raw:
            raise ConfigError(f"{where} ('{self.id}'): argument goes with total, not calls")

    def amount(self, args):
        """What one call counts: 1, or its argument in hundredths (rounded up); None when the
        argument is missing or not a number."""
        if self.calls is not None:
            return 1
        values = _values(args, self.path)
        if len(values) != 1 or not _is_number(values[0]):
            return None
        return int((Decimal(values[0]) * SCALE).to_integral_value(rounding="ROUND_CEILING"))

    def limit(self, principal):
        """(limit in counted units, label) for the principal, or (None, None) when not covered."""
        per = self.calls if self.calls is not None else self.total
        value, found = per.lookup(principal)
        if not found:
            return None, None
        default = ", the default" if per.is_default(principal) else ""
        if self.calls is not None:
            return value, f"({value}{default})"
        return int((value * SCALE).to_integral_value(rounding="ROUND_FLOOR")), f"({_fmt(value)}{default})"


class Tool:
    def __init__(self, name, raw, default_action):
        where = f"tools.{name}"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} must be an object")
        _check_keys(raw, ("action", "max_calls", "rules", "cumulative"), where)
        self.name = name
        self.action = _action(raw["action"], f"{where}.action") if "action" in raw else default_action
        self.max_calls = (
            PerPrincipal(raw["max_calls"], f"{where}.max_calls", _count) if "max_calls" in raw else None
        )
        rules = raw.get("rules", [])
        if not isinstance(rules, list):
            raise ConfigError(f"{where}.rules must be an array")
        self.rules = [Rule(name, r, i, self.action) for i, r in enumerate(rules)]
        cumulative = raw.get("cumulative", [])
        if not isinstance(cumulative, list):
            raise ConfigError(f"{where}.cumulative must be an array")
        self.cumulative = [Cumulative(name, c, i, self.action) for i, c in enumerate(cumulative)]
        if not self.rules and self.max_calls is None and not self.cumulative:
            raise ConfigError(f"{where} has neither rules, max_calls nor cumulative limits")
        seen = set()
        for r in self.rules + self.cumulative:
            if r.id in seen:
                raise ConfigError(f"{where}: rule id '{r.id}' is used twice; give the rules distinct ids")
            seen.add(r.id)


class Config:
    def __init__(self, raw):
        if not isinstance(raw, dict):
            raise ConfigError(f"the config must be an object, not {_json_type(raw)}")
        _check_keys(raw, ("action", "tools"), "config")
        self.action = _action(raw.get("action", "reject"), "action")
        tools = raw.get("tools")
        if not isinstance(tools, dict) or not tools:
            raise ConfigError("config needs 'tools': an object of governed tools by name")
        self.tools = {name: Tool(name, spec, self.action) for name, spec in tools.items()}


def parse_config(text):
    """Parses and checks the config JSON text; raises ConfigError with a clear message."""
    try:
        raw = parse_json(text) if text.strip() else {}
    except (ValueError, _Malformed) as e:
        raise ConfigError(f"invalid tool-limits config: not JSON ({e})") from None
    try:
        return Config(raw)
    except ConfigError as e:
        raise ConfigError(f"invalid tool-limits config: {e}") from None


# ----------------------------------------------------------------------------------------------
# Evaluation
# ----------------------------------------------------------------------------------------------


def _who(principal):
    return f"principal '{_quote(principal)}'" if principal is not None else "requests without a principal"


def _quote(text, limit=80):
    out = []
    for i, ch in enumerate(text):
        if i == limit:
            out.append("…")
            break
        out.append(ch.encode("unicode_escape").decode("ascii") if (ch.isprintable() is False or ch in "'\\") else ch)
    return "".join(out)


def _values(args, path):
    """(present values, missing) for a path: every value it reaches; missing when it reaches none."""
    current = [args]
    for step in path:
        nxt = []
        for v in current:
            if step == "*":
                if isinstance(v, list):
                    nxt.extend(v)
                elif isinstance(v, dict):
                    nxt.extend(v.values())
            elif isinstance(step, int):
                if isinstance(v, list) and 0 <= step < len(v):
                    nxt.append(v[step])
            elif isinstance(v, dict) and step in v:
                nxt.append(v[step])
        current = nxt
    present = [v for v in current if v is not None]
    return present


class Violation:
    def __init__(self, action, text):
        self.action = action
        self.text = text


def _message(rule, principal, default_text, limit=None):
    if rule.message is None:
        return default_text
    values = {
        "tool": rule.tool,
        "argument": rule.argument,
        "principal": principal if principal is not None else "(none)",
        "limit": _fmt(limit) if limit is not None and not isinstance(limit, (list, re.Pattern)) else "",
    }
    return re.sub(r"\{(tool|argument|principal|limit)\}", lambda m: values[m.group(1)], rule.message)


def _limit_of(rule, name, principal):
    """(limit, problem): the principal's value of check `name`, or a violation text when the
    principal is not covered."""
    value, found = rule.checks[name].lookup(principal)
    if not found:
        return None, (
            f"{rule.tool} {rule.argument}: no '{name}' limit is configured for {_who(principal)},"
            " so the call is not allowed"
        )
    return value, None


def _limit_label(rule, name, principal, value):
    suffix = ", the default" if rule.checks[name].is_default(principal) else ""
    return f"({_fmt(value)}{suffix})"


def check_rule(rule, args, principal):
    """Violation texts of one rule for one call's parsed arguments (max_total aside)."""
    out = []
    values = _values(args, rule.path)
    if not values:
        if rule.required:
            out.append(_message(rule, principal, f"{rule.tool} requires the argument {rule.argument}"))
        return out
    if "max_total" in rule.checks:
        for v in values:
            if not _is_number(v):
                out.append(_message(rule, principal, f"{rule.tool} {rule.argument} must be a number, not {_json_type(v)}"))
                break
    for name in ("max", "min", "in", "not_in", "pattern", "max_length"):
        if name not in rule.checks:
            continue
        limit, problem = _limit_of(rule, name, principal)
        if problem:
            out.append(_message(rule, principal, problem))
            continue
        for v in values:
            text = _violates(rule, name, limit, v, principal)
            if text:
                out.append(_message(rule, principal, text, limit))
                break
    return out


def _violates(rule, name, limit, v, principal):
    what = f"{rule.tool} {rule.argument}"
    if name in ("max", "min"):
        if not _is_number(v):
            return f"{what} must be a number, not {_json_type(v)}"
        if name == "max" and Decimal(v) > limit:
            return f"{what} exceeds the limit for {_who(principal)} {_limit_label(rule, name, principal, limit)}"
        if name == "min" and Decimal(v) < limit:
            return f"{what} is below the minimum for {_who(principal)} {_limit_label(rule, name, principal, limit)}"
        return None
    if name == "in":
        if not any(_same(v, ok) for ok in limit):
            return f"{what} is not an allowed value for {_who(principal)}"
        return None
    if name == "not_in":
        if any(_same(v, bad) for bad in limit):
            return f"{what} is a forbidden value for {_who(principal)}"
        return None
    if name == "pattern":
        if not isinstance(v, str):
            return f"{what} must be a string, not {_json_type(v)}"
        if limit.fullmatch(v) is None:
            return f"{what} does not have the allowed format for {_who(principal)}"
        return None
    if name == "max_length":
        if not isinstance(v, (str, list)):
            return f"{what} must be a string or an array, not {_json_type(v)}"
        if len(v) > limit:
            unit = "characters" if isinstance(v, str) else "items"
            return (
                f"{what} is longer than allowed for {_who(principal)}"
                f" ({_fmt(limit)} {unit}{', the default' if rule.checks[name].is_default(principal) else ''})"
            )
        return None
    raise AssertionError(name)


def evaluate(cfg, request, counter=None):
    """Judges the tool calls of the last message. Returns one of:
    ("allow",), ("reject", [(call_index, message)], message_index), ("block", reason).

    ``counter(key, delta, limit, window_s)`` adds to a counter in the daemon's state store unless
    it would pass ``limit``: the new value, or None. It raises when the store cannot answer (a
    fault: the entry's ``on_error`` decides). Without it, a cumulative limit is never met."""
    messages = request.messages
    if not messages:
        return ("allow",)
    last_index = len(messages) - 1
    calls = messages[last_index].tool_calls
    if not calls:
        return ("allow",)
    principal = request.context.principal

    violations = {}  # call index -> [Violation]
    accepted_counts = {}  # tool -> calls accepted so far
    totals = {}  # (tool, rule id) -> sum of accepted calls

    for ci, call in enumerate(calls):
        tool = _limited(cfg.tools, call.name)
        if tool is None:
            continue
        found = []
        try:
            args = parse_json(call.arguments)
        except (ValueError, _Malformed, RecursionError) as e:
            detail = str(e) if isinstance(e, _Malformed) else "not valid JSON"
            found.append(Violation(tool.action, f"{tool.name} arguments are malformed ({detail})"))
            args = None
        if args is not None and not isinstance(args, dict):
            found.append(Violation(tool.action, f"{tool.name} arguments must be a JSON object, not {_json_type(args)}"))
            args = None
        if args is not None:
            for rule in tool.rules:
                found.extend(Violation(rule.action, t) for t in check_rule(rule, args, principal))
        if not found:
            found.extend(_aggregate(tool, args, principal, accepted_counts, totals))
        if not found and tool.cumulative:
            found.extend(_cumulative(tool, args, principal, counter))
        if found:
            violations[ci] = found

    if not violations:
        return ("allow",)
    ids = {ci: calls[ci].id for ci in violations}

    def label(ci):
        return f"call '{_quote(ids[ci])}'" if ids[ci] else f"call #{ci}"

    blocking = [(ci, v) for ci, vs in violations.items() for v in vs if v.action == "block"]
    if blocking:
        texts = [f"{label(ci)}: {v.text}" for ci, v in blocking[:MAX_REPORTED]]
        if len(blocking) > MAX_REPORTED:
            texts.append(f"and {len(blocking) - MAX_REPORTED} more")
        return ("block", "; ".join(texts))
    rejections = []
    for ci, vs in sorted(violations.items()):
        seen = []
        for v in vs:
            if v.text not in seen:
                seen.append(v.text)
        rejections.append((ci, "; ".join(seen)))
    return ("reject", rejections, last_index)


def _aggregate(tool, args, principal, accepted_counts, totals):
    """Per-reply limits (max_calls, max_total) for a call that passed its own checks; counts it
    when it passes these too."""
    found = []
    count = accepted_counts.get(tool.name, 0)
    if tool.max_calls is not None:
        limit, ok = tool.max_calls.lookup(principal)
        if not ok:
            found.append(
                Violation(
                    tool.action,
                    f"{tool.name}: no 'max_calls' limit is configured for {_who(principal)}, so the call is not allowed",
                )
            )
        elif count + 1 > limit:
            default = ", the default" if tool.max_calls.is_default(principal) else ""
            found.append(
                Violation(
                    tool.action,
                    f"{tool.name} may be called at most {limit} time{'s' if limit != 1 else ''} per reply"
                    f" by {_who(principal)} ({limit}{default})",
                )
            )
    pending = []
    for rule in tool.rules:
        if "max_total" not in rule.checks:
            continue
        values = [v for v in _values(args, rule.path) if _is_number(v)]
        if not values:
            continue
        limit, problem = _limit_of(rule, "max_total", principal)
        if problem:
            found.append(Violation(rule.action, _message(rule, principal, problem)))
            continue
        key = (tool.name, rule.id)
        new_total = totals.get(key, Decimal(0)) + sum(Decimal(v) for v in values)
        if new_total > limit:
            text = (
                f"{rule.tool} {rule.argument} over all {rule.tool} calls in this reply exceeds the"
                f" total allowed for {_who(principal)} {_limit_label(rule, 'max_total', principal, limit)}"
            )
            found.append(Violation(rule.action, _message(rule, principal, text, limit)))
        else:
            pending.append((key, new_total))
    if not found:
        accepted_counts[tool.name] = count + 1
        for key, total in pending:
            totals[key] = total
    return found


def _cumulative(tool, args, principal, counter):
    """Limits across requests for a call that passed everything else: each adds the call to its
    counter, unless that would pass the principal's limit. A call refused by one limit is taken
    back from those it was already added to."""
    found = []
    added = []
    who = principal if principal is not None else ANONYMOUS
    for limit in tool.cumulative:
        amount = limit.amount(args)
        if amount is None:
            found.append(Violation(limit.action, f"{tool.name} {limit.argument} must be a number for the limit '{limit.id}'"))
            break
        most, label = limit.limit(principal)
        if most is None:
            found.append(Violation(limit.action, f"{tool.name}: no limit '{limit.id}' is configured for {_who(principal)}, so the call is not allowed"))
            break
        if counter is None:
            found.append(Violation(limit.action, f"{tool.name}: the limit '{limit.id}' needs the daemon's state (the plugin's entry needs state = true)"))
            break
        key = f"{limit.id}:{who}"
        if counter(key, amount, most, limit.window_s) is None:
            what = "calls of" if limit.calls is not None else f"{limit.argument} over the calls of"
            found.append(Violation(
                limit.action,
                f"{tool.name}: the {what} {tool.name} by {_who(principal)} would pass the limit"
                f" '{limit.id}' for {limit.window_s} s {label}",
            ))
            break
        added.append((key, amount, limit.window_s))
    if found:
        for key, amount, window in added:
            counter(key, -amount, 2 ** 53, window)
    return found
