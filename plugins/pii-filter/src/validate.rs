//! Checksums and range rules that turn "looks like" into "is": most digit strings that have the
//! shape of a card, IBAN or SSN fail these, which is what keeps the filter's precision high.

/// Luhn (mod 10) check over ASCII digits.
pub fn luhn(digits: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, &d) in digits.iter().rev().enumerate() {
        let mut v = u32::from(d - b'0');
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum.is_multiple_of(10)
}

/// Whether a card number's issuer prefix (IIN) and length belong to a real card scheme. Luhn
/// alone passes one random digit string in ten; issuer ranges and lengths cut that much further
/// and keep 13-digit millisecond timestamps (which start with 1) out.
///
/// Ranges and lengths from the public IIN tables (see `eval/SOURCES.md`): Visa 4 (13, 16, 19);
/// Mastercard 51-55 and 2221-2720 (16); Mir 2200-2204 (16-19); Amex 34, 37 (15); Diners
/// 300-305, 36, 38, 39 (14-19); JCB 3528-3589 (16-19; Faker and older tables use all of 35) and
/// the older 15-digit 1800, 2131; Discover 6011, 644-649, 65 (16-19); UnionPay 62 (16-19);
/// Maestro 5018, 5020, 5038, 5893, 6304, 6759, 6761-6763, 0604, 6390 and 56-58 (12-19).
pub fn card_issuer_ok(digits: &[u8]) -> bool {
    let len = digits.len();
    if !(12..=19).contains(&len) {
        return false;
    }
    let prefix = |n: usize| -> u32 {
        digits[..n]
            .iter()
            .fold(0u32, |acc, &d| acc * 10 + u32::from(d - b'0'))
    };
    let (p2, p3, p4) = (prefix(2), prefix(3), prefix(4));
    let maestro = matches!(
        p4,
        5018 | 5020 | 5038 | 5893 | 6304 | 6759 | 6761..=6763 | 604 | 6390
    ) || (56..=58).contains(&p2);
    if maestro {
        return true;
    }
    match digits[0] {
        b'4' => matches!(len, 13 | 16 | 19),
        b'5' if (51..=55).contains(&p2) => len == 16,
        b'2' if (2221..=2720).contains(&p4) => len == 16,
        b'2' if (2200..=2204).contains(&p4) => len >= 16,
        b'2' if p4 == 2131 => len == 15,
        b'1' if p4 == 1800 => len == 15,
        b'3' if p2 == 34 || p2 == 37 => len == 15,
        b'3' if (300..=305).contains(&p3) || p2 == 36 || p2 == 38 || p2 == 39 => len >= 14,
        b'3' if p2 == 35 => len >= 16,
        b'6' if p4 == 6011 || (644..=649).contains(&p3) || p2 == 65 || p2 == 62 => len >= 16,
        _ => false,
    }
}

/// US Social Security Number ranges: area not 000, 666 or 900-999; group not 00; serial not 0000.
pub fn ssn_ok(area: &[u8], group: &[u8], serial: &[u8]) -> bool {
    area != b"000" && area != b"666" && area[0] != b'9' && group != b"00" && serial != b"0000"
}

