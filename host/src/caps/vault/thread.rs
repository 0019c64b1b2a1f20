//! A conversation's vault between its requests, where the daemon does not see the earlier turns
//! again: a Responses continuation (`previous_response_id`, a `conversation`: the backend keeps
//! the turns, the request carries only what is new) and an MCP agent session (one call at a
//! time). Chat and Messages resend the conversation every turn, and each request's own
//! [`Ledger`] holds what it needs; here the values a turn hid would otherwise be gone when a later
//! turn's reply names their placeholders.
//!
//! A thread is named by its tenant, the caller's principal and the id the client sends back
//! (a response's id, a conversation's, an agent session's digest): another tenant or another
//! principal naming the same id finds nothing. It is a set in the store, a member per value, so
//! requests of one conversation running at once add to it without losing each other's (no read
//! before a write). Each member is sealed (ChaCha20-Poly1305 under a key made from the vault's
//! key, the thread's store key as associated data): the store holds no value in the clear, and a
//! member moved to another thread or sealed under another key does not open. The nonce is a MAC
//! of what is sealed (as SIV does), so one value sealed twice is one member. Bounded (half a
//! request's vault) and expiring ([`TTL`], renewed by each request that reads or adds to it).

use super::Ledger;
use crate::state::Store;
use hmac::{Hmac, Mac};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use sha2::Sha256;
use std::time::Duration;

/// A thread unused this long is forgotten.
pub const TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Most values a thread keeps.
const MAX_MEMBERS: usize = super::MAX_VALUES / 2;
/// The entry of a link's row (no plugin entry is named so): its value is the linked thread's
/// store key.
const LINK: &str = "\u{0}link";

/// What names a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A Responses reply's id (the next request's `previous_response_id`).
    Response,
    /// A Responses `conversation`'s id.
    Conversation,
    /// An MCP agent session (its digest, `server::mcp::history`).
    Agent,
}

impl Kind {
    fn tag(self) -> &'static str {
        match self {
            Kind::Response => "r",
            Kind::Conversation => "c",
            Kind::Agent => "a",
        }
    }
}

/// One conversation's vault in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    tenant: String,
    key: String,
}

impl Thread {
    /// The thread `id` of `kind` names for `principal` in `tenant`.
    pub fn named(tenant: &str, principal: Option<&str>, kind: Kind, id: &str) -> Thread {
        let mut who = Vec::with_capacity(id.len() + 32);
        who.extend_from_slice(principal.unwrap_or("").as_bytes());
        who.push(0);
        who.extend_from_slice(kind.tag().as_bytes());
        who.push(0);
        who.extend_from_slice(id.as_bytes());
        Thread {
            tenant: tenant.to_string(),
            key: crate::state::key::vault(tenant, &crate::util::sha256_hex(&who)[..32]),
        }
    }

    /// Put what the thread holds into `ledger`: how many values it took (none when the store
    /// does not answer: the placeholders then stay as they are, which shows nothing).
    pub async fn load(&self, store: &Store, vault_key: &[u8; 32], ledger: &Ledger) -> usize {
        self.read(store, vault_key, ledger).await.0
    }

    /// [`Thread::load`], and the thread this one links to, if it does.
    async fn read(
        &self,
        store: &Store,
        vault_key: &[u8; 32],
        ledger: &Ledger,
    ) -> (usize, Option<Thread>) {
        let members = match store.members(&self.tenant, &self.key, TTL).await {
            Ok(members) => members,
            Err(e) => {
                tracing::warn!("a conversation's vault was not read ({e}): its placeholders stay");
                return (0, None);
            }
        };
        let seal = Seal::new(vault_key, &self.key);
        let (mut taken, mut link) = (0, None);
        // One sealed under another key (the provenance keys rotated) or altered: skipped.
        for (entry, placeholder, value) in members.iter().filter_map(|m| seal.open(m)) {
            if entry == LINK {
                // Only a key sealed here, and of this tenant's vault.
                link = value
                    .starts_with(&crate::state::key::vault(&self.tenant, ""))
                    .then(|| Thread {
                        tenant: self.tenant.clone(),
                        key: value,
                    })
                    .filter(|t| t.key != self.key);
            } else if ledger.absorb(&entry, placeholder, value) {
                taken += 1;
            }
        }
        (taken, link)
    }

    /// [`Thread::load`] for a Responses reply continued: a reply's thread is a link to the
    /// thread its conversation keeps its values in (its first reply's), so each turn adds only
    /// what it hid rather than all the conversation's values again under its own id. Returns
    /// the thread the values are in (this one, for a first reply's).
    pub async fn load_chain(&self, store: &Store, vault_key: &[u8; 32], ledger: &Ledger) -> Thread {
        // A link's own values are read too: kept there while the store could not be read to
        // follow it.
        let Some(root) = self.read(store, vault_key, ledger).await.1 else {
            return self.clone();
        };
        root.load(store, vault_key, ledger).await;
        root
    }

