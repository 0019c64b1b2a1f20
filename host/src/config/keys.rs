//! API keys in config: `[[auth.keys]]` and the keys file's `[[keys]]`, each resolved to a
//! digest, a principal, a tenant and labels; every problem named with its line.

use super::raw::{RawAuth, RawKey, RawKeysFile};
use super::{AuthConfig, ConfigError, Problems};
use crate::auth::{ApiKey, KeyDigest};
use std::path::Path;
use toml::Spanned;

/// `[auth]`: its keys and its keys file's. Returns the auth config, the keys file's text (it
/// feeds the revision hash) and the keys file's own error, if it has one.
pub(super) fn resolve_auth(
    p: &mut Problems<'_>,
    raw: Option<&Spanned<RawAuth>>,
    tenant_names: &[&str],
    base: &Path,
) -> (Option<AuthConfig>, String, Option<ConfigError>) {
    let mut keys_file_error = None;
    let mut keys_text = String::new();
    // `open = true` runs the daemon without keys; with keys beside it, it says two things.
    if let Some(open) = raw.and_then(|a| a.get_ref().open.as_ref()) {
        let auth = raw.expect("checked").get_ref();
        if *open.get_ref() && (auth.keys_file.is_some() || !auth.keys.is_empty()) {
            p.at(
                open.span(),
                "auth.open",
                "cannot be true beside keys (keys_file or [[auth.keys]]): remove one",
            );
        }
        if *open.get_ref() {
            return (None, keys_text, keys_file_error);
        }
    }
    let auth = raw.map(|auth| {
        let mut keys = resolve_keys(p, "auth.keys", &auth.get_ref().keys, tenant_names);
        let inline = keys.len();
        let keys_file = auth
            .get_ref()
            .keys_file
            .as_ref()
            .map(|f| base.join(f.get_ref()));
        if let Some(file) = &keys_file {
            match load_keys_file(file, tenant_names) {
                Ok((more, text)) => {
                    keys.extend(more);
                    keys_text = text;
                }
                Err(e) => keys_file_error = Some(e),
            }
        }
        let mut seen: Vec<&KeyDigest> = Vec::new();
        for k in &keys {
            if seen.contains(&&k.digest) {
                p.at(
                    auth.span(),
                    "auth",
                    format!(
                        "the key of principal '{}' is configured twice (same sha256)",
                        k.principal
                    ),
                );
            }
            seen.push(&k.digest);
        }
        AuthConfig {
            keys,
            inline,
            keys_file,
        }
    });
    (auth, keys_text, keys_file_error)
}

pub(super) fn resolve_keys(
    p: &mut Problems<'_>,
    key: &str,
    raw: &[Spanned<RawKey>],
    tenants: &[&str],
) -> Vec<ApiKey> {
    let mut keys = Vec::new();
    for (i, entry) in raw.iter().enumerate() {
        let k = entry.get_ref();
        let at = format!("{key}[{i}]");
        let digest = match crate::auth::parse_digest(k.sha256.get_ref()) {
            Ok(d) => Some(d),
            Err(e) => {
                p.at(k.sha256.span(), format!("{at}.sha256"), e);
                None
            }
        };
        let principal = k.principal.get_ref().trim().to_string();
        if principal.is_empty() {
            p.at(
                k.principal.span(),
                format!("{at}.principal"),
                "must not be empty",
            );
        }
        if let Some(t) = &k.tenant {
            if !tenants.contains(&t.get_ref().as_str()) {
                let known = if tenants.is_empty() {
                    "none are configured".to_string()
                } else {
                    format!("configured: {}", tenants.join(", "))
                };
                p.at(
                    t.span(),
                    format!("{at}.tenant"),
                    format!(
                        "unknown tenant '{}' for the key of principal '{principal}' ({known})",
                        t.get_ref()
                    ),
                );
            }
        }
        let requests_per_minute = super::per_minute_limit(
            p,
            &k.requests_per_minute,
            format!("{at}.requests_per_minute"),
            super::MOST_REQUESTS_PER_MINUTE,
        );
        let tokens_per_minute = super::per_minute_limit(
            p,
            &k.tokens_per_minute,
            format!("{at}.tokens_per_minute"),
            super::MOST_TOKENS_PER_MINUTE,
        );
        if let Some(digest) = digest {
            keys.push(ApiKey {
                requests_per_minute,
                tokens_per_minute,
                digest,
                principal,
                tenant: k.tenant.as_ref().map(|t| t.get_ref().clone()),
                labels: k.labels.clone().into_iter().collect(),
            });
        }
    }
    keys
}

/// Read a keys file (`[[keys]]` entries): its keys and its text. Its problems name the keys file.
pub(super) fn load_keys_file(
    file: &Path,
    tenants: &[&str],
) -> Result<(Vec<ApiKey>, String), ConfigError> {
    super::load_named_file(file, "keys file", |p, raw: RawKeysFile| {
        resolve_keys(p, "keys", &raw.keys, tenants)
    })
}
