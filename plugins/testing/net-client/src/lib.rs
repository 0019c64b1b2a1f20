//! Tries to reach the network. Using `std::net` makes the component import wasi:sockets, so the
//! host must refuse to load it.
// A component only: natively (e.g. `cargo test --workspace`) there is nothing to build.
#![cfg(target_arch = "wasm32")]

use railyard_plugin_sdk::{export, Info, Plugin, Rail, Request, Verdict};

struct NetClient;

impl Plugin for NetClient {
    fn describe() -> Info {
        Info {
            name: "net-client".into(),
            version: "0.1.0".into(),
            rails: vec![Rail::Input],
            config_schema: None,
        }
    }
    fn configure(_config: String) -> Result<(), String> {
        Ok(())
    }
    fn evaluate(_request: Request) -> Result<Verdict, String> {
        Ok(match std::net::TcpStream::connect("127.0.0.1:80") {
            Ok(_) => Verdict::Block("connected to 127.0.0.1:80".into()),
            Err(_) => Verdict::Allow,
        })
    }
}

export!(NetClient);
