//! Names, street addresses and dates of birth: values no pattern finds, asked of an `entities`
//! guard model the operator configured (Presidio's analyzer, an NER service) and merged with the
//! filter's own findings, redacted (or blocked) the same way.
//!
//! The model is asked per text the filter scans, and only for texts that could hold one of its
//! types: a name or a place is written with a capital letter in the languages these models
//! read, and a date is a date of birth only where the text says so. A date the model finds is
//! kept as `DATE_OF_BIRTH` only when a word for birth comes shortly before it (`born`, `date of
//! birth`, `DOB`, `birthday`): most dates in traffic (deadlines, meetings) are no one's personal
//! data.
//!
//! The asking is scoped to one evaluation ([`asking`]): the redaction code, many calls deep,
//! finds the model through this module rather than through every signature on the way. The
//! first error is kept and the evaluation's verdict discarded for it: a model that cannot
//! answer makes a fault (the entry's `on_error` decides), never an unredacted text.

use crate::detect::Finding;
use crate::types::PiiType;
use std::cell::RefCell;

/// What an `entities` model said about a text: its type name, span in bytes, score.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    pub entity_type: String,
    pub start: usize,
    pub end: usize,
    pub score: f32,
}

/// How to ask: the configured model and what to keep of its answers.
#[derive(Clone, Debug, PartialEq)]
pub struct Entities {
    /// The guard model's configured name.
    pub model: String,
    /// The language of the texts (the model's default when none).
    pub language: Option<String>,
    /// Spans scored lower are dropped.
    pub threshold: f32,
}

/// The model's types that map to the filter's (Presidio's names, spaCy's and common NER
/// services' spellings).
fn kind(entity_type: &str) -> Option<Kind> {
    match entity_type.to_ascii_uppercase().as_str() {
        "PERSON" | "PER" | "NAME" | "PERSON_NAME" => Some(Kind::Person),
        "LOCATION" | "LOC" | "GPE" | "FAC" | "ADDRESS" | "STREET_ADDRESS" => Some(Kind::Location),
        "DATE_TIME" | "DATE" | "DATE_OF_BIRTH" | "DOB" => Some(Kind::Date),
        _ => None,
    }
}

enum Kind {
    Person,
    Location,
    Date,
}

type Ask<'a> = dyn FnMut(&str) -> Result<Vec<Found>, String> + 'a;

