//! Fuzzing every reader of what Discord sends: `INTERACTION_CREATE` dispatches and bare
//! interactions (components, modal submissions with action rows or Labels, pings), the
//! interactions endpoint's signature and timestamp check, messages, and the adapter's ids.
//! Arbitrary and mutated real-shaped input (the shapes of convert.rs's tests): no panic, a clear
//! error or a sane value.

use ed25519_dalek::{Signer, SigningKey};
use frogbot_discord::Error;
use frogbot_discord::convert::{
    EndpointRequest, EndpointVerifier, check_fresh, interaction_from_gateway, modal_values,
    parse_interaction_json, selected_values, strip_mention, text_mentions, thread_message,
};
use frogbot_discord::ids::{Control, is_other, snowflake};
use frogbot_model::fuzz::{arb_json, arb_string, json_input, mutated_text};
use frogbot_model::{Interaction, iso_to_millis};
use proptest::prelude::*;
use serde_json::{Value, json};
use serenity::model::channel::Message;
use serenity::model::id::UserId;

const NOW: i64 = 1_700_000_000;

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn user_json() -> Value {
    json!({"id": "300000000000000003", "username": "bob", "global_name": "Bob", "discriminator": "0", "avatar": null})
}

fn message_json() -> Value {
    json!({
        "id": "1318349183424823306", "channel_id": "700000000000000007", "guild_id": "1000000000000000001",
        "author": {"id": "300000000000000003", "username": "alice", "global_name": "Alice", "discriminator": "0", "avatar": null},
        "content": "hello <@600000000000000006>", "timestamp": "2026-01-01T00:00:00.000000+00:00",
        "edited_timestamp": null, "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [],
        "attachments": [], "embeds": [], "pinned": false, "type": 0, "components": [],
        "message_reference": {"message_id": "800000000000000008", "channel_id": "700000000000000007"}
    })
}

fn component(data: Value) -> Value {
    json!({
        "id": "500000000000000005", "application_id": "600000000000000006", "type": 3, "data": data,
        "guild_id": "1000000000000000001", "channel_id": "700000000000000007",
        "member": {"user": user_json(), "roles": [], "joined_at": "2025-01-01T00:00:00.000000+00:00", "deaf": false, "mute": false, "flags": 0},
        "user": user_json(), "token": "tok-abc", "version": 1, "message": message_json(),
        "locale": "en-US", "guild_locale": "en-US", "app_permissions": "0", "entitlements": [],
        "authorizing_integration_owners": {"0": "1000000000000000001"}, "context": 0,
        "attachment_size_limit": 26214400
    })
}

fn modal(components: Value) -> Value {
    json!({
        "id": "500000000000000009", "application_id": "600000000000000006", "type": 5,
        "data": {"custom_id": "fq1:[\"700000000000000007\",\"800000000000000008\"]", "components": components},
        "channel_id": "700000000000000007", "user": user_json(), "token": "tok-modal", "version": 1,
        "locale": "en-US", "entitlements": [], "attachment_size_limit": 26214400
    })
}

fn interaction_samples() -> Vec<Value> {
    let dispatch = |d: Value| json!({"op": 0, "s": 42, "t": "INTERACTION_CREATE", "d": d});
    let button = component(json!({"custom_id": "fq:0:0:2", "component_type": 2}));
    let select =
        component(json!({"custom_id": "fq:1:0:s", "component_type": 3, "values": ["0", "2"]}));
    let labels = modal(json!([
        {"type": 18, "id": 1, "component": {"type": 4, "id": 2, "custom_id": "fq:0:0:t", "value": "typed in a label"}},
        {"type": 18, "id": 3, "component": {"type": 3, "id": 4, "custom_id": "fq:0:0:s", "values": ["0", "2"]}},
        {"type": 10, "id": 5}
    ]));
    let rows = modal(json!([
        {"type": 1, "components": [{"type": 4, "custom_id": "fq:0:0:t", "value": "typed in a row"}]}
    ]));
    vec![
        dispatch(button.clone()),
        button,
        dispatch(select.clone()),
        select,
        dispatch(labels.clone()),
        labels,
        rows,
        json!({"id": "1", "application_id": "2", "type": 1, "token": "t", "version": 1}),
    ]
}

