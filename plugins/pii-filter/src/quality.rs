//! Detection quality: span-exact precision and recall per type.
//!
//! - [`third_party_set`] scores `eval/thirdparty.jsonl`, built by `eval/build_thirdparty.py`
//!   from generators the project did not write (Faker's locale providers, PyJWT,
//!   `cryptography`, vendors' documented key formats; see `eval/SOURCES.md`). This is the
//!   evidence of quality, and the suite fails below 0.95 on any type.
//! - [`regression_generated_set`] scores the project's own generator (`src/dataset.rs`). It was
//!   written together with the detector, so it only guards against regressions.
//!
//! `cargo test -p pii-filter quality -- --nocapture` prints both tables.

use crate::dataset::{generate, Sample};
use crate::detect::scan;
use crate::types::PiiType;
use serde::Deserialize;
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

/// One labelled text, whichever set it came from.
struct Labelled<'a> {
    text: &'a str,
    spans: Vec<(PiiType, usize, usize)>,
    /// What the sample is about (source and layout), for the error listing.
    tag: String,
    /// Hard-negative kind, when the sample is one.
    negative: Option<String>,
}

struct Report {
    scores: [Score; PiiType::COUNT],
    /// Hard-negative samples, and how many of them got any finding, by kind.
    negatives: BTreeMap<String, (usize, usize)>,
    examples: Vec<String>,
}

impl Report {
    fn negatives_touched(&self) -> (usize, usize) {
        self.negatives
            .values()
            .fold((0, 0), |(n, t), &(a, b)| (n + a, t + b))
    }
}

fn score(samples: &[Labelled]) -> Report {
    let mut scores = [Score::default(); PiiType::COUNT];
    let mut negatives: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut examples = Vec::new();
    // PII_QUALITY_EXAMPLES=n lists more of the misses and false findings.
    let cap: usize = std::env::var("PII_QUALITY_EXAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let note = |examples: &mut Vec<String>, s: String| {
        if examples.len() < cap {
            examples.push(s);
        }
    };
    for s in samples {
        let truth: HashSet<(PiiType, usize, usize)> = s.spans.iter().copied().collect();
        let found = scan(s.text, None);
        let got: HashSet<(PiiType, usize, usize)> =
            found.iter().map(|f| (f.kind, f.start, f.end)).collect();
        if let Some(kind) = &s.negative {
            let e = negatives.entry(kind.clone()).or_default();
            e.0 += 1;
            e.1 += usize::from(!got.is_empty());
        }
        for &(t, a, b) in &got {
            if truth.contains(&(t, a, b)) {
                scores[t.index()].tp += 1;
            } else {
                scores[t.index()].fp += 1;
                note(
                    &mut examples,
                    format!(
                        "FP {} {:?} [{}] in {:?}",
                        t.name(),
                        &s.text[a..b],
                        s.tag,
                        s.text
                    ),
                );
            }
        }
        for &(t, a, b) in &truth {
            if !got.contains(&(t, a, b)) {
                scores[t.index()].fn_ += 1;
                note(
                    &mut examples,
                    format!(
                        "FN {} {:?} [{}] in {:?}",
                        t.name(),
                        &s.text[a..b],
                        s.tag,
                        s.text
                    ),
                );
            }
        }
    }
    Report {
        scores,
        negatives,
        examples,
    }
}

/// Prints the table and returns the types below `min` on precision or recall.
fn table(report: &Report, min: f64, min_support: usize) -> Vec<&'static str> {
    for e in &report.examples {
        println!("{e}");
    }
    println!("| type | support | TP | FP | FN | precision | recall |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut failed = Vec::new();
    for t in PiiType::ALL.into_iter().filter(|t| t.by_pattern()) {
        let s = report.scores[t.index()];
        if s.tp + s.fn_ + s.fp == 0 && min_support == 0 {
            continue;
        }
        println!(
            "| {} | {} | {} | {} | {} | {:.3} | {:.3} |",
            t.name(),
            s.tp + s.fn_,
            s.tp,
            s.fp,
            s.fn_,
            s.precision(),
            s.recall()
        );
        if s.tp + s.fn_ < min_support || s.precision() < min || s.recall() < min {
            failed.push(t.name());
        }
    }
    failed
}

#[derive(Deserialize)]
struct ThirdParty {
    text: String,
    spans: Vec<(String, usize, usize)>,
    source: String,
    layout: String,
    #[serde(default)]
    negative: Option<String>,
}

