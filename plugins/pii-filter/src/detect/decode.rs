//! Encodings a value can reach the backend in: percent-encoding (`john%40example.com`), HTML
//! character references (`&#64;`, `&#x40;`, `&commat;`) and base64. A reader (or the model)
//! decodes them without effort, so the detectors look at the decoded text and the redaction
//! covers the encoded bytes.
//!
//! Escapes are decoded one level, as characters of the normalised view (`normalise.rs`), so
//! every detector sees them and a match maps back to the escapes it was made of. Base64 is
//! decoded per token (a run of its alphabet of at least [`MIN_BASE64`] characters): when the
//! decoded bytes are text holding a value, the whole token is the finding, and the redaction
//! gives it back encoded with the values redacted inside ([`reencoded`]). Both are bounded: an
//! escape is at most ten bytes, a token at most [`MAX_BASE64`] bytes is decoded, each token
//! once per scan, and base64 inside base64 is followed [`MAX_DEPTH`] levels deep.

/// Shortest base64 token decoded: 12 bytes of text, less than any value we detect in it.
pub const MIN_BASE64: usize = 16;
/// Longest base64 token decoded (a larger one is passed over undecoded).
pub const MAX_BASE64: usize = 256 * 1024;
/// Base64 levels followed (a token inside a decoded token, and no further).
pub const MAX_DEPTH: u8 = 2;

/// The character an escape at `i` stands for, and the escape's length: `%40`, `&#64;`,
/// `&#x40;`, `&commat;`. Only escapes of characters that fold to one ASCII byte count (any
/// ASCII character but controls, and what the normalised view folds to ASCII: `&#65312;` is a
/// full-width `@`).
pub fn escape(b: &[u8], i: usize, url: &mut Authority) -> Option<(usize, char)> {
    match b[i] {
        // In a URL's user and password, escapes are the URL's own syntax (`p%40ss` is a
        // password with an `@`), and the URL's detector reads them as they are.
        b'%' if url.at(b, i) => None,
        b'%' => {
            let hi = hex(*b.get(i + 1)?)?;
            let lo = hex(*b.get(i + 2)?)?;
            let c = char::from(hi << 4 | lo);
            // Not `%20`: in a form body (`password=secure%20password`) a decoded space would
            // end the value a credential's label names.
            ('!'..='~').contains(&c).then_some((3, c))
        }
        b'&' => {
            let end = i + 1 + b.get(i + 1..)?.iter().take(10).position(|&c| c == b';')?;
            let body = &b[i + 1..end];
            let c = match body {
                [b'#', b'x' | b'X', hexits @ ..] if !hexits.is_empty() => number(hexits, 16)?,
                [b'#', digits @ ..] if !digits.is_empty() => number(digits, 10)?,
                name => named(name)?,
            };
            (c >= ' ' && c != '\u{7f}').then_some((end + 1 - i, c))
        }
        _ => None,
    }
}

/// Whether a position is between a URL's `://` and the end of its host (the next `/`), looking
/// back over the token at most 512 bytes. The last answer is kept: a run of escapes with no
/// delimiter between them (`%40%40...`) shares one, so a long run costs one look back.
#[derive(Default)]
pub struct Authority {
    last: Option<(usize, bool)>,
}

impl Authority {
    fn at(&mut self, b: &[u8], i: usize) -> bool {
        if let Some((p, inside)) = self.last {
            if p < i && !b[p..i].iter().any(|&c| c == b'/' || ends_token(c)) {
                self.last = Some((i, inside));
                return inside;
            }
        }
        let lo = i.saturating_sub(512);
        let mut inside = false;
        for p in (lo..i).rev() {
            match b[p] {
                b'/' => {
                    inside = p >= 2 && b[p - 1] == b'/' && b[p - 2] == b':';
                    break;
                }
                c if ends_token(c) => break,
                _ => {}
            }
        }
        self.last = Some((i, inside));
        inside
    }
}

fn ends_token(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'\t' | b'\n' | b'\r' | b'"' | b'\'' | b'<' | b'>' | b'(' | b'`'
    )
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

fn number(digits: &[u8], radix: u32) -> Option<char> {
    let mut v: u32 = 0;
    for &d in digits {
        v = v.checked_mul(radix)? + (d as char).to_digit(radix)?;
    }
    char::from_u32(v)
}

/// The named references of the characters values are written with (HTML's names).
fn named(name: &[u8]) -> Option<char> {
    Some(match name {
        b"commat" => '@',
        b"period" => '.',
        b"plus" => '+',
        b"hyphen" | b"dash" => '-',
        b"lpar" => '(',
        b"rpar" => ')',
        b"num" => '#',
        b"colon" => ':',
        b"sol" => '/',
        b"lowbar" => '_',
        b"equals" => '=',
        b"nbsp" => ' ',
        b"amp" => '&',
        _ => return None,
    })
}

