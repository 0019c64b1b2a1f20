#!/usr/bin/env python3
"""Names, addresses and dates of birth found by pii (with `entities`, a real Presidio analyzer
behind it), on text the project did not write: presidio-evaluator's sentence templates filled
with the fake identities it ships (see bench/entities.sh, which starts the daemon and Presidio).

Each template is filled with several identities; a placeholder's value is the truth for its
type (PERSON for names, LOCATION for addresses, cities, streets, countries and postcodes,
DATE_OF_BIRTH for `date_of_birth`); the other placeholders are filled too and are nobody's
entity here (an organisation marked PERSON is a false positive). Each text goes through the
daemon's check API on the input rail; what the filter replaced is read back by finding the
answer's text between its placeholders in the text.

Scores per type: recall, a value left with no part of it readable (every letter and digit
replaced, by any placeholder); partial, a value at least partly replaced by its type's
placeholder; precision, the share of the type's replacements that fall on a value of the type.
Presidio's own spans (asked directly) are scored the same way, to show what the filter adds or
loses (for dates of birth, what its birth-word rule changes).

Usage: entities.py RAW_DATA_DIR DAEMON_URL PRESIDIO_URL [PER_TEMPLATE]
"""
import csv
import json
import re
import sys
import urllib.request

raw, daemon, presidio = sys.argv[1:4]
per_template = int(sys.argv[4]) if len(sys.argv) > 4 else 4
TYPES = ["PERSON", "LOCATION", "DATE_OF_BIRTH"]


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


with open(f"{raw}/FakeNameGenerator.com_3000.csv", encoding="utf-8-sig") as f:
    people = list(csv.DictReader(f))
with open(f"{raw}/templates.txt", encoding="utf-8", errors="replace") as f:
    templates = [t.strip().replace("\\n", "\n") for t in f if t.strip()]


def values(p):
    """Each placeholder's value and truth type (None: not an entity scored here)."""
    street = p["StreetAddress"]
    number = next(iter(re.findall(r"\d+\w*", street)), "12")
    street_name = re.sub(r"\s*\b\d+\w*\b\s*", " ", street).strip() or street
    name = f'{p["GivenName"]} {p["Surname"]}'
    person = ("PERSON",)
    place = ("LOCATION",)
    return {
        "person": (name, *person), "name": (name, *person),
        "name_female": (name, *person), "name_male": (name, *person),
        "first_name": (p["GivenName"], *person), "first_name_male": (p["GivenName"], *person),
        "first_name_female": (p["GivenName"], *person),
        "first_name_nonbinary": (p["GivenName"], *person),
        "last_name": (p["Surname"], *person), "last_name_male": (p["Surname"], *person),
        "last_name_female": (p["Surname"], *person),
        "address": (f'{street}, {p["City"]}, {p["State"]} {p["ZipCode"]}', *place),
        "street_name": (street_name, *place), "building_number": (number, *place),
        "secondary_address": (f"Apt. {int(p['Number']) % 90 + 1}", *place),
        "city": (p["City"], *place), "country": (p["CountryFull"], *place),
        "state_abbr": (p["State"], *place), "postcode": (p["ZipCode"], *place),
        "zipcode": (p["ZipCode"], *place),
        "date_of_birth": (p["Birthday"], "DATE_OF_BIRTH"),
        "prefix": (p["Title"], None), "prefix_male": (p["Title"], None),
        "prefix_female": (p["Title"], None),
        "email": (p["EmailAddress"], None), "phone_number": (p["TelephoneNumber"], None),
        "organization": (p["Company"], None), "job": (p["Occupation"], None),
        "nationality": ("Portuguese", None), "nation_woman": ("Frenchwoman", None),
        "nation_plural": ("Danes", None), "religion": ("Buddhist", None),
        "age": (p["Age"], None), "year": (p["Birthday"][-4:], None),
        "date_time": (p["CCExpires"], None), "day_of_week": ("Tuesday", None),
        "url": (f'https://www.{p["Domain"]}', None), "iban": ("GB33BUKB20201555555555", None),
        "ssn": ("078-05-1120", None), "ip_address": ("192.168.10.24", None),
        "credit_card_number": ("4111 1111 1111 1111", None),
        "us_driver_license": ("D1234567", None),
    }


