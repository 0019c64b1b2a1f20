//! What redaction made of texts already scanned, kept by a pooled instance between requests.
//!
//! On `input` and `tool_result` a client sends the whole conversation every turn, so all but the
//! newest messages were scanned on the turns before: a conversation of n turns was scanned
//! n²/2 messages' worth. The memo answers a text seen before from what its scan gave, so each
//! turn scans only what is new. An answer depends on the text and the policy alone (an instance
//! has one policy); it is keyed by the exact text, what kind of text it is (content, content
//! parts, tool-call arguments) and the request's tenant, so that no tenant can learn from the
//! time an answer takes whether another sent the same text. A hit compares the whole text, so a
//! hash collision costs a scan, never a wrong answer.
//!
//! Bounded: two generations of at most half the budget each; when the fresh one is full it
//! becomes the old one and the old one is dropped, and a hit in the old one moves to the fresh
//! one. Texts shorter than [`MIN_TEXT`] are scanned about as fast as they are looked up and are
//! not kept, nor is a text over a quarter of the budget. The texts kept (values it redacts
//! included) stay in the instance's memory, as the last request does; `memo_kib = 0` keeps none.
//!
//! Under reversible redaction an answer holds the vault's placeholders, and the vault keeps
//! values for one request only: an entry keeps what its scan hid, and a hit hides it again in the
//! running request's vault (one host call for all of them, `conceal-again`; no scan), or scans
//! again when the vault gives another placeholder (a new key).

use crate::config::Policy;
use crate::redact::{self, Blocked, Counts};
use railyard_plugin_sdk::by_text::{same, Identity, TextHash};
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault};

/// Shorter texts are not kept: natively a 7-byte text scans in ~56 ns and is found in ~42, while
/// a 28-byte prompt scans in ~67 and a 44-byte one with a `"key": value` in ~390, either found
/// in ~35 (BENCHMARKS.md §31).
pub const MIN_TEXT: usize = 16;

/// Per-entry bytes counted beyond the texts: the entry and its slot in the map, which keeps
/// between 7/16 and 7/8 of its slots full.
const ENTRY_OVERHEAD: usize = 2 * std::mem::size_of::<(u64, Entry)>();

/// Which scan a text gets: the answer for one kind says nothing about another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A message's text content ([`redact::text`]).
    Text,
    /// Content given as parts or an object ([`redact::parts`]).
    Parts,
    /// A tool call's arguments ([`redact::arguments`]).
    Arguments,
}

type Answer = Result<Option<String>, Blocked>;

struct Entry {
    kind: Kind,
    tenant: Option<Box<str>>,
    text: Box<str>,
    answer: Answer,
    counts: Counts,
    /// What the scan hid in the vault (reversible redaction): hidden again on a hit, so the
    /// request that reads the answer can have the values back.
    concealed: Box<[redact::Concealed]>,
}

impl Entry {
    fn bytes(&self) -> usize {
        let answer = match &self.answer {
            Ok(Some(s)) => s.len(),
            _ => 0,
        };
        ENTRY_OVERHEAD
            + self.text.len()
            + self.tenant.as_ref().map_or(0, |t| t.len())
            + answer
            + self
                .concealed
                .iter()
                .map(redact::Concealed::bytes)
                .sum::<usize>()
    }

    fn is(&self, kind: Kind, tenant: Option<&str>, text: &str) -> bool {
        self.kind == kind
            && self.tenant.as_deref() == tenant
            && same(self.text.as_bytes(), text.as_bytes())
    }
}

#[derive(Default)]
struct Generation {
    /// By [`Memo::key`], already seeded and mixed.
    entries: HashMap<u64, Entry, BuildHasherDefault<Identity>>,
    bytes: usize,
}

/// One instance's kept answers.
pub struct Memo {
    /// Half the budget: what one generation may hold. 0: nothing is kept.
    half: usize,
    /// Keys the text hash, so that which texts share a slot cannot be chosen from outside.
    seed: u64,
    fresh: Generation,
    old: Generation,
}

