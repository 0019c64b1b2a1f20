//! `[provenance]`: the keyring that signs the tool-call ids the daemon relays, whether unsigned
//! history blocks, and how long a signature holds. The keys file is a TOML list of
//! `[[keys]] id = "...", secret = "<hex, at least 32 bytes>"`: the first key signs, every key
//! verifies, so a rotation adds the new key first and drops the old one once its ids have aged
//! out. Every replica given the same file verifies the others' ids. Without a keys file, a random
//! key made when the process starts signs (one replica; ids do not survive a restart).

use super::raw::{RawKeyring, RawProvenance};
use super::{ConfigError, Problems};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use toml::Spanned;

/// Shortest secret accepted: HMAC-SHA256 wants at least its output size.
const MIN_SECRET_BYTES: usize = 32;
/// Default `max_age_s`: a week, long enough for a conversation left open.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// One key.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey {
    /// Its id, written into every id it signs (letters and digits).
    pub id: String,
    /// The secret.
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({})", self.id)
    }
}

/// `[provenance]`, resolved.
#[derive(Debug, Clone)]
pub struct ProvenanceConfig {
    /// The keys: the first signs.
    pub keys: Arc<Vec<SigningKey>>,
    /// Where they came from (watched for reloads); `None`: the process's random key.
    pub keys_file: Option<PathBuf>,
    /// Block a turn whose history holds a call that is not validly signed.
    pub require: bool,
    /// Signatures older than this are expired.
    pub max_age: Duration,
}

impl ProvenanceConfig {
    /// Whether the keys are the process's own random one.
    pub fn random_key(&self) -> bool {
        self.keys_file.is_none()
    }
}

impl Default for ProvenanceConfig {
    fn default() -> Self {
        ProvenanceConfig {
            keys: local_key(),
            keys_file: None,
            require: false,
            max_age: DEFAULT_MAX_AGE,
        }
    }
}

/// The key this process signs with when no keys file is configured: made once, kept across
/// reloads (a reload must not invalidate the ids already handed out).
fn local_key() -> Arc<Vec<SigningKey>> {
    static LOCAL: OnceLock<Arc<Vec<SigningKey>>> = OnceLock::new();
    LOCAL
        .get_or_init(|| {
            let mut secret = vec![0u8; MIN_SECRET_BYTES];
            // No /dev/urandom is not a machine this daemon runs on; fall back to the clock and
            // pid rather than fail, so the daemon still signs (ids then verify only here).
            if crate::util::random_bytes(&mut secret).is_err() {
                let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
                secret = crate::util::sha256_hex(seed.as_bytes()).into_bytes();
            }
            Arc::new(vec![SigningKey {
                id: "local".into(),
                secret,
            }])
        })
        .clone()
}

/// Resolve `[provenance]`; returns it, the keys file's text (for the revision hash) and the keys
/// file's own error.
pub(super) fn resolve(
    p: &mut Problems<'_>,
    raw: Option<&Spanned<RawProvenance>>,
    base: &Path,
) -> (ProvenanceConfig, String, Option<ConfigError>) {
    let mut config = ProvenanceConfig::default();
    let Some(raw) = raw else {
        return (config, String::new(), None);
    };
    let r = raw.get_ref();
    config.require = r.require.unwrap_or(false);
    if let Some(age) = &r.max_age_s {
        if *age.get_ref() == 0 {
            p.at(age.span(), "provenance.max_age_s", "must be at least 1");
        }
        config.max_age = Duration::from_secs(*age.get_ref());
    }
    let mut text = String::new();
    let mut error = None;
    if let Some(file) = &r.keys_file {
        let path = base.join(file.get_ref());
        match load_keyring(&path) {
            Ok((keys, t)) => {
                config.keys = Arc::new(keys);
                text = t;
            }
            Err(e) => error = Some(e),
        }
        config.keys_file = Some(path);
    }
    (config, text, error)
}

/// Read a keyring file: its keys, in order, and its text.
pub fn load_keyring(file: &Path) -> Result<(Vec<SigningKey>, String), ConfigError> {
    super::load_named_file(file, "provenance keys file", resolve_keyring)
}

/// The keyring file's keys, in order; its problems in `p`.
fn resolve_keyring(p: &mut Problems<'_>, raw: RawKeyring) -> Vec<SigningKey> {
    let mut keys: Vec<SigningKey> = Vec::new();
    for (i, k) in raw.keys.iter().enumerate() {
        let k = k.get_ref();
        let id = k.id.get_ref();
        if id.is_empty() || id.len() > 16 || !id.chars().all(|c| c.is_ascii_alphanumeric()) {
            p.at(
                k.id.span(),
                format!("keys[{i}].id"),
                "must be 1-16 letters or digits",
            );
        } else if keys.iter().any(|other| &other.id == id) {
            p.at(
                k.id.span(),
                format!("keys[{i}].id"),
                format!("'{id}' is used twice"),
            );
        }
        match crate::util::unhex(k.secret.get_ref().trim()) {
            Some(secret) if secret.len() >= MIN_SECRET_BYTES => keys.push(SigningKey {
                id: id.clone(),
                secret,
            }),
            Some(_) => p.at(
                k.secret.span(),
                format!("keys[{i}].secret"),
                format!(
                    "must be at least {MIN_SECRET_BYTES} bytes (64 hex digits), e.g. from \
                     `head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'`"
                ),
            ),
            None => p.at(
                k.secret.span(),
                format!("keys[{i}].secret"),
                "must be hex digits",
            ),
        }
    }
    if raw.keys.is_empty() {
        p.list.push(super::Problem {
            line: None,
            key: "keys".into(),
            message: "the keyring has no [[keys]]: the first one signs".into(),
        });
    }
    keys
}
