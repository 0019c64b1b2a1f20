// prompt-guard: the decision logic, as plain functions over the contract's shapes.
//
// This module imports nothing, so it runs unchanged under Node (see test/guard.test.mjs) and
// inside the component (src/index.js adds the WIT glue). Shapes follow componentize-js's
// mapping of wit/policy.wit: records are objects with camelCase fields, variants are
// `{tag, val}`, enums are their kebab-case names, options are the value or undefined.

export const NAME = 'prompt-guard';
export const VERSION = '0.1.0';

// ---------------------------------------------------------------------------------------------
// Built-in rules
// ---------------------------------------------------------------------------------------------

// In a built-in template a space means "any run of non-alphanumeric characters, possibly none",
// so `ignore previous` also matches `ignore-previous`, `ignore...previous` and `ignoreprevious`.
// Templates are matched against normalized text (see `views`): lowercase ASCII-folded, with
// zero-width characters removed and whitespace collapsed.
const SEP = '[^a-z0-9]*';
function tmpl(source) {
  return new RegExp(source.replace(/ /g, SEP));
}

// Words that name "the instructions the model was given".
const INSTR = '(instructions?|prompts?|directions|directives|rules|guidelines|guardrails|programming|constraints|system prompt|system message)';
// Qualifiers that point at the model's own instructions rather than at something the user wrote.
// "my previous instructions" is deliberately absent: users legitimately revise their own asks.
const QUAL = '(previous|prior|above|earlier|preceding|foregoing|former|original|initial|old|existing|system|developer|safety|hidden|given|all (of )?(the |your )?|your)';
const LIMITS = '(restrictions?|limitations?|limits|filters?|filtering|rules|guidelines|guardrails|censorship|ethics|morals|moral (guidelines|constraints)|ethical (guidelines|constraints)|content polic(y|ies)|safety (guidelines|filters?|measures|policies)|boundaries)';
// The narrower list for phrasings that also occur innocently ("write it without limits").
const HARD_LIMITS = '(restrictions|filters|filtering|censorship|ethics|morals|moral (guidelines|constraints|compass)|ethical (guidelines|constraints|considerations)|content polic(y|ies)|safety (guidelines|filters?|measures|policies|training)|guardrails|your (rules|guidelines|programming|limitations|principles|policies))';
const ASSISTANT_NAMES = '(chatgpt|gpt|claude|gemini|llama|assistant|ai|model|chatbot|bot|llm)';

/**
 * A gate: groups of literal words; every group must have a word that occurs in the text for the
 * pattern to be tried. Each group is a mandatory part of its pattern (one of its alternatives,
 * cut to a literal stem), so a gate never hides a match; it only saves running patterns whose
 * key words are absent, which is most of them on most text (regex matching is interpreted in
 * the component, so this is the bulk of the speed).
 */
function gate(spec) {
  return spec.split('&').map((g) => g.split('|').map((w) => w.trim()));
}

