//! Phone numbers: international (`+` and a country code, E.164 up to 15 digits) and the common
//! national layouts of the US (NANP: `(555) 123-4567`, `555.123.4567`), and of countries with a
//! trunk `0` such as the UK, Germany and France (`020 7946 0958`, `089/1234567`,
//! `06 12 34 56 78`). Digits without any separator count only after a phone label ("tel:",
//! "call"), because bare ten-digit numbers are just as often ids and timestamps.

use super::context::{at, is_word, label_before, run_max, Label};
use super::{Finding, Step};
use crate::types::PiiType;

const MAXG: usize = 8;

/// Digit groups of a phone-shaped run, with what separated them.
struct Groups {
    n: usize,
    start: [usize; MAXG],
    end: [usize; MAXG],
    /// Separator before each group (0 for none or the first group).
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
        loop {
            let paren = at(b, p) == b'(';
            let gs = if paren { p + 1 } else { p };
            let ge = run_max(b, gs, 16, |c| c.is_ascii_digit());
            if ge == gs || ge - gs > 15 {
                break;
            }
            let mut q = ge;
            if paren {
                if at(b, q) != b')' {
                    break;
                }
                q += 1;
            }
            let k = g.n;
            g.start[k] = gs;
            g.end[k] = ge;
            g.sep[k] = sep;
            g.paren[k] = paren;
            g.n += 1;
            if g.n == MAXG {
                break;
            }
            let c = at(b, q);
            let (s, r) = if matches!(c, b' ' | b'-' | b'.' | b'/') {
                (c, q + 1)
            } else {
                (0, q)
            };
            let nc = at(b, r);
            let opens = nc == b'(' && at(b, r + 1).is_ascii_digit();
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

    /// Offset just past group `k` (including a closing parenthesis).
    fn stop(&self, k: usize) -> usize {
        self.end[k] + usize::from(self.paren[k])
    }

    fn is_trunk(&self, b: &[u8], k: usize) -> bool {
        self.paren[k] && &b[self.start[k]..self.end[k]] == b"0"
    }
}

/// At `+` or `(`.
pub(super) fn punct(b: &[u8], i: usize, hint: Option<&str>) -> Step {
    let next = at(b, i + 1);
    let prev_ok = i == 0 || !is_word(b[i - 1]);
    if next.is_ascii_digit() && prev_ok && super::numeric::has_digits(b, i + 1, 8) {
        let label = label_before(b, i, hint);
        if label != Label::Identifier {
            let found = if b[i] == b'+' {
                phone(b, i + 1, true, label)
            } else {
                phone(b, i, false, label)
            };
            if let Some(end) = found {
                return Step::Found(
                    Finding {
                        start: i,
                        end,
                        kind: PiiType::Phone,
                    },
                    end,
                );
            }
        }
    }
    Step::Skip(i + 1)
}

/// A national-format phone at a digit (the caller has checked labels).
pub(super) fn national(b: &[u8], i: usize, label: Label) -> Option<usize> {
    phone(b, i, false, label)
}

fn phone(b: &[u8], i: usize, intl: bool, label: Label) -> Option<usize> {
    // Inside a longer number such as `12-555-123-4567` or `1.555.123.4567`.
    let from = if intl { i - 1 } else { i };
    if from >= 2 && matches!(b[from - 1], b'-' | b'.' | b'/') && b[from - 2].is_ascii_digit() {
        return None;
    }
    let g = Groups::parse(b, i);
    for k in (1..=g.n).rev() {
        let ok = if intl {
            international(b, &g, k)
        } else {
            national_shape(b, &g, k, label)
        };
        if !ok {
            continue;
        }
        let end = g.stop(k - 1);
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

fn digits_of(b: &[u8], g: &Groups, k: usize, buf: &mut [u8; 24]) -> usize {
    let mut n = 0;
    for j in 0..k {
        if g.is_trunk(b, j) {
            continue;
        }
        for &d in &b[g.start[j]..g.end[j]] {
            if n == buf.len() {
                return n;
            }
            buf[n] = d;
            n += 1;
        }
    }
    n
}

fn international(b: &[u8], g: &Groups, k: usize) -> bool {
    let mut buf = [0u8; 24];
    let n = digits_of(b, g, k, &mut buf);
    if !(8..=15).contains(&n) || buf[0] == b'0' || g.paren[0] {
        return false;
    }
    // Where the country's national number length is fixed, it must match (this keeps a
    // following number out: `+44 20 7946 0958 57%`).
    let cc_len = if k == 1 {
        (1..=3).find(|&l| nsn_len(&buf[..l]).is_some())
    } else {
        Some(g.len(0))
    };
    if let Some(l) = cc_len {
        if let Some((lo, hi)) = nsn_len(&buf[..l]) {
            if !(lo..=hi).contains(&(n - l)) {
                return false;
            }
        }
    }
    if k == 1 {
        return true;
    }
    if g.len(0) > 3 || g.len(k - 1) < 2 {
        return false;
    }
    // Parentheses only around the area code or the `(0)` trunk prefix, right after the code.
    (2..k).all(|j| !g.paren[j] || (j == 2 && g.is_trunk(b, 1)))
        && (1..k).all(|j| g.len(j) <= 10 && g.sep[j] != b'/')
}

/// National number lengths of countries whose numbers have a fixed (or narrow) length.
fn nsn_len(cc: &[u8]) -> Option<(usize, usize)> {
    Some(match cc {
        b"1" | b"7" | b"30" | b"91" => (10, 10),
        b"27" | b"31" | b"33" | b"34" | b"41" | b"48" | b"61" | b"351" => (9, 9),
        b"32" | b"36" => (8, 9),
        b"44" | b"81" => (9, 10),
        b"45" | b"47" => (8, 8),
        b"86" => (10, 11),
        b"353" => (7, 9),
        _ => return None,
    })
}

/// North American area code / exchange: no leading 0 or 1, no N11 service codes.
fn nanp_ok(area: &[u8], exchange: &[u8]) -> bool {
    area[0] >= b'2' && &area[1..] != b"11" && exchange[0] >= b'2' && &exchange[1..] != b"11"
}

fn national_shape(b: &[u8], g: &Groups, k: usize, label: Label) -> bool {
    let mut buf = [0u8; 24];
    let n = digits_of(b, g, k, &mut buf);
    let d = &buf[..n];
    if !(9..=12).contains(&n) {
        return false;
    }
    if k == 1 {
        if label != Label::Phone || g.paren[0] {
            return false;
        }
        return (n == 10 && nanp_ok(&d[..3], &d[3..6]))
            || (n == 11 && d[0] == b'1' && nanp_ok(&d[1..4], &d[4..7]))
            || ((10..=11).contains(&n) && d[0] == b'0' && d[1] != b'0');
    }
    // One separator style after the area code (a closing parenthesis may be followed by a space
    // or nothing).
    let mut main = 0u8;
    for j in 1..k {
        if g.paren[j - 1] {
            continue;
        }
        if main == 0 {
            main = g.sep[j];
        } else if g.sep[j] != main {
            return false;
        }
    }
    let lens = |j: usize| g.len(j);
    // NANP, optionally with the `1` trunk: 555-123-4567, (555) 123-4567, 1-800-555-0199.
    let off = usize::from(k == 4 && d[0] == b'1' && lens(0) == 1 && !g.paren[0]);
    if k - off == 3
        && lens(off) == 3
        && lens(off + 1) == 3
        && lens(off + 2) == 4
        && (off..k).all(|j| !g.paren[j] || j == off)
        && nanp_ok(&d[off..off + 3], &d[off + 3..off + 6])
    {
        return true;
    }
    // Trunk-0 countries: area code of 2-5 digits (with its 0), subscriber groups of 2-8; not
    // the layouts of an SSN (3-2-4) or a ZIP+4 code (5-4 with a dash).
    let ssn_like = k == 3 && lens(0) == 3 && lens(1) == 2 && lens(2) == 4;
    // Pairs (`01 23 45 67 89`) are the French layout: exactly five, not part of a longer
    // sequence of pairs (`01 02 03 04 05 06`).
    let pairs = (0..k).all(|j| lens(j) == 2);
    let more_pairs = (k < g.n && g.len(k) == 2 && g.sep[k] == main) || {
        let s = g.start[0];
        s >= 3 && b[s - 1] == main && b[s - 2].is_ascii_digit() && b[s - 3].is_ascii_digit()
    };
    let pairs_not_ten = pairs && (n != 10 || more_pairs);
    let zip_like = k == 2 && lens(0) == 5 && lens(1) == 4 && main == b'-';
    d[0] == b'0'
        && d[1] != b'0'
        && !ssn_like
        && !zip_like
        && !pairs_not_ten
        && (2..=5).contains(&lens(0))
        && (1..k).all(|j| !g.paren[j] && (2..=8).contains(&lens(j)))
}
