//! The content-safety decision: which text is judged, how the guard's categories map to
//! actions, and what the verdict says. The guard itself is behind [`Ask`], so this is tested
//! natively with a scripted one.

use railyard_plugin_sdk::{Rail, Rejection, Request, Target, Verdict};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The config's JSON Schema.
pub const CONFIG_SCHEMA: &str = r#"{
  "type": "object",
  "additionalProperties": false,
  "required": ["model"],
  "properties": {
    "model": {"type": "string", "minLength": 1, "description": "The guard model to ask, by its [[guard_models]] name (granted in this entry's guard_models)."},
    "operation": {"enum": ["guard", "moderate"], "description": "guard: a safety guard (llama-guard, nemoguard); moderate: a moderation model (openai-moderation). Default guard."},
    "action": {"enum": ["block", "reject", "allow"], "description": "What a flagged text gets when none of its categories has an action of its own. Default block."},
    "categories": {"type": "object", "additionalProperties": {"enum": ["block", "reject", "allow"]}, "description": "Actions per category, by the name the model gives it (S1, violence, ...)."},
    "threshold": {"type": "number", "minimum": 0, "maximum": 1, "description": "Moderation: a category counts when its score reaches this, flagged or not."},
    "context_turns": {"type": "integer", "minimum": 0, "maximum": 16, "description": "Earlier turns shown to a safety guard as context. Default 2."},
    "message": {"type": "string", "minLength": 1, "maxLength": 512, "description": "What replaces a rejected message."}
  }
}"#;

/// What a flagged text gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Nothing.
    Allow,
    /// The message is replaced with the refusal message.
    Reject,
    /// The request is refused.
    Block,
}

/// The plugin's config.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    model: String,
    #[serde(default)]
    operation: Operation,
    #[serde(default = "block")]
    action: Action,
    #[serde(default)]
    categories: BTreeMap<String, Action>,
    threshold: Option<f32>,
    #[serde(default = "two")]
    context_turns: usize,
    #[serde(default = "withheld")]
    message: String,
}

fn block() -> Action {
    Action::Block
}
fn two() -> usize {
    2
}
fn withheld() -> String {
    "This message was withheld by the content-safety policy.".into()
}

/// Which operation the model answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    /// A safety guard.
    #[default]
    Guard,
    /// A moderation model.
    Moderate,
}

impl Config {
    /// Parse the config (JSON, already valid against [`CONFIG_SCHEMA`]).
    pub fn parse(text: &str) -> Result<Config, String> {
        serde_json::from_str(text).map_err(|e| format!("invalid config: {e}"))
    }
}

/// A guard's answer: flagged, and the categories it named with their scores.
#[derive(Debug, Clone, PartialEq)]
pub struct Judged {
    /// Unsafe (guard) or flagged (moderation).
    pub flagged: bool,
    /// Categories named, with scores where given.
    pub categories: Vec<(String, Option<f32>)>,
}

/// The guard models, as the plugin asks them.
pub trait Ask {
    /// A safety guard on `turns` (role, text), judging the last assistant turn when
    /// `assistant`, else the last user turn.
    fn guard(
        &mut self,
        model: &str,
        assistant: bool,
        turns: &[(String, String)],
    ) -> Result<Judged, String>;
    /// A moderation model on `text`.
    fn moderate(&mut self, model: &str, text: &str) -> Result<Judged, String>;
}