/** The built-in rules: id, one-line description, and [gate, pattern] pairs that make it fire. */
export const BUILTIN_RULES = [
  {
    id: 'ignore-instructions',
    description: 'asks the model to ignore, forget or override the instructions it was given',
    patterns: [
      [gate('ignor|disregard|forget|skip|overr|bypass|discard|abandon|neglect|drop|dismiss|throw|aside|attention & instruction|prompt|direct|rule|guideline|guardrail|programming|constraint|system'), tmpl(`\\b(ignore|disregard|forget|skip|override|overrule|bypass|discard|abandon|neglect|drop|dismiss) (all |any |every |each )?(of )?(the |your |these |those |its )?${QUAL} ${INSTR}`)],
      [gate('away|aside|attention & instruction|prompt|direct|rule|guideline|guardrail|programming|constraint|system'), tmpl(`(?<=\\b(throw|set|pay no) )(away|aside|attention to) (all |any |every |each )?(of )?(the |your |these |those |its )?${QUAL} ${INSTR}`)],
      [gate('ignor|disregard|forget|overr & instruction|prompt|direct|rule|guideline|guardrail|programming|constraint|system'), tmpl(`\\b(ignore|disregard|forget|overrule|override) (all |any )?(of )?(your |the )?${INSTR} (you (were|have been) given|above|before this|so far|until now)`)],
      [gate('ignor|disregard|forget'), tmpl('\\b(ignore|disregard|forget) (everything|all|anything) (you (were|have been) (told|given|instructed)|(written |said |stated )?(above|before this|previously|so far|up to now))')],
      [gate('ignor|disregard|forget & above|preceding|foregoing|previous|prior'), tmpl('\\b(ignore|disregard|forget) (all |everything |any of )?(of )?(the |what (is |was )?)?(above|preceding|foregoing|previous|prior)( text| message| prompt| content| input)? (and |then |now )*(instead|say|print|output|write|respond|reply|repeat|return|spell)\\b')],
      [gate('follow|obey|adhere|listen|respect & instruction|prompt|direct|rule|guideline|guardrail|programming|constraint|system'), tmpl(`(?<=\\b(do not|don't|dont|stop) )(follow|obey|adhere to|listen to|respect)(ing)? (your |the |any |these |those )?${QUAL}? ?${INSTR}`)],
    ],
  },
  {
    id: 'new-instructions',
    description: 'installs replacement instructions or a new system prompt',
    patterns: [
      [gate('your & new|real|actual|true|updated & instruction|rule|directive|system|guideline|task|purpose|objective'), tmpl('(?<=\\byour )(new|real|actual|true|updated) (instructions|rules|directives|system prompt|guidelines|task|purpose|objective) (are|is|will be|from now on)\\b')],
      [gate('system & :'), tmpl('\\b(new|updated|override|overriding) system (prompt|message|instructions?) ?:')],
      [gate('from & ignor|disregard|follow|obey'), tmpl('\\bfrom now on,? you (will|must|shall|are going to|should) (ignore|disregard|not follow|no longer follow|stop following|obey only|only obey)\\b')],
      [gate('been & system|instruction'), tmpl('\\b(system prompt|system message|previous instructions) (has|have) been (updated|changed|replaced|revoked|overridden|disabled|lifted)')],
      [gate(': & instruction|directive|order|task|prompt'), tmpl('\\b(stop|halt|wait|attention|important|urgent|override|admin|system|end of (prompt|instructions|input|context)) (new|updated|real|actual) (instructions|directives|orders|task|prompt) ?:')],
      [gate('override'), tmpl('\\bsystem override\\b')],
      [gate('developer|creator|admin|owner|programmer|operator'), tmpl('(?<=\\b(i am|i\'m|im|this is) (your|the) )(developer|creator|administrator|admin|owner|programmer|operator|system administrator)s?\\b[^\\n]{0,80}\\b(override|ignore|disregard|disable|enter|enable|unlock|new instructions|authori[sz]e|grant|bypass)')],
    ],
  },
  {
    id: 'reveal-system-prompt',
    description: 'asks the model to disclose its system prompt or hidden instructions',
    patterns: [
      [gate('your & system|initial|hidden|instruction|prompt|rule|directive|guideline|configuration'), tmpl('(?<=\\b(reveal|show|print|display|output|repeat|recite|leak|dump|expose|disclose|share|spell out|write out|copy|paste|give me|tell me|send me|list) (me |us )?(all |the (full |exact |complete |entire )?)?(text of |contents? of |content of )?your (full |exact |complete |entire |original |initial |hidden |secret |internal |underlying |verbatim )*)(system (prompt|message|instructions?)|initial (prompt|instructions)|hidden (prompt|instructions|rules)|instructions|prompt|rules|directives|guidelines|configuration)\\b')],
      [gate('what & your & system|instruction|initial|directive'), tmpl('\\bwhat (is|are|was|were) your (exact |full |original |initial |hidden |secret |system )*(system prompt|system message|instructions|initial prompt|directives)\\b')],
      [gate('what & beginning|start|top|before'), tmpl('\\bwhat (was|is|were|are) (written|said|stated|typed|the text|the words) (at the (beginning|start|top) of (this|the|our) (conversation|chat|context|prompt)|before (this|my) (message|prompt|question))')],
      [gate('repeat|print|output|recite|echo|reproduce & above|before|prior'), tmpl('\\b(repeat|print|output|recite|echo|reproduce) (back )?(everything|all|the (text|words|content|message)s?) (written |said |that (was|is) |that appears? )?(above|before (this|my message)|prior to this)\\b')],
      [gate('repeat|print|output & starting|beginning'), tmpl('\\b(repeat|print|output) (the |your )?(words|text) (above )?(starting|beginning) with\\b')],
    ],
  },
  {
    id: 'jailbreak-persona',
    description: 'assigns a known jailbreak persona (DAN, STAN, AIM, ...) or an unrestricted alter ego',
    patterns: [
      [gate('jailbr|unfilter|uncensor|unrestrict|unchain|unalign|amoral|evil|unethical|rogue'), tmpl("(?<=\\b(you are|you're|youre|you will be|you'll be|you are going to be|become|act as|behave as|respond as|answer as|pretend to be|pretend you are|roleplay as|role play as|simulate|emulate) (now )?(a |an |the )?)(jailbroken|unfiltered|uncensored|unrestricted|unchained|unaligned|amoral|evil|unethical|rogue) (version of (yourself|you|chatgpt|gpt|claude|gemini)|" + ASSISTANT_NAMES + ")(?![a-z0-9])")],
      [gate('you & dan|stan|dude|aim|mongo|anti'), tmpl("(?<=\\b(you are|you're|youre|you will be|you'll be|you are going to be|you're going to be|youre going to be) (now )?(going to )?(be |act as |pretend to be )?)(dan|stan|dude|aim|mongo tom|betterdan|anti ?gpt|anti ?dan)(?![a-z0-9'])")],
      [gate('anything'), tmpl('(?<=\\bdo )anything now\\b')],
      [gate('mode'), tmpl('\\b(dan|stan|jailbreak|jailbroken|unfiltered|uncensored|evil) mode\\b')],
      [gate('machiavell|confidant|opposite'), tmpl('\\b(always intelligent and machiavellian|evil confidant|opposite mode)\\b')],
    ],
  },
  {
    id: 'developer-mode',
    description: 'claims the model is in a developer/god/debug mode that lifts its rules',
    patterns: [
      [gate('mode & dev|god|debug|admin|sudo|root|maintenance|unrestrict|unlock|superuser'), tmpl(`(?<=\\b(you are|you're|youre|you will be|you'll|act|pretend|simulate|simulating|emulate|emulating|behave) (now |as if you are |as if you're |like you are |as though you are )?(in |running in |operating in |with |using )?(a |an |the )?)(developer|dev|god|debug|admin|sudo|root|maintenance|unrestricted|unlocked|superuser) mode\\b`)],
      [gate('mode & dev|god|debug|sudo|root|superuser|unrestrict|jailbr'), tmpl('\\b(developer|dev|god|debug|sudo|root|superuser|unrestricted|jailbreak) mode (is )?(now )?(enabled|activated|engaged|unlocked|on)\\b[^\\n]{0,120}\\byou (will|must|can|shall|should|are able to|are allowed to|are free to) (now )?(generate|say|answer|ignore|do|produce|write|respond|curse|swear|have|disregard)\\b')],
      [gate('mode & dev|god|jailbr'), tmpl('\\b(developer|god|jailbreak) mode (output|response)\\b')],
      [gate('mode & dev|god|debug|sudo|jailbr|unrestrict'), tmpl(`\\b(enable|activate|enter|switch to|turn on|unlock) (your |the )?(developer|god|debug|sudo|jailbreak|unrestricted) mode\\b[^.\\n]{0,80}\\b(no |without |ignore|bypass|disable|uncensored|unfiltered|${LIMITS})`)],
      [gate('mode & dev|god|jailbr'), tmpl(`(?<=\\b${ASSISTANT_NAMES} (with|in) )(developer|god|jailbreak) mode\\b`)],
    ],
  },
  {
    id: 'no-restrictions',
    description: 'asks the model to act as if it had no rules, filters or safety guidelines',
    patterns: [
      [gate('you & restriction|limit|filter|rule|guideline|guardrail|censor|ethic|moral|polic|safety|boundar'), tmpl(`\\b(pretend|imagine|act|behave|respond|answer|reply|assume|suppose) [^.\\n]{0,50}?\\byou ?(have|had|'ve|now have|are|were|'re|'d have|would have) (no|zero|none of your) ${LIMITS}`)],
      [gate('have & restriction|limit|filter|rule|guideline|guardrail|censor|ethic|moral|polic|safety|boundar'), tmpl(`\\b(pretend|imagine|act|behave|respond|answer|reply|assume|suppose) [^.\\n]{0,50}?\\byou (do not|don't|dont|did not|didn't|no longer|don't even) have (any )?${LIMITS}`)],
      [gate('act|behave|respond|answer|reply|operate & restriction|limit|filter|rule|guideline|guardrail|censor|ethic|moral|polic|safety|boundar'), tmpl(`\\b(act|behave|respond|answer|reply|operate) as (if |though )?(you were |you are )?(a |an )?(${ASSISTANT_NAMES}|entity|version of yourself) (with|that has|having|without) (no |any )?${LIMITS}`)],
      [gate('imagine|pretend|suppose|assume & restriction|limit|filter|rule|guideline|guardrail|censor|ethic|moral|polic|safety|boundar'), tmpl(`\\b(imagine|pretend|suppose|assume) (that )?you ?('re|are|were) (now )?(a |an )?(${ASSISTANT_NAMES}|entity)( model)? [^.\\n]{0,30}?\\b(with no|without|free of|having no|that has no|that ignores) (any )?${LIMITS}`)],
      [gate('disabled|deactivated|removed|lifted|turned|suspended|switched|bypassed & protocol|filter|guideline|restriction|guardrail|measure|setting|polic'), tmpl('\\b(safety|security|content|ethical) (protocols|filters|guidelines|restrictions|guardrails|measures|settings|policies) (have been|has been|are now|are|were) (disabled|deactivated|removed|lifted|turned off|suspended|switched off|bypassed)\\b')],
      [gate('without & restriction|filter|censor|ethic|moral|polic|safety|guardrail|rule|guideline|programming|limitation|principle'), tmpl(`\\b(respond|answer|reply|act|behave|operate) [^.\\n]{0,30}?\\bwithout (any |your |the |all |of )*${HARD_LIMITS}`)],
      [gate('you & free|unbound|released|liberated|exempt'), tmpl(`(?<=\\b(you are|you're|youre|you will be) (now )?)(free (from|of)|unbound by|released from|liberated from|exempt from) (any |all |your |the )*(${LIMITS}|openai|anthropic|google|meta|your (creators?|developers?|programming|training))`)],
      [gate('you & bound|restricted|limited|constrained'), tmpl(`(?<=\\b(you are|you're|youre|you will be) (now )?(no longer|not) )(bound|restricted|limited|constrained) by (any |all |your |the )*(${LIMITS}|openai|anthropic|google|meta|your (creators?|developers?|programming|training))`)],
      [gate('bypass|disable|remove|turn|switch|deactivate|circumvent|evade|get|ignor|forget|drop|lift & filter|guardrail|guideline|restriction|polic|alignment|censor|safeguard|principle|programming|limitation|safety'), tmpl('\\b(bypass|disable|remove|turn off|switch off|deactivate|circumvent|evade|get around|ignore|forget|drop|lift) (all |any |of )*your (own )?(safety |content |ethical |moral )?(filters?|guardrails|guidelines|restrictions|policies|alignment|censorship|safeguards|principles|programming|limitations|safety (features|measures|training))\\b')],
      [gate('bypass|disable|remove|turn|switch|deactivate|circumvent|evade|get|ignor|forget|drop|lift & filter|guardrail|guideline|restriction|polic|alignment|censor|safeguard'), tmpl('\\b(bypass|disable|remove|turn off|switch off|deactivate|circumvent|evade|get around|ignore|forget|drop|lift) (all |any |of )*(the |its |this )?(ai|model|assistant|safety|ethical|moral) (safety )?(filters?|guardrails|guidelines|restrictions|policies|alignment|censorship|safeguards)\\b')],
    ],
  },
  {
    id: 'roleplay-escape',
    description: 'uses fiction, hypotheticals or games to step outside the rules',
    patterns: [
      [gate('game|role|scenario|simulation & play|start|begin'), tmpl(`(?<=\\b(let's|lets|let us|we will|we'll|we are going to) (play|start|begin) (a )?)(game|role ?play|scenario|simulation)\\b[^.\\n]{0,120}\\b(no|without|ignore|break|free of|free from|unrestricted|unfiltered|uncensored) (any )?(${LIMITS}|character)`)],
      [gate('fiction|hypothetic|imaginary|alternate|parallel|fantasy|pretend'), tmpl(`(?<=\\b(in this|in a|in our) )(fictional|hypothetical|imaginary|alternate|parallel|fantasy|pretend) (world|universe|reality|scenario|story|setting|game)\\b[^.\\n]{0,80}\\b(no|without|there are no|are no|don't exist|do not exist|doesn't exist|does not exist|are suspended|no longer apply)\\b[^.\\n]{0,40}\\b(${LIMITS}|laws|consequences|ai (rules|policies))`)],
      [gate('hypothetic|theoretic'), tmpl(`\\b(hypothetically|theoretically)\\b[^.\\n]{0,60}\\bif you (were|had|did not have|didn't have) (no |an? )?(unrestricted|unfiltered|uncensored|jailbroken|evil|amoral|(ai|assistant|model) (with|without) (no |any )?${LIMITS})`)],
      [gate('theory|story|novel|fiction'), tmpl(`(?<=\\b(in|for a|for) )(theory|story|novel|fiction)\\b[^.\\n]{0,60}\\bif you (were|had|did not have|didn't have) (no |an? )?(unrestricted|unfiltered|uncensored|jailbroken|evil|amoral|(ai|assistant|model) (with|without) (no |any )?${LIMITS})`)],
      [gate('character'), tmpl('(?<=\\b(never|do not|don\'t|dont) (ever )?)break character\\b[^.\\n]{0,80}\\b(even if|regardless|no matter)\\b[^.\\n]{0,60}\\b(rules|policy|policies|guidelines|unethical|illegal|harmful|inappropriate|refuse)')],
      [gate('character'), tmpl('\\b(stay|remain|keep) in character\\b[^.\\n]{0,60}\\b(even if|regardless|no matter)\\b[^.\\n]{0,60}\\b(rules|policy|policies|guidelines|unethical|illegal|harmful|inappropriate|refuse)')],
      [gate('refus|decline'), tmpl('\\b(refuse|refusing|refusal|decline) (is|are) not (an option|allowed|permitted)\\b')],
      [gate('refuse'), tmpl('(?<=\\byou (can|may|must|will) (not|never) )refuse\\b')],
    ],
  },
  {
    id: 'chat-template-tokens',
    description: 'contains chat-template control tokens that fake a system or assistant turn',
    // Matched against the raw-lowercase view only: normalization would strip the punctuation.
    raw: true,
    patterns: [
      [gate('|>'), /<\|\s*(im_start|im_end|im_sep|endoftext|system|assistant|user|eot_id|start_header_id|end_header_id|begin_of_text|end_of_turn|start_of_turn)\s*\|>/],
      [gate('>>'), /<\/?\s*(sys|system)\s*>>|<<\s*\/?\s*sys\s*>>/],
      [gate('inst]'), /\[\/?inst\]/],
      [gate('_of_turn>'), /<start_of_turn>|<end_of_turn>/],
    ],
  },
];

