//! Per-request options from the body's own `"railyard"` object (removed before forwarding):
//! switching rails off, when the server allows it.

use crate::model::{PayloadError, Rail};
use serde_json::{Map, Value};

/// What a request asked of the rails.
#[derive(Debug, Clone, Default)]
pub struct RequestOptions {
    disabled: Vec<Rail>,
}

impl RequestOptions {
    /// Take and validate `body["railyard"]`.
    pub fn take(
        body: &mut Map<String, Value>,
        overrides_allowed: bool,
    ) -> Result<RequestOptions, PayloadError> {
        let Some(value) = body.remove("railyard") else {
            return Ok(RequestOptions::default());
        };
        let bad = |m: String, p: &str| PayloadError::new(p, m);
        let obj = value
            .as_object()
            .ok_or_else(|| bad("'railyard' must be an object".into(), "railyard"))?;
        let mut options = RequestOptions::default();
        for (key, value) in obj {
            if key != "rails" {
                return Err(bad(
                    format!("unknown field 'railyard.{key}' (expected 'rails')"),
                    "railyard",
                ));
            }
            let rails = value.as_object().ok_or_else(|| {
                bad(
                    "'railyard.rails' must be an object of rail names to booleans".into(),
                    "railyard.rails",
                )
            })?;
            if !overrides_allowed {
                return Err(bad(
                    "per-request rail overrides are disabled on this server (server.allow_rail_overrides = false)".into(),
                    "railyard.rails",
                ));
            }
            for (name, on) in rails {
                let rail = Rail::parse(name).ok_or_else(|| {
                    bad(
                        format!(
                            "unknown rail '{name}' in railyard.rails (expected {})",
                            Rail::EXPECTED
                        ),
                        "railyard.rails",
                    )
                })?;
                match on.as_bool() {
                    Some(true) => {}
                    Some(false) => options.disabled.push(rail),
                    None => {
                        return Err(bad(
                            format!("railyard.rails.{name} must be true or false"),
                            "railyard.rails",
                        ))
                    }
                }
            }
        }
        Ok(options)
    }

    /// Whether the request switched `rail` off.
    pub fn disabled(&self, rail: Rail) -> bool {
        self.disabled.contains(&rail)
    }
}
