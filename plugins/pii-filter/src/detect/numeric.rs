//! Everything that starts with a digit: cards, SSNs, national phones, IPs and IBANs (which start
//! with letters but are mostly digits), plus the look-alikes that must be passed over whole:
//! dates, UUIDs, hashes, dotted versions and labelled identifiers ("order #...").

use super::context::{at, is_hex, is_word, label_before, run, Label};
use super::ip::{self, V4};
use super::nearby::{near, Cx, Kind};
use super::{phone, Finding, Step};
use crate::types::PiiType;
use crate::validate;

fn is_digit(c: u8) -> bool {
    c.is_ascii_digit()
}

fn found(kind: PiiType, start: usize, end: usize) -> Step {
    Step::Found(Finding { start, end, kind }, end)
}

/// At the first digit of a word.
pub(super) fn at_digit(b: &[u8], i: usize, cx: Cx<'_>) -> Step {
    if let Some(end) = uuid_at(b, i) {
        return Step::Skip(end);
    }
    let hex_end = run(b, i, is_hex);
    if at(b, hex_end) == b':' {
        if let Some(step) = ip::v6(b, i) {
            return step;
        }
    }
    let d_end = run(b, i, is_digit);
    let next = at(b, d_end);
    // `4111_1111_1111_1111`: a card whose groups are joined by a word character.
    if next == b'_' && d_end - i == 4 && is_digit(at(b, d_end + 1)) {
        if let Card::Valid(end) = card(b, i, cx) {
            return found(PiiType::CreditCard, i, end);
        }
    }
    // `5d41402a...` (hashes), `10am`, `2x`, `1st`.
    if is_word(next) {
        return Step::Skip(run(b, i, is_word));
    }
    if let Some(end) = date_at(b, i) {
        return Step::Skip(end);
    }
    let dotted = next == b'.' && is_digit(at(b, d_end + 1));
    if dotted {
        match ip::v4(b, i, cx.hint) {
            V4::Match(end) => return found(PiiType::IpAddress, i, end),
            V4::Suppressed(end) => return Step::Skip(end),
            V4::NotIp => {}
        }
    }
    // After `+` the international phone rule has already decided.
    if i > 0 && b[i - 1] == b'+' {
        return Step::Skip(group_run_end(b, i));
    }
    // Cards, SSNs and phones all have nine digits or more; most numbers in prose don't. And
    // each starts with a group of a telling length: check that before parsing.
    // A number right after `(` or `+` was tried from there.
    let after_punct = i > 0 && matches!(b[i - 1], b'(' | b'+');
    if !has_digits(b, i, 9) || !could_be_card_ssn_or_phone(b, i, d_end) {
        // Seven or eight digits, or an unusual first group: a phone only in a phone's context.
        if !after_punct && has_digits(b, i, 7) {
            if let Some(end) = phone::in_context(b, i, cx) {
                return found(PiiType::Phone, i, end);
            }
        }
        return Step::Skip(d_end);
    }
    let label = label_before(b, i, cx.hint);
    if label == Label::Identifier {
        return Step::Skip(group_run_end(b, i));
    }
    match card(b, i, cx) {
        Card::Valid(end) => return found(PiiType::CreditCard, i, end),
        // Card-shaped but invalid: its tail groups are not a phone either.
        Card::Invalid(end) => return Step::Skip(end),
        Card::No => {}
    }
    if let Some(end) = ssn(b, i, label, cx) {
        return found(PiiType::UsSsn, i, end);
    }
    if let Some(end) = phone::national(b, i, label) {
        return found(PiiType::Phone, i, end);
    }
    if !after_punct {
        if let Some(end) = phone::in_context(b, i, cx) {
            return found(PiiType::Phone, i, end);
        }
    }
    if dotted {
        return Step::Skip(run(b, i, |c| is_digit(c) || c == b'.'));
    }
    Step::Skip(d_end)
}

/// Cheap test on the first digit group (`i..end`): can a card, SSN or phone start here?
fn could_be_card_ssn_or_phone(b: &[u8], i: usize, end: usize) -> bool {
    let len = end - i;
    let grouped = separator(b, end).is_some_and(|(c, _)| c != b'_');
    let card = (len == 4 && grouped) || (12..=19).contains(&len);
    let ssn = len == 3 || len == 9;
    let phone = b[i] == b'0'
        || ((2..=5).contains(&len) && grouped)
        || (9..=12).contains(&len)
        || (len == 1 && b[i] == b'1' && {
            // `1-800-555-0199`, `1 (555) 234-5678`: the trunk `1` then an area code.
            let next = end + 1;
            at(b, next) == b'(' || run(b, next, is_digit) - next == 3
        });
    card || ssn || phone
}

