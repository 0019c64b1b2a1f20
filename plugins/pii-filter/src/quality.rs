//! Precision and recall per type on the generated corpus, and a throughput measurement.
//!
//! `cargo test -p pii-filter quality -- --nocapture` prints the table;
//! `cargo test -p pii-filter --release throughput -- --ignored --nocapture` prints MB/s.

use crate::dataset::{generate, Sample};
use crate::detect::scan;
use crate::types::PiiType;
use std::collections::{BTreeMap, HashSet};

#[derive(Default, Clone, Copy)]
struct Score {
    tp: usize,
    fp: usize,
    fn_: usize,
}

impl Score {
    fn precision(&self) -> f64 {
        if self.tp + self.fp == 0 {
            1.0
        } else {
            self.tp as f64 / (self.tp + self.fp) as f64
        }
    }

    fn recall(&self) -> f64 {
        if self.tp + self.fn_ == 0 {
            1.0
        } else {
            self.tp as f64 / (self.tp + self.fn_) as f64
        }
    }
}

struct Report {
    scores: [Score; PiiType::COUNT],
    fp_by_negative: BTreeMap<&'static str, usize>,
    examples: Vec<String>,
}

fn score(samples: &[Sample]) -> Report {
    let mut scores = [Score::default(); PiiType::COUNT];
    let mut fp_by_negative = BTreeMap::new();
    let mut examples = Vec::new();
    for s in samples {
        let truth: HashSet<(PiiType, usize, usize)> = s.spans.iter().copied().collect();
        let got: HashSet<(PiiType, usize, usize)> = scan(&s.text, None)
            .into_iter()
            .map(|f| (f.kind, f.start, f.end))
            .collect();
        for &(t, a, b) in &got {
            if truth.contains(&(t, a, b)) {
                scores[t.index()].tp += 1;
            } else {
                scores[t.index()].fp += 1;
                for n in &s.negatives {
                    *fp_by_negative.entry(*n).or_insert(0) += 1;
                }
                if examples.len() < 40 {
                    examples.push(format!(
                        "FP {} {:?} in {:?}",
                        t.name(),
                        &s.text[a..b],
                        s.text
                    ));
                }
            }
        }
        for &(t, a, b) in &truth {
            if !got.contains(&(t, a, b)) {
                scores[t.index()].fn_ += 1;
                if examples.len() < 40 {
                    examples.push(format!(
                        "FN {} {:?} in {:?}",
                        t.name(),
                        &s.text[a..b],
                        s.text
                    ));
                }
            }
        }
    }
    Report {
        scores,
        fp_by_negative,
        examples,
    }
}

#[test]
fn quality_precision_and_recall_per_type() {
    let samples = generate(0x5EED_2024, 400, 250);
    let negatives: usize = samples.iter().map(|s| s.negatives.len()).sum();
    let report = score(&samples);
    for e in &report.examples {
        println!("{e}");
    }
    println!(
        "{} samples, {} hard negatives; false positives by negative kind: {:?}",
        samples.len(),
        negatives,
        report.fp_by_negative
    );
    println!("| type | support | TP | FP | FN | precision | recall |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut failed = Vec::new();
    for t in PiiType::ALL {
        let s = report.scores[t.index()];
        println!(
            "| {} | {} | {} | {} | {} | {:.4} | {:.4} |",
            t.name(),
            s.tp + s.fn_,
            s.tp,
            s.fp,
            s.fn_,
            s.precision(),
            s.recall()
        );
        assert!(s.tp + s.fn_ >= 300, "{} has too few positives", t.name());
        if s.precision() < 0.95 || s.recall() < 0.95 {
            failed.push(t.name());
        }
    }
    assert!(failed.is_empty(), "below 0.95: {failed:?}");
}

#[test]
fn dataset_is_deterministic() {
    let a = generate(7, 20, 5);
    let b = generate(7, 20, 5);
    assert_eq!(a.len(), b.len());
    assert!(a
        .iter()
        .zip(&b)
        .all(|(x, y)| x.text == y.text && x.spans == y.spans));
}

/// Random text built from fragments that trip parsers (prefixes, separators, multi-byte
/// characters, cut-off values): nothing panics, findings sit on character boundaries in order,
/// and redacted JSON stays JSON.
#[test]
fn random_text_is_handled_safely() {
    use crate::dataset::Rng;
    const PIECES: &[&str] = &[
        "é",
        "漢",
        "😀",
        " ",
        "\n",
        "-",
        "--",
        "-----BEGIN ",
        "PRIVATE KEY-----",
        "-----END ",
        ":",
        "::",
        "://",
        "@",
        ".",
        "+",
        "(",
        ")",
        "/",
        "_",
        "#",
        "1",
        "12",
        "555",
        "4111",
        "0",
        "AKIA",
        "ASIA",
        "DE89",
        "GB82",
        "ghp_",
        "github_pat_",
        "xoxb-",
        "xapp-",
        "eyJ",
        "eyJhbGciOiJub25lIn0",
        "fe80",
        "2001:db8",
        "a",
        "Z",
        "x",
        "e",
        "g",
        "order #",
        "SSN ",
        "tel ",
        "version ",
        "\"",
        "{",
        "}",
        "[",
        "]",
        ",",
        "\\",
        "%",
        "=",
        "==",
        "\u{0}",
    ];
    let policy = crate::config::Policy::default();
    let mut r = Rng::new(99);
    for _ in 0..20_000 {
        let n = r.range(1, 40);
        let text: String = (0..n).map(|_| r.pick(PIECES)).collect();
        let found = scan(&text, None);
        let mut last = 0;
        for f in &found {
            assert!(
                f.start >= last && f.start < f.end && f.end <= text.len(),
                "{text:?}"
            );
            assert!(
                text.is_char_boundary(f.start) && text.is_char_boundary(f.end),
                "{text:?}"
            );
            last = f.end;
        }
        let mut c = [0; PiiType::COUNT];
        let _ = crate::redact::text(&text, &policy, &mut c);
        let doc = serde_json::json!({ "k": text, "n": [text.clone()] }).to_string();
        let mut c = [0; PiiType::COUNT];
        if let Ok(Some(out)) = crate::redact::text(&doc, &policy, &mut c) {
            serde_json::from_str::<serde_json::Value>(&out).expect("redacted JSON stays JSON");
        }
    }
}