impl Memo {
    /// A memo that keeps up to about `budget` bytes (0: none).
    pub fn new(budget: usize) -> Memo {
        Memo {
            half: budget / 2,
            seed: if budget == 0 {
                0
            } else {
                std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64)
            },
            fresh: Generation::default(),
            old: Generation::default(),
        }
    }

    /// What [`redact`] makes of `text` of this `kind` under `policy`, from the memo when the
    /// same text came with the same tenant before; its counts are added to `counts` either way.
    pub fn redact(
        &mut self,
        kind: Kind,
        tenant: Option<&str>,
        text: &str,
        policy: &Policy,
        counts: &mut Counts,
    ) -> Answer {
        if self.half == 0 || text.len() < MIN_TEXT || text.len() > self.half / 2 {
            return scan(kind, text, policy, counts);
        }
        let key = self.key(kind, tenant, text);
        let mut hit = self
            .fresh
            .entries
            .get(&key)
            .is_some_and(|e| e.is(kind, tenant, text));
        if !hit {
            if let Some(e) = self.old.entries.remove(&key) {
                if e.is(kind, tenant, text) {
                    self.old.bytes -= e.bytes();
                    self.insert(key, e);
                    hit = true;
                } else {
                    self.old.entries.insert(key, e);
                }
            }
        }
        if hit {
            let e = &self.fresh.entries[&key];
            if redact::replay(&e.concealed) {
                add(counts, &e.counts);
                return e.answer.clone();
            }
        }
        let mut found: Counts = [0; crate::types::PiiType::COUNT];
        let (answer, concealed) = redact::recording(|| scan(kind, text, policy, &mut found));
        add(counts, &found);
        let entry = Entry {
            kind,
            tenant: tenant.map(Box::from),
            text: Box::from(text),
            answer: answer.clone(),
            counts: found,
            concealed: concealed.into(),
        };
        // A redaction can be longer than its text (`[IP_ADDRESS]` for `1.2.3.4`).
        if entry.bytes() <= self.half {
            self.insert(key, entry);
        }
        answer
    }

    /// Keep `entry` in the fresh generation (replacing what shared its slot), turning the
    /// generations over first when it would not fit.
    fn insert(&mut self, key: u64, entry: Entry) {
        let size = entry.bytes();
        if self.fresh.bytes + size > self.half {
            self.old = std::mem::take(&mut self.fresh);
        }
        self.fresh.bytes += size;
        if let Some(replaced) = self.fresh.entries.insert(key, entry) {
            self.fresh.bytes -= replaced.bytes();
        }
    }

    fn key(&self, kind: Kind, tenant: Option<&str>, text: &str) -> u64 {
        let mut h = TextHash::new(self.seed ^ kind as u64);
        match tenant {
            None => h.word(u64::MAX),
            Some(t) => h.bytes(t.as_bytes()),
        }
        h.bytes(text.as_bytes());
        h.finish()
    }

    /// Bytes kept, as the budget counts them (for tests).
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.fresh.bytes + self.old.bytes
    }

    /// Texts kept (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.fresh.entries.len() + self.old.entries.len()
    }
}

fn scan(kind: Kind, text: &str, policy: &Policy, counts: &mut Counts) -> Answer {
    match kind {
        Kind::Text => redact::text(text, policy, counts),
        Kind::Parts => redact::parts(text, policy, counts),
        Kind::Arguments => redact::arguments(text, policy, counts),
    }
}

