//! [`Rule`]: what a setting accepts, as data. The validation checks a value with it, the help and
//! error messages say it in words ([`Rule::describe`]), and `ttl-sweeper settings` writes it as
//! JSON ([`mod@super::spec`]) for the construct, the SAM template, the Terraform module and the docs,
//! which read it (or are tested against it) rather than state the ranges again.

use std::ops::RangeInclusive;
use std::time::Duration;

use serde_json::{json, Value};

/// What a setting accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// A whole number from `min` to `max` (of seconds, with `seconds`); with `off`, also `off`.
    Whole {
        /// The least accepted.
        min: u64,
        /// The most accepted.
        max: u64,
        /// Whether the number is a count of seconds.
        seconds: bool,
        /// Whether `off` is accepted too.
        off: bool,
    },
    /// A duration from `min` to `max`: whole seconds (`90`) or with a unit (`250ms`, `90m`,
    /// `24h`); with `off`, also `off` or `0`.
    Duration {
        /// The shortest accepted.
        min: Duration,
        /// The longest accepted.
        max: Duration,
        /// Whether `off` (or `0`) is accepted too.
        off: bool,
    },
    /// One of these words, in any case.
    Choice(&'static [&'static str]),
    /// One DynamoDB table by name or ARN, or several separated by commas.
    Tables,
    /// A DynamoDB table by name or ARN, or empty for none.
    Table,
    /// An index name.
    Index,
    /// An attribute name.
    Attribute,
    /// A CloudWatch namespace.
    Namespace,
    /// Checked by a parser of its own; the setting's words say what it accepts.
    Parsed,
}

/// The characters of a table or index name besides letters and digits.
pub(super) const NAME_CHARACTERS: [char; 3] = ['_', '-', '.'];

/// How many characters a table or index name has.
pub(super) const NAME_LENGTH: RangeInclusive<usize> = 3..=255;

/// The most bytes of an attribute name or a CloudWatch namespace.
pub(super) const MAX_NAME_BYTES: usize = 255;

/// The characters of a CloudWatch namespace besides letters and digits.
pub(super) const NAMESPACE_CHARACTERS: [char; 7] = ['.', '-', '_', '/', '#', ':', ' '];

impl Rule {
    /// The name of the rule's kind in the JSON spec.
    fn kind(self) -> &'static str {
        match self {
            Rule::Whole { .. } => "whole",
            Rule::Duration { .. } => "duration",
            Rule::Choice(_) => "choice",
            Rule::Tables => "tables",
            Rule::Table => "table",
            Rule::Index => "index",
            Rule::Attribute => "attribute",
            Rule::Namespace => "namespace",
            Rule::Parsed => "parsed",
        }
    }

    /// What the rule accepts, in words (empty for [`Rule::Parsed`]).
    pub fn describe(self) -> String {
        let off = |off: bool| if off { "`off`, or " } else { "" };
        match self {
            Rule::Whole {
                min,
                max,
                seconds,
                off: o,
            } => {
                let of = if seconds { " of seconds" } else { "" };
                format!("{}a whole number{of} from {min} to {max}", off(o))
            }
            Rule::Duration { min, max, off: o } => {
                let example = if max < Duration::from_secs(60) {
                    "250ms"
                } else {
                    "90m"
                };
                let (off, least, most) = (off(o), min.as_secs().max(1), max.as_secs());
                let (shortest, longest) = (short(min), short(max));
                format!(
                    "{off}a whole number of seconds from {least} to {most}, or a duration from \
                     {shortest} to {longest} such as `{example}`"
                )
            }
            Rule::Choice(words) => match words {
                [] => String::new(),
                [one] => format!("`{one}`"),
                [first @ .., last] => {
                    let first: Vec<String> = first.iter().map(|w| format!("`{w}`")).collect();
                    format!("{} or `{last}`", first.join(", "))
                }
            },
            Rule::Tables | Rule::Table => {
                format!("a DynamoDB table name ({}) or table ARN", named())
            }
            Rule::Index => format!("a GSI name ({})", named()),
            Rule::Attribute => {
                format!("a non-empty attribute name of at most {MAX_NAME_BYTES} bytes")
            }
            Rule::Namespace => {
                let other = NAMESPACE_CHARACTERS.iter().filter(|c| **c != ' ');
                let other = other.map(char::to_string).collect::<Vec<_>>().join(" ");
                format!(
                    "a CloudWatch namespace: up to {MAX_NAME_BYTES} letters, digits or {other} and \
                     spaces, not starting with AWS/"
                )
            }
            Rule::Parsed => String::new(),
        }
    }

    /// Whether the rule is a range: [`Rule::words`] are then its least and most.
    pub fn is_ranged(self) -> bool {
        matches!(self, Rule::Whole { .. } | Rule::Duration { .. })
    }

    /// The words any account of the rule must name: a range's bounds (a duration's in its
    /// largest whole unit, `30s`), a choice's words; none for the others.
    pub fn words(self) -> Vec<String> {
        match self {
            Rule::Whole { min, max, .. } => vec![min.to_string(), max.to_string()],
            Rule::Duration { min, max, .. } => vec![short(min), short(max)],
            Rule::Choice(words) => words.iter().map(|w| (*w).to_owned()).collect(),
            _ => Vec::new(),
        }
    }

    /// The rule as JSON: its kind and, by kind, its bounds (durations in milliseconds), whether
    /// `off` is accepted, its words, or its pattern.
    pub(super) fn to_json(self) -> Value {
        let millis = |d: Duration| d.as_millis() as u64;
        match self {
            Rule::Whole {
                min,
                max,
                seconds,
                off,
            } => {
                json!({"kind": self.kind(), "min": min, "max": max, "seconds": seconds, "off": off})
            }
            Rule::Duration { min, max, off } => {
                json!({"kind": self.kind(), "minMs": millis(min), "maxMs": millis(max), "off": off})
            }
            Rule::Choice(words) => json!({"kind": self.kind(), "choices": words}),
            Rule::Tables | Rule::Table | Rule::Index => {
                let (least, most) = (NAME_LENGTH.start(), NAME_LENGTH.end());
                let pattern = format!("^{}{{{least},{most}}}$", class(&NAME_CHARACTERS));
                json!({"kind": self.kind(), "pattern": pattern})
            }
            Rule::Attribute => {
                json!({"kind": self.kind(), "minBytes": 1, "maxBytes": MAX_NAME_BYTES})
            }
            Rule::Namespace => json!({
                "kind": self.kind(),
                "pattern": format!("^{}{{1,{MAX_NAME_BYTES}}}$", class(&NAMESPACE_CHARACTERS)),
                "notStartingWith": "AWS/",
            }),
            Rule::Parsed => json!({"kind": self.kind()}),
        }
    }
}

