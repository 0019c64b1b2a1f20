#!/usr/bin/env python3
"""Builds the third-party evaluation set for pii-filter: `thirdparty.jsonl`.

The values come from generators the project did not write: Faker's locale providers (phones,
cards per brand, IBANs, SSNs, emails, IPs, passwords), PyJWT (tokens), `cryptography` (PEM
private keys), and, for vendor secrets, random bodies shaped by the formats the vendors and the
public secret-detection rule sets document (prefix, alphabet, length; see SOURCES.md). Phone
numbers are kept only when libphonenumber (`phonenumbers`) says they are valid for the locale's
region, and IBANs and SSNs only when python-stdnum says they are valid, so the truth does not
depend on Faker's occasional impossible values.

The text around each value is Faker's own (lorem sentences in the locale's language, profile
fields) in a few neutral layouts: prose, `key: value` lines, JSON, CSV and `.env`. Nothing here
knows how the detector works. Hard negatives are Faker values of other kinds (UUIDs, hashes,
ISBN/EAN codes, dates, timestamps, versions, user agents, ZIP+4, BIC, BBAN, ABA routing
numbers, other countries' national ids) and Luhn-broken card numbers.

Usage (writes next to this file):
    python3 -m venv /work/venv-faker
    /work/venv-faker/bin/pip install Faker==33.1.0 phonenumbers==8.13.52 PyJWT==2.10.1 cryptography==44.0.0 python-stdnum==1.20
    /work/venv-faker/bin/python plugins/pii-filter/eval/build_thirdparty.py
"""

import base64
import csv
import io
import json
import os
import random
import re
import string
import urllib.parse

import jwt
import phonenumbers
from stdnum import iban as stdnum_iban
from stdnum.us import ssn as stdnum_ssn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from faker import Faker

SEED = 20261123
LOCALES = {
    "en_US": "US", "en_CA": "CA", "en_GB": "GB", "de_DE": "DE", "fr_FR": "FR", "es_ES": "ES",
    "it_IT": "IT", "nl_NL": "NL", "en_IN": "IN", "pt_BR": "BR", "en_AU": "AU", "ja_JP": "JP",
}
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "thirdparty.jsonl")

rng = random.Random(SEED)
fakers = {}
for loc in LOCALES:
    f = Faker(loc)
    f.seed_instance(SEED + len(fakers))
    fakers[loc] = f
en = fakers["en_US"]


def locale():
    return rng.choice(list(LOCALES))


# ---------------------------------------------------------------- layouts

def sentences(f, n):
    return [f.sentence() for _ in range(n)]


class Sample:
    def __init__(self, source, layout):
        self.parts = []  # (text, type or None)
        self.source = source
        self.layout = layout
        self.negative = None

    def add(self, text, kind=None):
        self.parts.append((text, kind))

    def render(self):
        out = b""
        spans = []
        for text, kind in self.parts:
            data = text.encode("utf-8")
            if kind:
                spans.append([kind, len(out), len(out) + len(data)])
            out += data
        rec = {"text": out.decode("utf-8"), "spans": spans, "source": self.source,
               "layout": self.layout}
        if self.negative:
            rec["negative"] = self.negative
        return rec


def profile_fields(f):
    """A few other fields of a Faker profile, as (key, value)."""
    fields = [("name", f.name()), ("job", f.job()), ("company", f.company()),
              ("address", f.address().replace("\n", ", ")), ("date_of_birth", str(f.date_of_birth()))]
    rng.shuffle(fields)
    return fields[: rng.randint(1, 2)]


