#![no_main]

#[allow(dead_code)]
#[path = "../../tests/fuzz/targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Err(broken) = targets::responses(data) {
        panic!("{broken}");
    }
});
