//! Phone numbers: international (`+`, or the `00`/`011` international prefix, then a country
//! code; E.164 allows at most 15 digits) and national layouts: NANP (`(555) 123-4567`,
//! `555.123.4567`, `1-800-555-0199`), trunk-`0` countries (UK `020 7946 0958`, DE
//! `(03449) 78690`, `089/1234567`, FR `01 23 45 67 89`, NL `(0406)-812415`, JP `090-1234-5678`,
//! AU `(08)-8690-7366`), Brazil's `DD NNNN-NNNN`, with an extension (`x359`, `ext. 12`).
//!
//! Digits without separators are ambiguous (ids, timestamps, amounts), so they count only after
//! a phone label ("tel:", "call", a `phone` JSON key or CSV column), except trunk-0 numbers of
//! 10-11 digits, a length few other numbers have with a leading zero.

use super::context::{at, is_word, label_before, Label};
use super::nearby::{near, Cx, Kind};
use super::{Finding, Step};
use crate::types::PiiType;

const MAXG: usize = 8;

/// The digit groups of a phone-shaped run.
struct Groups {
    n: usize,
    start: [usize; MAXG],
    end: [usize; MAXG],
    /// Separator before each group (0: none, or the first group).
    sep: [u8; MAXG],
    paren: [bool; MAXG],
}

impl Groups {
    fn parse(b: &[u8], mut p: usize) -> Groups {
        let mut g = Groups {
            n: 0,
            start: [0; MAXG],
            end: [0; MAXG],
            sep: [0; MAXG],
            paren: [false; MAXG],
        };
        let mut sep = 0u8;
        while g.n < MAXG {
            let paren = at(b, p) == b'(';
            let gs = p + usize::from(paren);
            let mut ge = gs;
            while ge < b.len() && b[ge].is_ascii_digit() && ge - gs <= 15 {
                ge += 1;
            }
            if ge == gs || ge - gs > 15 || (paren && at(b, ge) != b')') {
                break;
            }
            let k = g.n;
            g.start[k] = gs;
            g.end[k] = ge;
            g.sep[k] = sep;
            g.paren[k] = paren;
            g.n += 1;
            let q = ge + usize::from(paren);
            let c = at(b, q);
            let (s, r) = if matches!(c, b' ' | b'-' | b'.' | b'/') {
                (c, q + 1)
            } else {
                (0, q)
            };
            let nc = at(b, r);
            let opens = nc == b'(' && at(b, r + 1).is_ascii_digit();
            // Groups are joined by one separator, or by nothing around parentheses.
            if !(nc.is_ascii_digit() || opens) || (s == 0 && !paren && !opens) {
                break;
            }
            sep = s;
            p = r;
        }
        g
    }

    fn len(&self, k: usize) -> usize {
        self.end[k] - self.start[k]
    }

    /// Offset just past group `k` (and its closing parenthesis).
    fn stop(&self, k: usize) -> usize {
        self.end[k] + usize::from(self.paren[k])
    }

    fn is(&self, b: &[u8], k: usize, s: &[u8]) -> bool {
        &b[self.start[k]..self.end[k]] == s
    }
}

/// Digits of groups `from..to`, skipping a `(0)` trunk group.
fn digits(b: &[u8], g: &Groups, from: usize, to: usize, buf: &mut [u8; 24]) -> usize {
    let mut n = 0;
    for k in from..to {
        if g.paren[k] && g.is(b, k, b"0") {
            continue;
        }
        for &d in &b[g.start[k]..g.end[k]] {
            if n == buf.len() {
                return n;
            }
            buf[n] = d;
            n += 1;
        }
    }
    n
}

/// At `+` or `(`.
pub(super) fn punct(b: &[u8], i: usize, cx: Cx<'_>) -> Step {
    let next = at(b, i + 1);
    let prev_ok = i == 0 || !is_word(b[i - 1]);
    if next.is_ascii_digit() && prev_ok && super::numeric::has_digits(b, i + 1, 8) {
        let label = label_before(b, i, cx.hint);
        if label != Label::Identifier {
            let end = if b[i] == b'+' {
                phone(b, i + 1, Start::Plus, label)
            } else {
                phone(b, i, Start::National, label)
            };
            if let Some(end) = end {
                return found(i, end);
            }
        }
    }
    let opens = next.is_ascii_digit() || (b[i] == b'(' && next == b'+');
    if opens && prev_ok && super::numeric::has_digits(b, i + 1 + usize::from(next == b'+'), 7) {
        if let Some(end) = in_context(b, i, cx) {
            return found(i, end);
        }
    }
    Step::Skip(i + 1)
}

