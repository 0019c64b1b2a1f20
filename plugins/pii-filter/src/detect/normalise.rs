//! A normalised view of text for matching, with a map back to the original bytes.
//!
//! Attackers break values up with characters a reader does not see or does not notice:
//! zero-width spaces and joiners, soft hyphens, no-break and other Unicode spaces, full-width
//! and small-form `＠` and `﹫`, typographic dashes, digits of other scripts (`٠١٢`, `०१२`,
//! mathematical `𝟎𝟏𝟐`), variation selectors and Unicode tag characters. The detectors match on a view where those are folded the
//! way NFKC (plus dropping invisibles) would fold them, and each match is mapped back to the
//! original byte span, so a redaction removes the whole disguised value (invisible characters
//! inside it included) and leaves every other byte as it was.
//!
//! Escapes are folded the same way, one level: `%40`, `&#64;` and `&commat;` are an `@` in the
//! view (`decode.rs`).
//!
//! Only the characters that matter for the formats we detect are folded; everything else is
//! copied unchanged. Text without any of these characters or escapes is scanned as is.

/// What a character becomes in the normalised view.
enum Fold {
    Keep,
    Drop,
    To(u8),
    /// A letter another script shares with Latin: folded to this one among Latin text only.
    Confusable(u8),
}

fn fold(c: char) -> Fold {
    match c {
        // Zero-width space/non-joiner/joiner, word joiner, invisible operators, BOM (zero-width
        // no-break space), soft hyphen, Mongolian vowel separator.
        '\u{200B}'..='\u{200D}'
        | '\u{2060}'..='\u{2064}'
        | '\u{FEFF}'
        | '\u{00AD}'
        | '\u{180E}' => Fold::Drop,
        // No-break, Ogham, en/em/thin/hair and other fixed-width spaces, narrow no-break,
        // medium mathematical, ideographic.
        '\u{00A0}'
        | '\u{1680}'
        | '\u{2000}'..='\u{200A}'
        | '\u{202F}'
        | '\u{205F}'
        | '\u{3000}' => Fold::To(b' '),
        // Hyphen, non-breaking hyphen, figure/en/em dash, horizontal bar, minus sign, small and
        // full-width hyphen-minus.
        '\u{2010}'..='\u{2015}' | '\u{2212}' | '\u{FE58}' | '\u{FE63}' => Fold::To(b'-'),
        // Full-width ASCII (NFKC maps U+FF01..U+FF5E to U+0021..U+007E).
        '\u{FF01}'..='\u{FF5E}' => Fold::To((c as u32 - 0xFEE0) as u8),
        // Small form variants NFKC maps to ASCII (the small commercial at, full stop, ...).
        '\u{FE50}'..='\u{FE6B}' => match SMALL_FORMS[(c as u32 - 0xFE50) as usize] {
            0 => Fold::Keep,
            a => Fold::To(a),
        },
        // Variation selectors and their supplement, and Unicode tag characters: invisible, and
        // used to hide text from a reader or split a value for a matcher.
        '\u{FE00}'..='\u{FE0F}' | '\u{E0000}'..='\u{E007F}' | '\u{E0100}'..='\u{E01EF}' => {
            Fold::Drop
        }
        // Mathematical digits (bold, double-struck, sans-serif, monospace): NFKC maps them to
        // ASCII digits.
        '\u{1D7CE}'..='\u{1D7FF}' => Fold::To(b'0' + ((c as u32 - 0x1D7CE) % 10) as u8),
        // Superscript and subscript digits, circled and parenthesised ones: NFKC maps them to
        // ASCII digits too (`⁴¹¹¹`, `₄₁₁₁`, `④①①①`).
        '\u{00B9}' => Fold::To(b'1'),
        '\u{00B2}' => Fold::To(b'2'),
        '\u{00B3}' => Fold::To(b'3'),
        '\u{2070}' => Fold::To(b'0'),
        '\u{2074}'..='\u{2079}' => Fold::To(b'4' + (c as u32 - 0x2074) as u8),
        '\u{2080}'..='\u{2089}' => Fold::To(b'0' + (c as u32 - 0x2080) as u8),
        '\u{2460}'..='\u{2468}' => Fold::To(b'1' + (c as u32 - 0x2460) as u8),
        '\u{24EA}' => Fold::To(b'0'),
        '\u{2474}'..='\u{247C}' => Fold::To(b'1' + (c as u32 - 0x2474) as u8),
        // Letters of other scripts that a reader takes for Latin ones (Cyrillic `а`, `е`, `о`,
        // `р`, `с`, Greek `ο`, `α`, ...): folded where they stand among Latin ones
        // ([`among_latin`]), so an address spelled with them reads as the Latin one.
        '\u{0370}'..='\u{03FF}' | '\u{0400}'..='\u{052F}' => match confusable(c) {
            Some(a) => Fold::Confusable(a),
            None => Fold::Keep,
        },
        _ => match decimal(c) {
            Some(d) => Fold::To(b'0' + d),
            None => Fold::Keep,
        },
    }
}