fn add(counts: &mut Counts, more: &Counts) {
    for (c, m) in counts.iter_mut().zip(more) {
        *c += m;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::PiiType;

    const PROSE: &str = "The quarterly report is attached; please review the figures before \
                         Friday and tell me what you think of them.";

    fn plain(kind: Kind, text: &str, policy: &Policy) -> (Answer, Counts) {
        let mut counts = [0; PiiType::COUNT];
        (scan(kind, text, policy, &mut counts), counts)
    }

    #[test]
    fn a_kept_answer_is_what_the_scan_gives() {
        let policy = Policy::from_json(r#"{"types": {"CREDIT_CARD": "block"}}"#).unwrap();
        let texts = [
            format!("{PROSE} Reach me at jane.doe@example.com or +44 20 7946 0958."),
            format!("{PROSE} Nothing personal here at all, just words."),
            format!("{PROSE} Card 4111 1111 1111 1111 expires soon."),
            format!(r#"{{"note": "{PROSE}", "email": "jane.doe@example.com"}}"#),
            format!(r#"[{{"type": "text", "text": "{PROSE} mail jane.doe@example.com"}}]"#),
            "jane.doe@example.com".to_owned(),
        ];
        let mut memo = Memo::new(256 << 10);
        for round in 0..3 {
            for text in &texts {
                for kind in [Kind::Text, Kind::Parts, Kind::Arguments] {
                    for tenant in [None, Some("a"), Some("b")] {
                        let mut counts = [1; PiiType::COUNT];
                        let got = memo.redact(kind, tenant, text, &policy, &mut counts);
                        let (want, found) = plain(kind, text, &policy);
                        assert_eq!(got, want, "round {round}, {kind:?}, {text}");
                        let added: Vec<u32> = found.iter().map(|c| c + 1).collect();
                        assert_eq!(counts.to_vec(), added, "round {round}, {kind:?}");
                    }
                }
            }
        }
        // Each text once per kind and tenant.
        assert_eq!(memo.len(), texts.len() * 3 * 3);
    }

    #[test]
    fn a_hit_compares_the_whole_text() {
        let policy = Policy::default();
        let mut memo = Memo::new(256 << 10);
        let clean = format!("{PROSE} Nothing to see.");
        let personal = format!("{PROSE} jane@example.com");
        let mut counts = [0; PiiType::COUNT];
        memo.redact(Kind::Text, None, &clean, &policy, &mut counts)
            .unwrap();
        // Plant the clean answer in the slot the personal text hashes to, as a collision would.
        let entry = memo
            .fresh
            .entries
            .remove(&memo.key(Kind::Text, None, &clean));
        let key = memo.key(Kind::Text, None, &personal);
        memo.fresh.entries.insert(key, entry.unwrap());
        let got = memo.redact(Kind::Text, None, &personal, &policy, &mut counts);
        assert_eq!(got, plain(Kind::Text, &personal, &policy).0);
        assert!(got.unwrap().unwrap().contains("[EMAIL]"));
        assert_eq!(counts[PiiType::Email.index()], 1);
    }

    #[test]
    fn a_memo_is_bounded_and_keeps_what_is_used() {
        let policy = Policy::default();
        let budget = 16 << 10;
        let mut memo = Memo::new(budget);
        let mut counts = [0; PiiType::COUNT];
        let hot = format!("{PROSE} hot");
        for i in 0..2000 {
            let text = format!("{PROSE} {i}");
            memo.redact(Kind::Text, None, &text, &policy, &mut counts)
                .unwrap();
            memo.redact(Kind::Text, None, &hot, &policy, &mut counts)
                .unwrap();
            assert!(memo.bytes() <= budget, "{} bytes after {i}", memo.bytes());
        }
        assert!(memo.len() > 10, "{} texts kept", memo.len());
        let key = memo.key(Kind::Text, None, &hot);
        assert!(memo.fresh.entries.contains_key(&key) || memo.old.entries.contains_key(&key));
        // Too long for the budget, too short to be worth it, or no budget: scanned, not kept.
        let before = memo.len();
        let long = PROSE.repeat(budget / PROSE.len());
        memo.redact(Kind::Text, None, &long, &policy, &mut counts)
            .unwrap();
        memo.redact(Kind::Text, None, "short", &policy, &mut counts)
            .unwrap();
        assert_eq!(memo.len(), before);
        let mut off = Memo::new(0);
        off.redact(Kind::Text, None, &hot, &policy, &mut counts)
            .unwrap();
        assert_eq!(off.len(), 0);
    }
}
