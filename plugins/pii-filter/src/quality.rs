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
                    examples.push(format!("FP {} {:?} in {:?}", t.name(), &s.text[a..b], s.text));
                }
            }
        }
        for &(t, a, b) in &truth {
            if !got.contains(&(t, a, b)) {
                scores[t.index()].fn_ += 1;
                if examples.len() < 40 {
                    examples.push(format!("FN {} {:?} in {:?}", t.name(), &s.text[a..b], s.text));
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
    assert!(a.iter().zip(&b).all(|(x, y)| x.text == y.text && x.spans == y.spans));
}

/// ~1 MiB of mixed text: prose with the corpus' positives and negatives spread through it
/// (`dense`: one sample after another; `sparse`: one sample every ~2 KiB of prose).
fn corpus(dense: bool) -> String {
    let samples = generate(42, 300, 150);
    let prose = "The quarterly report is ready for review; the deployment pipeline on the main \
                 branch failed twice overnight, so we rolled back at 03:00 and will retry after \
                 the fix lands. Customers asked about refunds, 3 tickets are open, and the \
                 meeting moved to next week. ";
    let mut out = String::with_capacity(1 << 20);
    let mut k = 0;
    while out.len() < 1 << 20 {
        if !dense {
            while out.len() % 2048 > 64 {
                out.push_str(prose);
            }
        }
        out.push_str(&samples[k % samples.len()].text);
        out.push('\n');
        k += 1;
    }
    out
}

#[test]
#[ignore]
fn throughput() {
    use std::time::Instant;
    let dense = corpus(true);
    let sparse = corpus(false);
    // The wasm measurement (bench/wasm-throughput.mjs) reads the same corpora.
    if let Some(dir) = std::env::var_os("PII_FILTER_CORPUS_DIR") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::write(dir.join("dense.txt"), &dense).unwrap();
        std::fs::write(dir.join("sparse.txt"), &sparse).unwrap();
    }
    // Best of several runs: the machine may be shared.
    let best = |f: &mut dyn FnMut()| {
        (0..15)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .fold(f64::INFINITY, f64::min)
    };
    for (name, text) in [("dense", dense), ("sparse", sparse)] {
        let policy = crate::config::Policy::default();
        let found = scan(&text, None).len();
        let scan_s = best(&mut || {
            std::hint::black_box(scan(std::hint::black_box(&text), None));
        });
        let redact_s = best(&mut || {
            let mut c = [0; PiiType::COUNT];
            std::hint::black_box(crate::redact::text(&text, &policy, &mut c).unwrap());
        });
        let mb = text.len() as f64 / 1e6;
        println!(
            "{name}: {mb:.2} MB, {found} findings; scan {:.0} MB/s, scan+redact {:.0} MB/s",
            mb / scan_s,
            mb / redact_s
        );
    }
}
