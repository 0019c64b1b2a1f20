"""Unit tests for the decision logic (src/tool_limits.py), run natively:
python3 -m unittest discover -s plugins/tool-limits/test
"""

import json
import os
import sys
import unittest
from types import SimpleNamespace as NS

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import tool_limits as tl  # noqa: E402

CONFIG = {
    "tools": {
        "refund": {
            "max_calls": {"alice": 3, "*": 1},
            "rules": [
                {"argument": "order_id", "required": True},
                {"argument": "amount", "required": True, "max": {"alice": 500, "bob": 100, "*": 50, "@anonymous": 0}, "min": 0.01},
                {"id": "refund-total", "argument": "amount", "max_total": {"alice": 800, "*": 100}},
            ],
        },
        "transfer": {
            "action": "block",
            "rules": [
                {"argument": "to_account", "required": True, "in": {"alice": ["DE01", "DE02"], "bob": ["DE03"]}},
                {"argument": "currency", "in": ["EUR", "USD"], "action": "reject"},
            ],
        },
        "send_email": {
            "rules": [
                {"argument": "to[*]", "pattern": r"[^@\s]+@example\.com", "message": "{tool} may only write to example.com addresses"},
                {"argument": "to", "max_length": {"alice": 3, "*": 1}},
            ]
        },
    }
}


def cfg(raw=None):
    return tl.parse_config(json.dumps(raw if raw is not None else CONFIG))


def call(name, args, cid=None):
    return NS(id=cid or f"call_{name}", name=name, arguments=args if isinstance(args, str) else json.dumps(args))


def req(calls, principal=None, history=()):
    msgs = list(history) + [NS(role="assistant", tool_calls=calls)]
    return NS(messages=msgs, context=NS(principal=principal))


class Counter:
    """The daemon's state store as the plugin sees it: add-unless-over-limit counters."""

    def __init__(self, fail=False):
        self.values = {}
        self.fail = fail

    def __call__(self, key, delta, limit, window_s):
        if self.fail:
            raise RuntimeError("the state store gave no answer (unavailable: down)")
        new = self.values.get(key, 0) + delta
        if new > limit:
            return None
        self.values[key] = new
        return new


CUMULATIVE = {"tools": {"refund": {"cumulative": [
    {"id": "refunds-per-day", "calls": {"alice": 2, "*": 1}, "window_s": 86400},
    {"id": "refunded-per-day", "argument": "amount", "total": 100.5, "window_s": 86400},
]}}}


class Cumulative(unittest.TestCase):
    def refund(self, c, counter, amount, principal="alice"):
        return tl.evaluate(c, req([call("refund", {"amount": amount})], principal), counter)

    def test_calls_and_totals_across_requests(self):
        c, counter = cfg(CUMULATIVE), Counter()
        self.assertEqual(self.refund(c, counter, 60), ("allow",))
        # The second call fits the count (2) but not the total (60 + 50 > 100.5): refused, and
        # taken back from the count.
        out = self.refund(c, counter, 50)
        self.assertEqual(out[0], "reject")
        self.assertIn("would pass the limit 'refunded-per-day' for 86400 s (100.5)", out[1][0][1])
        self.assertEqual(counter.values["refunds-per-day:alice"], 1)
        self.assertEqual(self.refund(c, counter, 40.5), ("allow",))
        self.assertEqual(counter.values["refunded-per-day:alice"], 10050)
        out = self.refund(c, counter, 0)
        self.assertIn("would pass the limit 'refunds-per-day' for 86400 s (2)", out[1][0][1])
        # Another principal has its own counters, and the default limit.
        self.assertEqual(self.refund(c, counter, 1, "bob"), ("allow",))
        out = self.refund(c, counter, 1, "bob")
        self.assertIn("(1, the default)", out[1][0][1])
        # Hundredths round up: 0.001 counts as 0.01.
        self.assertEqual(self.refund(c, counter, 0.001, "carol"), ("allow",))
        self.assertEqual(counter.values["refunded-per-day:carol"], 1)

    def test_without_the_store_no_call_passes(self):
        c = cfg(CUMULATIVE)
        out = self.refund(c, None, 1)
        self.assertIn("needs the daemon's state", out[1][0][1])
        with self.assertRaises(RuntimeError):
            self.refund(c, Counter(fail=True), 1)
        out = self.refund(c, Counter(), "20")
        self.assertIn("amount must be a number for the limit 'refunded-per-day'", out[1][0][1])

    def test_config_errors(self):
        for raw, fragment in [
            ({"id": "x", "window_s": 60}, "needs one of calls or total"),
            ({"id": "x", "calls": 1, "total": 1, "window_s": 60}, "needs one of calls or total"),
            ({"id": "x", "total": 1, "window_s": 60}, "total needs the argument"),
            ({"id": "x", "calls": 1, "argument": "a", "window_s": 60}, "argument goes with total"),
            ({"id": "x", "calls": 1, "window_s": 0}, "window_s must be"),
            ({"id": "x", "calls": 1, "window_s": 2592001}, "window_s must be"),
            ({"id": "x y", "calls": 1, "window_s": 60}, ".id must match"),
        ]:
            with self.assertRaises(tl.ConfigError) as ctx:
                tl.parse_config(json.dumps({"tools": {"t": {"cumulative": [raw]}}}))
            self.assertIn(fragment, str(ctx.exception))


