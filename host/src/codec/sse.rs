//! Server-sent events, both ways: a parser for the backend's byte stream and the writer for
//! ours. The parser frames events exactly as the specification (and so every client) does:
//! lines end with `\r\n`, `\n` or a lone `\r`, an empty line ends an event, several `data:`
//! lines join with newlines, a byte-order mark at the start is dropped. A relay that framed
//! them otherwise would pass on, unjudged, an event a client reads. Blocks come out with their
//! lines ended by `\n` alone, so what a relay passes on is what it read.

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
    /// Where the line being read starts.
    line: usize,
    /// Where the block being read ends so far: the end of its last complete line.
    content_end: usize,
    /// Where to resume looking for a line end (what is before it was searched already).
    scanned: usize,
    /// Whether the stream's first bytes were looked at for a byte-order mark.
    begun: bool,
    /// The last byte read was a carriage return ending a line: a line feed right after it
    /// belongs to the same line end.
    after_cr: bool,
}

/// Longest event the parser holds before giving up on a backend that never ends one.
pub const MAX_EVENT_BYTES: usize = 16 << 20;

/// UTF-8's byte-order mark, which a stream may start with.
const BOM: &[u8] = b"\xef\xbb\xbf";

impl SseParser {
    /// Add bytes; `Err` when an event grows past [`MAX_EVENT_BYTES`].
    pub fn push(&mut self, mut bytes: &[u8]) -> Result<(), String> {
        if bytes.is_empty() {
            return Ok(());
        }
        if std::mem::take(&mut self.after_cr) && bytes[0] == b'\n' {
            bytes = &bytes[1..];
        }
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.line -= self.start;
            self.content_end -= self.start;
            self.scanned -= self.start;
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
        if !self.begun {
            if self.buf.len() < BOM.len() && BOM.starts_with(&self.buf) {
                return Ok(());
            }
            self.begun = true;
            if self.buf.starts_with(BOM) {
                self.buf.drain(..BOM.len());
            }
        }
        if self.buf.len() > MAX_EVENT_BYTES {
            return Err(format!("an event is longer than {MAX_EVENT_BYTES} bytes"));
        }
        Ok(())
    }

    /// The next complete event (comment-only and empty events are skipped).
    pub fn next_event(&mut self) -> Option<SseEvent> {
        loop {
            let block = self.take_block()?;
            if let Some(event) = parse_block(&self.text(block)) {
                return Some(event);
            }
        }
    }

    /// The next complete block, without its blank line and with `\n` ending its lines (for
    /// relays that pass most events on untouched: `id:`, `retry:` and comments stay).
    pub fn next_block(&mut self) -> Option<String> {
        let block = self.take_block()?;
        Some(self.text(block))
    }

    /// A block's text with its line ends written `\n`.
    fn text(&self, block: std::ops::Range<usize>) -> String {
        let bytes = &self.buf[block];
        if memchr::memchr(b'\r', bytes).is_none() {
            return String::from_utf8_lossy(bytes).into_owned();
        }
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'\r' {
                out.push(b'\n');
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
            } else {
                out.push(bytes[i]);
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Where the next complete block is in `buf`; it counts as read.
    fn take_block(&mut self) -> Option<std::ops::Range<usize>> {
        if !self.begun {
            return None;
        }
        let mut i = self.scanned;
        loop {
            let Some(k) = memchr::memchr2(b'\r', b'\n', &self.buf[i..]) else {
                self.scanned = self.buf.len();
                return None;
            };
            let j = i + k;
            let ends = match (self.buf[j], self.buf.get(j + 1)) {
                (b'\r', Some(b'\n')) => 2,
                // A carriage return last ends the line now, as a client ends it; a line feed
                // arriving next is part of the same line end.
                (b'\r', None) => {
                    self.after_cr = true;
                    1
                }
                _ => 1,
            };
            let next = j + ends;
            if j == self.line {
                // An empty line: the block ends.
                let block = self.start..self.content_end.max(self.start);
                self.start = next;
                self.line = next;
                self.content_end = next;
                self.scanned = next;
                return Some(block);
            }
            self.content_end = j;
            self.line = next;
            i = next;
        }
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
                "id: 2\ndata: two",
                ": c",
                "data: three",
                "data: 3b"
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
    fn lines_end_as_a_client_ends_them() {
        // A lone carriage return ends a line, and a line of nothing ends an event, whatever
        // ends the lines around it; a byte-order mark at the start is not part of the field.
        let text = b"\xef\xbb\xbfevent: a\rdata: 1\r\rdata: 2\n\rdata: 3\r\n\ndata: 4\r\n\r\n";
        let mut p = SseParser::default();
        p.push(text).unwrap();
        let events: Vec<_> = std::iter::from_fn(|| p.next_event()).collect();
        assert_eq!(
            events,
            [
                SseEvent {
                    event: Some("a".into()),
                    data: "1".into()
                },
                SseEvent {
                    event: None,
                    data: "2".into()
                },
                SseEvent {
                    event: None,
                    data: "3".into()
                },
                SseEvent {
                    event: None,
                    data: "4".into()
                },
            ]
        );
        for cut in 0..text.len() {
            let mut p = SseParser::default();
            p.push(&text[..cut]).unwrap();
            let mut got: Vec<_> = std::iter::from_fn(|| p.next_event()).collect();
            p.push(&text[cut..]).unwrap();
            got.extend(std::iter::from_fn(|| p.next_event()));
            assert_eq!(got, events, "cut at {cut}");
        }
        let mut p = SseParser::default();
        p.push(b"data: x\rid: 1\r\r").unwrap();
        assert_eq!(p.next_block().unwrap(), "data: x\nid: 1");
    }

    #[test]
    fn an_endless_event_is_refused() {
        let mut p = SseParser::default();
        assert!(p.push(&vec![b'x'; MAX_EVENT_BYTES + 1]).is_err());
    }
}
