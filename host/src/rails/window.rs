//! The streaming hold-back, as a pure state machine: model text is pushed in as it arrives; once
//! enough is held (a window plus a step) or the part ends, the relay has the output rail judge
//! what is held and hands the judgement back. Text is released only up to a cut point at least a
//! window before the end, and either after the last edit the rail made (when every edit lies
//! that far back) or before its first one, so a value split across events is judged whole and
//! never sent half-redacted, and text a policy holds back by editing it out is never released.

/// Text beyond the window accumulated before the output rail runs again: re-judging on every
/// tiny event would cost a plugin call per token.
pub const STEP_BYTES: usize = 64;

/// What to do after a judgement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    /// Send this text (possibly empty).
    Send(String),
    /// Hold everything until more text arrives.
    Wait,
    /// A rejection replaced the rest of the part: send this, then nothing more of it.
    Silenced(String),
}

/// One text part's held-back text.
#[derive(Debug, Clone)]
pub struct Window {
    size: usize,
    pending: String,
    released: usize,
    silenced: bool,
}

impl Window {
    /// A window holding back `size` bytes.
    pub fn new(size: usize) -> Window {
        Window {
            size,
            pending: String::new(),
            released: 0,
            silenced: false,
        }
    }

    /// More model text.
    pub fn push(&mut self, text: &str) {
        if !self.silenced {
            self.pending.push_str(text);
        }
    }

    /// Whether the held text should be judged now (`last`: the part is over).
    pub fn due(&self, last: bool) -> bool {
        !self.silenced
            && !self.pending.is_empty()
            && (last || self.pending.len() >= self.size + STEP_BYTES)
    }

    /// The held text (what the output rail judges).
    pub fn pending(&self) -> &str {
        &self.pending
    }

    /// Everything held, unjudged (when the output rail does not run).
    pub fn take_all(&mut self) -> String {
        let text = std::mem::take(&mut self.pending);
        self.released += text.len();
        text
    }

    /// Bytes of model text released so far.
    pub fn released(&self) -> usize {
        self.released
    }

    /// Whether a rejection silenced the part.
    pub fn silenced(&self) -> bool {
        self.silenced
    }

    /// The rail judged [`Window::pending`] as `judged`; `rejected`: its verdict was reject.
    pub fn judged(&mut self, judged: String, rejected: bool, last: bool) -> Release {
        let len = self.pending.len();
        if rejected {
            // The rejection message replaces the rest of this part.
            self.silenced = true;
            self.pending.clear();
            return Release::Silenced(judged);
        }
        if last {
            self.released += len;
            self.pending.clear();
            return Release::Send(judged);
        }
        let Some(latest) = len.checked_sub(self.size) else {
            return Release::Wait;
        };
        // The edited region of the held text is [first, last_end): the longest common prefix,
        // then the longest common suffix of what is left (so the two never overlap: a tail the
        // rail cut off is an edit reaching the end, however its last bytes happen to read).
        let first = common_prefix(&self.pending, &judged);
        let same_suffix = common_suffix(&self.pending[first..], &judged[first..]);
        let last_end = len - same_suffix;
        let cut = if first == len && judged.len() == len {
            cut_point(&self.pending, 0, latest) // no edit
        } else if last_end <= latest {
            // Every edit lies a window before the end: release through them.
            cut_point(&self.pending, last_end, latest)
        } else {
            // An edit near the end (maybe a value still arriving, or text held back on purpose):
            // only the untouched text before the first edit may go.
            cut_point(&self.pending, 0, first.min(latest))
        };
        if cut == 0 {
            return Release::Wait;
        }
        let judged_cut = if cut <= first {
            cut
        } else {
            judged.len() - (len - cut)
        };
        let out = judged[..judged_cut].to_string();
        self.pending = self.pending[cut..].to_string();
        self.released += cut;
        Release::Send(out)
    }
}

/// Length in bytes of the longest common prefix of `a` and `b`, on a char boundary of both.
fn common_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while n > 0 && !(a.is_char_boundary(n) && b.is_char_boundary(n)) {
        n -= 1;
    }
    n
}

/// Length in bytes of the longest common suffix of `a` and `b`, on a char boundary of both.
fn common_suffix(a: &str, b: &str) -> usize {
    let mut n = a
        .bytes()
        .rev()
        .zip(b.bytes().rev())
        .take_while(|(x, y)| x == y)
        .count();
    while n > 0 && !(a.is_char_boundary(a.len() - n) && b.is_char_boundary(b.len() - n)) {
        n -= 1;
    }
    n
}