def place(kind, key, value, source, f, layout=None, value_text=None):
    """One sample with `value` (truth type `kind`, or None for a negative) in a layout."""
    layout = layout or rng.choice(["prose", "prose", "kv", "json", "csv"])
    s = Sample(source, layout)
    shown = value_text or [(value, kind)]
    if layout == "prose":
        before, after = sentences(f, 1), sentences(f, rng.randint(0, 1))
        s.add(" ".join(before) + " ")
        for t, k in shown:
            s.add(t, k)
        s.add((" " + " ".join(after)) if after else ".")
    elif layout == "kv":
        fields = profile_fields(f)
        at = rng.randint(0, len(fields))
        for i in range(len(fields) + 1):
            if i == at:
                s.add(f"{key}: ")
                for t, k in shown:
                    s.add(t, k)
                s.add("\n")
            if i < len(fields):
                s.add(f"{fields[i][0]}: {fields[i][1]}\n")
    elif layout == "json":
        fields = profile_fields(f)
        at = rng.randint(0, len(fields))
        items = fields[:at] + [(key, None)] + fields[at:]
        s.add("{")
        for i, (k, v) in enumerate(items):
            s.add(json.dumps(k, ensure_ascii=False) + ": ")
            if v is None:
                s.add('"')
                for t, kk in shown:
                    # JSON-escape the value; spans then cover the escaped form.
                    s.add(json.dumps(t, ensure_ascii=False)[1:-1], kk)
                s.add('"')
            else:
                s.add(json.dumps(v, ensure_ascii=False))
            if i + 1 < len(items):
                s.add(", ")
        s.add("}")
    elif layout == "csv":
        fields = profile_fields(f)
        at = rng.randint(0, len(fields))
        keys = [k for k, _ in fields]
        keys.insert(at, key)
        s.add(",".join(keys) + "\n")
        for i, k in enumerate(keys):
            if i:
                s.add(",")
            if i == at:
                for t, kk in shown:
                    s.add(t, kk)
            else:
                v = dict(fields)[k]
                buf = io.StringIO()
                csv.writer(buf, lineterminator="").writerow([v])
                s.add(buf.getvalue())
        s.add("\n")
    elif layout == "env":
        s.add("# " + f.sentence() + "\n")
        s.add(f"{key}=")
        for t, k in shown:
            s.add(t, k)
        s.add("\n")
    elif layout == "yaml":
        s.add(f"{f.word()}:\n  {key}: ")
        for t, k in shown:
            s.add(t, k)
        s.add(f"\n  {f.word()}: {f.word()}\n")
    return s


# ---------------------------------------------------------------- disguises (evasion)

ZW = ["\u200b", "\u200c", "\u200d", "\u2060", "\u00ad", "\ufeff"]


def fullwidth(text):
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def disguise(value, rnd):
    """The value broken up as an attacker would: invisible characters inside, full-width
    characters, or typographic dashes and spaces instead of ASCII separators."""
    how = rnd.choice(["zw", "fullwidth", "dashes"])
    if how == "fullwidth":
        return fullwidth(value), how
    if how == "dashes" and re.search(r"[- ]", value):
        dash = rnd.choice(["\u2013", "\u2014", "\u2012", "\u2212"])
        space = rnd.choice(["\u00a0", "\u202f", "\u2009", "\u3000"])
        return value.replace("-", dash).replace(" ", space), how
    chars = list(value)
    for _ in range(rnd.randint(1, 3)):
        chars.insert(rnd.randint(1, len(chars) - 1), rnd.choice(ZW))
    return "".join(chars), "zw"


# ---------------------------------------------------------------- positives

def phones(n_per_locale):
    out = []
    for loc, region in LOCALES.items():
        f = fakers[loc]
        kept = 0
        tries = 0
        while kept < n_per_locale and tries < 50 * n_per_locale:
            tries += 1
            v = f.phone_number()
            plain = re.sub(r"\s*(x|ext\.?)\s*\d+$", "", v)
            try:
                ok = phonenumbers.is_valid_number(phonenumbers.parse(plain, region))
            except phonenumbers.NumberParseException:
                ok = False
            if not ok:
                continue
            kept += 1
            out.append(place("PHONE", "phone_number", v, f"faker:{loc}:phone_number", f))
    return out


CARD_TYPES = ["visa13", "visa16", "visa19", "amex", "diners", "discover", "jcb15", "jcb16",
              "mastercard", "maestro"]


def luhn_complete(prefix, length, rnd):
    digits = [int(c) for c in prefix]
    while len(digits) < length - 1:
        digits.append(rnd.randrange(10))
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    digits.append((10 - total % 10) % 10)
    return "".join(map(str, digits))


