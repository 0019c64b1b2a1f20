//! `railyard new`: a new plugin project, from the templates in `host/templates/<lang>/`.
//!
//! The Rust, JavaScript and Python templates are the same policy, *deny-phrases*, so that a new
//! plugin starts from working, tested code and the three languages can be benchmarked against
//! each other. The C template is a policy of its own, *path confinement* on the tool_call rail,
//! the kind of matching code teams bring in C (its Rust twin for benchmarks is
//! `plugins/testing/confine-paths`). A project is self-contained: its source, a `build.sh` that leaves the component at
//! `NAME.wasm`, a `railyard.toml` that runs just that plugin, test cases for `railyard test`,
//! a README and a `.gitignore`. The contract, `wit/policy.wit`, is not part of the templates:
//! it is this host's own copy, so a new project always builds against the contract of the
//! `railyard` that created it.
//!
//! The templates are compiled into the binary. In their text, `{{name}}` stands for the plugin
//! name as given (kebab-case, e.g. `deny-phrases`) and `{{snake}}` for its snake_case form
//! (`deny_phrases`, for Rust identifiers and file names).
//!
//! The JavaScript template ships no `package-lock.json`: a lock file written by one npm version
//! on one platform is often refused by `npm ci` elsewhere (optional platform packages missing),
//! so `build.sh` runs `npm install`, which writes one for the new project.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The language of a new plugin project.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Rust with wit-bindgen, built for `wasm32-wasip2`.
    Rust,
    /// JavaScript with componentize-js.
    Js,
    /// Python with componentize-py.
    Python,
    /// C with Debian's clang and wasi-libc, bindings from wit-bindgen.
    C,
}

impl Lang {
    /// Every language, in the order they are listed to users.
    pub const ALL: [Lang; 4] = [Lang::Rust, Lang::Js, Lang::Python, Lang::C];

    /// The spelling used on the command line (`--lang rust|js|python|c`).
    pub fn as_str(self) -> &'static str {
        match self {
            Lang::Rust => "rust",
            Lang::Js => "js",
            Lang::Python => "python",
            Lang::C => "c",
        }
    }

    fn templates(self) -> &'static [Template] {
        match self {
            Lang::Rust => RUST,
            Lang::Js => JS,
            Lang::Python => PYTHON,
            Lang::C => C,
        }
    }
}

impl fmt::Display for Lang {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Lang {
    type Err = String;