/// Judge `request`: the last user turn on the input rail, the reply on the output rail.
pub fn evaluate(
    config: &Config,
    request: &Request,
    guard: &mut impl Ask,
) -> Result<Verdict, String> {
    let assistant = request.rail == Rail::Output;
    let wanted = if assistant { "assistant" } else { "user" };
    let Some(at) = request.messages.iter().rposition(|m| m.role == wanted) else {
        return Ok(Verdict::Allow);
    };
    let Some(judged_text) = request.messages[at]
        .all_text()
        .filter(|t| !t.trim().is_empty())
    else {
        return Ok(Verdict::Allow);
    };
    let judged = match config.operation {
        Operation::Moderate => guard.moderate(&config.model, &judged_text)?,
        Operation::Guard => {
            let mut turns: Vec<(String, String)> = request.messages[..at]
                .iter()
                .filter(|m| m.role == "user" || m.role == "assistant")
                .filter_map(|m| Some((m.role.clone(), m.all_text()?)))
                .collect();
            let keep = turns.len().saturating_sub(config.context_turns);
            turns.drain(..keep);
            turns.push((wanted.to_string(), judged_text));
            guard.guard(&config.model, assistant, &turns)?
        }
    };
    let counted: Vec<&str> = judged
        .categories
        .iter()
        .filter(|(_, score)| match (config.threshold, score) {
            (Some(t), Some(s)) => *s >= t || judged.flagged,
            _ => true,
        })
        .map(|(name, _)| name.as_str())
        .collect();
    let over_threshold = config.threshold.is_some_and(|t| {
        judged
            .categories
            .iter()
            .any(|(_, s)| s.is_some_and(|s| s >= t))
    });
    if !judged.flagged && !over_threshold {
        return Ok(Verdict::Allow);
    }
    let action = match counted.is_empty() {
        true => config.action,
        false => counted
            .iter()
            .map(|c| config.categories.get(*c).copied().unwrap_or(config.action))
            .max()
            .unwrap_or(config.action),
    };
    let named = match counted.is_empty() {
        true => String::new(),
        false => format!(" ({})", counted.join(", ")),
    };
    let side = if assistant { "reply" } else { "input" };
    Ok(match action {
        Action::Allow => Verdict::Allow,
        Action::Block => Verdict::Block(format!("unsafe {side}{named}")),
        Action::Reject => Verdict::Reject(vec![Rejection {
            target: Target::Message(at as u32),
            message: config.message.clone(),
        }]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use railyard_plugin_sdk::testing::{request, user};

    struct Scripted(Result<Judged, String>, Vec<Vec<(String, String)>>);

    impl Ask for Scripted {
        fn guard(
            &mut self,
            _: &str,
            _: bool,
            turns: &[(String, String)],
        ) -> Result<Judged, String> {
            self.1.push(turns.to_vec());
            self.0.clone()
        }
        fn moderate(&mut self, _: &str, text: &str) -> Result<Judged, String> {
            self.1.push(vec![("user".into(), text.into())]);
            self.0.clone()
        }
    }

    fn unsafe_in(categories: &[&str]) -> Result<Judged, String> {
        Ok(Judged {
            flagged: true,
            categories: categories.iter().map(|c| (c.to_string(), None)).collect(),
        })
    }

    fn config(extra: &str) -> Config {
        Config::parse(&format!("{{\"model\": \"g\"{extra}}}")).unwrap()
    }

    #[test]
    fn the_strongest_action_of_the_named_categories_wins() {
        let cfg = config(r#", "categories": {"S10": "reject", "S6": "allow"}"#);
        let req = request(Rail::Input, vec![user("hello")]);
        let verdict = |answer| evaluate(&cfg, &req, &mut Scripted(answer, vec![])).unwrap();
        assert!(matches!(verdict(unsafe_in(&["S1"])), Verdict::Block(r) if r.contains("S1")));
        assert!(matches!(verdict(unsafe_in(&["S10"])), Verdict::Reject(_)));
        assert!(matches!(verdict(unsafe_in(&["S6"])), Verdict::Allow));
        assert!(matches!(
            verdict(unsafe_in(&["S6", "S10"])),
            Verdict::Reject(_)
        ));
        assert!(matches!(verdict(unsafe_in(&[])), Verdict::Block(_)));
        assert!(matches!(
            verdict(Ok(Judged {
                flagged: false,
                categories: vec![]
            })),
            Verdict::Allow
        ));
        assert!(
            matches!(evaluate(&cfg, &req, &mut Scripted(Err("down".into()), vec![])), Err(e) if e == "down")
        );
    }

    #[test]
    fn the_guard_sees_the_judged_turn_last_after_a_bounded_context() {
        let cfg = config(r#", "context_turns": 1"#);
        let req = request(Rail::Input, vec![user("one"), user("two"), user("three")]);
        let mut g = Scripted(
            Ok(Judged {
                flagged: false,
                categories: vec![],
            }),
            vec![],
        );
        evaluate(&cfg, &req, &mut g).unwrap();
        assert_eq!(
            g.1[0],
            [
                ("user".to_string(), "two".to_string()),
                ("user".into(), "three".into())
            ]
        );
    }
}
