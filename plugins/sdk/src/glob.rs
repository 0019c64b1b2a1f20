//! Name patterns for plugin configs: `*` matches any run of characters, nothing else is
//! special, case-insensitive (model names and tool names are matched this way).

/// Whether `text` matches `pattern` as a whole, `*` matching any run of characters (also none),
/// case-insensitively. No other character is special.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    // ASCII (nearly every model and tool name) is compared byte by byte, nothing copied.
    if pattern.is_ascii() && text.is_ascii() {
        return matches(
            pattern.as_bytes(),
            text.as_bytes(),
            &b'*',
            |a: &u8, b: &u8| a.eq_ignore_ascii_case(b),
        );
    }
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let t: Vec<char> = text.to_lowercase().chars().collect();
    matches(&p, &t, &'*', |a: &char, b: &char| a == b)
}

/// Whether `t` matches `p` as a whole, `star` matching any run of items (also none).
fn matches<T: PartialEq>(p: &[T], t: &[T], star: &T, eq: impl Fn(&T, &T) -> bool) -> bool {
    let (mut pi, mut ti) = (0, 0);
    // The last `*` seen, and the text position it was tried at.
    let mut last_star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == *star {
            last_star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && eq(&p[pi], &t[ti]) {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = last_star {
            // Let the `*` take one more item and try again.
            pi = sp + 1;
            ti = st + 1;
            last_star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| c == star)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("llama-3.1*", "llama-3.1-8b-instruct"));
        assert!(glob_match("llama-3.1*", "LLaMA-3.1"));
        assert!(glob_match("*llama-3.1*", "meta-llama/Llama-3.1-70B"));
        assert!(glob_match("a*b*c", "abbbc"));
        assert!(glob_match("*", ""));
        assert!(glob_match("exact", "EXACT"));
        assert!(!glob_match("llama-3.1*", "llama-3.2-1b"));
        assert!(!glob_match("llama-3.1*", "meta-llama/llama-3.1"));
        assert!(!glob_match("a*b", "abc"));
        assert!(!glob_match("exact", "exactly"));
        assert!(!glob_match("llama-3.1", "llama-3.1x"));
        // `?` and `[` are not special.
        assert!(glob_match("a?[b]", "A?[B]"));
        assert!(!glob_match("a?", "ab"));
        // Beyond ASCII, matched on the lowercase text.
        assert!(glob_match("ÉTÉ-*", "été-2024"));
        assert!(!glob_match("été-*", "ete-2024"));
    }
}