def fill(template, p):
    """The text and its true spans [(start, end, type)], adjacent spans of a type merged."""
    table = values(p)
    out, spans, at = [], [], 0
    for m in re.finditer(r"\{\{(\w+)\}\}", template):
        out.append(template[at:m.start()])
        value, kind = table.get(m.group(1), (m.group(1), None))
        start = sum(map(len, out))
        out.append(value)
        if kind:
            spans.append([start, start + len(value), kind])
        at = m.end()
    out.append(template[at:])
    text = "".join(out)
    merged = []
    for s in spans:
        if merged and merged[-1][2] == s[2] and re.fullmatch(r"[\s,]*", text[merged[-1][1]:s[0]]):
            merged[-1][1] = s[1]
        else:
            merged.append(s)
    return text, merged


PLACEHOLDER = re.compile(r"\[([A-Z_]+)\]")


def replaced(text, redacted):
    """The regions of `text` the filter replaced, with the placeholder's type: the answer's text
    between placeholders is found again in `text`, in order (a character-level diff would match
    a placeholder's capitals with a name's)."""
    out, at = [], 0
    pieces = PLACEHOLDER.split(redacted)  # literal, type, literal, type, ..., literal
    if not text.startswith(pieces[0]):
        raise SystemExit(f"cannot align: {redacted!r}")
    at = len(pieces[0])
    for i in range(1, len(pieces), 2):
        kind, literal = pieces[i], pieces[i + 1]
        last = i + 2 >= len(pieces)
        end = len(text) - len(literal) if last else text.find(literal, at + 1)
        if end < at or (last and not text.endswith(literal)):
            raise SystemExit(f"cannot align: {redacted!r}")
        out.append((at, end, kind))
        at = end + len(literal)
    return out


def score(samples, predict):
    """Per type: [values, fully hidden, partly hidden by its type, predictions, on a value]."""
    s = {t: [0, 0, 0, 0, 0] for t in TYPES}
    for text, gold in samples:
        pred = predict(text)
        for g0, g1, t in gold:
            s[t][0] += 1
            letters = [i for i in range(g0, g1) if text[i].isalnum()]
            if letters and all(any(p0 <= i < p1 for p0, p1, _ in pred) for i in letters):
                s[t][1] += 1
            if any(k == t and p0 < g1 and g0 < p1 for p0, p1, k in pred):
                s[t][2] += 1
        for p0, p1, k in pred:
            if k in s:
                s[k][3] += 1
                if any(t == k and p0 < g1 and g0 < p1 for g0, g1, t in gold):
                    s[k][4] += 1
    return s


samples = [fill(t, people[(i * per_template + k) % len(people)])
           for i, t in enumerate(templates) for k in range(per_template)]


def through_daemon(text):
    answer = post(f"{daemon}/v1/check", {"rail": "input", "messages": [{"role": "user", "content": text}]})
    if answer.get("verdict") == "block":
        raise SystemExit(f"blocked: {answer.get('blocked')}")
    return replaced(text, answer["payload"]["messages"][0]["content"])


def presidio_alone(text):
    """Presidio's own spans, its DATE_TIME taken as dates of birth."""
    found = post(f"{presidio}/analyze", {"text": text, "language": "en"})
    kinds = {"PERSON": "PERSON", "LOCATION": "LOCATION", "DATE_TIME": "DATE_OF_BIRTH"}
    return [(f["start"], f["end"], kinds[f["entity_type"]]) for f in found if f["entity_type"] in kinds]


def table(title, s, types=TYPES):
    print(f"\n{title}\n")
    print("| type | values | recall (nothing left) | partial | predicted | precision |")
    print("|---|---:|---:|---:|---:|---:|")
    for t in types:
        n, full, part, pred, hit = s[t]
        print(f"| {t} | {n} | {full / max(n, 1):.3f} | {part / max(n, 1):.3f} | {pred} | {hit / max(pred, 1):.3f} |")


print(f"{len(templates)} templates x {per_template} identities = {len(samples)} texts, "
      f"{sum(len(g) for _, g in samples)} values")
table("pii with entities (Presidio + en_core_web_sm), through the daemon's check API",
      score(samples, through_daemon))
table("Presidio alone, asked directly (its DATE_TIME taken as dates of birth: no birth-word rule)",
      score(samples, presidio_alone))
