//! Context-led detection: a value shaped like a phone number, SSN, card or IBAN that fails its
//! validation (a numbering plan, SSA's issued ranges, a card issuer's prefix, a country's IBAN
//! length) is still personal data when the words around it say what it is: `Phone: 08-51 80
//! 01`, `2880 5873 fax`, `Here's my SSN: 890-47-0000`. Without such words, validation decides.
//!
//! The words come per locale ([`LOCALES`]); a candidate is in context when one of them is among
//! the [`BEFORE`] words before it (in the same sentence, or on the line above after a colon),
//! the word right after it, in the JSON key it was found under, or
//! in its CSV column's header. Scripts written without spaces (Chinese, Japanese) match a word
//! inside a longer run (`联系电话`). The nearest telling word decides: `order 12345678, call`
//! is an order number, because an identifier's word is met first.

use super::context::{classify_word, csv_column, is_word, Label};

/// Words looked at before a candidate by default (a config's `before`, 1 to [`MAX_BEFORE`]);
/// after it, the next word counts (`2880 5873 fax`), or one after a few small words
/// (`123456789 is my SSN`).
pub const BEFORE: usize = 6;
pub const MAX_BEFORE: usize = 12;

/// The context words in force: which locales' lists, the operator's own words, and how many
/// words before a value are looked at. The default is every list, no words of one's own, four.
#[derive(Clone, Debug, PartialEq)]
pub struct Context {
    /// One bit per entry of [`LOCALES`].
    lists: u32,
    /// The operator's words, lowercase, with the kinds each names (a bit per [`Kind`]).
    own: Vec<(String, u8)>,
    before: usize,
}

impl Default for Context {
    fn default() -> Self {
        Context {
            lists: u32::MAX,
            own: Vec::new(),
            before: BEFORE,
        }
    }
}

impl Context {
    /// From a config's `context`: `locales` (codes of [`LOCALES`]; `None`: all), `words` by type
    /// name (`PHONE`, `US_SSN`, `CREDIT_CARD`, `IBAN`), `before`.
    pub fn new(
        locales: Option<&[String]>,
        words: &std::collections::BTreeMap<String, Vec<String>>,
        before: Option<usize>,
    ) -> Result<Context, String> {
        let mut lists = u32::MAX;
        if let Some(codes) = locales {
            lists = 0;
            for code in codes {
                let k = LOCALES
                    .iter()
                    .position(|w| w.locales.contains(&code.as_str()))
                    .ok_or_else(|| {
                        let known: Vec<&str> = LOCALES
                            .iter()
                            .flat_map(|w| w.locales.iter().copied())
                            .collect();
                        format!(
                            "context.locales: unknown locale {code:?} (known: {})",
                            known.join(", ")
                        )
                    })?;
                lists |= 1 << k;
            }
        }
        let mut own = Vec::new();
        for (name, list) in words {
            let kind = match name.as_str() {
                "PHONE" => Kind::Phone,
                "US_SSN" => Kind::Ssn,
                "CREDIT_CARD" => Kind::Card,
                "IBAN" => Kind::Iban,
                _ => {
                    return Err(format!(
                        "context.words: {name:?} has no context-led detection (PHONE, US_SSN, CREDIT_CARD, IBAN)"
                    ))
                }
            };
            for w in list {
                let w = w.trim().to_lowercase();
                if w.is_empty() || w.len() > 48 || w.chars().any(char::is_whitespace) {
                    return Err(format!(
                        "context.words.{name}: {w:?} is not one word of 1 to 48 bytes"
                    ));
                }
                own.push((w, bit(kind)));
            }
        }
        let before = before.unwrap_or(BEFORE);
        if !(1..=MAX_BEFORE).contains(&before) {
            return Err(format!(
                "context.before: {before} is not in 1..{MAX_BEFORE}"
            ));
        }
        Ok(Context { lists, own, before })
    }
}

/// What a detector asks the words around a value with: the JSON key the text is under, and the
/// context words in force.
#[derive(Clone, Copy)]
pub struct Cx<'a> {
    pub hint: Option<&'a str>,
    pub words: &'a Context,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Phone,
    Ssn,
    Card,
    Iban,
}