/// Reads one of the committed sets in `eval/` (see `eval/SOURCES.md`).
fn load(file: &str) -> Vec<ThirdParty> {
    let path = format!("{}/eval/{file}", env!("CARGO_MANIFEST_DIR"));
    let data = std::fs::read_to_string(&path).expect("a set in eval/ (see eval/SOURCES.md)");
    data.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn labelled(raw: &[ThirdParty]) -> Vec<Labelled<'_>> {
    raw.iter()
        .map(|r| Labelled {
            text: &r.text,
            spans: r
                .spans
                .iter()
                .map(|(t, a, b)| (PiiType::from_name(t).expect("known type"), *a, *b))
                .collect(),
            tag: format!("{} / {}", r.source, r.layout),
            negative: r.negative.clone(),
        })
        .collect()
}

/// The samples `keep` picks, scored as values only (hard negatives not counted as such).
fn part<'a>(all: &[Labelled<'a>], keep: impl Fn(&Labelled) -> bool) -> Vec<Labelled<'a>> {
    all.iter()
        .filter(|s| keep(s))
        .map(|s| Labelled {
            text: s.text,
            spans: s.spans.clone(),
            tag: s.tag.clone(),
            negative: None,
        })
        .collect()
}

#[test]
fn quality_third_party_set() {
    let raw = load("thirdparty.jsonl");
    let samples = labelled(&raw);
    let report = score(&samples);
    println!("third-party set: {} samples", samples.len());
    let failed = table(&report, 0.95, 50);
    let (n, touched) = report.negatives_touched();
    println!(
        "hard negatives: {n} samples, {touched} touched ({:.2}%)",
        100.0 * touched as f64 / n.max(1) as f64
    );
    for (kind, (count, t)) in &report.negatives {
        if *t > 0 {
            println!("  {kind}: {t} of {count}");
        }
    }
    // Disguised values (zero-width, full-width, typographic dashes): recall on their own.
    let ev = score(&part(&samples, |s| s.tag.contains("evasion")));
    let (tp, fn_) = ev
        .scores
        .iter()
        .fold((0, 0), |(a, b), s| (a + s.tp, b + s.fn_));
    println!(
        "disguised values: {} of {} found ({:.3})",
        tp,
        tp + fn_,
        tp as f64 / (tp + fn_).max(1) as f64
    );
    assert!(
        failed.is_empty(),
        "below 0.95 on the third-party set: {failed:?}"
    );
    assert!(
        touched * 100 <= n * 3,
        "more than 3% of hard negatives touched: {touched} of {n}"
    );
}

/// Every value Faker's providers emit in 30 locales, valid or not (`eval/build_unfiltered.py`),
/// scored per source of the text around it: presidio-evaluator's templates, the provider's name
/// as a label, and bare prose. Values in context must be found (>= 0.95 recall per type in
/// `presidio` and `labelled`); bare ones are reported, since without context validation decides.
#[test]
fn quality_unfiltered_set() {
    let raw = load("unfiltered.jsonl");
    let all = labelled(&raw);
    let mut failed = Vec::new();
    for source in ["presidio", "labelled", "bare"] {
        let subset = part(&all, |s| s.tag.starts_with(source));
        let report = score(&subset);
        println!("\nunfiltered set, {source}: {} samples", subset.len());
        let below: Vec<_> = table(&report, 0.95, 0)
            .into_iter()
            .filter(|t| {
                let s = report.scores[PiiType::from_name(t).unwrap().index()];
                s.tp + s.fn_ > 0
            })
            .collect();
        if source != "bare" {
            failed.extend(below.into_iter().map(|t| format!("{source}:{t}")));
        }
    }
    assert!(
        failed.is_empty(),
        "below 0.95 on values in context: {failed:?}"
    );
}

#[test]
fn quality_regression_generated_set() {
    let generated = generate(0x5EED_2024, 400, 250);
    let samples: Vec<Labelled> = generated
        .iter()
        .map(|s: &Sample| Labelled {
            text: &s.text,
            spans: s.spans.clone(),
            tag: "generated".into(),
            negative: s.negatives.first().map(|n| n.to_string()),
        })
        .collect();
    let report = score(&samples);
    println!("generated set (regression only): {} samples", samples.len());
    // Types the generator does not produce have no support here; only its own types count.
    let failed: Vec<_> = table(&report, 0.95, 0)
        .into_iter()
        .filter(|t| {
            let k = PiiType::from_name(t).unwrap();
            report.scores[k.index()].tp + report.scores[k.index()].fn_ > 0
        })
        .collect();
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
        // Escapes and base64 (`decode.rs`), whole and cut.
        "%40",
        "%4",
        "%2540",
        "&#64;",
        "&#x4",
        "&#x40;",
        "&commat;",
        "&#65312;",
        "&#1114111;",
        "://",
        "jo",
        "U1NOIDUzNi0yMi0xMjM0",
        "U1NOIDUz",
        "Y29udGFjdCBqb0BleGFtcGxlLmNvbQ==",
        "de89",
        "Phone: ",
        "card ",
        "IBAN ",
        "电话：",
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
