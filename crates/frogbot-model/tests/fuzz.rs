//! Fuzzing the model's readers of input from outside: the `question` tool's input (what a model
//! sends) and its validation, typed replies read as choices, outcomes and interactions read from
//! JSON, stored progress, form locators, times, and text split or truncated to a limit. Arbitrary
//! and mutated real-shaped input: no panic, a clear error or a sane value.

use frogbot_model::fuzz::{arb_json, arb_string, json_input, mutated_text};
use frogbot_model::text::{split, truncate};
use frogbot_model::{
    ChatId, Interaction, MAX_EXPIRES_IN_SECONDS, MAX_ISO_MILLIS, MIN_ISO_MILLIS, MessagePart,
    Progress, QuestionInput, QuestionOutcome, QuestionOutput, ReplyChoice, UiMessage,
    decode_question_modal_metadata, iso_to_millis, millis_to_iso,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Question inputs as models send them (the crate's own tests and the demo question).
fn question_samples() -> Vec<Value> {
    vec![
        json!({"questions": [
            {"header": "Env", "question": "Where?", "options": [{"label": "staging"}, {"label": "prod", "description": "careful"}]},
            {"header": "Checks", "question": "Which?", "options": [{"label": "a"}, {"label": "b"}], "multiple": true, "default": ["a"]},
            {"header": "Note", "question": "Anything?", "options": [{"label": "none"}], "custom": true, "default": ["none"]}
        ], "expiresInSeconds": 3600}),
        json!({"questions": [
            {"header": "Colour", "question": "Which colour?", "options": [{"label": "Red"}, {"label": "Blue"}], "custom": true}
        ]}),
        json!({"questions": [{"header": "h", "question": "q", "custom": true}], "expiresInSeconds": 1}),
    ]
}

fn reply_samples() -> Vec<String> {
    [
        "1",
        "2.",
        "1, 2",
        "1 3",
        "prod",
        " PROD ",
        "a, b",
        "skip",
        "/skip",
        ",",
        ", ,",
        "none",
        "my own words",
        "0",
        "99999999999999999999999",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn reply_text() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(reply_samples()).prop_flat_map(mutated_text),
        arb_string(),
    ]
}

/// What every validated input promises the rest of FrogBot.
fn check_valid(input: &QuestionInput) {
    assert!(!input.questions.is_empty());
    if let Some(s) = input.expires_in_seconds {
        assert!((1..=MAX_EXPIRES_IN_SECONDS).contains(&s), "{s}");
        // The deadline the engine computes from it cannot overflow.
        let ms = i64::try_from(s).unwrap().checked_mul(1000).unwrap();
        assert!(frogbot_model::now_millis().checked_add(ms).is_some());
    }
    if let Some(out) = input.default_output() {
        input.check_output(&out).expect("defaults were validated");
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn question_input_is_validated_never_panics(v in json_input(question_samples()), replies in prop::collection::vec(reply_text(), 1..4)) {
        let Ok(input) = serde_json::from_value::<QuestionInput>(v) else { return Ok(()); };
        let valid = input.validate();
        if let Err(reason) = &valid {
            prop_assert!(!reason.is_empty());
            return Ok(());
        }
        check_valid(&input);
        for q in &input.questions {
            for text in &replies {
                let _ = q.skip_in_reply(text);
                match q.choice_in_reply(text) {
                    ReplyChoice::Options(labels) => {
                        prop_assert!(!labels.is_empty(), "{text:?} named no option");
                        prop_assert!(q.multiple || labels.len() == 1, "{text:?}: {labels:?}");
                        for l in &labels {
                            prop_assert!(q.options.iter().any(|o| &o.label == l), "{l:?}");
                        }
                        // A reply's choice is always an answer the input accepts.
                        let mut picks: Vec<Option<Vec<String>>> = input.questions.iter().map(|q| q.default.clone()).collect();
                        let at = input.questions.iter().position(|x| x.header == q.header).unwrap();
                        picks[at] = Some(labels);
                        if let Some(out) = input.output_from_picks(&picks) {
                            input.check_output(&out).expect("a reply's choice is a valid answer");
                        }
                    }
                    ReplyChoice::Invalid(reason) => prop_assert!(!reason.is_empty()),
                    ReplyChoice::Text => {}
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn answers_and_progress_from_outside_never_panic(
        input in prop::sample::select(question_samples()),
        output in json_input(vec![json!({"answers": [
            {"header": "Env", "selected": ["prod"]},
            {"header": "Checks", "selected": ["a", "b"]},
            {"header": "Note", "selected": ["my own words"]}
        ]})]),
        state in json_input(vec![json!({"picks": [["prod"], null, null], "checked": [[], [0, 1], []], "prompts": ["m1"]})]),
        outcome in json_input(vec![json!({"dismissed": true}), json!({"expired": true, "output": {"answers": []}}), json!({"cancelled": true})]),
    ) {
        let input: QuestionInput = serde_json::from_value(input).unwrap();
        input.validate().unwrap();
        if let Ok(out) = serde_json::from_value::<QuestionOutput>(output)
            && let Err(reason) = input.check_output(&out)
        {
            prop_assert!(!reason.is_empty());
        }
        let progress = Progress::from_state(&input, Some(&state));
        let _ = progress.step();
        let _ = progress.parse_result(&input);
        if let Some(out) = progress.output(&input) {
            prop_assert_eq!(out.answers.len(), input.questions.len());
        }
        let _ = serde_json::from_value::<QuestionOutcome>(outcome);
    }

    #[test]
    fn wire_values_from_outside_never_panic(v in json_input(vec![
        json!({"type": "action", "event": {"actionId": "a:1", "value": "v", "messageId": "m", "user": {"id": "U1", "name": "Ann", "isBot": false}, "triggerId": "t", "raw": {}}}),
        json!({"type": "modalSubmit", "event": {"values": {"a": "b"}, "privateMetadata": "fq1:[\"t\",\"m\"]", "user": {"id": "U1"}}}),
        json!({"type": "message", "message": {"id": "m", "text": "hi", "author": {"id": "U1"}, "metadata": {"dateSent": "2026-01-01T00:00:00.000Z"}}}),
        json!({"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}, {"type": "tool-question", "toolCallId": "c", "state": "input-available", "input": {}}], "metadata": {}}),
    ])) {
        let _ = serde_json::from_value::<Interaction>(v.clone()).map(|i| (i.user().id.clone(), i.kind()));
        if let Ok(m) = serde_json::from_value::<UiMessage>(v.clone()) {
            let _ = m.text();
            let _ = m.tool_parts().count();
        }
        let _ = serde_json::from_value::<Vec<MessagePart>>(v["parts"].clone());
        if let Some(s) = v.as_str() {
            let _ = decode_question_modal_metadata(s);
            let _ = ChatId::new(s);
        }
    }

    #[test]
    fn form_locators_and_ids_never_panic(s in prop_oneof![
        mutated_text("fq1:[\"C1:17.5\",\"m:1\"]".into()),
        arb_string(),
    ]) {
        if let Some(l) = decode_question_modal_metadata(&s) {
            prop_assert!(s.starts_with("fq1:"));
            let _ = l.thread_id;
        }
        if let Ok(id) = ChatId::new(s.clone()) {
            prop_assert!((1..=128).contains(&id.as_str().chars().count()));
        }
    }

    #[test]
    fn times_are_rfc3339_and_keep_their_order(a in any::<i64>(), b in any::<i64>(), s in prop_oneof![arb_string(), mutated_text("2026-01-01T00:00:00.000Z".into())]) {
        let (ia, ib) = (millis_to_iso(a), millis_to_iso(b));
        let back = iso_to_millis(&ia).expect("parses back");
        prop_assert_eq!(back, a.clamp(MIN_ISO_MILLIS, MAX_ISO_MILLIS), "{}", ia);
        prop_assert_eq!(ia.len(), 24, "{}", ia);
        if a <= b {
            prop_assert!(ia <= ib, "{ia} > {ib}");
        }
        let _ = iso_to_millis(&s);
    }

}

proptest! {
    // Splitting is the slow part (text-splitter unoptimised in debug builds): fewer cases.
    #![proptest_config(config(40))]

    #[test]
    fn split_and_truncate_keep_any_limit(text in prop_oneof![
        3 => prop::collection::vec(any::<char>(), 0..400).prop_map(String::from_iter),
        1 => prop::sample::select(vec!["🐸", "👩‍👩‍👧", "e\u{301}", "\u{0}", "\u{feff}", "é"]).prop_flat_map(|c| (0usize..1500).prop_map(move |n| c.repeat(n))),
        2 => "(```[a-z]{0,3}\n)?([a-zé🐸 ]{0,40}\n){0,30}(```)?",
        2 => prop::collection::vec(prop_oneof![Just("```rust\n".to_owned()), Just("~~~~\n".to_owned()), Just("\n\n".to_owned()), Just("# h\n".to_owned()), Just("| a | b |\n|---|---|\n".to_owned()), "[a-z🐸 ]{0,30}"], 0..12).prop_map(|v| v.concat()),
    ], max in prop_oneof![1usize..8, 8usize..200, Just(2000usize), Just(4096usize)]) {
        let pieces = split(&text, max);
        if text.trim().is_empty() {
            prop_assert!(pieces.is_empty());
        }
        if text.chars().count() <= max.max(1) && !text.trim().is_empty() {
            prop_assert_eq!(&pieces, &vec![text.clone()]);
        }
        for p in &pieces {
            prop_assert!(p.chars().count() <= max.max(1), "{} > {max}: {p:?}", p.chars().count());
            prop_assert!(!p.trim().is_empty());
        }
        let t = truncate(&text, max);
        prop_assert!(t.chars().count() <= max, "{} > {max}: {t:?}", t.chars().count());
        if text.chars().count() <= max {
            prop_assert_eq!(t, text);
        }
    }

}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_json_is_no_question_input_or_a_clear_refusal(v in arb_json()) {
        if let Ok(input) = serde_json::from_value::<QuestionInput>(v) {
            match input.validate() {
                Ok(()) => check_valid(&input),
                Err(reason) => prop_assert!(!reason.is_empty()),
            }
        }
    }
}

// ---- Regressions (the minimal inputs the fuzzing found) ----

#[test]
fn regression_a_reply_of_commas_is_no_empty_choice() {
    let input: QuestionInput = serde_json::from_value(question_samples()[0].clone()).unwrap();
    for q in &input.questions {
        for text in [",", ", ,"] {
            assert_ne!(q.choice_in_reply(text), ReplyChoice::Options(vec![]));
        }
    }
}

#[test]
fn regression_huge_expiry_is_refused() {
    let mut v = question_samples()[2].clone();
    v["expiresInSeconds"] = json!(u64::MAX);
    let input: QuestionInput = serde_json::from_value(v).unwrap();
    assert!(input.validate().is_err());
}

#[test]
fn regression_times_past_year_9999_are_clamped() {
    assert_eq!(millis_to_iso(i64::MAX), "9999-12-31T23:59:59.999Z");
    assert_eq!(millis_to_iso(i64::MIN), "0000-01-01T00:00:00.000Z");
    assert_eq!(
        millis_to_iso(300_000_000_000_000),
        "9999-12-31T23:59:59.999Z"
    );
}
