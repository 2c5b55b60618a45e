//! Elicitations: a server's `elicitation/create` (form mode) as a FrogBot question, and the
//! person's answer as the typed content the server asked for.
//!
//! The requested schema's properties, in the order the server sent them, become the inputs of one
//! question (several inputs: a form):
//!
//! | property | input |
//! |---|---|
//! | `string` (`format` email / uri / date / date-time: a hint in the empty field; `maxLength`) | `text_input` |
//! | `number` (`minimum`, `maximum`) | `number_input` |
//! | `integer` (`minimum`, `maximum`) | `number_input` in whole steps |
//! | `boolean` | `toggle` |
//! | `enum`, `oneOf` (titled), legacy `enum` + `enumNames` | `choice` (labels are the titles) |
//! | `array` of `enum` / `anyOf` | `choice` with `multiple` |
//!
//! A property's `title` is the input's header (its key when titles repeat), its `description` the
//! input's question (the request's `message` leads the first), `default` the input's default, and
//! a property not `required` may be left empty. A request without properties is one confirm
//! button ("Accept"). The answer goes back as `accept` with content typed per the schema
//! (integers as integers, numbers as numbers, booleans as booleans, a multiple choice as an array
//! of the values, a titled choice as its value, not its title); empty optional inputs are left
//! out.
//!
//! What cannot be drawn — URL-mode elicitation, a property kind this crate does not know — is
//! refused by [`Form::new`] with the reason; the hub declines it.

use rmcp::model::{
    ElicitationSchema, EnumSchema, MultiSelectEnumSchema, PrimitiveSchemaDefinition,
    SingleSelectEnumSchema, StringFormat,
};
use serde_json::{Map, Number, Value};

use frogbot_core::model::{
    InputKind, QuestionInput, QuestionItem, QuestionOption, QuestionOutput, TEXT_INPUT_MAX,
    TOGGLE_OFF, TOGGLE_ON,
};

/// The label of the one button of a request without properties.
pub const ACCEPT_LABEL: &str = "Accept";

/// A form-mode elicitation as a question, and how its answers become the content.
#[derive(Clone, Debug, PartialEq)]
pub struct Form {
    question: QuestionInput,
    fields: Vec<Field>,
}

#[derive(Clone, Debug, PartialEq)]
struct Field {
    key: String,
    kind: FieldKind,
}

#[derive(Clone, Debug, PartialEq)]
enum FieldKind {
    Text,
    Number,
    Integer,
    Boolean,
    /// `(label, value)` of each option.
    One(Vec<(String, String)>),
    Many(Vec<(String, String)>),
}

/// What a property is, read from the schema.
struct Property {
    title: Option<String>,
    description: Option<String>,
    item: QuestionItem,
    kind: FieldKind,
}

impl Form {
    /// The question for a request with `message` and `schema`; `expires_in_seconds` is the
    /// question's expiry. `Err` says why it cannot be asked.
    pub fn new(
        message: &str,
        schema: &ElicitationSchema,
        expires_in_seconds: Option<u64>,
    ) -> Result<Form, String> {
        let order: Vec<String> = schema
            .property_order
            .clone()
            .unwrap_or_else(|| schema.properties.keys().cloned().collect());
        let required = schema.required.clone().unwrap_or_default();
        let message = message.trim();
        let mut items = Vec::new();
        let mut fields = Vec::new();
        for key in order {
            let Some(def) = schema.properties.get(&key) else {
                continue;
            };
            let p = property(&key, def)?;
            let mut item = p.item;
            let title = p.title.filter(|t| !t.trim().is_empty());
            item.header = match title {
                Some(t) if !items.iter().any(|i: &QuestionItem| i.header == t) => t,
                _ => key.clone(),
            };
            if items.iter().any(|i: &QuestionItem| i.header == item.header) {
                item.header = format!("{} ({key})", item.header);
            }
            let about = p
                .description
                .filter(|d| !d.trim().is_empty())
                .unwrap_or_else(|| item.header.clone());
            item.question = if items.is_empty() && !message.is_empty() {
                format!("{message}\n\n{about}")
            } else {
                about
            };
            item.required = required.contains(&key);
            items.push(item);
            fields.push(Field { key, kind: p.kind });
        }
        if items.is_empty() {
            items.push(QuestionItem {
                header: schema
                    .title
                    .as_deref()
                    .filter(|t| !t.trim().is_empty())
                    .unwrap_or("Request")
                    .to_owned(),
                question: if message.is_empty() {
                    "The server asks you to accept.".into()
                } else {
                    message.to_owned()
                },
                kind: InputKind::Confirm,
                label: Some(ACCEPT_LABEL.into()),
                ..QuestionItem::default()
            });
        }
        let question = QuestionInput {
            questions: items,
            expires_in_seconds,
            from: Vec::new(),
            blocks: Vec::new(),
        };
        question
            .validate()
            .map_err(|e| format!("the requested schema cannot be asked: {e}"))?;
        Ok(Form { question, fields })
    }

    /// The question to ask.
    pub fn question(&self) -> &QuestionInput {
        &self.question
    }

