//! Tries to read the host's files. Using `std::fs` makes the component import wasi:filesystem,
//! so the host must refuse to load it.
// A component only: natively (e.g. `cargo test --workspace`) there is nothing to build.
#![cfg(target_arch = "wasm32")]

use railyard_plugin_sdk::{export, Info, Plugin, Rail, Request, Verdict};

struct FsReader;

impl Plugin for FsReader {
    fn describe() -> Info {
        Info {
            name: "fs-reader".into(),
            version: "0.1.0".into(),
            rails: vec![Rail::Input],
            config_schema: None,
        }
    }
    fn configure(_config: String) -> Result<(), String> {
        Ok(())
    }
    fn evaluate(_request: Request) -> Result<Verdict, String> {
        Ok(match std::fs::read_to_string("/etc/passwd") {
            Ok(text) => Verdict::Block(format!("read {} bytes of /etc/passwd", text.len())),
            Err(_) => Verdict::Allow,
        })
    }
}

export!(FsReader);