/// Where to cut `text` in `[earliest, latest]`: just after the last whitespace there, else at
/// `latest` (on a char boundary).
fn cut_point(text: &str, earliest: usize, latest: usize) -> usize {
    let region = &text.as_bytes()[earliest..latest];
    if let Some(pos) = region.iter().rposition(|b| b.is_ascii_whitespace()) {
        return earliest + pos + 1;
    }
    let mut cut = latest;
    while cut > earliest && !text.is_char_boundary(cut) {
        cut -= 1;
    }
    if text.is_char_boundary(cut) {
        cut
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_and_cut() {
        assert_eq!(common_suffix("mail a@b.co now", "mail [EMAIL] now"), 4);
        assert_eq!(common_suffix("héllo", "hello"), 3);
        assert_eq!(cut_point("one two three", 0, 9), 8);
        assert_eq!(cut_point("onetwothree", 2, 9), 9);
    }

    /// Judge with a rail that redacts every "SECRET".
    fn judge(w: &mut Window, last: bool) -> Release {
        let judged = w.pending().replace("SECRET", "[X]");
        w.judged(judged, false, last)
    }

    #[test]
    fn holds_a_window_and_releases_before_it() {
        let mut w = Window::new(16);
        w.push(&"word ".repeat(10));
        assert!(!w.due(false), "50 bytes < window + step");
        w.push(&"word ".repeat(10));
        assert!(w.due(false));
        let Release::Send(out) = judge(&mut w, false) else {
            panic!("released nothing")
        };
        assert!(out.len() <= 100 - 16 && out.ends_with(' '), "{out:?}");
        assert_eq!(w.released(), out.len());
        assert_eq!(w.pending().len(), 100 - out.len());
    }

    #[test]
    fn never_releases_part_of_an_edited_value() {
        let mut w = Window::new(16);
        w.push(&format!("{}SECRET", "a ".repeat(40)));
        // The edit sits inside the last window: nothing after it may go, and it is not cut.
        match judge(&mut w, false) {
            Release::Send(out) => assert!(!out.contains("SEC") && !out.contains('['), "{out:?}"),
            Release::Wait => {}
            other => panic!("{other:?}"),
        }
        w.push(" and more words to push the edit out of the window");
        let mut sent = String::new();
        while w.due(false) {
            match judge(&mut w, false) {
                Release::Send(out) => sent.push_str(&out),
                _ => break,
            }
        }
        if let Release::Send(out) = judge(&mut w, true) {
            sent.push_str(&out);
        }
        assert!(sent.contains("[X]") && !sent.contains("SECRET"), "{sent}");
    }

    #[test]
    fn text_held_back_by_editing_it_out_is_never_released() {
        // The rail edits out everything from an unfinished marker; the text before the marker
        // ends exactly like the held tail, which a suffix-first diff would take for unchanged.
        let tail = "z".repeat(40);
        let mut w = Window::new(16);
        w.push(&format!("intro {tail}<call>{tail}"));
        let hold = |w: &mut Window| {
            let p = w.pending().to_string();
            let kept = p.find("<call>").map_or(p.clone(), |i| p[..i].to_string());
            w.judged(kept, false, false)
        };
        let mut sent = String::new();
        if let Release::Send(out) = hold(&mut w) {
            sent.push_str(&out);
        }
        assert!(!sent.contains("<call>"), "{sent:?}");
        assert!(w.pending().contains("<call>"), "the marker is still held");
        w.push(" end");
        if let Release::Send(out) = hold(&mut w) {
            sent.push_str(&out);
        }
        assert!(!sent.contains("<call>") && w.pending().contains("<call>"));
        assert_eq!(sent.len(), w.released(), "released text was not edited");
    }

    #[test]
    fn releases_the_untouched_text_before_an_edit_near_the_end() {
        let mut w = Window::new(16);
        w.push(&format!("{}SECRET", "word ".repeat(20)));
        let Release::Send(out) = judge(&mut w, false) else {
            panic!("nothing released")
        };
        assert!(
            !out.is_empty() && !out.contains('S') && !out.contains('['),
            "{out:?}"
        );
        assert!(w.pending().ends_with("SECRET"));
    }

    #[test]
    fn a_rejection_silences_the_rest() {
        let mut w = Window::new(16);
        w.push("anything");
        assert_eq!(
            w.judged("[withheld]".into(), true, false),
            Release::Silenced("[withheld]".into())
        );
        w.push("more");
        assert!(!w.due(true) && w.silenced());
    }
}
