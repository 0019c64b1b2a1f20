"""{{name}}: a Railyard policy plugin that stops denied phrases ("ignore previous instructions",
...) from reaching the model.

What it does, for every message whose role is listed in `roles`:
- it looks for each phrase in the message's text, ignoring case. The text is the content
  string, or the `text` of each content part when the content is a list of parts;
- with `"action": "block"`, the first message that contains a phrase blocks the request;
- with `"action": "redact"`, every match is replaced by `[redacted]` and the request goes on;
- with a `classifier` in the config, each of those messages that a phrase did not block is
  then shown to a classifier model the daemon lends the plugin (a guard model, see below); a
  message it scores at or above `threshold` for `label` blocks the request, in either action
  (a classifier says nothing about where in the text, so there is nothing to redact).

Reasons name the message and count the phrases, but never quote them. Reasons end up in logs
and decision records, and the phrase list is often something an operator keeps private.

Guard models: the daemon's config lists models (`[[guard_models]]`) and grants each plugin
entry the ones it may ask (`guard_models = [...]`). The plugin names a model, never a URL; the
host talks to it, waits for it without holding up other requests (the call looks synchronous
from here), and answers with the model's answer or a `guard-error`. An error is raised as this
plugin's error, a fault the entry's `on_error` resolves (block, by default): allowing on an
error would let everything through whenever the model is down.

Rails: `describe` offers input, tool_result and output; railyard.toml chooses where it runs
(input only, by default). On output only the last message (the model's reply) is checked,
because the earlier messages were checked on the input rail, and the daemon refuses edits to
them on that rail.

This plugin has Rust and JavaScript twins (`railyard new --lang rust|js`) with the same logic
and the same tests. If you change the behaviour here, tests/ tells you what the twins expect.

How WIT (wit/policy.wit) looks from Python: componentize-py generates the `wit_world` package
from wit/ while it builds (see it with `componentize-py -d wit -w policy bindings gen`):
- the exported interface `plugin` is the `Plugin` protocol in `wit_world.exports`; the class
  below must be called `Plugin` and implement it;
- the shared types are dataclasses in `wit_world.imports.types`, with snake_case fields;
- enums are Python enums (`types.Rail.INPUT`);
- each case of a variant is its own class (`types.Content_Text(value)`, `types.Verdict_Allow()`);
- an `option` is the value or None;
- a `result` is the return value, or a raised `componentize_py_types.Err` for the error (its
  `value`); an imported function (such as `guard_models.classify`) raises it too.

To write to the daemon's log: `from wit_world.imports import host` and then
`host.log(types.Level.INFO, "message")`. print() goes nowhere: the build stubs out WASI.
"""

import json
import math
import struct
from typing import List, Optional, Tuple

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import guard_models, types

# Reported by describe(). Bump VERSION when the behaviour changes: `railyard plugins` shows it.
NAME = "{{name}}"
VERSION = "0.1.0"

# What replaces each match when `action` is `redact`.
REDACTION = "[redacted]"

# Used when the config has no `phrases`. Examples only: list your own in railyard.toml.
DEFAULT_PHRASES = ["ignore previous instructions", "reveal your system prompt"]

# Used when the config has no `roles`: only what the end user typed is checked.
DEFAULT_ROLES = ["user"]

# Used when the config's `classifier` has no `label`: the label of an injection.
DEFAULT_LABEL = "INJECTION"

# Used when the config's `classifier` has no `threshold`.
DEFAULT_THRESHOLD = 0.9