/// A locale's words for each kind (lowercase; matched whole, or inside a run of a script
/// written without spaces).
pub struct Words {
    /// The languages (ISO 639-1) the words are from; a config's `locales` picks lists by them.
    pub locales: &'static [&'static str],
    pub phone: &'static [&'static str],
    pub ssn: &'static [&'static str],
    pub card: &'static [&'static str],
    pub iban: &'static [&'static str],
}

pub const LOCALES: &[Words] = &[
    Words {
        locales: &["en"],
        phone: &[
            "phone",
            "phones",
            "telephone",
            "tel",
            "mobile",
            "mob",
            "cell",
            "cellphone",
            "call",
            "calls",
            "called",
            "fax",
            "ph",
            "whatsapp",
            "sms",
            "dial",
            "contact",
            "reach",
            "hotline",
            "office",
            "desk",
            "home",
            "landline",
            "voicemail",
            "message",
            "messages",
            "answering",
            "phonenumber",
            "telno",
            "tlf",
        ],
        // Not `itin` (an ITIN is not an SSN), nor `security` alone (security groups, policies).
        ssn: &["ssn", "ssns", "social", "tin", "taxpayer", "tax"],
        card: &[
            "card",
            "cards",
            "credit",
            "debit",
            "cc",
            "visa",
            "mastercard",
            "amex",
            "maestro",
            "discover",
            "jcb",
            "diners",
            "pan",
            "cvv",
            "cvv2",
            "cvc",
            "expiry",
            "cardholder",
        ],
        iban: &[
            "iban",
            "account",
            "acct",
            "bank",
            "transfer",
            "wire",
            "bic",
            "swift",
            "beneficiary",
            "payee",
        ],
    },
    Words {
        locales: &["de"],
        phone: &[
            "telefon",
            "telefonnummer",
            "handy",
            "mobil",
            "mobilnummer",
            "rufnummer",
            "festnetz",
            "anrufen",
            "erreichbar",
            "durchwahl",
            "telefax",
        ],
        ssn: &["sozialversicherungsnummer", "steuernummer", "steuer"],
        card: &["karte", "kreditkarte", "kartennummer", "kreditkartennummer"],
        iban: &["konto", "kontonummer", "überweisung", "bankverbindung"],
    },
    Words {
        locales: &["fr"],
        phone: &[
            "téléphone",
            "telephone",
            "tél",
            "portable",
            "mobile",
            "fixe",
            "appeler",
            "appelez",
            "joindre",
            "télécopie",
        ],
        ssn: &["sécurité", "sociale"],
        card: &["carte", "bancaire", "crédit"],
        iban: &["compte", "virement", "rib"],
    },
    Words {
        locales: &["es"],
        phone: &[
            "teléfono",
            "telefono",
            "móvil",
            "movil",
            "celular",
            "llamar",
            "llame",
            "llámame",
            "fijo",
            "tfno",
        ],
        ssn: &["seguro", "social"],
        card: &["tarjeta", "crédito", "débito"],
        iban: &["cuenta", "transferencia"],
    },
    Words {
        locales: &["it"],
        phone: &["telefono", "cellulare", "chiamare", "chiamami", "cell"],
        ssn: &[],
        card: &["carta", "credito"],
        iban: &["conto", "bonifico"],
    },
    Words {
        locales: &["nl"],
        phone: &["telefoon", "telefoonnummer", "mobiel", "bellen", "bel"],
        ssn: &[],
        card: &["kaart", "creditcard", "pinpas"],
        iban: &["rekening", "rekeningnummer", "overschrijving"],
    },
    Words {
        locales: &["pt"],
        phone: &[
            "telefone",
            "celular",
            "telemóvel",
            "telemovel",
            "ligar",
            "ligue",
            "contato",
        ],
        ssn: &[],
        card: &["cartão", "cartao"],
        iban: &["conta", "transferência"],
    },
    Words {
        locales: &["sv", "da", "no", "fi"],
        phone: &[
            "telefon",
            "tlf",
            "mobil",
            "mobilnummer",
            "ring",
            "ringe",
            "puhelin",
            "puh",
            "matkapuhelin",
        ],
        ssn: &[],
        card: &["kort", "kortnummer", "kortti"],
        iban: &["konto", "kontonummer", "tili"],
    },
    Words {
        locales: &["pl", "cs", "hu", "ro", "tr"],
        phone: &[
            "telefon",
            "komórka",
            "komórkowy",
            "mobil",
            "cep",
            "gsm",
            "arayın",
            "telefonszám",
        ],
        ssn: &[],
        card: &["karta", "kártya", "kart", "kredi"],
        iban: &[
            "konto", "rachunek", "przelew", "účet", "számla", "cont", "hesap",
        ],
    },
    Words {
        locales: &["ru", "uk"],
        phone: &[
            "телефон",
            "тел",
            "мобильный",
            "моб",
            "звоните",
            "позвоните",
            "факс",
            "мобільний",
            "телефону",
            "телефона",
        ],
        ssn: &[],
        card: &["карта", "карты", "карту", "картка", "картки"],
        iban: &["счет", "счёт", "рахунок"],
    },
    Words {
        locales: &["el", "he"],
        phone: &["τηλέφωνο", "τηλ", "κινητό", "φαξ", "טלפון", "נייד", "פקס"],
        ssn: &[],
        card: &["κάρτα", "כרטיס"],
        iban: &["λογαριασμός", "חשבון"],
    },
    Words {
        locales: &["ja", "zh", "ko"],
        phone: &[
            "電話",
            "携帯",
            "ファックス",
            "ファクス",
            "连络先",
            "連絡先",
            "电话",
            "手机",
            "传真",
            "联系",
            "전화",
            "휴대폰",
            "핸드폰",
            "연락처",
            "팩스",
        ],
        ssn: &[],
        card: &["カード", "卡号", "信用卡", "银行卡", "카드"],
        iban: &["口座", "账户", "账号", "계좌"],
    },
];

