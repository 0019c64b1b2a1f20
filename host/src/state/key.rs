//! The store's key space, written in one place: every key the host files is made here. Each kind
//! has its own prefix, and every name in a key that config or a caller chose (a tenant, a
//! principal, a plugin's own key) is hashed or comes last, so no key of one kind or owner can be
//! spelled as another's (a principal `a:b` is not tenant `a`'s principal `b`).

use crate::util::sha256_hex;

/// A tenant's tag in keys: the first 16 hex digits of its name's SHA-256.
fn tenant(name: &str) -> String {
    sha256_hex(name.as_bytes())[..16].to_string()
}

/// Whose bucket of requests or tokens a key names.
#[derive(Debug, Clone, Copy)]
pub enum Owner<'a> {
    /// A tenant's (`[tenants.NAME]`).
    Tenant(&'a str),
    /// One API key's (its `[[keys]]` entry), by the key's id ([`crate::auth::Caller::key_id`]):
    /// two keys of one principal name, in one tenant or two, are two buckets.
    Key(&'a str),
}

impl Owner<'_> {
    fn tag(self) -> String {
        match self {
            Owner::Tenant(t) => format!("tenant:{}", tenant(t)),
            Owner::Key(id) => format!("key:{id}"),
        }
    }
}

/// The bucket of requests a minute (`requests_per_minute`).
pub fn requests(owner: Owner<'_>) -> String {
    format!("rpm:{}", owner.tag())
}

/// The bucket of tokens a minute (`tokens_per_minute`).
pub fn tokens(owner: Owner<'_>) -> String {
    format!("tpm:{}", owner.tag())
}

/// A tenant's leases of requests in flight (`max_concurrent`).
pub fn in_flight(tenant_name: &str) -> String {
    format!("inflight:tenant:{}", tenant(tenant_name))
}

/// A tenant's bucket of guard-model calls a minute.
pub fn guard_calls(tenant_name: &str) -> String {
    format!("guard-calls:tenant:{}", tenant(tenant_name))
}

/// A tenant's bucket of guard-model milliseconds waited a minute.
pub fn guard_wait(tenant_name: &str) -> String {
    format!("guard-wait:tenant:{}", tenant(tenant_name))
}

/// An agent session's reads (`flow`'s memory on MCP): `who` is the digest of its principal and
/// session.
pub fn flow(tenant_name: &str, who: &str) -> String {
    format!("flow:{}:{who}", tenant(tenant_name))
}

/// A conversation's vault between its requests (`caps::vault::thread`): `who` is the digest of
/// its principal and the id that names it.
pub fn vault(tenant_name: &str, who: &str) -> String {
    format!("vault:{}:{who}", tenant(tenant_name))
}

/// A plugin entry's own key `key` for `tenant_name` (the `state` interface).
pub fn plugin(entry: &str, tenant_name: &str, key: &str) -> String {
    // As filed since contract 0.3 (a plugin's data outlives an upgrade). An entry's name is a
    // config identifier, without `:`.
    format!("plugin:{entry}:{}:{key}", tenant(tenant_name))
}

/// An approval request, by its id (`apr_` and hex digits, checked before it reaches here).
pub fn approval(id: &str) -> String {
    format!("approval:id:{id}")
}

/// The current request of a binding (the digest of what a grant is bound to).
pub fn approval_for(binding: &str) -> String {
    format!("approval:for:{binding}")
}

/// Whether a granted request was spent.
pub fn approval_used(id: &str) -> String {
    format!("approval:used:{id}")
}

/// Whether a request was decided.
pub fn approval_decided(id: &str) -> String {
    format!("approval:decided:{id}")
}

/// The set of a tenant's undecided requests (what approvers list).
pub fn approvals_pending(tenant_name: &str) -> String {
    format!("approval:pending:{}", tenant(tenant_name))
}

/// The set of one asker's undecided requests in a tenant (bounded, so one principal cannot fill
/// the approvers' list).
pub fn approvals_asked(tenant_name: &str, principal: Option<&str>) -> String {
    format!(
        "approval:asked:{}:{}",
        tenant(tenant_name),
        &sha256_hex(principal.unwrap_or("").as_bytes())[..16]
    )
}

/// The tools pinned for `tenant_name` from `source` (an MCP server, or `app:<principal>` on
/// the model doors).
pub fn pins(tenant_name: &str, source: &str) -> String {
    format!(
        "pins:{}:{}",
        tenant(tenant_name),
        &sha256_hex(source.as_bytes())[..32]
    )
}

/// The sources `tenant_name` has pins of (what the console lists).
pub fn pin_sources(tenant_name: &str) -> String {
    format!("pins-sources:{}", tenant(tenant_name))
}

/// A tool definition a pin names, by its digest (hex, checked before it reaches here).
pub fn pinned_definition(tenant_name: &str, digest: &str) -> String {
    format!("pin-def:{}:{digest}", tenant(tenant_name))
}

/// Where what `tenant_name` holds in a shared store is counted (its keys by when they end, their
/// sizes, the sum): `owned:<tag>` and a part.
pub fn owned(tenant_name: &str) -> String {
    format!("owned:{}", tenant(tenant_name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_chosen_elsewhere_cannot_spell_another_owners_key() {
        // A tenant named like another kind's key, a principal with the separator.
        assert_ne!(requests(Owner::Tenant("key:x")), requests(Owner::Key("x")));
        assert_ne!(plugin("a", "t", "k"), plugin("a", "u", "k"));
        assert_ne!(approvals_asked("t", Some("a")), approvals_asked("t", None));
        assert_ne!(tokens(Owner::Tenant("t")), requests(Owner::Tenant("t")));
        assert_ne!(in_flight("a"), in_flight("b"));
    }
}