/// Whether the character at `i..i + len` stands in a word that holds an ASCII letter, digit
/// or `@` (a word: the run of letters, digits and `@._-` around it, looked at 64 bytes either
/// way): `jаne@example.com` with a Cyrillic `а`, not the Cyrillic word `Телефон`.
fn among_latin(s: &str, i: usize, len: usize) -> bool {
    let wordy = |c: char| c.is_alphanumeric() || matches!(c, '@' | '.' | '_' | '-');
    let latin = |c: char| c.is_ascii_alphanumeric() || c == '@';
    let before = s[..i].chars().rev().take_while(|&c| wordy(c)).take(64);
    let after = s[i + len..].chars().take_while(|&c| wordy(c)).take(64);
    before.chain(after).any(latin)
}

/// The Latin letter a Greek or Cyrillic one is taken for: those of Unicode's confusables that
/// look the same upright, at a glance (`а`, `с`, `е`, `о`, `р`, `у`, `х`, Greek `ο`, ...).
fn confusable(c: char) -> Option<u8> {
    Some(match c {
        'а' => b'a',
        'с' => b'c',
        'ԁ' => b'd',
        'е' => b'e',
        'һ' => b'h',
        'і' => b'i',
        'ј' => b'j',
        'ӏ' => b'l',
        'о' => b'o',
        'р' => b'p',
        'ԛ' => b'q',
        'ѕ' => b's',
        'ԝ' => b'w',
        'х' => b'x',
        'у' => b'y',
        'А' => b'A',
        'В' => b'B',
        'С' => b'C',
        'Е' => b'E',
        'Н' => b'H',
        'І' => b'I',
        'Ј' => b'J',
        'К' => b'K',
        'М' => b'M',
        'О' => b'O',
        'Р' => b'P',
        'Ѕ' => b'S',
        'Т' => b'T',
        'Х' => b'X',
        'У' => b'Y',
        'α' => b'a',
        'ι' => b'i',
        'κ' => b'k',
        'ν' => b'v',
        'ο' => b'o',
        'ρ' => b'p',
        'υ' => b'u',
        'χ' => b'x',
        'Α' => b'A',
        'Β' => b'B',
        'Ε' => b'E',
        'Ζ' => b'Z',
        'Η' => b'H',
        'Ι' => b'I',
        'Κ' => b'K',
        'Μ' => b'M',
        'Ν' => b'N',
        'Ο' => b'O',
        'Ρ' => b'P',
        'Τ' => b'T',
        'Υ' => b'Y',
        'Χ' => b'X',
        _ => return None,
    })
}

/// What each small form variant (U+FE50..U+FE6B) is in ASCII, 0 for none.
const SMALL_FORMS: [u8; 28] = [
    b',', 0, b'.', 0, b';', b':', b'?', b'!', b'-', b'(', b')', b'{', b'}', 0, 0, b'#', b'&', b'*',
    b'+', b'-', b'<', b'>', b'=', 0, b'\\', b'$', b'%', b'@',
];