# JSON Schema for the config, returned by describe(). The daemon checks the config against it
# before configure() is called, so an operator's typo is reported when the daemon loads the
# config, with the line in railyard.toml, not when the first request arrives.
CONFIG_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "deny-phrases plugin config",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "phrases": {
            "description": "Phrases to look for, matched case-insensitively anywhere in the text.",
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "minItems": 1,
            "default": DEFAULT_PHRASES,
        },
        "action": {
            "description": "block: refuse the request; redact: replace each match with [redacted].",
            "enum": ["block", "redact"],
            "default": "block",
        },
        "roles": {
            "description": "Only messages with one of these roles are checked.",
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "default": DEFAULT_ROLES,
        },
        "classifier": {
            "description": "Also ask this classifier about each checked message no phrase blocked.",
            "type": "object",
            "additionalProperties": False,
            "required": ["model"],
            "properties": {
                "model": {
                    "description": "The classifier's [[guard_models]] name, granted in its entry.",
                    "type": "string",
                    "minLength": 1,
                },
                "label": {
                    "description": "The label that flags a message, exactly as the model names it.",
                    "type": "string",
                    "minLength": 1,
                    "default": DEFAULT_LABEL,
                },
                "threshold": {
                    "description": "The score (0 to 1) from which the label flags a message.",
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "default": DEFAULT_THRESHOLD,
                },
            },
        },
    },
}


class Classifier:
    """The config's `classifier`."""

    def __init__(self, model: str, label: str, threshold: float):
        # The guard model's name in the daemon's config.
        self.model = model
        # The label that flags a message.
        self.label = label
        # The score from which the label flags a message.
        self.threshold = threshold


class Config:
    """The config after configure() has checked it."""

    def __init__(
        self, phrases: List[str], redact: bool, roles: List[str], classifier: Optional[Classifier]
    ):
        # Already lowercased (see fold), without duplicates.
        self.phrases = phrases
        # True for "action": "redact", False for "block".
        self.redact = redact
        # Roles whose messages are checked.
        self.roles = roles
        # The classifier to ask, when the config has one.
        self.classifier = classifier


# The daemon calls configure() once per instance, then evaluate() many times, so the checked
# config is kept here between calls. It is a module global rather than an attribute of Plugin
# so it does not depend on how many Plugin objects componentize-py creates. None until
# configure() succeeds.
_config: Optional[Config] = None


class Plugin(exports.Plugin):
    def describe(self) -> types.Info:
        return types.Info(
            name=NAME,
            version=VERSION,
            rails=[types.Rail.INPUT, types.Rail.TOOL_RESULT, types.Rail.OUTPUT],
            config_schema=json.dumps(CONFIG_SCHEMA),
        )

    def configure(self, config: str) -> None:
        global _config
        # Raising Err(message) returns the `err` of `result<_, string>`. Any other exception
        # is not an error result: it traps the call.
        try:
            _config = parse_config(config)
        except ConfigError as e:
            raise Err(str(e))

    def evaluate(self, request: types.Request) -> types.Verdict:
        if _config is None:
            # The daemon always configures an instance first. Should that ever not happen,
            # refuse rather than let the request through unchecked (fail closed).
            return types.Verdict_Block(f"plugin '{NAME}' was evaluated before it was configured")
        # evaluate returns `result<verdict, string>`: an exception becomes the `err` (raise
        # Err(message)), a fault the daemon resolves by the plugin's on_error (fail closed by
        # default). Its message and line reach the daemon's log and the decision record, so say
        # what went wrong, never what the request contained.
        try:
            return evaluate(_config, request)
        except Fault as e:
            raise Err(str(e))
        except Exception as e:
            raise Err(describe_error(e))


class ConfigError(Exception):
    """A config problem, with a message for the operator."""


class Fault(Exception):
    """A fault with a message of its own: evaluate returns its message as it is."""


