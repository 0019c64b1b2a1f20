// {{name}}: a Railyard policy plugin that stops denied phrases ("ignore previous instructions",
// ...) from reaching the model.
//
// What it does, for every message whose role is listed in `roles`:
// - it looks for each phrase in the message's text, ignoring case. The text is the content
//   string, or the `text` of each content part when the content is a list of parts;
// - with `"action": "block"`, the first message that contains a phrase blocks the request;
// - with `"action": "redact"`, every match is replaced by `[redacted]` and the request goes on;
// - with a `classifier` in the config, each of those messages that a phrase did not block is
//   then shown to a classifier model the daemon lends the plugin (a guard model, see below); a
//   message it scores at or above `threshold` for `label` blocks the request, in either action
//   (a classifier says nothing about where in the text, so there is nothing to redact).
//
// Reasons name the message and count the phrases, but never quote them. Reasons end up in logs
// and decision records, and the phrase list is often something an operator keeps private.
//
// Guard models: the daemon's config lists models (`[[guard_models]]`) and grants each plugin
// entry the ones it may ask (`guard_models = [...]`). The plugin names a model, never a URL; the
// host talks to it, waits for it without holding up other requests (the call looks synchronous
// from here), and answers with the model's answer or a `guard-error`. An error is thrown as this
// plugin's error, a fault the entry's `on_error` resolves (block, by default): allowing on an
// error would let everything through whenever the model is down.
//
// Rails: `describe` offers input, tool_result and output; railyard.toml chooses where it runs
// (input only, by default). On output only the last message (the model's reply) is checked,
// because the earlier messages were checked on the input rail, and the daemon refuses edits to
// them on that rail.
//
// This plugin has Rust and Python twins (`railyard new --lang rust|python`) with the same logic
// and the same tests. If you change the behaviour here, tests/ tells you what the twins expect.
//
// How WIT (wit/policy.wit) looks from JavaScript, as componentize-js maps it:
// - the exported interface `plugin` is the exported object `plugin` below;
// - records are plain objects with camelCase fields (`tool-call-id` is `toolCallId`);
// - enums are strings ('input', 'tool-result', ...);
// - variants are `{tag, val}` objects (`{tag: 'text', val: 'hello'}`);
// - an `option` is the value, or undefined for none;
// - a `result` is the return value, or what the function throws for the error: an exported
//   function throws `{payload: error}` (see configure); an imported one (such as `classify`)
//   throws a `ComponentError` whose `payload` is the error (see classify below; it is not an
//   `instanceof Error`).
//
// To write to the daemon's log: `import { log } from 'railyard:policy/host@0.3.0';` and then
// `log('info', 'message')`. console.log goes nowhere: the build turns stdio off.

// The guard models the daemon lends (wit/policy.wit, interface guard-models).
import { classify as askClassifier } from 'railyard:policy/guard-models@0.3.0';

/** Reported by describe(); keep it in step with package.json. */
const NAME = '{{name}}';
const VERSION = '0.1.0';

/** What replaces each match when `action` is `redact`. */
const REDACTION = '[redacted]';

/** Used when the config has no `phrases`. Examples only: list your own in railyard.toml. */
const DEFAULT_PHRASES = ['ignore previous instructions', 'reveal your system prompt'];

/** Used when the config has no `roles`: only what the end user typed is checked. */
const DEFAULT_ROLES = ['user'];

/** Used when the config's `classifier` has no `label`: the label of an injection. */
const DEFAULT_LABEL = 'INJECTION';

/** Used when the config's `classifier` has no `threshold`. */
const DEFAULT_THRESHOLD = 0.9;

/**
 * JSON Schema for the config, returned by describe(). The daemon checks the config against it
 * before configure() is called, so an operator's typo is reported when the daemon loads the
 * config, with the line in railyard.toml, not when the first request arrives.
 */