    /// `rust`, `js` (or `javascript`), `python` (or `py`), `c`.
    fn from_str(s: &str) -> Result<Lang, String> {
        match s {
            "rust" | "rs" => Ok(Lang::Rust),
            "js" | "javascript" => Ok(Lang::Js),
            "python" | "py" => Ok(Lang::Python),
            "c" => Ok(Lang::C),
            _ => Err(format!(
                "unknown language '{s}' (expected rust, js, python or c)"
            )),
        }
    }
}

/// One file of a template: where it goes in the project, and its text with placeholders.
struct Template {
    path: &'static str,
    text: &'static str,
}

/// A template file stored at `host/templates/<lang>/<src>`, written to `<dest>` in the project.
/// (`.gitignore` is stored as `gitignore`, so it does not apply to the templates themselves.)
macro_rules! template {
    ($lang:literal, $src:literal) => {
        template!($lang, $src => $src)
    };
    ($lang:literal, $src:literal => $dest:literal) => {
        Template {
            path: $dest,
            text: include_str!(concat!("../templates/", $lang, "/", $src)),
        }
    };
}

const RUST: &[Template] = &[
    template!("rust", "Cargo.toml"),
    template!("rust", "rust-toolchain.toml"),
    template!("rust", "src/lib.rs"),
    template!("rust", "build.sh"),
    template!("rust", "railyard.toml"),
    template!("rust", "tests/cases.json"),
    template!("rust", "tests/redact/cases.json"),
    template!("rust", "tests/redact/railyard.toml"),
    template!("rust", "tests/classifier/cases.json"),
    template!("rust", "tests/classifier/railyard.toml"),
    template!("rust", "tests/classifier/redact.toml"),
    template!("rust", "README.md"),
    template!("rust", "gitignore" => ".gitignore"),
];

const JS: &[Template] = &[
    template!("js", "package.json"),
    template!("js", "policy.js"),
    template!("js", "build.sh"),
    template!("js", "railyard.toml"),
    template!("js", "tests/cases.json"),
    template!("js", "tests/redact/cases.json"),
    template!("js", "tests/redact/railyard.toml"),
    template!("js", "tests/classifier/cases.json"),
    template!("js", "tests/classifier/railyard.toml"),
    template!("js", "tests/classifier/redact.toml"),
    template!("js", "README.md"),
    template!("js", "gitignore" => ".gitignore"),
];

const PYTHON: &[Template] = &[
    template!("python", "app.py"),
    template!("python", "requirements.txt"),
    template!("python", "build.sh"),
    template!("python", "railyard.toml"),
    template!("python", "tests/cases.json"),
    template!("python", "tests/redact/cases.json"),
    template!("python", "tests/redact/railyard.toml"),
    template!("python", "tests/classifier/cases.json"),
    template!("python", "tests/classifier/railyard.toml"),
    template!("python", "tests/classifier/redact.toml"),
    template!("python", "README.md"),
    template!("python", "gitignore" => ".gitignore"),
];

const C: &[Template] = &[
    template!("c", "plugin.c"),
    template!("c", "build.sh"),
    template!("c", "railyard.toml"),
    template!("c", "tests/cases.json"),
    template!("c", "tests/block/cases.json"),
    template!("c", "tests/block/railyard.toml"),
    template!("c", "README.md"),
    template!("c", "gitignore" => ".gitignore"),
];

/// The contract every project builds against: the host's own copy, written as it is.
const WIT: &str = include_str!("../../wit/policy.wit");

/// Where the contract goes in a project (every template's build reads `wit/`).
const WIT_PATH: &str = "wit/policy.wit";

/// The script made executable.
const BUILD_SCRIPT: &str = "build.sh";

/// Longest plugin name accepted, in characters.
pub const MAX_NAME_LEN: usize = 64;

/// Checks a plugin name: lowercase kebab-case (`a-z`, `0-9`, single `-` between words),
/// starting with a letter, at most [`MAX_NAME_LEN`] characters.
pub fn validate_name(name: &str) -> Result<(), String> {
    let shape = "a plugin name is lowercase kebab-case: letters a-z, digits and single hyphens \
                 between words, starting with a letter (e.g. deny-phrases)";
    if name.is_empty() {
        return Err("the plugin name is empty".to_string());
    }
    if name.chars().count() > MAX_NAME_LEN {
        return Err(format!(
            "the plugin name is {} characters long; at most {MAX_NAME_LEN} are allowed",
            name.chars().count()
        ));
    }
    if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Err(format!(
            "'{}' does not start with a lowercase letter: {shape}",
            name.escape_debug()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "'{}' contains '{}': {shape}",
            name.escape_debug(),
            c.escape_debug()
        ));
    }
    if name.ends_with('-') || name.contains("--") {
        return Err(format!(
            "'{name}' has a hyphen at the end or two in a row: {shape}"
        ));
    }
    Ok(())
}

/// The snake_case form of a (valid) kebab-case name: `deny-phrases` -> `deny_phrases`.
pub fn snake_case(name: &str) -> String {
    name.replace('-', "_")
}

/// Fills in a template's placeholders.
fn substitute(text: &str, name: &str, snake: &str) -> String {
    text.replace("{{name}}", name).replace("{{snake}}", snake)
}