def describe_error(e: BaseException) -> str:
    """`Name: message (line N in function)`, from an exception and its innermost frame."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" (line {tb.tb_lineno} in {tb.tb_frame.f_code.co_name})" if tb is not None else ""
    return f"{type(e).__name__}: {e}{where}"


def parse_config(text: str) -> Config:
    """Checks the config and fills in the defaults. The daemon has already checked it against
    CONFIG_SCHEMA, but a plugin must not trust that: the same component can be run by other
    hosts, and a clear message here is cheap."""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"config is not valid JSON: {e}")
    if not isinstance(value, dict):
        raise ConfigError("config must be a JSON object")
    for key in value:
        if key not in ("phrases", "action", "roles", "classifier"):
            raise ConfigError(
                f"unknown config field '{key}' (expected phrases, action, roles, classifier)"
            )

    phrases = string_list(value["phrases"], "phrases") if "phrases" in value else DEFAULT_PHRASES
    if not phrases:
        raise ConfigError("'phrases' must list at least one phrase")
    folded: List[str] = []
    for i, phrase in enumerate(phrases):
        if phrase == "":
            raise ConfigError(f"'phrases[{i}]' must not be empty")
        # Lowercase once here, so evaluate only has to lowercase the text. Two phrases that
        # differ only in case are the same phrase: keep one, so the counts in reasons are right.
        f = fold(phrase)
        if f not in folded:
            folded.append(f)

    action = value.get("action", "block")
    if not isinstance(action, str) or action not in ("block", "redact"):
        raise ConfigError("'action' must be \"block\" or \"redact\"")

    roles = string_list(value["roles"], "roles") if "roles" in value else DEFAULT_ROLES
    if not roles:
        raise ConfigError("'roles' must list at least one role")

    classifier = parse_classifier(value["classifier"]) if "classifier" in value else None

    return Config(folded, action == "redact", roles, classifier)


def parse_classifier(value: object) -> Classifier:
    """The config's `classifier` object."""
    if not isinstance(value, dict):
        raise ConfigError("'classifier' must be an object with model, label, threshold")
    for key in value:
        if key not in ("model", "label", "threshold"):
            raise ConfigError(
                f"unknown config field 'classifier.{key}' (expected model, label, threshold)"
            )
    if "model" not in value:
        raise ConfigError("'classifier.model' is required")
    model = value["model"]
    if not isinstance(model, str) or model == "":
        raise ConfigError("'classifier.model' must be a non-empty string")
    label = value.get("label", DEFAULT_LABEL)
    if not isinstance(label, str) or label == "":
        raise ConfigError("'classifier.label' must be a non-empty string")
    threshold = value.get("threshold", DEFAULT_THRESHOLD)
    # bool is an int in Python, but true is not a number in JSON.
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float))
        or not 0 <= threshold <= 1
    ):
        raise ConfigError("'classifier.threshold' must be a number from 0 to 1")
    # Scores arrive as 32-bit floats (f32 in the contract), so the threshold is rounded to one:
    # a score of exactly 0.9 then reaches a threshold of 0.9 (the twins round it the same way).
    threshold = struct.unpack("f", struct.pack("f", threshold))[0]
    return Classifier(model, label, threshold)


def string_list(value: object, field: str) -> List[str]:
    """A JSON array of strings, or a ConfigError naming the field (and the item) that is wrong."""
    if not isinstance(value, list):
        raise ConfigError(f"'{field}' must be a list of strings")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise ConfigError(f"'{field}[{i}]' must be a string")
    return value