/// What a table or index name is made of, in words: `3-255 characters: letters, digits, '_',
/// '-', '.'`.
fn named() -> String {
    let other: Vec<String> = NAME_CHARACTERS.iter().map(|c| format!("'{c}'")).collect();
    let (least, most, other) = (NAME_LENGTH.start(), NAME_LENGTH.end(), other.join(", "));
    format!("{least}-{most} characters: letters, digits, {other}")
}

/// A regular expression's class of letters, digits and `other` (`-` last, where it needs no
/// escape): `[A-Za-z0-9_.-]`.
fn class(other: &[char]) -> String {
    let (dash, rest): (Vec<char>, Vec<char>) = other.iter().partition(|c| **c == '-');
    let chars: String = rest.into_iter().chain(dash).collect();
    format!("[A-Za-z0-9{chars}]")
}

/// A duration in its largest whole unit: `100ms`, `30s`, `1m`, `24h`, `30d`.
fn short(d: Duration) -> String {
    let ms = d.as_millis();
    let units = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
    ];
    for (size, unit) in units {
        if ms >= size && ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_says_its_bounds_and_words() {
        let whole = Rule::Whole {
            min: 1,
            max: 256,
            seconds: false,
            off: false,
        };
        assert_eq!(whole.describe(), "a whole number from 1 to 256");
        let lease = Rule::Whole {
            min: 5,
            max: 3600,
            seconds: true,
            off: true,
        };
        assert_eq!(
            lease.describe(),
            "`off`, or a whole number of seconds from 5 to 3600"
        );
        let tick = Rule::Duration {
            min: Duration::from_millis(100),
            max: Duration::from_secs(30),
            off: true,
        }
        .describe();
        assert!(tick.contains("from 1 to 30"), "{tick}");
        assert!(tick.contains("100ms to 30s"), "{tick}");
        let catchup = Rule::Duration {
            min: Duration::from_secs(60),
            max: Duration::from_secs(30 * 86_400),
            off: false,
        }
        .describe();
        assert!(catchup.contains("1m to 30d"), "{catchup}");
        assert_eq!(Rule::Choice(&["a", "b", "c"]).describe(), "`a`, `b` or `c`");
        assert_eq!(Rule::Choice(&["a", "b"]).describe(), "`a` or `b`");
        assert_eq!(short(Duration::from_secs(86_400)), "1d");
        assert_eq!(short(Duration::from_millis(1500)), "1500ms");
    }
}
