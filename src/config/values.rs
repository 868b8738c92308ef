//! One raw setting value at a time: present or not, a number in range, a table or attribute
//! name, `TABLES`' entries, `SHARD_RANGE`, and the errors that name the setting and what it
//! accepts. [`super::validate`] puts them together.

use std::time::Duration;

use super::rule::{MAX_NAME_BYTES, NAMESPACE_CHARACTERS, NAME_CHARACTERS, NAME_LENGTH};
use super::*;
use crate::expiry::window::ShardRange;

/// The entries of `TABLES`: each an object of setting names and their values (strings, or
/// numbers written as they are).
pub(super) fn table_entries(raw: &str) -> Result<Vec<Vec<(String, String)>>, ConfigError> {
    let fail = |problem: String| rejected(&TABLES, raw, problem);
    let entries: Vec<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_str(raw).map_err(|e| fail(format!("not a JSON array of objects: {e}")))?;
    if entries.is_empty() {
        return Err(fail("the array is empty".to_owned()));
    }
    let value = |var: &str, v: serde_json::Value| match v {
        serde_json::Value::String(text) => Ok(text),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        other => Err(fail(format!("{var} is {other}: expected a string"))),
    };
    entries
        .into_iter()
        .map(|entry| {
            entry
                .into_iter()
                .map(|(var, v)| Ok((var.clone(), value(&var, v)?)))
                .collect()
        })
        .collect()
}

/// The table's name, whether given as a name or an ARN.
pub(super) fn table_of(name_or_arn: &str) -> &str {
    name_or_arn
        .split_once(":table/")
        .map_or(name_or_arn, |(_, name)| {
            name.split('/').next().unwrap_or(name)
        })
}