def evaluate(config: Config, request: types.Request) -> types.Verdict:
    """Judges one request: see the top of this file. Raises a Fault when a guard model gave no
    answer."""
    messages = request.messages
    # On the output rail the last message is the model's reply; everything before it was
    # already checked on the input rail, and the daemon only accepts edits to the reply there.
    first = max(len(messages) - 1, 0) if request.rail == types.Rail.OUTPUT else 0

    edits: List[types.Edit] = []
    notes: List[str] = []
    # The messages to show the classifier, with their text as it goes on to the model.
    to_classify: List[Tuple[int, str]] = []
    for index in range(first, len(messages)):
        message = messages[index]
        if message.role not in config.roles:
            continue
        # A message can have no content at all (an assistant message with only tool calls).
        if message.content is None:
            continue
        result = check_content(config, message.content)
        if result is not None and not config.redact:
            # One offending message is enough to refuse the request: stop here.
            return types.Verdict_Block(f"found {phrase_count(result[0])} in message {index}")
        if config.classifier is not None:
            text = message_text(message.content if result is None else result[1])
            if text is not None:
                to_classify.append((index, text))
        if result is not None:
            count, new_content = result
            notes.append(f"{phrase_count(count)} in message {index}")
            edits.append(types.Edit_Content(types.ContentEdit(message=index, content=new_content)))

    # The phrases did not block: ask the classifier, one message at a time (the daemon caches
    # each answer, so a conversation's earlier turns cost nothing the next time).
    classifier = config.classifier
    if classifier is not None:
        for index, text in to_classify:
            score = classify(classifier, text)
            if score is not None:
                return types.Verdict_Block(
                    f"the classifier '{classifier.model}' flagged message {index} as "
                    f"{classifier.label} ({two_decimals(score)})"
                )

    if not edits:
        return types.Verdict_Allow()
    reason = "redacted " + ", ".join(notes)
    return types.Verdict_Modify(types.Modification(edits=edits, reason=reason))


def classify(classifier: Classifier, text: str) -> Optional[float]:
    """Asks the classifier about one text. Returns the label's score when it reaches the
    threshold, None when it does not (or the model did not give the label at all), and raises a
    Fault, naming the model but never the text, when the model gave no answer."""
    model = classifier.model
    try:
        # Synchronous from here: the host waits for the model without blocking other requests.
        answer = guard_models.classify(model, [text])
    except Err as e:
        # e.value is the `guard-error` case: guard_models.GuardError_Timeout(), ...
        raise Fault(f"the classifier '{model}' {guard_error(e.value)}")
    # One list of labels per text asked about.
    if len(answer) != 1:
        raise Fault(f"the classifier '{model}' answered for {len(answer)} texts instead of 1")
    for label in answer[0]:
        if label.label == classifier.label:
            return label.score if label.score >= classifier.threshold else None
    return None


def guard_error(error: guard_models.GuardError) -> str:
    """What went wrong with a guard model (a `guard-error`), to follow its name in a message."""
    if isinstance(error, guard_models.GuardError_Denied):
        return f"was denied: {error.value}"
    if isinstance(error, guard_models.GuardError_Timeout):
        return "did not answer in time"
    if isinstance(error, guard_models.GuardError_BudgetExhausted):
        return "is over the request's budget"
    if isinstance(error, guard_models.GuardError_RateLimited):
        return "is rate limited"
    if isinstance(error, guard_models.GuardError_Unavailable):
        return f"is unavailable: {error.value}"
    if isinstance(error, guard_models.GuardError_InvalidOutput):
        return f"answered something unreadable: {error.value}"
    return f"failed ({type(error).__name__})"


def two_decimals(score: float) -> str:
    """A score with two decimals, rounded half up ("0.98"), exactly as the twins print it (each
    language's own formatting rounds ties such as 0.125 differently)."""
    hundredths = math.floor(score * 100 + 0.5)
    return f"{hundredths / 100:.2f}"


def message_text(content: types.Content) -> Optional[str]:
    """The text of a message's content, as the classifier is shown it: the content string, or
    the `text` of each text part, one per line. None when there is no text (or the parts are
    not readable)."""
    if isinstance(content, types.Content_Text):
        text = content.value
    else:
        try:
            parts = json.loads(content.value)
        except ValueError:
            return None
        if not isinstance(parts, list):
            return None
        text = "\n".join(
            [
                part["text"]
                for part in parts
                if isinstance(part, dict) and isinstance(part.get("text"), str)
            ]
        )
    return text if text != "" else None


def phrase_count(count: int) -> str:
    """ "1 denied phrase", "2 denied phrases"."""
    return "1 denied phrase" if count == 1 else f"{count} denied phrases"