/// Whether at least `n` digits follow `i` within a phone/card-like run (digits, spaces, `-./()`).
pub(super) fn has_digits(b: &[u8], i: usize, n: usize) -> bool {
    let mut count = 0;
    for &c in b[i..].iter().take(32) {
        if c.is_ascii_digit() {
            count += 1;
            if count >= n {
                return true;
            }
        } else if !matches!(c, b' ' | b'-' | b'.' | b'/' | b'(' | b')') {
            break;
        }
    }
    false
}

/// The separator between two digit groups at `p`, and its length: a space, `-`, `.`, `/` or
/// `_`, or one of `- . /` between two spaces (`4111 - 1111`, `123 . 45 . 6789`).
fn separator(b: &[u8], p: usize) -> Option<(u8, usize)> {
    match (at(b, p), at(b, p + 1), at(b, p + 2)) {
        (c @ (b' ' | b'-' | b'.' | b'/' | b'_'), d, _) if is_digit(d) => Some((c, 1)),
        (b' ', c @ (b'-' | b'.' | b'/'), b' ') if is_digit(at(b, p + 3)) => Some((c, 3)),
        _ => None,
    }
}

/// End of a run of digit groups joined by single separators (`2024-000123`, `123 456 789`).
fn group_run_end(b: &[u8], i: usize) -> usize {
    let mut p = run(b, i, is_digit);
    while matches!(at(b, p), b' ' | b'-' | b'.' | b'/') && is_digit(at(b, p + 1)) {
        p = run(b, p + 1, is_digit);
    }
    p
}

/// Inside a longer number (`12-123-45-6789`, `1.4111...`): a detector must not start here.
fn continues_number(b: &[u8], i: usize) -> bool {
    i >= 2 && matches!(b[i - 1], b'-' | b'.' | b'/') && is_digit(b[i - 2])
}

/// A UUID (8-4-4-4-12 hex) at `i`; returns its end.
pub(super) fn uuid_at(b: &[u8], i: usize) -> Option<usize> {
    let s = b.get(i..i + 36)?;
    for (k, &c) in s.iter().enumerate() {
        let ok = if matches!(k, 8 | 13 | 18 | 23) {
            c == b'-'
        } else {
            is_hex(c)
        };
        if !ok {
            return None;
        }
    }
    if is_word(at(b, i + 36)) {
        return None;
    }
    Some(i + 36)
}

/// A calendar date at `i` (`2024-01-15`, `2024/1/5`, `15.01.2024`, `12/25/24`); returns its end.
fn date_at(b: &[u8], i: usize) -> Option<usize> {
    let a = run(b, i, is_digit);
    let sep = at(b, a);
    if !matches!(sep, b'-' | b'/' | b'.') {
        return None;
    }
    let m = run(b, a + 1, is_digit);
    if !(1..=2).contains(&(m - a - 1)) || at(b, m) != sep {
        return None;
    }
    let d = run(b, m + 1, is_digit);
    let last = d - m - 1;
    let continues = at(b, d) == sep && is_digit(at(b, d + 1));
    match a - i {
        4 if (1..=2).contains(&last) && !continues => Some(d),
        1 | 2 if last == 4 || (last == 2 && !continues) => Some(d),
        _ => None,
    }
}

enum Card {
    Valid(usize),
    /// Card-shaped (grouped like a card) but failing Luhn or the issuer check; skip to here.
    Invalid(usize),
    No,
}

