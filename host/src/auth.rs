//! Who is calling. Callers present an API key (`Authorization: Bearer <key>` over HTTP, the same
//! in gRPC metadata); config maps each key to a principal, a tenant and labels. Those, and only
//! those, become the context plugins see: nothing a request body or a model says can set them.
//!
//! Config stores SHA-256 digests of keys, never keys. A presented key is hashed and compared with
//! every configured digest in constant time, so neither the time taken nor an early exit tells an
//! attacker how close a guess was.

use sha2::{Digest, Sha256};

/// A key's SHA-256 digest.
pub type KeyDigest = [u8; 32];

/// One configured API key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// SHA-256 of the key.
    pub digest: KeyDigest,
    /// The principal plugins see (e.g. a service name).
    pub principal: String,
    /// The tenant whose policies and limits apply; `None` is the default tenant.
    pub tenant: Option<String>,
    /// Extra labels, passed to plugins as context metadata.
    pub labels: Vec<(String, String)>,
    /// Requests this key may make per minute, across replicas; `None`: no limit of its own.
    pub requests_per_minute: Option<u32>,
    /// Tokens (prompt and answer) this key may spend per minute, across replicas.
    pub tokens_per_minute: Option<u32>,
}

/// An authenticated caller (or, when the daemon runs open, an anonymous one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// The key's principal; `None` when the daemon runs open.
    pub principal: Option<String>,
    /// The key's tenant; `None` is the default tenant.
    pub tenant: Option<String>,
    /// The key's labels.
    pub labels: Vec<(String, String)>,
    /// The key's own rate limit (requests per minute), if it has one.
    pub requests_per_minute: Option<u32>,
    /// The key's own token budget (tokens per minute), if it has one.
    pub tokens_per_minute: Option<u32>,
    /// The key's digest; `None` when the daemon runs open or the caller was named in a check.
    pub key: Option<KeyDigest>,
}

impl Caller {
    /// The tenant's name for metrics, logs and limits (`default` for the default tenant).
    pub fn tenant_name(&self) -> &str {
        self.tenant.as_deref().unwrap_or(DEFAULT_TENANT)
    }

    /// The key's id: the first 16 hex digits of its digest (public, as config is), naming its
    /// own limits' buckets (made only for a key that has some).
    pub fn key_id(&self) -> Option<String> {
        self.key.map(|d| crate::util::hex(&d[..8]))
    }
}

/// Name of the tenant of keys that name none (and of every caller when the daemon runs open).
pub const DEFAULT_TENANT: &str = "default";

/// Why a caller was turned away. Messages never repeat the presented key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No usable `Authorization` header.
    #[error("missing API key: send 'Authorization: Bearer <key>'")]
    Missing,
    /// The header is not a bearer token.
    #[error("malformed Authorization header: expected 'Bearer <key>'")]
    Malformed,
    /// No configured key matches.
    #[error("invalid API key")]
    Unknown,
}

/// SHA-256 of `key`, as lowercase hex (what config stores).
pub fn hash_hex(key: &str) -> String {
    crate::util::sha256_hex(key.as_bytes())
}

/// Parse a configured digest: 64 hex digits, optionally prefixed `sha256:`.
pub fn parse_digest(text: &str) -> Result<KeyDigest, String> {
    let hex = text.strip_prefix("sha256:").unwrap_or(text);
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(
            "must be the SHA-256 of the key as 64 hex digits (see `railyard keys hash`)".into(),
        );
    }
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("checked hex");
    }
    Ok(digest)
}

/// A new random key: `ry_` and 48 hex digits (192 bits from the OS's CSPRNG).
pub fn generate() -> std::io::Result<String> {
    let mut bytes = [0u8; 24];
    crate::util::random_bytes(&mut bytes)?;
    Ok(format!("ry_{}", crate::util::hex(&bytes)))
}

