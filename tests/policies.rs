//! `railyard test`: the bundled policies' case files (`policies/tests/`, format in its README)
//! through the real CLI, real plugins and real chains; and what a failing case looks like.

use crate::cli::railyard;
use crate::support::*;

#[test]
fn bundled_policy_cases_pass() {
    let dir = root().join("policies");
    let (code, out, err) = railyard(&["test", "--quiet", dir.to_str().unwrap()], "");
    assert_eq!(code, 0, "{out}{err}");
    let summary = out.lines().last().unwrap_or_default();
    let passed: usize = summary
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(passed >= 60, "too few cases ran: {summary}");
    assert!(summary.contains(" 0 failed"), "{summary}");
}

#[test]
fn a_failing_case_exits_non_zero_with_a_readable_diff() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("railyard.toml"),
        scripted(
            "suffix",
            "[\"input\"]",
            "",
            "{ mode = \"append\", text = \" [checked]\" }",
        ),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("tests")).unwrap();
    let cases = serde_json::json!({"cases": [
        {"name": "right", "rail": "input",
         "payload": {"messages": [{"role": "user", "content": "hi"}]},
         "expect": {"verdict": "modify", "reason_contains": "appended",
                    "messages": [{"role": "user", "content": "hi [checked]"}]}},
        {"name": "wrong edit", "rail": "input",
         "payload": {"messages": [{"role": "user", "content": "hi"}]},
         "expect": {"verdict": "modify", "messages": [{"role": "user", "content": "hi [approved]"}]}},
        {"name": "wrong verdict", "rail": "input",
         "payload": {"messages": [{"role": "user", "content": "hi"}]},
         "expect": {"verdict": "block", "reason_contains": "nope"}},
        {"name": "bad rail", "rail": "sideways", "payload": {"messages": []},
         "expect": {"verdict": "allow"}}
    ]});
    std::fs::write(dir.path().join("tests/cases.json"), cases.to_string()).unwrap();
    // The same format in YAML.
    std::fs::write(
        dir.path().join("tests/more.yaml"),
        "cases:\n  - name: yaml works too\n    rail: input\n    payload:\n      messages:\n        - {role: user, content: yo}\n    expect:\n      verdict: modify\n      messages:\n        - {role: user, content: \"yo [checked]\"}\n",
    )
    .unwrap();
    // Run from inside the folder, as an author would.
    let (code, out, err) = {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_railyard"))
            .arg("test")
            .current_dir(dir.path())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("ok    tests/cases.json  right"), "{out}");
    assert!(out.contains("FAIL  tests/cases.json  wrong edit"), "{out}");
    assert!(
        out.contains("edited messages differ (- expected, + got):"),
        "{out}"
    );
    assert!(
        out.contains("-     \"content\": \"hi [approved]\""),
        "{out}"
    );
    assert!(out.contains("+     \"content\": \"hi [checked]\""), "{out}");
    assert!(out.contains("verdict: expected block, got modify"), "{out}");
    assert!(out.contains("no reason contains \"nope\""), "{out}");
    assert!(out.contains("suffix modify: appended 10 bytes"), "{out}");
    assert!(out.contains("\"rail\" must be one of"), "{out}");
    assert!(
        out.contains("ok    tests/more.yaml  yaml works too"),
        "{out}"
    );
    assert!(out.contains("2 passed, 3 failed (2 case files"), "{out}");
}
