//! The streaming hold-back, as a pure state machine: model text is pushed in as it arrives; once
//! enough is held (a window plus a step) or the reply ends, the relay has the output rail judge
//! what is held and hands the judgement back. Text is released only up to a cut point at least a
//! window before the end, and either after the last edit the rail made (when every edit lies
//! that far back) or before its first one, so a value split across events is judged whole and
//! never sent half-redacted, and text a policy holds back by editing it out is never released.
//!
//! A cut falls after whitespace, else where a run of printable ASCII (what secrets, tokens and
//! keys are made of) starts or ends, never inside one: a run longer than the window (a 700-byte
//! token streamed a byte at a time) is held until it ends and judged whole. The relay bounds how
//! much may be held that way.
//!
//! One window may hold the text of several parts (a Responses message's `output_text` parts,
//! Anthropic text blocks: what a client reads as one text), so a value split across two parts is
//! judged whole too. It then also holds *marks*: whatever must reach the client after the text
//! before it (the end of a part, events that came after it), released in order with the text.

use crate::codec::stream::Part;
use std::collections::VecDeque;

/// Text beyond the window accumulated before the output rail runs again: re-judging on every
/// tiny event would cost a plugin call per token.
pub const STEP_BYTES: usize = 64;

/// What a judgement releases, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out<E> {
    /// Text of `part` to send.
    Text(Part, String),
    /// A mark whose text before it has all been sent.
    Mark(E),
}

#[derive(Debug, Clone)]
enum Item<E> {
    /// `len` bytes of the held text belong to `part`.
    Text {
        part: Part,
        len: usize,
    },
    Mark(E),
}

/// The held-back text of one lane (one text part, or parts a client reads as one text).
#[derive(Debug, Clone)]
pub struct Window<E> {
    size: usize,
    pending: String,
    /// What `pending` is made of, in order, and the marks between.
    items: VecDeque<Item<E>>,
    released: usize,
    silenced: bool,
    /// How much was held when a judgement last released nothing: a long hold is judged again
    /// in growing steps, so holding n bytes costs judging O(n) bytes, not O(n²).
    waited: usize,
}

impl<E> Window<E> {
    /// A window holding back `size` bytes.
    pub fn new(size: usize) -> Window<E> {
        Window {
            size,
            pending: String::new(),
            items: VecDeque::new(),
            released: 0,
            silenced: false,
            waited: 0,
        }
    }

    /// More model text, of `part`.
    pub fn push(&mut self, part: Part, text: &str) {
        if self.silenced || text.is_empty() {
            return;
        }
        self.pending.push_str(text);
        match self.items.back_mut() {
            Some(Item::Text { part: p, len }) if *p == part => *len += text.len(),
            _ => self.items.push_back(Item::Text {
                part,
                len: text.len(),
            }),
        }
    }

    /// `mark` must reach the client after the text held so far: it is held with it, or given
    /// back when nothing is held (send it now).
    pub fn mark(&mut self, mark: E) -> Option<E> {
        if self.items.is_empty() {
            return Some(mark);
        }
        self.items.push_back(Item::Mark(mark));
        None
    }

    /// Whether marks are held (what comes after them must wait too).
    pub fn holds_marks(&self) -> bool {
        self.items.iter().any(|i| matches!(i, Item::Mark(_)))
    }

    /// Whether the held text should be judged now (`last`: the reply is over).
    pub fn due(&self, last: bool) -> bool {
        let len = self.pending.len();
        !self.silenced
            && len > 0
            && (last
                || (len >= self.size + STEP_BYTES
                    && len >= self.waited + STEP_BYTES.max(self.waited / 4)))
    }

    /// The held text (what the output rail judges).
    pub fn pending(&self) -> &str {
        &self.pending
    }

    /// Everything held, unjudged (when the output rail does not run), and the marks.
    pub fn take_all(&mut self) -> Vec<Out<E>> {
        let len = self.pending.len();
        let text = std::mem::take(&mut self.pending);
        self.released += len;
        self.waited = 0;
        let mut out = Vec::new();
        let mut at = 0;
        for item in std::mem::take(&mut self.items) {
            match item {
                Item::Text { part, len } => {
                    out.push(Out::Text(part, text[at..at + len].to_string()));
                    at += len;
                }
                Item::Mark(m) => out.push(Out::Mark(m)),
            }
        }
        out
    }

    /// Bytes of model text released so far.
    pub fn released(&self) -> usize {
        self.released
    }

    /// Whether a rejection silenced the lane.
    pub fn silenced(&self) -> bool {
        self.silenced
    }

