//! Reading a typed reply (a thread reply, where a platform draws no control or the person types
//! anyway) as an answer to one question: [`ReplyChoice`], numbers, toggles and skipping.

use super::{InputKind, QuestionItem, TOGGLE_OFF, TOGGLE_ON};

/// What a typed reply (a thread reply on Slack, Discord or Matrix) says about one question: see
/// [`QuestionItem::choice_in_reply`]. Every adapter reads replies with it, so the same text means
/// the same on every platform.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplyChoice {
    /// The options it names (their labels, in the order given, each once).
    Options(Vec<String>),
    /// It names options wrongly (a number that is no option, several for a one-choice question):
    /// rejected with this reason.
    Invalid(String),
    /// It names no option: the person's own text (an answer where the question is `custom`).
    Text,
}

impl QuestionItem {
    /// Reads a typed reply as a choice of this question's options. The whole text may be an
    /// option's label (any case) or its number counting from 1; for several options, labels or
    /// numbers separated by commas (numbers also by spaces: `1 3`, `1, 3`, `1. 3.`). A number out
    /// of range, or several options for a one-choice question, is [`ReplyChoice::Invalid`];
    /// anything else that is not all options is [`ReplyChoice::Text`].
    ///
    /// For the other kinds the reply is the answer itself: a `text_input` takes the text (too long
    /// is invalid), a `number_input` a number within its bounds (text with a digit that is no
    /// valid number is invalid with the reason; text without one is [`ReplyChoice::Text`]), a
    /// `toggle` yes/no/on/off or its label, a `confirm` its label, `yes` or `ok`.
    pub fn choice_in_reply(&self, text: &str) -> ReplyChoice {
        let text = text.trim();
        match self.kind {
            InputKind::Choice => {}
            InputKind::TextInput => {
                if text.is_empty() {
                    return ReplyChoice::Text;
                }
                return match self.check_text(text) {
                    Ok(()) => ReplyChoice::Options(vec![text.to_owned()]),
                    Err(reason) => ReplyChoice::Invalid(format!("{reason}.")),
                };
            }
            InputKind::NumberInput => {
                return match self.read_number(text) {
                    Ok(n) => ReplyChoice::Options(vec![n]),
                    Err(reason) if text.chars().any(|c| c.is_ascii_digit()) => {
                        ReplyChoice::Invalid(format!("{reason}."))
                    }
                    Err(_) => ReplyChoice::Text,
                };
            }
            InputKind::Toggle => {
                return match self.read_toggle(text) {
                    Some(v) => ReplyChoice::Options(vec![v.to_owned()]),
                    None => ReplyChoice::Text,
                };
            }
            InputKind::Confirm => {
                let label = self.confirm_label();
                let yes = ["yes", "y", "ok", "confirm"];
                return if text.eq_ignore_ascii_case(label)
                    || yes.iter().any(|w| text.eq_ignore_ascii_case(w))
                {
                    ReplyChoice::Options(vec![label.to_owned()])
                } else {
                    ReplyChoice::Text
                };
            }
        }
        if text.is_empty() || self.options.is_empty() {
            return ReplyChoice::Text;
        }
        let label_of = |word: &str| {
            self.options
                .iter()
                .position(|o| o.label.eq_ignore_ascii_case(word))
        };
        if let Some(i) = label_of(text) {
            return ReplyChoice::Options(vec![self.options[i].label.clone()]);
        }
        let number = |word: &str| word.trim_end_matches('.').parse::<usize>().ok();
        let mut parts: Vec<&str> = text
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect();
        let spaced: Vec<&str> = text
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|p| !p.is_empty())
            .collect();
        if spaced.iter().all(|w| number(w).is_some()) {
            parts = spaced;
        }
        let n = self.options.len();
        let mut chosen: Vec<usize> = Vec::new();
        for part in parts {
            let i = match (label_of(part), number(part)) {
                (Some(i), _) => i,
                (None, Some(k)) if (1..=n).contains(&k) => k - 1,
                (None, Some(_)) => {
                    return ReplyChoice::Invalid(format!("pick a number from 1 to {n}."));
                }
                (None, None) => return ReplyChoice::Text,
            };
            if !chosen.contains(&i) {
                chosen.push(i);
            }
        }
        if chosen.len() > 1 && !self.multiple {
            return ReplyChoice::Invalid("pick only one option.".into());
        }
        if chosen.is_empty() {
            // Only separators (`,`, `, ,`): no option named.
            return ReplyChoice::Text;
        }
        ReplyChoice::Options(
            chosen
                .into_iter()
                .map(|i| self.options[i].label.clone())
                .collect(),
        )
    }

    /// Whether a typed reply addressed to this question asks to skip it ([`is_skip_reply`]): the
    /// adapter's `parse` then returns `ParseResult::Dismiss`. The word `skip` alone means skip
    /// also on a `custom` question (it is not taken as an own answer); only an option labelled
    /// `skip` (any case) takes the bare word as its choice, while `/skip` skips always.
    pub fn skip_in_reply(&self, text: &str) -> bool {
        let text = text.trim();
        is_skip_reply(text)
            && !(text.eq_ignore_ascii_case(SKIP_WORD)
                && self
                    .options
                    .iter()
                    .any(|o| o.label.trim().eq_ignore_ascii_case(SKIP_WORD)))
    }

    /// Reads a number for a `number_input` (the `unit` may follow it) and checks it against
    /// `min`, `max` and `step`: the number as the answer stores it (`3`, `2.5`), or why not.
    pub fn read_number(&self, text: &str) -> Result<String, String> {
        let mut t = text.trim();
        if let Some(unit) = self
            .unit
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty())
            && t.len() > unit.len()
            && t.is_char_boundary(t.len() - unit.len())
            && t[t.len() - unit.len()..].eq_ignore_ascii_case(unit)
        {
            t = t[..t.len() - unit.len()].trim_end();
        }
        let wanted = || format!("enter a number{}", self.range_phrase());
        let v: f64 = match t.parse::<f64>() {
            Ok(v) if v.is_finite() && !t.starts_with('+') && !t.ends_with('.') => v,
            _ => return Err(wanted()),
        };
        let min = self.min.as_ref().and_then(serde_json::Number::as_f64);
        let max = self.max.as_ref().and_then(serde_json::Number::as_f64);
        if min.is_some_and(|m| v < m) || max.is_some_and(|m| v > m) {
            return Err(wanted());
        }
        if let Some(step) = self.step.as_ref().and_then(serde_json::Number::as_f64) {
            let k = (v - min.unwrap_or(0.0)) / step;
            if (k - k.round()).abs() > 1e-9 * k.abs().max(1.0) {
                return Err(format!(
                    "{} in steps of {}",
                    wanted(),
                    self.step
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default()
                ));
            }
        }
        Ok(if v.fract() == 0.0 && v.abs() < 1e15 {
            format!("{}", v as i64)
        } else {
            format!("{v}")
        })
    }

    /// Reads a toggle's answer: yes / no, on / off, true / false (any case), ✓ or the label for on.
    pub fn read_toggle(&self, text: &str) -> Option<&'static str> {
        let t = text.trim();
        let any = |words: &[&str]| words.iter().any(|w| t.eq_ignore_ascii_case(w));
        if any(&["on", "yes", "y", "true", "✓", "✅"])
            || self
                .label
                .as_deref()
                .is_some_and(|l| t.eq_ignore_ascii_case(l.trim()))
        {
            Some(TOGGLE_ON)
        } else if any(&["off", "no", "n", "false", "✗"]) {
            Some(TOGGLE_OFF)
        } else {
            None
        }
    }
}