/// The token of an `Authorization` header value (`Bearer <token>`, scheme case-insensitive).
pub fn bearer(header: Option<&str>) -> Result<&str, AuthError> {
    let value = header.ok_or(AuthError::Missing)?.trim();
    let (scheme, token) = value.split_once(' ').ok_or(AuthError::Malformed)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(AuthError::Malformed);
    }
    Ok(token)
}

/// Equal without data-dependent branches or early exit.
fn same(a: &KeyDigest, b: &KeyDigest) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The configured key matching `presented`, comparing against every key (no early exit).
pub fn find<'a>(keys: &'a [ApiKey], presented: &str) -> Option<&'a ApiKey> {
    let digest: KeyDigest = Sha256::digest(presented.as_bytes()).into();
    let mut found = None;
    for key in keys {
        if same(&key.digest, &digest) {
            found = Some(key);
        }
    }
    found
}

/// Whether `presented` is one of `digests` (admin keys), comparing against all of them.
pub fn matches_any(digests: &[KeyDigest], presented: &str) -> bool {
    let digest: KeyDigest = Sha256::digest(presented.as_bytes()).into();
    digests
        .iter()
        .fold(false, |found, d| same(d, &digest) | found)
}

/// Authenticate an `Authorization` header value against `keys` (`None`: the daemon runs open and
/// every caller is anonymous, in the default tenant).
pub fn authenticate(keys: Option<&[ApiKey]>, header: Option<&str>) -> Result<Caller, AuthError> {
    let Some(keys) = keys else {
        return Ok(Caller::default());
    };
    let token = bearer(header)?;
    let key = find(keys, token).ok_or(AuthError::Unknown)?;
    Ok(Caller {
        principal: Some(key.principal.clone()),
        tenant: key.tenant.clone(),
        labels: key.labels.clone(),
        requests_per_minute: key.requests_per_minute,
        tokens_per_minute: key.tokens_per_minute,
        key: Some(key.digest),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(secret: &str, principal: &str) -> ApiKey {
        ApiKey {
            digest: parse_digest(&hash_hex(secret)).unwrap(),
            principal: principal.into(),
            tenant: Some("acme".into()),
            labels: vec![("team".into(), "support".into())],
            requests_per_minute: None,
            tokens_per_minute: None,
        }
    }

    #[test]
    fn finds_the_matching_key_only() {
        let keys = vec![key("k1", "alice"), key("k2", "bob")];
        let caller = authenticate(Some(&keys), Some("Bearer k2")).unwrap();
        assert_eq!(caller.principal.as_deref(), Some("bob"));
        assert_eq!(caller.tenant_name(), "acme");
        assert_eq!(
            authenticate(Some(&keys), Some("Bearer k3")),
            Err(AuthError::Unknown)
        );
        assert_eq!(authenticate(Some(&keys), None), Err(AuthError::Missing));
        assert_eq!(
            authenticate(Some(&keys), Some("Basic azE6")),
            Err(AuthError::Malformed)
        );
        assert_eq!(
            authenticate(Some(&keys), Some("bearer   k1  "))
                .unwrap()
                .principal
                .as_deref(),
            Some("alice")
        );
    }

    #[test]
    fn open_mode_is_anonymous() {
        let caller = authenticate(None, Some("Bearer anything")).unwrap();
        assert_eq!(caller, Caller::default());
        assert_eq!(caller.tenant_name(), DEFAULT_TENANT);
    }

    #[test]
    fn digests_parse_with_or_without_prefix() {
        let hex = hash_hex("secret");
        assert_eq!(
            parse_digest(&hex).unwrap(),
            parse_digest(&format!("sha256:{hex}")).unwrap()
        );
        assert!(parse_digest("abc").is_err());
        assert!(parse_digest(&"g".repeat(64)).is_err());
        assert!(matches_any(&[parse_digest(&hex).unwrap()], "secret"));
        assert!(!matches_any(&[parse_digest(&hex).unwrap()], "secreT"));
    }

    #[test]
    fn generated_keys_are_distinct() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert!(a.starts_with("ry_") && a.len() == 51, "{a}");
        assert_ne!(a, b);
    }
}