/// The zeros of the decimal digit blocks a reader reads as digits though NFKC keeps them
/// (Arabic-Indic, Extended Arabic-Indic, N'Ko, the Indic scripts, Sinhala, Thai, Lao, Tibetan,
/// Myanmar, Khmer, Mongolian): each block is ten digits from its zero.
const DIGIT_ZEROS: [u32; 19] = [
    0x0660, 0x06F0, 0x07C0, 0x0966, 0x09E6, 0x0A66, 0x0AE6, 0x0B66, 0x0BE6, 0x0C66, 0x0CE6, 0x0D66,
    0x0DE6, 0x0E50, 0x0ED0, 0x0F20, 0x1040, 0x17E0, 0x1810,
];

/// The value of a decimal digit of one of the [`DIGIT_ZEROS`] blocks.
fn decimal(c: char) -> Option<u8> {
    let c = c as u32;
    let k = DIGIT_ZEROS.partition_point(|&z| z <= c);
    let zero = *DIGIT_ZEROS.get(k.checked_sub(1)?)?;
    (c - zero < 10).then(|| (c - zero) as u8)
}

/// Whether a character's UTF-8 lead byte can start a folded character (a cheap pre-filter):
/// Latin-1 (no-break space, soft hyphen), Arabic and N'Ko digits, the Indic to Mongolian blocks,
/// punctuation and spaces, the ideographic space, the half- and full-width and small forms,
/// mathematical digits, and tags and variation selectors.
fn may_fold(lead: u8) -> bool {
    matches!(
        lead,
        0xC2 | 0xCD..=0xD4 | 0xD9 | 0xDB | 0xDF | 0xE0 | 0xE1 | 0xE2 | 0xE3 | 0xEF | 0xF0 | 0xF3
    )
}

/// A stretch of the normalised text and where it came from.
#[derive(Clone, Copy)]
struct Segment {
    /// Offset in the normalised text.
    at: u32,
    /// Offset in the original text.
    from: u32,
    /// Bytes in the original text: the segment's length when `copied`, else the length of the
    /// one character (or escape) folded to a single byte.
    len: u32,
    copied: bool,
}

/// The text as the detectors see it, and where its bytes came from.
pub struct Normalised {
    pub text: String,
    /// In order of `at`; dropped characters have none.
    segments: Vec<Segment>,
}

/// The first character (or escape, see `decode.rs`) at or after `i` that folds to something
/// else: its offset, its length in bytes, and what it folds to.
fn next_fold(
    s: &str,
    mut i: usize,
    url: &mut super::decode::Authority,
    spelled: u8,
) -> Option<(usize, usize, Fold)> {
    let b = s.as_bytes();
    while i < b.len() {
        // ASCII folds only as an escape (`%40`, `&#64;`), or, in text that holds one, as a
        // spelled one (`[at]`, `\u0040`: [`spelled_at`]).
        if spelled != 0 {
            if let Some((len, c)) = spelled_at(b, i, spelled) {
                return Some((i, len, c.map_or(Fold::Drop, Fold::To)));
            }
            if b[i].is_ascii() && !matches!(b[i], b'%' | b'&') {
                i += 1;
                continue;
            }
        } else {
            i = super::skip::skip_plain(b, i);
        }
        if i >= b.len() {
            break;
        }
        if b[i].is_ascii() {
            if let Some((len, c)) = super::decode::escape(b, i, url) {
                let f = match c {
                    c if c.is_ascii() => Fold::To(c as u8),
                    c => fold(c),
                };
                if let Fold::To(_) = f {
                    return Some((i, len, f));
                }
            }
            i += 1;
        } else if may_fold(b[i]) {
            let ch = s[i..]
                .chars()
                .next()
                .expect("a lead byte starts a character");
            match fold(ch) {
                Fold::Keep => i += ch.len_utf8(),
                Fold::Confusable(a) if among_latin(s, i, ch.len_utf8()) => {
                    return Some((i, ch.len_utf8(), Fold::To(a)))
                }
                Fold::Confusable(_) => i += ch.len_utf8(),
                f => return Some((i, ch.len_utf8(), f)),
            }
        } else {
            i += 1;
        }
    }
    None
}

