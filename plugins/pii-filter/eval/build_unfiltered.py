#!/usr/bin/env python3
"""Builds the unfiltered evaluation set for pii-filter: `unfiltered.jsonl`.

`thirdparty.jsonl` keeps a Faker phone number only when libphonenumber calls it valid, and an
IBAN or SSN only when python-stdnum does: it was selected by the rule the detector applies. This
set keeps **every value Faker's providers emit**, valid or not, in 30 locales, because a reader
calls `Phone: 106-690-7439 x150` a phone number whether or not area code 106 exists.

Three sources of text around the values, reported separately:
- `presidio`: the sentence templates of Microsoft's presidio-evaluator (MIT), as its data
  generator uses them (`{{phone_number}}`, `{{credit_card_number}}`, ...), every other
  placeholder filled by Faker in the same locale;
- `labelled`: the value under the name of the Faker provider that made it, as a `key: value`
  line, a JSON member or a CSV column (`phone_number: ...`), and Faker's own `credit_card_full`
  block;
- `bare`: the value alone in a Faker sentence of the locale, with nothing saying what it is.

The spans are the values exactly as Faker wrote them. Nothing here knows how the detector works.

Usage (writes next to this file):
    python3 -m venv /work/venv-faker
    /work/venv-faker/bin/pip install Faker==33.1.0
    /work/venv-faker/bin/pip download --no-deps presidio-evaluator==0.3.2 -d /tmp/pe
    /work/venv-faker/bin/python plugins/pii-filter/eval/build_unfiltered.py \
        /tmp/pe/presidio_evaluator-0.3.2-py3-none-any.whl
"""

import datetime
import io
import json
import os
import random
import re
import sys
import zipfile

# Some of Faker's providers draw from sets, whose order follows the string hash: pin it so the
# set is the same on every run.
if os.environ.get("PYTHONHASHSEED") != "0":
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable] + sys.argv)

from faker import Faker  # noqa: E402

SEED = 20261129
# Locales with a phone provider of their own (others fall back to en_US's formats).
LOCALES = [
    "en_US", "en_CA", "en_GB", "en_AU", "en_IN", "de_DE", "fr_FR", "fr_CH", "it_IT", "es_ES",
    "es_MX", "nl_NL", "pt_BR", "pt_PT", "pl_PL", "sv_SE", "da_DK", "fi_FI", "no_NO", "cs_CZ",
    "hu_HU", "ro_RO", "el_GR", "he_IL", "ru_RU", "uk_UA", "tr_TR", "ja_JP", "ko_KR", "zh_CN",
]
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unfiltered.jsonl")
PER_CELL = 150  # samples per (type, source)

rng = random.Random(SEED)
fakers = {}
for i, loc in enumerate(LOCALES):
    f = Faker(loc)
    f.seed_instance(SEED + i)
    fakers[loc] = f


def value(kind, loc):
    """One value of `kind` from locale `loc`'s provider, as emitted: (type, provider, value)."""
    f = fakers[loc]
    if kind == "PHONE":
        return "phone_number", f.phone_number()
    if kind == "CREDIT_CARD":
        # The locale's own brands (ru_RU's Mir, ...), at random as Faker picks them.
        return "credit_card_number", f.credit_card_number()
    if kind == "IBAN":
        return "iban", f.iban()
    if kind == "US_SSN":
        # en_US only: other locales' `ssn` are their own national ids. `invalid_ssn` writes
        # numbers no SSA rule allows (area 000, 666, 9xx), which a reader still calls an SSN.
        us = fakers["en_US"]
        if rng.random() < 0.25:
            return "invalid_ssn", us.invalid_ssn()
        return "ssn", us.ssn()
    if kind == "EMAIL":
        provider = rng.choice(["email", "free_email", "company_email", "ascii_email",
                               "ascii_safe_email"])
        return provider, getattr(f, provider)()
    if kind == "IP_ADDRESS":
        provider = rng.choice(["ipv4", "ipv4_public", "ipv4_private", "ipv6"])
        return provider, getattr(f, provider)()
    raise ValueError(kind)


KINDS = ["PHONE", "CREDIT_CARD", "IBAN", "US_SSN", "EMAIL", "IP_ADDRESS"]
PLACEHOLDER = {
    "phone_number": "PHONE", "credit_card_number": "CREDIT_CARD", "iban": "IBAN",
    "ssn": "US_SSN", "email": "EMAIL", "ip_address": "IP_ADDRESS",
}


