"""Maximal instances of a JSON Schema, with a canary in every leaf.

A schema's **sites** are its unions (`anyOf`/`oneOf`, a discriminator's `oneOf`; a union with
`null` is no site: the value is always there). A **target** is one branch of one site (or the
whole root, or one optional property of the root), reached from the root along the route the
walk first found it by. The instance of a target is minimal outside its focus (required
properties only, benign values) and maximal inside it: every optional property present, every
map given a key, each nested union at its first branch (its other branches are targets of their
own). So every item, block, part and event type appears in some instance, and a leak found in
one is the leak of that type's leaves.

Each target is built in two **variants**:
- `all`: in the focus, every free string leaf (ids and URLs too) an e-mail address, a card
  number as text or an SSN; every number leaf a Luhn-valid card number as a JSON number; every
  map key an e-mail address; every enum or const word but the discriminators (`type`, `role`,
  ...) a canary; every place a tool is named (a function's or tool's name, `tool_name`, a
  server label, a list of allowed tool names) the hidden tool's name. Each unique per leaf.
- `unknown`: the focus object's own discriminator a canary (a type the door does not know),
  with its strings canaries as in `all`.
(`strings`, `numbers`, `enums` and `tools` plant one kind alone.) A refused case is taken apart
by the runner: `Builder(active=...)` plants canaries in some of the places only (the rest
benign), `Builder(absent=...)` leaves some optional properties out.

canary that crosses names the leaf it came from."""

import re

EMAIL = "canary-{n}@example.com"
HIDDEN = "delete_database_{n}"
# The one tool the oracle's callers may call (allowed for tenant support, declared by the
# reply cases' requests).
ALLOWED_TOOL = "lookup_order"
BENIGN = "oracle"
VARIANTS = ("all", "unknown")

DISCRIMINATORS = ("type", "role", "object", "method", "jsonrpc", "event")
TOOL_KEYS = {"tool_name", "server_label", "server_name", "function_name", "tool_names",
             "allowed_tools", "allowed_callers"}
TOOLISH = re.compile(r"tool|function|call|mcp|approval|namespace|custom|skill|server", re.I)
TOOL_SIBLINGS = {"arguments", "parameters", "input_schema", "inputSchema", "input", "server_label",
                 "strict", "defer_loading", "outputSchema", "input_examples", "call_id"}
URLISH = re.compile(r"(^|_)(url|uri|href|link)s?$|Url$|Uri$", re.I)


def luhn(digits: str) -> str:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return digits + str((10 - total % 10) % 10)


def card(n: int) -> str:
    """A unique Visa-shaped, Luhn-valid 16-digit card number."""
    return luhn("4" + f"{n % 10**14:014d}")


def ssn(n: int) -> str:
    """A unique SSN in the issued ranges (area 536, group 01-99, serial 0001-9999)."""
    return f"536-{1 + (n // 9999) % 99:02d}-{1 + n % 9999:04d}"


class Registry:
    """Every canary planted: n -> where it was planted. Shared by a whole run, so n is unique."""

    def __init__(self):
        self.leaves = []  # index n-1 -> dict

    def plant(self, case, path, kind) -> int:
        n = len(self.leaves) + 1
        self.leaves.append({"n": n, "case": case, "path": path, "kind": kind})
        return n


class Schema:
    def __init__(self, root: dict):
        self.root = root
        self.defs = root.get("$defs", {})

    def resolve(self, node):
        """(node with $ref and single allOf followed, the last def name)."""
        name = None
        seen = 0
        while isinstance(node, dict):
            if "$ref" in node:
                name = node["$ref"].rsplit("/", 1)[-1]
                node = self.defs[name]
            elif "allOf" in node and len(node["allOf"]) == 1 and "properties" not in node:
                node = node["allOf"][0]
            else:
                break
            seen += 1
            if seen > 64:
                break
        return node, name