/// What [`has_spelled`] found: escapes a reader spells out (`[at]`, `(dot)`, `\u0040`,
/// `\x40`), digits written as words, quoted-printable (`=40`, `=2E`), and quoted-printable's
/// soft line breaks (then every `=XX` is an escape).
const SPELLED: u8 = 1;
const QUOTED: u8 = 2;
/// A soft line break seen, and an escape only quoted-printable writes (`=3D` for `=`, `=C3` and
/// up for UTF-8): both make the text quoted-printable (an `a=40` in plain text is no escape).
const SOFT: u8 = 4;
const ESCAPED: u8 = 8;

/// Whether `s` holds a spelled-out escape or digit ([`SPELLED`], [`QUOTED`]): only then is it
/// scanned byte by byte for them (most text has none, and is passed over a word at a time).
fn has_spelled(s: &str) -> u8 {
    let b = s.as_bytes();
    let mut found = 0;
    // Most bytes start nothing: sixteen at a time, only the bytes that may are looked at (a
    // table lookup per byte, and before it an indirect jump per byte, were a third of a scan).
    let mut at = 0;
    while let Some(chunk) = b.get(at..at + 16) {
        let mut marks = spell_marks(chunk.try_into().expect("sixteen bytes"));
        while marks != 0 {
            found |= spelled_mark(b, at + marks.trailing_zeros() as usize);
            marks &= marks - 1;
        }
        at += 16;
    }
    for (k, &c) in b.iter().enumerate().skip(at) {
        if MAY_SPELL[usize::from(c)] {
            found |= spelled_mark(b, k);
        }
    }
    if found & (SOFT | ESCAPED) == SOFT | ESCAPED {
        found |= QUOTED;
    }
    found
}

/// What the byte at `k`, one of [`MAY_SPELL`], says for [`has_spelled`].
#[inline(always)]
fn spelled_mark(b: &[u8], k: usize) -> u8 {
    let ends = |word: &[u8]| k >= word.len() && b[k - word.len()..k].eq_ignore_ascii_case(word);
    match b[k] {
        b']' | b')' | b'}' if ends(b"at") || ends(b"dot") => SPELLED,
        b'\\' if matches!(b.get(k + 1), Some(b'u' | b'x')) => SPELLED,
        b' ' if may_start_digit_word(b, k + 1) && digit_words_from(b, k + 1, 3) => SPELLED,
        b'=' if soft_break(b, k).is_some() => SPELLED | SOFT,
        b'=' if quoted_mark(b, k).is_some() => SPELLED,
        b'=' if matches!(
            b.get(k + 1..k + 3),
            Some([b'3', b'D'] | [b'C'..=b'F', b'0'..=b'9' | b'A'..=b'F'])
        ) =>
        {
            ESCAPED
        }
        _ => 0,
    }
}

/// Which of sixteen bytes are [`MAY_SPELL`]'s, a bit each: six compares of one vector.
#[cfg(target_arch = "wasm32")]
#[target_feature(enable = "simd128")]
fn spell_marks(chunk: &[u8; 16]) -> u32 {
    use core::arch::wasm32::*;
    #[allow(unsafe_code)]
    // SAFETY: `chunk` is sixteen readable bytes, and v128.load needs no alignment.
    let v = unsafe { v128_load(chunk.as_ptr().cast::<v128>()) };
    let any = MAY_SPELL_BYTES.iter().fold(u8x16_splat(0), |m, &c| {
        v128_or(m, u8x16_eq(v, u8x16_splat(c)))
    });
    u32::from(i8x16_bitmask(any))
}

/// [`spell_marks`] off wasm (native tests), by the table.
#[cfg(not(target_arch = "wasm32"))]
fn spell_marks(chunk: &[u8; 16]) -> u32 {
    chunk.iter().enumerate().fold(0, |m, (j, &c)| {
        m | u32::from(MAY_SPELL[usize::from(c)]) << j
    })
}

/// The bytes of [`MAY_SPELL`].
const MAY_SPELL_BYTES: [u8; 6] = *b"])}\\ =";

