//! A plugin's triggers (`prefilter` in `wit/packed/`): texts one of which every request it acts
//! on contains. On a finished request holding none of them the chain takes the plugin's `allow`
//! without calling it, so a plugin that looks for particular markup costs nothing on the many
//! requests without any (BENCHMARKS.md §37).

use memchr::memmem::Finder;

/// Most triggers a plugin may give.
pub const MAX_TRIGGERS: usize = 32;
/// Longest trigger, in bytes.
pub const MAX_TRIGGER_BYTES: usize = 256;
/// Bytes of a plugin's answer the host reads (wasmtime's hostcall fuel): its most triggers at
/// their longest, and room for each string's and the list's own size.
pub const ANSWER_BYTES: usize = MAX_TRIGGERS * (MAX_TRIGGER_BYTES + 64) + 4096;

/// A plugin's triggers, each ready to be searched for.
pub struct Triggers {
    texts: Vec<String>,
    finders: Box<[Finder<'static>]>,
}

impl Triggers {
    /// The triggers a plugin gave, checked: between 1 and [`MAX_TRIGGERS`] texts of 1 to
    /// [`MAX_TRIGGER_BYTES`] bytes. An empty list would leave the plugin never called, an empty
    /// text would match everything: both are a plugin's mistake, said at load.
    pub fn new(texts: Vec<String>) -> Result<Triggers, String> {
        if texts.is_empty() || texts.len() > MAX_TRIGGERS {
            return Err(format!(
                "its prefilter gave {} triggers (1 to {MAX_TRIGGERS}; none to be called on every request)",
                texts.len()
            ));
        }
        if let Some(t) = texts
            .iter()
            .find(|t| t.is_empty() || t.len() > MAX_TRIGGER_BYTES)
        {
            return Err(format!(
                "its prefilter gave a trigger of {} bytes (1 to {MAX_TRIGGER_BYTES})",
                t.len()
            ));
        }
        let finders = texts
            .iter()
            .map(|t| Finder::new(t.as_bytes()).into_owned())
            .collect();
        Ok(Triggers { texts, finders })
    }

    /// Whether `text` holds one of the triggers.
    pub fn found_in(&self, text: &str) -> bool {
        self.finders
            .iter()
            .any(|f| f.find(text.as_bytes()).is_some())
    }

    /// The triggers, as the plugin gave them.
    pub fn texts(&self) -> &[String] {
        &self.texts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_anywhere_byte_for_byte() {
        let t = Triggers::new(vec!["<tool_call>".into(), "{".into()]).unwrap();
        assert!(t.found_in("a <tool_call>"));
        assert!(t.found_in("{\"name\": 1}"));
        assert!(t.found_in("x{"));
        assert!(!t.found_in("<TOOL_CALL> (case as given)"));
        assert!(!t.found_in("<tool_call (cut)"));
        assert!(!t.found_in(""));
        assert_eq!(t.texts(), ["<tool_call>", "{"]);
    }

    #[test]
    fn a_plugins_mistakes_are_refused() {
        let err = |v: Vec<String>| Triggers::new(v).err().unwrap();
        assert!(err(vec![]).contains("0 triggers"));
        assert!(err(vec!["x".into(); MAX_TRIGGERS + 1]).contains("33 triggers"));
        assert!(err(vec!["a".into(), String::new()]).contains("0 bytes"));
        assert!(err(vec!["a".repeat(MAX_TRIGGER_BYTES + 1)]).contains("257 bytes"));
        assert!(Triggers::new(vec!["a".repeat(MAX_TRIGGER_BYTES); MAX_TRIGGERS]).is_ok());
    }
}