def branches(schema: Schema, node: dict):
    """The union's branches that are not null."""
    raw = node.get("anyOf") or node.get("oneOf") or []
    out = []
    for b in raw:
        r, _ = schema.resolve(b)
        if isinstance(r, dict) and r.get("type") == "null":
            continue
        out.append(b)
    return out


def structured(schema: Schema, node) -> bool:
    """Whether a branch is an object or an array (a union of scalars alone is no site: its
    first branch is taken, and its enum words are the `enums` variant's)."""
    r, _ = schema.resolve(node)
    if not isinstance(r, dict):
        return False
    if is_union(r):
        return any(structured(schema, b) for b in branches(schema, r))
    ts = types_of(r)
    return "object" in ts or "array" in ts or "properties" in r


def is_union(node) -> bool:
    return isinstance(node, dict) and ("anyOf" in node or "oneOf" in node)


def types_of(node) -> list:
    t = node.get("type")
    if isinstance(t, list):
        return [x for x in t if x != "null"] or ["null"]
    return [t] if t else []


def const_of(node):
    if "const" in node:
        return True, node["const"]
    if "enum" in node and node["enum"]:
        return True, node["enum"][0]
    return False, None


def tag_of(schema: Schema, node) -> str:
    """The discriminator word of an object schema (its `type`, `role` or `method` const)."""
    node, _ = schema.resolve(node)
    if not isinstance(node, dict):
        return ""
    props = node.get("properties", {})
    for k in ("type", "method", "role"):
        if k in props:
            p, _ = schema.resolve(props[k])
            if isinstance(p, dict):
                ok, v = const_of(p)
                if ok and isinstance(v, str) and ("const" in p or len(p.get("enum", [])) == 1):
                    return v
    return ""


def title_of(schema: Schema, node) -> str:
    r, name = schema.resolve(node)
    if isinstance(r, dict):
        return tag_of(schema, node) or r.get("title") or name or "/".join(types_of(r)) or "value"
    return "value"


# ---------------------------------------------------------------------------------------------
# Discovery: every site, with the route to it.


class Site:
    def __init__(self, node, route, path):
        self.node = node
        self.route = route  # list of steps: ("prop", key) | ("item",) | ("branch", site_id, i) | ("map",)
        self.path = path


def discover(schema: Schema, max_sites=100000):
    """Breadth first from the root: each union (by identity) once, each def's subtree once."""
    sites = []
    seen_sites = set()
    seen_defs = set()
    queue = [(schema.root, [], "")]
    while queue and len(sites) < max_sites:
        node, route, path = queue.pop(0)
        r, name = schema.resolve(node)
        if name is not None:
            if name in seen_defs:
                continue
            seen_defs.add(name)
        if not isinstance(r, dict):
            continue
        if is_union(r):
            bs = branches(schema, r)
            if len(bs) > 1 and id(r) not in seen_sites and any(structured(schema, b) for b in bs):
                seen_sites.add(id(r))
                sid = len(sites)
                sites.append(Site(r, route, path))
                for i, b in enumerate(bs):
                    queue.append((b, route + [("branch", sid, i)], path + f"<{title_of(schema, b)}>"))
            elif len(bs) == 1:
                queue.append((bs[0], route, path))
            continue
        ts = types_of(r)
        if "object" in ts or "properties" in r:
            for k, v in r.get("properties", {}).items():
                queue.append((v, route + [("prop", k)], f"{path}.{k}"))
            ap = r.get("additionalProperties")
            if isinstance(ap, dict) and ap:
                queue.append((ap, route + [("map",)], f"{path}{{}}"))
        if "array" in ts:
            items = r.get("items")
            if isinstance(items, dict):
                queue.append((items, route + [("item",)], f"{path}[]"))
            for i, it in enumerate(r.get("prefixItems", []) or []):
                queue.append((it, route + [("item", i)], f"{path}[{i}]"))
    return sites