    /// Make this thread (a reply's) a link to `root`, where [`Thread::load_chain`] finds the
    /// values.
    pub async fn link(&self, store: &Store, vault_key: &[u8; 32], root: &Thread) {
        let row = (LINK.to_string(), String::new(), root.key.clone());
        let member = Seal::new(vault_key, &self.key).seal(&row);
        if !matches!(
            store
                .add_member(&self.tenant, &self.key, &member, 1, TTL)
                .await,
            Ok(true)
        ) {
            tracing::warn!(
                "a reply's vault was not linked to its conversation's: its next turn restores less"
            );
        }
    }

    /// Keep what `ledger` holds for the conversation's next request (`new_only`: what no
    /// earlier request of this thread held).
    pub async fn save(&self, store: &Store, vault_key: &[u8; 32], ledger: &Ledger, new_only: bool) {
        let rows = ledger.rows(new_only);
        if rows.is_empty() {
            return;
        }
        let seal = Seal::new(vault_key, &self.key);
        let members: Vec<String> = rows.iter().map(|row| seal.seal(row)).collect();
        // Added together: on Redis the writes share the multiplexed connection's round trips.
        let added = futures_util::future::join_all(
            members
                .iter()
                .map(|m| store.add_member(&self.tenant, &self.key, m, MAX_MEMBERS, TTL)),
        )
        .await;
        if added.iter().any(|a| !matches!(a, Ok(true))) {
            tracing::warn!(
                "a conversation's vault was not kept whole (the store did not answer, or the \
                 thread holds {MAX_MEMBERS} values): its next turns restore less"
            );
        }
    }
}

/// Sealing for one thread: a key made from the vault's key (its own, so a sealed member says
/// nothing of the placeholders' key) and the thread's store key as associated data.
struct Seal<'a> {
    key: LessSafeKey,
    mac: Hmac<Sha256>,
    aad: &'a str,
}