const CONFIG_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  title: 'deny-phrases plugin config',
  type: 'object',
  additionalProperties: false,
  properties: {
    phrases: {
      description: 'Phrases to look for, matched case-insensitively anywhere in the text.',
      type: 'array',
      items: { type: 'string', minLength: 1 },
      minItems: 1,
      default: DEFAULT_PHRASES,
    },
    action: {
      description: 'block: refuse the request; redact: replace each match with [redacted].',
      enum: ['block', 'redact'],
      default: 'block',
    },
    roles: {
      description: 'Only messages with one of these roles are checked.',
      type: 'array',
      items: { type: 'string' },
      minItems: 1,
      default: DEFAULT_ROLES,
    },
    classifier: {
      description: 'Also ask this classifier about each checked message no phrase blocked.',
      type: 'object',
      additionalProperties: false,
      required: ['model'],
      properties: {
        model: {
          description: "The classifier's [[guard_models]] name, granted in its entry.",
          type: 'string',
          minLength: 1,
        },
        label: {
          description: 'The label that flags a message, exactly as the model names it.',
          type: 'string',
          minLength: 1,
          default: DEFAULT_LABEL,
        },
        threshold: {
          description: 'The score (0 to 1) from which the label flags a message.',
          type: 'number',
          minimum: 0,
          maximum: 1,
          default: DEFAULT_THRESHOLD,
        },
      },
    },
  },
};

// The daemon calls configure() once per instance, then evaluate() many times, so the checked
// config is kept here, at module level, between calls. null until configure() succeeds.
//   phrases: lowercased (see foldText), without duplicates; redact: boolean; roles: strings;
//   classifier: null, or {model, label, threshold}.
let config = null;

export const plugin = {
  describe() {
    return {
      name: NAME,
      version: VERSION,
      rails: ['input', 'tool-result', 'output'],
      configSchema: JSON.stringify(CONFIG_SCHEMA),
    };
  },

  configure(text) {
    // To return the `err` of `result<_, string>`, throw the string itself, wrapped in
    // `{payload}`. (Throwing an Error object is not an `err`: it traps the call.)
    try {
      config = parseConfig(text);
    } catch (e) {
      throw { payload: e instanceof ConfigError ? e.message : String(e) };
    }
  },

  // evaluate returns `result<verdict, string>`: an exception becomes the `err`, a fault the
  // daemon resolves by the plugin's on_error (fail closed by default). Its message and place
  // reach the daemon's log and the decision record, so say what went wrong, never what the
  // request contained.
  evaluate(request) {
    if (config === null) {
      // The daemon always configures an instance first. Should that ever not happen, refuse
      // rather than let the request through unchecked (fail closed).
      return { tag: 'block', val: `plugin '${NAME}' was evaluated before it was configured` };
    }
    try {
      return evaluate(config, request);
    } catch (e) {
      throw { payload: e instanceof Fault ? e.message : describeError(e) };
    }
  },
};

/** `Name: message (at function@file:line:column)`, from an exception. */
function describeError(e) {
  if (!(e instanceof Error)) return `thrown: ${String(e).slice(0, 200)}`;
  const frame = (e.stack || '').split('\n').find((l) => l.trim() !== '');
  return `${e.name}: ${e.message}${frame ? ` (at ${frame.trim()})` : ''}`;
}

/** A config problem, with a message for the operator. */
class ConfigError extends Error {}

/**
 * Checks the config and fills in the defaults. The daemon has already checked it against
 * CONFIG_SCHEMA, but a plugin must not trust that: the same component can be run by other
 * hosts, and a clear message here is cheap.
 */
