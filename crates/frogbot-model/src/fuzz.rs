//! proptest strategies for fuzzing every reader of platform or HTTP input (feature `testing`):
//! arbitrary JSON ([`arb_json`]), real-shaped JSON mutated the ways senders get it wrong
//! ([`mutated`]: a field deleted or replaced, its type changed, a huge or negative number, odd
//! unicode, a huge string) and raw text cut or spliced ([`mutated_text`]). The adapters' and the
//! server's `tests/fuzz*.rs` feed them to their readers and check: no panic, a clear error or a
//! sane value.

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::{Map, Value};

/// Keys the platforms' and the API's payloads use, so generated objects hit real fields.
pub const KEYS: &[&str] = &[
    "type",
    "id",
    "user",
    "user_id",
    "username",
    "name",
    "text",
    "ts",
    "thread_ts",
    "blocks",
    "elements",
    "message",
    "message_ts",
    "channel",
    "channel_id",
    "container",
    "actions",
    "action_id",
    "value",
    "selected_option",
    "selected_options",
    "state",
    "values",
    "view",
    "private_metadata",
    "trigger_id",
    "event",
    "event_id",
    "payload",
    "envelope_id",
    "data",
    "custom_id",
    "component_type",
    "components",
    "component",
    "member",
    "token",
    "guild_id",
    "author",
    "content",
    "update_id",
    "callback_query",
    "from",
    "chat",
    "date",
    "message_id",
    "entities",
    "offset",
    "length",
    "caption",
    "caption_entities",
    "reply_to_message",
    "sender",
    "origin_server_ts",
    "event_id",
    "room_id",
    "body",
    "msgtype",
    "m.relates_to",
    "rel_type",
    "event_id",
    "m.in_reply_to",
    "m.selections",
    "org.matrix.msc3381.poll.response",
    "answers",
    "parts",
    "toolCallId",
    "output",
    "selected",
    "header",
    "question",
    "questions",
    "options",
    "label",
    "multiple",
    "custom",
    "default",
    "expiresInSeconds",
    "dismissed",
    "delivery",
    "model",
    "reasoning",
    "is_bot",
    "first_name",
    "bot_id",
    "subtype",
    "mentions",
    "url",
];

/// Strings that break readers: empty, arbitrary unicode, combining marks, emoji (outside the
/// BMP: two UTF-16 units), zero-width and BOM, NUL, numbers as text, long and huge strings.
pub fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<String>(),
        2 => "[a-zA-Z0-9:._@-]{0,16}",
        1 => Just(String::new()),
        1 => prop::sample::select(vec![
            "🐸", "👩‍👩‍👧", "e\u{301}", "\u{0}", "a\u{200d}b", "\u{feff}", " ", "\n\r\t", "é",
            "\u{10ffff}", "-1", "0", "1.5", "1e309", "NaN", "9999999999999999999999",
            "-9223372036854775809", "18446744073709551616", "1700000000.123456", ",", ", ,",
            "@frogbot", "<@U123>", "/skip", "```", "<b>", "&amp;",
        ])
        .prop_map(str::to_owned),
        1 => (0usize..3000, any::<char>()).prop_map(|(n, c)| c.to_string().repeat(n)),
        1 => (0usize..70_000).prop_map(|n| "🐸x".repeat(n / 2)),
    ]
}

/// Numbers at and past the edges: 0, ±1, the integer limits, huge and tiny floats.
pub fn arb_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop::sample::select(vec![
            Value::from(0),
            Value::from(-1),
            Value::from(1),
            Value::from(i64::MIN),
            Value::from(i64::MAX),
            Value::from(u64::MAX),
            Value::from(u32::MAX),
            Value::from(i64::MAX / 1000 + 1),
            Value::from(1e308),
            Value::from(-1e308),
            Value::from(0.5),
            Value::from(-0.0),
            Value::from(f64::MIN_POSITIVE),
        ]),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
    ]
}

fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(KEYS).prop_map(str::to_owned),
        1 => "[a-z_]{1,10}",
        1 => any::<String>(),
    ]
}

/// Arbitrary JSON: scalars of [`arb_number`] / [`arb_string`], arrays and objects (keys mostly
/// from [`KEYS`]) nested a few levels.
pub fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        arb_number(),
        arb_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((arb_key(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// One change to one place of a JSON value.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Mutation {
    /// Remove the field or array item (the root becomes `null`).
    Delete,
    /// Replace it with arbitrary JSON.
    Replace(Value),
    /// A huge number (or a huge number as text, for a string).
    Huge(Value),
    /// A negative number (`-1`, or the value negated).
    Negative,
    /// Replace a string with odd unicode, or a scalar with a string.
    Text(String),
    /// Change the type: a string becomes a number, a number a string, an object an array…
    Retype,
    /// Add a field to an object (or an item to an array).
    Insert(String, Value),
    /// Wrap the value in an array.
    Wrap,
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => Just(Mutation::Delete),
        2 => arb_json().prop_map(Mutation::Replace),
        2 => prop::sample::select(vec![
            Value::from(u64::MAX),
            Value::from(i64::MAX),
            Value::from(i64::MIN),
            Value::from(1e300),
            Value::from(i64::MAX / 1000 + 1),
            Value::from(u32::MAX as u64 + 1),
        ])
        .prop_map(Mutation::Huge),
        1 => Just(Mutation::Negative),
        2 => arb_string().prop_map(Mutation::Text),
        2 => Just(Mutation::Retype),
        1 => (arb_key(), arb_json()).prop_map(|(k, v)| Mutation::Insert(k, v)),
        1 => Just(Mutation::Wrap),
    ]
}

/// Every place of `v` (the root first), as paths of object keys / array indices.
fn places(v: &Value) -> Vec<Vec<Step>> {
    fn walk(v: &Value, at: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
        out.push(at.clone());
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    at.push(Step::Key(k.clone()));
                    walk(child, at, out);
                    at.pop();
                }
            }
            Value::Array(a) => {
                for (i, child) in a.iter().enumerate() {
                    at.push(Step::Index(i));
                    walk(child, at, out);
                    at.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

fn at_mut<'a>(v: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, step| match step {
        Step::Key(k) => v.get_mut(k.as_str()),
        Step::Index(i) => v.get_mut(*i),
    })
}

