//! A plugin that misbehaves on demand, for the host's containment tests: the last message's text
//! names the misbehaviour (`panic`, `loop`, `stderr-flood`, ...), so one pooled plugin can be
//! driven through every fault and then asked to work normally (`allow`) again. The same modes run
//! through the daemon's every door in `tests/faults.rs`.
// A component only: natively (e.g. `cargo test --workspace`) there is nothing to build.
#![cfg(target_arch = "wasm32")]

use railyard_plugin_sdk::{
    export, log, Content, ContentEdit, Edit, Info, Level, Modification, Plugin, Rail, Rejection,
    Request, Target, Verdict,
};
use std::hint::black_box;

/// Far past every verdict and output cap the host sets, well inside a 256 MiB memory cap.
const HUGE: usize = 100 << 20;
/// Many items: far more edits or rejections than any request has messages.
const MANY: usize = 100_000;

struct Hostile;

/// A thousand edits whose texts are all one 1 MiB string: the plugin holds 1 MiB, and a host
/// that copied every edit's text would copy 1 GiB. The aliases are unsound on purpose: freeing
/// them after the call (`post_return`) would free one block a thousand times, so the host must
/// refuse the answer before that, and drop the instance.
#[allow(unsafe_code)]
fn aliased_edits(last: u32) -> Verdict {
    let mut text = std::mem::ManuallyDrop::new("a".repeat(1 << 20));
    let (ptr, len, cap) = (text.as_mut_ptr(), text.len(), text.capacity());
    Verdict::Modify(Modification {
        edits: (0..1000)
            .map(|_| {
                Edit::Content(ContentEdit {
                    message: last,
                    // SAFETY: not sound (see above); every alias is valid UTF-8 of `len` bytes
                    // within one live allocation, which is all the lowering of the answer reads.
                    content: Content::Text(unsafe { String::from_raw_parts(ptr, len, cap) }),
                })
            })
            .collect(),
        reason: "one text, a thousand times".into(),
    })
}

fn recurse(depth: u64) -> u64 {
    // Not a tail call: every level keeps a frame, so the stack runs out.
    let below = if black_box(true) {
        recurse(depth + 1)
    } else {
        0
    };
    black_box(below + depth)
}

impl Plugin for Hostile {
    fn describe() -> Info {
        Info {
            name: "hostile".into(),
            version: "0.1.0".into(),
            rails: vec![Rail::Input, Rail::Output, Rail::ToolCall, Rail::ToolResult],
            config_schema: None,
        }
    }

    fn configure(_config: String) -> Result<(), String> {
        Ok(())
    }

    fn evaluate(request: Request) -> Result<Verdict, String> {
        let last = request.messages.len().saturating_sub(1) as u32;
        let text = request
            .messages
            .last()
            .and_then(|m| m.text())
            .unwrap_or("allow")
            .to_string();
        let mode = text.split_whitespace().next().unwrap_or("allow");
        Ok(match mode {
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = black_box(n.wrapping_add(1));
                }
            }
            "oom" => {
                // Reserve without touching: the cap is reached by growing memory, not by time.
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(Vec::with_capacity(1 << 20));
                    black_box(&hoard);
                }
            }
            "recursion" => Verdict::Block(format!("depth {}", recurse(0))),
            "panic" => panic!("hostile plugin panicked on purpose"),
            "abort" => std::process::abort(),
            "unreachable" => core::arch::wasm32::unreachable(),
            "exit" => std::process::exit(3),
            "huge-reason" => Verdict::Block("r".repeat(HUGE)),
            "huge-edit" => Verdict::Modify(Modification {
                edits: vec![Edit::Content(ContentEdit {
                    message: last,
                    content: Content::Text("e".repeat(HUGE)),
                })],
                reason: "one huge edit".into(),
            }),
            "many-edits" => Verdict::Modify(Modification {
                edits: (0..MANY)
                    .map(|_| {
                        Edit::Content(ContentEdit {
                            message: last,
                            content: Content::Text("x".into()),
                        })
                    })
                    .collect(),
                reason: "many edits".into(),
            }),
            "aliased-edits" => aliased_edits(last),
            "many-rejections" => Verdict::Reject(
                (0..MANY)
                    .map(|_| Rejection {
                        target: Target::Message(last),
                        message: "m".repeat(1024),
                    })
                    .collect(),
            ),
            "bad-index" => Verdict::Modify(Modification {
                edits: vec![Edit::Content(ContentEdit {
                    message: last + 1000,
                    content: Content::Text("out of range".into()),
                })],
                reason: "edit out of range".into(),
            }),
            "log-flood" => {
                for i in 0..MANY {
                    log(Level::Info, &format!("flood line {i}"));
                }
                Verdict::Allow
            }
            "huge-log-line" => {
                log(Level::Info, &"l".repeat(HUGE));
                Verdict::Allow
            }
            "stderr-flood" => {
                let chunk = "s".repeat(64 << 10);
                for _ in 0..HUGE / chunk.len() {
                    eprint!("{chunk}");
                }
                Verdict::Allow
            }
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(u64::MAX / 4));
                Verdict::Allow
            }
            // Logs and prints the content it was given (a careless or malicious plugin leaking
            // what it sees), then allows.
            "secret-log" => {
                log(Level::Warn, &text);
                eprintln!("{text}");
                println!("{text}");
                Verdict::Allow
            }
            _ => Verdict::Allow,
        })
    }
}

export!(Hostile);
