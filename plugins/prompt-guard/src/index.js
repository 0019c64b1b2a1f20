// prompt-guard policy plugin (rails: input, tool_result), written in JavaScript and built into a
// WebAssembly component with componentize-js against wit/policy.wit (world `policy`).
//
// This file is only the WIT glue: the `plugin` export and the `host` import. The decision logic
// is in guard.js, which imports nothing and is unit-tested under Node (test/guard.test.mjs).

import { log } from 'railyard:policy/host@0.1.0';
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

  // result<_, string>: returning is `ok`; a thrown value is the `err` payload.
  configure(text) {
    try {
      config = parseConfig(text);
    } catch (e) {
      throw e instanceof ConfigError ? e.message : `invalid prompt-guard config: ${e}`;
    }
  },

  evaluate(request) {
    if (config === null) config = parseConfig('{}');
    const { verdict, logs } = judge(config, request);
    for (const line of logs) log('warn', line);
    return verdict;
  },
};

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
