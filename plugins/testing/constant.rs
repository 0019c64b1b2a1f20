// Shared body of the `allow-all` and `block-all` test plugins: two components with the same
// contract and config that decide differently, for replacing one with the other under load.
// The including crate defines `NAME` and `BLOCK`.

use railyard_plugin_sdk::{export, Info, Plugin, Rail, Request, Verdict};

struct Constant;

impl Plugin for Constant {
    fn describe() -> Info {
        Info {
            name: NAME.into(),
            version: "1.0.0".into(),
            rails: vec![Rail::Input, Rail::Output, Rail::ToolCall, Rail::ToolResult],
            config_schema: Some(r#"{"type": "object", "additionalProperties": false}"#.into()),
        }
    }
    fn configure(_config: String) -> Result<(), String> {
        Ok(())
    }
    fn evaluate(_request: Request) -> Result<Verdict, String> {
        Ok(if BLOCK {
            Verdict::Block(format!("{NAME} blocks everything"))
        } else {
            Verdict::Allow
        })
    }
}

export!(Constant);