class Limits(unittest.TestCase):
    def test_under_and_over_limit_per_principal(self):
        c = cfg()
        self.assertEqual(tl.evaluate(c, req([call("refund", {"order_id": "A", "amount": 500})], "alice")), ("allow",))
        out = tl.evaluate(c, req([call("refund", {"order_id": "A", "amount": 500.01})], "alice"))
        self.assertEqual(out, ("reject", [(0, "refund amount exceeds the limit for principal 'alice' (500)")], 0))
        out = tl.evaluate(c, req([call("refund", {"order_id": "A", "amount": 101})], "bob"))
        self.assertEqual(out[1][0][1], "refund amount exceeds the limit for principal 'bob' (100)")

    def test_a_tool_is_limited_by_its_own_name_however_it_is_called(self):
        # A namespace's, an MCP server's or another case's `refund` moves money as `refund`
        # does (#65): limited the same.
        c = cfg()
        for name in ["ns.refund", "mcp__billing__refund", "REFUND", "Ns.Refund"]:
            out = tl.evaluate(c, req([call(name, {"order_id": "A", "amount": 501})], "alice"))
            self.assertEqual(out[0], "reject", name)
        self.assertEqual(tl.tool_names("mcp__billing__refund"), ["mcp__billing__refund", "refund"])
        self.assertEqual(tl.tool_names("refund"), ["refund"])
        self.assertEqual(tl.evaluate(c, req([call("refunds", {"amount": 9999})], "alice")), ("allow",))

    def test_default_and_anonymous(self):
        c = cfg()
        out = tl.evaluate(c, req([call("refund", {"order_id": "A", "amount": 60})], "carol"))
        self.assertEqual(out[1][0][1], "refund amount exceeds the limit for principal 'carol' (50, the default)")
        out = tl.evaluate(c, req([call("refund", {"order_id": "A", "amount": 1})], None))
        self.assertEqual(out[1][0][1], "refund amount exceeds the limit for requests without a principal (0)")

    def test_precision_is_exact(self):
        c = cfg()
        out = tl.evaluate(c, req([call("refund", '{"order_id": "A", "amount": 500.000000000000000001}')], "alice"))
        self.assertEqual(out[0], "reject")

    def test_not_a_number(self):
        out = tl.evaluate(cfg(), req([call("refund", {"order_id": "A", "amount": "20"})], "alice"))
        self.assertEqual(out[1][0][1], "refund amount must be a number, not a string")

    def test_required(self):
        out = tl.evaluate(cfg(), req([call("refund", {"amount": 5})], "alice"))
        self.assertEqual(out[1][0][1], "refund requires the argument order_id")

    def test_allowlist_and_uncovered_principal(self):
        c = cfg()
        self.assertEqual(tl.evaluate(c, req([call("transfer", {"to_account": "DE02", "currency": "EUR"})], "alice")), ("allow",))
        out = tl.evaluate(c, req([call("transfer", {"to_account": "DE03", "currency": "EUR"})], "alice"))
        self.assertEqual(out, ("block", "call 'call_transfer': transfer to_account is not an allowed value for principal 'alice'"))
        out = tl.evaluate(c, req([call("transfer", {"to_account": "DE03"})], "carol"))
        self.assertIn("no 'in' limit is configured for principal 'carol', so the call is not allowed", out[1])

    def test_rule_action_overrides_tool(self):
        out = tl.evaluate(cfg(), req([call("transfer", {"to_account": "DE01", "currency": "GBP"})], "alice"))
        self.assertEqual(out[0], "reject")

    def test_malformed_arguments(self):
        c = cfg()
        for bad, why in [
            ('{"order_id": "A", "amount": ', "not valid JSON"),
            ('{"order_id": "A", "amount": NaN}', "NaN is not JSON"),
            ('{"order_id": "A", "amount": 1, "amount": 9999}', "a key appears twice"),
            ("[1]", "must be a JSON object"),
            ("[" * 100000, "nested deeper than 256 levels"),
            ("[" * 300 + "]" * 300, "nested deeper than 256 levels"),
        ]:
            out = tl.evaluate(c, req([call("refund", bad)], "alice"))
            self.assertEqual(out[0], "reject", bad[:40])
            self.assertIn(why, out[1][0][1])

    def test_ungoverned_tools_and_history(self):
        c = cfg()
        history = [NS(role="assistant", tool_calls=[call("refund", {"order_id": "A", "amount": 99999})])]
        self.assertEqual(tl.evaluate(c, req([call("get_weather", "not json")], "alice", history)), ("allow",))
        self.assertEqual(tl.evaluate(c, req([], "alice")), ("allow",))

    def test_parallel_only_offender_rejected(self):
        calls = [
            call("refund", {"order_id": "A", "amount": 20}, "c1"),
            call("refund", {"order_id": "B", "amount": 900}, "c2"),
            call("get_weather", {"city": "Paris"}, "c3"),
        ]
        out = tl.evaluate(cfg(), req(calls, "alice"))
        self.assertEqual(out, ("reject", [(1, "refund amount exceeds the limit for principal 'alice' (500)")], 0))

    def test_max_calls_and_max_total(self):
        c = cfg()
        calls = [call("refund", {"order_id": str(i), "amount": 300}, f"c{i}") for i in range(4)]
        out = tl.evaluate(c, req(calls, "alice"))
        # 300 + 300 = 600 <= 800; the third would make 900; the fourth too.
        self.assertEqual([ci for ci, _ in out[1]], [2, 3])
        self.assertIn("over all refund calls in this reply exceeds the total allowed for principal 'alice' (800)", out[1][0][1])
        calls = [call("refund", {"order_id": str(i), "amount": 10}, f"c{i}") for i in range(2)]
        out = tl.evaluate(c, req(calls, "bob"))
        self.assertEqual(out[1], [(1, "refund may be called at most 1 time per reply by principal 'bob' (1, the default)")])

    def test_paths_patterns_and_custom_message(self):
        c = cfg()
        ok = call("send_email", {"to": ["a@example.com"], "body": "hi"})
        self.assertEqual(tl.evaluate(c, req([ok], "bob")), ("allow",))
        bad = call("send_email", {"to": ["a@example.com", "x@evil.com"]})
        out = tl.evaluate(c, req([bad], "alice"))
        self.assertEqual(out[1][0][1], "send_email may only write to example.com addresses")
        many = call("send_email", {"to": ["a@example.com", "b@example.com"]})
        out = tl.evaluate(c, req([many], "bob"))
        self.assertEqual(out[1][0][1], "send_email to is longer than allowed for principal 'bob' (1 items, the default)")

    def test_reasons_do_not_quote_argument_values(self):
        out = tl.evaluate(cfg(), req([call("transfer", {"to_account": "SECRET-IBAN-123"})], "alice"))
        self.assertNotIn("SECRET-IBAN-123", out[1])