/// Applies `m` at the place `which` selects (modulo the number of places of `v`, the root 0).
pub fn apply(v: &mut Value, which: usize, m: &Mutation) {
    let all = places(v);
    let path = all[which % all.len()].clone();
    if let Mutation::Delete = m {
        let Some((last, parent)) = path.split_last() else {
            *v = Value::Null;
            return;
        };
        match (at_mut(v, parent), last) {
            (Some(Value::Object(o)), Step::Key(k)) => {
                o.remove(k);
            }
            (Some(Value::Array(a)), Step::Index(i)) if *i < a.len() => {
                a.remove(*i);
            }
            _ => {}
        }
        return;
    }
    let Some(target) = at_mut(v, &path) else {
        return;
    };
    *target = match (m, std::mem::take(target)) {
        (Mutation::Replace(new), _) => new.clone(),
        (Mutation::Huge(n), Value::String(_)) => Value::String(format!("{n}{n}")),
        (Mutation::Huge(n), _) => n.clone(),
        (Mutation::Negative, Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Value::from(i.checked_neg().unwrap_or(i64::MIN)),
            (None, Some(f)) => Value::from(-f),
            _ => Value::from(-1),
        },
        (Mutation::Negative, Value::String(s)) => Value::String(format!("-{s}")),
        (Mutation::Negative, _) => Value::from(-1),
        (Mutation::Text(s), Value::String(old)) if !old.is_empty() && s.len() < 64 => {
            // Odd text around the old value (the value itself is often what the reader checks).
            Value::String(format!("{s}{old}{s}"))
        }
        (Mutation::Text(s), _) => Value::String(s.clone()),
        (Mutation::Retype, Value::String(s)) => s
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| Value::Array(vec![Value::String(s)])),
        (Mutation::Retype, Value::Number(n)) => Value::String(n.to_string()),
        (Mutation::Retype, Value::Bool(b)) => Value::String(b.to_string()),
        (Mutation::Retype, Value::Null) => Value::Object(Map::new()),
        (Mutation::Retype, Value::Array(a)) => Value::Object(
            a.into_iter()
                .enumerate()
                .map(|(i, x)| (i.to_string(), x))
                .collect(),
        ),
        (Mutation::Retype, Value::Object(o)) => {
            Value::Array(o.into_iter().map(|(_, x)| x).collect())
        }
        (Mutation::Insert(k, new), Value::Object(mut o)) => {
            o.insert(k.clone(), new.clone());
            Value::Object(o)
        }
        (Mutation::Insert(_, new), Value::Array(mut a)) => {
            a.push(new.clone());
            Value::Array(a)
        }
        (Mutation::Insert(_, new), _) => new.clone(),
        (Mutation::Wrap, old) => Value::Array(vec![old]),
        (Mutation::Delete, old) => old,
    };
}

/// `sample` with one to four [`Mutation`]s at random places.
pub fn mutated(sample: Value) -> impl Strategy<Value = Value> {
    prop::collection::vec((any::<usize>(), arb_mutation()), 1..5).prop_map(move |ms| {
        let mut v = sample.clone();
        for (which, m) in &ms {
            apply(&mut v, *which, m);
        }
        v
    })
}

/// One of `samples`, [`mutated`].
pub fn mutated_one_of(samples: Vec<Value>) -> impl Strategy<Value = Value> {
    assert!(!samples.is_empty(), "at least one sample");
    prop::sample::select(samples).prop_flat_map(mutated)
}

/// Real-shaped JSON, mutated or arbitrary: what the fuzz suites feed a reader.
pub fn json_input(samples: Vec<Value>) -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => mutated_one_of(samples.clone()),
        1 => prop::sample::select(samples),
        2 => arb_json(),
    ]
}

/// `text` cut short, with a piece taken out, or with arbitrary text spliced in (at character
/// boundaries): broken JSON, cut forms, half a signature.
pub fn mutated_text(text: String) -> impl Strategy<Value = String> {
    (any::<Index>(), any::<Index>(), 0u8..3, arb_string()).prop_map(move |(a, b, op, junk)| {
        let cuts: Vec<usize> = text
            .char_indices()
            .map(|(i, _)| i)
            .chain([text.len()])
            .collect();
        let (mut x, mut y) = (*a.get(&cuts), *b.get(&cuts));
        if x > y {
            std::mem::swap(&mut x, &mut y);
        }
        match op {
            0 => text[..x].to_owned(),
            1 => format!("{}{}", &text[..x], &text[y..]),
            _ => format!("{}{junk}{}", &text[..x], &text[y..]),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    use serde_json::json;

    #[test]
    fn mutations_change_the_sample_in_place() {
        let sample = json!({"a": {"b": [1, "x"]}, "c": true});
        let mut runner = TestRunner::deterministic();
        let mut changed = 0;
        for _ in 0..200 {
            let v = mutated(sample.clone())
                .new_tree(&mut runner)
                .unwrap()
                .current();
            changed += usize::from(v != sample);
        }
        assert!(changed > 150, "{changed}");
        let mut v = sample.clone();
        apply(&mut v, 0, &Mutation::Delete);
        assert_eq!(v, Value::Null);
    }
}