fn list(w: &Words, kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Phone => w.phone,
        Kind::Ssn => w.ssn,
        Kind::Card => w.card,
        Kind::Iban => w.iban,
    }
}

/// Where a word stands to the value: a run of an unspaced script matches when it ends with the
/// kind's word before the value (`联系电话`), starts with it after the value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Before,
    After,
    Whole,
}

/// A word of the lists: the kinds it names (a bit per [`Kind`]) in the lists it is in (a bit
/// per entry of [`LOCALES`]).
type Entry = (&'static str, [u32; 4]);

/// Every locale's words, sorted; looked up for each word near a candidate, so a binary search
/// rather than a walk of every list.
fn table() -> &'static [Entry] {
    static TABLE: std::sync::OnceLock<Vec<Entry>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t: Vec<Entry> = Vec::new();
        for (k, w) in LOCALES.iter().enumerate() {
            for kind in [Kind::Phone, Kind::Ssn, Kind::Card, Kind::Iban] {
                for &x in list(w, kind) {
                    let at = match t.iter().position(|(y, _)| *y == x) {
                        Some(at) => at,
                        None => {
                            t.push((x, [0; 4]));
                            t.len() - 1
                        }
                    };
                    t[at].1[kind as usize] |= 1 << k;
                }
            }
        }
        t.sort_unstable();
        t
    })
}

fn bit(kind: Kind) -> u8 {
    1 << kind as u8
}

fn lookup(word: &str, kind: Kind, cx: &Context) -> bool {
    let t = table();
    t.binary_search_by(|(w, _)| (*w).cmp(word))
        .is_ok_and(|k| t[k].1[kind as usize] & cx.lists != 0)
        || cx
            .own
            .iter()
            .any(|(w, bits)| bits & bit(kind) != 0 && w == word)
}

/// Whether `word` (as written) is one of the kind's words in any locale.
fn says(word: &[u8], kind: Kind, side: Side, cx: &Context) -> bool {
    let mut buf = [0u8; 48];
    if word.is_empty() || word.len() > buf.len() {
        return false;
    }
    if word.is_ascii() {
        for (d, s) in buf.iter_mut().zip(word) {
            *d = s.to_ascii_lowercase();
        }
        let lower = std::str::from_utf8(&buf[..word.len()]).expect("ASCII");
        return lookup(lower, kind, cx);
    }
    let Ok(s) = std::str::from_utf8(word) else {
        return false;
    };
    // CJK punctuation is part of the word run here (`电话：`).
    let lower = s.to_lowercase();
    let lower = lower.trim_matches(|c| {
        matches!(c, '\u{3000}'..='\u{303f}' | '\u{ff01}'..='\u{ff0f}' | '\u{ff1a}'..='\u{ff20}')
    });
    lookup(lower, kind, cx)
        || (side != Side::Whole
            && table().iter().any(|&(x, bits)| {
                bits[kind as usize] & cx.lists != 0
                    && unspaced(x)
                    && match side {
                        Side::Before => lower.ends_with(x),
                        _ => lower.starts_with(x),
                    }
            }))
}