/// The bytes [`has_spelled`] looks at: a spelled escape's closing bracket, a backslash, the space
/// before a digit word, and quoted-printable's `=`.
const MAY_SPELL: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < MAY_SPELL_BYTES.len() {
        t[MAY_SPELL_BYTES[i] as usize] = true;
        i += 1;
    }
    t
};

/// A quoted-printable soft line break at `i` (`=` ending a line inside a word): its length.
fn soft_break(b: &[u8], i: usize) -> Option<usize> {
    let len = match b.get(i + 1..)? {
        [b'\n', ..] => 2,
        [b'\r', b'\n', ..] => 3,
        _ => return None,
    };
    let word = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_graphic());
    // Not base64's padding at a line's end: a line of quoted-printable text holds a space or
    // punctuation base64 has not.
    let text = b[..i]
        .iter()
        .rev()
        .take(100)
        .take_while(|&&c| c != b'\n')
        .any(|&c| !super::decode::is_base64(c) && c != b'=');
    (i > 0 && word(b.get(i - 1)) && word(b.get(i + len)) && text).then_some(len)
}

/// A quoted-printable `@` or `.` at `i` (`=40`, `=2E`) between the characters of a word.
fn quoted_mark(b: &[u8], i: usize) -> Option<u8> {
    let c = match b.get(i + 1..i + 3)? {
        b"40" => b'@',
        b"2E" | b"2e" => b'.',
        _ => return None,
    };
    // Between a word and a domain's letters (`jane=40example`, `example=2Ecom`), not before
    // a number (`cc=4062...`).
    let before = i > 0 && b[i - 1].is_ascii_alphanumeric();
    (before && b.get(i + 3).is_some_and(u8::is_ascii_alphabetic)).then_some(c)
}

/// The digit a word at `i` spells (`zero` to `nine`, any case), and the word's end. Its first
/// two letters name the only word it can be, so most words are passed over at once.
fn digit_word(b: &[u8], i: usize) -> Option<(u8, usize)> {
    if !may_start_digit_word(b, i) {
        return None;
    }
    let (d, word): (u8, &[u8]) = match (b[i] | 0x20, b[i + 1] | 0x20) {
        (b'z', b'e') => (0, b"zero"),
        (b'o', b'n') => (1, b"one"),
        (b't', b'w') => (2, b"two"),
        (b't', b'h') => (3, b"three"),
        (b'f', b'o') => (4, b"four"),
        (b'f', b'i') => (5, b"five"),
        (b's', b'i') => (6, b"six"),
        (b's', b'e') => (7, b"seven"),
        (b'e', b'i') => (8, b"eight"),
        (b'n', b'i') => (9, b"nine"),
        _ => return None,
    };
    let end = i + word.len();
    let whole = b.get(i..end)?.eq_ignore_ascii_case(word)
        && !b.get(end).is_some_and(u8::is_ascii_alphanumeric)
        && (i == 0 || !b[i - 1].is_ascii_alphanumeric());
    whole.then_some((d, end))
}

/// Whether the two letters at `i` can begin a digit word. Asked at every word, so inlined where
/// it is asked: a table says it without the branch table [`digit_word`]'s match compiles to, or
/// a call (once a fifth of pii's time on plain text, most of it for words that begin none).
#[inline(always)]
fn may_start_digit_word(b: &[u8], i: usize) -> bool {
    let Some(&[a, z]) = b.get(i..i + 2) else {
        return false;
    };
    let (a, z) = (a | 0x20, z | 0x20);
    a.is_ascii_lowercase()
        && z.is_ascii_lowercase()
        && DIGIT_PAIRS[usize::from(a - b'a')] & (1 << (z - b'a')) != 0
}

/// For each first letter, the second letters a digit word can have (`zero` to `nine`).
const DIGIT_PAIRS: [u32; 26] = {
    let mut t = [0u32; 26];
    let words: [&[u8]; 10] = [
        b"zero", b"one", b"two", b"three", b"four", b"five", b"six", b"seven", b"eight", b"nine",
    ];
    let mut i = 0;
    while i < words.len() {
        t[(words[i][0] - b'a') as usize] |= 1 << (words[i][1] - b'a');
        i += 1;
    }
    t
};

