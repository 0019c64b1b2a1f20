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

/// Words looked at before a candidate; after it, only the next word counts (`2880 5873 fax`).
pub const BEFORE: usize = 4;

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
    /// Which languages the words are from (documentation; every list applies).
    #[allow(dead_code)]
    pub locale: &'static str,
    pub phone: &'static [&'static str],
    pub ssn: &'static [&'static str],
    pub card: &'static [&'static str],
    pub iban: &'static [&'static str],
}

pub const LOCALES: &[Words] = &[
    Words {
        locale: "en",
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
        locale: "de",
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
        locale: "fr",
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
        locale: "es",
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
        locale: "it",
        phone: &["telefono", "cellulare", "chiamare", "chiamami", "cell"],
        ssn: &[],
        card: &["carta", "credito"],
        iban: &["conto", "bonifico"],
    },
    Words {
        locale: "nl",
        phone: &["telefoon", "telefoonnummer", "mobiel", "bellen", "bel"],
        ssn: &[],
        card: &["kaart", "creditcard", "pinpas"],
        iban: &["rekening", "rekeningnummer", "overschrijving"],
    },
    Words {
        locale: "pt",
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
        locale: "sv, da, no, fi",
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
        locale: "pl, cs, hu, ro, tr",
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
        locale: "ru, uk",
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
        locale: "el, he",
        phone: &["τηλέφωνο", "τηλ", "κινητό", "φαξ", "טלפון", "נייד", "פקס"],
        ssn: &[],
        card: &["κάρτα", "כרטיס"],
        iban: &["λογαριασμός", "חשבון"],
    },
    Words {
        locale: "ja, zh, ko",
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

/// Every locale's words, sorted, each with the kinds it names (a bit per [`Kind`]); looked up
/// for each word near a candidate, so a binary search rather than a walk of every list.
fn table() -> &'static [(&'static str, u8)] {
    static TABLE: std::sync::OnceLock<Vec<(&'static str, u8)>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t: Vec<(&'static str, u8)> = Vec::new();
        for w in LOCALES {
            for kind in [Kind::Phone, Kind::Ssn, Kind::Card, Kind::Iban] {
                for &x in list(w, kind) {
                    match t.iter_mut().find(|(y, _)| *y == x) {
                        Some((_, bits)) => *bits |= bit(kind),
                        None => t.push((x, bit(kind))),
                    }
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

fn lookup(word: &str, kind: Kind) -> bool {
    let t = table();
    t.binary_search_by(|(w, _)| (*w).cmp(word))
        .is_ok_and(|k| t[k].1 & bit(kind) != 0)
}

/// Whether `word` (as written) is one of the kind's words in any locale.
fn says(word: &[u8], kind: Kind, side: Side) -> bool {
    let mut buf = [0u8; 48];
    if word.is_empty() || word.len() > buf.len() {
        return false;
    }
    if word.is_ascii() {
        for (d, s) in buf.iter_mut().zip(word) {
            *d = s.to_ascii_lowercase();
        }
        let lower = std::str::from_utf8(&buf[..word.len()]).expect("ASCII");
        return lookup(lower, kind);
    }
    let Ok(s) = std::str::from_utf8(word) else {
        return false;
    };
    // CJK punctuation is part of the word run here (`电话：`).
    let lower = s.to_lowercase();
    let lower = lower.trim_matches(|c| {
        matches!(c, '\u{3000}'..='\u{303f}' | '\u{ff01}'..='\u{ff0f}' | '\u{ff1a}'..='\u{ff20}')
    });
    lookup(lower, kind)
        || (side != Side::Whole
            && table().iter().any(|&(x, bits)| {
                bits & bit(kind) != 0
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
pub fn key_says(key: &str, kind: Kind) -> bool {
    if says(key.as_bytes(), kind, Side::Whole) {
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
    parts.len() > 1 && parts.iter().any(|p| part_says(p, kind))
}

/// Whether the words around `start..end` say the value there is of `kind`. `hint` is the JSON
/// key the text was found under (it counts when the value starts the text).
pub fn near(b: &[u8], start: usize, end: usize, hint: Option<&str>, kind: Kind) -> bool {
    if let Some(v) = before(b, start, kind) {
        return v;
    }
    // The JSON key the text was found under labels a value that starts the text.
    if only_gap(&b[..start]) && hint.is_some_and(|h| key_says(h, kind)) {
        return true;
    }
    if csv_column(b, start).is_some_and(|h| key_says(h, kind)) {
        return true;
    }
    after(b, end, kind)
}

fn only_gap(b: &[u8]) -> bool {
    b.iter().all(|c| !is_word(*c))
}

/// The words before `start`: `Some(true)` when one says `kind`, `Some(false)` when a word that
/// says something else (an identifier, a version) comes first, `None` when nothing telling is
/// in reach.
fn before(b: &[u8], start: usize, kind: Kind) -> Option<bool> {
    let mut pos = start;
    for _ in 0..BEFORE {
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
        if says(word, kind, Side::Before) || (word.contains(&b'_') && key_says_ascii(word, kind)) {
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

/// The word right after `end`, past a space, a dash or a parenthesis: `2880 5873 fax`,
/// `13708492408-Office`, `555 0199 (mobile)`.
fn after(b: &[u8], end: usize, kind: Kind) -> bool {
    let mut pos = end;
    while pos < b.len() && matches!(b[pos], b' ' | b'-' | b'(') {
        if pos - end >= 2 {
            return false;
        }
        pos += 1;
    }
    let start = pos;
    while pos < b.len() && is_word(b[pos]) && pos - start <= 48 {
        pos += 1;
    }
    start < pos && says(&b[start..pos], kind, Side::After)
}

/// An identifier-like word (`phone_number`, `customer_phone`) read by its parts.
fn key_says_ascii(word: &[u8], kind: Kind) -> bool {
    std::str::from_utf8(word).is_ok_and(|w| key_says(w, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, value: &str, kind: Kind) -> bool {
        let s = text.find(value).unwrap();
        near(text.as_bytes(), s, s + value.len(), None, kind)
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
        let b = b"12345678";
        assert!(near(b, 0, 8, Some("phone_number"), Kind::Phone));
        assert!(near(b, 0, 8, Some("customerPhone"), Kind::Phone));
        assert!(near(b, 0, 8, Some("credit_card_number"), Kind::Card));
        assert!(!near(b, 0, 8, Some("order_id"), Kind::Phone));
        let csv = b"name,phone_number\nJo,12345678\n";
        assert!(near(csv, 21, 29, None, Kind::Phone));
    }
}
