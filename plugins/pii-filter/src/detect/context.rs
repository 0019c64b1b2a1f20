//! Byte classes and the words just before a candidate. Many formats are ambiguous on their own
//! ("123456789" is an SSN after "SSN:", an order number after "order #", and nothing at all in
//! prose), so detectors ask what the candidate is labelled as before deciding.

/// Letters, digits, `_` and every non-ASCII byte (so words in any script stay whole).
pub const WORD: u8 = 1;
pub const DIGIT: u8 = 2;
pub const HEX: u8 = 4;
pub const UPPER: u8 = 8;

const fn build_classes() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let c = i as u8;
        let mut v = 0;
        if c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80 {
            v |= WORD;
        }
        if c.is_ascii_digit() {
            v |= DIGIT;
        }
        if c.is_ascii_hexdigit() {
            v |= HEX;
        }
        if c.is_ascii_uppercase() {
            v |= UPPER;
        }
        t[i] = v;
        i += 1;
    }
    t
}

/// Class bits for every byte.
pub static CLASS: [u8; 256] = build_classes();

#[inline]
pub fn is_word(c: u8) -> bool {
    CLASS[c as usize] & WORD != 0
}

#[inline]
pub fn is_hex(c: u8) -> bool {
    CLASS[c as usize] & HEX != 0
}

/// Byte at `i`, or 0 past the end (0 belongs to no class, so bounds checks fold into tests).
#[inline]
pub fn at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

/// Whether `i` is at the start of a word (no word byte right before it).
#[inline]
pub fn word_start(b: &[u8], i: usize) -> bool {
    i == 0 || !is_word(b[i - 1])
}

/// End of the run of bytes from `i` that satisfy `f`.
#[inline]
pub fn run(b: &[u8], mut i: usize, f: impl Fn(u8) -> bool) -> usize {
    while i < b.len() && f(b[i]) {
        i += 1;
    }
    i
}

/// Like [`run`] but stops after `max` bytes, so a parser tried at many positions of one long
/// run cannot go quadratic.
#[inline]
pub fn run_max(b: &[u8], i: usize, max: usize, f: impl Fn(u8) -> bool) -> usize {
    let stop = b.len().min(i + max);
    let mut j = i;
    while j < stop && f(b[j]) {
        j += 1;
    }
    j
}

/// What the words before a candidate say it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Label {
    /// Nothing telling.
    None,
    /// A phone label: "phone", "tel", "call", "mobile", ...
    Phone,
    /// A social security label: "SSN", "social security", or a US tax id's ("TIN", "tax id",
    /// `tax_id`, `taxpayer_id`): an individual's TIN is their SSN.
    Ssn,
    /// An identifier that is not personal data: "order", "invoice", "tracking", "ticket", ...
    Identifier,
    /// A software version: "version", "release", "build", "v", product names ...
    Version,
    /// A network address: "ip", "host", "server", "gateway", ...
    Network,
}

const NETWORK: &[&[u8]] = &[
    b"ip",
    b"ips",
    b"ipv4",
    b"host",
    b"hostname",
    b"server",
    b"address",
    b"addr",
    b"gateway",
    b"dns",
    b"nameserver",
    b"proxy",
    b"client",
    b"remote",
    b"peer",
    b"src",
    b"dst",
    b"source",
    b"destination",
    b"from",
    b"subnet",
    b"router",
    b"ping",
    b"ssh",
    b"connect",
    b"connected",
];

const FILLER: &[&[u8]] = &[
    b"no", b"nr", b"num", b"number", b"numbers", b"is", b"was", b"are", b"be", b"the", b"my",
    b"our", b"your", b"his", b"her", b"their", b"a", b"an", b"at", b"on", b"me", b"us", b"to",
    b"of", b"for", b"via", b"under", b"with", b"by",
];

const PHONE: &[&[u8]] = &[
    b"phone",
    b"telephone",
    b"tel",
    b"mobile",
    b"mob",
    b"cell",
    b"cellphone",
    b"call",
    b"fax",
    b"ph",
    b"whatsapp",
    b"sms",
    b"dial",
    b"contact",
    b"reach",
    b"telefon",
    b"handy",
    b"rufnummer",
    b"mobil",
    b"portable",
    b"hotline",
    b"tlf",
    b"phonenumber",
];

const SSN: &[&[u8]] = &[
    b"ssn",
    b"social",
    b"security",
    b"ss",
    b"ssns",
    b"tin",
    b"itin",
    b"tax",
    b"taxpayer",
];