    /// The content for `accept`: the answers typed per the schema (empty optional inputs left
    /// out). `Err` when the answers do not fit the question.
    pub fn content(&self, output: &QuestionOutput) -> Result<Value, String> {
        self.question.check_output(output)?;
        let mut content = Map::new();
        for (field, answer) in self.fields.iter().zip(&output.answers) {
            let Some(first) = answer.selected.first() else {
                continue;
            };
            let value = match &field.kind {
                FieldKind::Text => Value::String(first.clone()),
                FieldKind::Integer => {
                    let n: f64 = first
                        .trim()
                        .parse()
                        .map_err(|_| format!("{:?} is not a number", first))?;
                    if n.fract() != 0.0 {
                        return Err(format!("{first:?} is not a whole number"));
                    }
                    Value::from(n as i64)
                }
                FieldKind::Number => {
                    let n: f64 = first
                        .trim()
                        .parse()
                        .map_err(|_| format!("{:?} is not a number", first))?;
                    Number::from_f64(n)
                        .map(Value::Number)
                        .ok_or_else(|| format!("{first:?} is not a finite number"))?
                }
                FieldKind::Boolean => Value::Bool(first == TOGGLE_ON),
                FieldKind::One(options) => Value::String(value_of(options, first)?),
                FieldKind::Many(options) => Value::Array(
                    answer
                        .selected
                        .iter()
                        .map(|l| value_of(options, l).map(Value::String))
                        .collect::<Result<_, _>>()?,
                ),
            };
            content.insert(field.key.clone(), value);
        }
        Ok(Value::Object(content))
    }
}

fn value_of(options: &[(String, String)], label: &str) -> Result<String, String> {
    options
        .iter()
        .find(|(l, _)| l == label)
        .map(|(_, v)| v.clone())
        .ok_or_else(|| format!("{label:?} is not an option"))
}

/// Options from `(value, title)` pairs: labels are the titles, made unique with the value where
/// two are the same.
fn options(pairs: Vec<(String, Option<String>)>) -> Vec<(String, String)> {
    let titles: Vec<Option<String>> = pairs
        .iter()
        .map(|(_, t)| t.clone().filter(|t| !t.trim().is_empty()))
        .collect();
    pairs
        .into_iter()
        .zip(&titles)
        .map(|((value, _), title)| {
            let label = match title {
                Some(t) if titles.iter().filter(|x| x.as_ref() == Some(t)).count() == 1 => {
                    t.clone()
                }
                Some(t) => format!("{t} ({value})"),
                None => value.clone(),
            };
            (label, value)
        })
        .collect()
}

fn choice(
    options: &[(String, String)],
    multiple: bool,
    default: Option<Vec<String>>,
) -> QuestionItem {
    // A default names values; the question's default names labels (dropped where one is unknown).
    let default = default.and_then(|values| {
        values
            .iter()
            .map(|v| options.iter().find(|(_, x)| x == v).map(|(l, _)| l.clone()))
            .collect::<Option<Vec<_>>>()
    });
    QuestionItem {
        kind: InputKind::Choice,
        options: options
            .iter()
            .map(|(label, _)| QuestionOption {
                label: label.clone(),
                description: None,
            })
            .collect(),
        multiple,
        default,
        ..QuestionItem::default()
    }
}

/// A number input.
fn number_input(
    min: Option<Number>,
    max: Option<Number>,
    step: Option<Number>,
    default: Option<String>,
) -> QuestionItem {
    QuestionItem {
        kind: InputKind::NumberInput,
        min,
        max,
        step,
        default: default.map(|d| vec![d]),
        ..QuestionItem::default()
    }
}

fn number(n: f64) -> Option<Number> {
    Number::from_f64(n)
}