const SKIP_WORD: &str = "skip";

/// Whether a typed reply is a request to skip a question: `skip` or `/skip`, trimmed, in any
/// case. Adapters ask [`QuestionItem::skip_in_reply`] for the question a reply is addressed to.
pub fn is_skip_reply(text: &str) -> bool {
    let text = text.trim();
    let word = text.strip_prefix(['/', '!']).unwrap_or(text);
    word.eq_ignore_ascii_case(SKIP_WORD)
}

#[cfg(test)]
mod tests {
    use super::super::tests::input;
    use super::*;

    #[test]
    fn skip_and_slash_skip_skip_a_question() {
        let i = input();
        for text in ["skip", " Skip ", "SKIP", "/skip", "/Skip\n"] {
            assert!(is_skip_reply(text), "{text:?}");
            assert!(i.questions[0].skip_in_reply(text), "{text:?}");
            // On a `custom` question too: the word alone is no own answer.
            assert!(i.questions[2].skip_in_reply(text), "{text:?}");
        }
        for text in ["skip it", "skipping", "/ skip", "//skip", "", "please skip"] {
            assert!(!is_skip_reply(text), "{text:?}");
            assert!(!i.questions[2].skip_in_reply(text), "{text:?}");
        }
        // An option labelled "Skip" takes the bare word; `/skip` still skips.
        let mut labelled = i.questions[0].clone();
        labelled.options[1].label = "Skip".into();
        assert!(!labelled.skip_in_reply("skip"));
        assert!(labelled.skip_in_reply("/skip"));
    }

