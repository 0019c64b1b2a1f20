//! The vault capability (contract 0.3's `vault`): reversible redaction. A plugin entry with
//! `vault = true` hides a value behind a placeholder the host makes (`conceal`) and, later in the
//! same request, gets it back (`reveal`) to write it where the client executes it.
//!
//! What was hidden is kept in the request's [`Ledger`] and nowhere else: it goes when the request
//! is answered, so a placeholder from another request (another conversation, another tenant) or
//! one the model made up reveals nothing, on any replica. A placeholder is a keyed hash of the
//! tenant, kind and value (the daemon's vault key), so the same value reads the same on every
//! turn of a conversation (each turn resends it) without the value being kept between turns;
//! nothing about the value can be learnt from it without the key. Vault calls never wait: a
//! plugin granted only the vault stays on the synchronous path.

pub mod thread;

use super::{Call, HasCaps, Project, View};
use crate::contract::{vault as v, vault_async as va};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use wasmtime::component::Linker;

const NOT_GRANTED: &str = "this plugin is not granted the vault: its entry needs `vault = true`";
const BAD_KIND: &str = "a kind is 1 to 24 capital letters, digits or `_` (EMAIL, IBAN_CODE)";

/// Most values one request's vault holds.
pub const MAX_VALUES: usize = 4096;
/// Most bytes of values one request's vault holds.
pub const MAX_BYTES: usize = 1 << 20;
/// Letters and digits after the kind in a placeholder.
const ID_LEN: usize = 8;
/// A placeholder's id letters: base 32 without look-alikes, upper case (read as one word by
/// tokenizers and models).
const ALPHABET: &[u8; 32] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";

/// The vault's key, made from the provenance key that signs (`keys`' first): its own, so that a
/// placeholder says nothing of the signing key.
pub fn key_of(keys: &[crate::config::SigningKey]) -> Arc<[u8; 32]> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(
        keys.first()
            .map(|k| k.secret.as_slice())
            .unwrap_or_default(),
    )
    .expect("any key length");
    mac.update(b"railyard vault placeholders");
    Arc::new(mac.finalize().into_bytes().into())
}

/// The vault a plugin entry with `vault = true` reaches.
#[derive(Clone)]
pub struct Grant {
    /// The entry's name: it reveals only what it concealed.
    entry: Arc<str>,
    /// HMAC-SHA256 under the daemon's vault key, keyed once: each placeholder starts from a
    /// copy (the key's two blocks are not hashed again per value).
    mac: Hmac<Sha256>,
}

impl Grant {
    /// The vault for entry `entry`, its placeholders keyed by `key`.
    pub fn new(entry: &str, key: Arc<[u8; 32]>) -> Grant {
        Grant {
            entry: entry.into(),
            mac: <Hmac<Sha256> as Mac>::new_from_slice(&key[..]).expect("any key length"),
        }
    }

    /// The placeholder of `value` of `kind` for `tenant`.
    fn placeholder(&self, tenant: &str, kind: &str, value: &str) -> String {
        let id = self.id(tenant, kind, value);
        format!("[{kind}_{}]", std::str::from_utf8(&id).expect("ASCII"))
    }

    /// Whether `placeholder` is the placeholder of `value` of `kind` for `tenant`.
    fn gives(&self, tenant: &str, kind: &str, value: &str, placeholder: &str) -> bool {
        let Some(id) = placeholder
            .strip_prefix('[')
            .and_then(|p| p.strip_prefix(kind))
            .and_then(|p| p.strip_prefix('_'))
            .and_then(|p| p.strip_suffix(']'))
        else {
            return false;
        };
        id.as_bytes() == self.id(tenant, kind, value)
    }

    /// A placeholder's id: HMAC-SHA256 over the tenant, kind and value, each length-prefixed,
    /// its first bytes written in [`ALPHABET`].
    fn id(&self, tenant: &str, kind: &str, value: &str) -> [u8; ID_LEN] {
        let mut mac = self.mac.clone();
        for part in [tenant, kind, value] {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part.as_bytes());
        }
        let mac = mac.finalize().into_bytes();
        std::array::from_fn(|i| ALPHABET[(mac[i] & 31) as usize])
    }
}