    /// The rail judged [`Window::pending`] as `judged`; `rejected`: its verdict was reject;
    /// `last`: the reply is over. What may go now, in order (nothing: wait for more).
    pub fn judged(&mut self, judged: String, rejected: bool, last: bool) -> Vec<Out<E>> {
        let len = self.pending.len();
        if rejected {
            // The rejection message replaces the rest of the lane; the marks still go.
            self.silenced = true;
            self.pending.clear();
            self.released += len;
            let mut out = Vec::new();
            let mut text = Some(judged);
            for item in std::mem::take(&mut self.items) {
                match item {
                    Item::Text { part, .. } => {
                        if let Some(t) = text.take() {
                            out.push(Out::Text(part, t));
                        }
                    }
                    Item::Mark(m) => out.push(Out::Mark(m)),
                }
            }
            return out;
        }
        // The edited region of the held text is [first, last_end): the longest common prefix,
        // then the longest common suffix of what is left (so the two never overlap: a tail the
        // rail cut off is an edit reaching the end, however its last bytes happen to read).
        let first = common_prefix(&self.pending, &judged);
        let same_suffix = common_suffix(&self.pending[first..], &judged[first..]);
        let last_end = len - same_suffix;
        let cut = if last {
            len
        } else {
            let Some(latest) = len.checked_sub(self.size) else {
                self.waited = len;
                return Vec::new();
            };
            let before_first = || cut_point(&self.pending, 0, first.min(latest));
            let found = if first == len && judged.len() == len {
                cut_point(&self.pending, 0, latest) // no edit
            } else if last_end <= latest {
                // Every edit lies a window before the end: release through them, else up to
                // the first.
                cut_point(&self.pending, last_end, latest).or_else(before_first)
            } else {
                // An edit near the end (maybe a value still arriving, or text held back on
                // purpose): only the untouched text before the first edit may go.
                before_first()
            };
            match found {
                Some(cut) if cut > 0 => cut,
                _ => {
                    self.waited = len;
                    return Vec::new();
                }
            }
        };
        self.waited = 0;
        // Where an offset of the held text lands in the judged text: the edited region's
        // replacement goes to the part where the edit starts (what a rail added at the very
        // end, to the last).
        let jl = judged.len();
        let map = |o: usize| {
            if o == len {
                jl
            } else if o <= first {
                o
            } else if o >= last_end {
                o + jl - len
            } else {
                jl - same_suffix
            }
        };
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(item) = self.items.front_mut() {
            match item {
                Item::Mark(_) => {
                    if let Some(Item::Mark(m)) = self.items.pop_front() {
                        out.push(Out::Mark(m));
                    }
                }
                Item::Text { part, len: n } => {
                    if at >= cut {
                        break;
                    }
                    let end = (at + *n).min(cut);
                    let text = &judged[map(at)..map(end)];
                    if !text.is_empty() {
                        out.push(Out::Text(*part, text.to_string()));
                    }
                    if end == at + *n {
                        self.items.pop_front();
                    } else {
                        *n -= end - at;
                    }
                    at = end;
                }
            }
        }
        self.pending.drain(..cut);
        self.released += cut;
        out
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

/// A byte of a run a cut never splits: printable ASCII, what tokens, keys and encoded secrets
/// are written in.
fn in_run(b: u8) -> bool {
    b.is_ascii_graphic()
}

/// Where to cut `text` in `[earliest, latest]` (`latest` < its length): just after the last
/// whitespace there, else at the last place that is not inside a run of printable ASCII (on a
/// char boundary); `None` when the whole stretch is inside one run.
fn cut_point(text: &str, earliest: usize, latest: usize) -> Option<usize> {
    let b = text.as_bytes();
    if let Some(pos) = b[earliest..latest]
        .iter()
        .rposition(|c| c.is_ascii_whitespace())
    {
        return Some(earliest + pos + 1);
    }
    (earliest..=latest).rev().find(|&c| {
        text.is_char_boundary(c)
            && !(c > 0 && in_run(b[c - 1]) && b.get(c).is_some_and(|&x| in_run(x)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    type W = Window<&'static str>;

    #[test]
    fn suffix_and_cut() {
        assert_eq!(common_suffix("mail a@b.co now", "mail [EMAIL] now"), 4);
        assert_eq!(common_suffix("héllo", "hello"), 3);
        assert_eq!(cut_point("one two three", 0, 9), Some(8));
        // No whitespace: not inside a run of printable ASCII.
        assert_eq!(cut_point("onetwothree", 2, 9), None);
        assert_eq!(cut_point("日本語のテキスト", 0, 10), Some(9));
        assert_eq!(cut_point("日本語eyJhbGciOi", 0, 12), Some(9));
    }

    /// Judge with a rail that redacts every "SECRET".
    fn judge(w: &mut W, last: bool) -> Vec<Out<&'static str>> {
        let judged = w.pending().replace("SECRET", "[X]");
        w.judged(judged, false, last)
    }

    /// The text of `outs`, whatever the part.
    fn text(outs: &[Out<&'static str>]) -> String {
        outs.iter()
            .filter_map(|o| match o {
                Out::Text(_, t) => Some(t.as_str()),
                Out::Mark(_) => None,
            })
            .collect()
    }

    #[test]
    fn holds_a_window_and_releases_before_it() {
        let mut w = W::new(16);
        w.push(0, &"word ".repeat(10));
        assert!(!w.due(false), "50 bytes < window + step");
        w.push(0, &"word ".repeat(10));
        assert!(w.due(false));
        let out = text(&judge(&mut w, false));
        assert!(
            !out.is_empty() && out.len() <= 100 - 16 && out.ends_with(' '),
            "{out:?}"
        );
        assert_eq!(w.released(), out.len());
        assert_eq!(w.pending().len(), 100 - out.len());
    }

    #[test]
    fn never_releases_part_of_an_edited_value() {
        let mut w = W::new(16);
        w.push(0, &format!("{}SECRET", "a ".repeat(40)));
        // The edit sits inside the last window: nothing after it may go, and it is not cut.
        let out = text(&judge(&mut w, false));
        assert!(!out.contains("SEC") && !out.contains('['), "{out:?}");
        let mut sent = out;
        w.push(0, " and more words to push the edit out of the window");
        while w.due(false) {
            let out = judge(&mut w, false);
            if out.is_empty() {
                break;
            }
            sent.push_str(&text(&out));
        }
        sent.push_str(&text(&judge(&mut w, true)));
        assert!(sent.contains("[X]") && !sent.contains("SECRET"), "{sent}");
    }

    #[test]
    fn text_held_back_by_editing_it_out_is_never_released() {
        // The rail edits out everything from an unfinished marker; the text before the marker
        // ends exactly like the held tail, which a suffix-first diff would take for unchanged.
        let tail = "z".repeat(40);
        let mut w = W::new(16);
        w.push(0, &format!("intro {tail}<call>{tail}"));
        let hold = |w: &mut W| {
            let p = w.pending().to_string();
            let kept = p.find("<call>").map_or(p.clone(), |i| p[..i].to_string());
            text(&w.judged(kept, false, false))
        };
        let mut sent = hold(&mut w);
        assert!(!sent.contains("<call>"), "{sent:?}");
        assert!(w.pending().contains("<call>"), "the marker is still held");
        w.push(0, " end");
        sent.push_str(&hold(&mut w));
        assert!(!sent.contains("<call>") && w.pending().contains("<call>"));
        assert_eq!(sent.len(), w.released(), "released text was not edited");
    }

    #[test]
    fn releases_the_untouched_text_before_an_edit_near_the_end() {
        let mut w = W::new(16);
        w.push(0, &format!("{}SECRET", "word ".repeat(20)));
        let out = text(&judge(&mut w, false));
        assert!(
            !out.is_empty() && !out.contains('S') && !out.contains('['),
            "{out:?}"
        );
        assert!(w.pending().ends_with("SECRET"));
    }

    #[test]
    fn a_rejection_silences_the_rest_and_lets_the_marks_go() {
        let mut w = W::new(16);
        w.push(0, "anything");
        assert_eq!(w.mark("end of 0"), None);
        w.push(1, "more");
        assert_eq!(
            w.judged("[withheld]".into(), true, false),
            vec![Out::Text(0, "[withheld]".into()), Out::Mark("end of 0")]
        );
        w.push(1, "more");
        assert!(!w.due(true) && w.silenced());
        assert_eq!(
            w.mark("end of 1"),
            Some("end of 1"),
            "nothing held: it goes"
        );
    }

    #[test]
    fn a_run_longer_than_the_window_is_held_until_it_ends() {
        let token = format!("eyJ{}", "A".repeat(700));
        let mut w = W::new(16);
        let mut sent = String::new();
        let mut judgements = 0;
        w.push(0, "Bearer ");
        for c in token.chars() {
            w.push(0, &c.to_string());
            if w.due(false) {
                judgements += 1;
                sent.push_str(&text(&judge(&mut w, false)));
            }
        }
        assert_eq!(sent, "Bearer ", "none of the run went: {sent:?}");
        assert!(judgements < 20, "judged in growing steps: {judgements}");
        assert_eq!(w.pending(), token, "held whole, from its start");
        w.push(0, " and then words after it");
        w.push(0, &" filler".repeat(30));
        assert!(w.due(false));
        let out = text(&judge(&mut w, false));
        assert!(out.starts_with(&token), "released once it ended");
    }

    #[test]
    fn parts_read_as_one_text_are_judged_as_one() {
        // "SEC" ends part 0 and "RET" starts part 1: judged joined, the redaction goes to the
        // part where it starts, and part 0's end (and what came after it) waits for it.
        let mut w = W::new(16);
        w.push(0, "the code is SEC");
        assert_eq!(w.mark("end of 0"), None);
        assert_eq!(w.mark("part 1 added"), None);
        w.push(1, "RET and more words after the code to push it out");
        let out = judge(&mut w, false);
        assert_eq!(
            out[..3],
            [
                Out::Text(0, "the code is [X]".into()),
                Out::Mark("end of 0"),
                Out::Mark("part 1 added")
            ]
        );
        let rest = judge(&mut w, true);
        let mut all = text(&out);
        all.push_str(&text(&rest));
        assert_eq!(
            all,
            "the code is [X] and more words after the code to push it out"
        );
        assert!(!w.holds_marks());
        assert!(out[3..]
            .iter()
            .chain(&rest)
            .all(|o| matches!(o, Out::Text(1, _))));
    }
}