/// The start of the digit word after one ending at `end`, past a space, a hyphen or a comma
/// and a space.
fn next_digit_word(b: &[u8], end: usize) -> Option<usize> {
    let gap = match b.get(end..end + 2)? {
        [b',' | b'-', b' '] => 2,
        [b' ' | b'-', _] => 1,
        _ => return None,
    };
    digit_word(b, end + gap).map(|_| end + gap)
}

/// Whether at least `n` digit words in a row start at `i`.
fn digit_words_from(b: &[u8], mut i: usize, n: usize) -> bool {
    for k in 1..=n {
        let Some((_, end)) = digit_word(b, i) else {
            return false;
        };
        if k < n {
            match next_digit_word(b, end) {
                Some(next) => i = next,
                None => return false,
            }
        }
    }
    true
}

/// Digits spelled out as words are a number (`four one one one ...`) when at least this many
/// are in a row: an SSN's length, shorter than a card's or a phone's.
const DIGIT_WORDS: usize = 9;

/// Whether the digit word at `i` is in a run of at least [`DIGIT_WORDS`]: counted back to the
/// run's start (bounded), then forward.
fn in_digit_run(b: &[u8], i: usize) -> bool {
    let mut start = i;
    for _ in 0..DIGIT_WORDS {
        match prev_digit_word(b, start) {
            Some(prev) => start = prev,
            None => break,
        }
    }
    digit_words_from(b, start, DIGIT_WORDS)
}

/// The start of the digit word before the one at `start`, if it is in the same run.
fn prev_digit_word(b: &[u8], start: usize) -> Option<usize> {
    (1..=2).find_map(|gap| {
        let end = start.checked_sub(gap)?;
        let letters = b[..end]
            .iter()
            .rev()
            .take(6)
            .take_while(|c| c.is_ascii_alphabetic())
            .count();
        let w = end - letters;
        (letters > 0
            && digit_word(b, w).is_some_and(|(_, e)| e == end)
            && next_digit_word(b, end) == Some(start))
        .then_some(w)
    })
}

/// A spelled-out character at `i`, and its length: `@` or `.` as `[at]`, `(at)`, `{at}`,
/// `[dot]`, `(dot)`, `{dot}` (any case, with a space on either side or none, which go with
/// it); a `\uXXXX` or `\xXX` escape of a printable ASCII character; a digit written as a word
/// in a run of them (with the gap to the next one); quoted-printable's `=40` and `=2E`, and in
/// quoted-printable text any `=XX` and the soft line break (`None`: dropped).
fn spelled_at(b: &[u8], i: usize, spelled: u8) -> Option<(usize, Option<u8>)> {
    match b[i] {
        b'\\' => {
            let (len, digits) = match b.get(i + 1)? {
                b'u' => (6, b.get(i + 2..i + 6)?),
                b'x' => (4, b.get(i + 2..i + 4)?),
                _ => return None,
            };
            if !digits.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            let code = u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()?;
            return (0x21..0x7F)
                .contains(&code)
                .then_some((len, Some(code as u8)));
        }
        b'=' => {
            if let Some(len) = soft_break(b, i) {
                return (spelled & QUOTED != 0).then_some((len, None));
            }
            if let Some(c) = quoted_mark(b, i) {
                return Some((3, Some(c)));
            }
            let digits = b.get(i + 1..i + 3)?;
            if spelled & QUOTED == 0
                || !digits
                    .iter()
                    .all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(c))
            {
                return None;
            }
            let code = u8::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()?;
            return (0x21..0x7F).contains(&code).then_some((3, Some(code)));
        }
        c if c.is_ascii_alphabetic() => {
            let (d, end) = digit_word(b, i)?;
            if !in_digit_run(b, i) {
                return None;
            }
            let len = next_digit_word(b, end).unwrap_or(end) - i;
            return Some((len, Some(b'0' + d)));
        }
        _ => {}
    }
    let mut j = i + usize::from(b[i] == b' ');
    let close = match b.get(j)? {
        b'[' => b']',
        b'(' => b')',
        b'{' => b'}',
        _ => return None,
    };
    j += 1;
    let word = b.get(j..j + 3)?;
    let (c, n) = if word[..2].eq_ignore_ascii_case(b"at") && word[2] == close {
        (b'@', 2)
    } else if word.eq_ignore_ascii_case(b"dot") && b.get(j + 3) == Some(&close) {
        (b'.', 3)
    } else {
        return None;
    };
    j += n + 1;
    j += usize::from(b.get(j) == Some(&b' '));
    Some((j - i, Some(c)))
}

