#![no_main]

#[allow(dead_code)]
#[path = "../../tests/fuzz/targets.rs"]
mod targets;

static BASE: std::sync::OnceLock<railyard::model::Payload> = std::sync::OnceLock::new();

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let base = BASE.get_or_init(targets::verdict_base);
    if let Err(broken) = targets::verdict(base, data) {
        panic!("{broken}");
    }
});
