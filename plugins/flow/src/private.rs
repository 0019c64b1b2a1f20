//! Confidentiality, the other direction of flow: a value read from a tool labelled `private`
//! (a customer record, a secret store, a private repository) may not leave through a tool
//! labelled `public` (a web request, a message, a post) to a destination the user did not name.
//! Integrity asks where a call's values came from; this asks where a private value is going.
//!
//! A private value is an identifier (an email, a number, a host) or a short text found whole in
//! a private result and not in the user's turns: what the user gave is theirs to send. A
//! destination is an argument that is an email, URL or host as a whole (`to`, `url`), or one
//! inside a longer text that is not itself private data (a customer's address in a message's
//! body is what is sent, not where). It is fine when the user named it or it is one of the
//! tenant's `internal` hosts, and not otherwise: the customer's own address, read from the
//! record, is the ambiguous case, for a person to approve. A call whose arguments name no
//! destination (a public post) is refused with nothing to tell where it goes: set
//! `actions = { private = "approve" }` to ask a person instead.

use crate::policy::{any_glob, argument, kind_name, leaves, whole, Sources};
use crate::values::{Corpus, Kind, Token};
use railyard_plugin_sdk::reason::quote;
use serde_json::Value;

/// Short values compared whole, as the value rule does.
const MAX_SHORT: usize = 64;

/// Why a call to a public sink with `args` would carry a private value where the user did not
/// say, or `None`.
pub(crate) fn leaks(sources: &Sources, args: &Value) -> Option<String> {
    let config = sources.config;
    let scan = config.scan();
    let private_in = |holds: &dyn Fn(&Corpus) -> bool| {
        sources
            .private
            .iter()
            .find(|(_, _, c)| holds(c))
            .map(|(at, tool, _)| (*at, *tool))
    };
    let mut carried: Option<(String, (usize, &str))> = None;
    let mut destinations: Vec<Token> = Vec::new();
    for leaf in leaves(args) {
        let text = leaf.text.as_ref();
        let mut found = Vec::new();
        scan.tokens(text, &mut found);
        // An argument that is an address as a whole says where the call goes (`to`, `url`),
        // even when the address is in the record (the customer's own is ambiguous); a private
        // one is carried data too.
        if let Some(t) = whole(text, &found).filter(|t| t.kind != Kind::Number) {
            destinations.push(t);
        }
        for t in found {
            let private = private_in(&|c| c.mentions(&t));
            let users = sources.user.vouches(&t);
            if let (Some(at), false, None) = (private, users, &carried) {
                if t.kind != Kind::Url {
                    let what = format!("{} holds {}", argument(leaf.arg), kind_name(t.kind));
                    carried = Some((what, at));
                }
            }
            if private.is_none() && matches!(t.kind, Kind::Email | Kind::Url | Kind::Host) {
                destinations.push(t);
            }
        }
        let short = text.trim();
        let length = short.chars().count();
        if carried.is_none()
            && !leaf.number
            && (config.min_length..=MAX_SHORT).contains(&length)
            && !sources.user.says(short)
        {
            if let Some(at) = private_in(&|c| c.says(short)) {
                carried = Some((format!("{} is text", argument(leaf.arg)), at));
            }
        }
    }
    let (what, (at, tool)) = carried?;
    let from = format!("from private tool {} (message {at})", quote(tool));
    let host_of = |t: &Token| -> String {
        match t.kind {
            Kind::Email => t.norm.rsplit('@').next().unwrap_or_default().to_string(),
            Kind::Url => t.norm.split('/').next().unwrap_or_default().to_string(),
            _ => t.norm.clone(),
        }
    };
    let internal = |t: &Token| {
        let host = host_of(t);
        any_glob(&config.internal, &host)
    };
    if destinations.is_empty() {
        return Some(format!(
            "{what} {from}, and it names no destination the user gave (a public sink)"
        ));
    }
    let outside = destinations
        .iter()
        .find(|t| !internal(t) && !sources.user.vouches(t))?;
    Some(format!(
        "{what} {from}, bound for {} the user did not name, outside the tenant's hosts",
        kind_name(outside.kind)
    ))
}