impl Normalised {
    /// The normalised view of `s`, or `None` when it would equal `s` (the common case: ASCII,
    /// or text with none of the folded characters).
    pub fn of(s: &str) -> Option<Normalised> {
        // No `is_ascii` pass first: `next_fold` passes over ASCII at least as fast.
        let mut url = super::decode::Authority::default();
        let spelled = has_spelled(s);
        let mut next = next_fold(s, 0, &mut url, spelled)?;
        let mut text = String::with_capacity(s.len());
        let mut segments = Vec::new();
        let mut i = 0;
        loop {
            let (p, len, f) = next;
            if p > i {
                segments.push(Segment {
                    at: text.len() as u32,
                    from: i as u32,
                    len: (p - i) as u32,
                    copied: true,
                });
                text.push_str(&s[i..p]);
            }
            if let Fold::To(a) = f {
                segments.push(Segment {
                    at: text.len() as u32,
                    from: p as u32,
                    len: len as u32,
                    copied: false,
                });
                text.push(a as char);
            }
            i = p + len;
            match next_fold(s, i, &mut url, spelled) {
                Some(n) => next = n,
                None => break,
            }
        }
        if i < s.len() {
            segments.push(Segment {
                at: text.len() as u32,
                from: i as u32,
                len: (s.len() - i) as u32,
                copied: true,
            });
            text.push_str(&s[i..]);
        }
        Some(Normalised { text, segments })
    }

    /// The segment holding normalised byte `i`.
    fn segment(&self, i: usize) -> Segment {
        let k = self.segments.partition_point(|g| g.at as usize <= i);
        self.segments[k - 1]
    }

