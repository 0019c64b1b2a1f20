//! Values kept by a text they were made from: parsed schemas, compiled validators. Agents declare
//! the same tools on every turn and a pooled instance judges many turns, so a plugin looks its
//! schemas up by their text on every call. With a `HashMap<String, _>` that lookup cost more than
//! the judging: SipHash over the whole text, then the target's `memcmp`, a byte at a time in
//! WebAssembly. Here the text is hashed and compared eight bytes at a time.
//!
//! The hash is not keyed: texts made to collide only make a lookup compare them all, and what
//! is kept is bounded (entries and bytes), so that costs at most one scan of the cache.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Values by their text, at most `max_entries` of them and `max_bytes` of text: past either,
/// the cache starts afresh with the next insert.
pub struct ByText<V> {
    /// Entry indices by the hash of their text (several when texts collide).
    slots: HashMap<u64, Vec<usize>, BuildHasherDefault<Identity>>,
    entries: Vec<(Box<str>, V)>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

impl<V> ByText<V> {
    /// An empty cache with these bounds.
    pub fn new(max_entries: usize, max_bytes: usize) -> ByText<V> {
        ByText {
            slots: HashMap::default(),
            entries: Vec::new(),
            bytes: 0,
            max_entries,
            max_bytes,
        }
    }

    /// The value kept for `text`.
    pub fn get(&self, text: &str) -> Option<&V> {
        self.find(text).map(|i| &self.entries[i].1)
    }

    /// The value kept for `text`, or else the one `make` makes of it, then kept. One lookup
    /// either way.
    pub fn get_or_insert_with(&mut self, text: &str, make: impl FnOnce(&str) -> V) -> &V {
        match self.find(text) {
            Some(i) => &self.entries[i].1,
            None => self.insert(text, make(text)),
        }
    }

    /// [`ByText::get_or_insert_with`] for a value that may not be made (`None`: nothing kept).
    pub fn get_or_make(&mut self, text: &str, make: impl FnOnce(&str) -> Option<V>) -> Option<&V> {
        match self.find(text) {
            Some(i) => Some(&self.entries[i].1),
            None => {
                let value = make(text)?;
                Some(self.insert(text, value))
            }
        }
    }

    fn find(&self, text: &str) -> Option<usize> {
        self.slots
            .get(&hash(text.as_bytes()))?
            .iter()
            .copied()
            .find(|&i| same(self.entries[i].0.as_bytes(), text.as_bytes()))
    }

    /// Keep `value` for `text` (which has none yet), and return it.
    fn insert(&mut self, text: &str, value: V) -> &V {
        if self.entries.len() >= self.max_entries || self.bytes + text.len() > self.max_bytes {
            self.clear();
        }
        self.bytes += text.len();
        self.slots
            .entry(hash(text.as_bytes()))
            .or_default()
            .push(self.entries.len());
        self.entries.push((text.into(), value));
        &self.entries[self.entries.len() - 1].1
    }

    /// Forget everything.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.entries.clear();
        self.bytes = 0;
    }

    /// Values kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of text kept.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The map's own hasher: its keys are hashes already.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// An eight-byte chunk as a word (one load: no copy, which WebAssembly makes a call).
fn word(chunk: &[u8]) -> u64 {
    u64::from_le_bytes(chunk.try_into().expect("eight bytes"))
}

/// A multiply-rotate hash over eight-byte words (FxHash's step), with the length folded in.
fn hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let step = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let mut h = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        h = step(h, word(chunk));
    }
    let mut tail = 0u64;
    for (i, &b) in chunks.remainder().iter().enumerate() {
        tail |= u64::from(b) << (8 * i);
    }
    h = step(h, tail);
    h ^ (h >> 29)
}

/// `a == b`, eight bytes at a time.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (x, y) = (a.chunks_exact(8), b.chunks_exact(8));
    let tails_equal = x.remainder().iter().zip(y.remainder()).all(|(p, q)| p == q);
    tails_equal && x.zip(y).all(|(p, q)| word(p) == word(q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_and_only_those_are_the_same() {
        let base: Vec<u8> = (0..40u8).map(|i| b'a' + i % 26).collect();
        for len in 0..base.len() {
            let a = &base[..len];
            assert!(same(a, a));
            let copy = a.to_vec();
            assert_eq!(hash(a), hash(&copy), "the same bytes elsewhere");
            for at in 0..len {
                let mut b = a.to_vec();
                b[at] ^= 0x20;
                assert!(!same(a, &b), "len {len}, differs at {at}");
                assert_ne!(hash(a), hash(&b), "len {len}, differs at {at}");
            }
            assert!(!same(a, &base[..len + 1]));
        }
        // Trailing zero bytes are not padding.
        assert!(!same(b"ab", b"ab\0"));
        assert_ne!(hash(b"ab"), hash(b"ab\0"));
    }

    #[test]
    fn values_are_found_by_their_text_within_bounds() {
        let mut cache = ByText::new(3, 100);
        assert!(cache.get("x").is_none());
        assert_eq!(cache.get_or_make("x", |_| None::<i32>), None);
        assert!(cache.is_empty(), "nothing made, nothing kept");
        assert_eq!(cache.get_or_make("[1]", |t| Some(t.len() as i32)), Some(&3));
        assert_eq!(cache.get_or_make("[1]", |_| Some(0)), Some(&3), "made once");
        assert_eq!(*cache.get_or_insert_with("[1]", |_| 0), 3, "made once");
        assert_eq!(*cache.get_or_insert_with("[2]", |_| 7), 7);
        cache.clear();
        assert_eq!(*cache.insert("{\"type\": \"object\"}", 1), 1);
        cache.insert("{}", 2);
        assert_eq!(cache.get("{\"type\": \"object\"}"), Some(&1));
        assert_eq!(cache.get("{}"), Some(&2));
        assert!(cache.get("{\"type\": \"objecT\"}").is_none());
        cache.insert("[]", 3);
        assert_eq!(cache.len(), 3);
        // A fourth entry: past the bound, the cache starts afresh.
        cache.insert("null", 4);
        assert_eq!(
            (cache.len(), cache.get("{}"), cache.get("null")),
            (1, None, Some(&4))
        );
        // Past the byte bound too.
        let long = "x".repeat(98);
        cache.insert(&long, 5);
        assert_eq!((cache.len(), cache.bytes()), (1, 98));
        assert_eq!(cache.get(&long), Some(&5));
    }

    #[test]
    fn texts_that_share_a_hash_are_told_apart() {
        let mut cache = ByText::new(10, 1000);
        // Two entries forced into one slot, as a collision would put them.
        cache.insert("a", 1);
        let i = cache.slots.remove(&hash(b"a")).unwrap();
        cache.entries.push(("b".into(), 2));
        let both = vec![i[0], 1];
        cache.slots.insert(hash(b"a"), both.clone());
        cache.slots.insert(hash(b"b"), both);
        assert_eq!(cache.get("a"), Some(&1));
        assert_eq!(cache.get("b"), Some(&2));
    }
}
