//! content-safety policy plugin (rails: input, output).
//!
//! Asks a guard model the operator configured (`[[guard_models]]`, granted to this plugin's
//! entry) whether the user's last turn (input rail) or the model's reply (output rail) is safe:
//! a safety guard (`guard`: Llama Guard, NemoGuard) or a moderation model (`moderate`: OpenAI's
//! moderations). Each category the model names maps to an action (block, reject, allow); the
//! strongest wins. A guard model that cannot answer is an error: the entry's `on_error` decides.
//! On a streamed reply the host calls it at each step of its hold-back window, not per token.
//!
//! The decision logic is in [`policy`], natively tested with a scripted guard; this file is the
//! glue to the host's guard-models interface.

pub mod policy;

use policy::{Ask, Judged};
use railyard_plugin_sdk::guard::{self, Role, Turn};
use railyard_plugin_sdk::{export_policy, Info, PolicyPlugin, Rail, Request, Verdict};

/// The plugin: its parsed config.
pub struct ContentSafety {
    config: policy::Config,
}

/// The host's guard models.
struct Host;

impl Ask for Host {
    fn guard(
        &mut self,
        model: &str,
        assistant: bool,
        turns: &[(String, String)],
    ) -> Result<Judged, String> {
        let role = if assistant {
            Role::Assistant
        } else {
            Role::User
        };
        let turns: Vec<Turn> = turns
            .iter()
            .map(|(role, content)| Turn {
                role: role.clone(),
                content: content.clone(),
            })
            .collect();
        let g = guard::guard(model, role, &turns).map_err(|e| guard::describe(&e))?;
        Ok(Judged {
            flagged: !g.safe,
            categories: g
                .categories
                .into_iter()
                .map(|c| (c.name, c.score, true))
                .collect(),
        })
    }

    fn moderate(&mut self, model: &str, text: &str) -> Result<Judged, String> {
        let mut all =
            guard::moderate(model, &[text.to_string()]).map_err(|e| guard::describe(&e))?;
        let m = all.pop().ok_or("the moderation answered nothing")?;
        Ok(Judged {
            flagged: m.flagged,
            categories: m
                .categories
                .into_iter()
                .map(|c| (c.name, c.score, c.flagged))
                .collect(),
        })
    }
}

impl PolicyPlugin for ContentSafety {
    fn info() -> Info {
        Info {
            name: "content-safety".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            rails: vec![Rail::Input, Rail::Output],
            config_schema: Some(policy::CONFIG_SCHEMA.into()),
        }
    }

    fn configure(config: &str) -> Result<Self, String> {
        Ok(ContentSafety {
            config: policy::Config::parse(config)?,
        })
    }

    fn evaluate(&mut self, request: &Request) -> Verdict {
        self.try_evaluate(request)
            .unwrap_or_else(|e| Verdict::Block(format!("content safety could not be judged: {e}")))
    }

    fn try_evaluate(&mut self, request: &Request) -> Result<Verdict, String> {
        policy::evaluate(&self.config, request, &mut Host)
    }
}

export_policy!(ContentSafety);