/// Parses `SHARD_RANGE` for `shards` shards per window: `None` for every shard (`all`, or a range
/// from 0 to the last shard), else the range.
pub(super) fn shard_range(raw: &str, shards: u32) -> Result<Option<ShardRange>, ConfigError> {
    let fail = |problem| ConfigError::ShardRange {
        value: raw.to_owned(),
        problem,
    };
    if raw.eq_ignore_ascii_case("all") {
        return Ok(None);
    }
    let number = |text: &str| {
        let text = text.trim();
        (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
            .then(|| text.parse::<u32>().ok())
            .flatten()
    };
    let (first, last) = raw
        .split_once('-')
        .and_then(|(a, b)| Some((number(a)?, number(b)?)))
        .ok_or(fail(ShardRangeProblem::NotARange))?;
    if first > last {
        return Err(fail(ShardRangeProblem::Reversed { first, last }));
    }
    let range = ShardRange { first, last };
    if range == ShardRange::all(shards) {
        return Ok(None);
    }
    if shards <= 1 {
        return Err(fail(ShardRangeProblem::Unsharded));
    }
    if last >= shards {
        return Err(fail(ShardRangeProblem::BeyondShards { last, shards }));
    }
    Ok(Some(range))
}

/// Window width and shard count on their own, for work that needs no table (`ttl-sweeper
/// window`): raw `WINDOW_SECONDS` and `WINDOW_SHARDS` values validated as [`Settings::validate`]
/// does.
pub fn window_shape(
    seconds: Option<&str>,
    shards: Option<&str>,
) -> Result<(u32, u32), ConfigError> {
    Ok((window_seconds(seconds)?, window_shards(shards)?))
}

/// Whether a value was given: present and not blank.
pub(super) fn given(raw: Option<&str>) -> bool {
    raw.is_some_and(|v| !v.trim().is_empty())
}

/// The trimmed value, or the default when absent or blank.
pub(super) fn get(raw: Option<&str>, s: &Setting) -> Result<String, ConfigError> {
    let value = raw.map(str::trim).filter(|v| !v.is_empty()).or(s.default);
    value.map(str::to_owned).ok_or(ConfigError::Missing {
        var: s.var,
        expected: s.expected(),
    })
}

/// A whole number within `s`'s [`Rule::Whole`] bounds (`None`: `off`, where the rule takes it).
pub(super) fn whole_or_off(raw: Option<&str>, s: &Setting) -> Result<Option<u64>, ConfigError> {
    let Rule::Whole { min, max, off, .. } = s.rule else {
        unreachable!("{} is not a whole number", s.var)
    };
    let raw = get(raw, s)?;
    if off && raw.eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let n = raw.parse::<u64>().ok().filter(|n| (min..=max).contains(n));
    n.map(Some).ok_or_else(|| invalid(s, &raw))
}

/// A whole number within `s`'s [`Rule::Whole`] bounds (`off` refused, whatever the rule).
pub(super) fn number(raw: Option<&str>, s: &Setting) -> Result<u64, ConfigError> {
    whole_or_off(raw, s)?.ok_or_else(|| invalid(s, "off"))
}

/// A duration within `s`'s [`Rule::Duration`] bounds (`None`: `off` or `0`, where the rule
/// takes them).
pub(super) fn duration(raw: Option<&str>, s: &Setting) -> Result<Option<Duration>, ConfigError> {
    let Rule::Duration { min, max, off } = s.rule else {
        unreachable!("{} is not a duration", s.var)
    };
    let raw = get(raw, s)?;
    if off && (raw.eq_ignore_ascii_case("off") || raw == "0") {
        return Ok(None);
    }
    let d = parse_duration(&raw).filter(|d| (min..=max).contains(d));
    d.map(Some).ok_or_else(|| invalid(s, &raw))
}

/// The value, when `ok` accepts it.
pub(super) fn accepted(
    raw: Option<&str>,
    s: &Setting,
    ok: impl FnOnce(&str) -> bool,
) -> Result<String, ConfigError> {
    let raw = get(raw, s)?;
    if !ok(&raw) {
        return Err(invalid(s, &raw));
    }
    Ok(raw)
}

/// A table or index name (a table's also an ARN), as `s`'s rule says.
pub(super) fn name(raw: Option<&str>, s: &Setting) -> Result<String, ConfigError> {
    let allow_arn = matches!(s.rule, Rule::Tables | Rule::Table);
    accepted(raw, s, |raw| {
        let named = |c: char| c.is_ascii_alphanumeric() || NAME_CHARACTERS.contains(&c);
        (allow_arn && raw.starts_with("arn:") && raw.contains(":table/"))
            || (NAME_LENGTH.contains(&raw.len()) && raw.chars().all(named))
    })
}

/// A table name or ARN, or `None` when empty.
pub(super) fn table(raw: Option<&str>, s: &Setting) -> Result<Option<String>, ConfigError> {
    match get(raw, s)? {
        raw if raw.is_empty() => Ok(None),
        raw => name(Some(&raw), s).map(Some),
    }
}

/// One of `s`'s [`Rule::Choice`] words, in any case: the value of `values` in the same place.
pub(super) fn choice<T: Copy, const N: usize>(
    raw: Option<&str>,
    s: &Setting,
    values: [T; N],
) -> Result<T, ConfigError> {
    let Rule::Choice(words) = s.rule else {
        unreachable!("{} is not a choice", s.var)
    };
    assert_eq!(words.len(), N, "{}: a value for each word", s.var);
    let raw = get(raw, s)?;
    let found = words.iter().position(|w| raw.eq_ignore_ascii_case(w));
    found.map(|i| values[i]).ok_or_else(|| invalid(s, &raw))
}

/// An attribute name of at most [`MAX_NAME_BYTES`].
pub(super) fn attribute(raw: Option<&str>, s: &Setting) -> Result<String, ConfigError> {
    accepted(raw, s, |raw| raw.len() <= MAX_NAME_BYTES)
}

/// A CloudWatch namespace.
pub(super) fn namespace(raw: Option<&str>, s: &Setting) -> Result<String, ConfigError> {
    accepted(raw, s, |raw| {
        let allowed = |c: char| c.is_ascii_alphanumeric() || NAMESPACE_CHARACTERS.contains(&c);
        raw.len() <= MAX_NAME_BYTES && !raw.starts_with("AWS/") && raw.chars().all(allowed)
    })
}

pub(super) fn window_seconds(raw: Option<&str>) -> Result<u32, ConfigError> {
    Ok(number(raw, &WINDOW_SECONDS)? as u32)
}

pub(super) fn window_shards(raw: Option<&str>) -> Result<u32, ConfigError> {
    Ok(number(raw, &WINDOW_SHARDS)? as u32)
}

pub(super) fn rejected(s: &Setting, value: &str, problem: String) -> ConfigError {
    ConfigError::Rejected {
        var: s.var,
        value: value.to_owned(),
        problem,
        expected: s.expected(),
    }
}

pub(super) fn invalid(s: &Setting, value: &str) -> ConfigError {
    ConfigError::Invalid {
        var: s.var,
        value: value.to_owned(),
        expected: s.expected(),
    }
}