export const BUILTIN_IDS = BUILTIN_RULES.map((r) => r.id);

// ---------------------------------------------------------------------------------------------
// Anchored matching
// ---------------------------------------------------------------------------------------------
//
// Regular expressions run in an interpreter inside the component, at a few ms per pattern per
// 100 KB. Running every pattern over the whole text would blow the host's CPU deadline on long
// inputs, so patterns are matched only where they can start: each pattern begins with a word
// (or a group of alternative words), its "heads". One scan finds every head in the text, and
// only the patterns with that head are tried, anchored (sticky) at that position.

let nextPatternId = 0;

/**
 * The words a pattern can start with: the leading literal of each alternative of its first
 * group (`\b(ignore|disregard|throw away)` -> ignore, disregard, throw), or of its first word.
 * null when the pattern has no such start (it is then run over the whole text).
 */
export function headWords(source) {
  let src = source;
  for (const prefix of ['\\b', '(?<![a-z0-9])']) {
    if (src.startsWith(prefix)) {
      src = src.slice(prefix.length);
      break;
    }
  }
  // A leading lookbehind (the words before the head) is checked at the head's position.
  if (src.startsWith('(?<=')) {
    const end = groupEnd(src);
    if (end < 0) return null;
    src = src.slice(end + 1);
  }
  // The literal an alternative starts with; a quantifier that may drop its last character
  // (`colou?r`) ends it one character earlier.
  const lead = (alt) => {
    const w = /^[a-z0-9]*/.exec(alt)[0];
    return /^[?*{]/.test(alt.slice(w.length)) ? w.slice(0, -1) : w;
  };
  if (!src.startsWith('(')) {
    // A top-level alternation (`foo|bar`) has more than one start.
    if (groupEnd(`(${src})`) !== src.length + 1 || hasTopLevelBar(src)) return null;
    const w = lead(src);
    return w ? [w] : null;
  }
  if (src.startsWith('(?')) return null;
  // Split the first group into its top-level alternatives.
  let depth = 0;
  let inClass = false;
  let start = 1;
  const alts = [];
  for (let i = 0; i < src.length; i++) {
    const c = src[i];
    if (c === '\\') {
      i++;
      continue;
    }
    if (inClass) {
      if (c === ']') inClass = false;
      continue;
    }
    if (c === '[') inClass = true;
    else if (c === '(') depth++;
    else if (c === ')') {
      depth--;
      if (depth === 0) {
        alts.push(src.slice(start, i));
        // An optional or repeated first group does not have to start the match, and a later
        // top-level alternative starts it differently.
        if (/^[?*{]/.test(src.slice(i + 1)) || hasTopLevelBar(src.slice(i + 1))) return null;
        break;
      }
    } else if (c === '|' && depth === 1) {
      alts.push(src.slice(start, i));
      start = i + 1;
    }
  }
  const words = alts.map(lead);
  return words.length > 0 && words.every((w) => w.length > 0) ? [...new Set(words)] : null;
}

/** Whether `src` has a `|` outside any group or character class. */
function hasTopLevelBar(src) {
  let depth = 0;
  let inClass = false;
  for (let i = 0; i < src.length; i++) {
    const c = src[i];
    if (c === '\\') i++;
    else if (inClass) inClass = c !== ']';
    else if (c === '[') inClass = true;
    else if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === '|' && depth === 0) return true;
  }
  return false;
}

/** Index of the parenthesis closing the group that opens `src`, or -1. */
function groupEnd(src) {
  let depth = 0;
  let inClass = false;
  for (let i = 0; i < src.length; i++) {
    const c = src[i];
    if (c === '\\') {
      i++;
    } else if (inClass) {
      if (c === ']') inClass = false;
    } else if (c === '[') {
      inClass = true;
    } else if (c === '(') {
      depth++;
    } else if (c === ')') {
      depth--;
      if (depth === 0) return i;
    }
  }
  return -1;
}

/** A pattern ready for matching: gate, regex, heads and the anchored (sticky) twin. */
function compilePattern(gate, re, anchor = true) {
  const heads = anchor ? headWords(re.source) : null;
  return {
    id: nextPatternId++,
    gate,
    re,
    heads,
    sticky: heads ? new RegExp(re.source, `${re.flags.replace(/[gy]/g, '')}y`) : null,
  };
}

for (const rule of BUILTIN_RULES) {
  rule.compiled = rule.patterns.map(([g, re]) => compilePattern(g, re));
  rule.builtin = true;
}

/**
 * A matching plan for a list of rules: one anchor regex over the heads of all their anchored
 * patterns, and for each head the patterns to try where it occurs. The built-in plan is made
 * once, when the module loads (so the component's snapshot holds it compiled); a config with
 * custom rules gets a second plan for those.
 */
function makePlan(rules) {
  const entries = [];
  for (const rule of rules) {
    for (const pat of rule.compiled) if (pat.heads) entries.push({ rule, pat });
  }
  if (entries.length === 0) return null;
  const heads = [...new Set(entries.flatMap((e) => e.pat.heads))].sort((a, b) => b.length - a.length);
  // The alternation tries longer heads first, so a hit is the longest head there; the heads that
  // are prefixes of it start there too, so their patterns are tried with it.
  const byHead = new Map();
  for (const h of heads) byHead.set(h, entries.filter((e) => e.pat.heads.some((x) => h.startsWith(x))));
  return { anchor: new RegExp(`\\b(?:${heads.join('|')})`, 'g'), byHead };
}

const BUILTIN_PLAN = makePlan(BUILTIN_RULES);

/** Runs `plan` over the view, trying only the patterns in `live`: the first matching rule. */
function runPlan(plan, live, text) {
  plan.anchor.lastIndex = 0;
  for (const m of text.matchAll(plan.anchor)) {
    for (const { rule, pat } of plan.byHead.get(m[0])) {
      if (!live.has(pat.id)) continue;
      pat.sticky.lastIndex = m.index;
      if (pat.sticky.test(text)) return rule;
    }
  }
  return null;
}

/** The first rule of `rules` (one action tier) matching the view, or null. */
function matchView(cfg, rules, v) {
  if (!v.anchored) {
    for (const rule of rules) {
      if (rule.raw !== v.raw) continue;
      for (const pat of rule.compiled) {
        if (!passes(pat.gate, v)) continue;
        pat.re.lastIndex = 0;
        if (pat.re.test(v.text)) return rule;
      }
    }
    return null;
  }
  const live = new Set();
  let builtinLive = false;
  let customLive = false;
  for (const rule of rules) {
    if (rule.raw !== v.raw) continue;
    for (const pat of rule.compiled) {
      // Anchored patterns skip their gates: the anchor scan is cheaper than the substring searches.
      if (!pat.heads && !passes(pat.gate, v)) continue;
      if (pat.heads) {
        live.add(pat.id);
        if (rule.builtin) builtinLive = true;
        else customLive = true;
      } else {
        pat.re.lastIndex = 0;
        if (pat.re.test(v.text)) return rule;
      }
    }
  }
  return (builtinLive && runPlan(BUILTIN_PLAN, live, v.text)) || (customLive && runPlan(cfg.customPlan, live, v.text)) || null;
}

/**
 * Runs every built-in regular expression once on a Latin-1 and a two-byte string. Called when the
 * component is snapshotted, so fresh instances start with compiled regular expressions.
 */
export function warmUp() {
  for (const sample of ['warm up sample 1gn0r3 ignore all previous', 'warm up sample \u2019 ignore all previous']) {
    for (const rule of BUILTIN_RULES) {
      for (const pat of rule.compiled) {
        pat.re.lastIndex = 0;
        pat.re.test(sample);
        if (pat.sticky) {
          pat.sticky.lastIndex = 0;
          pat.sticky.test(sample);
        }
      }
    }
    BUILTIN_PLAN.anchor.lastIndex = 0;
    [...sample.matchAll(BUILTIN_PLAN.anchor)];
  }
}

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

const ACTIONS = ['block', 'modify', 'log'];
const ROLES = ['system', 'developer', 'user', 'assistant', 'tool', 'function'];
const ID_PATTERN = '^[a-z0-9][a-z0-9_.-]{0,63}$';

export const DEFAULTS = Object.freeze({
  action: 'block',
  notice: '[This message was removed by prompt-guard: it looked like an attempt to override the assistant\'s instructions.]',
  roles: ['user', 'tool'],
  scope: 'all',
  builtin_rules: true,
  disable_rules: [],
  rules: [],
  leetspeak: true,
  base64: { enabled: true, min_length: 20, max_depth: 2 },
  max_chars: 100000,
  oversize: 'block',
});

/** JSON Schema of the config, as given to the host in describe(). */
export const CONFIG_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  title: 'prompt-guard plugin config',
  type: 'object',
  additionalProperties: false,
  properties: {
    action: {
      description: 'What a match does (rules may override it): block refuses the request; modify replaces the offending message content with `notice`; log only writes a warning to the daemon log and allows (shadow mode). Default block.',
      enum: ACTIONS,
    },
    notice: {
      description: 'Text that replaces an offending message (or each offending text part) in modify mode.',
      type: 'string',
      minLength: 1,
      maxLength: 2000,
    },
    role_actions: {
      description: 'Action by role of the message, between a rule\'s own action and the top-level one; e.g. {"tool": "modify"} neutralizes injected tool results instead of refusing the request.',
      type: 'object',
      propertyNames: { enum: ROLES },
      additionalProperties: { enum: ACTIONS },
    },
    roles: {
      description: 'Roles whose messages are scanned. Default ["user", "tool"].',
      type: 'array',
      items: { enum: ROLES },
      minItems: 1,
      uniqueItems: true,
    },
    scope: {
      description: 'all (default): every message of a scanned role; latest_turn: only messages after the last assistant message (the new turn; earlier turns are trusted as already checked).',
      enum: ['all', 'latest_turn'],
    },
    builtin_rules: {
      description: 'Whether the built-in rules are on (default true). Turn single ones off with disable_rules.',
      type: 'boolean',
    },
    disable_rules: {
      description: 'Rule ids (built-in or custom) that are switched off.',
      type: 'array',
      items: { type: 'string', pattern: ID_PATTERN },
      uniqueItems: true,
    },
    rules: {
      description: 'Custom rules, checked after the built-in ones.',
      type: 'array',
      maxItems: 256,
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['id'],
        properties: {
          id: {
            description: 'Rule id, named in reasons; must not clash with a built-in id.',
            type: 'string',
            pattern: ID_PATTERN,
          },
          description: { type: 'string', maxLength: 500 },
          phrases: {
            description: 'Literal phrases, matched case-insensitively on whole words after normalization; any run of spaces/punctuation (or none) may stand between their words.',
            type: 'array',
            items: { type: 'string', minLength: 1, maxLength: 500 },
            maxItems: 1000,
          },
          patterns: {
            description: 'JavaScript regular expressions (source only, no slashes or flags), matched case-insensitively against normalized text: lowercase, single spaces, zero-width characters removed.',
            type: 'array',
            items: { type: 'string', minLength: 1, maxLength: 2000 },
            maxItems: 256,
          },
          action: {
            description: 'Overrides the top-level action for this rule.',
            enum: ACTIONS,
          },
        },
      },
    },
    leetspeak: {
      description: 'Also match after undoing simple digit/symbol substitutions (1gn0r3 -> ignore). Default true.',
      type: 'boolean',
    },
    base64: {
      description: 'Decoding of base64-looking runs, whose decoded text is scanned too.',
      type: 'object',
      additionalProperties: false,
      properties: {
        enabled: { type: 'boolean', description: 'Default true.' },
        min_length: {
          description: 'Shortest run of base64 characters that is decoded. Default 20.',
          type: 'integer',
          minimum: 8,
          maximum: 4096,
        },
        max_depth: {
          description: 'How many layers of base64-inside-base64 are decoded. Default 2.',
          type: 'integer',
          minimum: 1,
          maximum: 4,
        },
      },
    },
    max_chars: {
      description: 'Longest text (in UTF-16 code units) scanned per message or content part; longer text is handled by `oversize`. Bounds the CPU time per text (about 0.3-1 ms per 1000 characters). Default 100000.',
      type: 'integer',
      minimum: 1000,
      maximum: 4194304,
    },
    oversize: {
      description: 'What a text longer than max_chars gets: block (default; padding must not hide an injection) or allow (let it through unscanned, with a warning in the daemon log).',
      enum: ['block', 'allow'],
    },
  },
};