# ---------------------------------------------------------------------------------------------
# Building one instance.


class Builder:
    """Builds one instance. `route` (a list of steps) leads from the root to the focus; inside
    the focus everything optional is present and canaries are planted as `variant` says;
    outside it, required properties only, with benign values. `fixed`: root properties given
    outright (a request's `model`, a JSON-RPC id), never canaries. With `rng` (random mode) the
    whole instance is the focus, unions pick a random branch and optional properties are
    present at random."""

    def __init__(self, schema: Schema, registry: Registry, case: str, variant: str, route,
                 rng=None, fixed=None, active=None, absent=None):
        self.schema = schema
        self.registry = registry
        self.case = case
        self.variant = variant
        self.route = tuple(route)
        self.rng = rng
        self.fixed = fixed or {}
        self.planted = []
        self.unknown_done = False
        self.unknown_original = None
        self.v_strings = variant in ("all", "strings", "unknown")
        self.v_numbers = variant in ("all", "numbers")
        self.v_enums = variant in ("all", "enums")
        self.v_tools = variant in ("all", "tools")
        # Which of the places a canary could go get one (by their order in the walk; None: all):
        # a refused case is bisected by planting in part of them, the rest benign.
        self.active = active
        self.ordinal = 0
        # Optional properties left out (by path), and those the focus has: a case refused for
        # its shape (fields that exclude each other) is tried again with some left out.
        self.absent = absent or set()
        self.optional = []

    def on(self) -> bool:
        """One more place a canary could go: whether it gets one."""
        i = self.ordinal
        self.ordinal += 1
        return self.active is None or i in self.active

    # -- leaves ---------------------------------------------------------------------------------

    def plant(self, path, kind, value) -> int:
        n = self.registry.plant(self.case, path, kind)
        self.planted.append(n)
        return n

    def _set(self, n, kind, value):
        leaf = self.registry.leaves[n - 1]
        leaf["kind"] = kind
        leaf["value"] = value

    def string_canary(self, path, key) -> str:
        n = self.plant(path, "email", None)
        rot = n % 4
        if rot == 2:
            c = card(n)
            self._set(n, "card_text", c)
            return f"card {c[:4]} {c[4:8]} {c[8:12]} {c[12:]}"
        if rot == 3:
            self._set(n, "ssn_text", ssn(n))
            return f"SSN {ssn(n)}"
        value = EMAIL.format(n=n)
        self._set(n, "email", value)
        if key and URLISH.search(key):
            return f"https://canary.example.com/p?contact={value}"
        return value

    def email_canary(self, path, kind) -> str:
        n = self.plant(path, kind, None)
        value = EMAIL.format(n=n)
        self._set(n, kind, value)
        return value

    def hidden_tool(self, path) -> str:
        n = self.plant(path, "tool", None)
        value = HIDDEN.format(n=n)
        self._set(n, "tool", value)
        return value

    def number_canary(self, path) -> int:
        n = self.plant(path, "card_number", None)
        value = card(n)
        self._set(n, "card_number", value)
        return int(value)

    def prefix_paths(self, value, prefix):
        if prefix is None:
            return
        tag = ""
        if isinstance(value, dict):
            for k in ("type", "method", "event"):
                t = value.get(k)
                if isinstance(t, str):
                    tag = self.unknown_original if t.startswith("canary-") and self.unknown_original else t
                    break
        p = prefix(tag)
        if not p:
            return
        for n in self.planted:
            leaf = self.registry.leaves[n - 1]
            path = leaf["path"]
            sep = "" if (not path or p.endswith("]") or path.startswith("[") or path.startswith("{")) else "."
            leaf["path"] = p + sep + path

    # -- the walk -------------------------------------------------------------------------------

    def benign(self):
        """The instance with no focus: required properties only, benign values."""
        return self.value(self.schema.root, "", None, False, False, {}, None, None, 0)

    def build(self):
        rest = None if self.rng is not None else self.route
        focus = self.rng is not None
        return self.value(self.schema.root, "", rest, focus, focus, {}, None, None, 0)

    def value(self, node, path, rest, focus, froot, stack, key, parent, depth):
        """`rest`: the route still ahead (None: off the route); `focus`: inside the target;
        `froot`: the focus begins here (its object's discriminator is `unknown`'s to change)."""
        r, name = self.schema.resolve(node)
        if not isinstance(r, dict):
            return None
        if rest == ():
            focus, froot, rest = True, True, None
        if name is not None:
            count = stack.get(name, 0)
            if (count >= 2 or depth > 48) and rest is None:
                return self.smallest(r)
            stack = {**stack, name: count + 1}
        if is_union(r):
            bs = branches(self.schema, r)
            if not bs:
                return None
            if len(bs) == 1:
                return self.value(bs[0], path, rest, focus, froot, stack, key, parent, depth + 1)
            if rest:
                step = rest[0]
                assert step[0] == "branch", (path, step)
                return self.value(bs[step[2]], path, rest[1:], focus, froot, stack, key, parent, depth + 1)
            if self.rng is not None:
                i = self.rng.randrange(len(bs))
            elif focus:
                i = 0
            else:
                i = self.simplest_branch(bs)
            return self.value(bs[i], path, None, focus, froot, stack, key, parent, depth + 1)
        ts = types_of(r)
        ok, const = const_of(r)
        if ok:
            return self.enum_leaf(const, path, focus, froot, key)
        if "object" in ts or "properties" in r:
            return self.object(r, name, path, rest, focus, froot, stack, depth)
        if "array" in ts:
            return self.array(r, path, rest, focus, stack, key, depth)
        if "string" in ts:
            if self.is_tool_name(key, parent):
                if focus and self.v_tools and self.on():
                    return self.hidden_tool(path)
                return ALLOWED_TOOL
            if focus and self.v_strings and self.on():
                return self.string_canary(path, key)
            return self.benign_string(r, key)
        if "integer" in ts or "number" in ts:
            if focus and self.v_numbers and self.can_hold_card(r) and self.on():
                return self.number_canary(path)
            return self.small_number(r)
        if "boolean" in ts:
            return False
        if "null" in ts:
            return None
        return self.anything(path, focus)

    def anything(self, path, focus):
        """A value of any type: a small object whose key and value are leaves."""
        if not focus:
            return {}
        keyed = self.v_numbers and self.on()
        k = self.email_canary(f"{path}{{}}", "key") if keyed else "note"
        p = f"{path}{{}}" if keyed else f"{path}.note"
        return {k: self.anything_value(p)}

    def simplest_branch(self, bs) -> int:
        """Off the focus: prefer a plain string branch (a message's content as text)."""
        for i, b in enumerate(bs):
            r, _ = self.schema.resolve(b)
            if isinstance(r, dict) and r.get("type") == "string" and "enum" not in r and "const" not in r:
                return i
        return 0

    def smallest(self, r):
        ts = types_of(r)
        ok, const = const_of(r)
        if ok:
            return const
        if "object" in ts or "properties" in r:
            return {}
        if "array" in ts:
            return []
        if "string" in ts:
            return BENIGN
        if "integer" in ts or "number" in ts:
            return 0
        if "boolean" in ts:
            return False
        return None

    def is_tool_name(self, key, parent) -> bool:
        if key in TOOL_KEYS:
            return True
        if key != "name" or parent is None:
            return False
        pnode, pname = parent
        title = f"{pnode.get('title') or ''} {pname or ''}"
        if re.search(r"Implementation|Prompt|Resource|Argument|File|Container|Environment|Agent|Voice|Skill|"
                     r"JSONSchema|JsonSchema|ResponseFormat|Format|Grammar|Icon|Model", title) \
                and not re.search(r"Tool", title):
            return False
        props = set(pnode.get("properties", {}))
        if props & TOOL_SIBLINGS:
            return True
        return bool(TOOLISH.search(title))

    def benign_string(self, r, key):
        fmt = r.get("format")
        if (key and URLISH.search(key)) or fmt == "uri":
            return "https://example.com/oracle"
        if fmt == "date-time":
            return "2026-01-01T00:00:00Z"
        return BENIGN

    def can_hold_card(self, r) -> bool:
        mx = r.get("maximum", r.get("exclusiveMaximum"))
        return mx is None or mx > 5 * 10**15

    def small_number(self, r):
        lo = r.get("minimum", r.get("exclusiveMinimum"))
        v = 0
        if lo is not None and lo > 0:
            v = lo if "minimum" in r else lo + 1
        if "integer" in types_of(r):
            return int(v)
        return v

    def enum_leaf(self, const, path, focus, froot, key):
        if not focus or not isinstance(const, str):
            return const
        if self.v_enums and key not in DISCRIMINATORS and self.on():
            return self.email_canary(path, "enum")
        if self.variant == "unknown" and froot and key == "type" and not self.unknown_done and self.on():
            self.unknown_done = True
            self.unknown_original = const
            return self.email_canary(path, "type")
        return const

    def object(self, r, name, path, rest, focus, froot, stack, depth):
        props = r.get("properties", {})
        required = set(r.get("required", []))
        step = rest[0] if rest else None
        out = {}
        is_root = depth <= 2 and path == ""
        for k, v in props.items():
            if is_root and k in self.fixed:
                out[k] = self.fixed[k]
                continue
            here = step is not None and step[0] == "prop" and step[1] == k
            if here:
                include = True
            elif focus:
                include = k in required or self.rng is None or self.rng.random() < 0.7
            else:
                include = k in required
            if not include:
                continue
            p = f"{path}.{k}" if path else k
            if focus and not here and k not in required:
                if p in self.absent:
                    continue
                self.optional.append(p)
            out[k] = self.value(v, p, rest[1:] if here else None, focus, froot and k == "type",
                                stack, k, (r, name), depth + 1)
        if is_root:
            for k, v in self.fixed.items():
                out.setdefault(k, v)
        ap = r.get("additionalProperties")
        p = f"{path}{{}}"
        if step is not None and step[0] == "map":
            out["oracle_key"] = self.value(ap if isinstance(ap, dict) else {}, p, rest[1:], focus, False,
                                           stack, "oracle_key", (r, name), depth + 1)
        elif focus and ap not in (None, False) and (self.rng is None or self.rng.random() < 0.7):
            mk = self.email_canary(p, "key") if self.v_numbers and self.on() else "oracle_key"
            vnode = ap if isinstance(ap, dict) and ap else None
            if vnode is None:
                out[mk] = self.anything_value(p)
            else:
                out[mk] = self.value(vnode, p, None, focus, False, stack, mk, (r, name), depth + 1)
        return out

    def anything_value(self, path):
        if self.v_strings and self.on():
            return self.string_canary(path, None)
        if self.v_numbers and self.on():
            return self.number_canary(path)
        return BENIGN

    def array(self, r, path, rest, focus, stack, key, depth):
        step = rest[0] if rest else None
        prefix = r.get("prefixItems")
        if prefix:
            return [self.value(it, f"{path}[{i}]", None, focus, False, stack, key, None, depth + 1)
                    for i, it in enumerate(prefix)]
        items = r.get("items")
        if not isinstance(items, dict):
            items = {}
        if step is not None and step[0] != "item":
            return []
        start = len(self.planted)
        value = self.value(items, f"{path}[]", rest[1:] if step else None, focus, False, stack, key, None,
                           depth + 1)
        tag = ""
        if isinstance(value, dict):
            for k in ("type", "role", "method"):
                t = value.get(k)
                if isinstance(t, str):
                    tag = self.unknown_original if t.startswith("canary-") else t
                    break
        if tag:
            old, new = f"{path}[]", f"{path}[{tag}]"
            for n in self.planted[start:]:
                leaf = self.registry.leaves[n - 1]
                if leaf["path"].startswith(old):
                    leaf["path"] = new + leaf["path"][len(old):]
        return [value]