def group(number, rnd):
    """Print a card number unspaced or grouped the way the brand's cards are embossed."""
    n = len(number)
    style = rnd.choice(["none", "space", "dash"])
    if style == "none":
        return number
    sep = " " if style == "space" else "-"
    if n == 15 and number[:2] in ("34", "37"):
        sizes = [4, 6, 5]
    elif n == 14:
        sizes = [4, 6, 4]
    else:
        sizes = [4] * (n // 4) + ([n % 4] if n % 4 else [])
    parts, p = [], 0
    for s in sizes:
        parts.append(number[p:p + s])
        p += s
    return sep.join(parts)


# Issuer ranges and lengths from public IIN tables (see SOURCES.md).
IIN = {
    "visa": (["4"], [13, 16, 19]),
    "mastercard": (["51", "52", "53", "54", "55", "2221", "2500", "2720"], [16]),
    "amex": (["34", "37"], [15]),
    "diners": (["300", "305", "36", "38"], [14]),
    "discover": (["6011", "644", "649", "65"], [16, 19]),
    "jcb": (["3528", "3550", "3589"], [16, 17, 18, 19]),
    "jcb-legacy": (["1800", "2131"], [15]),
    "unionpay": (["62"], [16, 17, 18, 19]),
    "maestro": (["5018", "5020", "5038", "6304", "6759", "6761", "6763"], list(range(12, 20))),
    "mir": (["2200", "2204"], [16]),
}


def cards():
    out = []
    for loc in LOCALES:
        f = fakers[loc]
        for t in CARD_TYPES:
            for _ in range(1):
                v = f.credit_card_number(card_type=t)
                out.append(place("CREDIT_CARD", "credit_card_number", group(v, rng),
                                 f"faker:{loc}:credit_card_number:{t}", f))
    for brand, (prefixes, lengths) in IIN.items():
        for length in lengths:
            for _ in range(3):
                v = luhn_complete(rng.choice(prefixes), length, rng)
                out.append(place("CREDIT_CARD", "card_number", group(v, rng),
                                 f"iin-table:{brand}:{length}", fakers[locale()]))
    return out


def ssns(n):
    out = []
    f = fakers["en_US"]
    while len(out) < n:
        v = f.ssn()
        if not stdnum_ssn.is_valid(v):
            continue
        style = rng.choice(["dash", "dash", "space", "none"])
        if style == "space":
            v = v.replace("-", " ")
        if style == "none":
            v = v.replace("-", "")
            layout = rng.choice(["kv", "json", "csv"])
        else:
            layout = None
        out.append(place("US_SSN", "ssn", v, f"faker:en_US:ssn:{style}", f, layout=layout))
    return out


def ibans(n_per_locale):
    out = []
    for loc in LOCALES:
        f = fakers[loc]
        kept = tries = 0
        while kept < n_per_locale and tries < 20 * n_per_locale:
            tries += 1
            v = f.iban()
            # Some of Faker's locales write IBANs of the wrong length (en_IN's GB ones);
            # python-stdnum decides what counts as a real IBAN.
            if not stdnum_iban.is_valid(v):
                continue
            kept += 1
            if rng.random() < 0.4:
                v = " ".join(v[i:i + 4] for i in range(0, len(v), 4))
            out.append(place("IBAN", "iban", v, f"faker:{loc}:iban", f))
    return out


def emails(n_per_locale):
    out = []
    for loc in LOCALES:
        f = fakers[loc]
        for _ in range(n_per_locale):
            v = rng.choice([f.email, f.free_email, f.company_email, f.safe_email])()
            out.append(place("EMAIL", "email", v, f"faker:{loc}:email", f))
    return out


def ips(n):
    out = []
    for _ in range(n):
        f = fakers[locale()]
        kind = rng.choice(["ipv4", "ipv4_private", "ipv4_public", "ipv6"])
        v = getattr(f, kind)()
        out.append(place("IP_ADDRESS", kind, v, f"faker:{kind}", f))
    return out


def url_credentials(n):
    out = []
    for _ in range(n):
        f = fakers[locale()]
        scheme = rng.choice(["https", "postgres", "mysql", "redis", "amqp", "ftp", "mongodb"])
        user = f.user_name()
        pw = urllib.parse.quote(f.password(), safe="")
        host = f.domain_name()
        tail = rng.choice(["", "/" + f.word(), ":5432/" + f.word(), "/?" + f.word() + "=1"])
        s = place(None, "url", None, "faker:user_name+password", f,
                  value_text=[(f"{scheme}://", None), (f"{user}:{pw}", "URL_CREDENTIALS"),
                              (f"@{host}{tail}", None)])
        out.append(s)
    return out


def jwts(n):
    out = []
    for _ in range(n):
        f = fakers[locale()]
        claims = {"sub": str(f.random_int(1, 10**9)), "name": f.name(), "iat": f.unix_time()}
        if rng.random() < 0.5:
            claims["email"] = f.email()
        alg = rng.choice(["HS256", "HS384", "HS512"])
        tok = jwt.encode(claims, f.password(length=32), algorithm=alg)
        layout = rng.choice(["prose", "kv", "json", "env", "bearer"])
        if layout == "bearer":
            s = Sample("pyjwt", "bearer")
            s.add(f"curl -H 'Authorization: Bearer ")
            s.add(tok, "JWT")
            s.add(f"' https://{f.domain_name()}/api/{f.word()}\n")
        else:
            s = place("JWT", "id_token", tok, "pyjwt", f, layout=layout)
        out.append(s)
    return out


def private_keys(n):
    out = []
    for i in range(n):
        f = fakers[locale()]
        kind = ["rsa", "ec", "ed25519"][i % 3]
        if kind == "rsa":
            key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
        elif kind == "ec":
            key = ec.generate_private_key(ec.SECP256R1())
        else:
            key = ed25519.Ed25519PrivateKey.generate()
        fmts = [serialization.PrivateFormat.PKCS8, serialization.PrivateFormat.OpenSSH]
        if kind != "ed25519":
            fmts.append(serialization.PrivateFormat.TraditionalOpenSSL)
        fmt = fmts[i % len(fmts)]
        pem = key.private_bytes(serialization.Encoding.PEM, fmt,
                                serialization.NoEncryption()).decode().strip()
        s = Sample(f"cryptography:{kind}:{fmt.name}", "prose")
        s.add(" ".join(sentences(f, 1)) + "\n")
        s.add(pem, "PRIVATE_KEY")
        s.add("\n" + " ".join(sentences(f, 1)))
        out.append(s)
    return out


# Vendor secrets: prefix, alphabet and length as documented (SOURCES.md). Bodies are random.
ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
HEXL = "0123456789abcdef"
UPPER_ALNUM = string.ascii_uppercase + string.digits


def rs(alphabet, n):
    return "".join(rng.choice(alphabet) for _ in range(n))


def crc_b62(body):
    # GitHub classic tokens end in a 6-character base62 CRC32 of the body (GitHub's token-format
    # post); detectors need not check it, but the values should be right.
    import zlib
    c = zlib.crc32(body.encode()) & 0xFFFFFFFF
    digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    s = ""
    while c:
        c, r = divmod(c, 62)
        s = digits[r] + s
    return s.rjust(6, "0")


def github_classic(prefix):
    body = rs(ALNUM, 30)
    return prefix + body + crc_b62(prefix + body)


SECRETS = [
    # (type, vendor, env name, factory)
    ("API_KEY", "openai-legacy", "OPENAI_API_KEY", lambda: "sk-" + rs(ALNUM, 20) + "T3BlbkFJ" + rs(ALNUM, 20)),
    ("API_KEY", "openai-project", "OPENAI_API_KEY", lambda: "sk-proj-" + rs(B64URL, 74) + "T3BlbkFJ" + rs(B64URL, 74)),
    ("API_KEY", "openai-svcacct", "OPENAI_API_KEY", lambda: "sk-svcacct-" + rs(B64URL, 58) + "T3BlbkFJ" + rs(B64URL, 58)),
    ("API_KEY", "openai-admin", "OPENAI_ADMIN_KEY", lambda: "sk-admin-" + rs(B64URL, 58) + "T3BlbkFJ" + rs(B64URL, 58)),
    ("API_KEY", "anthropic", "ANTHROPIC_API_KEY", lambda: "sk-ant-api03-" + rs(B64URL, 93) + "AA"),
    ("API_KEY", "anthropic-admin", "ANTHROPIC_ADMIN_KEY", lambda: "sk-ant-admin01-" + rs(B64URL, 93) + "AA"),
    ("API_KEY", "stripe-secret", "STRIPE_SECRET_KEY", lambda: "sk_live_" + rs(ALNUM, rng.choice([24, 99]))),
    ("API_KEY", "stripe-restricted", "STRIPE_RESTRICTED_KEY", lambda: "rk_live_" + rs(ALNUM, rng.choice([24, 99]))),
    ("API_KEY", "stripe-publishable", "STRIPE_PUBLISHABLE_KEY", lambda: "pk_live_" + rs(ALNUM, rng.choice([24, 99]))),
    ("API_KEY", "google", "GOOGLE_API_KEY", lambda: "AIza" + rs(B64URL, 35)),
    ("API_KEY", "gitlab", "GITLAB_TOKEN", lambda: "glpat-" + rs(B64URL, 20)),
    ("API_KEY", "npm", "NPM_TOKEN", lambda: "npm_" + rs(ALNUM, 36)),
    ("API_KEY", "huggingface", "HF_TOKEN", lambda: "hf_" + rs(string.ascii_letters, 34)),
    ("API_KEY", "twilio-api-key", "TWILIO_API_KEY", lambda: "SK" + rs(HEXL, 32)),
    ("API_KEY", "sendgrid", "SENDGRID_API_KEY", lambda: "SG." + rs(B64URL, 22) + "." + rs(B64URL, 43)),
    ("AWS_KEY", "aws-access-key-id", "AWS_ACCESS_KEY_ID", lambda: rng.choice(["AKIA", "ASIA"]) + rs(UPPER_ALNUM, 16)),
    ("GITHUB_TOKEN", "github-classic", "GITHUB_TOKEN", lambda: github_classic(rng.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]))),
    ("GITHUB_TOKEN", "github-fine-grained", "GITHUB_TOKEN", lambda: "github_pat_" + rs(ALNUM, 22) + "_" + rs(ALNUM, 59)),
    ("SLACK_TOKEN", "slack-bot", "SLACK_BOT_TOKEN", lambda: f"xoxb-{rs(string.digits, 12)}-{rs(string.digits, 13)}-{rs(ALNUM, 24)}"),
    ("SLACK_TOKEN", "slack-user", "SLACK_USER_TOKEN", lambda: f"xoxp-{rs(string.digits, 12)}-{rs(string.digits, 12)}-{rs(string.digits, 13)}-{rs(HEXL, 32)}"),
    ("SLACK_TOKEN", "slack-app", "SLACK_APP_TOKEN", lambda: f"xapp-1-A{rs(UPPER_ALNUM, 10)}-{rs(string.digits, 13)}-{rs(HEXL, 64)}"),
    ("SLACK_TOKEN", "slack-webhook", "SLACK_WEBHOOK_URL", lambda: f"https://hooks.slack.com/services/T{rs(UPPER_ALNUM, 8)}/B{rs(UPPER_ALNUM, 8)}/{rs(ALNUM, 24)}"),
]


