//! The one JSON dialect for keys and items as `serde_json::Value`s: DynamoDB JSON as the AWS CLI
//! and the console write it (`{"id": {"S": "user#42"}}`, binary as base64 `{"B": "AAH+/w=="}`),
//! written and read by `serde_dynamo`'s `AttributeValue`. Reports, logs, the CLI's `--key`,
//! backfill progress files and expiry events all go through here.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Deserialize as _;
use serde_json::Value;

use super::Key;

type Dialect = serde_dynamo::AttributeValue;

/// The primary key of `item`, its attributes named in `key` (the partition key first); `None`
/// when one is missing.
pub fn key_in(key: &[String], item: &Key) -> Option<Key> {
    let pair = |a: &String| item.get(a).map(|v| (a.clone(), v.clone()));
    key.iter().map(pair).collect()
}

/// A value that is not DynamoDB JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not DynamoDB JSON: {0}")]
pub struct KeyJsonError(String);

impl From<serde_json::Error> for KeyJsonError {
    fn from(e: serde_json::Error) -> Self {
        KeyJsonError(e.to_string())
    }
}

/// The SDK's value in `serde_dynamo`'s type. A type this SDK version does not know (which
/// `serde_dynamo`'s own conversion would panic on) is written as its debug text, a String.
fn dialect(value: &AttributeValue) -> Dialect {
    match value {
        AttributeValue::S(s) => Dialect::S(s.clone()),
        AttributeValue::N(n) => Dialect::N(n.clone()),
        AttributeValue::B(b) => Dialect::B(b.as_ref().to_vec()),
        AttributeValue::Bool(b) => Dialect::Bool(*b),
        AttributeValue::Null(n) => Dialect::Null(*n),
        AttributeValue::Ss(v) => Dialect::Ss(v.clone()),
        AttributeValue::Ns(v) => Dialect::Ns(v.clone()),
        AttributeValue::Bs(v) => Dialect::Bs(v.iter().map(|b| b.as_ref().to_vec()).collect()),
        AttributeValue::L(v) => Dialect::L(v.iter().map(dialect).collect()),
        AttributeValue::M(m) => Dialect::M(dialect_item(m)),
        other => Dialect::S(format!("{other:?}")),
    }
}

fn dialect_item(item: &HashMap<String, AttributeValue>) -> HashMap<String, Dialect> {
    item.iter().map(|(k, v)| (k.clone(), dialect(v))).collect()
}

/// Whether `value` can be a key attribute: S, N or B.
fn is_key_value(value: &AttributeValue) -> bool {
    matches!(
        value,
        AttributeValue::S(_) | AttributeValue::N(_) | AttributeValue::B(_)
    )
}

/// Renders a key (`{"id": {"S": "a"}}`) or a whole item as DynamoDB JSON, for reports, logs and
/// events: every map's attributes in name order at every level, so the same item always renders
/// the same text (expiry event ids hash it).
pub fn key_to_json(key: &Key) -> Value {
    let json = serde_json::to_value(dialect_item(key));
    let mut json = json.expect("DynamoDB JSON has string keys only and always renders");
    json.sort_all_objects();
    json
}

/// Parses one typed DynamoDB JSON value: `{"S": "a"}`, `{"N": "1"}`, `{"B": "<base64>"}`, ...
pub fn attribute_from_json(value: &Value) -> Result<AttributeValue, KeyJsonError> {
    Ok(Dialect::deserialize(value)?.into())
}

/// Parses a key or an item in DynamoDB JSON.
pub fn item_from_json(value: &Value) -> Result<HashMap<String, AttributeValue>, KeyJsonError> {
    let item = HashMap::<String, Dialect>::deserialize(value)?;
    Ok(item.into_iter().map(|(k, v)| (k, v.into())).collect())
}

/// Parses a key rendered by [`key_to_json`]: S, N or B values only; `None` if it is not one.
pub fn key_from_json(value: &Value) -> Option<Key> {
    item_from_json(value)
        .ok()
        .filter(|key| key.values().all(is_key_value))
}

/// Parses a partition key value given on a command line: one typed value (`{"S":"user#42"}`) or
/// a key with one attribute (`{"id":{"S":"user#42"}}`).
pub fn partition_key_from_json(text: &str) -> Result<AttributeValue, KeyJsonError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| KeyJsonError(format!("{text:?}: {e}")))?;
    let one = value.as_object().filter(|o| o.len() == 1).ok_or_else(|| {
        KeyJsonError(format!(
            "{value} is not one typed value like {{\"S\":\"user#42\"}} or a one-attribute key"
        ))
    })?;
    let (name, inner) = one.iter().next().expect("one entry");
    let one_value = !inner.is_object() || name == "M";
    let attribute = attribute_from_json(if one_value { &value } else { inner })?;
    if !is_key_value(&attribute) {
        let message = format!("{attribute:?} cannot be a key; use S, N or B");
        return Err(KeyJsonError(message));
    }
    Ok(attribute)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::primitives::Blob;
    use serde_json::json;

    #[test]
    fn keys_round_trip_through_json() {
        let key: Key = HashMap::from([
            (
                "pk".to_string(),
                AttributeValue::B(Blob::new(vec![0, 1, 254, 255])),
            ),
            ("sk".to_string(), AttributeValue::N("42.5".into())),
            ("s".to_string(), AttributeValue::S("user#1".into())),
        ]);
        assert_eq!(key_from_json(&key_to_json(&key)), Some(key.clone()));
        assert_eq!(key_to_json(&key)["pk"], json!({"B": "AAH+/w=="}));
        assert_eq!(key_from_json(&json!({"a": {"BOOL": "yes"}})), None);
        assert_eq!(key_from_json(&json!({"a": {"B": "not base64!"}})), None);
        assert_eq!(key_from_json(&json!({"a": {"X": "1"}})), None);
        assert_eq!(key_from_json(&json!({"a": {"NULL": false}})), None);
        assert_eq!(key_from_json(&json!({"a": {"NULL": "yes"}})), None);
    }

    #[test]
    fn whole_items_round_trip() {
        let item: Key = HashMap::from([
            (
                "l".to_string(),
                AttributeValue::L(vec![AttributeValue::Bool(true), AttributeValue::Null(true)]),
            ),
            (
                "m".to_string(),
                AttributeValue::M(HashMap::from([(
                    "n".to_string(),
                    AttributeValue::Ns(vec!["1".into()]),
                )])),
            ),
            (
                "ss".to_string(),
                AttributeValue::Ss(vec!["a".into(), "b".into()]),
            ),
            (
                "bs".to_string(),
                AttributeValue::Bs(vec![Blob::new(vec![7])]),
            ),
        ]);
        assert_eq!(item_from_json(&key_to_json(&item)), Ok(item));
    }

    #[test]
    fn command_line_partition_keys() {
        assert_eq!(
            partition_key_from_json(r#"{"S":"user#42"}"#),
            Ok(AttributeValue::S("user#42".into()))
        );
        assert_eq!(
            partition_key_from_json(r#"{"id":{"N":"42"}}"#),
            Ok(AttributeValue::N("42".into()))
        );
        assert_eq!(
            partition_key_from_json(r#"{"B":"AAE="}"#),
            Ok(AttributeValue::B(Blob::new(vec![0, 1])))
        );
        for bad in [
            r#"{"BOOL":true}"#,
            "42",
            r#"{"S":"a","N":"1"}"#,
            r#"{"B":"%%"}"#,
            "{",
        ] {
            assert!(partition_key_from_json(bad).is_err(), "{bad}");
        }
    }
}