function parseConfig(text) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ConfigError(`config is not valid JSON: ${e.message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError('config must be a JSON object');
  }
  for (const key of Object.keys(value)) {
    if (!['phrases', 'action', 'roles', 'classifier'].includes(key)) {
      throw new ConfigError(
        `unknown config field '${key}' (expected phrases, action, roles, classifier)`,
      );
    }
  }

  const phrases = 'phrases' in value ? stringList(value.phrases, 'phrases') : DEFAULT_PHRASES;
  if (phrases.length === 0) {
    throw new ConfigError("'phrases' must list at least one phrase");
  }
  const folded = [];
  phrases.forEach((phrase, i) => {
    if (phrase === '') {
      throw new ConfigError(`'phrases[${i}]' must not be empty`);
    }
    // Lowercase once here, so evaluate only has to lowercase the text. Two phrases that differ
    // only in case are the same phrase: keep one, so the counts in reasons are right.
    const f = foldText(phrase);
    if (!folded.includes(f)) {
      folded.push(f);
    }
  });

  const action = 'action' in value ? value.action : 'block';
  if (action !== 'block' && action !== 'redact') {
    throw new ConfigError('\'action\' must be "block" or "redact"');
  }

  const roles = 'roles' in value ? stringList(value.roles, 'roles') : DEFAULT_ROLES;
  if (roles.length === 0) {
    throw new ConfigError("'roles' must list at least one role");
  }

  const classifier = 'classifier' in value ? parseClassifier(value.classifier) : null;

  return { phrases: folded, redact: action === 'redact', roles, classifier };
}

/** The config's `classifier` object. */
function parseClassifier(value) {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError("'classifier' must be an object with model, label, threshold");
  }
  for (const key of Object.keys(value)) {
    if (!['model', 'label', 'threshold'].includes(key)) {
      throw new ConfigError(
        `unknown config field 'classifier.${key}' (expected model, label, threshold)`,
      );
    }
  }
  if (!('model' in value)) {
    throw new ConfigError("'classifier.model' is required");
  }
  if (typeof value.model !== 'string' || value.model === '') {
    throw new ConfigError("'classifier.model' must be a non-empty string");
  }
  const label = 'label' in value ? value.label : DEFAULT_LABEL;
  if (typeof label !== 'string' || label === '') {
    throw new ConfigError("'classifier.label' must be a non-empty string");
  }
  const threshold = 'threshold' in value ? value.threshold : DEFAULT_THRESHOLD;
  if (typeof threshold !== 'number' || !(threshold >= 0 && threshold <= 1)) {
    throw new ConfigError("'classifier.threshold' must be a number from 0 to 1");
  }
  // Scores arrive as 32-bit floats (f32 in the contract), so the threshold is rounded to one:
  // a score of exactly 0.9 then reaches a threshold of 0.9 (the twins round it the same way).
  return { model: value.model, label, threshold: Math.fround(threshold) };
}

/** A JSON array of strings, or a ConfigError naming the field (and the item) that is wrong. */
function stringList(value, field) {
  if (!Array.isArray(value)) {
    throw new ConfigError(`'${field}' must be a list of strings`);
  }
  value.forEach((item, i) => {
    if (typeof item !== 'string') {
      throw new ConfigError(`'${field}[${i}]' must be a string`);
    }
  });
  return value;
}

/**
 * Judges one request: see the top of this file. Throws (a fault) when a guard model gave no
 * answer.
 */
function evaluate(config, request) {
  const messages = request.messages;
  // On the output rail the last message is the model's reply; everything before it was already
  // checked on the input rail, and the daemon only accepts edits to the reply there.
  const first = request.rail === 'output' ? Math.max(messages.length - 1, 0) : 0;

  const edits = [];
  const notes = [];
  // The messages to show the classifier, with their text as it goes on to the model.
  const toClassify = [];
  for (let index = first; index < messages.length; index++) {
    const message = messages[index];
    if (!config.roles.includes(message.role)) {
      continue;
    }
    // A message can have no content at all (an assistant message with only tool calls).
    if (message.content === undefined || message.content === null) {
      continue;
    }
    const result = checkContent(config, message.content);
    if (result !== null && !config.redact) {
      // One offending message is enough to refuse the request: stop here.
      return { tag: 'block', val: `found ${phraseCount(result.count)} in message ${index}` };
    }
    if (config.classifier !== null) {
      const text = messageText(result === null ? message.content : result.content);
      if (text !== null) {
        toClassify.push({ index, text });
      }
    }
    if (result !== null) {
      notes.push(`${phraseCount(result.count)} in message ${index}`);
      edits.push({ tag: 'content', val: { message: index, content: result.content } });
    }
  }

  // The phrases did not block: ask the classifier, one message at a time (the daemon caches
  // each answer, so a conversation's earlier turns cost nothing the next time).
  if (config.classifier !== null) {
    const { model, label } = config.classifier;
    for (const { index, text } of toClassify) {
      const score = classify(config.classifier, text);
      if (score !== null) {
        const reason = `the classifier '${model}' flagged message ${index} as ${label}`;
        return { tag: 'block', val: `${reason} (${twoDecimals(score)})` };
      }
    }
  }

  if (edits.length === 0) {
    return { tag: 'allow' };
  }
  return { tag: 'modify', val: { edits, reason: `redacted ${notes.join(', ')}` } };
}

/** A fault with a message of its own: evaluate returns its message as it is. */
class Fault extends Error {}

/**
 * Asks the classifier about one text. Returns the label's score when it reaches the threshold,
 * null when it does not (or the model did not give the label at all), and throws a Fault,
 * naming the model but never the text, when the model gave no answer.
 */
function classify(classifier, text) {
  const model = classifier.model;
  let answer;
  try {
    // Synchronous from here: the host waits for the model without blocking other requests.
    answer = askClassifier(model, [text]);
  } catch (e) {
    // The `guard-error` variant, `{tag, val}`, is the thrown ComponentError's `payload`.
    if (e !== null && typeof e === 'object' && 'payload' in e) {
      throw new Fault(`the classifier '${model}' ${guardError(e.payload)}`);
    }
    throw e;
  }
  // One list of labels per text asked about.
  if (answer.length !== 1) {
    throw new Fault(`the classifier '${model}' answered for ${answer.length} texts instead of 1`);
  }
  const found = answer[0].find((l) => l.label === classifier.label);
  return found !== undefined && found.score >= classifier.threshold ? found.score : null;
}

/** What went wrong with a guard model (a `guard-error`), to follow its name in a message. */
function guardError(error) {
  switch (error.tag) {
    case 'denied':
      return `was denied: ${error.val}`;
    case 'timeout':
      return 'did not answer in time';
    case 'budget-exhausted':
      return "is over the request's budget";
    case 'rate-limited':
      return 'is rate limited';
    case 'unavailable':
      return `is unavailable: ${error.val}`;
    case 'invalid-output':
      return `answered something unreadable: ${error.val}`;
    default:
      return `failed (${String(error.tag)})`;
  }
}

/**
 * A score with two decimals, rounded half up ("0.98"), exactly as the twins print it (each
 * language's own formatting rounds ties such as 0.125 differently).
 */
function twoDecimals(score) {
  const hundredths = Math.floor(score * 100 + 0.5);
  return (hundredths / 100).toFixed(2);
}

/**
 * The text of a message's content, as the classifier is shown it: the content string, or the
 * `text` of each text part, one per line. null when there is no text (or the parts are not
 * readable).
 */
function messageText(content) {
  let text;
  if (content.tag === 'text') {
    text = content.val;
  } else {
    let parts;
    try {
      parts = JSON.parse(content.val);
    } catch {
      return null;
    }
    if (!Array.isArray(parts)) {
      return null;
    }
    text = parts
      .filter((part) => typeof part === 'object' && part !== null && typeof part.text === 'string')
      .map((part) => part.text)
      .join('\n');
  }
  return text === '' ? null : text;
}

/** "1 denied phrase", "2 denied phrases". */
function phraseCount(count) {
  return count === 1 ? '1 denied phrase' : `${count} denied phrases`;
}

/**
 * Looks for the phrases in one message's content. Returns null when none is found, else
 * `{count, content}`: how many different phrases were found, and the content with every match
 * redacted (only used when `action` is `redact`).
 */
function checkContent(config, content) {
  // One flag per phrase: several matches of the same phrase count once.
  const found = new Array(config.phrases.length).fill(false);
  let newContent;
  if (content.tag === 'text') {
    const matches = findPhrases(content.val, config.phrases, found);
    newContent = { tag: 'text', val: redact(content.val, matches) };
  } else {
    // Parts arrive as JSON text, e.g. [{"type": "text", "text": "..."},
    // {"type": "image_url", ...}]. Only the `text` of each part is checked; everything else,
    // including the order of the parts and their other fields, is kept as it is.
    let parts;
    try {
      parts = JSON.parse(content.val);
    } catch {
      return null;
    }
    if (!Array.isArray(parts)) {
      return null;
    }
    for (const part of parts) {
      if (typeof part === 'object' && part !== null && typeof part.text === 'string') {
        const matches = findPhrases(part.text, config.phrases, found);
        if (matches.length > 0) {
          part.text = redact(part.text, matches);
        }
      }
    }
    newContent = { tag: 'parts', val: JSON.stringify(parts) };
  }
  const count = found.filter((f) => f).length;
  return count > 0 ? { count, content: newContent } : null;
}

/**
 * Finds the phrases in `text`, ignoring case. Returns the [start, end) ranges (string indices in
 * `text`) to redact, in order and never overlapping, and sets found[k] for every phrase k that
 * was matched.
 *
 * Where several phrases match, the one that starts first wins, and at the same start the longest
 * wins; the search then goes on after that match. So with the phrases "system prompt" and
 * "reveal your system prompt", the text "reveal your system prompt" is one match of the longer
 * phrase.
 */
function findPhrases(text, phrases, found) {
  // foldText keeps every index, so positions in `folded` are positions in `text`.
  const folded = foldText(text);

  // next[k]: where phrase k next occurs in `folded` after the last match; -1 once it no longer
  // occurs. Remembering it means a phrase is searched for again only when a match overlaps its
  // next occurrence, not once per match.
  const next = phrases.map((phrase) => folded.indexOf(phrase));
  const matches = [];
  for (;;) {
    // The phrase that occurs first; at the same position, the longest.
    let best = -1;
    for (let k = 0; k < phrases.length; k++) {
      if (next[k] === -1) {
        continue;
      }
      if (
        best === -1 ||
        next[k] < next[best] ||
        (next[k] === next[best] && phrases[k].length > phrases[best].length)
      ) {
        best = k;
      }
    }
    if (best === -1) {
      break;
    }
    const start = next[best];
    const end = start + phrases[best].length;
    found[best] = true;
    matches.push([start, end]);
    // Phrases whose next occurrence overlaps this match: look again after it.
    for (let k = 0; k < phrases.length; k++) {
      if (next[k] !== -1 && next[k] < end) {
        next[k] = folded.indexOf(phrases[k], end);
      }
    }
  }
  return matches;
}

/** Replaces each [start, end) range of `text` (in order, not overlapping) with REDACTION. */
function redact(text, matches) {
  let out = '';
  let last = 0;
  for (const [start, end] of matches) {
    out += text.slice(last, start) + REDACTION;
    last = end;
  }
  return out + text.slice(last);
}

/**
 * Lowercases `text` exactly as the Rust and Python twins do: each character becomes the first
 * character of its Unicode lowercase mapping. Taking one character for one keeps every index
 * (only "İ" lowercases to two characters, and no character changes its length in UTF-16 this
 * way). Characters are lowercased one at a time, without context, so "Σ" is always "σ" (never
 * the word-final "ς" that `text.toLowerCase()` can give).
 */
function foldText(text) {
  // Fast path: for text without "Σ" or "İ" (the two characters whose lowercase depends on
  // context or has two characters), toLowerCase() on the whole string gives the same result,
  // many times faster than the loop below. "İ" shows up as a change of length.
  if (!text.includes('Σ')) {
    const lower = text.toLowerCase();
    if (lower.length === text.length) {
      return lower;
    }
  }
  let out = '';
  // for...of walks code points, so emoji and other characters outside the BMP stay whole.
  for (const ch of text) {
    out += String.fromCodePoint(ch.toLowerCase().codePointAt(0));
  }
  return out;
}