def filler(name, loc):
    """Fills a template placeholder that is not one of the scored types."""
    f = fakers[loc]
    alias = {
        "person": "name", "organization": "company", "nationality": "country",
        "nation_woman": "country", "nation_plural": "country", "zipcode": "postcode",
        "age": None, "us_driver_license": None,
    }
    name = alias.get(name, name)
    if name is None:
        return str(rng.randint(18, 90))
    # Dates within fixed bounds: Faker's own end at today, which would change the set daily.
    if name == "date_time":
        return str(f.date_time_between(datetime.datetime(1970, 1, 1), datetime.datetime(2020, 1, 1)))
    if name == "date_of_birth":
        return str(f.date_between(datetime.date(1940, 1, 1), datetime.date(2006, 1, 1)))
    if name == "year":
        return str(rng.randint(1950, 2020))
    fn = getattr(f, name, None)
    if fn is None:
        return f.word()
    out = fn()
    return str(out)


def templates(wheel):
    with zipfile.ZipFile(wheel) as z:
        raw = z.read("presidio_evaluator/data_generator/raw_data/templates.txt").decode()
    lines = [l.rstrip("\n").replace("\\n", "\n").replace("\\,", ",") for l in raw.splitlines()]
    return [l for l in lines if l.strip()]


def fill(template, loc, kind_values):
    """Fills `template`; scored placeholders take values from `kind_values` (one per kind,
    fresh ones made on demand). Returns text and spans."""
    out = io.StringIO()
    spans = []
    pos = 0
    for m in re.finditer(r"\{\{(\w+)\}\}", template):
        out.write(template[pos:m.start()])
        name = m.group(1)
        kind = PLACEHOLDER.get(name)
        if kind:
            v = kind_values.pop(kind) if kind in kind_values else value(kind, loc)[1]
            start = len(out.getvalue().encode())
            out.write(v)
            spans.append([kind, start, start + len(v.encode())])
        else:
            out.write(filler(name, loc))
        pos = m.end()
    out.write(template[pos:])
    return out.getvalue(), spans


def labelled(provider, v, loc):
    f = fakers[loc]
    layout = rng.choice(["kv", "json", "csv"])
    name = f.name()
    if layout == "kv":
        head = f"name: {name}\n{provider}: "
        return head + v + f"\njob: {f.job()}\n", [len(head.encode())], layout
    if layout == "json":
        head = json.dumps({"name": name})[:-1] + f', "{provider}": "'
        return head + v + '"}', [len(head.encode())], layout
    head = f"name,{provider}\n{name},"
    return head + v + "\n", [len(head.encode())], layout


def main():
    wheel = sys.argv[1]
    tpl = templates(wheel)
    by_kind = {k: [t for t in tpl if any(PLACEHOLDER.get(n) == k
                                         for n in re.findall(r"\{\{(\w+)\}\}", t))]
               for k in KINDS}
    samples = []
    for kind in KINDS:
        for n in range(PER_CELL):
            loc = LOCALES[n % len(LOCALES)]
            # presidio templates
            t = rng.choice(by_kind[kind])
            provider, v = value(kind, loc)
            text, spans = fill(t, loc, {kind: v})
            samples.append({"text": text, "spans": spans,
                            "source": f"presidio:{loc}:{provider}", "layout": "template"})
            # labelled by the provider's name
            provider, v = value(kind, loc)
            text, starts, layout = labelled(provider, v, loc)
            samples.append({"text": text, "spans": [[kind, starts[0],
                                                     starts[0] + len(v.encode())]],
                            "source": f"labelled:{loc}:{provider}", "layout": layout})
            # bare, in the locale's prose
            provider, v = value(kind, loc)
            f = fakers[loc]
            head = f.sentence() + " "
            text = head + v + " " + f.sentence()
            s = len(head.encode())
            samples.append({"text": text, "spans": [[kind, s, s + len(v.encode())]],
                            "source": f"bare:{loc}:{provider}", "layout": "prose"})
    # Faker's own card block: brand, name, number and expiry, CVC (its own context).
    for n in range(PER_CELL):
        loc = LOCALES[n % len(LOCALES)]
        block = fakers[loc].credit_card_full()
        lines = block.split("\n")
        number = lines[2].split(" ")[0]
        start = len("\n".join(lines[:2]).encode()) + 1
        samples.append({"text": block, "spans": [["CREDIT_CARD", start,
                                                  start + len(number.encode())]],
                        "source": f"labelled:{loc}:credit_card_full", "layout": "block"})
    for s in samples:
        b = s["text"].encode()
        for kind, a, e in s["spans"]:
            assert b[a:e].decode(), s
    rng.shuffle(samples)
    with open(OUT, "w", encoding="utf-8") as out:
        for s in samples:
            out.write(json.dumps(s, ensure_ascii=False) + "\n")
    print(f"{len(samples)} samples -> {OUT}")


if __name__ == "__main__":
    main()