/// Writes a new `lang` plugin project called `name` into `dest`, which must not exist or be an
/// empty folder. Returns the files written, in order.
pub fn scaffold(lang: Lang, name: &str, dest: &Path) -> Result<Vec<PathBuf>, String> {
    validate_name(name)?;
    let snake = snake_case(name);

    if dest.exists() {
        if !dest.is_dir() {
            return Err(format!("{} exists and is not a folder", dest.display()));
        }
        let mut entries =
            std::fs::read_dir(dest).map_err(|e| format!("cannot read {}: {e}", dest.display()))?;
        if entries.next().is_some() {
            return Err(format!(
                "{} exists and is not empty; give a new or empty folder",
                dest.display()
            ));
        }
    }

    let files = lang
        .templates()
        .iter()
        .map(|t| (t.path, substitute(t.text, name, &snake)))
        .chain(std::iter::once((WIT_PATH, WIT.to_string())));
    let mut written = Vec::new();
    for (rel, text) in files {
        let path = dest.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        if rel == BUILD_SCRIPT {
            make_executable(&path)?;
        }
        written.push(path);
    }
    Ok(written)
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("cannot make {} executable: {e}", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> Result<(), String> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh, empty-to-be folder under the system temp folder.
    fn temp_dir(tag: &str) -> PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "railyard-scaffold-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn names_that_are_accepted() {
        for name in [
            "deny-phrases",
            "a",
            "pii2",
            "a1-b2-c3",
            &"x".repeat(MAX_NAME_LEN),
        ] {
            assert_eq!(validate_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn names_that_are_refused_say_why() {
        let cases = [
            ("", "empty"),
            ("Deny", "does not start with a lowercase letter"),
            ("1abc", "does not start with a lowercase letter"),
            ("-abc", "does not start with a lowercase letter"),
            ("deny_phrases", "contains '_'"),
            ("deny phrases", "contains ' '"),
            ("dény", "contains 'é'"),
            ("denY", "contains 'Y'"),
            ("deny-", "hyphen at the end"),
            ("deny--phrases", "two in a row"),
        ];
        for (name, why) in cases {
            let err = validate_name(name).unwrap_err();
            assert!(err.contains(why), "{name:?}: {err}");
        }
        let long = "x".repeat(MAX_NAME_LEN + 1);
        assert!(validate_name(&long).unwrap_err().contains("at most 64"));
    }

    #[test]
    fn placeholders_are_substituted() {
        assert_eq!(snake_case("deny-phrases"), "deny_phrases");
        assert_eq!(
            substitute("{{name}}: {{snake}}.wasm, {{name}}", "a-b", "a_b"),
            "a-b: a_b.wasm, a-b"
        );
    }

    #[test]
    fn every_template_is_fully_substituted() {
        for lang in Lang::ALL {
            for t in lang.templates() {
                let text = substitute(t.text, "deny-phrases", "deny_phrases");
                assert!(
                    !text.contains("{{"),
                    "{lang}/{}: a placeholder is left",
                    t.path
                );
            }
        }
    }

    #[test]
    fn languages_share_the_same_test_cases() {
        // The Rust, JavaScript and Python templates implement one policy; their cases must not
        // drift apart. (The C template has its own policy and cases.)
        let case_files = [
            "tests/cases.json",
            "tests/redact/cases.json",
            "tests/classifier/cases.json",
        ];
        for path in case_files {
            let text = |lang: Lang| {
                lang.templates()
                    .iter()
                    .find(|t| t.path == path)
                    .map(|t| t.text)
                    .unwrap_or_else(|| panic!("{lang} has no {path}"))
            };
            assert_eq!(text(Lang::Rust), text(Lang::Js), "{path}");
            assert_eq!(text(Lang::Rust), text(Lang::Python), "{path}");
            serde_json::from_str::<serde_json::Value>(text(Lang::Rust))
                .unwrap_or_else(|e| panic!("{path} is not JSON: {e}"));
        }
    }

    #[test]
    fn languages_parse_and_print() {
        for lang in Lang::ALL {
            assert_eq!(lang.as_str().parse::<Lang>(), Ok(lang));
        }
        assert_eq!("javascript".parse::<Lang>(), Ok(Lang::Js));
        assert!("go"
            .parse::<Lang>()
            .unwrap_err()
            .contains("expected rust, js, python or c"));
    }

    #[test]
    fn scaffold_writes_a_project() {
        for lang in Lang::ALL {
            let dir = temp_dir(lang.as_str());
            let written = scaffold(lang, "deny-phrases", &dir).unwrap();
            assert_eq!(written.len(), lang.templates().len() + 1);
            for path in &written {
                assert!(path.is_file(), "{}", path.display());
            }
            assert_eq!(
                std::fs::read_to_string(dir.join("wit/policy.wit")).unwrap(),
                WIT
            );
            assert!(dir.join(".gitignore").is_file());
            let toml = std::fs::read_to_string(dir.join("railyard.toml")).unwrap();
            assert!(toml.contains("path = \"deny-phrases.wasm\""), "{lang}");
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(dir.join("build.sh"))
                    .unwrap()
                    .permissions()
                    .mode();
                assert_eq!(mode & 0o111, 0o111, "{lang}: build.sh is not executable");
            }
            if lang == Lang::Rust {
                let lib = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
                assert!(lib.contains("name = \"deny_phrases\""));
            }

            // Not over a project that is already there.
            let err = scaffold(lang, "other", &dir).unwrap_err();
            assert!(err.contains("is not empty"), "{err}");
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn scaffold_refuses_bad_names_and_destinations() {
        let dir = temp_dir("refuse");
        assert!(scaffold(Lang::Rust, "Bad_Name", &dir).is_err());
        assert!(!dir.exists(), "nothing is written for a refused name");

        // An empty folder is fine; a file is not.
        std::fs::create_dir_all(&dir).unwrap();
        scaffold(Lang::Js, "x", &dir).unwrap();
        let file = dir.join("package.json");
        assert!(scaffold(Lang::Python, "x", &file)
            .unwrap_err()
            .contains("is not a folder"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
