//! Passing over the bytes nothing looks at: prose up to the next byte that may start a value (a
//! byte whose [`TRIGGER`] class is not `QUIET`), and ASCII up to the next byte that may fold in
//! the normalised view. This is most of the scanner's work on ordinary text, so it goes a word at
//! a time natively and sixteen bytes at a time with wasm SIMD in the plugin.

use super::{QUIET, TRIGGER};

// `skip_quiet(b, i)`: the first position at or after `i` whose byte is not `QUIET` (or the end).
// `skip_plain(b, i)`: the first position at or after `i` whose byte is not ASCII or is `%` or
// `&`, which may start an escape (or the end).
#[cfg(target_arch = "wasm32")]
pub(super) use simd::{skip_plain, skip_quiet};
#[cfg(not(target_arch = "wasm32"))]
pub(super) use swar::{skip_plain, skip_quiet};

/// The trigger bytes as the product of two 16-entry tables: bit `r` of the high-nibble table
/// stands for row `0x20 + 16 r` of the ASCII table (the four rows that hold triggers), and the
/// low-nibble table says in which rows each column triggers. A byte triggers exactly when its
/// two entries share a bit; non-ASCII bytes (high nibble 8 and up) never do.
#[cfg_attr(not(any(test, target_arch = "wasm32")), allow(dead_code))]
const NIBBLE_LO: [u8; 16] = nibble_lo();
#[cfg_attr(not(any(test, target_arch = "wasm32")), allow(dead_code))]
const NIBBLE_HI: [u8; 16] = [0, 0, 1, 2, 4, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

const fn nibble_lo() -> [u8; 16] {
    let mut t = [0u8; 16];
    let mut row = 0;
    while row < 4 {
        let mut col = 0;
        while col < 16 {
            if TRIGGER[0x20 + row * 16 + col] != QUIET {
                t[col] |= 1 << row;
            }
            col += 1;
        }
        row += 1;
    }
    t
}

#[cfg(not(target_arch = "wasm32"))]
mod swar {
    use super::{QUIET, TRIGGER};

    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;

    /// Bytes of `w` (all ASCII) in `lo..=hi`: their high bits set.
    #[inline(always)]
    fn in_range(w: u64, lo: u8, hi: u8) -> u64 {
        // For bytes below 0x80 neither sum carries into the next byte.
        let ge_lo = w.wrapping_add(ONES * u64::from(0x80 - lo));
        let gt_hi = w.wrapping_add(ONES * u64::from(0x7F - hi));
        ge_lo & !gt_hi & HIGH
    }

    /// Bytes of `w` (all ASCII) equal to `c`: their high bits set.
    #[inline(always)]
    fn equal(w: u64, c: u8) -> u64 {
        !(w ^ (ONES * u64::from(c))).wrapping_add(ONES * 0x7F) & HIGH
    }

    /// Whether any of these eight bytes may trigger a detector: a superset of the non-`QUIET`
    /// bytes (`( ) * +` count, as do `; <`), and any non-ASCII byte.
    #[inline(always)]
    fn may_trigger(w: u64) -> bool {
        w & HIGH != 0
            || (in_range(w, b'(', b'+')
                | equal(w, b'-')
                | in_range(w, b'0', b'=')
                | in_range(w, b'@', b'Z')
                | equal(w, b'_'))
                != 0
    }

    /// Eight bytes at a time; a word that may hold a trigger is then read byte by byte.
    #[inline]
    pub(crate) fn skip_quiet(b: &[u8], mut i: usize) -> usize {
        loop {
            while let Some(chunk) = b.get(i..i + 8) {
                if may_trigger(u64::from_le_bytes(chunk.try_into().expect("eight bytes"))) {
                    break;
                }
                i += 8;
            }
            let stop = (i + 8).min(b.len());
            while i < stop {
                if TRIGGER[b[i] as usize] != QUIET {
                    return i;
                }
                i += 1;
            }
            if i >= b.len() {
                return i;
            }
        }
    }

    /// Eight bytes at a time: a word with a high bit set, a `%` or a `&` holds the stop.
    #[inline]
    pub(crate) fn skip_plain(b: &[u8], mut i: usize) -> usize {
        while let Some(chunk) = b.get(i..i + 8) {
            let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            if (w & HIGH) | in_range(w, b'%', b'&') != 0 {
                break;
            }
            i += 8;
        }
        while i < b.len() && b[i].is_ascii() && !matches!(b[i], b'%' | b'&') {
            i += 1;
        }
        i
    }
}

#[cfg(target_arch = "wasm32")]
mod simd {
    use super::{NIBBLE_HI, NIBBLE_LO, QUIET, TRIGGER};
    use core::arch::wasm32::*;

    /// Sixteen bytes at a time: each byte's two nibbles looked up with `i8x16.swizzle`; a lane
    /// triggers when the lookups share a bit, and the first such lane is the answer (no byte
    /// by byte pass, the tables being exact).
    #[target_feature(enable = "simd128")]
    pub(crate) fn skip_quiet(b: &[u8], mut i: usize) -> usize {
        let lo_table = table(NIBBLE_LO);
        let hi_table = table(NIBBLE_HI);
        let low_nibble = u8x16_splat(0x0F);
        while let Some(chunk) = b.get(i..i + 16) {
            #[allow(unsafe_code)]
            // SAFETY: `chunk` is sixteen readable bytes, and v128.load needs no alignment.
            let v = unsafe { v128_load(chunk.as_ptr().cast::<v128>()) };
            let lo = i8x16_swizzle(lo_table, v128_and(v, low_nibble));
            let hi = i8x16_swizzle(hi_table, u8x16_shr(v, 4));
            let hits = i8x16_bitmask(u8x16_ne(v128_and(lo, hi), u8x16_splat(0)));
            if hits != 0 {
                return i + hits.trailing_zeros() as usize;
            }
            i += 16;
        }
        while i < b.len() && TRIGGER[b[i] as usize] == QUIET {
            i += 1;
        }
        i
    }

    /// Sixteen bytes at a time: a lane's high bit is the byte's, or-ed with the lanes equal to
    /// `%` or `&`.
    #[target_feature(enable = "simd128")]
    pub(crate) fn skip_plain(b: &[u8], mut i: usize) -> usize {
        let percent = u8x16_splat(b'%');
        let amp = u8x16_splat(b'&');
        while let Some(chunk) = b.get(i..i + 16) {
            #[allow(unsafe_code)]
            // SAFETY: as in `skip_quiet`.
            let v = unsafe { v128_load(chunk.as_ptr().cast::<v128>()) };
            let stops = v128_or(v, v128_or(u8x16_eq(v, percent), u8x16_eq(v, amp)));
            let high = i8x16_bitmask(stops);
            if high != 0 {
                return i + high.trailing_zeros() as usize;
            }
            i += 16;
        }
        while i < b.len() && b[i].is_ascii() && !matches!(b[i], b'%' | b'&') {
            i += 1;
        }
        i
    }

    #[target_feature(enable = "simd128")]
    fn table(t: [u8; 16]) -> v128 {
        u8x16(
            t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11], t[12], t[13],
            t[14], t[15],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nibble_tables_are_the_trigger_table() {
        for c in 0..=255u8 {
            let by_nibbles = NIBBLE_LO[usize::from(c & 0x0F)] & NIBBLE_HI[usize::from(c >> 4)] != 0;
            assert_eq!(
                by_nibbles,
                TRIGGER[usize::from(c)] != QUIET,
                "byte {c:#04x}"
            );
        }
    }

    #[test]
    fn stops_at_the_first_trigger_or_non_ascii_byte_wherever_it_is() {
        for len in 0..40 {
            for at in 0..=len {
                let mut text = vec![b'q'; len];
                if at < len {
                    text[at] = b'7';
                }
                assert_eq!(skip_quiet(&text, 0), at, "len {len}, trigger at {at}");
                for stop in [0xC3, b'%', b'&'] {
                    if at < len {
                        text[at] = stop;
                    }
                    assert_eq!(skip_plain(&text, 0), at, "len {len}, {stop:#x} at {at}");
                }
            }
        }
    }
}
