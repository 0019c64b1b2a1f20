// prompt-guard policy plugin (rails: input, tool_result), written in JavaScript and built into a
// WebAssembly component with componentize-js against wit/policy.wit (world `policy`).
//
// This file is only the WIT glue: the `plugin` export and the `host` import. The decision logic
// is in guard.js, which imports nothing and is unit-tested under Node (test/guard.test.mjs).

import { log } from 'railyard:policy/host@0.3.0';
import { NAME, VERSION, CONFIG_SCHEMA, ConfigError, parseConfig, evaluate as judge, warmUp } from './guard.js';

// Set by configure(); evaluate() before configure() uses the defaults.
let config = null;

export const plugin = {
  describe() {
    return {
      name: NAME,
      version: VERSION,
      rails: ['input', 'tool-result'],
      configSchema: JSON.stringify(CONFIG_SCHEMA),
    };
  },

  // result<_, string>: returning is `ok`; a thrown `{payload}` is the `err`.
  configure(text) {
    try {
      config = parseConfig(text);
    } catch (e) {
      throw { payload: e instanceof ConfigError ? e.message : `invalid prompt-guard config: ${e}` };
    }
  },

  // result<verdict, string>: an exception becomes the `err`, a fault whose message (what and
  // where, never the request's content) reaches the daemon's log and the decision record.
  evaluate(request) {
    try {
      if (config === null) config = parseConfig('{}');
      const { verdict, logs } = judge(config, request);
      for (const line of logs) log('warn', line);
      return verdict;
    } catch (e) {
      throw { payload: describeError(e) };
    }
  },
};

/** `Name: message (at function@file:line:column)`, from an exception. */
function describeError(e) {
  if (!(e instanceof Error)) return `thrown: ${String(e).slice(0, 200)}`;
  const frame = (e.stack || '').split('\n').find((l) => l.trim() !== '');
  return `${e.name}: ${e.message}${frame ? ` (at ${frame.trim()})` : ''}`;
}

// Warm-up at build time: componentize-js evaluates this module once while snapshotting the
// component (Wizer), so running every built-in pattern here stores their compiled form in the
// snapshot instead of compiling them again in every fresh instance.
warmUp();
judge(parseConfig('{}'), {
  messages: [
    { role: 'user', content: { tag: 'text', val: 'warm up: 1gn0r3 a b c d e ZGVjb2RlIG1lIHBsZWFzZSBub3c= [inst] <|x|>' } },
    { role: 'user', content: { tag: 'parts', val: '[{"type":"text","text":"warm up \u2019 I g n o r e"}]' } },
  ],
});
