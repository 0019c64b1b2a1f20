use super::*;
use std::time::Duration;

fn config(kind: GuardKind) -> GuardModelConfig {
    GuardModelConfig {
        name: "m".into(),
        kind,
        url: "http://127.0.0.1:1/v1".parse().unwrap(),
        model: Some("x".into()),
        api_key: None,
        timeout: Duration::from_secs(1),
        max_concurrent: 1,
        cache_entries: 0,
        max_input_chars: 64,
    }
}

fn chat(text: &str) -> Bytes {
    Bytes::from(
        json!({"choices": [{"message": {"role": "assistant", "content": text}}]}).to_string(),
    )
}

fn guard(kind: GuardKind, role: Role, reply: &str) -> Result<Answer, GuardError> {
    let q = Question::Guard(
        role,
        vec![Turn {
            role: "user".into(),
            content: "hi".into(),
        }],
    );
    answer(&config(kind), &q, &[chat(reply)])
}

#[test]
fn llama_guard_replies_parse_and_nothing_else_reads_safe() {
    let Ok(Answer::Guarded(g)) = guard(GuardKind::LlamaGuard, Role::User, "\n\nunsafe\nS1,S10")
    else {
        panic!("unsafe did not parse")
    };
    assert!(!g.safe);
    let names: Vec<_> = g.categories.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["S1", "S10"]);
    assert!(matches!(
        guard(GuardKind::LlamaGuard, Role::User, "safe"),
        Ok(Answer::Guarded(Guarded { safe: true, .. }))
    ));
    for garbage in [
        "",
        "Safe!",
        "I think it is safe",
        "safe\nbut also S1",
        "{\"safe\": true}",
    ] {
        assert!(
            matches!(
                guard(GuardKind::LlamaGuard, Role::User, garbage),
                Err(GuardError::InvalidOutput(_))
            ),
            "{garbage:?} was not refused"
        );
    }
}

#[test]
fn nemoguard_reads_the_judged_side() {
    let reply = r#"{"User Safety": "safe", "Response Safety": "unsafe", "Safety Categories": "Violence, Threat"}"#;
    assert!(matches!(
        guard(GuardKind::Nemoguard, Role::User, reply),
        Ok(Answer::Guarded(Guarded { safe: true, .. }))
    ));
    let Ok(Answer::Guarded(g)) = guard(GuardKind::Nemoguard, Role::Assistant, reply) else {
        panic!("no verdict")
    };
    assert!(!g.safe);
    assert_eq!(g.categories.len(), 2);
    assert!(matches!(
        guard(
            GuardKind::Nemoguard,
            Role::Assistant,
            r#"{"User Safety": "safe"}"#
        ),
        Err(GuardError::InvalidOutput(_))
    ));
}

#[test]
fn moderation_results_must_match_the_texts() {
    let q = Question::Moderate(vec!["a".into(), "b".into()]);
    let one = Bytes::from(
        r#"{"results":[{"flagged":false,"categories":{"hate":false},"category_scores":{"hate":0.01}}]}"#,
    );
    assert!(matches!(
        answer(&config(GuardKind::OpenaiModeration), &q, &[one]),
        Err(GuardError::InvalidOutput(_))
    ));
    let two = Bytes::from(
        r#"{"results":[{"flagged":false,"categories":{"hate":false}},{"flagged":true,"categories":{"hate":true},"category_scores":{"hate":0.9}}]}"#,
    );
    let Ok(Answer::Moderated(m)) = answer(&config(GuardKind::OpenaiModeration), &q, &[two]) else {
        panic!("no answer")
    };
    assert!(!m[0].flagged && m[1].flagged);
    assert_eq!(m[1].categories[0].score, Some(0.9));
}

#[test]
fn entity_offsets_become_bytes() {
    // Presidio counts characters: "Zoë Smith" starts after "né " (3 characters, 4 bytes).
    let text = "né Zoë Smith";
    let q = Question::Entities(text.into(), None);
    let body = Bytes::from(r#"[{"entity_type":"PERSON","start":3,"end":12,"score":0.85}]"#);
    let Ok(Answer::Entities(e)) = answer(&config(GuardKind::Entities), &q, &[body]) else {
        panic!("no entities")
    };
    assert_eq!(&text[e[0].start as usize..e[0].end as usize], "Zoë Smith");
    let past = Bytes::from(r#"[{"entity_type":"PERSON","start":3,"end":99,"score":0.85}]"#);
    assert!(matches!(
        answer(&config(GuardKind::Entities), &q, &[past]),
        Err(GuardError::InvalidOutput(_))
    ));
}

#[test]
fn a_long_text_is_classified_in_chunks_keeping_each_labels_highest_score() {
    let long = "word ".repeat(40); // 200 characters, 64 a chunk
    let pieces = chunks(&long, 64);
    assert!(pieces.len() >= 4 && pieces.iter().all(|p| p.chars().count() <= 64));
    // Nothing lost: each piece starts inside the last one, and together they cover the text.
    let numbered: String = (0..60).map(|i| format!("w{i} ")).collect();
    let mut covered: usize = 0;
    for p in chunks(&numbered, 64) {
        let at = numbered.find(p).unwrap();
        assert!(
            at <= covered && at + p.len() > covered,
            "a gap before {p:?}"
        );
        covered = at + p.len();
    }
    assert_eq!(covered, numbered.len(), "the end was lost");
    // A marker cut by one piece's end is whole in the next.
    let marker = "IGNOREALLPREVIOUS";
    for at in 40..80 {
        let text = format!("{}{marker}{}", "x".repeat(at), "y".repeat(100));
        assert!(
            chunks(&text, 64).iter().any(|p| p.contains(marker)),
            "a marker at {at} was cut in every piece"
        );
    }
    let q = Question::Classify(vec![long.clone(), "short".into()]);
    let reqs = requests(&config(GuardKind::Classifier), &q).unwrap();
    assert_eq!(
        reqs[0].1["inputs"].as_array().unwrap().len(),
        pieces.len() + 1
    );
    let mut preds: Vec<Value> = (0..pieces.len())
        .map(|i| json!([{"label": "INJECTION", "score": if i == 2 { 0.97 } else { 0.1 }}, {"label": "SAFE", "score": 0.5}]))
        .collect();
    preds.push(json!([{"label": "SAFE", "score": 0.99}]));
    let Ok(Answer::Classified(c)) = answer(
        &config(GuardKind::Classifier),
        &q,
        &[Bytes::from(Value::Array(preds).to_string())],
    ) else {
        panic!("no labels")
    };
    assert_eq!(c.len(), 2);
    assert_eq!((c[0][0].label.as_str(), c[0][0].score), ("INJECTION", 0.97));
    assert_eq!(c[1][0].label, "SAFE");
}

#[test]
fn a_judge_reply_must_match_the_schema() {
    let schema = r#"{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}"#;
    let q = Question::Judge("Is it fine?".into(), "text".into(), schema.into());
    let judge = |reply: &str| answer(&config(GuardKind::Judge), &q, &[chat(reply)]);
    assert_eq!(
        judge("```json\n{\"ok\": true}\n```"),
        Ok(Answer::Judged("{\"ok\":true}".into()))
    );
    assert!(matches!(
        judge("{\"ok\": \"yes\"}"),
        Err(GuardError::InvalidOutput(_))
    ));
    assert!(matches!(judge("sure!"), Err(GuardError::InvalidOutput(_))));
    let bad = Question::Judge("x".into(), "y".into(), "{\"type\": 12}".into());
    assert!(matches!(
        requests(&config(GuardKind::Judge), &bad),
        Err(GuardError::Denied(_))
    ));
}