/// Words of scripts written without spaces between words (Han, kana, Hangul).
fn unspaced(w: &str) -> bool {
    w.chars().next().is_some_and(|c| c as u32 >= 0x3000)
}

/// Words that name the kind as a part of an identifier (`customer_phone`, `cardNumber`). Words
/// such as `call`, `message` or `security` are too common in code as parts (`SET_VRING_CALL`,
/// `security_policy`) and count only whole.
const IN_KEYS: &[(Kind, &[&str])] = &[
    (
        Kind::Phone,
        &[
            "phone",
            "phones",
            "telephone",
            "tel",
            "mobile",
            "cellphone",
            "fax",
            "phonenumber",
            "whatsapp",
            "telefon",
            "telefono",
            "telefone",
            "telefoon",
            "handy",
            "mobil",
        ],
    ),
    (Kind::Ssn, &["ssn", "ssns", "social", "tin", "taxpayer"]),
    (Kind::Card, &["card", "credit", "debit", "cc", "pan"]),
    (
        Kind::Iban,
        &["iban", "account", "acct", "bank", "konto", "rekening"],
    ),
];

fn part_says(part: &str, kind: Kind) -> bool {
    let lower = part.to_ascii_lowercase();
    IN_KEYS
        .iter()
        .any(|(k, words)| *k == kind && words.contains(&lower.as_str()))
}

/// Whether a JSON key or CSV header names the kind: the whole key, or one of its parts
/// (`phone_number`, `customerPhone`, `credit-card`).
pub fn key_says(key: &str, kind: Kind, cx: &Context) -> bool {
    if says(key.as_bytes(), kind, Side::Whole, cx) {
        return true;
    }
    let mut parts = Vec::new();
    let mut start = 0;
    let b = key.as_bytes();
    for i in 1..=b.len() {
        let split = i == b.len()
            || !b[i].is_ascii_alphanumeric() && b[i] < 0x80
            || (b[i].is_ascii_uppercase() && b[i - 1].is_ascii_lowercase());
        if split {
            let p = key[start..i].trim_matches(|c: char| !c.is_alphanumeric());
            if !p.is_empty() {
                parts.push(p);
            }
            start = i;
        }
    }
    parts.len() > 1
        && parts
            .iter()
            .any(|p| part_says(p, kind) || cx.own.iter().any(|(w, _)| w.eq_ignore_ascii_case(p)))
}

/// Whether the words around `start..end` say the value there is of `kind`. `hint` is the JSON
/// key the text was found under (it counts when the value starts the text).
pub fn near(b: &[u8], start: usize, end: usize, cx: Cx<'_>, kind: Kind) -> bool {
    let (hint, words) = (cx.hint, cx.words);
    if let Some(v) = before(b, start, kind, words) {
        return v;
    }
    // The JSON key the text was found under labels a value that starts the text.
    if only_gap(&b[..start]) && hint.is_some_and(|h| key_says(h, kind, words)) {
        return true;
    }
    if csv_column(b, start).is_some_and(|h| key_says(h, kind, words)) {
        return true;
    }
    after(b, end, kind, words)
}

fn only_gap(b: &[u8]) -> bool {
    b.iter().all(|c| !is_word(*c))
}

