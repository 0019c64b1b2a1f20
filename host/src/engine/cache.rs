//! Compiled-component cache: compiling a plugin with Cranelift costs 0.1 s (small Rust plugin)
//! to 35 s (a JS or Python one); loading a precompiled artifact costs about a millisecond.
//!
//! Artifacts are keyed by the SHA-256 of the component bytes *and* a hash of the engine's
//! compilation settings (wasmtime version, target, tunables), because an artifact only loads into
//! an engine configured the same way. Writes go to a temporary file renamed into place, so a
//! crash or a concurrent daemon never leaves a torn artifact behind.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::component::Component;

/// Where compiled components are kept, or nowhere.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
}

impl ComponentCache {
    /// A cache in `dir` (created on first write), or no cache at all.
    pub fn new(dir: Option<PathBuf>) -> Self {
        ComponentCache { dir }
    }

    /// The default location (see [`crate::util::default_cache_dir`]).
    pub fn default_dir() -> Option<PathBuf> {
        crate::util::default_cache_dir()
    }

    /// Load the component for `bytes` (whose hex SHA-256 is `digest`) from the cache, or compile
    /// it and store the artifact. Returns the component and whether it came from the cache.
    pub fn load_or_compile(
        &self,
        engine: &wasmtime::Engine,
        bytes: &[u8],
        digest: &str,
        name: &str,
    ) -> wasmtime::Result<(Component, bool)> {
        let Some(dir) = &self.dir else {
            return Ok((compile(engine, bytes, name, false)?, false));
        };
        let path = dir.join(format!("{digest}-{}.cwasm", engine_key(engine)));
        // The artifact is mapped, not read: only the code pages a plugin runs are resident (a
        // JavaScript or Python runtime is 35 MB of code, most of it never run by a given policy),
        // and they are the page cache's, not the heap's. What is mapped is a private copy,
        // unlinked at once: a mapped file shortened or rewritten in place would crash the
        // daemon (SIGBUS) or change its code, and no other process can reach an unlinked copy.
        if path.exists() {
            match map_private(engine, &path) {
                Ok(component) => return Ok((component, true)),
                Err(err) => {
                    tracing::warn!(path = %path.display(), "discarding unusable cached component: {err:#}");
                }
            }
        }
        let component = compile(engine, bytes, name, true)?;
        if let Err(err) = store(&path, &component.serialize()?) {
            tracing::warn!(path = %path.display(), "could not cache compiled component: {err}");
            return Ok((component, false));
        }
        // Map the artifact just written, so a first start holds no more than a later one.
        let component = map_private(engine, &path).unwrap_or(component);
        Ok((component, false))
    }
}

/// Compile with Cranelift, saying so: it takes from a tenth of a second (a small Rust plugin) to
/// half a minute (a JavaScript or Python runtime), and an operator watching a start should know
/// why it waits.
fn compile(
    engine: &wasmtime::Engine,
    bytes: &[u8],
    name: &str,
    cached: bool,
) -> wasmtime::Result<Component> {
    let then = if cached {
        ", cached afterwards"
    } else {
        ", no cache dir: every start compiles"
    };
    tracing::info!(plugin = name, "compiling plugin {name} (first load{then})");
    let started = std::time::Instant::now();
    let component = Component::new(engine, bytes)?;
    tracing::info!(
        plugin = name,
        ms = started.elapsed().as_millis() as u64,
        "compiled plugin {name} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(component)
}

fn store(path: &Path, artifact: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    std::fs::write(&tmp, artifact)?;
    std::fs::rename(&tmp, path)
}

/// Map a private copy of the artifact at `path` (see `load_or_compile`).
fn map_private(engine: &wasmtime::Engine, path: &Path) -> wasmtime::Result<Component> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COPIES: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        ".live-{}-{}.cwasm",
        std::process::id(),
        COPIES.fetch_add(1, Ordering::Relaxed)
    );
    // Next to the artifact, else in the temporary directory: a cache baked into a container
    // image is read-only (`readOnlyRootFilesystem`) and only /tmp is writable.
    let dir = path.parent().unwrap_or(Path::new("."));
    for copy in [dir.join(&name), std::env::temp_dir().join(&name)] {
        if std::fs::copy(path, &copy).is_err() {
            let _ = std::fs::remove_file(&copy);
            continue;
        }
        // SAFETY: deserializing trusts the artifact. Only Railyard writes the cache directory (the
        // operator's own), every artifact is named by the SHA-256 of the component it was
        // compiled from plus the engine settings, and wasmtime checks the artifact's header
        // against this engine before using it. The copy is this process's alone and is unlinked
        // below, so nothing can change it while it is mapped.
        #[allow(unsafe_code)]
        let component = unsafe { Component::deserialize_file(engine, &copy) };
        let _ = std::fs::remove_file(&copy);
        return component;
    }
    // Nowhere to copy to: read the artifact into memory (it is then heap, not page cache).
    let bytes = std::fs::read(path)?;
    // SAFETY: as above; the bytes are this process's own.
    #[allow(unsafe_code)]
    let component = unsafe { Component::deserialize(engine, &bytes) };
    component
}

/// A short, stable key for the engine's compilation settings.
fn engine_key(engine: &wasmtime::Engine) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}