class ConfigErrors(unittest.TestCase):
    def bad(self, raw, fragment):
        with self.assertRaises(tl.ConfigError) as ctx:
            tl.parse_config(raw if isinstance(raw, str) else json.dumps(raw))
        self.assertIn(fragment, str(ctx.exception))
        self.assertTrue(str(ctx.exception).startswith("invalid tool-limits config: "))

    def test_errors(self):
        self.bad("{", "not JSON")
        self.bad({}, "needs 'tools'")
        self.bad({"tools": {"x": {"rules": [{"argument": "a", "pattern": "("}]}}}, "tools.x.rules[0].pattern is not a valid regular expression")
        self.bad({"tools": {"x": {"rules": [{"argument": "a", "max": "ten"}]}}}, "tools.x.rules[0].max must be a number")
        self.bad({"tools": {"x": {"rules": [{"argument": "a"}]}}}, "checks nothing")
        self.bad({"tools": {"x": {"rules": [{"argument": "a b", "required": True}]}}}, "is not an argument path")
        self.bad({"tools": {"x": {"rules": [{"argument": "a", "required": True, "message": "{amount}"}]}}}, "uses {amount}")
        self.bad({"tools": {"x": {"rules": [{"argument": "a", "required": True}, {"argument": "a", "max": 1}]}}}, "rule id 'x.a' is used twice")
        self.bad({"tools": {"x": {}}}, "neither rules, max_calls nor cumulative limits")
        self.bad({"tools": {"x": {"max_calls": {}}}}, "at least one entry")
        self.bad({"action": "explode", "tools": {"x": {"max_calls": 1}}}, "action must be one of reject, block")
        self.bad({"tools": {"x": {"max_calls": 1, "colour": 1}}}, "unknown key 'colour'")


if __name__ == "__main__":
    unittest.main()