/// A payment card number at `i`: 13-19 digits, plain or grouped (4-4-4-4, Amex 4-6-5, Diners
/// 4-6-4) with one separator style (spaces and dashes, or dots, or slashes, or underscores),
/// Luhn-valid and with a real issuer prefix, or any prefix when the words around it speak of a
/// card (`card 6708...`, a `credit_card_number` key).
fn card(b: &[u8], i: usize, cx: Cx<'_>) -> Card {
    if continues_number(b, i) {
        return Card::No;
    }
    let mut digits = [0u8; 19];
    let mut nd = 0;
    let mut lens = [0usize; 5];
    let mut ends = [0usize; 5];
    let mut n = 0;
    let mut p = i;
    // The separator style: spaces and dashes, which may mix, or one of `.`, `/`, `_` throughout.
    let mut style = None;
    loop {
        let ge = run(b, p, is_digit);
        let len = ge - p;
        if len == 0 || nd + len > 19 {
            break;
        }
        digits[nd..nd + len].copy_from_slice(&b[p..ge]);
        nd += len;
        lens[n] = len;
        ends[n] = ge;
        n += 1;
        if n == lens.len() {
            break;
        }
        // Spaces and dashes may mix (`4111 1111-1111 1111`, `4111 - 1111`: a disguise folds
        // to either); dots, slashes and underscores (`4111.1111.1111.1111`) may not. The group
        // lengths, Luhn and the issuer still have to agree.
        let Some((c, len)) = separator(b, ge) else {
            break;
        };
        let kind = match c {
            b'-' => b' ',
            c => c,
        };
        if *style.get_or_insert(kind) != kind {
            break;
        }
        p = ge + len;
    }
    let mut total: usize = lens[..n].iter().sum();
    let mut shaped = None;
    for k in (1..=n).rev() {
        if k < n {
            total -= lens[k];
        }
        let l = &lens[..k];
        let shape = match k {
            1 => true,
            3 => l == [4, 6, 5] || l == [4, 6, 4] || (l[..2] == [4, 4] && l[2] <= 4),
            4 => l[..3] == [4, 4, 4] && (1..=4).contains(&l[3]),
            // 17-19 digit cards print as 4-4-4-4 and the rest.
            5 => l[..4] == [4, 4, 4, 4] && l[4] <= 3,
            _ => false,
        };
        if !shape || !(12..=19).contains(&total) {
            continue;
        }
        if k > 1 {
            shaped.get_or_insert(ends[k - 1]);
        }
        let ds = &digits[..total];
        if !validate::luhn(ds) {
            continue;
        }
        let end = ends[k - 1];
        let next = at(b, end);
        if is_word(next) || (matches!(next, b'-' | b'.' | b'/') && is_digit(at(b, end + 1))) {
            continue;
        }
        let issued = validate::card_issuer_ok(ds);
        let listed = k == 1 && (in_number_list(b, i, end) || in_code(b, i, end));
        // A number of no known issuer is taken only whole: not the first groups of a longer one.
        if !issued && k < n {
            continue;
        }
        if !issued || listed {
            // Only a card's own words make a number of no known issuer, or one among other
            // numbers, a card.
            if !near(b, i, end, cx, Kind::Card) {
                if !issued {
                    continue;
                }
                return Card::No;
            }
        }
        return Card::Valid(end);
    }
    shaped.map_or(Card::No, Card::Invalid)
}

/// Whether the number at `start..end` sits in a list of other long numbers (a table of
/// constants, a CSV column of ids): then Luhn passing is chance, not a card.
fn in_number_list(b: &[u8], start: usize, end: usize) -> bool {
    let sep = |c: u8| matches!(c, b' ' | b',' | b';' | b'\t' | b'\n' | b'\r' | b'|');
    let mut p = start;
    while p > 0 && start - p < 8 && sep(b[p - 1]) {
        p -= 1;
    }
    let mut digits_before = 0;
    while p > 0 && is_digit(b[p - 1]) {
        p -= 1;
        digits_before += 1;
    }
    let mut q = end;
    while q < b.len() && q - end < 8 && sep(b[q]) {
        q += 1;
    }
    let digits_after = run(b, q, is_digit) - q;
    (digits_before >= 6 && p < start) || (digits_after >= 6 && q > end)
}

/// Whether the number at `start..end` is a literal in code: an argument (`f(4111...`), an
/// index or list item (`[4111...`), or a statement's end (`x = 4111...;`). Luhn-valid
/// constants are common there and card numbers are not.
fn in_code(b: &[u8], start: usize, end: usize) -> bool {
    let prev = b[..start]
        .iter()
        .rev()
        .find(|c| **c != b' ')
        .copied()
        .unwrap_or(0);
    let next = b[end..].iter().find(|c| **c != b' ').copied().unwrap_or(0);
    matches!(prev, b'(' | b'[') || matches!(next, b';' | b')' | b']')
}

/// A US SSN at `i`: `123-45-6789` or `123 45 6789`, or nine bare digits after an SSN label;
/// area, group and serial must be in issued ranges unless the words around it speak of an SSN.
fn ssn(b: &[u8], i: usize, label: Label, cx: Cx<'_>) -> Option<usize> {
    if continues_number(b, i) {
        return None;
    }
    let a = run(b, i, is_digit);
    let (area, group, serial, end);
    if a - i == 9 {
        if label != Label::Ssn && !near(b, i, a, cx, Kind::Ssn) {
            return None;
        }
        area = &b[i..i + 3];
        group = &b[i + 3..i + 5];
        serial = &b[i + 5..i + 9];
        end = a;
    } else {
        // `123-45-6789`, `123 45 6789`, `123.45.6789`, `123 - 45 - 6789`: one separator.
        let sep = separator(b, a).filter(|(c, _)| *c != b'/' && *c != b'_');
        let (_, len) = sep.filter(|_| a - i == 3)?;
        let g = run(b, a + len, is_digit);
        if g - a - len != 2 || separator(b, g) != sep {
            return None;
        }
        let s = run(b, g + len, is_digit);
        if s - g - len != 4 {
            return None;
        }
        area = &b[i..a];
        group = &b[a + len..g];
        serial = &b[g + len..s];
        end = s;
    }
    let next = at(b, end);
    if is_word(next) || (matches!(next, b'-' | b'.' | b'/') && is_digit(at(b, end + 1))) {
        return None;
    }
    (validate::ssn_ok(area, group, serial) || near(b, i, end, cx, Kind::Ssn)).then_some(end)
}

