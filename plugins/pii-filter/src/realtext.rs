//! False positives on real text: scans directories of text nobody wrote for this project
//! (Rust sources and READMEs, Python's standard library, man pages) and reports findings per MB
//! and per type. There is no truth here; every finding is a candidate false positive to read.
//!
//! ```sh
//! find /usr/share/man -name '*.gz' -print0 | xargs -0 zcat > /tmp/man.txt
//! PII_SCAN="rust=$HOME/.cargo/registry/src,python=$(python3 -c 'import sysconfig;print(sysconfig.get_paths()["stdlib"])'),man=/tmp/man.txt" \
//!   cargo test -p pii-filter --release real_text -- --ignored --nocapture
//! ```
//!
//! `PII_SCAN_EXAMPLES=N` prints up to N findings per type with their context.

use crate::detect::scan;
use crate::types::PiiType;
use std::path::Path;

const EXTENSIONS: &[&str] = &[
    "rs", "md", "txt", "toml", "py", "rst", "json", "yaml", "yml", "cfg", "ini", "html", "c", "h",
    "sh",
];

fn files(path: &Path, out: &mut Vec<std::path::PathBuf>) {
    if path.is_file() {
        out.push(path.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            // Python's standard library without third-party packages.
            if !p.ends_with("site-packages") {
                files(&p, out);
            }
        } else if p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| EXTENSIONS.contains(&e))
        {
            out.push(p);
        }
    }
}

/// Splits text into message-sized chunks at line ends.
fn chunks(text: &str, size: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut end = rest.len().min(size);
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        if let Some(nl) = rest[..end].rfind('\n').filter(|_| end < rest.len()) {
            end = nl + 1;
        }
        let (a, b) = rest.split_at(end);
        rest = b;
        Some(a)
    })
}

#[test]
#[ignore]
fn real_text() {
    let spec = std::env::var("PII_SCAN").unwrap_or_default();
    let examples: usize = std::env::var("PII_SCAN_EXAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    println!("| corpus | MB | files | flags/MB | by type (flags/MB) |");
    println!("|---|---:|---:|---:|---|");
    for item in spec.split(',').filter(|s| !s.is_empty()) {
        let (name, path) = item.split_once('=').expect("name=path");
        let mut list = Vec::new();
        files(Path::new(path), &mut list);
        let mut bytes = 0usize;
        let mut counts = [0usize; PiiType::COUNT];
        let mut shown = [0usize; PiiType::COUNT];
        for f in &list {
            let Ok(data) = std::fs::read(f) else { continue };
            let text = String::from_utf8_lossy(&data);
            bytes += text.len();
            for chunk in chunks(&text, 64 * 1024) {
                for found in scan(chunk, None) {
                    let k = found.kind.index();
                    counts[k] += 1;
                    if shown[k] < examples {
                        shown[k] += 1;
                        let mut a = found.start.saturating_sub(40);
                        while !chunk.is_char_boundary(a) {
                            a -= 1;
                        }
                        let mut b = (found.end + 40).min(chunk.len());
                        while !chunk.is_char_boundary(b) {
                            b += 1;
                        }
                        eprintln!(
                            "{name} {} [{}] {}: {:?}",
                            found.kind.name(),
                            &chunk[found.start..found.end],
                            f.display(),
                            &chunk[a..b]
                        );
                    }
                }
            }
        }
        let mb = bytes as f64 / 1e6;
        let total: usize = counts.iter().sum();
        let by_type: Vec<String> = PiiType::ALL
            .iter()
            .filter(|t| counts[t.index()] > 0)
            .map(|t| format!("{} {:.3}", t.name(), counts[t.index()] as f64 / mb))
            .collect();
        println!(
            "| {name} | {mb:.1} | {} | {:.3} | {} |",
            list.len(),
            total as f64 / mb,
            by_type.join(", ")
        );
    }
}