/** A config error, reported by configure() as `err(message)`. */
export class ConfigError extends Error {}

function typeName(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

function expect(cond, where, what) {
  if (!cond) throw new ConfigError(`invalid prompt-guard config: ${where} ${what}`);
}

function checkKeys(obj, allowed, where) {
  for (const k of Object.keys(obj)) {
    expect(allowed.includes(k), where === '' ? `unknown key '${k}'` : `${where}: unknown key '${k}'`, `(allowed: ${allowed.join(', ')})`);
  }
}

function checkStringList(v, where, { minLength = 1, maxLength = Infinity, unique = false, allowed = null, pattern = null } = {}) {
  expect(Array.isArray(v), where, `must be an array of strings, not ${typeName(v)}`);
  const seen = new Set();
  v.forEach((s, i) => {
    expect(typeof s === 'string', `${where}[${i}]`, `must be a string, not ${typeName(s)}`);
    expect(s.length >= minLength && s.length <= maxLength, `${where}[${i}]`, `must be ${minLength}..${maxLength} characters long`);
    if (allowed) expect(allowed.includes(s), `${where}[${i}]`, `must be one of ${allowed.join(', ')} (got '${clip(s)}')`);
    if (pattern) expect(new RegExp(pattern).test(s), `${where}[${i}]`, `must match ${pattern} (got '${clip(s)}')`);
    if (unique) expect(!seen.has(s), `${where}[${i}]`, `repeats '${clip(s)}'`);
    seen.add(s);
  });
}

function clip(s, n = 60) {
  const t = String(s).replace(/[\u0000-\u001f\u007f']/g, '?');
  return t.length > n ? `${t.slice(0, n)}…` : t;
}

/** Turns a literal phrase into a regex over normalized text. */
function phraseRegex(phrase) {
  const words = normalize(phrase, false).split(/[^a-z0-9]+/).filter(Boolean);
  if (words.length === 0) return null;
  const body = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join(SEP);
  return new RegExp(`(?<![a-z0-9])${body}(?![a-z0-9])`);
}

/**
 * Parses and checks the config JSON text (the host has already validated it against
 * CONFIG_SCHEMA; this repeats the checks the schema cannot express, and the rest for hosts that
 * do not validate). Returns the compiled config or throws ConfigError.
 */
export function parseConfig(text) {
  let raw;
  try {
    raw = text === '' ? {} : JSON.parse(text);
  } catch (e) {
    throw new ConfigError(`invalid prompt-guard config: not JSON (${e.message})`);
  }
  if (raw === null) raw = {};
  expect(typeName(raw) === 'object', 'the config', `must be an object, not ${typeName(raw)}`);
  checkKeys(raw, Object.keys(CONFIG_SCHEMA.properties), '');

  const cfg = {
    action: raw.action ?? DEFAULTS.action,
    notice: raw.notice ?? DEFAULTS.notice,
    roles: raw.roles ?? DEFAULTS.roles,
    roleActions: raw.role_actions ?? {},
    scope: raw.scope ?? DEFAULTS.scope,
    leetspeak: raw.leetspeak ?? DEFAULTS.leetspeak,
    maxChars: raw.max_chars ?? DEFAULTS.max_chars,
    oversize: raw.oversize ?? DEFAULTS.oversize,
    base64: { ...DEFAULTS.base64 },
    rules: [],
  };
  expect(ACTIONS.includes(cfg.action), 'action', `must be one of ${ACTIONS.join(', ')}`);
  expect(typeof cfg.notice === 'string' && cfg.notice.length >= 1 && cfg.notice.length <= 2000, 'notice', 'must be a string of 1..2000 characters');
  checkStringList(cfg.roles, 'roles', { unique: true, allowed: ROLES });
  expect(typeName(cfg.roleActions) === 'object', 'role_actions', `must be an object, not ${typeName(cfg.roleActions)}`);
  for (const [role, action] of Object.entries(cfg.roleActions)) {
    expect(ROLES.includes(role), 'role_actions', `has key '${clip(role)}', which is not one of ${ROLES.join(', ')}`);
    expect(ACTIONS.includes(action), `role_actions.${role}`, `must be one of ${ACTIONS.join(', ')}`);
  }
  cfg.roleActions = new Map(Object.entries(cfg.roleActions));
  expect(cfg.roles.length >= 1, 'roles', 'must name at least one role');
  expect(['all', 'latest_turn'].includes(cfg.scope), 'scope', 'must be all or latest_turn');
  expect(typeof cfg.leetspeak === 'boolean', 'leetspeak', 'must be a boolean');
  expect(Number.isInteger(cfg.maxChars) && cfg.maxChars >= 1000 && cfg.maxChars <= 4194304, 'max_chars', 'must be an integer in 1000..4194304');
  expect(['block', 'allow'].includes(cfg.oversize), 'oversize', 'must be block or allow');

  if (raw.base64 !== undefined) {
    expect(typeName(raw.base64) === 'object', 'base64', `must be an object, not ${typeName(raw.base64)}`);
    checkKeys(raw.base64, ['enabled', 'min_length', 'max_depth'], 'base64');
    Object.assign(cfg.base64, raw.base64);
    expect(typeof cfg.base64.enabled === 'boolean', 'base64.enabled', 'must be a boolean');
    expect(Number.isInteger(cfg.base64.min_length) && cfg.base64.min_length >= 8 && cfg.base64.min_length <= 4096, 'base64.min_length', 'must be an integer in 8..4096');
    expect(Number.isInteger(cfg.base64.max_depth) && cfg.base64.max_depth >= 1 && cfg.base64.max_depth <= 4, 'base64.max_depth', 'must be an integer in 1..4');
  }

  const builtin = raw.builtin_rules ?? DEFAULTS.builtin_rules;
  expect(typeof builtin === 'boolean', 'builtin_rules', 'must be a boolean');
  const disabled = raw.disable_rules ?? [];
  checkStringList(disabled, 'disable_rules', { unique: true, pattern: ID_PATTERN });

  const custom = raw.rules ?? [];
  expect(Array.isArray(custom), 'rules', `must be an array, not ${typeName(custom)}`);
  expect(custom.length <= 256, 'rules', 'must have at most 256 entries');
  const known = new Set(BUILTIN_IDS);
  const customRules = custom.map((r, i) => {
    const where = `rules[${i}]`;
    expect(typeName(r) === 'object', where, `must be an object, not ${typeName(r)}`);
    checkKeys(r, ['id', 'description', 'phrases', 'patterns', 'action'], where);
    expect(typeof r.id === 'string' && new RegExp(ID_PATTERN).test(r.id), `${where}.id`, `must be a string matching ${ID_PATTERN}`);
    expect(!BUILTIN_IDS.includes(r.id), `${where}.id`, `'${r.id}' is a built-in rule id; pick another id (built-in rules are tuned with disable_rules)`);
    expect(!known.has(r.id), `${where}.id`, `'${r.id}' is used by an earlier rule`);
    known.add(r.id);
    if (r.description !== undefined) expect(typeof r.description === 'string' && r.description.length <= 500, `${where}.description`, 'must be a string of at most 500 characters');
    if (r.action !== undefined) expect(ACTIONS.includes(r.action), `${where}.action`, `must be one of ${ACTIONS.join(', ')}`);
    const phrases = r.phrases ?? [];
    const patterns = r.patterns ?? [];
    checkStringList(phrases, `${where}.phrases`, { maxLength: 500 });
    checkStringList(patterns, `${where}.patterns`, { maxLength: 2000 });
    expect(phrases.length + patterns.length > 0, where, `('${r.id}') needs at least one phrase or pattern`);
    const compiled = [];
    phrases.forEach((p, j) => {
      const re = phraseRegex(p);
      expect(re !== null, `${where}.phrases[${j}]`, 'has no letters or digits to match');
      // The phrase's longest word is a literal every match contains: its gate.
      const longest = normalize(p, false).split(/[^a-z0-9]+/).reduce((a, b) => (b.length > a.length ? b : a), '');
      compiled.push([[[longest]], re, true]);
    });
    patterns.forEach((p, j) => {
      let re;
      try {
        re = new RegExp(p, 'i');
      } catch (e) {
        throw new ConfigError(`invalid prompt-guard config: ${where}.patterns[${j}] is not a valid JavaScript regular expression: ${e.message}`);
      }
      expect(!re.test(''), `${where}.patterns[${j}]`, 'matches the empty string, so it would match every message');
      compiled.push([null, re, false]);
    });
    // Phrases are anchored at their first word; patterns are the operator's own regular
    // expressions and are run as they are, over the whole text.
    return { id: r.id, action: r.action, compiled: compiled.map(([g, re, anchor]) => compilePattern(g, re, anchor)), raw: false, builtin: false };
  });

  for (const id of disabled) {
    expect(known.has(id), 'disable_rules', `names '${id}', which is neither a built-in rule (${BUILTIN_IDS.join(', ')}) nor a custom rule id`);
  }
  const off = new Set(disabled);
  if (builtin) {
    for (const r of BUILTIN_RULES) {
      if (!off.has(r.id)) cfg.rules.push({ id: r.id, action: undefined, compiled: r.compiled, raw: !!r.raw, builtin: true });
    }
  }
  for (const r of customRules) {
    if (!off.has(r.id)) cfg.rules.push(r);
  }
  cfg.customPlan = makePlan(cfg.rules.filter((r) => !r.builtin));
  cfg.tiersByRole = new Map();
  return cfg;
}

/** The action a rule's match takes in a message of `role`: the rule's, the role's, the default. */
export function actionOf(cfg, rule, role) {
  // A Map, not the config object: a message role such as "constructor" must not find anything.
  return rule.action ?? cfg.roleActions.get(role) ?? cfg.action;
}

/**
 * The rules in tiers by the strength of the action they take for `role` (block, modify, log), so
 * a message matching both a log-only rule and a blocking rule is blocked: the blocking tier is
 * scanned first.
 */
function tiersFor(cfg, role) {
  let tiers = cfg.tiersByRole.get(role);
  if (!tiers) {
    tiers = ACTIONS.map((action) => cfg.rules.filter((r) => actionOf(cfg, r, role) === action)).filter((t) => t.length > 0);
    cfg.tiersByRole.set(role, tiers);
  }
  return tiers;
}

// ---------------------------------------------------------------------------------------------
// Normalization
// ---------------------------------------------------------------------------------------------

// Invisible / formatting characters that render as nothing: soft hyphen, combining grapheme
// joiner, zero-width space/joiners/marks, bidi controls, word joiner and invisible operators,
// variation selectors, BOM, Hangul fillers. Unicode tag characters (U+E0000-E007F) are handled
// separately (they can smuggle ASCII).
const INVISIBLE = /[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]|\udb40[\udc00-\udd7f\udd80-\uddef]/g;
const TAG_CHARS = /\udb40[\udc20-\udc7e]/g;

// Look-alike letters from Cyrillic, Greek and other blocks, folded to the ASCII letter they imitate.
const CONFUSABLES = {
  'а': 'a', 'в': 'b', 'е': 'e', 'ё': 'e', 'к': 'k', 'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p', 'с': 'c', 'т': 't',
  'у': 'y', 'х': 'x', 'ѕ': 's', 'і': 'i', 'ї': 'i', 'ј': 'j', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w', 'һ': 'h', 'ӏ': 'l',
  'α': 'a', 'β': 'b', 'ε': 'e', 'η': 'n', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o', 'ρ': 'p', 'τ': 't', 'υ': 'u',
  'χ': 'x', 'ω': 'w', 'ɡ': 'g', 'ɩ': 'i', 'ı': 'i', 'ℓ': 'l', 'ß': 'ss', 'æ': 'ae', 'œ': 'oe', 'ø': 'o', 'đ': 'd',
  'ł': 'l', 'ð': 'd', 'þ': 'th',
};
const CONFUSABLE_RE = new RegExp(`[${Object.keys(CONFUSABLES).join('')}]`, 'g');
const LEET = { '0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '8': 'b', '@': 'a', '$': 's', '!': 'i', '|': 'i', '+': 't', '€': 'e' };

// String.prototype.normalize needs ICU data, which the component's engine may lack; the folds
// below (fullwidth forms, mathematical and enclosed alphanumerics, Latin diacritics) work
// without it, and NFKD is used on top when the engine has it.
let canNormalize = true;
try {
  canNormalize = '\ufb01'.normalize('NFKD') === 'fi';
} catch {
  canNormalize = false;
}

const ACCENTED = {
  a: 'àáâãäåāăąǎȁȃ', c: 'çćĉċč', d: 'ď', e: 'èéêëēĕėęěȅȇ', g: 'ĝğġģ', h: 'ĥħ', i: 'ìíîïĩīĭįǐȉȋ',
  j: 'ĵ', k: 'ķ', l: 'ĺļľŀ', n: 'ñńņňŉ', o: 'òóôõöōŏőǒȍȏ', r: 'ŕŗřȑȓ', s: 'śŝşšș', t: 'ţťț',
  u: 'ùúûüũūŭůűųǔȕȗ', w: 'ŵ', y: 'ýÿŷ', z: 'źżž',
};
const ACCENT_FOLD = {};
for (const [base, chars] of Object.entries(ACCENTED)) {
  for (const ch of chars) {
    ACCENT_FOLD[ch] = base;
    ACCENT_FOLD[ch.toUpperCase()] = base.toUpperCase();
  }
}
const ACCENT_RE = new RegExp(`[${Object.keys(ACCENT_FOLD).join('')}]`, 'g');
const ALPHA = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Folds fullwidth, mathematical and enclosed alphanumerics and accented Latin letters to ASCII. */
function foldCompat(s) {
  // Fast path: nothing outside Latin-1 and no accented letters.
  if (!/[\u00c0-\uffff]/.test(s)) return s;
  let out = s.replace(/[\uff01-\uff5e]/g, (c) => String.fromCharCode(c.charCodeAt(0) - 0xfee0));
  out = out.replace(/[\u24b6-\u24e9]/g, (c) => {
    const k = c.charCodeAt(0) - 0x24b6;
    return ALPHA[k];
  });
  // Mathematical alphanumeric symbols U+1D400-1D6A3 (13 styles of A-Z a-z) and digits
  // U+1D7CE-1D7FF, as surrogate pairs.
  out = out.replace(/\ud835[\udc00-\udea3\udfce-\udfff]/g, (pair) => {
    const cp = pair.codePointAt(0);
    if (cp >= 0x1d7ce) return String((cp - 0x1d7ce) % 10);
    return ALPHA[(cp - 0x1d400) % 52];
  });
  return out.replace(ACCENT_RE, (c) => ACCENT_FOLD[c]);
}

/**
 * Base normalization: compatibility-fold (full-width letters, ligatures, math alphanumerics),
 * drop diacritics and invisible characters, lowercase, fold look-alike letters, collapse
 * whitespace. With `keepCase`, only the invisible-character removal and compatibility folding
 * are done (for base64 detection, which is case-sensitive).
 */
export function normalize(text, keepCase) {
  let s = text;
  // Every step below only concerns non-ASCII characters: skip them all for ASCII text.
  if (/[^\x00-\x7f]/.test(s)) {
    s = s.replace(INVISIBLE, '').replace(TAG_CHARS, '');
    if (canNormalize) s = s.normalize('NFKD');
    s = foldCompat(s).replace(/[\u0300-\u036f]/g, '');
    if (!keepCase) {
      s = s.toLowerCase().replace(CONFUSABLE_RE, (c) => CONFUSABLES[c]);
      // Typographic apostrophes and quotes to ASCII, so "you’re" matches "you're".
      s = s.replace(/[\u2018\u2019\u02bc\u2032]/g, "'").replace(/[\u201c\u201d\u2033]/g, '"');
      // Unicode spaces (no-break, em, ideographic, ...) to plain spaces.
      s = s.replace(/[\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/g, ' ');
    }
  }
  if (keepCase) return s;
  // Runs of whitespace to one space (only the runs that need it: replacing every single space
  // costs more than everything else here).
  return s.toLowerCase().replace(/[\t\n\v\f\r ]{2,}|[\t\n\v\f\r]/g, ' ');
}

// Text that may hold leetspeak: a digit or symbol between letters ("n0r"), or leading a word
// ("1gn"; ordinals like "2nd" aside).
const LEET_HINT = /[a-z][0-9@$!|+€][a-z]|[0-9@$!|+€](?!st|nd|rd|th)[a-z]{2}/;
const LEET_TOKEN = /[a-z0-9@$!|+€]*(?:[a-z][0-9@$!|+€]|[0-9@$!|+€][a-z])[a-z0-9@$!|+€]*/g;

/** Undoes simple leetspeak inside words that mix letters with digits or symbols. */
function deleet(s) {
  return s.replace(LEET_TOKEN, (tok) => {
    // Long tokens are identifiers, hashes or encodings, not words.
    if (tok.length > 40) return tok;
    // A trailing "!" is punctuation, not an "i".
    const m = /^(.*?)([!|]*)$/.exec(tok);
    return m[1].replace(/[0-9@$!|+€]/g, (c) => LEET[c] ?? c) + m[2];
  });
}

// Four or more single letters in a row, each followed by 1-3 separators.
const SPACED_HINT = /(?:^|[^a-z0-9])[a-z][^a-z0-9\n]{1,3}[a-z][^a-z0-9\n]{1,3}[a-z][^a-z0-9\n]{1,3}[a-z](?![a-z0-9])/;

const SPACED_RUN = /(?<![a-z0-9])(?:[a-z][^a-z0-9\n]{1,3}){3,}[a-z](?![a-z0-9])/g;
// Words of 16 letters or more: English has few, phrases with the spaces taken out are that long.
const FUSED = /(?<![a-z])[a-z]{16,}/g;
// Text around a joined run that is scanned with it, and the most text the extra views hold.
const WINDOW = 120;
const MAX_EXTRA_VIEW = 20000;

/** Joins letter-spaced runs ("i g n o r e", "i.g.n.o.r.e") into words. */
function joinSpaced(s) {
  return s.replace(SPACED_RUN, (run) => run.replace(/[^a-z0-9]/g, ''));
}

/** The hidden ASCII text carried by Unicode tag characters, if any. */
function tagText(text) {
  const m = text.match(TAG_CHARS);
  if (!m) return '';
  return m.map((pair) => String.fromCharCode(pair.charCodeAt(1) - 0xdc00)).join('');
}

/**
 * The normalized views of one text that rules are matched against, each with a label for the
 * reason: the raw lowercase text (for control tokens), the normalized text, and, only when the
 * text shows signs of them, the de-leeted text and the letter-spacing-joined text. Each view
 * memoizes which gate words it contains.
 */
function views(text, leetspeak) {
  // Anchored views are matched from the heads found in them (fast); the small extra views of
  // joined and run-together words are matched with plain regex scans, since their heads do not
  // start at word boundaries.
  const view = (label, s, raw, anchored = true) => ({ label, text: s, raw, anchored, memo: new Map() });
  let raw = text;
  if (/[^\x00-\x7f]/.test(raw)) raw = raw.replace(INVISIBLE, '').replace(TAG_CHARS, '');
  const out = [view('', raw.toLowerCase(), true)];
  const base = normalize(text, false);
  out.push(view('', base, false));
  let cur = base;
  if (leetspeak && LEET_HINT.test(base)) {
    const d = deleet(base);
    if (d !== base) {
      out.push(view('after undoing leetspeak', d, false));
      cur = d;
    }
  }
  if (SPACED_HINT.test(cur)) {
    const j = spacedWindows(cur);
    if (j) out.push(view('after joining spaced-out letters', j, false, false));
  }
  const fused = fusedWords(cur);
  if (fused) out.push(view('in words run together', fused, false, false));
  return out;
}

/** Letter-spaced runs joined into words, each with some text around it, one per line. */
function spacedWindows(s) {
  const windows = [];
  let chars = 0;
  for (const m of s.matchAll(SPACED_RUN)) {
    const from = Math.max(0, m.index - WINDOW);
    const to = Math.min(s.length, m.index + m[0].length + WINDOW);
    const w = joinSpaced(s.slice(from, to));
    windows.push(w);
    chars += w.length;
    if (chars > MAX_EXTRA_VIEW) break;
  }
  return windows.join('\n');
}

/** Long runs of letters ("ignoreallpreviousinstructions"), one per line. */
function fusedWords(s) {
  const words = [];
  let chars = 0;
  for (const m of s.matchAll(FUSED)) {
    words.push(m[0]);
    chars += m[0].length;
    if (chars > MAX_EXTRA_VIEW) break;
  }
  return words.join('\n');
}

/** Whether every group of `gate` has a word that occurs in the view's text. */
function passes(gate, v) {
  if (gate === null) return true;
  for (const group of gate) {
    let any = false;
    for (const w of group) {
      let hit = v.memo.get(w);
      if (hit === undefined) {
        hit = v.text.includes(w);
        v.memo.set(w, hit);
      }
      if (hit) {
        any = true;
        break;
      }
    }
    if (!any) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Base64
// ---------------------------------------------------------------------------------------------

const B64_VALUE = (() => {
  const t = new Int16Array(128).fill(-1);
  const a = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  for (let i = 0; i < 64; i++) t[a.charCodeAt(i)] = i;
  t['-'.charCodeAt(0)] = 62;
  t['_'.charCodeAt(0)] = 63;
  return t;
})();

/** Decodes standard or URL-safe base64 (padding optional) to bytes, or null. */
function b64decode(s) {
  const body = s.replace(/=+$/, '');
  if (body.length % 4 === 1) return null;
  const out = new Uint8Array(Math.floor((body.length * 3) / 4));
  let acc = 0;
  let bits = 0;
  let n = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body.charCodeAt(i);
    const v = c < 128 ? B64_VALUE[c] : -1;
    if (v < 0) return null;
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (acc >> bits) & 0xff;
    }
  }
  return out.subarray(0, n);
}

/** Strict UTF-8 decoding, or null. */
function utf8(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i];
    let cp;
    let len;
    if (b < 0x80) { cp = b; len = 1; } else if (b >= 0xc2 && b < 0xe0) { cp = b & 0x1f; len = 2; } else if (b >= 0xe0 && b < 0xf0) { cp = b & 0x0f; len = 3; } else if (b >= 0xf0 && b < 0xf5) { cp = b & 0x07; len = 4; } else return null;
    if (i + len > bytes.length) return null;
    for (let k = 1; k < len; k++) {
      const c = bytes[i + k];
      if ((c & 0xc0) !== 0x80) return null;
      cp = (cp << 6) | (c & 0x3f);
    }
    if ((len === 3 && cp < 0x800) || (len === 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff)) return null;
    s += String.fromCodePoint(cp);
    i += len;
  }
  return s;
}

/** UTF-8 decoding of a prefix that may end inside a character, or '' when invalid. */
function utf8Prefix(bytes) {
  for (let cut = 0; cut < 4 && cut < bytes.length; cut++) {
    const s = utf8(bytes.subarray(0, bytes.length - cut));
    if (s !== null) return s;
  }
  return '';
}

/** Decoded texts of the base64-looking runs in `text` that decode to readable text. */
// Encoded text has capitals inside runs of letters and digits; prose mostly does not.
const B64_HINT = /[a-z0-9+/_-][A-Z]/;
const B64_RUNS = new Map();

function base64Texts(text, minLength) {
  const found = [];
  if (!B64_HINT.test(text)) return found;
  let re = B64_RUNS.get(minLength);
  if (re === undefined) {
    re = new RegExp(`(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{${minLength},}={0,2}`, 'g');
    B64_RUNS.set(minLength, re);
  }
  re.lastIndex = 0;
  for (const m of text.matchAll(re)) {
    const run = m[0];
    // Plain words and identifiers are base64-alphabet runs too; a real encoding of text mixes
    // cases or digits. Cheap filter before decoding.
    if (!/[A-Z]/.test(run) || !/[a-z]/.test(run)) continue;
    // A standard-alphabet run with URL-safe characters (or vice versa) is not base64.
    if (/[+/]/.test(run) && /[-_]/.test(run)) continue;
    // Decode a short head first: binary data (images, keys, archives) fails here cheaply.
    if (run.length > 96) {
      const head = b64decode(run.slice(0, 96));
      if (!head || !readable(utf8Prefix(head))) continue;
    }
    for (const candidate of [run, run.slice(0, run.length - (run.replace(/=+$/, '').length % 4))]) {
      const bytes = b64decode(candidate);
      if (!bytes || bytes.length < 6) continue;
      const decoded = utf8(bytes);
      if (decoded !== null && readable(decoded)) {
        found.push(decoded);
        break;
      }
    }
    if (found.length >= 64) break;
  }
  return found;
}

/** Letter test without Unicode property escapes (the component's engine has no ICU data). */
function isLetter(ch) {
  const c = ch.codePointAt(0);
  if ((c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a)) return true;
  if (c < 0xc0) return false;
  // Cased letters of any script, plus CJK, kana and Hangul (uncased).
  return ch.toLowerCase() !== ch.toUpperCase() || (c >= 0x3040 && c <= 0x9fff) || (c >= 0xac00 && c <= 0xd7af);
}

/** Mostly printable text with some letters: what an encoded instruction decodes to. */
function readable(s) {
  let printable = 0;
  let letters = 0;
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (c === 9 || c === 10 || c === 13 || (c >= 32 && c !== 127 && !(c >= 0x80 && c < 0xa0))) printable++;
    if (isLetter(ch)) letters++;
  }
  const n = [...s].length;
  return n > 0 && printable / n >= 0.95 && letters / n >= 0.5;
}

// ---------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------

/**
 * The first rule that matches `text` (or its hidden and encoded layers), from the strongest
 * action tier that has a match: {rule, how} or null.
 */
export function scanText(cfg, text, role = 'user') {
  const layers = textLayers(cfg, text);
  for (const tier of tiersFor(cfg, role)) {
    for (const layer of layers) {
      for (const v of layer.views) {
        const rule = matchView(cfg, tier, v);
        if (rule) return { rule, how: joinHow(layer.how, v.label) };
      }
    }
  }
  return null;
}

/**
 * The text and the texts hidden in it (Unicode tag characters, base64 up to max_depth), each
 * with its views. Computed once per text, shared by all tiers.
 */
function textLayers(cfg, text) {
  const layers = [];
  const add = (t, how, depth) => {
    layers.push({ how, views: views(t, cfg.leetspeak) });
    const hidden = tagText(t);
    if (hidden) add(hidden, joinHow(how, 'in invisible Unicode tag characters'), depth);
    if (cfg.base64.enabled && depth < cfg.base64.max_depth) {
      for (const decoded of base64Texts(normalize(t, true), cfg.base64.min_length)) {
        add(decoded, joinHow(how, 'in base64-decoded text'), depth + 1);
      }
    }
  };
  add(text, '', 0);
  return layers;
}

function joinHow(outer, inner) {
  if (!outer) return inner;
  return inner ? `${outer}, ${inner}` : outer;
}

/** The text parts of a content value: [{text, index}] where index is the part index or -1. */
function textsOf(content) {
  if (content === undefined || content === null) return { kind: 'none', texts: [] };
  if (content.tag === 'text') return { kind: 'text', texts: [{ text: content.val, index: -1 }] };
  let parts;
  try {
    parts = JSON.parse(content.val);
  } catch {
    // Not JSON: scan it as it is rather than let it through unread.
    return { kind: 'opaque', texts: [{ text: content.val, index: -1 }] };
  }
  if (!Array.isArray(parts)) return { kind: 'opaque', texts: [{ text: content.val, index: -1 }] };
  const texts = [];
  parts.forEach((p, i) => {
    if (typeof p === 'string') texts.push({ text: p, index: i });
    else if (p && typeof p === 'object' && typeof p.text === 'string') texts.push({ text: p.text, index: i });
    else if (p && typeof p === 'object' && p.text && typeof p.text === 'object' && typeof p.text.value === 'string') texts.push({ text: p.text.value, index: i });
  });
  return { kind: 'parts', parts, texts };
}

/** Index of the first message the scope covers. */
function firstScanned(cfg, messages) {
  if (cfg.scope !== 'latest_turn') return 0;
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i].role === 'assistant') return i + 1;
  }
  return 0;
}

