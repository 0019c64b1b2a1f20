//! Compiles the gRPC API (`../proto`) with protox (no system protoc), and builds the policy
//! plugins in `../plugins` (every workspace member but this one) for wasm32-wasip2, so a plain
//! `cargo build`/`cargo test`/`cargo run` always has the bundled policies and the test plugins,
//! built from source, as wasmtime's test-programs do. They go to
//! `target/plugins/wasm32-wasip2/release/*.wasm`, where `policies/railyard.toml` looks for them.
//! The JavaScript and Python plugins are built by `scripts/build-plugins.sh` (npm and
//! componentize-py, pinned; incremental) into `target/plugins/components/`.
//! Set `RAILYARD_SKIP_PLUGIN_BUILD=1` to skip the plugins.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    compile_proto();
    build_plugins();
}

/// The gRPC API (`proto/railyard/v1/policy.proto`), compiled with protox (pure Rust: no system
/// protoc), plus its encoded descriptor set for gRPC server reflection.
fn compile_proto() {
    let host = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let proto_dir = host.parent().expect("repository root").join("proto");
    let file = proto_dir.join("railyard/v1/policy.proto");
    println!("cargo:rerun-if-changed={}", proto_dir.display());
    let fds = protox::compile([&file], [&proto_dir]).unwrap_or_else(|e| panic!("{e:?}"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(
        out.join("railyard_v1_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )
    .expect("write the descriptor set");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)
        .expect("generate gRPC code");
}

fn build_plugins() {
    let host = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = host.parent().expect("host/ sits in the repository root");
    let plugins = root.join("plugins");
    let target_dir = root.join("target").join("plugins");
    let out = target_dir.join("wasm32-wasip2").join("release");
    // Not the whole plugins/ tree: node_modules alone holds tens of thousands of files.
    watch_sources(&plugins);
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    println!(
        "cargo:rerun-if-changed={}",
        root.join("scripts/build-plugins.sh").display()
    );
    println!("cargo:rerun-if-env-changed=RAILYARD_SKIP_PLUGIN_BUILD");
    println!("cargo:rustc-env=RAILYARD_PLUGIN_DIR={}", out.display());
    if std::env::var_os("RAILYARD_SKIP_PLUGIN_BUILD").is_some() {
        return;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "--release",
        "--target",
        "wasm32-wasip2",
        "--workspace",
        "--exclude",
        "railyard",
        "--manifest-path",
    ])
    .arg(root.join("Cargo.toml"))
    .arg("--target-dir")
    .arg(&target_dir)
    .current_dir(root);
    // The outer build's flags and wrappers (clippy, coverage, a host target dir) are for the
    // host, not for wasm plugins.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CLIPPY_ARGS",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_MANIFEST_DIR",
        "CARGO_MANIFEST_PATH",
    ] {
        cmd.env_remove(var);
    }
    let output = cmd
        .output()
        .unwrap_or_else(|e| panic!("could not run cargo to build plugins: {e}"));
    if !output.status.success() {
        panic!(
            "building the policy plugins failed (is the wasm32-wasip2 target installed? \
             `rustup target add wasm32-wasip2`)\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let output = Command::new("bash")
        .arg(root.join("scripts/build-plugins.sh"))
        .arg(target_dir.join("components"))
        .current_dir(root)
        .output()
        .unwrap_or_else(|e| panic!("could not run scripts/build-plugins.sh: {e}"));
    if !output.status.success() {
        panic!(
            "building the JavaScript and Python plugins failed (run scripts/setup.sh first)\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Ask cargo to rerun this script when any plugin source changes. Cargo scans a watched folder
/// recursively, so folders holding dependency or build output (node_modules: tens of thousands of
/// files) are split: their other entries are watched one by one.
fn watch_sources(dir: &std::path::Path) {
    const SKIP: [&str; 4] = ["node_modules", "target", "__pycache__", ".venv"];
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    let skipped = |p: &std::path::Path| p.file_name().is_some_and(|n| SKIP.iter().any(|s| n == *s));
    if !entries.iter().any(|p| skipped(p)) {
        println!("cargo:rerun-if-changed={}", dir.display());
        return;
    }
    for path in entries.iter().filter(|p| !skipped(p)) {
        if path.is_dir() {
            watch_sources(path);
        } else {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
}