/// A byte of the base64 alphabets (standard and URL-safe).
#[inline]
pub fn is_base64(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'-' | b'_')
}

/// The text a base64 token decodes to, when it is text: valid UTF-8 with almost no control
/// characters. Binary (keys, hashes, images) and identifiers that happen to be in the alphabet
/// decode to bytes that are not.
pub fn base64_text(token: &[u8]) -> Option<String> {
    // Mixed case or digits: a long lowercase or uppercase word is not base64 of text.
    let upper = token.iter().any(u8::is_ascii_uppercase);
    let lower = token.iter().any(u8::is_ascii_lowercase);
    if !(upper && lower) {
        return None;
    }
    // MIME and PEM wrap base64 at a fixed width: the lines are one token.
    let bytes = if token.contains(&b'\n') {
        let joined: Vec<u8> = token
            .iter()
            .copied()
            .filter(|c| !matches!(c, b'\n' | b'\r'))
            .collect();
        crate::validate::base64url_decode(&joined)?
    } else {
        crate::validate::base64url_decode(token)?
    };
    as_text(bytes)
}

/// The text a run of hex digits (`6a616e65406578...`, either case) decodes to, when it is text:
/// a hash or a key decodes to bytes that are not.
pub fn hex_text(token: &[u8]) -> Option<String> {
    if token.len() < MIN_HEX
        || !token.len().is_multiple_of(2)
        || !token.iter().all(u8::is_ascii_hexdigit)
    {
        return None;
    }
    let bytes = token
        .chunks(2)
        .map(|pair| hex(pair[0]).zip(hex(pair[1])).map(|(h, l)| h << 4 | l))
        .collect::<Option<Vec<u8>>>()?;
    as_text(bytes)
}

/// Shortest run of hex digits decoded: eight bytes of text.
pub const MIN_HEX: usize = 16;

/// Decoded bytes as text: valid UTF-8 with almost no control characters.
fn as_text(bytes: Vec<u8>) -> Option<String> {
    let text = String::from_utf8(bytes).ok()?;
    let controls = text
        .bytes()
        .filter(|&c| (c < 0x20 && !matches!(c, b'\n' | b'\r' | b'\t')) || c == 0x7f)
        .count();
    (text.len() >= 6 && controls * 50 <= text.len()).then_some(text)
}

/// `token` (a base64 token, padding included) with its text redacted by `redact`, encoded as it
/// was (its alphabet, its padding); `None` when it is not base64 of text or `redact` changes
/// nothing. A document sent as base64 keeps everything but its values.
pub fn reencoded<E>(
    token: &str,
    redact: impl FnOnce(&str) -> Result<Option<String>, E>,
) -> Result<Option<String>, E> {
    let body = token.trim_end_matches('=');
    let Some(text) = base64_text(body.as_bytes()) else {
        return Ok(None);
    };
    let Some(redacted) = redact(&text)? else {
        return Ok(None);
    };
    let url_safe = body.bytes().any(|c| matches!(c, b'-' | b'_'));
    let encoded = encode(redacted.as_bytes(), url_safe, body.len() < token.len());
    // Wrapped lines are wrapped again at their width, with their line ending.
    let Some(width) = body.find(['\r', '\n']) else {
        return Ok(Some(encoded));
    };
    let eol = if body[width..].starts_with("\r\n") {
        "\r\n"
    } else {
        &body[width..width + 1]
    };
    let lines: Vec<&str> = encoded
        .as_bytes()
        .chunks(width.max(4))
        .map(|line| std::str::from_utf8(line).expect("base64 is ASCII"))
        .collect();
    Ok(Some(lines.join(eol)))
}