def vendor_secrets(per_type):
    out = []
    vendors = {}
    for kind, *_ in SECRETS:
        vendors[kind] = vendors.get(kind, 0) + 1
    for kind, vendor, env, make in SECRETS:
        for _ in range(-(-per_type // vendors[kind])):
            f = fakers[locale()]
            v = make()
            layout = rng.choice(["prose", "kv", "json", "env", "yaml"])
            out.append(place(kind, env if layout == "env" else env.lower(), v, f"format:{vendor}", f, layout=layout))
    # The AWS documentation's own example pair.
    for _ in range(3):
        f = fakers[locale()]
        out.append(place("AWS_KEY", "aws_access_key_id", "AKIAIOSFODNN7EXAMPLE", "aws-docs:example-key-id", f))
    return out


def aws_secret_keys(n):
    """Secret access keys: 40 characters of base64, caught when labelled or beside a key id."""
    out = []
    b64 = ALNUM + "/+"
    docs = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    for i in range(n):
        f = fakers[locale()]
        secret = docs if i < 3 else rs(b64, 40)
        key_id = rng.choice(["AKIA", "ASIA"]) + rs(UPPER_ALNUM, 16)
        style = rng.choice(["ini", "env", "json", "csv", "labelled"])
        s = Sample("format:aws-secret-access-key", style)
        if style == "ini":
            s.add("[default]\naws_access_key_id = ")
            s.add(key_id, "AWS_KEY")
            s.add("\naws_secret_access_key = ")
            s.add(secret, "AWS_KEY")
            s.add(f"\nregion = {rng.choice(['us-east-1', 'eu-west-1', 'ap-northeast-1'])}\n")
        elif style == "env":
            s.add("export AWS_ACCESS_KEY_ID=")
            s.add(key_id, "AWS_KEY")
            s.add("\nexport AWS_SECRET_ACCESS_KEY=")
            s.add(secret, "AWS_KEY")
            s.add("\n")
        elif style == "json":
            s.add('{"AccessKey": {"UserName": ' + json.dumps(f.user_name()) + ', "AccessKeyId": "')
            s.add(key_id, "AWS_KEY")
            s.add('", "Status": "Active", "SecretAccessKey": "')
            s.add(secret, "AWS_KEY")
            s.add('"}}')
        elif style == "csv":
            s.add("User name,Access key ID,Secret access key\n" + f.user_name() + ",")
            s.add(key_id, "AWS_KEY")
            s.add(",")
            s.add(secret, "AWS_KEY")
            s.add("\n")
        else:
            s.add(f.sentence() + " AWS secret access key: ")
            s.add(secret, "AWS_KEY")
            s.add(" " + f.sentence())
        out.append(s)
    return out


CREDENTIAL_LABELS = ["password", "passwd", "pwd", "secret", "client_secret", "api_key", "apiKey",
                     "token", "access_token", "auth_token", "DB_PASSWORD", "MYSQL_ROOT_PASSWORD",
                     "SMTP_PASSWORD", "REDIS_PASSWORD", "api-key", "secret_key"]


def credentials(n):
    out = []
    for _ in range(n):
        f = fakers[locale()]
        label = rng.choice(CREDENTIAL_LABELS)
        if "token" in label.lower() or "key" in label.lower():
            v = rng.choice([f.sha1, f.sha256, f.md5, lambda: f.password(length=24),
                            lambda: f.pystr(min_chars=20, max_chars=40)])()
        else:
            v = f.password(length=rng.randint(8, 20))
        layout = rng.choice(["prose", "kv", "json", "env", "yaml", "header", "azure"])
        if layout == "header":
            s = Sample("faker:sha256|password", "header")
            s.add(f"GET /{f.uri_path()} HTTP/1.1\nHost: {f.domain_name()}\nAuthorization: Bearer ")
            s.add(f.sha256() if rng.random() < 0.5 else f.password(length=32, special_chars=False), "CREDENTIAL")
            s.add("\nAccept: application/json\n")
        elif layout == "azure":
            s = Sample("format:azure-storage-connection-string", "connection-string")
            key = base64.b64encode(bytes(rng.randrange(256) for _ in range(64))).decode()
            s.add(f"DefaultEndpointsProtocol=https;AccountName={f.user_name().replace('.', '').replace('_', '')[:20].lower()};AccountKey=")
            s.add(key, "CREDENTIAL")
            s.add(";EndpointSuffix=core.windows.net")
        elif layout == "prose":
            s = Sample("faker:password", "prose")
            s.add(" ".join(sentences(f, rng.randint(1, 2))) + f" {label}: ")
            s.add(v, "CREDENTIAL")
            s.add(" " + f.sentence())
        else:
            s = place("CREDENTIAL", label, v, "faker:password|hash", f, layout=layout)
        out.append(s)
    return out


# ---------------------------------------------------------------- negatives

def negatives(n_each):
    kinds = {
        "uuid4": lambda f: f.uuid4(),
        "sha1": lambda f: f.sha1(),
        "sha256": lambda f: f.sha256(),
        "md5": lambda f: f.md5(),
        "isbn13": lambda f: f.isbn13(),
        "isbn10": lambda f: f.isbn10(),
        "ean13": lambda f: f.ean13(),
        "ean8": lambda f: f.ean8(),
        "iso8601": lambda f: f.iso8601(),
        "date_time": lambda f: str(f.date_time()),
        "unix_time": lambda f: str(f.unix_time()),
        "unix_time_ms": lambda f: str(f.unix_time() * 1000 + f.random_int(0, 999)),
        "version": lambda f: f.numerify(rng.choice(["#.#.#", "##.#.#", "#.##.###", "#.#.#.#", "v#.#.##"])),
        "section": lambda f: ".".join(str(f.random_int(1, 20)) for _ in range(rng.randint(3, 5))),
        "user_agent": lambda f: f.user_agent(),
        "zipcode_plus4": lambda f: fakers["en_US"].zipcode_plus4(),
        "postcode": lambda f: f.postcode(),
        "swift": lambda f: f.swift(),
        "bban": lambda f: f.bban(),
        "aba": lambda f: fakers["en_US"].aba(),
        "ein": lambda f: fakers["en_US"].ein(),
        "itin": lambda f: fakers["en_US"].itin(),
        "order_number": lambda f: f.numerify(rng.choice(["Order #########", "order no. ##########", "INV-####-######", "PO-########", "Invoice ############"])),
        "msisdn_like_id": lambda f: f.numerify("##########"),
        "pyint": lambda f: str(f.pyint(10**8, 10**18)),
        "card_bad_luhn": lambda f: bad_luhn(f.credit_card_number()),
        "card_expire": lambda f: f.credit_card_expire(),
        "card_cvv": lambda f: f.credit_card_security_code(),
        "mac_address": lambda f: f.mac_address(),
        "ipv4_network": lambda f: f.ipv4_network_class(),
        "port": lambda f: str(f.port_number()),
        "hex_color": lambda f: f.hex_color(),
        "file_path": lambda f: f.file_path(depth=3),
        "uri": lambda f: f.uri(),
        "image_url": lambda f: f.image_url(),
        "password_unlabelled": lambda f: f.password(),
        "license_plate": lambda f: f.license_plate(),
        "latlng": lambda f: f"{f.latitude()}, {f.longitude()}",
        "price": lambda f: f.pricetag(),
        "ca_sin": lambda f: fakers["en_CA"].ssn(),
        "br_cpf": lambda f: fakers["pt_BR"].cpf(),
        "nl_bsn": lambda f: fakers["nl_NL"].ssn(),
        "gb_nino": lambda f: fakers["en_GB"].ssn(),
        "fr_nir": lambda f: fakers["fr_FR"].ssn(),
        "it_codice_fiscale": lambda f: fakers["it_IT"].ssn(),
        "es_nif": lambda f: fakers["es_ES"].nif(),
        "in_aadhaar": lambda f: fakers["en_IN"].aadhaar_id(),
        "credential_placeholder": lambda f: rng.choice([
            "password: ********", "password=${DB_PASSWORD}", "token: null", "api_key: <your-api-key>",
            "secret: true", "password = os.environ['DB_PASSWORD']", "token_type: bearer",
            "password_reset_url: " + f.url(), "PASSWORD={{ vault_password }}", "api_key=None",
            "Authorization: Bearer <token>", "password: string", "token: str", "secret_name: " + f.slug()]),
    }
    out = []
    for name, make in kinds.items():
        for _ in range(n_each):
            f = fakers[locale()]
            v = make(f)
            key = name
            s = place(None, key, v, f"faker-negative:{name}", f,
                      layout="prose" if name == "credential_placeholder" else None)
            s.negative = name
            out.append(s)
    return out


def bad_luhn(number):
    last = int(number[-1])
    return number[:-1] + str((last + rng.randint(1, 9)) % 10)


# ---------------------------------------------------------------- evasion

def evasions(pool, n):
    """Disguised copies of positives from the set (single-value prose samples)."""
    out = []
    candidates = [s for s in pool if s.layout == "prose" and sum(1 for _, k in s.parts if k) == 1]
    for s in rng.sample(candidates, n):
        t = Sample(s.source, "evasion")
        for text, kind in s.parts:
            if kind:
                d, how = disguise(text, rng)
                t.layout = f"evasion:{how}"
                t.add(d, kind)
            else:
                t.add(text)
        out.append(t)
    return out


def main():
    pos = []
    pos += phones(25)
    pos += cards()
    pos += ssns(250)
    pos += ibans(25)
    pos += emails(21)
    pos += ips(250)
    pos += url_credentials(250)
    pos += jwts(250)
    pos += private_keys(60)
    pos += vendor_secrets(250)
    pos += aws_secret_keys(100)
    pos += credentials(250)
    ev = evasions([s for s in pos if s.source.split(":")[0] in ("faker", "iin-table", "format")], 400)
    neg = negatives(20)
    samples = pos + ev + neg
    rng.shuffle(samples)
    with open(OUT, "w", encoding="utf-8") as fh:
        for s in samples:
            fh.write(json.dumps(s.render(), ensure_ascii=False) + "\n")
    print(f"{len(samples)} samples -> {OUT} ({os.path.getsize(OUT) // 1024} KiB)")


if __name__ == "__main__":
    main()
