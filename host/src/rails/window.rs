//! The streaming hold-back, as a pure state machine: model text is pushed in as it arrives; once
//! enough is held (a window plus a step) or the part ends, the relay has the output rail judge
//! what is held and hands the judgement back. Text is released only up to a cut point that lies
//! after the last edit the rail made and at least a window before the end, so a value split
//! across events is judged whole and never sent half-redacted.

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
        let same_suffix = common_suffix(&self.pending, &judged);
        let earliest = len - same_suffix;
        let Some(latest) = len.checked_sub(self.size) else {
            return Release::Wait;
        };
        if earliest > latest {
            return Release::Wait; // an edit near the end: wait for more text
        }
        let cut = cut_point(&self.pending, earliest, latest);
        if cut == 0 {
            return Release::Wait;
        }
        let judged_cut = judged.len() - (len - cut);
        let out = judged[..judged_cut].to_string();
        self.pending = self.pending[cut..].to_string();
        self.released += cut;
        Release::Send(out)
    }
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