const IDENT: &[&[u8]] = &[
    b"order",
    b"orders",
    b"invoice",
    b"inv",
    b"tracking",
    b"track",
    b"ticket",
    b"ref",
    b"reference",
    b"receipt",
    b"po",
    b"sku",
    b"case",
    b"transaction",
    b"txn",
    b"confirmation",
    b"booking",
    b"shipment",
    b"serial",
    b"isbn",
    b"id",
    b"uid",
    b"pid",
    b"item",
    b"part",
    b"batch",
    b"lot",
    b"issue",
    b"pr",
    b"commit",
    b"timestamp",
    b"ts",
    b"epoch",
    b"nonce",
    b"request",
    b"req",
    b"job",
    b"run",
    b"build",
    b"zip",
    b"postal",
    b"postcode",
    b"plz",
];

const VERSION: &[&[u8]] = &[
    b"version",
    b"versions",
    b"ver",
    b"v",
    b"release",
    b"released",
    b"rel",
    b"firmware",
    b"fw",
    b"tag",
    b"rev",
    b"revision",
    b"update",
    b"updated",
    b"upgrade",
    b"upgraded",
    b"downgrade",
    b"package",
    b"pkg",
    b"sdk",
    b"chrome",
    b"firefox",
    b"safari",
    b"mozilla",
    b"applewebkit",
    b"python",
    b"java",
    b"ruby",
    b"rust",
    b"npm",
    b"pip",
    b"kernel",
    b"macos",
    b"ios",
    b"android",
    b"patch",
    b"hotfix",
    b"semver",
    b"bump",
    b"bumped",
    b"install",
    b"installed",
    b"requires",
];

