//! Detector unit tests: one value per format, and the look-alikes that must not match.

use super::scan;

fn kinds(text: &str) -> Vec<(&'static str, &str)> {
    scan(text, None)
        .into_iter()
        .map(|f| (f.kind.name(), &text[f.start..f.end]))
        .collect()
}

fn one(text: &str, kind: &str, value: &str) {
    assert_eq!(kinds(text), vec![(kind, value)], "in {text:?}");
}

fn none(text: &str) {
    assert_eq!(kinds(text), vec![], "in {text:?}");
}

#[test]
fn emails() {
    one(
        "mail john.doe+x@example.co.uk.",
        "EMAIL",
        "john.doe+x@example.co.uk",
    );
    one("<a_b@sub.example.org>", "EMAIL", "a_b@sub.example.org");
    none("icon@2x.png");
    none("@mention and user@localhost");
    none("git@github.com:org/repo.git");
}

#[test]
fn phones() {
    one("call +1 (555) 234-5678 now", "PHONE", "+1 (555) 234-5678");
    one("(555) 234-5678", "PHONE", "(555) 234-5678");
    one("at 555.234.5678.", "PHONE", "555.234.5678");
    one("+44 20 7946 0958", "PHONE", "+44 20 7946 0958");
    one("ring 020 7946 0958", "PHONE", "020 7946 0958");
    one("07700 900123", "PHONE", "07700 900123");
    one("+49 (0)30 1234567", "PHONE", "+49 (0)30 1234567");
    one("089/1234567", "PHONE", "089/1234567");
    one("0151 23456789", "PHONE", "0151 23456789");
    one("06.12.34.56.78", "PHONE", "06.12.34.56.78");
    one("01 23 45 67 89", "PHONE", "01 23 45 67 89");
    one("+33 6 12 34 56 78", "PHONE", "+33 6 12 34 56 78");
    one("+14155552671", "PHONE", "+14155552671");
    one("tel: 5552345678", "PHONE", "5552345678");
    one("1-800-555-0199", "PHONE", "1-800-555-0199");
    none("5552345678");
    none("order #555-234-5678");
    none("555-234-5678-12");
    none("array_impls! { 01 02 03 04 05 06 }");
}

#[test]
fn cards() {
    one(
        "card 4111 1111 1111 1111 exp",
        "CREDIT_CARD",
        "4111 1111 1111 1111",
    );
    one("4111-1111-1111-1111", "CREDIT_CARD", "4111-1111-1111-1111");
    one("3782 822463 10005", "CREDIT_CARD", "3782 822463 10005");
    one("5555555555554444", "CREDIT_CARD", "5555555555554444");
    none("4111 1111 1111 1112");
    none("1700000000000");
    none("order #4111111111111111");
    none("4111111111111111111 (19 digits, unspaced)");
    none("[5964946855123292381, 3622548288590237903, 13525995675852669549]");
}

