// A hostile text for pii-filter: what an attacker would send to make the scan slow. Shared by
// the native throughput test, the host benchmark (`cargo bench --bench chain --
// pii-throughput`) and the daemon test, which `include!` this file; it needs nothing but std.
//
// Pieces of about 64 KiB each: one digit run with no separator; digit pairs in a row; numbers
// under phone, card, SSN and IBAN words that just fail (too long, one group too many, Luhn or
// mod-97 off by one), in upper and lower case; escapes back to back (`%40`, `&#x40;`, a double
// `%2540`); `@` runs; base64 of base64 of base64 of text with values in it; base64 of random
// bytes; one word of letters; a code with digits that never ends.

/// A deterministic hostile text of at least `size` bytes.
pub fn adversarial(size: usize) -> String {
    const SHARE: usize = 64 * 1024;
    fn fill(out: &mut String, piece: &str, bytes: usize) {
        let end = out.len() + bytes;
        while out.len() < end {
            out.push_str(piece);
        }
        out.push('\n');
    }
    fn base64(data: &[u8]) -> String {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
        for c in data.chunks(3) {
            let n = (u32::from(c[0]) << 16)
                | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
                | u32::from(*c.get(2).unwrap_or(&0));
            for k in 0..4 {
                if k <= c.len() {
                    s.push(A[(n >> (18 - 6 * k) & 63) as usize] as char);
                } else {
                    s.push('=');
                }
            }
        }
        s
    }
    let mut out = String::with_capacity(size + SHARE);
    let pieces: &[&str] = &[
        "0123456789",
        "12 34 56 78 90 ",
        "Phone: 1234567890123456 call 1-2-3-4-5-6-7-8-9 tel (555) 12 fax 555-0",
        "card 4111 1111 1111 1112 credit card 6708177693413683 ",
        "SSN: 123-45-678 social security 12-345-6789 tax 1234567890 ",
        "IBAN GB82 WEST 1234 5698 7654 33 account GB82WEST1234569876543 ",
        "iban de89 3704 0044 0532 0130 01 gb82west12345698765433 ",
        "%40",
        "&#x40;&#64;&commat;%2540",
        "a@",
        "@",
        "GB",
    ];
    for piece in pieces {
        fill(&mut out, piece, SHARE);
    }
    // base64 three levels deep over text with values in it.
    let mut inner = String::new();
    fill(&mut inner, "mail jo@example.com, SSN 536-22-1234, call +44 20 7946 0958. ", 36 * 1024);
    let deep = base64(base64(base64(inner.as_bytes()).as_bytes()).as_bytes());
    out.push_str(&deep);
    out.push('\n');
    // base64 of random bytes (a xorshift generator), and one word of letters.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let random: Vec<u8> = (0..96 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    out.push_str(&base64(&random));
    out.push('\n');
    fill(&mut out, "aBcD", SHARE);
    let rest = size.saturating_sub(out.len());
    fill(&mut out, "x9Y8z7", rest);
    out
}