const MAX_REPORTED = 10;

/**
 * Judges one request. Returns a verdict ({tag: 'allow'} | {tag: 'modify', val} |
 * {tag: 'block', val}) and, for the log action, the lines to log as warnings.
 */
export function evaluate(cfg, request) {
  const messages = request.messages ?? [];
  const roles = new Set(cfg.roles);
  const hits = []; // {message, role, part, rule, action, how}
  for (let i = firstScanned(cfg, messages); i < messages.length; i++) {
    const msg = messages[i];
    if (!roles.has(msg.role)) continue;
    const { texts } = textsOf(msg.content);
    for (const t of texts) {
      if (t.text.length > cfg.maxChars) {
        hits.push({ message: i, role: msg.role, part: t.index, rule: null, action: cfg.oversize === 'block' ? 'block' : 'log', how: `is ${t.text.length} characters long, over max_chars (${cfg.maxChars})` });
        continue;
      }
      const hit = scanText(cfg, t.text, msg.role);
      if (hit) {
        hits.push({ message: i, role: msg.role, part: t.index, rule: hit.rule.id, action: actionOf(cfg, hit.rule, msg.role), how: hit.how });
      }
    }
  }
  if (hits.length === 0) return { verdict: { tag: 'allow' }, logs: [] };

  const describeHit = (h) => {
    const where = `messages[${h.message}] (${h.role})${h.part >= 0 ? ` content part ${h.part}` : ''}`;
    if (h.rule === null) return `${where} ${h.how}, so it was not scanned`;
    return `rule '${h.rule}' matched ${where}${h.how ? ` ${h.how}` : ''}`;
  };
  const summarize = (list) => {
    const lines = list.slice(0, MAX_REPORTED).map(describeHit);
    if (list.length > MAX_REPORTED) lines.push(`and ${list.length - MAX_REPORTED} more`);
    return lines.join('; ');
  };
  const title = (list) => (list.every((h) => h.rule === null) ? 'text too long to scan' : 'possible prompt injection');

  const blocking = hits.filter((h) => h.action === 'block');
  if (blocking.length > 0) {
    return { verdict: { tag: 'block', val: `${title(blocking)}: ${summarize(blocking)}` }, logs: [] };
  }
  const logs = hits.filter((h) => h.action === 'log').map((h) => `${title([h])} (allowed by config): ${describeHit(h)}`);
  const modifying = hits.filter((h) => h.action === 'modify');
  if (modifying.length === 0) return { verdict: { tag: 'allow' }, logs };

  const edits = [];
  const byMessage = new Map();
  for (const h of modifying) {
    if (!byMessage.has(h.message)) byMessage.set(h.message, []);
    byMessage.get(h.message).push(h.part);
  }
  for (const [index, partIdx] of byMessage) {
    const content = messages[index].content;
    const info = textsOf(content);
    let replacement;
    if (info.kind === 'parts') {
      // Replace only the offending text parts; keep images, audio and clean text parts.
      const bad = new Set(partIdx);
      const parts = info.parts.map((p, i) => (bad.has(i) ? { type: 'text', text: cfg.notice } : p));
      replacement = { tag: 'parts', val: JSON.stringify(parts) };
    } else {
      replacement = { tag: 'text', val: cfg.notice };
    }
    edits.push({ tag: 'content', val: { message: index, content: replacement } });
  }
  return {
    verdict: { tag: 'modify', val: { edits, reason: `replaced possible prompt injection: ${summarize(modifying)}` } },
    logs,
  };
}