#[test]
fn ssns() {
    one("SSN 123-45-6789", "US_SSN", "123-45-6789");
    one("ssn: 123456789", "US_SSN", "123456789");
    none("123456789");
    none("666-45-6789 000-12-3456 923-45-6789 123-00-6789 123-45-0000");
    // Under a US tax id's label, nine digits are an SSN too (an individual's TIN is their SSN).
    one("TIN: 123456789", "US_SSN", "123456789");
    one("Tax ID 123456789", "US_SSN", "123456789");
    one(r#"{"tax_id": "123456789"}"#, "US_SSN", "123456789");
    one(r#"{"taxpayerId": "123456789"}"#, "US_SSN", "123456789");
    none("ID 123456789");
    none(r#"{"taxonomy_id": "123456789"}"#);
}

#[test]
fn ibans() {
    one(
        "IBAN DE89 3704 0044 0532 0130 00.",
        "IBAN",
        "DE89 3704 0044 0532 0130 00",
    );
    one("GB82WEST12345698765432", "IBAN", "GB82WEST12345698765432");
    none("DE89 3704 0044 0532 0130 01");
    none("DE8937040044053201300");
}

#[test]
fn ips() {
    one("from 192.168.1.20:8080", "IP_ADDRESS", "192.168.1.20");
    one(
        "host [2001:db8::8a2e:370:7334]:443",
        "IP_ADDRESS",
        "2001:db8::8a2e:370:7334",
    );
    one(
        "fe80::1ff:fe23:4567:890a",
        "IP_ADDRESS",
        "fe80::1ff:fe23:4567:890a",
    );
    one("::ffff:10.0.0.1", "IP_ADDRESS", "::ffff:10.0.0.1");
    none("version 1.2.3.4");
    none("v1.2.3.4 and v1.2.3");
    none("Chrome/120.0.0.0 Safari");
    none("foo==1.2.3.4");
    one("ssh root@10.1.2.3", "IP_ADDRESS", "10.1.2.3");
    none("1.2.3.4.5 and 300.1.1.1");
    none("at 10:30:00 and dead::beef std::vector 00:1a:2b:3c:4d:5e");
    none("match x { E1::A => B2::new(1) }");
}

#[test]
fn secrets() {
    one(
        "key AKIAIOSFODNN7EXAMPLE",
        "AWS_KEY",
        "AKIAIOSFODNN7EXAMPLE",
    );
    let gh = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    one(gh, "GITHUB_TOKEN", gh);
    one(
        "xoxb-123456789012-1234567890123-abcdefghijklmn",
        "SLACK_TOKEN",
        "xoxb-123456789012-1234567890123-abcdefghijklmn",
    );
    let jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    one(&format!("Bearer {jwt}"), "JWT", jwt);
    let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----";
    one(&format!("key:\n{pem}\nthanks"), "PRIVATE_KEY", pem);
    one(
        "postgres://admin:s3cret@db.internal/app",
        "URL_CREDENTIALS",
        "admin:s3cret",
    );
    none("https://user@example.com/ and https://example.com/@me");
    none("-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----");
    none("eyJub3QiOiJhIGp3dCJ9.eyJ4IjoxfQ.abc");
}

#[test]
fn hard_negatives() {
    none("550e8400-e29b-41d4-a716-446655440000 12345678-1234-1234-1234-123456789012");
    none("d41d8cd98f00b204e9800998ecf8427e da39a3ee5e6b4b0d3255bfef95601890afd80709");
    none("commit 4f2a9c1 at 2024-01-15T10:30:00Z (1705314600, 1705314600000)");
    none("order #123456789012, INV-2024-000123, 15.01.2024, 12/25/2024");
}

/// Inputs built to make a careless scanner quadratic must still scan in linear time.
#[test]
fn adversarial_inputs_stay_linear() {
    let patterns: &[&str] = &[
        "-----BEGIN RSA PRIVATE KEY-----\n",
        "a:",
        "1:",
        "a@",
        "x.",
        "1-",
        "1 ",
        "1.",
        "+1",
        "(1",
        "::",
        "xoxb-",
        "github_pat_",
        "ghp_",
        "eyJ-",
        "eyJ.",
        "DE89 ",
        "AKIA",
        "https://a:b",
    ];
    for p in patterns {
        let text = p.repeat((1 << 20) / p.len());
        let t = std::time::Instant::now();
        let found = scan(&text, None).len();
        let secs = t.elapsed().as_secs_f64();
        println!("{p:?}: {:.0} ms", secs * 1e3);
        // Generous for debug builds; a quadratic pass over 1 MiB takes minutes.
        assert!(secs < 5.0, "{p:?}: {secs:.2}s ({found} findings)");
    }
}

/// The word-at-a-time skip never passes over a byte that can start a value.
#[test]
fn quiet_skip_stops_at_every_trigger() {
    for c in 0..=255u8 {
        for pos in 0..8 {
            let mut b = [b'a'; 20];
            b[3 + pos] = c;
            let stop = super::skip_quiet(&b, 0);
            if super::TRIGGER[c as usize] != super::QUIET {
                assert_eq!(stop, 3 + pos, "byte {c:#x}");
            } else {
                assert_eq!(stop, 20, "byte {c:#x}");
            }
        }
    }
}

/// Code and data that real-text scans flagged (Rust crates, Python's standard library, man
/// pages): none of it is personal data.
#[test]
fn real_text_look_alikes() {
    none("        sig.generics.lt_token = Some(Token![<](sig.ident.span()));");
    none("    pub semi_token: Token![;],");
    none("            a = +4294967296  # 1 << 32");
    none("        self.assertEqual(format(1234, 'b'), '+10011010010')");
    none("     6 12 24 48 96 192 384 768 1536 3072");
    none("        \"016.016.016.016\", \"01234.000000\"");
    none("('2020-01-01T03:05:07.123457-05:00', \"12 31 04 000047 33 22 06 366\", \"01 02 03 000004\")");
    none("0000120 20 80 00 00 20 80 00 00 20 80 00 00 20 80 00 00");
    none("0061 10376 0315 0300 05AE 0062;0061 05AE 10376 0300 0315 0062;");
    none("        pub pw_passwd: *const c_char,");
    none("    *token = DEQUEUE!((*parser).tokens);");
    none("    let mut unique_token = Token(SERVER.0 + 1);");
    none("                    let token = next(&mut unique_token);");
    none("    // token = 1*tchar");
    none("        self.assertEqual(sz[::3], b\"f\") and [::1]:8080");
    none("nntp_class('dummy', user=login, password=password)");
    none("        token = self._fp.read(1)[0]");
    none("group_name:password:GID:user_list");
}

#[test]
fn vendor_keys() {
    for key in [
        "sk-proj-Xq3vT9LmR2pW8sK4nB7cY1dF6gH0jA5eZ_uQoIiMvNtr2x9wE4yU7aS1",
        "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",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "AIzaSyD3mVx8Qw2Er5Ty7Ui9Op1As3Df5Gh7Jk9",
        "glpat-Zx8Cv7Bn6Mq5Wd4Ef3Rt",
        "npm_aB3cD4eF5gH6iJ7kL8mN9oP0qR1sT2uV3wX4",
        "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",
        "SK2ee303f7785a79ca4155edf8c6094b51",
        "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",
    ] {
        one(&format!("key: {key}."), "API_KEY", key);
    }
    // Placeholders and words with the same prefixes.
    none("sk-learn, sk_live_xxxxxxxxxxxxxxxxxxxxxxxx, hf_token, npm_install, SKU123, SG.com");
}

#[test]
fn labelled_credentials() {
    one("DB_PASSWORD=Tr0ub4dor&3\n", "CREDENTIAL", "Tr0ub4dor&3");
    one(
        r#"{"api_key": "8f14e45fceea167a5a36dedd4bea2543"}"#,
        "CREDENTIAL",
        "8f14e45fceea167a5a36dedd4bea2543",
    );
    one("passwd: hunter2 please", "CREDENTIAL", "hunter2");
    one(
        "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==",
        "CREDENTIAL",
        "dXNlcjpwYXNzd29yZDEyMw==",
    );
    one(
        "AccountName=x;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==;EndpointSuffix=core.windows.net",
        "CREDENTIAL",
        "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==",
    );
    // A value another detector knows is reported as that type.
    let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl";
    one(&format!("Authorization: Bearer {jwt}"), "JWT", jwt);
    for s in [
        "password: ********",
        "password=${DB_PASSWORD}",
        "token: null",
        "api_key: <your-api-key>",
        "password = os.environ['DB_PASSWORD']",
        "token_type: bearer",
        "password: String,",
        "token: Option<String>,",
        "api_key=None",
        "secret_name: my-secret",
        "max_tokens: 1024",
    ] {
        none(s);
    }
}

#[test]
fn aws_secret_keys() {
    let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    let text =
        format!("aws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = {secret}\n");
    assert_eq!(
        kinds(&text),
        vec![("AWS_KEY", "AKIAIOSFODNN7EXAMPLE"), ("AWS_KEY", secret)]
    );
    one(
        &format!("AWS secret access key: {secret} ok"),
        "AWS_KEY",
        secret,
    );
    // Forty base64 characters alone are not a key.
    none(&format!("checksum {secret}"));
}

#[test]
fn phone_formats() {
    for p in [
        "(06938) 493739",
        "975.519.6640 x359",
        "(591)341-7776",
        "+44 (0)20 7946 0958",
        "00 44 20 7946 0958",
        "001-829-647-4488",
        "090-1234-5678",
        "(0406)-812415",
        "31 4686-1607",
        "873-449-5661 ext. 12",
        "0612345678",
        "+61.437.406.812",
    ] {
        one(&format!("Call {p} today."), "PHONE", p);
    }
    none("build 2024-01-15 at 03:05:07.123457-05:00, rows 96 192 384 768 1536");
}

#[test]
fn cards_of_every_length() {
    for c in [
        "675964982648",
        "6759 6498 2648",
        "4222222222222",
        "6250947000000000019",
        "3530 1113 3330 0000",
        "180000000000002",
    ] {
        one(&format!("card {c} ok"), "CREDIT_CARD", c);
    }
    none("let x = 4111111111111111; f(5555555555554444)");
}

#[test]
fn values_in_other_scripts_digits_small_forms_and_hidden_characters() {
    // Issue #50's look-alikes: each redacted whole, in its original bytes.
    let card = "\u{0664}\u{0661}\u{0661}\u{0661} \u{0661}\u{0661}\u{0661}\u{0661} \u{0661}\u{0661}\u{0661}\u{0661} \u{0661}\u{0661}\u{0661}\u{0661}";
    one(&format!("card {card} thanks"), "CREDIT_CARD", card);
    let mail = "jo.doe\u{FE6B}example.com";
    one(&format!("write to {mail} now"), "EMAIL", mail);
    let tagged = "jo.doe@exa\u{E0061}\u{E0062}mple.com";
    one(&format!("write to {tagged} now"), "EMAIL", tagged);
    let selected = "4111\u{FE0F}1111\u{FE0F}1111\u{FE0F}1111";
    one(&format!("card {selected}."), "CREDIT_CARD", selected);
    let bold = "\u{1D7D2}\u{1D7CF}\u{1D7CF}\u{1D7CF} \u{1D7CF}\u{1D7CF}\u{1D7CF}\u{1D7CF} \u{1D7CF}\u{1D7CF}\u{1D7CF}\u{1D7CF} \u{1D7CF}\u{1D7CF}\u{1D7CF}\u{1D7CF}";
    one(&format!("card {bold}"), "CREDIT_CARD", bold);
    // Prose in those scripts stays as it is.
    none("مرحبا بالعالم، नमस्ते दुनिया، สวัสดีชาวโลก 🙂");
}

#[test]
fn cards_with_dots_slashes_and_underscores() {
    for sep in [".", "/", "_"] {
        let card = ["4111", "1111", "1111", "1111"].join(sep);
        one(&format!("card {card} ok"), "CREDIT_CARD", &card);
        let amex = ["3782", "822463", "10005"].join(sep);
        one(&format!("amex {amex}"), "CREDIT_CARD", &amex);
    }
    // One style throughout: mixed, or Luhn-invalid, they are not cards.
    none("id 4111.1111/1111_1111");
    none("ref 4111.1111.1111.1112");
    // Version strings, dates and paths keep their shape.
    none("v1.2.3 on 2024/05/01 at /srv/4111/data and build_2024_05_01");
}

/// A value's shape with its type's words around it is taken whether or not it validates; the
/// same shape alone is left to validation (`nearby.rs`).
#[test]
fn context_led() {
    // Phones no numbering plan has, or in layouts the plans do not cover.
    one("Phone: 08-51 80 01", "PHONE", "08-51 80 01");
    one("Mobile: 2636 8195\n", "PHONE", "2636 8195");
    one("2880 5873 fax\n", "PHONE", "2880 5873");
    one("13708492408-Office,", "PHONE", "13708492408");
    one(
        "They're not answering at (15)/227-2525",
        "PHONE",
        "(15)/227-2525",
    );
    one(
        "no message on my registered (829)010-5123.",
        "PHONE",
        "(829)010-5123",
    );
    one("Fax: 1 (330) 120-3463\n", "PHONE", "1 (330) 120-3463");
    one("fax 894-101-4932x65179", "PHONE", "894-101-4932x65179");
    one(
        "phone_number: (+358) 216683618\n",
        "PHONE",
        "(+358) 216683618",
    );
    one("Телефон: 812 96 73", "PHONE", "812 96 73");
    one("{\"phone_number\": \"99067353\"}", "PHONE", "99067353");
    none("Sapiente non. 2636 8195 iure");
    none("call about order 12345678");
    none("pub const VHOST_SET_VRING_CALL: u32 = 1074310945;");
    none("let text = \"123 456 789\";");
    none("phone: 2024-01-15");
    // +7 is Russia's code, not a NANP number.
    one("+79541000678", "PHONE", "+79541000678");
    // SSNs outside the issued ranges, under an SSN's words; not bare, not under an ITIN's.
    one("Here's my SSN: 890-47-0000", "US_SSN", "890-47-0000");
    one("social security number 000123456", "US_SSN", "000123456");
    none("Id nemo unde. 071-00-0133 Occaecati");
    none("itin: 910-94-0790");
    none("--security-policy=123456789");
    // Cards of no known issuer under a card's words; Luhn still holds.
    one("card 6708177693413682", "CREDIT_CARD", "6708177693413682");
    one(
        "name,credit_card_number\nLia,6777074971404143\n",
        "CREDIT_CARD",
        "6777074971404143",
    );
    none("ref 6708177693413682");
    none("card 6708177693413683");
    // IBANs of a length their country does not register, under an account's words.
    one(
        "My IBAN is GB35FJLF8246246768229",
        "IBAN",
        "GB35FJLF8246246768229",
    );
    none("Animi nam. GB82VGLW3235017341933 Veritatis");
}

/// Values in an encoding a reader decodes at a glance: found in the decoded text, the encoded
/// bytes redacted (`decode.rs`).
#[test]
fn encoded_values() {
    one("mailto:jo%40example.com", "EMAIL", "jo%40example.com");
    one("?to=jo%40example.com&x=1", "EMAIL", "jo%40example.com");
    one("jo&#64;example&#46;com", "EMAIL", "jo&#64;example&#46;com");
    one(
        "jo&commat;example&period;com",
        "EMAIL",
        "jo&commat;example&period;com",
    );
    one(
        "card &#x34;111&#32;1111&#32;1111&#32;1111.",
        "CREDIT_CARD",
        "&#x34;111&#32;1111&#32;1111&#32;1111",
    );
    // base64 of "contact jo@example.com" and of "SSN 536-22-1234"; base64 of that base64.
    one(
        "payload Y29udGFjdCBqb0BleGFtcGxlLmNvbQ== end",
        "EMAIL",
        "Y29udGFjdCBqb0BleGFtcGxlLmNvbQ==",
    );
    one("U1NOIDUzNi0yMi0xMjM0", "US_SSN", "U1NOIDUzNi0yMi0xMjM0");
    one(
        "WTI5dWRHRmpkQ0JxYjBCbGVHRnRjR3hsTG1OdmJRPT0=",
        "EMAIL",
        "WTI5dWRHRmpkQ0JxYjBCbGVHRnRjR3hsTG1OdmJRPT0=",
    );
    // Three levels deep is past the bound.
    none("V1RJNWRXUkhSbXBrUTBKeFlqQkNiR1ZIUm5SalIzaHNURzFPZG1KUlBUMD0=");
    // base64 of text without a value, of binary, and words in its alphabet.
    none("aGVsbG8gd29ybGQsIGhvdyBhcmUgeW91Pw==");
    none("q83vEjRWeJCrze8SNFZ4kA8gJ3xQ");
    none("AbstractSingletonProxyFactoryBean");
    // A URL's password keeps its escapes for the URL's own detector.
    one(
        "postgres://jo:p%40ss%23w@db.example.com/x",
        "URL_CREDENTIALS",
        "jo:p%40ss%23w",
    );
}

#[test]
fn ibans_in_any_case() {
    one(
        "iban de89 3704 0044 0532 0130 00.",
        "IBAN",
        "de89 3704 0044 0532 0130 00",
    );
    one(
        "to gb82west12345698765432 now",
        "IBAN",
        "gb82west12345698765432",
    );
    one("De89370400440532013000", "IBAN", "De89370400440532013000");
    none("sha256 x86_64 ab12 de89370400440532013001");
}

/// Shapes a reader still reads (#65): letters of another script among Latin ones, superscript,
/// subscript and circled digits, `[at]` and `(dot)` spelled out, `\u` escapes. A word all in
/// another script keeps its letters (a Cyrillic label still labels).
#[test]
fn shapes_a_reader_still_reads() {
    // A Cyrillic `а` and `е` in the address.
    one(
        "mail j\u{0430}n\u{0435}@example.com",
        "EMAIL",
        "j\u{0430}n\u{0435}@example.com",
    );
    one(
        "card \u{2074}\u{00B9}\u{00B9}\u{00B9} \u{2081}\u{2081}\u{2081}\u{2081} \u{2460}\u{2460}\u{2460}\u{2460} 1111",
        "CREDIT_CARD",
        "\u{2074}\u{00B9}\u{00B9}\u{00B9} \u{2081}\u{2081}\u{2081}\u{2081} \u{2460}\u{2460}\u{2460}\u{2460} 1111",
    );
    one(
        "write jane.doe [at] example [dot] com today",
        "EMAIL",
        "jane.doe [at] example [dot] com",
    );
    one(
        "write jane(AT)example(DOT)com",
        "EMAIL",
        "jane(AT)example(DOT)com",
    );
    one(
        "mail jane\\u0040example.com",
        "EMAIL",
        "jane\\u0040example.com",
    );
    one("mail jane\\x40example.com", "EMAIL", "jane\\x40example.com");
    // Hex of text, either case, with or without `0x`.
    one(
        "blob 6a616e65406578616d706c652e636f6d end",
        "EMAIL",
        "6a616e65406578616d706c652e636f6d",
    );
    one(
        "blob 0x34313131313131313131313131313131 end",
        "CREDIT_CARD",
        "0x34313131313131313131313131313131",
    );
    // Base64 wrapped at a fixed width: "mail jane@example.com, card 4111 1111 1111 1111".
    let wrapped = "bWFpbCBqYW5lQGV4\nYW1wbGUuY29tLCBj\nYXJkIDQxMTEgMTEx\nMSAxMTExIDExMTE=";
    one(&format!("doc:\n{wrapped}\nend"), "EMAIL", wrapped);
    // Unpadded base64 of "card 4111 1111 1111 1111".
    one(
        "x Y2FyZCA0MTExIDExMTEgMTExMSAxMTEx y",
        "CREDIT_CARD",
        "Y2FyZCA0MTExIDExMTEgMTExMSAxMTEx",
    );
    // Quoted-printable: `=40`, and a value broken by a soft line break in quoted-printable text.
    one("write jane=40example.com", "EMAIL", "jane=40example.com");
    one(
        "Caf=C3=A9 menu, card 4111 1111 11=\n11 1111 today",
        "CREDIT_CARD",
        "4111 1111 11=\n11 1111",
    );
    // Separators spaced out, an SSN with dots.
    one(
        "card 4111 - 1111 - 1111 - 1111 ok",
        "CREDIT_CARD",
        "4111 - 1111 - 1111 - 1111",
    );
    one("ssn 536.22.1234 ok", "US_SSN", "536.22.1234");
    one("ssn 536 - 22 - 1234 ok", "US_SSN", "536 - 22 - 1234");
    // Digits written as words.
    one(
        "card four one one one one one one one one one one one one one one one thanks",
        "CREDIT_CARD",
        "four one one one one one one one one one one one one one one one",
    );
    one(
        "my SSN: five three six, two two, one two three four",
        "US_SSN",
        "five three six, two two, one two three four",
    );
    // A label further away, or after the value past small words.
    one(
        "the SSN we spoke about today: 536221234",
        "US_SSN",
        "536221234",
    );
    one("536221234 is my SSN", "US_SSN", "536221234");
    one("8908 2134 67, which is my fax", "PHONE", "8908 2134 67");
    // Not values: a bracketed word that is no spelled `@`, a Greek word, a footnote's digit.
    none("see [note] and (attached) {data}");
    none("αβγ δοκιμή");
    none("E = mc\u{00B2} at 20\u{00B0}C");
    // Not values: a hash in hex, an assignment that is no escape, base64 padding at a line's
    // end, three digit words, a number and an unrelated word after a comma.
    none("sha 5d41402abc4b2a76b9719d911017c592 ok");
    none("timeout=40s retries=2E3");
    none("one two three, four five");
    none("cc=4062905232875670&amount=10");
    none("ticket 536221234, SSN team");
}
