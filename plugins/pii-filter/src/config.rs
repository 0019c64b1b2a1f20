//! The plugin's config: what to do with each type. The host validates the JSON against
//! [`schema`] before `configure`, and [`Policy::from_json`] checks it again so a host bug can't
//! silently turn the filter off.
//!
//! ```json
//! {"default_action": "redact", "types": {"CREDIT_CARD": "block", "SECRET": "block", "IP_ADDRESS": "allow"}}
//! ```
//!
//! An action for a type wins over one for its group (`SECRET`), which wins over
//! `default_action` (itself `redact` when absent). `{}` redacts every type.

use crate::detect::nearby::Context;
use crate::types::{PiiType, SECRET_GROUP};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// What to do with a detected value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Replace it with a typed placeholder such as `[EMAIL]`.
    Redact,
    /// Refuse the whole request.
    Block,
    /// Leave it (the type is not looked for).
    Allow,
}

impl Action {
    fn name(self) -> &'static str {
        match self {
            Action::Redact => "redact",
            Action::Block => "block",
            Action::Allow => "allow",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    default_action: Option<Action>,
    #[serde(default)]
    types: BTreeMap<String, Action>,
    #[serde(default)]
    memo_kib: Option<u64>,
    #[serde(default)]
    entities: Option<RawEntities>,
    #[serde(default)]
    arguments: BTreeMap<String, BTreeMap<String, Action>>,
    #[serde(default)]
    context: Option<RawContext>,
    #[serde(default)]
    reversible: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContext {
    #[serde(default)]
    locales: Option<Vec<String>>,
    #[serde(default)]
    words: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    before: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntities {
    model: String,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    threshold: Option<f32>,
}

/// The action for every type, resolved once at configure time.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    actions: [Action; PiiType::COUNT],
    /// KiB of scanned texts an instance keeps for the turns after (`memo.rs`).
    memo_kib: u64,
    /// The `entities` guard model that finds names, addresses and dates of birth, if any.
    pub entities: Option<crate::entities::Entities>,
    /// Policies of their own for tool calls' arguments: (tool glob, argument or `None` for
    /// every argument of the tool, the policy), most specific first.
    arguments: Vec<(String, Option<String>, Policy)>,
    /// The words that make a failing shape a value (context-led detection).
    pub context: Context,
    /// Whether a redacted value hides behind a placeholder of its own in the host's vault
    /// (`reversible = true`), written back where the client gets the reply.
    pub reversible: bool,
}

/// Spans an `entities` model scores lower are dropped, unless the config says otherwise.
pub const ENTITY_THRESHOLD: f32 = 0.5;

/// What an instance keeps by default: a few turns of an ordinary conversation.
pub const MEMO_KIB: u64 = 256;
/// The most `memo_kib` may ask for (an instance's memory is capped at a few tens of MB).
pub const MAX_MEMO_KIB: u64 = 16 << 10;

impl Default for Policy {
    /// What `{}` means: redact every type.
    fn default() -> Self {
        Policy {
            actions: [Action::Redact; PiiType::COUNT],
            memo_kib: MEMO_KIB,
            entities: None,
            arguments: Vec::new(),
            context: Context::default(),
            reversible: false,
        }
    }
}

impl Policy {
    /// Parses and resolves a config.
    pub fn from_json(config: &str) -> Result<Policy, String> {
        let raw: RawConfig = serde_json::from_str(if config.trim().is_empty() {
            "{}"
        } else {
            config
        })
        .map_err(|e| format!("invalid pii-filter config: {e}"))?;
        let default = raw.default_action.unwrap_or(Action::Redact);
        let actions = resolve([default; PiiType::COUNT], &raw.types)?;
        let memo_kib = raw.memo_kib.unwrap_or(MEMO_KIB);
        if memo_kib > MAX_MEMO_KIB {
            return Err(format!(
                "invalid pii-filter config: memo_kib {memo_kib} is over {MAX_MEMO_KIB}"
            ));
        }
        let entities = match raw.entities {
            None => None,
            Some(e) if e.model.is_empty() => {
                return Err("invalid pii-filter config: entities.model is empty".into())
            }
            Some(e) => Some(crate::entities::Entities {
                model: e.model,
                language: e.language,
                threshold: match e.threshold.unwrap_or(ENTITY_THRESHOLD) {
                    t if (0.0..=1.0).contains(&t) => t,
                    t => {
                        return Err(format!(
                            "invalid pii-filter config: entities.threshold {t} is not in 0..1"
                        ))
                    }
                },
            }),
        };
        let context = match &raw.context {
            None => Context::default(),
            Some(c) => Context::new(c.locales.as_deref(), &c.words, c.before)
                .map_err(|e| format!("invalid pii-filter config: {e}"))?,
        };
        let mut arguments = Vec::new();
        for (place, types) in &raw.arguments {
            // The argument after the last dot: MCP tool names may have dots of their own
            // (`email.send.to`), argument names seldom do. `tool.*` is every argument of a tool
            // whose name has a dot.
            let (tool, argument) = match place.rsplit_once('.') {
                Some((tool, "*")) if !tool.is_empty() => (tool.to_string(), None),
                Some((tool, arg)) if !tool.is_empty() && !arg.is_empty() => {
                    (tool.to_string(), Some(arg.to_string()))
                }
                None if !place.is_empty() => (place.clone(), None),
                _ => {
                    return Err(format!(
                        "invalid pii-filter config: arguments key {place:?} is not `tool`, \
                         `tool.argument` or `tool.*`"
                    ))
                }
            };
            let policy = Policy {
                actions: resolve(actions, types)?,
                memo_kib: 0,
                entities: entities.clone(),
                arguments: Vec::new(),
                context: context.clone(),
                reversible: raw.reversible,
            };
            arguments.push((tool, argument, policy));
        }
        // An argument's own entry before its tool's.
        arguments.sort_by_key(|(_, argument, _)| argument.is_none());
        Ok(Policy {
            actions,
            memo_kib,
            entities,
            arguments,
            context,
            reversible: raw.reversible,
        })
    }

    /// The policies of a call to `tool`'s arguments, when any has its own.
    pub fn for_call(&self, tool: &str) -> Option<CallPolicy<'_>> {
        let entries: Vec<(Option<&str>, &Policy)> = self
            .arguments
            .iter()
            .filter(|(glob, _, _)| railyard_plugin_sdk::glob::glob_match(glob, tool))
            .map(|(_, argument, policy)| (argument.as_deref(), policy))
            .collect();
        (!entries.is_empty()).then_some(CallPolicy {
            base: self,
            entries,
        })
    }

    /// The action for a type.
    pub fn action(&self, t: PiiType) -> Action {
        self.actions[t.index()]
    }

    /// Bytes of scanned texts an instance keeps (0: none).
    pub fn memo_bytes(&self) -> usize {
        (self.memo_kib as usize) << 10
    }

    /// One line for the log: which types get which action.
    pub fn summary(&self) -> String {
        [Action::Block, Action::Redact, Action::Allow]
            .iter()
            .filter_map(|&a| {
                let names: Vec<&str> = PiiType::ALL
                    .iter()
                    .filter(|t| self.action(**t) == a)
                    .map(|t| t.name())
                    .collect();
                (!names.is_empty()).then(|| format!("{}: {}", a.name(), names.join(" ")))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The policies of one call's arguments (see [`Policy::for_call`]).
pub struct CallPolicy<'p> {
    base: &'p Policy,
    /// The entries for the call's tool, an argument's own before its tool's.
    entries: Vec<(Option<&'p str>, &'p Policy)>,
}

impl<'p> CallPolicy<'p> {
    /// The policy for `argument` (a top-level one; `None`: outside any): the argument's own,
    /// else the tool's, else the plugin's.
    pub fn of(&self, argument: Option<&str>) -> &'p Policy {
        self.entries
            .iter()
            .find(|(arg, _)| arg.is_none_or(|a| Some(a) == argument))
            .map_or(self.base, |(_, p)| *p)
    }
}

/// `base` with `types`' actions applied (a type's own over its group's).
fn resolve(
    base: [Action; PiiType::COUNT],
    types: &BTreeMap<String, Action>,
) -> Result<[Action; PiiType::COUNT], String> {
    for name in types.keys() {
        if name != SECRET_GROUP && PiiType::from_name(name).is_none() {
            return Err(format!(
                "invalid pii-filter config: unknown type {name:?} (known: {}, {SECRET_GROUP})",
                PiiType::ALL.map(PiiType::name).join(", ")
            ));
        }
    }
    let mut actions = base;
    for t in PiiType::ALL {
        let by_group = t.group().and_then(|g| types.get(g));
        if let Some(&a) = types.get(t.name()).or(by_group) {
            actions[t.index()] = a;
        }
    }
    Ok(actions)
}

/// The JSON Schema of the config (draft 2020-12).
pub fn schema() -> String {
    let action = || {
        json!({
            "enum": ["redact", "block", "allow"],
        })
    };
    let mut types = Map::new();
    for t in PiiType::ALL {
        let mut a = action();
        let what = match t.group() {
            Some(g) => format!("Action for {} values (overrides {g}).", t.name()),
            None => format!("Action for {} values.", t.name()),
        };
        a["description"] = Value::String(what);
        types.insert(t.name().into(), a);
    }
    let mut group = action();
    group["description"] = json!(
        "Action for every secret sub-type: AWS_KEY, GITHUB_TOKEN, SLACK_TOKEN, JWT, PRIVATE_KEY, URL_CREDENTIALS, API_KEY, CREDENTIAL."
    );
    types.insert(SECRET_GROUP.into(), group);
    let mut default = action();
    default["description"] = json!("Action for types not named in `types` (default: redact).");
    default["default"] = json!("redact");
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "pii-filter config",
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "default_action": default,
            "types": {
                "type": "object",
                "description": "Per-type actions: `redact` replaces the value with a placeholder such as [EMAIL], `block` refuses the request, `allow` leaves it.",
                "additionalProperties": false,
                "properties": Value::Object(types.clone()),
            },
            "entities": {
                "type": "object",
                "description": "Find PERSON, LOCATION and DATE_OF_BIRTH values with an `entities` guard model granted to this entry (`guard_models`): each text that could hold one is asked of it, and what it finds is merged with the patterns' findings and treated by the same per-type actions. A model that cannot answer is a fault (the entry's `on_error` decides).",
                "additionalProperties": false,
                "required": ["model"],
                "properties": {
                    "model": {"type": "string", "minLength": 1, "description": "The guard model's name in `[[guard_models]]` (kind `entities`)."},
                    "language": {"type": "string", "description": "The texts' language, e.g. `en` (default: the model's)."},
                    "threshold": {"type": "number", "minimum": 0, "maximum": 1, "default": ENTITY_THRESHOLD, "description": "Spans the model scores lower are dropped."},
                },
            },
            "arguments": {
                "type": "object",
                "description": "Tool calls' arguments with actions of their own, by `tool` (a glob: * matches any run of characters), `tool.argument` (a top-level argument; the argument is after the last dot, so `email.send.to` is `to` of `email.send`) or `tool.*` (every argument of a tool whose name has a dot), e.g. {\"send_email.to\": {\"EMAIL\": \"allow\"}}: a recipient's address may go in `to` and nowhere else. Over `types` and `default_action`; an argument's entry over its tool's.",
                "additionalProperties": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": Value::Object(types),
                },
            },
            "context": {
                "type": "object",
                "description": "Context-led detection: a phone, SSN, card or IBAN shape that fails its validation is still taken when words naming its type are around it (before it in the sentence, right after it, its JSON key or CSV header).",
                "additionalProperties": false,
                "properties": {
                    "locales": {"type": "array", "items": {"type": "string"}, "description": "Whose word lists apply, by ISO 639-1 code (en, de, fr, es, it, nl, pt, sv, da, no, fi, pl, cs, hu, ro, tr, ru, uk, el, he, ja, zh, ko; languages sharing words share a list). Default: all."},
                    "words": {"type": "object", "additionalProperties": false, "properties": {
                        "PHONE": {"type": "array", "items": {"type": "string"}},
                        "US_SSN": {"type": "array", "items": {"type": "string"}},
                        "CREDIT_CARD": {"type": "array", "items": {"type": "string"}},
                        "IBAN": {"type": "array", "items": {"type": "string"}},
                    }, "description": "Words of one's own per type (one word each, any case), added to the lists."},
                    "before": {"type": "integer", "minimum": 1, "maximum": crate::detect::nearby::MAX_BEFORE, "default": crate::detect::nearby::BEFORE, "description": "Words looked at before a value."},
                },
            },
            "reversible": {
                "type": "boolean",
                "default": false,
                "description": "Redact each value behind a placeholder of its own ([EMAIL_7KQ2M9XA]) kept in the host's vault for the request (the entry needs `vault = true`), and write it back in the reply the client gets: in its text, and in a tool call's argument where `arguments` allows the value's type. The model never sees the value; another request's placeholder, or one the model makes up, restores nothing.",
            },
            "memo_kib": {
                "type": "integer",
                "minimum": 0,
                "maximum": MAX_MEMO_KIB,
                "default": MEMO_KIB,
                "description": "KiB of scanned texts (with what their scans found) each instance keeps, so that the conversation a client sends again every turn is not scanned again; texts are matched whole and per tenant. 0 keeps none.",
            },
        },
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_words() {
        let p = Policy::from_json(
            r#"{"context": {"locales": ["de"], "words": {"PHONE": ["Rufnr"]}, "before": 2}}"#,
        )
        .unwrap();
        let found = crate::detect::scan_with("Rufnr 12345678", None, &p.context);
        assert_eq!(found.len(), 1);
        // The same text under the default lists: `Rufnr` is no one's word.
        assert!(crate::detect::scan("Rufnr 12345678", None).is_empty());
        for bad in [
            r#"{"context": {"locales": ["xx"]}}"#,
            r#"{"context": {"words": {"EMAIL": ["mail"]}}}"#,
            r#"{"context": {"before": 0}}"#,
            r#"{"context": {"window": 3}}"#,
        ] {
            let e = Policy::from_json(bad).unwrap_err();
            assert!(e.starts_with("invalid pii-filter config"), "{e}");
        }
    }

    #[test]
    fn defaults_redact_everything() {
        let p = Policy::from_json("{}").unwrap();
        assert_eq!(p, Policy::default());
        assert!(PiiType::ALL.iter().all(|&t| p.action(t) == Action::Redact));
    }

    #[test]
    fn precedence_type_over_group_over_default() {
        let p = Policy::from_json(
            r#"{"default_action":"allow","types":{"SECRET":"block","JWT":"redact","EMAIL":"redact"}}"#,
        )
        .unwrap();
        assert_eq!(p.action(PiiType::Phone), Action::Allow);
        assert_eq!(p.action(PiiType::Email), Action::Redact);
        assert_eq!(p.action(PiiType::AwsKey), Action::Block);
        assert_eq!(p.action(PiiType::Jwt), Action::Redact);
    }

    #[test]
    fn rejects_unknown() {
        assert!(Policy::from_json(r#"{"types":{"PASSPORT":"block"}}"#).is_err());
        assert!(Policy::from_json(r#"{"mode":"x"}"#).is_err());
        assert!(Policy::from_json(r#"{"types":{"EMAIL":"mask"}}"#).is_err());
    }

    #[test]
    fn memo_size_is_bounded() {
        assert_eq!(Policy::default().memo_bytes(), 256 << 10);
        assert_eq!(
            Policy::from_json(r#"{"memo_kib": 0}"#)
                .unwrap()
                .memo_bytes(),
            0
        );
        let most = format!(r#"{{"memo_kib": {MAX_MEMO_KIB}}}"#);
        assert_eq!(Policy::from_json(&most).unwrap().memo_bytes(), 16 << 20);
        let over = format!(r#"{{"memo_kib": {}}}"#, MAX_MEMO_KIB + 1);
        assert!(Policy::from_json(&over).unwrap_err().contains("memo_kib"));
        assert!(Policy::from_json(r#"{"memo_kib": -1}"#).is_err());
        let v: Value = serde_json::from_str(&schema()).unwrap();
        assert_eq!(v["properties"]["memo_kib"]["maximum"], json!(MAX_MEMO_KIB));
    }

    #[test]
    fn schema_is_json() {
        let v: Value = serde_json::from_str(&schema()).unwrap();
        assert_eq!(v["additionalProperties"], json!(false));
        assert!(v["properties"]["types"]["properties"]["SECRET"].is_object());
    }
}