/// An IBAN at `i` (two uppercase letters then two digits), compact or in groups of four.
pub(super) fn iban(b: &[u8], i: usize, cx: Cx<'_>) -> Option<Step> {
    let cc = [b[i], at(b, i + 1)];
    if !cc[1].is_ascii_uppercase() || !is_digit(at(b, i + 2)) || !is_digit(at(b, i + 3)) {
        return None;
    }
    let Some(want) = validate::iban_length(cc) else {
        return iban_in_context(b, i, cx);
    };
    // IBAN-shaped but invalid: pass over all of it, so its digit groups are not read as phones.
    let skip = || iban_in_context(b, i, cx).or_else(|| Some(Step::Skip(iban_run_end(b, i))));
    let (buf, count, p) = iban_chars(b, i, want);
    if count < want || is_word(at(b, p)) || !validate::iban_mod97(&buf[..want]) {
        return skip();
    }
    Some(found(PiiType::Iban, i, p))
}

/// The IBAN characters from `i`, at most `max` of them: uppercase letters and digits, compact
/// or in groups of four joined by single spaces. The characters, how many, and where they end.
fn iban_chars(b: &[u8], i: usize, max: usize) -> ([u8; 34], usize, usize) {
    let mut buf = [0u8; 34];
    let mut count = 0;
    let mut p = i;
    let mut spaced = None;
    while count < max.min(buf.len()) {
        let c = at(b, p);
        if c.is_ascii_uppercase() || is_digit(c) {
            buf[count] = c;
            count += 1;
            p += 1;
        } else if c == b' '
            && count % 4 == 0
            && spaced != Some(false)
            && (at(b, p + 1).is_ascii_uppercase() || is_digit(at(b, p + 1)))
        {
            spaced = Some(true);
            p += 1;
        } else {
            break;
        }
        if count % 4 == 0 && spaced.is_none() && at(b, p) != b' ' {
            spaced = Some(false);
        }
    }
    (buf, count, p)
}

/// An IBAN at `i` written in lowercase or mixed case (`de89 3704 0044 0532 0130 00`): two
/// letters at a word's start, two digits, then as [`iban`] reads it in uppercase.
pub(super) fn iban_any_case(b: &[u8], i: usize, cx: Cx<'_>) -> Option<Step> {
    let head = b.get(i..i.checked_add(4)?)?;
    if !(head[0].is_ascii_alphabetic()
        && head[1].is_ascii_alphabetic()
        && is_digit(head[2])
        && is_digit(head[3])
        && (i == 0 || !is_word(b[i - 1])))
    {
        return None;
    }
    // An IBAN is at most 34 characters, with a space every four: 42 bytes, and one after.
    let end = b.len().min(i + 43);
    let upper = b[i..end].to_ascii_uppercase();
    match iban(&upper, 0, cx)? {
        Step::Found(f, next) => Some(found(f.kind, i + f.start, i + next)),
        Step::Skip(_) => None,
    }
}

/// An IBAN of a length its country does not register (or of a code not in the registry), with
/// a valid check: taken only when the words around it speak of an IBAN or an account.
fn iban_in_context(b: &[u8], i: usize, cx: Cx<'_>) -> Option<Step> {
    let (buf, count, p) = iban_chars(b, i, 34);
    let ok = (15..=34).contains(&count)
        && !is_word(at(b, p))
        && validate::iban_mod97(&buf[..count])
        && near(b, i, p, cx, Kind::Iban);
    ok.then(|| found(PiiType::Iban, i, p))
}

/// End of an IBAN-like run: uppercase/digit groups, four to a group when spaced.
fn iban_run_end(b: &[u8], i: usize) -> usize {
    let ok = |c: u8| c.is_ascii_uppercase() || is_digit(c);
    let mut p = i;
    loop {
        let q = run(b, p, ok);
        if q - p == 4 && at(b, q) == b' ' && ok(at(b, q + 1)) {
            p = q + 1;
        } else {
            return run(b, q, is_word);
        }
    }
}