/// Every listed word with what it says (`None`: a filler), sorted for binary search. The
/// lists are checked in priority order, so a word in two lists keeps the first meaning.
fn known_words() -> &'static [(&'static [u8], Option<Label>)] {
    static TABLE: std::sync::OnceLock<Vec<(&'static [u8], Option<Label>)>> =
        std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let lists: [(&[&'static [u8]], Option<Label>); 6] = [
            (FILLER, None),
            (PHONE, Some(Label::Phone)),
            (SSN, Some(Label::Ssn)),
            (VERSION, Some(Label::Version)),
            (IDENT, Some(Label::Identifier)),
            (NETWORK, Some(Label::Network)),
        ];
        let mut table: Vec<(&'static [u8], Option<Label>)> = Vec::new();
        for (list, label) in lists {
            for &w in list {
                if !table.iter().any(|(x, _)| *x == w) {
                    table.push((w, label));
                }
            }
        }
        table.sort_by(|a, b| a.0.cmp(b.0));
        table
    })
}

/// What a listed word says (`None` for fillers and unlisted words); no compound reading.
pub fn classify_word(word: &[u8]) -> Option<Label> {
    listed(word).flatten()
}

/// A listed word's entry: `Some(None)` for a filler, `None` when it is not listed.
fn listed(word: &[u8]) -> Option<Option<Label>> {
    let table = known_words();
    table
        .binary_search_by(|(w, _)| (*w).cmp(word))
        .ok()
        .map(|k| table[k].1)
}

fn classify(word: &[u8]) -> Option<Label> {
    listed(word).unwrap_or_else(|| Some(classify_compound(word)))
}

/// Labels written as one identifier (`customer_phone`, `orderId`, `social_security_number`).
fn classify_compound(word: &[u8]) -> Label {
    let contains = |needle: &[u8]| word.windows(needle.len()).any(|w| w == needle);
    if contains(b"phone") || contains(b"mobile") || contains(b"fax") || word.starts_with(b"tel") {
        Label::Phone
    } else if contains(b"ssn")
        || contains(b"social")
        || (word.starts_with(b"tax") && !word.starts_with(b"taxon"))
        || contains(b"_tax")
        || word.starts_with(b"tin_")
        || word.starts_with(b"itin")
    {
        Label::Ssn
    } else if contains(b"version") || contains(b"release") {
        Label::Version
    } else if word.starts_with(b"ip") || word.ends_with(b"_ip") || contains(b"host") {
        Label::Network
    } else if contains(b"order")
        || contains(b"invoice")
        || contains(b"tracking")
        || contains(b"ticket")
        || contains(b"receipt")
        || contains(b"reference")
        || contains(b"transaction")
        || contains(b"booking")
        || contains(b"timestamp")
        || word.ends_with(b"_id")
    {
        Label::Identifier
    } else {
        Label::None
    }
}

/// Bytes that may stand between a label and its value: `SSN: `, `order #`, `tel.`, `"phone": "`.
/// A comma, semicolon or other punctuation ends the search.
fn is_label_gap(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'\t'
            | b'\r'
            | b'\n'
            | b':'
            | b'#'
            | b'='
            | b'.'
            | b'-'
            | b'"'
            | b'\''
            | b'('
            | b'['
            | b'*'
            | b'>'
            | b'`'
            | b'/'
    )
}

/// Words that end in a dot without ending the sentence (`tel. 555...`, `order no. 42`).
const ABBREVIATIONS: &[&[u8]] = &[
    b"no", b"nr", b"tel", b"ph", b"inv", b"ref", b"num", b"mob", b"fax", b"acct", b"ver", b"v",
    b"rev", b"tlf", b"ca",
];

/// What the words before `start` (and, when the text starts there, the JSON key `hint` the text
/// was found under) say the value at `start` is. Looks at most four words back within the same
/// sentence, skipping fillers such as "number", "is", "my". A value that is a field of a CSV
/// row is labelled by its column's header.
pub fn label_before(b: &[u8], start: usize, hint: Option<&str>) -> Label {
    match words_before(b, start, hint) {
        Label::None => csv_column(b, start).map_or(Label::None, classify_hint),
        label => label,
    }
}

/// Field boundaries of one CSV line: the offsets where fields start, quote-aware.
fn csv_fields(line: &[u8], upto: usize) -> (usize, usize) {
    // (index of the field holding `upto`, fields seen so far)
    let mut field = 0;
    let mut quoted = false;
    for &c in &line[..upto] {
        match c {
            b'"' => quoted = !quoted,
            b',' if !quoted => field += 1,
            _ => {}
        }
    }
    (field, usize::from(quoted))
}

/// The header of the CSV column the value at `start` sits in: the value must start a field
/// (after a comma or at the start of its line), and the header is the first line of the block
/// of comma-separated lines it belongs to.
pub fn csv_column(b: &[u8], start: usize) -> Option<&str> {
    if start > 0 && !matches!(b[start - 1], b',' | b'\n') {
        return None;
    }
    // Bounded look-backs keep this linear on long lines and long tables.
    let lo = start.saturating_sub(1024);
    let ls = match b[lo..start].iter().rposition(|&c| c == b'\n') {
        Some(p) => lo + p + 1,
        None if lo == 0 => 0,
        None => return None,
    };
    let (col, open_quote) = csv_fields(&b[ls..], start - ls);
    if open_quote == 1
        || (col == 0
            && !b[start..]
                .iter()
                .take_while(|&&c| c != b'\n')
                .any(|&c| c == b','))
    {
        return None;
    }
    // Walk up over lines that also have commas, at most 50 lines or 8 KiB.
    let mut header = ls;
    let mut lines = 0;
    while header > 0 && lines < 20 && ls - header < 4096 {
        let prev_end = header - 1;
        let plo = prev_end.saturating_sub(1024);
        let prev_start = match b[plo..prev_end].iter().rposition(|&c| c == b'\n') {
            Some(p) => plo + p + 1,
            None if plo == 0 => 0,
            None => break,
        };
        if !b[prev_start..prev_end].contains(&b',') {
            break;
        }
        header = prev_start;
        lines += 1;
    }
    if header == ls {
        return None;
    }
    let line_end = header + b[header..].iter().position(|&c| c == b'\n')?;
    let line = &b[header..line_end];
    let name = line.split(|&c| c == b',').nth(col)?;
    let name = name.trim_ascii();
    let name = name.strip_prefix(b"\"").unwrap_or(name);
    let name = name.strip_suffix(b"\"").unwrap_or(name);
    std::str::from_utf8(name).ok()
}

fn words_before(b: &[u8], start: usize, hint: Option<&str>) -> Label {
    let mut pos = start;
    let mut buf = [0u8; 32];
    for _ in 0..4 {
        let gap_end = pos;
        while pos > 0 && is_label_gap(b[pos - 1]) {
            pos -= 1;
            if gap_end - pos > 6 {
                return Label::None;
            }
        }
        let gap = &b[pos..gap_end];
        // A line break ends the sentence unless it follows a colon (`Phone:\n555...`); a dash
        // only joins when nothing else is around it (`INV-2024`), not in ` - `.
        if (gap.contains(&b'\n') && !gap.contains(&b':')) || (gap.contains(&b'-') && gap != b"-") {
            return Label::None;
        }
        if pos == 0 {
            return hint.map_or(Label::None, classify_hint);
        }
        let end = pos;
        while pos > 0 && (b[pos - 1].is_ascii_alphanumeric() || b[pos - 1] == b'_') {
            pos -= 1;
            if end - pos > buf.len() {
                return Label::None;
            }
        }
        if pos == end {
            return Label::None;
        }
        let word = &b[pos..end];
        // Another number first: words before it are its labels, not this value's.
        if word[0].is_ascii_digit() {
            return Label::None;
        }
        let n = word.len();
        // camelCase ids (`orderId`) before lowering.
        if n >= 3 && word.ends_with(b"Id") {
            return id_label(word);
        }
        for (d, s) in buf.iter_mut().zip(word) {
            *d = s.to_ascii_lowercase();
        }
        let lower = &buf[..n];
        // A full stop ends the sentence unless the word is an abbreviation.
        if gap.contains(&b'.') && !ABBREVIATIONS.contains(&lower) {
            return Label::None;
        }
        if let Some(label) = classify(lower) {
            // "Tax ID", "taxpayer id": an individual's tax id is their SSN.
            if lower == b"id" && tax_word_before(b, pos) {
                return Label::Ssn;
            }
            return label;
        }
    }
    Label::None
}

/// A camelCase id (`orderId`): an identifier, but a tax id (`taxId`, `taxpayerId`) is an SSN.
fn id_label(word: &[u8]) -> Label {
    let tax = |p: &[u8]| word.len() >= p.len() && word[..p.len()].eq_ignore_ascii_case(p);
    match tax(b"tax") && !tax(b"taxon") {
        true => Label::Ssn,
        false => Label::Identifier,
    }
}

/// Whether the word before `end` (past one space) is "tax" or "taxpayer".
fn tax_word_before(b: &[u8], end: usize) -> bool {
    let end = match end.checked_sub(1) {
        Some(e) if b[e] == b' ' => e,
        _ => return false,
    };
    let mut s = end;
    while s > 0 && b[s - 1].is_ascii_alphabetic() && end - s < 8 {
        s -= 1;
    }
    let w = &b[s..end];
    w.eq_ignore_ascii_case(b"tax") || w.eq_ignore_ascii_case(b"taxpayer")
}

/// Classifies a JSON key such as `"customer_phone"` or `"Order Number"`.
fn classify_hint(hint: &str) -> Label {
    let mut buf = [0u8; 48];
    let h = hint.as_bytes();
    if h.is_empty() || h.len() > buf.len() {
        return Label::None;
    }
    if h.len() >= 3 && h.ends_with(b"Id") {
        return id_label(h);
    }
    for (d, s) in buf.iter_mut().zip(h) {
        *d = if s.is_ascii_alphanumeric() {
            s.to_ascii_lowercase()
        } else {
            b'_'
        };
    }
    let word = &buf[..h.len()];
    match classify(word) {
        Some(l) => l,
        None => Label::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(s: &str) -> Label {
        label_before(s.as_bytes(), s.len(), None)
    }

    #[test]
    fn labels() {
        assert_eq!(label("order #"), Label::Identifier);
        assert_eq!(label("Order Number: "), Label::Identifier);
        assert_eq!(label("INV-"), Label::Identifier);
        assert_eq!(label("SSN: "), Label::Ssn);
        assert_eq!(label("social security number "), Label::Ssn);
        assert_eq!(label("call me at "), Label::Phone);
        assert_eq!(label("my phone number is "), Label::Phone);
        assert_eq!(label("version "), Label::Version);
        assert_eq!(label("hello "), Label::None);
        assert_eq!(label("order no. "), Label::Identifier);
        assert_eq!(label("the order. "), Label::None);
        assert_eq!(label("update - "), Label::None);
        assert_eq!(label("Phone:\n"), Label::Phone);
        assert_eq!(label("update\n"), Label::None);
        assert_eq!(label("SSN, "), Label::None);
        assert_eq!(label(""), Label::None);
        assert_eq!(label_before(b"", 0, Some("customer_phone")), Label::Phone);
        assert_eq!(label_before(b"", 0, Some("orderId")), Label::Identifier);
        assert_eq!(label_before(b"", 0, Some("ssn")), Label::Ssn);
        // A US tax id: an individual's is their SSN.
        assert_eq!(label("TIN: "), Label::Ssn);
        assert_eq!(label("Tax ID: "), Label::Ssn);
        assert_eq!(label_before(b"", 0, Some("tax_id")), Label::Ssn);
        assert_eq!(label_before(b"", 0, Some("taxpayerId")), Label::Ssn);
        assert_eq!(label_before(b"", 0, Some("customer_tax_id")), Label::Ssn);
        assert_eq!(label_before(b"", 0, Some("taxonomy_id")), Label::Identifier);
        let csv = b"name,ssn,company\nJo,123456789,\"A, B\"\nAl,234567890,C";
        let at = |v: &[u8]| csv.windows(v.len()).position(|w| w == v).unwrap();
        assert_eq!(label_before(csv, at(b"123456789"), None), Label::Ssn);
        assert_eq!(label_before(csv, at(b"234567890"), None), Label::Ssn);
        assert_eq!(label_before(csv, at(b"C"), None), Label::None);
    }
}