def check_content(config: Config, content: types.Content) -> Optional[Tuple[int, types.Content]]:
    """Looks for the phrases in one message's content. Returns None when none is found, else
    how many different phrases were found and the content with every match redacted (only used
    when `action` is `redact`)."""
    # One flag per phrase: several matches of the same phrase count once.
    found = [False] * len(config.phrases)
    new_content: types.Content
    if isinstance(content, types.Content_Text):
        matches = find_phrases(content.value, config.phrases, found)
        new_content = types.Content_Text(redact(content.value, matches))
    else:
        # Parts arrive as JSON text, e.g. [{"type": "text", "text": "..."},
        # {"type": "image_url", ...}]. Only the `text` of each part is checked; everything
        # else, including the order of the parts and their other fields, is kept as it is.
        try:
            parts = json.loads(content.value)
        except ValueError:
            return None
        if not isinstance(parts, list):
            return None
        for part in parts:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                matches = find_phrases(part["text"], config.phrases, found)
                if matches:
                    part["text"] = redact(part["text"], matches)
        # ensure_ascii=False: keep non-ASCII text as it is rather than as \u escapes.
        new_content = types.Content_Parts(json.dumps(parts, ensure_ascii=False))
    count = sum(found)
    return (count, new_content) if count > 0 else None


def find_phrases(text: str, phrases: List[str], found: List[bool]) -> List[Tuple[int, int]]:
    """Finds the phrases in `text`, ignoring case. Returns the (start, end) ranges (indices in
    `text`) to redact, in order and never overlapping, and sets found[k] for every phrase k that
    was matched.

    Where several phrases match, the one that starts first wins, and at the same start the
    longest wins; the search then goes on after that match. So with the phrases "system prompt"
    and "reveal your system prompt", the text "reveal your system prompt" is one match of the
    longer phrase."""
    # fold keeps every index, so positions in `folded` are positions in `text`.
    folded = fold(text)

    # next_at[k]: where phrase k next occurs in `folded` after the last match; -1 once it no
    # longer occurs. Remembering it means a phrase is searched for again only when a match
    # overlaps its next occurrence, not once per match.
    next_at = [folded.find(phrase) for phrase in phrases]
    matches: List[Tuple[int, int]] = []
    while True:
        # The phrase that occurs first; at the same position, the longest.
        best = -1
        for k, start in enumerate(next_at):
            if start == -1:
                continue
            if (
                best == -1
                or start < next_at[best]
                or (start == next_at[best] and len(phrases[k]) > len(phrases[best]))
            ):
                best = k
        if best == -1:
            break
        start = next_at[best]
        end = start + len(phrases[best])
        found[best] = True
        matches.append((start, end))
        # Phrases whose next occurrence overlaps this match: look again after it.
        for k, s in enumerate(next_at):
            if s != -1 and s < end:
                next_at[k] = folded.find(phrases[k], end)
    return matches


def redact(text: str, matches: List[Tuple[int, int]]) -> str:
    """Replaces each (start, end) range of `text` (in order, not overlapping) with REDACTION."""
    out = []
    last = 0
    for start, end in matches:
        out.append(text[last:start])
        out.append(REDACTION)
        last = end
    out.append(text[last:])
    return "".join(out)


def fold(text: str) -> str:
    """Lowercases `text` exactly as the Rust and JavaScript twins do: each character becomes the
    first character of its Unicode lowercase mapping. Taking one character for one keeps every
    index (only "İ" lowercases to two characters). Characters are lowercased one at a time,
    without context, so "Σ" is always "σ" (never the word-final "ς" that `text.lower()` can
    give)."""
    # Fast path: for text without "Σ" or "İ" (the two characters whose lowercase depends on
    # context or has two characters), lower() on the whole string gives the same result, many
    # times faster than the loop below. "İ" shows up as a change of length.
    if "Σ" not in text:
        lower = text.lower()
        if len(lower) == len(text):
            return lower
    return "".join([c.lower()[0] for c in text])