fn found(start: usize, end: usize) -> Step {
    Step::Found(
        Finding {
            start,
            end,
            kind: PiiType::Phone,
        },
        end,
    )
}

/// A phone-shaped run at `i` that failed the numbering plans, taken when the words around it
/// say it is a phone number (`Phone: 08-51 80 01`, `2880 5873 fax`); see `nearby.rs`.
pub(super) fn in_context(b: &[u8], i: usize, cx: Cx<'_>) -> Option<usize> {
    let end = loose(b, i)?;
    (label_before(b, i, cx.hint) != Label::Identifier && near(b, i, end, cx, Kind::Phone))
        .then_some(end)
}

/// Any grouping of 7-15 digits a phone number is written in: groups joined by up to three of
/// ` -./()`, an optional `+` or `(+cc)` first, an optional extension. Dates are not phones.
fn loose(b: &[u8], i: usize) -> Option<usize> {
    if i >= 2 && b[i - 2].is_ascii_digit() && matches!(b[i - 1], b'-' | b'.' | b'/' | b':') {
        return None;
    }
    let mut p = i;
    let mut open = false;
    if at(b, p) == b'(' {
        open = true;
        p += 1;
    }
    if at(b, p) == b'+' {
        p += 1;
    }
    let mut lens = [0usize; MAXG];
    let mut seps = [0u8; MAXG];
    let mut n = 0;
    let mut digits = 0;
    let mut end;
    loop {
        let s = p;
        while p < b.len() && b[p].is_ascii_digit() && p - s <= 15 {
            p += 1;
        }
        let len = p - s;
        if len == 0 || len > 15 || n == MAXG {
            return None;
        }
        lens[n] = len;
        n += 1;
        digits += len;
        end = p;
        let closed = open && at(b, p) == b')';
        if closed {
            open = false;
            p += 1;
            end = p;
        }
        let (q, was_open) = (p, open);
        let mut sep = 0u8;
        while p < b.len() && p - q < 3 {
            match b[p] {
                b'(' if !open => open = true,
                b')' if open => open = false,
                c @ (b' ' | b'-' | b'.' | b'/') => {
                    if sep == 0 {
                        sep = c;
                    }
                }
                _ => break,
            }
            p += 1;
        }
        let spaces = b[q..p].iter().filter(|&&c| c == b' ').count();
        // After a closing parenthesis the next group may follow directly: `(829)010-5123`.
        if (p == q && !closed) || spaces > 1 || !at(b, p).is_ascii_digit() || n == MAXG {
            open = was_open;
            break;
        }
        seps[n] = sep;
    }
    if open || !(7..=15).contains(&digits) {
        return None;
    }
    let l = &lens[..n];
    // An OID or a dotted version (`1.2.840.113549`), or a row of one digit (`00000000`).
    let dotted = n > 2 && seps[1..n].iter().all(|&c| c == b'.') && l.contains(&1);
    let same = {
        let first = b[i..end].iter().find(|c| c.is_ascii_digit());
        b[i..end]
            .iter()
            .all(|c| !c.is_ascii_digit() || Some(c) == first)
    };
    if dotted || same {
        return None;
    }
    let date = n == 3
        && seps[1] == seps[2]
        && matches!(seps[1], b'-' | b'.' | b'/')
        && (l == [4, 2, 2] || (l[0] <= 2 && l[1] <= 2 && l[2] == 4));
    if date {
        return None;
    }
    if let Some(e) = extension(b, end) {
        return Some(e);
    }
    let next = at(b, end);
    if is_word(next)
        || (matches!(next, b'-' | b'.' | b'/' | b':') && at(b, end + 1).is_ascii_digit())
    {
        return None;
    }
    Some(end)
}