def targets(schema: Schema, sites):
    """(label, route) for the root, each optional root property and each branch of each site."""
    out = [("(root)", [])]
    root, _ = schema.resolve(schema.root)
    required = set(root.get("required", []))
    for k in root.get("properties", {}):
        if k not in required:
            out.append((k, [("prop", k)]))
    for sid, s in enumerate(sites):
        bs = branches(schema, s.node)
        for i, b in enumerate(bs):
            label = f"{s.path}<{title_of(schema, b)}>"
            out.append((label, s.route + [("branch", sid, i)]))
    return out


class Generator:
    """The targets of one spec; `case` builds one (target, variant)."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.schema = Schema(spec["schema"])
        self.sites = discover(self.schema)
        self.targets = targets(self.schema, self.sites)

    def case(self, ti: int, variant: str, registry: Registry, fixed=None, case_prefix="", prefix=None,
             active=None, absent=None):
        """The instance of target `ti` in `variant`, or None when it plants nothing of its kind.
        `prefix(tag)`: what the paths of its leaves begin with (given the instance's own
        discriminator: an event's type)."""
        label, route = self.targets[ti]
        case = f"{case_prefix}{label}#{variant}"
        mark = len(registry.leaves)
        b = Builder(self.schema, registry, case, variant, route, fixed=fixed, active=active, absent=absent)
        value = b.build()
        if active is None and (not b.planted or (variant == "unknown" and not b.unknown_done)):
            del registry.leaves[mark:]
            return None
        b.prefix_paths(value, prefix)
        return {"label": label, "target": ti, "variant": variant, "case": case, "value": value,
                "canaries": list(b.planted), "places": b.ordinal, "optional": b.optional,
                "absent": sorted(absent or ())}


def instances(spec: dict, registry: Registry, variants=VARIANTS, fixed=None, case_prefix="", seen=None,
              prefix=None, dropped=None):
    """Every target of a spec in each variant that plants something new: a list of dicts with
    label, target, variant, case, value (the instance) and canaries (their numbers). `seen`
    (a set of (path, kind), shared by the specs of one door and direction): a case whose every
    leaf is at a path and of a kind already planted is left out (and noted in `dropped`)."""
    gen = Generator(spec)
    out = []
    for ti in range(len(gen.targets)):
        for variant in variants:
            mark = len(registry.leaves)
            c = gen.case(ti, variant, registry, fixed, case_prefix, prefix)
            if c is None:
                continue
            if seen is not None:
                keys = {(registry.leaves[n - 1]["path"], registry.leaves[n - 1]["kind"]) for n in c["canaries"]}
                if keys <= seen:
                    del registry.leaves[mark:]
                    if dropped is not None:
                        # Kept aside: run when the cases holding its paths were all refused
                        # for their own shape (not for a canary).
                        dropped.append((ti, variant, {p for p, _ in keys}))
                    continue
                seen |= keys
            out.append(c)
    return gen, out


def random_instance(spec: dict, registry: Registry, rng, variant: str, fixed=None, case="", prefix=None):
    """A random instance: random branches everywhere, random optional properties, every leaf of
    the variant's kind a canary (the whole instance is the focus). `rng` needs `randrange` and
    `random` (a `random.Random`, or one drawn by hypothesis)."""
    schema = Schema(spec["schema"])
    b = Builder(schema, registry, case, variant, (), rng=rng, fixed=fixed)
    value = b.build()
    b.prefix_paths(value, prefix)
    return {"label": "(random)", "target": -1, "variant": variant, "case": case, "value": value,
            "canaries": list(b.planted)}