    /// Original span of the normalised span `a..b` (non-empty).
    pub fn original(&self, a: usize, b: usize) -> (usize, usize) {
        let first = self.segment(a);
        let start = if first.copied {
            first.from as usize + (a - first.at as usize)
        } else {
            first.from as usize
        };
        let last = self.segment(b - 1);
        let end = if last.copied {
            last.from as usize + (b - last.at as usize)
        } else {
            (last.from + last.len) as usize
        };
        (start, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_and_maps_back() {
        let s = "card 4111\u{200B}1111\u{2013}1111\u{00A0}１１１１ end";
        let n = Normalised::of(s).unwrap();
        assert_eq!(n.text, "card 41111111-1111 1111 end");
        let a = n.text.find('4').unwrap();
        let b = n.text.find(" end").unwrap();
        let (x, y) = n.original(a, b);
        assert_eq!(&s[x..y], "4111\u{200B}1111\u{2013}1111\u{00A0}１１１１");
        assert_eq!(&s[..x], "card ");
        assert_eq!(&s[y..], " end");
    }

    #[test]
    fn the_fast_tables_pass_over_only_what_starts_nothing() {
        let words = [
            "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
        ];
        for (d, w) in words.iter().enumerate() {
            for word in [w.to_string(), w.to_uppercase()] {
                let text = format!("x {word} y");
                assert_eq!(digit_word(text.as_bytes(), 2), Some((d as u8, 2 + w.len())));
            }
        }
        for not in ["the", "to", "ones", "tw", "zz", "01"] {
            assert_eq!(digit_word(not.as_bytes(), 0), None, "{not}");
        }
        // The inlined pair check passes exactly the two letters some digit word begins with.
        for a in b'a'..=b'z' {
            for z in b'a'..=b'z' {
                let starts = words.iter().any(|w| w.as_bytes()[..2] == [a, z]);
                for pair in [[a, z], [a.to_ascii_uppercase(), z.to_ascii_uppercase()]] {
                    assert_eq!(may_start_digit_word(&pair, 0), starts, "{pair:?}");
                }
            }
        }
        assert!(!may_start_digit_word(b"o", 0) && !may_start_digit_word(b"o1", 0));
        // Sixteen bytes at a time finds a mark wherever it falls, in a block or in the tail.
        for mark in ["[at]", "\\u0040", " one two three", "a=40b", "=3D"] {
            for before in 0..40 {
                let text = format!("{}{mark} {}", "q".repeat(before), "z".repeat(before % 7));
                let byte_by_byte = text
                    .bytes()
                    .enumerate()
                    .filter(|(_, c)| MAY_SPELL[usize::from(*c)])
                    .fold(0, |f, (k, _)| f | spelled_mark(text.as_bytes(), k));
                assert_ne!(byte_by_byte, 0, "{text:?}");
                assert_eq!(has_spelled(&text) & !QUOTED, byte_by_byte, "{text:?}");
            }
        }
        assert_eq!(has_spelled("call four one one today") & SPELLED, SPELLED);
        assert_eq!(has_spelled("jane[at]example(dot)com") & SPELLED, SPELLED);
        assert_eq!(has_spelled("\\u0040 here") & SPELLED, SPELLED);
        assert_eq!(has_spelled("jane=40example=2Ecom") & SPELLED, SPELLED);
        assert_eq!(
            has_spelled("the release notes (v2) cover fixes, and more"),
            0
        );
    }

    #[test]
    fn untouched_text_is_not_copied() {
        assert!(Normalised::of("plain ascii").is_none());
        assert!(Normalised::of("Grüße, 東京").is_none());
        let n = Normalised::of("ｊｏ＠ｅｘａｍｐｌｅ.com").unwrap();
        assert_eq!(n.text, "jo@example.com");
    }

    #[test]
    fn other_scripts_digits_small_forms_tags_and_selectors_fold() {
        // Arabic-Indic and Devanagari digits, a small commercial at, tag characters and a
        // variation selector inside values, mathematical bold digits.
        let s = "tel \u{0665}\u{0665}\u{0665}-\u{0966}\u{0967}\u{0968}\u{0969} mail jo\u{FE6B}ex\u{E0041}ample.com card 4111\u{FE0F}1111 \u{1D7CF}\u{1D7D0}";
        let n = Normalised::of(s).unwrap();
        assert_eq!(n.text, "tel 555-0123 mail jo@example.com card 41111111 12");
        let a = n.text.find("jo@").unwrap();
        let (x, y) = n.original(a, a + "jo@example.com".len());
        assert_eq!(&s[x..y], "jo\u{FE6B}ex\u{E0041}ample.com");
        // Letters of those scripts, and emoji, are kept as they are.
        assert!(Normalised::of("مرحبا नमस्ते สวัสดี 🙂").is_none());
        assert_eq!(decimal('\u{0E59}'), Some(9));
        assert_eq!(decimal('\u{0E5A}'), None);
        assert_eq!(decimal('a'), None);
    }

    #[test]
    fn escapes_fold_to_what_they_stand_for() {
        let s = "mailto:jo%40example.com &#x34;111&#32;1111 jo&commat;ex&period;org 50% R&D";
        let n = Normalised::of(s).unwrap();
        assert_eq!(n.text, "mailto:jo@example.com 4111 1111 jo@ex.org 50% R&D");
        let a = n.text.find("jo@ex.").unwrap();
        let (x, y) = n.original(a, a + "jo@ex.org".len());
        assert_eq!(&s[x..y], "jo&commat;ex&period;org");
        assert!(Normalised::of("50% off, R&D, a %zz and &unknown; stay").is_none());
    }

    #[test]
    fn leading_and_trailing_invisibles_stay_outside() {
        let s = "x \u{200B}a@b.org\u{200B} y";
        let n = Normalised::of(s).unwrap();
        let a = n.text.find('a').unwrap();
        let (x, y) = n.original(a, a + "a@b.org".len());
        assert_eq!(&s[x..y], "a@b.org");
    }
}