impl<'a> Seal<'a> {
    fn new(vault_key: &[u8; 32], aad: &'a str) -> Seal<'a> {
        let derive = |label: &[u8]| {
            let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(vault_key).expect("any key length");
            mac.update(label);
            mac.finalize().into_bytes()
        };
        let key = derive(b"railyard vault threads: key");
        let nonces = derive(b"railyard vault threads: nonces");
        Seal {
            key: LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &key).expect("32 bytes")),
            mac: <Hmac<Sha256> as Mac>::new_from_slice(&nonces).expect("any key length"),
            aad,
        }
    }

    /// `row` sealed: hex of the nonce, then the ciphertext and tag.
    fn seal(&self, row: &(String, String, String)) -> String {
        let mut plain = serde_json::to_vec(row).expect("strings serialise");
        let mut mac = self.mac.clone();
        mac.update(self.aad.as_bytes());
        mac.update(&plain);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&mac.finalize().into_bytes()[..NONCE_LEN]);
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(self.aad.as_bytes()),
                &mut plain,
            )
            .expect("a row is far below the cipher's limit");
        let mut out = crate::util::hex(&nonce);
        out.push_str(&crate::util::hex(&plain));
        out
    }

    /// The row `member` holds, if it opens here.
    fn open(&self, member: &str) -> Option<(String, String, String)> {
        let bytes = crate::util::unhex(member)?;
        if bytes.len() < NONCE_LEN {
            return None;
        }
        let (nonce, body) = bytes.split_at(NONCE_LEN);
        let mut body = body.to_vec();
        let plain = self
            .key
            .open_in_place(
                Nonce::try_assume_unique_for_key(nonce).ok()?,
                Aad::from(self.aad.as_bytes()),
                &mut body,
            )
            .ok()?;
        serde_json::from_slice(plain).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(value: &str) -> (String, String, String) {
        ("pii".into(), "[EMAIL_AAAAAAAA]".into(), value.into())
    }

    #[test]
    fn a_sealed_value_opens_only_under_its_key_and_thread() {
        let (key, other) = ([1u8; 32], [2u8; 32]);
        let seal = Seal::new(&key, "vault:t:x");
        let sealed = seal.seal(&row("bob@example.com"));
        assert!(!sealed.contains(&crate::util::hex(b"bob@exa")));
        assert_eq!(seal.open(&sealed), Some(row("bob@example.com")));
        assert_eq!(Seal::new(&other, "vault:t:x").open(&sealed), None);
        assert_eq!(Seal::new(&key, "vault:t:y").open(&sealed), None);
        let mut altered = sealed.clone().into_bytes();
        let last = altered.len() - 1;
        altered[last] = if altered[last] == b'0' { b'1' } else { b'0' };
        assert_eq!(seal.open(std::str::from_utf8(&altered).unwrap()), None);
        assert_eq!(seal.open(&sealed[..10]), None);
        assert_eq!(seal.open("not hex"), None);
        // One value sealed twice is one member; another value is another.
        assert_eq!(seal.seal(&row("bob@example.com")), sealed);
        assert_ne!(seal.seal(&row("eve@example.com")), sealed);
    }

    #[test]
    fn a_thread_is_named_by_tenant_principal_kind_and_id() {
        let a = Thread::named("t", Some("alice"), Kind::Response, "resp_1");
        assert_eq!(
            a,
            Thread::named("t", Some("alice"), Kind::Response, "resp_1")
        );
        for other in [
            Thread::named("u", Some("alice"), Kind::Response, "resp_1"),
            Thread::named("t", Some("bob"), Kind::Response, "resp_1"),
            Thread::named("t", None, Kind::Response, "resp_1"),
            Thread::named("t", Some("alice"), Kind::Conversation, "resp_1"),
            Thread::named("t", Some("alice"), Kind::Response, "resp_2"),
        ] {
            assert_ne!(a.key, other.key);
        }
        assert!(!a.key.contains("resp_1") && !a.key.contains("alice"));
    }

    #[tokio::test]
    async fn a_reply_chain_keeps_each_value_once_in_its_first_replys_thread() {
        let store = Store::new(&crate::config::StateConfig::default());
        let key = [5u8; 32];
        let entry: std::sync::Arc<str> = "pii".into();
        let reply = |id: &str| Thread::named("t", Some("alice"), Kind::Response, id);
        let members = |t: &Thread| {
            let (store, key) = (&store, t.key.clone());
            async move { store.members("t", &key, TTL).await.unwrap().len() }
        };
        // Turn 1 hides a value and is kept under its reply's id.
        let first = Ledger::default();
        first
            .keep(&entry, "[EMAIL_AAAAAAAA]", "a@example.com")
            .unwrap();
        reply("r1").save(&store, &key, &first, false).await;
        // Turns 2 and 3 each continue the last reply and hide one more.
        let mut last = reply("r1");
        for (turn, (placeholder, value)) in [
            ("r2", ("[EMAIL_BBBBBBBB]", "b@example.com")),
            ("r3", ("[EMAIL_CCCCCCCC]", "c@example.com")),
        ] {
            let ledger = Ledger::default();
            let chain = last.load_chain(&store, &key, &ledger).await;
            assert_eq!(chain, reply("r1"));
            ledger.keep(&entry, placeholder, value).unwrap();
            chain.save(&store, &key, &ledger, true).await;
            reply(turn).link(&store, &key, &chain).await;
            last = reply(turn);
        }
        // Each value once, in the first reply's thread; each later reply's is one link.
        assert_eq!(members(&reply("r1")).await, 3);
        assert_eq!(members(&reply("r2")).await, 1);
        assert_eq!(members(&reply("r3")).await, 1);
        // Continuing any reply of the chain gets every value the chain hid.
        for id in ["r1", "r2", "r3"] {
            let ledger = Ledger::default();
            reply(id).load_chain(&store, &key, &ledger).await;
            assert_eq!(ledger.rows(false).len(), 3, "{id}");
        }
        // Another principal naming the same reply, or another key: nothing.
        let bob = Thread::named("t", Some("bob"), Kind::Response, "r3");
        let ledger = Ledger::default();
        bob.load_chain(&store, &key, &ledger).await;
        assert!(ledger.is_empty());
        reply("r3").load_chain(&store, &[6u8; 32], &ledger).await;
        assert!(ledger.is_empty());
    }

    #[tokio::test]
    async fn what_one_request_hid_the_next_of_its_thread_holds() {
        let store = Store::new(&crate::config::StateConfig::default());
        let key = [3u8; 32];
        let entry: std::sync::Arc<str> = "pii".into();
        let first = Ledger::default();
        first
            .keep(&entry, "[EMAIL_AAAAAAAA]", "bob@example.com")
            .unwrap();
        let thread = Thread::named("t", Some("alice"), Kind::Agent, "s1");
        thread.save(&store, &key, &first, true).await;
        // A second request of the thread, at the same time, adds its own without a read.
        let second = Ledger::default();
        second
            .keep(&entry, "[PHONE_BBBBBBBB]", "+44 20 7946 0958")
            .unwrap();
        thread.save(&store, &key, &second, true).await;
        let next = Ledger::default();
        assert_eq!(thread.load(&store, &key, &next).await, 2);
        assert_eq!(
            next.value(&entry, "[EMAIL_AAAAAAAA]").as_deref(),
            Some("bob@example.com")
        );
        // What it read is not written again; what it hid is.
        assert!(next.rows(true).is_empty());
        next.keep(&entry, "[EMAIL_CCCCCCCC]", "c@example.com")
            .unwrap();
        assert_eq!(next.rows(true).len(), 1);
        assert_eq!(next.rows(false).len(), 3);
        // Another principal's thread of the same id, or another vault key: nothing.
        let bob = Thread::named("t", Some("bob"), Kind::Agent, "s1");
        assert_eq!(bob.load(&store, &key, &Ledger::default()).await, 0);
        assert_eq!(thread.load(&store, &[4u8; 32], &Ledger::default()).await, 0);
        // An empty ledger keeps nothing.
        let empty = Thread::named("t", Some("alice"), Kind::Response, "resp_2");
        empty.save(&store, &key, &Ledger::default(), false).await;
        assert!(store
            .members("t", &empty.key, TTL)
            .await
            .unwrap()
            .is_empty());
    }
}