thread_local! {
    /// The evaluation's asker (while [`asking`] runs) and its first error.
    static ASKER: RefCell<Option<(Box<Ask<'static>>, Option<String>)>> = const { RefCell::new(None) };
}

/// Run `evaluate` with `ask` as the model for [`find`]; its result, or the first error the
/// model gave.
pub fn asking<R>(
    ask: impl FnMut(&str) -> Result<Vec<Found>, String> + 'static,
    evaluate: impl FnOnce() -> R,
) -> Result<R, String> {
    ASKER.with(|a| *a.borrow_mut() = Some((Box::new(ask), None)));
    let out = evaluate();
    let (_, error) = ASKER
        .with(|a| a.borrow_mut().take())
        .expect("the asker is in place until the evaluation ends");
    match error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// What the model finds in `text` that the filter keeps, as findings; none outside
/// [`asking`], for a text that cannot hold any, or after an error (which [`asking`] returns).
pub fn find(text: &str, config: &Entities) -> Vec<Finding> {
    let birth = birth_words(text);
    if !could_hold(text, !birth.is_empty()) {
        return Vec::new();
    }
    let answer = ASKER.with(|a| {
        let mut slot = a.borrow_mut();
        let (ask, error) = slot.as_mut()?;
        if error.is_some() {
            return None;
        }
        match ask(text) {
            Ok(found) => Some(found),
            Err(e) => {
                *error = Some(e);
                None
            }
        }
    });
    let kept: Vec<(Kind, Found)> = answer
        .unwrap_or_default()
        .into_iter()
        .filter(|f| {
            f.score >= config.threshold
                && f.start < f.end
                && f.end <= text.len()
                && text.is_char_boundary(f.start)
                && text.is_char_boundary(f.end)
        })
        .filter_map(|f| Some((kind(&f.entity_type)?, f)))
        .collect();
    // A date is a date of birth when a word for birth ends shortly before it with no other
    // date between ("born 4 May 1980, moved on 1 June 2020": the first only).
    let dates: Vec<usize> = kept
        .iter()
        .filter(|(k, _)| matches!(k, Kind::Date))
        .map(|(_, f)| f.start)
        .collect();
    let of_birth = |start: usize| {
        birth.iter().any(|&at| {
            at <= start && start - at <= 40 && !dates.iter().any(|&d| at <= d && d < start)
        })
    };
    let mut out: Vec<Finding> = kept
        .into_iter()
        .filter_map(|(k, f)| {
            let kind = match k {
                Kind::Person => PiiType::Person,
                Kind::Location => PiiType::Location,
                Kind::Date if of_birth(f.start) => PiiType::DateOfBirth,
                Kind::Date => return None,
            };
            Some(Finding {
                start: f.start,
                end: f.end,
                kind,
            })
        })
        .collect();
    out.sort_by_key(|f| (f.start, std::cmp::Reverse(f.end)));
    out
}

/// Whether `text` could hold a name, a place or (`birth`: it speaks of one) a date of birth.
fn could_hold(text: &str, birth: bool) -> bool {
    birth || text.chars().any(char::is_uppercase)
}

/// Where the words for birth end in `text` (bytes), ASCII case-insensitive.
fn birth_words(text: &str) -> Vec<usize> {
    const WORDS: [&str; 4] = ["born", "birth", "dob", "d.o.b"];
    let lower = text.to_ascii_lowercase();
    let mut ends = Vec::new();
    for w in WORDS {
        let mut from = 0;
        while let Some(i) = lower[from..].find(w) {
            let at = from + i;
            // A word, not inside one ("stubborn", "adobe").
            let before = lower[..at].chars().next_back();
            if !before.is_some_and(char::is_alphanumeric) {
                ends.push(at + w.len());
            }
            from = at + w.len();
        }
    }
    ends
}

/// `found` (the filter's own findings, in order, not overlapping) with `extra` added where they
/// overlap none of them: a pattern's finding is exact, a model's may run over it.
pub fn merge(found: &mut Vec<Finding>, extra: Vec<Finding>) {
    if extra.is_empty() {
        return;
    }
    for e in extra {
        let overlaps = |f: &Finding| f.start < e.end && e.start < f.end;
        if !found.iter().any(overlaps) {
            found.push(e);
        }
    }
    found.sort_by_key(|f| f.start);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Entities {
        Entities {
            model: "presidio".into(),
            language: None,
            threshold: 0.5,
        }
    }

    fn at(text: &str, part: &str, entity_type: &str) -> Found {
        let start = text.find(part).unwrap();
        Found {
            entity_type: entity_type.into(),
            start,
            end: start + part.len(),
            score: 0.85,
        }
    }

    #[test]
    fn names_places_and_dates_of_birth_are_kept_other_dates_are_not() {
        let text = "Jane Roe, born 4 May 1980, moved to Leeds on 1 June 2020.";
        let answer = vec![
            at(text, "Jane Roe", "PERSON"),
            at(text, "4 May 1980", "DATE_TIME"),
            at(text, "Leeds", "LOCATION"),
            at(text, "1 June 2020", "DATE_TIME"),
            at(text, "moved", "NRP"),
        ];
        let found = asking(move |_| Ok(answer.clone()), || find(text, &config())).unwrap();
        let kinds: Vec<(&str, PiiType)> = found
            .iter()
            .map(|f| (&text[f.start..f.end], f.kind))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("Jane Roe", PiiType::Person),
                ("4 May 1980", PiiType::DateOfBirth),
                ("Leeds", PiiType::Location),
            ]
        );
    }

    #[test]
    fn low_scores_and_spans_off_the_text_are_dropped() {
        let text = "Ask Jane.";
        let mut weak = at(text, "Jane", "PERSON");
        weak.score = 0.3;
        let off = Found {
            entity_type: "PERSON".into(),
            start: 5,
            end: 99,
            score: 0.9,
        };
        let found = asking(
            move |_| Ok(vec![weak.clone(), off.clone()]),
            || find(text, &config()),
        )
        .unwrap();
        assert!(found.is_empty());
    }

    #[test]
    fn a_text_that_cannot_hold_one_is_not_asked() {
        let asked = std::rc::Rc::new(std::cell::Cell::new(0));
        let count = asked.clone();
        asking(
            move |_| {
                count.set(count.get() + 1);
                Ok(Vec::new())
            },
            || {
                find("all lower case, no names here", &config());
                find("12345", &config());
                find("stubborn adobe", &config());
                find("dob: 1980-05-04", &config());
                find("Paris", &config());
            },
        )
        .unwrap();
        assert_eq!(asked.get(), 2);
    }

    #[test]
    fn an_error_is_returned_and_nothing_is_found_after_it() {
        let result = asking(
            |_| Err("the model is unavailable".to_string()),
            || (find("Jane", &config()), find("Bob", &config())),
        );
        assert_eq!(result.unwrap_err(), "the model is unavailable");
        // Outside an evaluation nothing is asked.
        assert!(find("Jane", &config()).is_empty());
    }

    #[test]
    fn a_model_span_over_a_pattern_finding_gives_way() {
        let mut found = vec![Finding {
            start: 10,
            end: 20,
            kind: PiiType::Email,
        }];
        merge(
            &mut found,
            vec![
                Finding {
                    start: 0,
                    end: 4,
                    kind: PiiType::Person,
                },
                Finding {
                    start: 15,
                    end: 25,
                    kind: PiiType::Person,
                },
            ],
        );
        let kinds: Vec<_> = found.iter().map(|f| (f.start, f.kind)).collect();
        assert_eq!(kinds, vec![(0, PiiType::Person), (10, PiiType::Email)]);
    }
}