/// Base64 of `data`, in the URL-safe alphabet or the standard one, padded or not.
fn encode(data: &[u8], url_safe: bool, pad: bool) -> String {
    let alphabet: &[u8; 64] = if url_safe {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    } else {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    };
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (k, &c)| n | u32::from(c) << (16 - 8 * k));
        for k in 0..=chunk.len() {
            out.push(alphabet[(n >> (18 - 6 * k) & 63) as usize] as char);
        }
        if pad {
            out.extend(std::iter::repeat_n('=', 3 - chunk.len()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Option<(usize, char)> {
        escape(s.as_bytes(), 0, &mut Authority::default())
    }

    #[test]
    fn escapes() {
        assert_eq!(at("%40x"), Some((3, '@')));
        assert_eq!(at("%2e"), Some((3, '.')));
        assert_eq!(at("&#64;"), Some((5, '@')));
        assert_eq!(at("&#x40;"), Some((6, '@')));
        assert_eq!(at("&#X34;"), Some((6, '4')));
        assert_eq!(at("&commat;"), Some((8, '@')));
        assert_eq!(at("&#65312;"), Some((8, '＠')));
        // Not escapes, or not of a character a value is written with.
        assert_eq!(at("%zz"), None);
        assert_eq!(at("%0a"), None);
        assert_eq!(at("%20"), None);
        assert_eq!(at("%"), None);
        assert_eq!(at("& co"), None);
        assert_eq!(at("&#;"), None);
        assert_eq!(at("&#99999999999;"), None);
        assert_eq!(at("&unknown;"), None);
        assert_eq!(at("&#0;"), None);
        // A URL's user and password keep their escapes; its path and query do not.
        let url = b"https://jo:p%40ss@example.com/?to=jo%40example.com";
        let mut memo = Authority::default();
        assert_eq!(escape(url, 12, &mut memo), None);
        assert_eq!(escape(url, 36, &mut memo), Some((3, '@')));
    }

    #[test]
    fn reencoded_keeps_the_alphabet_and_padding() {
        let upper = |t: &str| Ok::<_, ()>(Some(t.to_uppercase()));
        // "hello world" -> "HELLO WORLD", padded as it came.
        assert_eq!(
            reencoded("aGVsbG8gd29ybGQ=", upper).unwrap().as_deref(),
            Some("SEVMTE8gV09STEQ=")
        );
        assert_eq!(
            reencoded("aGVsbG8gd29ybGQ", upper).unwrap().as_deref(),
            Some("SEVMTE8gV09STEQ")
        );
        // Nothing changed, or not text: no replacement.
        let same = |_: &str| Ok::<_, ()>(None);
        assert_eq!(reencoded("aGVsbG8gd29ybGQ=", same).unwrap(), None);
        assert_eq!(reencoded("q83vEjRWeJCrze8SNFZ4kA", upper).unwrap(), None);
        assert_eq!(encode(b"\xfb\xff", true, false), "-_8");
        assert_eq!(encode(b"\xfb\xff", false, true), "+/8=");
    }

    #[test]
    fn base64_of_text_only() {
        // "john@example.com, +44 20 7946 0958"
        let t = b"am9obkBleGFtcGxlLmNvbSwgKzQ0IDIwIDc5NDYgMDk1OA==";
        let end = t.iter().position(|&c| c == b'=').unwrap();
        assert_eq!(
            base64_text(&t[..end]).as_deref(),
            Some("john@example.com, +44 20 7946 0958")
        );
        // A hash, an identifier, random bytes.
        assert_eq!(base64_text(b"5d41402abc4b2a76b9719d911017c592"), None);
        assert_eq!(base64_text(b"AbstractSingletonProxyFactoryBean"), None);
        assert_eq!(base64_text(b"q83vEjRWeJCrze8SNFZ4kA"), None);
    }

    #[test]
    fn hex_of_text_only() {
        assert_eq!(
            hex_text(b"6a616e65406578616d706c652e636f6d").as_deref(),
            Some("jane@example.com")
        );
        assert_eq!(
            hex_text(b"6A616E65406578616D706C652E636F6D").as_deref(),
            Some("jane@example.com")
        );
        // A card's digits in hex are all digits.
        assert_eq!(
            hex_text(b"34313131313131313131313131313131").as_deref(),
            Some("4111111111111111")
        );
        // A hash, an odd length, too short.
        assert_eq!(hex_text(b"5d41402abc4b2a76b9719d911017c592"), None);
        assert_eq!(hex_text(b"6a616e6540657861"), Some("jane@exa".into()));
        assert_eq!(hex_text(b"6a616e654065786"), None);
        assert_eq!(hex_text(b"6a616e65"), None);
    }

    #[test]
    fn wrapped_base64_is_one_token_and_wrapped_again() {
        // base64 of "mail jane@example.com, card 4111 1111 1111 1111", wrapped at 16.
        let token = "bWFpbCBqYW5lQGV4\nYW1wbGUuY29tLCBj\nYXJkIDQxMTEgMTEx\nMSAxMTExIDExMTE=";
        assert_eq!(
            base64_text(token.trim_end_matches('=').as_bytes()).as_deref(),
            Some("mail jane@example.com, card 4111 1111 1111 1111")
        );
        let upper = |t: &str| Ok::<_, ()>(Some(t.to_uppercase()));
        let again = reencoded(token, upper).unwrap().unwrap();
        assert!(again.split('\n').all(|l| l.len() <= 16), "{again}");
        assert_eq!(
            base64_text(again.trim_end_matches('=').as_bytes()).as_deref(),
            Some("MAIL JANE@EXAMPLE.COM, CARD 4111 1111 1111 1111")
        );
    }
}