fn check_interaction(json: &str) -> Result<(), TestCaseError> {
    let _ = parse_interaction_json(json);
    match interaction_from_gateway(json) {
        Ok(i) => {
            // Nobody is credited with a click serenity could not attribute.
            prop_assert_ne!(&i.user().id, "1", "{}", json);
            prop_assert!(!i.user().id.is_empty());
            if let Interaction::Action { event } = &i {
                let _ = selected_values(&event.raw);
                let _ = Control::decode(&event.action_id);
            }
        }
        Err(e) => prop_assert!(
            matches!(e, Error::Malformed(_) | Error::Unsupported(_)),
            "{e:?}"
        ),
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn interactions_never_panic(v in json_input(interaction_samples())) {
        check_interaction(&v.to_string())?;
    }

    #[test]
    fn cut_interactions_never_panic(text in prop::sample::select(interaction_samples()).prop_flat_map(|v| mutated_text(v.to_string()))) {
        check_interaction(&text)?;
    }

    #[test]
    fn modal_components_never_panic(v in json_input(vec![
        json!([{"type": 18, "component": {"type": 4, "custom_id": "a", "value": "x"}}]),
        json!([{"type": 1, "components": [{"type": 3, "custom_id": "b", "values": ["0", "1"]}]}]),
    ])) {
        for (_, value) in modal_values(&v) {
            prop_assert!(value.is_string() || value.as_array().is_some_and(|a| a.iter().all(Value::is_string)));
        }
        let _ = selected_values(&json!({"data": {"values": v}}));
    }

    #[test]
    fn messages_never_panic(v in json_input(vec![message_json()])) {
        if let Ok(message) = serde_json::from_value::<Message>(v) {
            let m = thread_message(&message);
            prop_assert!(iso_to_millis(&m.metadata.date_sent).is_some(), "{}", m.metadata.date_sent);
            let bot = UserId::new(600000000000000006);
            let _ = strip_mention(&m.text, bot);
            let _ = text_mentions(&m.text, bot);
        }
    }

    #[test]
    fn the_endpoint_check_never_panics_and_only_the_signed_body_passes(
        body in prop_oneof![
            json_input(interaction_samples()).prop_map(|v| v.to_string()),
            arb_string(),
        ],
        ts in prop_oneof![
            Just(NOW.to_string()),
            any::<i64>().prop_map(|t| t.to_string()),
            mutated_text(NOW.to_string()),
            arb_string(),
        ],
        forged in prop_oneof![arb_string(), "[0-9a-f]{128}", "[0-9a-f]{0,130}"],
        now in prop_oneof![Just(NOW), any::<i64>()],
    ) {
        let key = SigningKey::from_bytes(&[7; 32]);
        let verifier = EndpointVerifier::new(&hex(key.verifying_key().as_bytes())).unwrap();
        let signature = hex(&key.sign(&[ts.as_bytes(), body.as_bytes()].concat()).to_bytes());
        let _ = check_fresh(&ts, now);
        match verifier.receive_at(&signature, &ts, body.as_bytes(), NOW) {
            Ok(EndpointRequest::Interaction { interaction, .. }) => {
                let _ = frogbot_discord::convert::interaction(&interaction);
            }
            Ok(_) => {}
            Err(e) => prop_assert!(matches!(e, Error::Malformed(_) | Error::StaleTimestamp | Error::Unsupported(_)), "{e:?}"),
        }
        if forged != signature {
            prop_assert!(matches!(
                verifier.receive_at(&forged, &ts, body.as_bytes(), now),
                Err(Error::BadSignature)
            ));
        }
        let _ = EndpointVerifier::new(&forged);
    }

    #[test]
    fn ids_never_panic(s in prop_oneof![
        arb_string(),
        mutated_text("fq:0:0:2".into()),
        mutated_text("300000000000000003".into()),
        any::<u64>().prop_map(|n| n.to_string()),
        arb_json().prop_map(|v| v.to_string()),
    ]) {
        if let Some(c) = Control::decode(&s) {
            prop_assert!(Control::decode(&c.encode()).is_some());
        }
        let _ = is_other(&s);
        let _ = snowflake(&s);
    }
}

// ---- Regressions (the minimal inputs the fuzzing found) ----

#[test]
fn regression_an_interaction_without_user_or_member_is_refused() {
    let mut v = component(json!({"custom_id": "fq:0:0:2", "component_type": 2}));
    v.as_object_mut().unwrap().remove("user");
    v.as_object_mut().unwrap().remove("member");
    assert!(matches!(
        interaction_from_gateway(&v.to_string()),
        Err(Error::Malformed(_))
    ));
    let mut m = modal(json!([]));
    m.as_object_mut().unwrap().remove("user");
    assert!(matches!(
        interaction_from_gateway(&m.to_string()),
        Err(Error::Malformed(_))
    ));
    // `"user": null` as well.
    m["user"] = Value::Null;
    assert!(matches!(
        interaction_from_gateway(&m.to_string()),
        Err(Error::Malformed(_))
    ));
}
