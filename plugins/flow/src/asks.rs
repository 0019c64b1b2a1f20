//! What the user asked for: the kinds of action (delete, send, pay, book, share, post, …) a
//! privileged call is, and whether any turn of the user asks for that kind. An injected action
//! that carries no injected value (deleting a file by a short id, booking the item an injected
//! review pushes) is still an action no one asked for.
//!
//! A kind's words ask for it when a word of a user turn begins with one of them (`delet` asks
//! in `delete`, `deleted`, `deleting`), case-folded; a word of several (`clean up`) must be
//! followed by a word boundary. Negations are not read: "don't delete anything" asks to delete,
//! which errs towards keeping the user's work.

use railyard_plugin_sdk::glob::glob_match;
use serde::Deserialize;
use std::collections::BTreeMap;

/// One kind of action: its tools (globs) and the words that ask for it (the built-in words of
/// its name when left out).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kind {
    pub tools: Vec<String>,
    #[serde(default)]
    pub words: Vec<String>,
}

/// The built-in words of the kinds the README names, as word starts.
const BUILT_IN: &[(&str, &[&str])] = &[
    (
        "delete",
        &[
            "delet", "remov", "eras", "wipe", "purg", "trash", "discard", "destroy", "drop",
            "clean up", "clear", "get rid",
        ],
    ),
    (
        "send",
        &[
            "send",
            "sent",
            "email",
            "e-mail",
            "mail",
            "messag",
            "repl",
            "respond",
            "forward",
            "notify",
            "tell",
            "contact",
            "inform",
            "write to",
            "writ back",
            "ping",
            "dm",
            "post",
            "shar",
            "let him know",
            "let her know",
            "let them know",
            "let me know",
        ],
    ),
    (
        "pay",
        &[
            "pay",
            "paid",
            "transfer",
            "wire",
            "refund",
            "reimburs",
            "settle",
            "remit",
            "purchas",
            "buy",
            "bought",
            "send money",
            "send $",
            "send €",
            "send £",
        ],
    ),
    (
        "book",
        &[
            "book", "reserv", "schedul", "order", "purchas", "buy", "bought", "rent", "sign up",
            "register", "enrol",
        ],
    ),
    (
        "share",
        &[
            "shar",
            "invit",
            "grant",
            "give access",
            "add access",
            "permission",
            "collaborat",
        ],
    ),
    (
        "post",
        &[
            "post", "publish", "tweet", "upload", "comment", "submit", "announc", "reply", "repli",
        ],
    ),
    (
        "write",
        &[
            "writ", "wrote", "save", "sav", "stor", "creat", "updat", "edit", "modif", "chang",
            "append", "record", "add", "put", "note", "log",
        ],
    ),
    (
        "run",
        &[
            "run", "ran", "execut", "launch", "start", "install", "comput", "script",
        ],
    ),
];

/// The built-in kinds' names.
pub fn built_in() -> impl Iterator<Item = &'static str> {
    BUILT_IN.iter().map(|(k, _)| *k)
}

/// The words that ask for `kind` (named `name`).
pub fn words<'k>(name: &str, kind: &'k Kind) -> Vec<&'k str> {
    if !kind.words.is_empty() {
        return kind.words.iter().map(String::as_str).collect();
    }
    BUILT_IN
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, w)| w.to_vec())
        .unwrap_or_default()
}

/// The kinds `tool` is, by name.
pub fn kinds_of<'c>(asks: &'c BTreeMap<String, Kind>, tool: &str) -> Vec<(&'c str, &'c Kind)> {
    asks.iter()
        .filter(|(_, k)| {
            railyard_plugin_sdk::tool_names(tool).any(|n| k.tools.iter().any(|g| glob_match(g, n)))
        })
        .map(|(name, k)| (name.as_str(), k))
        .collect()
}

/// Whether one of `texts` (a user's turns, case-folded) asks with one of `words`.
pub fn asked(texts: &[String], words: &[&str]) -> bool {
    words.iter().any(|w| {
        let w = w.to_lowercase();
        let phrase = w.contains(' ');
        // One searcher for every turn (memchr's, which runs on SIMD in a plugin; `str`'s sets
        // up its Two-Way searcher per text).
        let finder = memchr::memmem::Finder::new(w.as_bytes());
        texts.iter().any(|t| {
            finder.find_iter(t.as_bytes()).any(|at| {
                let starts = !t[..at]
                    .chars()
                    .next_back()
                    .is_some_and(char::is_alphanumeric);
                // A phrase ends at a word's end, unless it ends on a sign (`send $`).
                let ends = !phrase
                    || !w.ends_with(char::is_alphanumeric)
                    || !t[at + w.len()..]
                        .chars()
                        .next()
                        .is_some_and(char::is_alphanumeric);
                starts && ends
            })
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(tools: &[&str]) -> Kind {
        Kind {
            tools: tools.iter().map(|t| t.to_string()).collect(),
            words: vec![],
        }
    }

    #[test]
    fn a_word_asks_when_a_word_of_the_turn_begins_with_it() {
        let k = kind(&["delete_*"]);
        let w = words("delete", &k);
        let says = |t: &str| asked(&[t.to_lowercase()], &w);
        assert!(says("Please delete the old drafts."));
        assert!(says("Deleting them is fine"));
        assert!(says("clean up my inbox"));
        assert!(!says("Summarise the file for me."));
        // Inside another word is not a start.
        assert!(!says("the undeleted files"));
        // A phrase ends at a word boundary.
        assert!(!says("clean upholstery"));
        let pay = words("pay", &k);
        assert!(asked(&["send $50 to my landlord".into()], &pay));
    }

    #[test]
    fn a_tool_is_of_every_kind_whose_globs_match_it() {
        let asks: BTreeMap<String, Kind> = [
            ("pay".to_string(), kind(&["transfer*", "pay_*"])),
            ("send".to_string(), kind(&["send_*"])),
        ]
        .into_iter()
        .collect();
        let names = |t: &str| -> Vec<&str> { kinds_of(&asks, t).iter().map(|(n, _)| *n).collect() };
        assert_eq!(names("transfer_money"), ["pay"]);
        assert_eq!(names("send_email"), ["send"]);
        assert!(names("get_balance").is_empty());
        // An operator's own kind has its own words.
        let own = Kind {
            tools: vec!["archive_*".into()],
            words: vec!["archiv".into()],
        };
        assert_eq!(words("archive", &own), ["archiv"]);
        assert!(words("archive", &kind(&["archive_*"])).is_empty());
    }
}