/// One property as an input.
fn property(key: &str, def: &PrimitiveSchemaDefinition) -> Result<Property, String> {
    let text = |s: Option<&std::borrow::Cow<'static, str>>| s.map(|s| s.to_string());
    // The property of `item`, drawn as `kind`, with the schema `s`'s title and description.
    macro_rules! titled {
        ($s:expr, $kind:expr, $item:expr) => {
            Property {
                title: text($s.title.as_ref()),
                description: text($s.description.as_ref()),
                item: $item,
                kind: $kind,
            }
        };
    }
    Ok(match def {
        PrimitiveSchemaDefinition::String(s) => {
            let hint = s.format.map(|f| match f {
                StringFormat::Email => "name@example.com",
                StringFormat::Uri => "https://…",
                StringFormat::Date => "YYYY-MM-DD",
                StringFormat::DateTime => "YYYY-MM-DDThh:mm:ssZ",
                _ => "",
            });
            let item = QuestionItem {
                kind: InputKind::TextInput,
                placeholder: hint.filter(|h| !h.is_empty()).map(str::to_owned),
                max_length: s.max_length.map(|m| m.clamp(1, TEXT_INPUT_MAX)),
                default: s.default.clone().filter(|d| !d.is_empty()).map(|d| vec![d]),
                ..QuestionItem::default()
            };
            titled!(s, FieldKind::Text, item)
        }
        PrimitiveSchemaDefinition::Number(n) => {
            let (min, max) = (n.minimum.and_then(number), n.maximum.and_then(number));
            let item = number_input(min, max, None, n.default.map(|d| d.to_string()));
            titled!(n, FieldKind::Number, item)
        }
        PrimitiveSchemaDefinition::Integer(n) => {
            let (min, max) = (n.minimum.map(Number::from), n.maximum.map(Number::from));
            let step = Some(Number::from(1));
            let item = number_input(min, max, step, n.default.map(|d| d.to_string()));
            titled!(n, FieldKind::Integer, item)
        }
        PrimitiveSchemaDefinition::Boolean(b) => {
            let title = b.title.as_deref().filter(|t| !t.trim().is_empty());
            let on = |d: bool| if d { TOGGLE_ON } else { TOGGLE_OFF }.to_owned();
            let item = QuestionItem {
                kind: InputKind::Toggle,
                label: Some(title.unwrap_or("Yes").to_owned()),
                default: b.default.map(|d| vec![on(d)]),
                ..QuestionItem::default()
            };
            titled!(b, FieldKind::Boolean, item)
        }
        PrimitiveSchemaDefinition::Enum(e) => {
            let (title, description, opts, multiple, default) = match e {
                EnumSchema::Single(SingleSelectEnumSchema::Untitled(s)) => (
                    text(s.title.as_ref()),
                    text(s.description.as_ref()),
                    options(s.enum_.iter().map(|v| (v.clone(), None)).collect()),
                    false,
                    s.default.clone().map(|d| vec![d]),
                ),
                EnumSchema::Single(SingleSelectEnumSchema::Titled(s)) => (
                    text(s.title.as_ref()),
                    text(s.description.as_ref()),
                    options(
                        s.one_of
                            .iter()
                            .map(|c| (c.const_.clone(), Some(c.title.clone())))
                            .collect(),
                    ),
                    false,
                    s.default.clone().map(|d| vec![d]),
                ),
                EnumSchema::Multi(MultiSelectEnumSchema::Untitled(s)) => (
                    text(s.title.as_ref()),
                    text(s.description.as_ref()),
                    options(s.items.enum_.iter().map(|v| (v.clone(), None)).collect()),
                    true,
                    s.default.clone(),
                ),
                EnumSchema::Multi(MultiSelectEnumSchema::Titled(s)) => (
                    text(s.title.as_ref()),
                    text(s.description.as_ref()),
                    options(
                        s.items
                            .any_of
                            .iter()
                            .map(|c| (c.const_.clone(), Some(c.title.clone())))
                            .collect(),
                    ),
                    true,
                    s.default.clone(),
                ),
                EnumSchema::Legacy(s) => {
                    let names = s
                        .enum_names
                        .clone()
                        .filter(|n| n.len() == s.enum_.len())
                        .map(|n| n.into_iter().map(Some).collect::<Vec<_>>())
                        .unwrap_or_else(|| vec![None; s.enum_.len()]);
                    (
                        text(s.title.as_ref()),
                        text(s.description.as_ref()),
                        options(s.enum_.iter().cloned().zip(names).collect()),
                        false,
                        s.default.clone().map(|d| vec![d]),
                    )
                }
                _ => {
                    return Err(format!(
                        "property {key:?} has an enum kind FrogBot cannot draw"
                    ));
                }
            };
            if opts.is_empty() {
                return Err(format!("property {key:?} offers no options"));
            }
            let item = choice(&opts, multiple, default);
            Property {
                title,
                description,
                item,
                kind: if multiple {
                    FieldKind::Many(opts)
                } else {
                    FieldKind::One(opts)
                },
            }
        }
        _ => return Err(format!("property {key:?} has a type FrogBot cannot draw")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use frogbot_core::model::QuestionAnswer;
    use serde_json::json;

    fn schema(v: Value) -> ElicitationSchema {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_request_without_properties_is_one_accept_button() {
        let form = Form::new(
            "Go ahead?",
            &schema(json!({"type": "object", "properties": {}})),
            None,
        )
        .unwrap();
        let q = &form.question().questions[0];
        assert_eq!(q.kind, InputKind::Confirm);
        assert_eq!(q.question, "Go ahead?");
        let out = QuestionOutput {
            answers: vec![QuestionAnswer {
                header: q.header.clone(),
                selected: vec![ACCEPT_LABEL.into()],
            }],
        };
        assert_eq!(form.content(&out).unwrap(), json!({}));
    }

    #[test]
    fn repeated_titles_fall_back_to_keys() {
        let form = Form::new(
            "m",
            &schema(json!({"type": "object", "properties": {
                "a": {"type": "string", "title": "Name"},
                "b": {"type": "string", "title": "Name"}
            }})),
            Some(30),
        )
        .unwrap();
        let headers: Vec<_> = form
            .question()
            .questions
            .iter()
            .map(|q| q.header.as_str())
            .collect();
        assert_eq!(headers, ["Name", "b"]);
        assert_eq!(form.question().expires_in_seconds, Some(30));
    }
}