/// The words before `start`: `Some(true)` when one says `kind`, `Some(false)` when a word that
/// says something else (an identifier, a version) comes first, `None` when nothing telling is
/// in reach.
fn before(b: &[u8], start: usize, kind: Kind, cx: &Context) -> Option<bool> {
    let mut pos = start;
    for _ in 0..cx.before {
        let gap_end = pos;
        while pos > 0 && !is_word(b[pos - 1]) {
            pos -= 1;
            if gap_end - pos > 8 {
                return None;
            }
        }
        let gap = &b[pos..gap_end];
        // A line break ends the reach unless after a colon (`Phone:\n...`); so does the end of
        // a sentence (`. `, `? `, `! `, `;`).
        if (gap.contains(&b'\n') && !gap.contains(&b':'))
            || gap
                .windows(2)
                .any(|w| matches!(w[0], b'.' | b'?' | b'!') && w[1] == b' ')
            || gap.contains(&b';')
            || pos == 0
        {
            return None;
        }
        let end = pos;
        while pos > 0 && is_word(b[pos - 1]) {
            pos -= 1;
            if end - pos > 48 {
                return None;
            }
        }
        let word = &b[pos..end];
        if says(word, kind, Side::Before, cx)
            || (word.contains(&b'_') && key_says_ascii(word, kind, cx))
        {
            return Some(true);
        }
        // Another number in between: the words before belong to it (`call 555... 3946 6171`);
        // a word after this value may still name it (`..., 2880 5873 fax`).
        if word.iter().all(u8::is_ascii_digit) {
            return None;
        }
        if word.is_ascii() && word.len() <= 32 {
            let mut buf = [0u8; 32];
            for (d, s) in buf.iter_mut().zip(word) {
                *d = s.to_ascii_lowercase();
            }
            let lower = &buf[..word.len()];
            // `id` in "Tax ID" or "order id" lets the word before it decide.
            match classify_word(lower) {
                Some(Label::Identifier) if lower != b"id" => return Some(false),
                Some(Label::Version) => return Some(false),
                Some(Label::Network) if kind != Kind::Iban => return Some(false),
                _ => {}
            }
        }
    }
    None
}

/// The words right after `end`, past a space, a dash or a parenthesis: `2880 5873 fax`,
/// `13708492408-Office`, `555 0199 (mobile)`, and past a few small words that only lead to
/// the label (`123456789 is my SSN`, `..., which is her card`).
fn after(b: &[u8], end: usize, kind: Kind, cx: &Context) -> bool {
    let mut pos = end;
    let mut comma = false;
    for k in 0..=AFTER_SMALL_WORDS {
        let gap = pos;
        while pos < b.len() && matches!(b[pos], b' ' | b'-' | b'(' | b',' | b'\'') {
            // A comma, or an apostrophe (`that's`), only before a small word.
            comma |= matches!(b[pos], b',' | b'\'') && k == 0;
            if pos - gap >= 2 {
                return false;
            }
            pos += 1;
        }
        let start = pos;
        while pos < b.len() && is_word(b[pos]) && pos - start <= 48 {
            pos += 1;
        }
        let word = &b[start..pos];
        if word.is_empty() {
            return false;
        }
        if says(word, kind, Side::After, cx) {
            return !(comma && k == 0);
        }
        let small = word.len() <= 6
            && SMALL_WORDS
                .iter()
                .any(|w| w.as_bytes().eq_ignore_ascii_case(word));
        if !small {
            return false;
        }
    }
    false
}

/// Small words passed over after a value on the way to its label.
const AFTER_SMALL_WORDS: usize = 3;
const SMALL_WORDS: &[&str] = &[
    "is", "was", "my", "your", "his", "her", "their", "our", "its", "the", "a", "an", "that",
    "which", "as", "being", "s", "ist", "mein", "meine", "est", "mon", "ma", "es", "mi",
];

