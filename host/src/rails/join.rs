//! Text a reader takes as one is judged as one: a message's consecutive text parts (a reply's
//! `output_text` parts or text blocks, a user message's text parts) reach the model, or the
//! client, joined, so a value split across two of them is still a value. Before a chain runs,
//! each run of two or more text parts of a message's own content becomes one part with their
//! text joined; after it, the run's parts come back, each with its share of the judged text (an
//! edit's replacement goes to the part where the edit starts, as the stream window does). A
//! chain that changed how many parts a message has keeps what it made.

use super::window::{Out, Window};
use crate::model::{Content, Payload};
use serde_json::Value;

/// Where runs were joined, to split them again.
#[derive(Clone)]
pub struct Joined {
    messages: Vec<JoinedMessage>,
}

#[derive(Clone)]
struct JoinedMessage {
    /// Its index in the payload.
    index: usize,
    /// Its content's parts as they were.
    parts: Vec<Value>,
    /// How many of them are its own (the rest are folded fields, never joined).
    own: usize,
    /// The joined parts, in order: a run of `len` original parts from `start` (1: left alone).
    slots: Vec<(usize, usize)>,
}

/// A part whose text a reader reads with its neighbours'.
fn text_part(part: &Value) -> Option<&str> {
    let obj = part.as_object()?;
    if obj.contains_key("field") {
        return None;
    }
    match obj.get("type").and_then(Value::as_str) {
        Some("text" | "input_text" | "output_text") => obj.get("text")?.as_str(),
        _ => None,
    }
}

/// Join the runs of text parts of `payload`'s messages; `None` when there are none (the
/// common request: nothing is copied).
pub fn join(payload: &mut Payload) -> Option<Joined> {
    let mut messages = Vec::new();
    for (index, message) in payload.messages.iter_mut().enumerate() {
        let Some(Content::Parts(Value::Array(parts))) = &message.content else {
            continue;
        };
        let own = message.folded.as_ref().map_or(parts.len(), |f| f.own);
        let own = own.min(parts.len());
        let runs = parts[..own]
            .windows(2)
            .any(|w| text_part(&w[0]).is_some() && text_part(&w[1]).is_some());
        if !runs {
            continue;
        }
        let Some(Content::Parts(Value::Array(parts))) = message.content.take() else {
            unreachable!("checked above");
        };
        let mut joined = Vec::with_capacity(parts.len());
        let mut slots = Vec::new();
        let mut i = 0;
        while i < own {
            let mut end = i + 1;
            if text_part(&parts[i]).is_some() {
                while end < own && text_part(&parts[end]).is_some() {
                    end += 1;
                }
            }
            let mut part = parts[i].clone();
            if end - i > 1 {
                let text: String = parts[i..end].iter().filter_map(text_part).collect();
                part["text"] = Value::String(text);
            }
            joined.push(part);
            slots.push((i, end - i));
            i = end;
        }
        joined.extend(parts[own..].iter().cloned());
        message.content = Some(Content::Parts(Value::Array(joined)));
        messages.push(JoinedMessage {
            index,
            parts,
            own,
            slots,
        });
    }
    (!messages.is_empty()).then_some(Joined { messages })
}

/// Split the runs [`join`] joined, with the text the chain left in each.
pub fn split(payload: &mut Payload, joined: Joined) {
    for m in joined.messages {
        let Some(message) = payload.messages.get_mut(m.index) else {
            continue;
        };
        let folded = m.parts.len() - m.own;
        let judged = match &mut message.content {
            Some(Content::Parts(Value::Array(judged)))
                if judged.len() == m.slots.len() + folded =>
            {
                std::mem::take(judged)
            }
            // Restructured (a rejection's text, a new content): as the chain left it.
            _ => continue,
        };
        let mut parts = Vec::with_capacity(m.parts.len());
        let mut judged = judged.into_iter();
        for &(start, len) in &m.slots {
            let part = judged.next().expect("counted");
            if len == 1 {
                parts.push(part);
                continue;
            }
            let originals = &m.parts[start..start + len];
            let Some(text) = part.get("text").and_then(Value::as_str) else {
                parts.push(part);
                continue;
            };
            // The run's share of the judged text, part by part.
            let mut window: Window<()> = Window::new(0);
            for (i, p) in originals.iter().enumerate() {
                window.push(i as u64, text_part(p).unwrap_or(""));
            }
            let mut shares = vec![String::new(); len];
            for out in window.judged(text.to_string(), false, true) {
                if let Out::Text(i, t) = out {
                    shares[i as usize].push_str(&t);
                }
            }
            for (p, share) in originals.iter().zip(shares) {
                let mut p = p.clone();
                p["text"] = Value::String(share);
                parts.push(p);
            }
        }
        parts.extend(judged);
        message.content = Some(Content::Parts(Value::Array(parts)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Message;
    use serde_json::json;

    fn payload(parts: Value) -> Payload {
        Payload {
            messages: vec![Message::new("user", Some(Content::Parts(parts)))],
            ..Payload::default()
        }
    }

    fn parts(p: &Payload) -> Value {
        match &p.messages[0].content {
            Some(Content::Parts(v)) => v.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_run_is_judged_joined_and_split_back() {
        let original = json!([
            {"type": "text", "text": "my SSN is 536-22-"},
            {"type": "text", "text": "1234, thanks", "cache_control": {"type": "ephemeral"}},
            {"type": "image_url", "image_url": {"url": "data:x"}},
            {"type": "text", "text": "alone"}
        ]);
        let mut p = payload(original.clone());
        let joined = join(&mut p).expect("a run");
        assert_eq!(
            parts(&p)[0]["text"],
            "my SSN is 536-22-1234, thanks",
            "{p:?}"
        );
        assert_eq!(parts(&p).as_array().unwrap().len(), 3);
        // The chain redacts the joined value.
        let mut judged = parts(&p);
        judged[0]["text"] = json!("my SSN is [SSN], thanks");
        p.messages[0].content = Some(Content::Parts(judged));
        split(&mut p, joined);
        let back = parts(&p);
        assert_eq!(back[0]["text"], "my SSN is [SSN]");
        assert_eq!(back[1]["text"], ", thanks");
        assert_eq!(back[1]["cache_control"]["type"], "ephemeral");
        assert_eq!(back[2], original[2]);
        assert_eq!(back[3], original[3]);
    }

    #[test]
    fn unjudged_runs_come_back_as_they_were_and_single_parts_are_left_alone() {
        let original =
            json!([{"type": "output_text", "text": "a"}, {"type": "output_text", "text": "b"}]);
        let mut p = payload(original.clone());
        let joined = join(&mut p).unwrap();
        split(&mut p, joined);
        assert_eq!(parts(&p), original);
        let mut single = payload(json!([{"type": "text", "text": "a"}, {"type": "image_url"}]));
        assert!(join(&mut single).is_none());
        // A content the chain replaced as a whole stays as it left it.
        let mut p = payload(original);
        let joined = join(&mut p).unwrap();
        p.messages[0].content = Some(Content::Text("[withheld]".into()));
        split(&mut p, joined);
        assert_eq!(
            p.messages[0].content,
            Some(Content::Text("[withheld]".into()))
        );
    }
}
