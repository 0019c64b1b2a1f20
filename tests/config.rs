//! Config errors name the file, the line or key, and what was expected; nothing half-loads.

use crate::support::*;

#[test]
fn plugin_config_is_validated_against_the_plugins_schema() {
    let err = policy_error(&scripted("p", "[\"input\"]", "", "{ mode = \"dance\" }"));
    assert!(
        err.contains("railyard.toml:6: plugins[0] (p).config: at /mode:"),
        "{err}"
    );
    assert!(err.contains("\"dance\""), "{err}");
}

#[test]
fn configure_refusal_is_a_config_error() {
    let err = policy_error(&scripted(
        "p",
        "[\"input\"]",
        "",
        "{ mode = \"configure-error\" }",
    ));
    assert!(
        err.contains("plugins[0] (p).config: plugin refused its config: configure refused"),
        "{err}"
    );
}

#[test]
fn missing_plugin_file_names_path_and_line() {
    let err = policy_error("\n[[plugins]]\nname = \"ghost\"\npath = \"nowhere/ghost.wasm\"\n");
    assert!(
        err.contains("railyard.toml:2: plugins[0] (ghost).path: cannot read plugin"),
        "{err}"
    );
    assert!(err.contains("nowhere/ghost.wasm"), "{err}");
}

#[test]
fn wrong_contract_plugin_in_config_is_refused() {
    let toml = format!(
        "[[plugins]]\nname = \"future\"\npath = \"{}\"\n",
        plugin("wrong_version").display()
    );
    let err = policy_error(&toml);
    assert!(
        err.contains(
            "built against railyard:policy@9.9.0, but this Railyard speaks railyard:policy@0.3.0"
        ),
        "{err}"
    );
}

#[test]
fn rail_the_plugin_does_not_handle() {
    let toml = format!(
        "[[plugins]]\nname = \"fs\"\npath = \"{}\"\nrails = [\"output\"]\n",
        plugin("tool_linkage").display()
    );
    let err = policy_error(&toml);
    assert!(
        err.contains("does not handle the output rail (it handles: tool_result)"),
        "{err}"
    );
}

#[test]
fn memo_only_for_a_plugin_on_the_tools_rail() {
    let toml = format!(
        "[[plugins]]\nname = \"links\"\npath = \"{}\"\nmemo = true\n",
        plugin("tool_linkage").display()
    );
    let err = policy_error(&toml);
    assert!(
        err.contains("railyard.toml:4: plugins[0] (links).memo: plugin 'tool-linkage' does not handle the tools rail"),
        "{err}"
    );
    let toml = format!(
        "[[plugins]]\nname = \"tools\"\npath = \"{}\"\nmemo = \"yes\"\n",
        plugin("allowlist").display()
    );
    let err = railyard::config::Config::parse(std::path::Path::new("railyard.toml"), &toml)
        .expect_err("memo is a boolean")
        .to_string();
    assert!(
        err.contains(
            "railyard.toml:4: plugins[0].memo: invalid type: string \"yes\", expected a boolean"
        ),
        "{err}"
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let toml = format!(
        "{}{}[[plugins]]\nname = \"ghost\"\npath = \"ghost.wasm\"\n",
        scripted("a", "[\"input\"]", "", "{ mode = \"nope\" }"),
        scripted("b", "[\"input\"]", "", "{ mode = \"configure-error\" }"),
    );
    let err = policy_error(&toml);
    assert_eq!(err.lines().count(), 3, "{err}");
}

#[test]
fn syntax_and_type_errors_name_the_line() {
    let err =
        policy_error("[server]\nlisten = \"127.0.0.1:1\"\n\n[defaults]\ntimeout_ms = \"fast\"\n");
    assert!(err.contains("railyard.toml:5: "), "{err}");
    let err = policy_error("[defaults]\nisolation = \"shared\"\n");
    assert!(
        err.contains("railyard.toml:2: ") && err.contains("per-call"),
        "{err}"
    );
}