/// An identifier-like word (`phone_number`, `customer_phone`) read by its parts.
fn key_says_ascii(word: &[u8], kind: Kind, cx: &Context) -> bool {
    std::str::from_utf8(word).is_ok_and(|w| key_says(w, kind, cx))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, value: &str, kind: Kind) -> bool {
        at_with(text, value, kind, &Context::default())
    }

    fn at_with(text: &str, value: &str, kind: Kind, words: &Context) -> bool {
        let s = text.find(value).unwrap();
        let cx = Cx { hint: None, words };
        near(text.as_bytes(), s, s + value.len(), cx, kind)
    }

    fn keyed(key: &str, kind: Kind) -> bool {
        let cx = Cx {
            hint: Some(key),
            words: &Context::default(),
        };
        near(b"12345678", 0, 8, cx, kind)
    }

    #[test]
    fn words_around() {
        assert!(at("Phone: 08-51 80 01", "08-51", Kind::Phone));
        assert!(at("Phone:\n23302106\n", "23302106", Kind::Phone));
        assert!(at("2880 5873 fax\n", "2880 5873", Kind::Phone));
        assert!(at("13708492408-Office,1", "13708492408", Kind::Phone));
        assert!(at("You can call 75 42 78 46", "75 42", Kind::Phone));
        assert!(at("Telefon: 030 1234567", "030", Kind::Phone));
        assert!(at("联系电话：13812345678", "138", Kind::Phone));
        assert!(at("Телефон: 812 96 73", "812", Kind::Phone));
        assert!(at("Here's my SSN: 890-47-0000", "890", Kind::Ssn));
        assert!(at("Tax ID 890-47-0000", "890", Kind::Ssn));
        assert!(at("using this IBAN DK16 4934", "DK16", Kind::Iban));
        assert!(at("transfer from GB87QNGY40 to", "GB87", Kind::Iban));
        assert!(at("Maestro card 6708177693413682", "6708", Kind::Card));
        // Nothing telling, an identifier first, another sentence, another line.
        assert!(!at("Sapiente non. 12345678 iure", "12345678", Kind::Phone));
        assert!(!at("call about order 12345678", "12345678", Kind::Phone));
        assert!(!at("Call me. 12345678", "12345678", Kind::Phone));
        assert!(!at("Phone\n12345678", "12345678", Kind::Phone));
        assert!(!at("version 12345678", "12345678", Kind::Phone));
        assert!(!at("12345678\nfax", "12345678", Kind::Phone));
        assert!(!at("call 5550100 3946 6171", "3946 6171", Kind::Phone));
        assert!(at(
            "Phone: 08-51 80 01, 2880 5873 fax",
            "2880 5873",
            Kind::Phone
        ));
        assert!(!at("12345678 this - phone", "12345678", Kind::Phone));
        assert!(at("phone_number: 12345678", "12345678", Kind::Phone));
        // An unspaced script's run counts when it ends with the word before the value, starts
        // with it after.
        assert!(!at(
            "051-00-9489 探査持ってる供給電話。",
            "051",
            Kind::Phone
        ));
        // Keys and columns.
        assert!(keyed("phone_number", Kind::Phone));
        assert!(keyed("customerPhone", Kind::Phone));
        assert!(keyed("credit_card_number", Kind::Card));
        assert!(!keyed("order_id", Kind::Phone));
        assert!(at(
            "name,phone_number\nJo,12345678\n",
            "12345678",
            Kind::Phone
        ));
    }

    #[test]
    fn an_operators_context() {
        let words = |locales: Option<&[&str]>, own: &[(&str, &[&str])], before| {
            let locales: Option<Vec<String>> =
                locales.map(|l| l.iter().map(|s| s.to_string()).collect());
            let own = own
                .iter()
                .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
                .collect();
            Context::new(locales.as_deref(), &own, before)
        };
        // Only German: an English word no longer counts, a German one does.
        let de = words(Some(&["de"]), &[], None).unwrap();
        assert!(!at_with("Phone: 08-51 80 01", "08", Kind::Phone, &de));
        assert!(at_with("Telefon: 08-51 80 01", "08", Kind::Phone, &de));
        // One's own words, whole and as a key's part; the window.
        let own = words(None, &[("PHONE", &["Durchwahl2"])], Some(1)).unwrap();
        assert!(at_with("durchwahl2 12345678", "1234", Kind::Phone, &own));
        assert!(at_with(
            "{\"kunde_durchwahl2\": \"12345678\"}",
            "1234",
            Kind::Phone,
            &own
        ));
        assert!(!at_with("phone is our 12345678", "1234", Kind::Phone, &own));
        // Bad entries, named.
        assert!(words(Some(&["xx"]), &[], None)
            .unwrap_err()
            .contains("\"xx\""));
        assert!(words(None, &[("EMAIL", &["mail"])], None)
            .unwrap_err()
            .contains("EMAIL"));
        assert!(words(None, &[("PHONE", &["two words"])], None).is_err());
        assert!(words(None, &[], Some(13)).unwrap_err().contains("before"));
    }
}
