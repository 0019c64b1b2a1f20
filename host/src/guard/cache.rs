//! Answers kept per guard model: bounded (`cache_entries`), oldest out first, keyed by a hash of
//! the kind's template version, the operation and its input. Shared by every plugin granted the
//! model, and kept across a reload that leaves the model's config unchanged.

use super::{Answer, Question};
use crate::config::GuardKind;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// A cache key: SHA-256 over what determines the answer.
pub type Key = [u8; 32];

#[derive(Default)]
struct Entries {
    answers: HashMap<Key, Answer>,
    order: VecDeque<Key>,
}

/// One model's kept answers.
#[derive(Clone)]
pub struct Cache {
    capacity: usize,
    entries: Arc<Mutex<Entries>>,
}

impl Cache {
    /// A cache of at most `capacity` answers (0: none kept).
    pub fn new(capacity: usize) -> Cache {
        Cache {
            capacity,
            entries: Arc::default(),
        }
    }

    /// The key of `question` to a model of `kind`.
    pub fn key(&self, kind: GuardKind, asked: &str, question: &Question) -> Key {
        let mut h = Sha256::new();
        let mut put = |part: &str| {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        };
        put(kind.as_str());
        // Who is asked (its URL and model): answers kept in the shared store outlive a reload
        // that points the guard elsewhere, and must not answer for the new one.
        put(asked);
        put(super::wire::TEMPLATE_VERSION);
        put(question.operation());
        match question {
            Question::Moderate(texts) | Question::Classify(texts) => {
                texts.iter().for_each(|t| put(t));
            }
            Question::Guard(role, turns) => {
                put(match role {
                    super::Role::User => "user",
                    super::Role::Assistant => "assistant",
                });
                for t in turns {
                    put(&t.role);
                    put(&t.content);
                }
            }
            Question::Entities(text, language) => {
                put(text);
                put(language.as_deref().unwrap_or(""));
            }
            Question::Judge(instructions, input, schema) => {
                put(instructions);
                put(input);
                put(schema);
            }
        }
        h.finalize().into()
    }

    /// The answer kept for `key`.
    pub fn get(&self, key: &Key) -> Option<Answer> {
        if self.capacity == 0 {
            return None;
        }
        let hit = self.lock().answers.get(key).cloned();
        hit
    }

    /// Keep `answer` for `key`, dropping the oldest when full.
    pub fn put(&self, key: Key, answer: Answer) {
        if self.capacity == 0 {
            return;
        }
        let mut e = self.lock();
        if e.answers.insert(key, answer).is_none() {
            e.order.push_back(key);
            while e.order.len() > self.capacity {
                if let Some(old) = e.order.pop_front() {
                    e.answers.remove(&old);
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_at_most_its_capacity_oldest_out_first() {
        let cache = Cache::new(2);
        let key = |t: &str| {
            cache.key(
                GuardKind::Classifier,
                "m",
                &Question::Classify(vec![t.into()]),
            )
        };
        let answer = |s: &str| Answer::Judged(s.into());
        cache.put(key("a"), answer("1"));
        cache.put(key("b"), answer("2"));
        cache.put(key("c"), answer("3"));
        assert_eq!(cache.get(&key("a")), None);
        assert_eq!(cache.get(&key("b")), Some(answer("2")));
        assert_eq!(cache.get(&key("c")), Some(answer("3")));
        // The kind and the operation are part of the key.
        let other = cache.key(
            GuardKind::OpenaiModeration,
            "m",
            &Question::Moderate(vec!["b".into()]),
        );
        assert_ne!(other, key("b"));
        // And who is asked: another URL or model does not find this one's answers.
        let elsewhere = cache.key(
            GuardKind::Classifier,
            "n",
            &Question::Classify(vec!["b".into()]),
        );
        assert_ne!(elsewhere, key("b"));
        assert_eq!(Cache::new(0).get(&key("b")), None);
    }
}
