//! Values kept by a text they were made from: parsed schemas, compiled validators. Agents declare
//! the same tools on every turn and a pooled instance judges many turns, so a plugin looks its
//! schemas up by their text on every call. With a `HashMap<String, _>` that lookup cost more than
//! the judging: SipHash over the whole text, then the target's `memcmp`, a byte at a time in
//! WebAssembly. Here the text is hashed and compared sixteen bytes at a time ([`TextHash`],
//! [`same`]: wasm SIMD in a plugin), which other caches of texts use too.
//!
//! The cache's hash is not keyed: texts made to collide only make a lookup compare them all, and
//! what is kept is bounded (entries and bytes), so that costs at most one scan of the cache.

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

/// A map's hasher for keys that are hashes already ([`TextHash`]'s): the key as it is.
#[derive(Default)]
pub struct Identity(u64);

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

/// The cache's hash of a text.
fn hash(bytes: &[u8]) -> u64 {
    let mut h = TextHash::new(0);
    h.bytes(bytes);
    h.finish()
}

/// A hash of texts over sixteen-byte chunks in four 32-bit lanes, each FxHash's
/// multiply-and-rotate step, folded into one word at the end. Fast, not strong: a seed keeps
/// outsiders from choosing collisions, and a cache must still compare the texts ([`same`]).
pub struct TextHash(lanes::Lanes);

impl TextHash {
    /// A hash started from `seed`.
    pub fn new(seed: u64) -> TextHash {
        TextHash(lanes::seeded(seed))
    }

    /// Hash `b`: its length, then its bytes sixteen at a time, the last sixteen (overlapping the
    /// chunks before them) standing for the rest; the length tells the overlap apart.
    #[cfg_attr(target_arch = "wasm32", target_feature(enable = "simd128"))]
    pub fn bytes(&mut self, b: &[u8]) {
        self.word(b.len() as u64);
        if b.len() < 16 {
            let mut last = [0u8; 16];
            last[..b.len()].copy_from_slice(b);
            self.0 = lanes::step(self.0, &last);
            return;
        }
        let mut h = self.0;
        for chunk in b.chunks_exact(16) {
            h = lanes::step(h, chunk);
        }
        self.0 = lanes::step(h, &b[b.len() - 16..]);
    }

    /// Hash one word.
    pub fn word(&mut self, w: u64) {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&w.to_le_bytes());
        self.0 = lanes::step(self.0, &b);
    }

    /// The hash of everything so far.
    pub fn finish(self) -> u64 {
        // murmur3's finaliser: every bit of the state reaches every bit of the hash.
        let mut h = lanes::fold(self.0);
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

/// `a == b`, sixteen bytes at a time (the target's `memcmp` goes one at a time in WebAssembly).
#[cfg_attr(target_arch = "wasm32", target_feature(enable = "simd128"))]
pub fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if a.len() < 16 {
        return a == b;
    }
    // The last sixteen bytes (overlapping the chunks before them), then every chunk.
    let last = a.len() - 16;
    if lanes::differ(&a[last..], &b[last..]) {
        return false;
    }
    let mut i = 0;
    while i < last {
        if lanes::differ(&a[i..], &b[i..]) {
            return false;
        }
        i += 16;
    }
    true
}

/// FxHash's 32-bit multiplier.
const K: u32 = 0x9e37_79b9;

/// Sixteen bytes as four 32-bit lanes: wasm SIMD in a plugin (the JIT's scalar code for these
/// loops took ~30-50 instructions a chunk), the same arithmetic lane by lane natively.
#[cfg(target_arch = "wasm32")]
mod lanes {
    use super::K;
    use core::arch::wasm32::*;

    pub type Lanes = v128;

    #[target_feature(enable = "simd128")]
    fn load(b: &[u8]) -> v128 {
        let b = &b[..16];
        #[allow(unsafe_code)]
        // SAFETY: `b` is sixteen readable bytes, and v128.load needs no alignment.
        unsafe {
            v128_load(b.as_ptr().cast::<v128>())
        }
    }

    /// Whether the first sixteen bytes of `a` and `b` differ.
    #[target_feature(enable = "simd128")]
    pub fn differ(a: &[u8], b: &[u8]) -> bool {
        v128_any_true(v128_xor(load(a), load(b)))
    }

    #[target_feature(enable = "simd128")]
    pub fn seeded(seed: u64) -> v128 {
        u64x2(seed, seed.rotate_left(32))
    }

    /// Each lane xor its word of `b`'s first sixteen bytes, rotated, times `K`.
    #[target_feature(enable = "simd128")]
    pub fn step(h: v128, b: &[u8]) -> v128 {
        let x = v128_xor(h, load(b));
        i32x4_mul(v128_or(i32x4_shl(x, 5), u32x4_shr(x, 27)), u32x4_splat(K))
    }

    #[target_feature(enable = "simd128")]
    pub fn fold(h: v128) -> u64 {
        u64x2_extract_lane::<0>(h) ^ u64x2_extract_lane::<1>(h).rotate_left(29)
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod lanes {
    use super::K;

    pub type Lanes = [u32; 4];

    pub fn differ(a: &[u8], b: &[u8]) -> bool {
        a[..16] != b[..16]
    }

    pub fn seeded(seed: u64) -> Lanes {
        let hi = seed.rotate_left(32);
        [
            seed as u32,
            (seed >> 32) as u32,
            hi as u32,
            (hi >> 32) as u32,
        ]
    }

    pub fn step(mut h: Lanes, b: &[u8]) -> Lanes {
        for (lane, w) in h.iter_mut().zip(b[..16].chunks_exact(4)) {
            let w = u32::from_le_bytes(w.try_into().expect("four bytes"));
            *lane = (*lane ^ w).rotate_left(5).wrapping_mul(K);
        }
        h
    }

    pub fn fold(h: Lanes) -> u64 {
        let [a, b, c, d] = h.map(u64::from);
        (a | b << 32) ^ (c | d << 32).rotate_left(29)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_and_only_those_are_the_same() {
        let base: Vec<u8> = (0..70u8).map(|i| b'a' + i % 26).collect();
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
