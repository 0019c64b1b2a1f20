//! Config errors and defaults.

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(Path::new("/etc/railyard/railyard.toml"), text)
}

#[test]
fn defaults_and_relative_paths() {
    let c = parse("[[plugins]]\nname = \"a\"\npath = \"a.wasm\"\n").unwrap();
    assert_eq!(c.plugins[0].path, Path::new("/etc/railyard/a.wasm"));
    assert_eq!(c.plugins[0].on_error, OnError::Block);
    assert_eq!(c.server.on_block, OnBlock::Refuse);
    assert!(!c.server.allow_rail_overrides);
}

#[test]
fn syntax_error_names_file_and_line() {
    let e = parse("[server]\nlisten = \"x\"\nrefusal = \n").unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("/etc/railyard/railyard.toml:3: "),
        "{text}"
    );
}

/// #51: a value of the wrong type names its key, not only its line.
#[test]
fn a_type_error_names_the_key() {
    for (text, want) in [
        ("[defaults]\ntimeout_ms = \"100ms\"\n", ":2: defaults.timeout_ms: invalid type"),
        (
            "[[plugins]]\nname = \"a\"\npath = \"a.wasm\"\n\n[[plugins]]\nname = \"b\"\npath = \"b.wasm\"\nmemory_mb = \"lots\"\n",
            ":8: plugins[1].memory_mb: invalid type",
        ),
        ("[server]\nlisten = 5\n", ":2: server.listen: invalid type"),
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}

#[test]
fn unknown_key_is_an_error() {
    let e = parse("[server]\nlistne = \"x\"\n").unwrap_err().to_string();
    assert!(e.contains(":2:") && e.contains("listne"), "{e}");
}

#[test]
fn all_semantic_problems_at_once() {
    let e = parse(
        "[[plugins]]\nname = \"Bad Name\"\npath = \"a.wasm\"\nrails = [\"inptu\"]\ntimeout_ms = 0\n\n[[plugins]]\nname = \"b\"\npath = \"b.wasm\"\nmemory_mb = 99999\n",
    )
    .unwrap_err();
    let keys: Vec<_> = e
        .problems
        .iter()
        .map(|p| (p.line, p.key.as_str()))
        .collect();
    assert_eq!(
        keys,
        vec![
            (Some(2), "plugins[0].name"),
            (Some(4), "plugins[0].rails"),
            (Some(5), "plugins[0].timeout_ms"),
            (Some(10), "plugins[1].memory_mb"),
        ],
        "{e}"
    );
    assert!(e.to_string().contains("unknown rail 'inptu'"));
}

#[test]
fn config_tools_are_checked() {
    let e =
        parse("[[tools]]\ntype = \"function\"\nfunction = { description = \"x\" }\n").unwrap_err();
    assert!(e.to_string().contains("tools[0].function.name"), "{e}");
}

#[test]
fn config_tools_may_declare_a_result_schema() {
    let c = parse("[[tools]]\ntype = \"function\"\nfunction = { name = \"t\" }\nresult_schema = { type = \"object\" }\n").unwrap();
    assert_eq!(
        c.tools[0].result_schema,
        Some(crate::model::Schema::of(
            &serde_json::json!({"type": "object"})
        ))
    );
    let e = parse(
        "[[tools]]\ntype = \"function\"\nfunction = { name = \"t\" }\nresult_schema = \"object\"\n",
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("tools[0].result_schema: must be a JSON Schema"),
        "{e}"
    );
    let e = parse("[[tools]]\ntype = \"web_search\"\nresult_schema = {}\n").unwrap_err();
    assert!(e.to_string().contains("only function tools"), "{e}");
}

#[test]
fn keys_and_tenants_are_checked() {
    let hex = "ab".repeat(32);
    let e = parse(&format!(
        "[auth]\n[[auth.keys]]\nsha256 = \"{hex}\"\nprincipal = \"a\"\ntenant = \"nope\"\n\n[[auth.keys]]\nsha256 = \"xyz\"\nprincipal = \" \"\n\n[tenants.t]\nchains = {{ tool_call = [\"ghost\"] }}\nextend = {{ tool_call = [] }}\n\n[backend]\nforward_client_authorization = true\n"
    ))
    .unwrap_err();
    let text = e.to_string();
    for expected in [
        ":5: auth.keys[0].tenant: unknown tenant 'nope' for the key of principal",
        ":8: auth.keys[1].sha256: must be the SHA-256",
        ":9: auth.keys[1].principal: must not be empty",
        "tenants.t.chains.tool_call: no plugin named 'ghost'",
        "both replaced (chains) and extended (extend)",
        "backend.forward_client_authorization: cannot be true while [auth] is on",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
}

#[test]
fn open_without_auth_and_tenant_defaults() {
    let c = parse("[server]\nmax_body_bytes = 100\n[tenants.t]\nmax_concurrent = 3\n").unwrap();
    assert!(c.auth.is_none());
    assert_eq!(c.tenants[0].max_body_bytes, 100);
    assert_eq!(c.tenants[0].max_concurrent, Some(3));
    assert!(parse("[tenants.default]\n")
        .unwrap_err()
        .to_string()
        .contains("reserved"));
}

#[test]
fn workers_default_to_one_per_cpu_and_are_bounded() {
    assert_eq!(parse("").unwrap().startup.workers, 0);
    assert_eq!(parse("[server]\nworkers = 3\n").unwrap().startup.workers, 3);
    let e = parse("[server]\nworkers = 5000\n").unwrap_err().to_string();
    assert!(e.contains(":2:") && e.contains("server.workers"), "{e}");
}

#[test]
fn auth_must_be_stated_and_a_reload_cannot_open_the_daemon() {
    let load = parse;
    let silent = load("").unwrap();
    let err = silent.check_auth(None).unwrap_err().to_string();
    assert!(
        err.contains("no [auth] table") && err.contains("open = true"),
        "{err}"
    );
    let open = load("[auth]\nopen = true\n").unwrap();
    assert!(open.auth.is_none());
    open.check_auth(None).unwrap();
    open.check_auth(Some(&open)).unwrap();
    let keys = load(&format!(
        "[auth]\n[[auth.keys]]\nsha256 = \"{}\"\nprincipal = \"p\"\n",
        crate::auth::hash_hex("k")
    ))
    .unwrap();
    keys.check_auth(None).unwrap();
    let err = open.check_auth(Some(&keys)).unwrap_err().to_string();
    assert!(err.contains("cannot turn authentication off"), "{err}");
    let err = silent.check_auth(Some(&keys)).unwrap_err().to_string();
    assert!(err.contains("no [auth] table"), "{err}");
    let both = load(&format!(
        "[auth]\nopen = true\n[[auth.keys]]\nsha256 = \"{}\"\nprincipal = \"p\"\n",
        crate::auth::hash_hex("k")
    ))
    .unwrap_err()
    .to_string();
    assert!(both.contains("auth.open"), "{both}");
}