/// A national-format (or `00`-prefixed international) phone at a digit; the caller has checked
/// that no identifier label precedes it.
pub(super) fn national(b: &[u8], i: usize, label: Label) -> Option<usize> {
    phone(b, i, Start::National, label)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Start {
    Plus,
    National,
}

fn phone(b: &[u8], i: usize, start: Start, label: Label) -> Option<usize> {
    // Inside a longer number such as `12-555-123-4567`, `1.555.123.4567`, a time
    // (`03:05:07.123457-05:00`) or a row of numbers (`96 192 384 768 1536`).
    let from = if start == Start::Plus { i - 1 } else { i };
    if from >= 2
        && b[from - 2].is_ascii_digit()
        && (matches!(b[from - 1], b'-' | b'.' | b'/' | b':')
            || (b[from - 1] == b' ' && start == Start::National && b[from] != b'('))
    {
        return None;
    }
    if hex_neighbour(b, from) {
        return None;
    }
    let g = Groups::parse(b, i);
    for k in (1..=g.n).rev() {
        let ok = match start {
            Start::Plus => international(b, &g, 0, k),
            Start::National => national_shape(b, &g, k, label),
        };
        if !ok {
            continue;
        }
        let end = g.stop(k - 1);
        if let Some(e) = extension(b, end) {
            return Some(e);
        }
        let next = at(b, end);
        if next.is_ascii_alphanumeric() || next == b'_' || next == b'%' {
            continue;
        }
        // A `-`, `.` or `/` continuation means a longer number (`555-123-4567-89`).
        if matches!(next, b'-' | b'.' | b'/') && at(b, end + 1).is_ascii_digit() {
            continue;
        }
        return Some(end);
    }
    None
}

/// An extension after a number ending at `end`: `x359`, ` x359`, ` ext. 12`, `ext 12`, ` #12`.
fn extension(b: &[u8], end: usize) -> Option<usize> {
    let mut p = end;
    if at(b, p) == b' ' || at(b, p) == b',' && at(b, p + 1) == b' ' {
        p += if at(b, p) == b',' { 2 } else { 1 };
    }
    let word_end = p + b[p..]
        .iter()
        .take(10)
        .take_while(|c| c.is_ascii_alphabetic())
        .count();
    let word = b[p..word_end].to_ascii_lowercase();
    p = match &word[..] {
        b"x" | b"ext" | b"extn" | b"extension" => word_end,
        b"" if at(b, p) == b'#' => p + 1,
        _ => return None,
    };
    if at(b, p) == b'.' {
        p += 1;
    }
    if at(b, p) == b' ' && word != b"x" {
        p += 1;
    }
    let mut e = p;
    while e < b.len() && b[e].is_ascii_digit() && e - p <= 6 {
        e += 1;
    }
    let n = e - p;
    ((1..=6).contains(&n) && !is_word(at(b, e))).then_some(e)
}

/// National significant number lengths by country calling code (ITU-T E.164 assignments and
/// the national numbering plans as libphonenumber's metadata records them).
fn nsn_len(cc: &[u8]) -> Option<(usize, usize)> {
    Some(match cc {
        b"1" | b"7" | b"30" | b"52" | b"57" | b"58" | b"63" | b"90" | b"91" | b"98" => (10, 10),
        b"20" => (8, 10),
        b"27" | b"31" | b"33" | b"34" | b"40" | b"41" | b"48" | b"56" | b"61" | b"93" | b"94"
        | b"212" | b"213" | b"254" | b"351" | b"380" | b"420" | b"421" | b"966" => (9, 9),
        b"32" | b"36" | b"51" | b"66" => (8, 9),
        b"39" => (6, 11),
        b"43" => (4, 13),
        b"44" => (7, 10),
        b"45" | b"47" | b"53" | b"65" | b"216" | b"852" => (8, 8),
        b"46" => (7, 13),
        b"49" => (6, 13),
        b"54" | b"55" => (10, 11),
        b"60" | b"64" | b"95" | b"234" => (8, 10),
        b"62" => (8, 12),
        b"81" | b"84" => (9, 10),
        b"82" => (8, 11),
        b"86" => (10, 11),
        b"92" => (9, 10),
        b"353" => (7, 9),
        b"354" => (7, 7),
        b"352" | b"358" => (6, 11),
        b"886" | b"971" | b"972" => (8, 9),
        _ => return None,
    })
}

/// Countries whose national numbers keep a leading 0 after the country code (Italy), or where
/// writers often keep the trunk 0 in parentheses: `(0xx)` after the code is accepted when the
/// length fits without it.
fn nsn_fits(cc: &[u8], nsn: &[u8]) -> bool {
    match nsn_len(cc) {
        Some((lo, hi)) => {
            let n = nsn.len();
            (lo..=hi).contains(&n)
                || (nsn[0] == b'0' && cc != b"39" && (lo..=hi).contains(&(n - 1)))
        }
        None => false,
    }
}

/// Groups `from..k` after `+` (or after an international prefix): country code and number.
fn international(b: &[u8], g: &Groups, from: usize, k: usize) -> bool {
    let mut buf = [0u8; 24];
    let n = digits(b, g, from, k, &mut buf);
    let d = &buf[..n];
    if !(8..=15).contains(&n) || d[0] == b'0' || g.paren[from] || g.len(k - 1) < 2 {
        return false;
    }
    // Parentheses only around the area code or the `(0)` trunk prefix; no `/` (dates).
    if (from + 1..k).any(|j| g.sep[j] == b'/' || g.len(j) > 12) {
        return false;
    }
    let first = g.len(from);
    // The country code is the first group when it is one (`+44 20 ...`), else a prefix of it
    // (`+4420 7946 0958`, `+919141777631`).
    if first <= 3 && k > from + 1 {
        if d[..first] == *b"1" {
            return nanp_ok(&d[1..]);
        }
        if nsn_len(&d[..first]).is_some() {
            return nsn_fits(&d[..first], &d[first..]);
        }
        return true;
    }
    let fits = (1..=3)
        .filter(|&l| l < n)
        .find(|&l| nsn_len(&d[..l]).is_some());
    match fits {
        Some(1) if d[0] == b'1' => nanp_ok(&d[1..]),
        Some(l) => nsn_fits(&d[..l], &d[l..]),
        // An unknown code: E.164 length is all there is to check, when the number is grouped
        // like one (`+4294967296` alone is as likely a signed integer in code).
        None => k > from + 1,
    }
}

/// North American area code / exchange: no leading 0 or 1, no N11 service codes.
fn nanp_ok(d: &[u8]) -> bool {
    d.len() == 10 && d[0] >= b'2' && &d[1..3] != b"11" && d[3] >= b'2' && &d[4..6] != b"11"
}

fn national_shape(b: &[u8], g: &Groups, k: usize, label: Label) -> bool {
    let mut buf = [0u8; 24];
    let n = digits(b, g, 0, k, &mut buf);
    let d = &buf[..n];
    let labelled = label == Label::Phone;
    if !(9..=15).contains(&n) {
        return false;
    }
    // `00 44 20 7946 0958`, `0044...`, `001-829-647-4488`, `011 44 ...`: an international
    // prefix, then a known country code.
    let idd = if g.is(b, 0, b"00") || g.is(b, 0, b"011") {
        Some(1)
    } else if g.len(0) >= 3 && d.starts_with(b"00") && d[2] != b'0' {
        Some(0)
    } else {
        None
    };
    // A hex dump's `00 20 80 00` has groups of zeros no phone number has.
    if (1..k).any(|j| b[g.start[j]..g.end[j]].iter().all(|&c| c == b'0')) {
        return false;
    }
    if let Some(from) = idd {
        if from == 1 && k > 1 {
            return nsn_len(&b[g.start[1]..g.end[1]]).is_some() && international(b, g, 1, k);
        }
        if from == 0 {
            // `001-829-...`, `0044 20 ...`: the code runs on from the prefix.
            let rest = &d[2..];
            let known = (1..=3).any(|l| {
                l < rest.len()
                    && nsn_len(&rest[..l]).is_some_and(|_| nsn_fits(&rest[..l], &rest[l..]))
            });
            // Only when the digit run ends here: `0061 10376 0315 0300` is a row of code points.
            return known && k > 1 && k == g.n && separators_ok(g, 1, k);
        }
    }
    if k == 1 {
        if g.paren[0] {
            return false;
        }
        // Unseparated: after a phone label, any plausible length; otherwise only trunk-0
        // numbers of 10-11 digits.
        let trunk0 = d[0] == b'0' && d[1] != b'0';
        if labelled {
            return (9..=12).contains(&n) && !d.starts_with(b"00");
        }
        return trunk0 && (10..=11).contains(&n) && !counting(d);
    }
    if n > 12 {
        return false;
    }
    let lens = |j: usize| g.len(j);
    // NANP, optionally after the `1` trunk: 555-123-4567, (555) 123-4567, 1 (786) 834-4978.
    let off = usize::from(g.is(b, 0, b"1") && !g.paren[0] && k == 4);
    if k - off == 3
        && lens(off) == 3
        && lens(off + 1) == 3
        && lens(off + 2) == 4
        && (off + 1..k).all(|j| !g.paren[j])
        && separators_ok(g, off + 1, k)
        && nanp_ok(&d[off..])
    {
        return true;
    }
    if (1..k).any(|j| g.paren[j]) || !separators_ok(g, 1, k) {
        return false;
    }
    // Brazil: two-digit area code, then 4-4 or 5-4 joined by a dash (`31 4686-1607`).
    let br = k == 3
        && lens(0) == 2
        && d[0] != b'0'
        && g.sep[1] == b' '
        && g.sep[2] == b'-'
        && (4..=5).contains(&lens(1))
        && lens(2) == 4;
    if br {
        return true;
    }
    let trunk0 = d[0] == b'0' && d[1] != b'0';
    let main = g.sep[k - 1];
    // Not an SSN (3-2-4), a ZIP+4 (5-4 with a dash), a date, or a run of pairs that is not
    // the French five pairs (`01 02 03 04 05 06`).
    let ssn_like = k == 3 && lens(0) == 3 && lens(1) == 2 && lens(2) == 4;
    let zip_like = k == 2 && lens(0) == 5 && lens(1) == 4 && main == b'-';
    let pairs = (0..k).all(|j| lens(j) == 2);
    let more_pairs = (k < g.n && g.len(k) == 2 && g.sep[k] == main) || {
        let s = g.start[0];
        s >= 3 && b[s - 1] == main && b[s - 2].is_ascii_digit() && b[s - 3].is_ascii_digit()
    };
    // `08-01-3697739`: a day and a month first.
    let date_like = k == 3
        && lens(0) == 2
        && lens(1) == 2
        && matches!(g.sep[1], b'-' | b'/' | b'.')
        && g.sep[1] == g.sep[2];
    // `016.016.016.016` (an address with leading zeros), `01234.000000` (a decimal).
    let dotted_number = main == b'.' && (k == 2 || (k == 4 && (0..k).all(|j| lens(j) <= 3)));
    // A two-digit area code then a pair is the French layout, which is pairs throughout.
    let mixed_pairs = k >= 3 && lens(0) == 2 && lens(1) == 2 && !pairs;
    if ssn_like || zip_like || date_like || dotted_number || mixed_pairs {
        return false;
    }
    if pairs && (n != 10 || more_pairs) {
        return false;
    }
    let groups_ok = (2..=5).contains(&lens(0)) && (1..k).all(|j| (2..=8).contains(&lens(j)));
    if trunk0 && groups_ok && (n >= 10 || labelled) {
        return true;
    }
    // Any other grouping of 9-12 digits after a phone label (`98765 43210`, `342 083 7783`).
    labelled && groups_ok && !d.starts_with(b"00")
}

/// The separators between groups `from..k` agree, except right after a parenthesised group.
fn separators_ok(g: &Groups, from: usize, k: usize) -> bool {
    let mut main = None;
    for j in from..k {
        if j > 0 && g.paren[j - 1] {
            continue;
        }
        match main {
            None => main = Some(g.sep[j]),
            Some(m) if m != g.sep[j] => {
                // The first separator may differ (area code: `089/1234567-0`, `31 4686-1607`).
                if j == from + 1 && from <= 1 {
                    main = Some(g.sep[j]);
                } else {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

/// `0123456789`, `0987654321`: digits counting up or down, a test string rather than a number.
fn counting(d: &[u8]) -> bool {
    let step = |up: bool| {
        d.windows(2).all(|w| {
            let (a, b) = (w[0] - b'0', w[1] - b'0');
            if up {
                b == (a + 1) % 10
            } else {
                a == (b + 1) % 10
            }
        })
    };
    step(true) || step(false)
}

/// A four-digit hex token with letters next to the candidate (`0061 05AE 10376`): a code point
/// or hex dump, not a phone number.
fn hex_neighbour(b: &[u8], from: usize) -> bool {
    let token = |s: usize| {
        let t = &b[s..b.len().min(s + 5)];
        t.len() >= 4
            && t[..4].iter().all(u8::is_ascii_hexdigit)
            && t[..4].iter().any(u8::is_ascii_alphabetic)
            && t.get(4).is_none_or(|c| !c.is_ascii_alphanumeric())
    };
    // The token after the first group, or the one before the candidate.
    let first_end = from
        + b[from..]
            .iter()
            .take(6)
            .take_while(|c| c.is_ascii_digit())
            .count();
    (at(b, first_end) == b' ' && token(first_end + 1))
        || (from >= 5 && b[from - 1] == b' ' && token(from - 5))
}