/// `text` with each vault placeholder in it (`[EMAIL_7KQ2M9XA]`) written as `f` makes it from
/// its kind and the placeholder.
pub fn rewrite(text: &str, f: &mut impl FnMut(&str, &str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('[') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let found = rest[1..].find(']').and_then(|end| {
            let (kind, id) = rest[1..1 + end].rsplit_once('_')?;
            let ok =
                valid_kind(kind) && id.len() == ID_LEN && id.bytes().all(|b| ALPHABET.contains(&b));
            ok.then_some((end + 2, kind))
        });
        let Some((len, kind)) = found else {
            out.push('[');
            rest = &rest[1..];
            continue;
        };
        out.push_str(&f(kind, &rest[..len]));
        rest = &rest[len..];
    }
    out.push_str(rest);
    out
}

/// `value` with [`rewrite`] done to every string and key in it.
pub fn rewrite_json(
    value: &serde_json::Value,
    f: &mut impl FnMut(&str, &str) -> String,
) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(s) => Value::String(rewrite(s, f)),
        Value::Array(items) => Value::Array(items.iter().map(|v| rewrite_json(v, f)).collect()),
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|(k, v)| (rewrite(k, f), rewrite_json(v, f)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Vault placeholders written by number (`[EMAIL_7KQ2M9XA]` as `[EMAIL_1]`), for test cases:
/// a placeholder depends on the daemon's key, so a case names it by number, which still says
/// which values were told apart. The same placeholder keeps its number; the first of a kind is 1.
#[derive(Debug, Default)]
pub struct Numbering {
    numbers: HashMap<String, String>,
    per_kind: HashMap<String, usize>,
}

impl Numbering {
    /// `text` with its placeholders written by number.
    pub fn text(&mut self, text: &str) -> String {
        rewrite(text, &mut |kind, placeholder| {
            self.number(kind, placeholder)
        })
    }

    /// `value` with the placeholders in its strings (and keys) written by number.
    pub fn json(&mut self, value: &serde_json::Value) -> serde_json::Value {
        rewrite_json(value, &mut |kind, placeholder| {
            self.number(kind, placeholder)
        })
    }

    fn number(&mut self, kind: &str, placeholder: &str) -> String {
        if let Some(n) = self.numbers.get(placeholder) {
            return n.clone();
        }
        let n = self.per_kind.entry(kind.to_string()).or_default();
        *n += 1;
        let numbered = format!("[{kind}_{n}]");
        self.numbers
            .insert(placeholder.to_string(), numbered.clone());
        numbered
    }
}

/// Why a value was not kept.
fn full() -> String {
    format!("the request's vault holds as much as it may ({MAX_VALUES} values, {MAX_BYTES} bytes)")
}

/// Why a vault call gave no answer.
fn denied(why: impl Into<String>) -> String {
    why.into()
}

/// One request's hidden values, by entry and placeholder.
#[derive(Debug, Default)]
pub struct Ledger {
    kept: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    values: HashMap<(Arc<str>, String), String>,
    bytes: usize,
    /// Those an earlier request of the conversation held ([`Ledger::absorb`]).
    earlier: std::collections::HashSet<(Arc<str>, String)>,
}

/// What [`Kept::put`] did.
enum Held {
    Already,
    Now,
    Full,
}

impl Kept {
    /// Hold `value` behind `key`, within `1/share` of the bounds.
    fn put(&mut self, key: (Arc<str>, String), value: &str, share: usize) -> Held {
        let full =
            self.values.len() >= MAX_VALUES / share || self.bytes + value.len() > MAX_BYTES / share;
        match self.values.entry(key) {
            std::collections::hash_map::Entry::Occupied(_) => Held::Already,
            std::collections::hash_map::Entry::Vacant(_) if full => Held::Full,
            std::collections::hash_map::Entry::Vacant(slot) => {
                self.bytes += value.len();
                slot.insert(value.to_string());
                Held::Now
            }
        }
    }

    /// What `conceal` does with `value` behind `key` (its placeholder), and whether the
    /// placeholder stands. On the reply rails (`reply`: what the model wrote) nothing is kept:
    /// it stands only if the request hid the value (the client's own, given back, as a streamed
    /// reply's held text is judged again after a restore). Elsewhere the value is kept, within
    /// the bounds.
    fn hide(&mut self, reply: bool, key: (Arc<str>, String), value: &str) -> Result<bool, String> {
        if reply {
            return Ok(self.values.contains_key(&key));
        }
        match self.put(key, value, 1) {
            Held::Already | Held::Now => Ok(true),
            Held::Full => Err(denied(full())),
        }
    }
}

impl Ledger {
    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keep `value` behind `placeholder` for `entry`, as `conceal` keeps it.
    #[cfg(test)]
    fn keep(&self, entry: &Arc<str>, placeholder: &str, value: &str) -> Result<(), String> {
        let key = (entry.clone(), placeholder.to_string());
        self.kept().hide(false, key, value).map(|_| ())
    }

    /// The value `entry` kept behind `placeholder`.
    fn value(&self, entry: &Arc<str>, placeholder: &str) -> Option<String> {
        self.kept()
            .values
            .get(&(entry.clone(), placeholder.to_string()))
            .cloned()
    }

    /// What it holds as `(entry, placeholder, value)`, for the next request of its
    /// conversation ([`thread`]); `new_only`: leaving out what an earlier request held.
    pub(crate) fn rows(&self, new_only: bool) -> Vec<(String, String, String)> {
        let kept = self.kept();
        kept.values
            .iter()
            .filter(|(k, _)| !new_only || !kept.earlier.contains(*k))
            .map(|((entry, p), v)| (entry.to_string(), p.clone(), v.clone()))
            .collect()
    }

    /// Hold what an earlier request of its conversation held, as if this request had hidden it,
    /// up to half its bounds (the rest is the request's own): whether it now holds it.
    pub(crate) fn absorb(&self, entry: &str, placeholder: String, value: String) -> bool {
        let mut kept = self.kept();
        let key = (Arc::<str>::from(entry), placeholder);
        match kept.put(key.clone(), &value, 2) {
            Held::Already => true,
            Held::Now => {
                kept.earlier.insert(key);
                true
            }
            Held::Full => false,
        }
    }

    /// How many values it holds.
    pub fn len(&self) -> usize {
        self.kept().values.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One instance's vault, if granted, and the running request's ledger.
#[derive(Default)]
pub struct Instance {
    grant: Option<Grant>,
    pub(super) ledger: Option<Arc<Ledger>>,
    /// Whether the running call judges what the model wrote (the `output` and `tool_call`
    /// rails), where a value the request did not hide is not kept.
    pub(super) reply: bool,
}

impl Instance {
    /// An instance's part for `grant`.
    pub fn new(grant: Option<Grant>) -> Instance {
        Instance {
            grant,
            ledger: None,
            reply: false,
        }
    }

    /// Whether it is granted.
    pub fn granted(&self) -> bool {
        self.grant.is_some()
    }
}

/// Whether `kind` is a placeholder's kind: 1 to 24 capital letters, digits or `_`.
fn valid_kind(kind: &str) -> bool {
    (1..=24).contains(&kind.len())
        && kind
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

impl View<'_, Instance> {
    /// The grant, the request's ledger (none for a request that keeps nothing: the CLI's
    /// `check`) and its tenant, if the vault may be reached now.
    fn vault(&self) -> Result<(Grant, Option<Arc<Ledger>>, &str), String> {
        let Some(grant) = self.cap.grant.clone() else {
            return Err(denied(NOT_GRANTED));
        };
        if !self.call.open() {
            return Err(denied(
                "the vault may be reached in evaluate only, not in describe, configure or prefilter",
            ));
        }
        Ok((grant, self.cap.ledger.clone(), self.call.tenant()))
    }

    /// See the `vault` interface's `conceal`.
    pub fn conceal(&mut self, kind: &str, value: &str) -> Result<String, String> {
        let (grant, ledger, tenant) = self.vault()?;
        if !valid_kind(kind) {
            return Err(denied(BAD_KIND));
        }
        let placeholder = grant.placeholder(tenant, kind, value);
        let key = (grant.entry.clone(), placeholder.clone());
        let stands = match &ledger {
            Some(l) => l.kept().hide(self.cap.reply, key, value)?,
            // Nothing is kept (`railyard check`): on the reply rails nothing was hidden.
            None => !self.cap.reply,
        };
        // A value the model must not say gets the type's own, which restores nothing.
        Ok(match stands {
            true => placeholder,
            false => format!("[{kind}]"),
        })
    }

    /// See the `vault` interface's `conceal-again`: `values` as (kind, value, placeholder).
    /// [`View::conceal`] for each, the vault reached and its ledger locked once for all.
    pub fn conceal_again<'a>(
        &mut self,
        values: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
    ) -> Result<bool, String> {
        let (grant, ledger, tenant) = self.vault()?;
        let values = values.into_iter();
        let mut kept = ledger.as_ref().map(|l| l.kept());
        if let Some(kept) = kept.as_mut() {
            kept.values.reserve(values.size_hint().0.min(MAX_VALUES));
        }
        for (kind, value, placeholder) in values {
            if !valid_kind(kind) {
                return Err(denied(BAD_KIND));
            }
            let stands = grant.gives(tenant, kind, value, placeholder)
                && match kept.as_mut() {
                    Some(k) => {
                        let key = (grant.entry.clone(), placeholder.to_string());
                        k.hide(self.cap.reply, key, value)?
                    }
                    None => !self.cap.reply,
                };
            if !stands {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// See the `vault` interface's `reveal`.
    pub fn reveal(&mut self, placeholder: &str) -> Result<Option<String>, String> {
        let (grant, ledger, _) = self.vault()?;
        Ok(ledger.and_then(|l| l.value(&grant.entry, placeholder)))
    }
}

fn part(caps: &mut super::Caps) -> (&mut Instance, &mut Call) {
    (&mut caps.vault, &mut caps.call)
}

/// Add `vault` to `sync` and `waiting`: it never waits, so both serve it.
pub(super) fn link<T: HasCaps>(
    sync: &mut Linker<T>,
    waiting: &mut Linker<T>,
) -> wasmtime::Result<()> {
    v::add_to_linker::<T, Project<Instance>>(sync, |t| super::view(t, part))?;
    va::add_to_linker::<T, Project<Instance>>(waiting, |t| super::view(t, part))
}

impl v::Host for View<'_, Instance> {
    fn conceal(&mut self, kind: String, value: String) -> Result<String, v::VaultError> {
        View::conceal(self, &kind, &value).map_err(v::VaultError::Denied)
    }
    fn conceal_again(&mut self, values: Vec<v::Concealed>) -> Result<bool, v::VaultError> {
        let values = values
            .iter()
            .map(|c| (&*c.kind, &*c.value, &*c.placeholder));
        View::conceal_again(self, values).map_err(v::VaultError::Denied)
    }
    fn reveal(&mut self, placeholder: String) -> Result<Option<String>, v::VaultError> {
        View::reveal(self, &placeholder).map_err(v::VaultError::Denied)
    }
}

impl va::Host for View<'_, Instance> {
    fn conceal(
        &mut self,
        kind: String,
        value: String,
    ) -> wasmtime::Result<Result<String, va::VaultError>> {
        Ok(View::conceal(self, &kind, &value).map_err(va::VaultError::Denied))
    }
    fn conceal_again(
        &mut self,
        values: Vec<va::Concealed>,
    ) -> wasmtime::Result<Result<bool, va::VaultError>> {
        let values = values
            .iter()
            .map(|c| (&*c.kind, &*c.value, &*c.placeholder));
        Ok(View::conceal_again(self, values).map_err(va::VaultError::Denied))
    }
    fn reveal(
        &mut self,
        placeholder: String,
    ) -> wasmtime::Result<Result<Option<String>, va::VaultError>> {
        Ok(View::reveal(self, &placeholder).map_err(va::VaultError::Denied))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{ctx, Host};
    use super::super::{Asked, Grants, RequestCaps};
    use super::*;
    use crate::model::Rail;

    fn grants(entry: &str) -> Grants {
        Grants {
            vault: Some(Grant::new(entry, Arc::new([7u8; 32]))),
            ..Grants::default()
        }
    }

    fn open(host: &mut Host, tenant: &str, caps: &RequestCaps) {
        open_on(host, tenant, caps, Rail::Input);
    }

    fn open_on(host: &mut Host, tenant: &str, caps: &RequestCaps, rail: Rail) {
        let ctx = ctx(tenant);
        host.caps.open(&Asked {
            ctx: &ctx,
            caps,
            rail,
            messages: &[],
        });
    }

    #[test]
    fn concealed_again_a_kept_answers_values_come_back_in_the_new_request() {
        let request = || RequestCaps {
            vault: Some(Arc::default()),
            ..RequestCaps::default()
        };
        let (mut pii, _) = Host::new(&grants("pii"));
        let first = request();
        open(&mut pii, "acme", &first);
        let (a, b) = {
            let mut view = pii.view(part);
            (
                view.conceal("EMAIL", "bob@example.com").unwrap(),
                view.conceal("PHONE_NUMBER", "+1 555 0100").unwrap(),
            )
        };
        pii.caps.close();
        // The next request hides both again in one call, and has them back.
        let next = request();
        open(&mut pii, "acme", &next);
        {
            let mut view = pii.view(part);
            let kept = [
                ("EMAIL", "bob@example.com", a.as_str()),
                ("PHONE_NUMBER", "+1 555 0100", b.as_str()),
            ];
            assert_eq!(view.conceal_again(kept), Ok(true));
            assert_eq!(view.reveal(&a).unwrap().as_deref(), Some("bob@example.com"));
            assert_eq!(view.reveal(&b).unwrap().as_deref(), Some("+1 555 0100"));
        }
        pii.caps.close();
        // Another tenant's placeholders differ: false at the first, and it stops there.
        let other = request();
        open(&mut pii, "globex", &other);
        {
            let mut view = pii.view(part);
            let kept = [
                ("EMAIL", "bob@example.com", a.as_str()),
                ("PHONE_NUMBER", "+1 555 0100", b.as_str()),
            ];
            assert_eq!(view.conceal_again(kept), Ok(false));
            assert_eq!(view.reveal(&b).unwrap(), None);
            // A kind that is not one is refused, as `conceal` refuses it.
            assert!(view.conceal_again([("email", "x", "[email_X]")]).is_err());
        }
        pii.caps.close();
        // On the reply rails only what the request hid keeps its placeholder.
        let reply = request();
        open_on(&mut pii, "acme", &reply, Rail::ToolCall);
        assert_eq!(
            pii.view(part)
                .conceal_again([("EMAIL", "bob@example.com", a.as_str())]),
            Ok(false)
        );
        pii.caps.close();
        // Outside evaluate, or not granted: refused.
        assert!(pii
            .view(part)
            .conceal_again([("EMAIL", "bob@example.com", a.as_str())])
            .is_err());
    }

    #[test]
    fn a_value_comes_back_only_in_its_request_for_its_entry() {
        let request = RequestCaps {
            vault: Some(Arc::default()),
            ..RequestCaps::default()
        };
        let (mut pii, _) = Host::new(&grants("pii"));
        open(&mut pii, "acme", &request);
        let p = {
            let mut view = pii.view(part);
            let p = view.conceal("EMAIL", "bob@example.com").unwrap();
            assert!(
                p.starts_with("[EMAIL_") && p.len() == "[EMAIL_]".len() + ID_LEN,
                "{p}"
            );
            assert!(!p.to_lowercase().contains("bob"));
            // Stable for the same value, kind and tenant; another tenant's differs.
            assert_eq!(view.conceal("EMAIL", "bob@example.com").unwrap(), p);
            assert_eq!(view.reveal(&p).unwrap().as_deref(), Some("bob@example.com"));
            // Made up, or another kind's: nothing.
            assert_eq!(view.reveal("[EMAIL_AAAAAAAA]").unwrap(), None);
            assert!(view.conceal("email", "x").is_err());
            p
        };
        // Another request (another conversation) has another ledger: nothing.
        let other = RequestCaps {
            vault: Some(Arc::default()),
            ..RequestCaps::default()
        };
        pii.caps.close();
        open(&mut pii, "acme", &other);
        assert_eq!(pii.view(part).reveal(&p).unwrap(), None);
        pii.caps.close();
        open(&mut pii, "globex", &other);
        assert_ne!(
            pii.view(part).conceal("EMAIL", "bob@example.com").unwrap(),
            p
        );
        pii.caps.close();
        // Another entry in the same request: nothing.
        let (mut other_entry, _) = Host::new(&grants("flow"));
        open(&mut other_entry, "acme", &request);
        assert_eq!(other_entry.view(part).reveal(&p).unwrap(), None);
        // Not granted, or not in evaluate: refused.
        let (mut plain, _) = Host::new(&Grants::default());
        open(&mut plain, "acme", &request);
        assert!(plain.view(part).conceal("EMAIL", "x").is_err());
        let (mut closed, _) = Host::new(&grants("pii"));
        assert!(closed.view(part).reveal(&p).is_err());
        // A request that keeps nothing (the CLI's check) hides, and gives nothing back.
        let (mut cli, _) = Host::new(&grants("pii"));
        open(&mut cli, "acme", &RequestCaps::default());
        assert_eq!(
            cli.view(part).conceal("EMAIL", "bob@example.com").unwrap(),
            p
        );
        assert_eq!(cli.view(part).reveal(&p).unwrap(), None);
    }

    #[test]
    fn placeholders_are_numbered_by_kind_in_order_of_first_sight() {
        let g = Grant::new("pii", Arc::new([7u8; 32]));
        let (a, b) = (
            g.placeholder("t", "EMAIL", "a@x.org"),
            g.placeholder("t", "EMAIL", "b@x.org"),
        );
        let iban = g.placeholder("t", "IBAN_CODE", "GB82WEST12345698765432");
        let mut n = Numbering::default();
        assert_eq!(
            n.text(&format!("{b} [{a} {iban}] {b} [EMAIL] [EMAIL_ABC]")),
            "[EMAIL_1] [[EMAIL_2] [IBAN_CODE_1]] [EMAIL_1] [EMAIL] [EMAIL_ABC]"
        );
        // Numbers hold across texts: a later message's `a` is still 2.
        assert_eq!(n.text(&format!("to {a}")), "to [EMAIL_2]");
        assert_eq!(
            n.json(&serde_json::json!({"m": [format!("{a}"), 3]})),
            serde_json::json!({"m": ["[EMAIL_2]", 3]})
        );
    }

    #[test]
    fn on_the_reply_rails_only_a_value_the_request_hid_gets_a_placeholder() {
        let request = RequestCaps {
            vault: Some(Arc::default()),
            ..RequestCaps::default()
        };
        let (mut pii, _) = Host::new(&grants("pii"));
        open(&mut pii, "acme", &request);
        let p = pii.view(part).conceal("EMAIL", "bob@example.com").unwrap();
        pii.caps.close();
        for rail in [Rail::Output, Rail::ToolCall] {
            open_on(&mut pii, "acme", &request, rail);
            let mut view = pii.view(part);
            assert_eq!(view.conceal("EMAIL", "bob@example.com").unwrap(), p);
            assert_eq!(view.conceal("EMAIL", "eve@example.com").unwrap(), "[EMAIL]");
            pii.caps.close();
        }
        assert_eq!(request.vault.as_ref().unwrap().len(), 1, "nothing kept");
    }

    #[test]
    fn a_requests_vault_is_bounded() {
        let request = RequestCaps {
            vault: Some(Arc::default()),
            ..RequestCaps::default()
        };
        let (mut pii, _) = Host::new(&grants("pii"));
        open(&mut pii, "acme", &request);
        let mut view = pii.view(part);
        let big = "x".repeat(MAX_BYTES / 2);
        view.conceal("SECRET", &format!("a{big}")).unwrap();
        assert!(view.conceal("SECRET", &format!("b{big}")).is_err());
        assert_eq!(request.vault.as_ref().unwrap().len(), 1);
    }
}