    #[test]
    fn replies_name_options_by_label_or_number() {
        let i = input();
        let (one, many, own) = (&i.questions[0], &i.questions[1], &i.questions[2]);
        let opts = |l: &[&str]| ReplyChoice::Options(l.iter().map(|s| s.to_string()).collect());
        assert_eq!(one.choice_in_reply(" PROD "), opts(&["prod"]));
        assert_eq!(one.choice_in_reply("1"), opts(&["staging"]));
        assert_eq!(one.choice_in_reply("2."), opts(&["prod"]));
        assert_eq!(one.choice_in_reply("prod, prod"), opts(&["prod"]));
        assert_eq!(
            one.choice_in_reply("1, 2"),
            ReplyChoice::Invalid("pick only one option.".into())
        );
        assert_eq!(
            one.choice_in_reply("3"),
            ReplyChoice::Invalid("pick a number from 1 to 2.".into())
        );
        assert_eq!(
            one.choice_in_reply("0"),
            ReplyChoice::Invalid("pick a number from 1 to 2.".into())
        );
        assert_eq!(one.choice_in_reply("somewhere else"), ReplyChoice::Text);
        assert_eq!(one.choice_in_reply("2 apples"), ReplyChoice::Text);
        assert_eq!(one.choice_in_reply("  "), ReplyChoice::Text);
        assert_eq!(many.choice_in_reply("b, A"), opts(&["b", "a"]));
        assert_eq!(many.choice_in_reply("2 1 2"), opts(&["b", "a"]));
        assert_eq!(many.choice_in_reply("1. 2."), opts(&["a", "b"]));
        assert_eq!(many.choice_in_reply("a, c"), ReplyChoice::Text);
        assert_eq!(own.choice_in_reply("none"), opts(&["none"]));
        assert_eq!(own.choice_in_reply("none at all"), ReplyChoice::Text);
        // A label with a comma in it is still one option.
        let mut odd = one.clone();
        odd.options[0].label = "eu, west".into();
        assert_eq!(odd.choice_in_reply("EU, West"), opts(&["eu, west"]));
    }

    #[test]
    fn a_reply_of_only_commas_names_no_option() {
        let i = input();
        for text in [",", ", ,", " , ", ",,,", ". ,"] {
            for q in &i.questions {
                assert_ne!(
                    q.choice_in_reply(text),
                    ReplyChoice::Options(vec![]),
                    "{text:?}"
                );
            }
            assert_eq!(
                i.questions[1].choice_in_reply(text),
                ReplyChoice::Text,
                "{text:?}"
            );
        }
    }
}