/// The IBAN length registered for a country code, if the country issues IBANs.
pub fn iban_length(cc: [u8; 2]) -> Option<usize> {
    let len = match &cc {
        b"NO" => 15,
        b"BE" => 16,
        b"DK" | b"FI" | b"FK" | b"FO" | b"GL" | b"NL" | b"SD" => 18,
        b"MK" | b"SI" => 19,
        b"AT" | b"BA" | b"EE" | b"KZ" | b"LT" | b"LU" | b"MN" | b"XK" => 20,
        b"CH" | b"HR" | b"LI" | b"LV" => 21,
        b"BG" | b"BH" | b"CR" | b"DE" | b"GB" | b"GE" | b"IE" | b"ME" | b"RS" | b"VA" => 22,
        b"AE" | b"GI" | b"IL" | b"IQ" | b"OM" | b"SO" | b"TL" => 23,
        b"AD" | b"CZ" | b"ES" | b"MD" | b"PK" | b"RO" | b"SA" | b"SE" | b"SK" | b"TN" | b"VG" => 24,
        b"LY" | b"PT" | b"ST" => 25,
        b"IS" | b"TR" => 26,
        b"BI" | b"DJ" | b"FR" | b"GR" | b"IT" | b"MC" | b"MR" | b"SM" => 27,
        b"AL" | b"AZ" | b"BY" | b"CY" | b"DO" | b"GT" | b"HU" | b"LB" | b"NI" | b"PL" | b"SV" => 28,
        b"BR" | b"EG" | b"PS" | b"QA" | b"UA" => 29,
        b"JO" | b"KW" | b"MU" | b"YE" => 30,
        b"MT" | b"SC" => 31,
        b"LC" => 32,
        b"RU" => 33,
        _ => return None,
    };
    Some(len)
}

/// ISO 13616 mod-97 check over an IBAN in electronic form (uppercase letters and digits only).
pub fn iban_mod97(iban: &[u8]) -> bool {
    if iban.len() < 5 {
        return false;
    }
    let mut r: u32 = 0;
    for &c in iban[4..].iter().chain(&iban[..4]) {
        r = match c {
            b'0'..=b'9' => (r * 10 + u32::from(c - b'0')) % 97,
            b'A'..=b'Z' => (r * 100 + u32::from(c - b'A') + 10) % 97,
            _ => return false,
        };
    }
    r == 1
}

/// Decodes unpadded (or padded) base64url; `None` on any character outside the alphabet.
pub fn base64url_decode(input: &[u8]) -> Option<Vec<u8>> {
    let input = match input.iter().position(|&c| c == b'=') {
        Some(p) => &input[..p],
        None => input,
    };
    let mut out = Vec::with_capacity(input.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0u32;
    for &c in input {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luhn_known() {
        assert!(luhn(b"4111111111111111"));
        assert!(luhn(b"378282246310005"));
        assert!(!luhn(b"4111111111111112"));
    }

    #[test]
    fn issuers() {
        assert!(card_issuer_ok(b"4111111111111111"));
        assert!(card_issuer_ok(b"5555555555554444"));
        assert!(card_issuer_ok(b"2223003122003222"));
        assert!(card_issuer_ok(b"378282246310005"));
        assert!(card_issuer_ok(b"6011111111111117"));
        assert!(card_issuer_ok(b"30569309025904"));
        assert!(card_issuer_ok(b"3530111333300000"));
        assert!(!card_issuer_ok(b"1700000000000"));
        assert!(card_issuer_ok(b"675900000000"));
        assert!(card_issuer_ok(b"180000000000000"));
        assert!(!card_issuer_ok(b"41111111111"));
        assert!(!card_issuer_ok(b"9999999999999995"));
    }

    #[test]
    fn ibans() {
        assert!(iban_mod97(b"DE89370400440532013000"));
        assert!(iban_mod97(b"GB82WEST12345698765432"));
        assert!(!iban_mod97(b"DE89370400440532013001"));
        assert_eq!(iban_length(*b"DE"), Some(22));
        assert_eq!(iban_length(*b"US"), None);
    }

    #[test]
    fn ssn_ranges() {
        assert!(ssn_ok(b"123", b"45", b"6789"));
        assert!(!ssn_ok(b"000", b"45", b"6789"));
        assert!(!ssn_ok(b"666", b"45", b"6789"));
        assert!(!ssn_ok(b"901", b"45", b"6789"));
        assert!(!ssn_ok(b"123", b"00", b"6789"));
        assert!(!ssn_ok(b"123", b"45", b"0000"));
    }

    #[test]
    fn base64url() {
        assert_eq!(
            base64url_decode(b"eyJhbGciOiJIUzI1NiJ9").unwrap(),
            br#"{"alg":"HS256"}"#
        );
        assert!(base64url_decode(b"ab$c").is_none());
    }
}
