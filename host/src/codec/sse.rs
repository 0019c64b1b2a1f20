//! Server-sent events, both ways: a parser for the backend's byte stream (events end at a blank
//! line, `\n` or `\r\n`; several `data:` lines join with newlines) and the writer for ours.

/// One event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name, if any.
    pub event: Option<String>,
    /// The `data:` lines, joined by newlines.
    pub data: String,
}

/// Bytes in, events out.
#[derive(Default)]
pub struct SseParser {
    buf: Vec<u8>,
    /// Where the unread part of `buf` starts (read blocks are dropped in bulk, not one by one).
    start: usize,
    /// Where to resume looking for a blank line (what is before it was searched already).
    scanned: usize,
}

/// Longest event the parser holds before giving up on a backend that never ends one.
pub const MAX_EVENT_BYTES: usize = 16 << 20;

impl SseParser {
    /// Add bytes; `Err` when an event grows past [`MAX_EVENT_BYTES`].
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), String> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
        if self.buf.len() > MAX_EVENT_BYTES {
            return Err(format!("an event is longer than {MAX_EVENT_BYTES} bytes"));
        }
        Ok(())
    }

    /// The next complete event (comment-only and empty events are skipped).
    pub fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            let block = self.take_block()?;
            if let Some(event) = parse_block(&String::from_utf8_lossy(&self.buf[block])) {
                return Some(event);
            }
        }
    }

    /// The next complete block as written, without its blank line (for relays that pass most
    /// events on untouched: `id:`, `retry:` and comments stay as they were).
    pub fn next_block(&mut self) -> Option<String> {
        let block = self.take_block()?;
        Some(String::from_utf8_lossy(&self.buf[block]).into_owned())
    }

    /// Where the next complete block is in `buf`; it counts as read.
    fn take_block(&mut self) -> Option<std::ops::Range<usize>> {
        let buf = &self.buf;
        // Back up over a possible half of "\r\n\r\n" at the end of the last search.
        let mut from = self.scanned.saturating_sub(3).max(self.start);
        // A block ends at the first "\n\n" or "\r\n\r\n": at a line feed followed by another,
        // or by "\r\n" with a carriage return before it.
        while let Some(at) = memchr::memchr(b'\n', &buf[from..]) {
            let j = from + at;
            let end = if buf.get(j + 1) == Some(&b'\n') {
                Some((j, j + 2))
            } else if j > self.start
                && buf[j - 1] == b'\r'
                && buf.get(j + 1) == Some(&b'\r')
                && buf.get(j + 2) == Some(&b'\n')
            {
                Some((j - 1, j + 3))
            } else {
                None
            };
            if let Some((block_end, next)) = end {
                let block = self.start..block_end;
                self.start = next;
                self.scanned = next;
                return Some(block);
            }
            from = j + 1;
        }
        self.scanned = buf.len();
        None
    }
}

/// The event in a block from [`SseParser::next_block`] (`None` for comments and empty blocks).
pub fn parse_block(block: &str) -> Option<SseEvent> {
    let mut event = None;
    let mut data: Option<String> = None;
    for line in block.lines() {
        let line = line.trim_end_matches('\r');
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => event = Some(value.to_string()),
            "data" => match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_string()),
            },
            _ => {}
        }
    }
    data.map(|data| SseEvent { event, data })
}

/// `block` with its data replaced by `data`, every other line (`id:`, `event:`, `retry:`,
/// comments) kept in place.
pub fn replace_data(block: &str, data: &str) -> String {
    let mut out = String::with_capacity(block.len() + data.len());
    let mut written = false;
    for line in block.lines() {
        let field = line.split_once(':').map_or(line, |(f, _)| f);
        if field == "data" {
            if !written {
                for d in data.split('\n') {
                    out.push_str("data: ");
                    out.push_str(d);
                    out.push('\n');
                }
                written = true;
            }
            continue;
        }
        out.push_str(line.trim_end_matches('\r'));
        out.push('\n');
    }
    if !written {
        out.push_str("data: ");
        out.push_str(data);
        out.push('\n');
    }
    out.push('\n');
    out
}

/// Append one event to `out`.
pub fn write(out: &mut Vec<u8>, event: Option<&str>, data: &str) {
    if let Some(name) = event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
    }
    for line in data.split('\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_on_blank_lines_either_way() {
        let mut p = SseParser::default();
        p.push(b"data: {\"a\":1}\n\nevent: x\ndata: [DO").unwrap();
        assert_eq!(
            p.next_event(),
            Some(SseEvent {
                event: None,
                data: "{\"a\":1}".into()
            })
        );
        assert_eq!(p.next_event(), None);
        p.push(b"NE]\r\n\r\n: keep-alive\n\ndata: a\ndata: b\n\n")
            .unwrap();
        let e = p.next_event().unwrap();
        assert_eq!((e.event.as_deref(), e.data.as_str()), (Some("x"), "[DONE]"));
        assert_eq!(p.next_event().unwrap().data, "a\nb", "comments skipped");
    }

    #[test]
    fn writes_what_it_reads() {
        let mut out = Vec::new();
        write(
            &mut out,
            Some("message_stop"),
            "{\"type\":\"message_stop\"}",
        );
        write(&mut out, None, "[DONE]");
        let mut p = SseParser::default();
        p.push(&out).unwrap();
        assert_eq!(
            p.next_event().unwrap().event.as_deref(),
            Some("message_stop")
        );
        assert_eq!(p.next_event().unwrap().data, "[DONE]");
    }

    #[test]
    fn blocks_pass_whole_and_data_is_replaced_in_place() {
        let mut p = SseParser::default();
        p.push(b"id: 7\r\nevent: message\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n: ping\n\n")
            .unwrap();
        let block = p.next_block().unwrap();
        assert_eq!(parse_block(&block).unwrap().data, "{\"a\":\n1}");
        assert_eq!(
            replace_data(&block, "{\"b\":2}"),
            "id: 7\nevent: message\ndata: {\"b\":2}\n\n"
        );
        let ping = p.next_block().unwrap();
        assert_eq!(parse_block(&ping), None, "a comment has no event");
    }

    #[test]
    fn blocks_are_found_wherever_the_bytes_are_cut() {
        let text = b"data: one\n\nid: 2\r\ndata: two\r\n\r\n: c\n\ndata: three\n\r\ndata: 3b\n\n";
        let whole = {
            let mut p = SseParser::default();
            p.push(text).unwrap();
            std::iter::from_fn(|| p.next_block()).collect::<Vec<_>>()
        };
        assert_eq!(
            whole,
            [
                "data: one",
                "id: 2\r\ndata: two",
                ": c",
                "data: three\n\r\ndata: 3b"
            ]
        );
        for cut in 0..text.len() {
            let mut p = SseParser::default();
            let mut got = Vec::new();
            p.push(&text[..cut]).unwrap();
            got.extend(std::iter::from_fn(|| p.next_block()));
            p.push(&text[cut..]).unwrap();
            got.extend(std::iter::from_fn(|| p.next_block()));
            assert_eq!(got, whole, "cut at {cut}");
        }
    }

    #[test]
    fn an_endless_event_is_refused() {
        let mut p = SseParser::default();
        assert!(p.push(&vec![b'x'; MAX_EVENT_BYTES + 1]).is_err());
    }
}
