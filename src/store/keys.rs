//! The one JSON dialect for keys and items: DynamoDB JSON as the AWS CLI and the console write it
//! (`{"id": {"S": "user#42"}}`, binary as base64 `{"B": "AAH+/w=="}`). Reports, logs, the CLI's
//! `--key`, backfill progress files and expiry events all go through here.

use std::collections::HashMap;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use base64::Engine as _;
use serde_json::{json, Map, Value};

use super::Key;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// A value that is not DynamoDB JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not DynamoDB JSON: {0}")]
pub struct KeyJsonError(String);

/// Renders an attribute value as DynamoDB JSON.
pub fn attribute_to_json(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::S(s) => json!({ "S": s }),
        AttributeValue::N(n) => json!({ "N": n }),
        AttributeValue::B(b) => json!({ "B": B64.encode(b.as_ref()) }),
        AttributeValue::Bool(b) => json!({ "BOOL": b }),
        AttributeValue::Null(_) => json!({ "NULL": true }),
        AttributeValue::Ss(v) => json!({ "SS": v }),
        AttributeValue::Ns(v) => json!({ "NS": v }),
        AttributeValue::Bs(v) => {
            json!({ "BS": v.iter().map(|b| B64.encode(b.as_ref())).collect::<Vec<_>>() })
        }
        AttributeValue::L(v) => json!({ "L": v.iter().map(attribute_to_json).collect::<Vec<_>>() }),
        AttributeValue::M(m) => json!({ "M": item_to_json(m) }),
        other => json!({ "unknown": format!("{other:?}") }),
    }
}

/// Renders a key or a whole item as DynamoDB JSON, attributes in name order.
pub fn item_to_json(item: &HashMap<String, AttributeValue>) -> Value {
    let mut names: Vec<&String> = item.keys().collect();
    names.sort();
    Value::Object(
        names
            .into_iter()
            .map(|n| (n.clone(), attribute_to_json(&item[n])))
            .collect::<Map<String, Value>>(),
    )
}

/// Renders a key as DynamoDB JSON (`{"id": {"S": "a"}}`) for reports and logs.
pub fn key_to_json(key: &Key) -> Value {
    item_to_json(key)
}

/// Parses one typed DynamoDB JSON value: `{"S": "a"}`, `{"N": "1"}`, `{"B": "<base64>"}`, ...
pub fn attribute_from_json(value: &Value) -> Result<AttributeValue, KeyJsonError> {
    let obj = value.as_object().filter(|o| o.len() == 1).ok_or_else(|| {
        KeyJsonError(format!(
            "{value} is not one typed value like {{\"S\":\"a\"}}"
        ))
    })?;
    let (kind, inner) = obj.iter().next().expect("one entry");
    let text = || {
        inner
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| KeyJsonError(format!("{kind} needs a string, got {inner}")))
    };
    let texts = || -> Result<Vec<String>, KeyJsonError> {
        inner
            .as_array()
            .ok_or_else(|| KeyJsonError(format!("{kind} needs an array, got {inner}")))?
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| KeyJsonError(format!("{kind} holds {v}, not a string")))
            })
            .collect()
    };
    let blob = |b64: &str| {
        B64.decode(b64)
            .map(Blob::new)
            .map_err(|_| KeyJsonError(format!("{b64:?} is not base64")))
    };
    Ok(match kind.as_str() {
        "S" => AttributeValue::S(text()?),
        "N" => AttributeValue::N(text()?),
        "B" => AttributeValue::B(blob(&text()?)?),
        "BOOL" => AttributeValue::Bool(
            inner
                .as_bool()
                .ok_or_else(|| KeyJsonError(format!("BOOL needs true or false, got {inner}")))?,
        ),
        "NULL" => AttributeValue::Null(true),
        "SS" => AttributeValue::Ss(texts()?),
        "NS" => AttributeValue::Ns(texts()?),
        "BS" => AttributeValue::Bs(texts()?.iter().map(|t| blob(t)).collect::<Result<_, _>>()?),
        "L" => AttributeValue::L(
            inner
                .as_array()
                .ok_or_else(|| KeyJsonError(format!("L needs an array, got {inner}")))?
                .iter()
                .map(attribute_from_json)
                .collect::<Result<_, _>>()?,
        ),
        "M" => AttributeValue::M(item_from_json(inner)?),
        other => return Err(KeyJsonError(format!("unknown type {other:?}"))),
    })
}

/// Parses a key or an item in DynamoDB JSON.
pub fn item_from_json(value: &Value) -> Result<HashMap<String, AttributeValue>, KeyJsonError> {
    value
        .as_object()
        .ok_or_else(|| KeyJsonError(format!("{value} is not an object of attributes")))?
        .iter()
        .map(|(name, v)| Ok((name.clone(), attribute_from_json(v)?)))
        .collect()
}

/// Parses a key rendered by [`key_to_json`]; `None` if it is not DynamoDB JSON.
pub fn key_from_json(value: &Value) -> Option<Key> {
    item_from_json(value).ok()
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
    let attribute = if inner.is_object() && !matches!(name.as_str(), "M") {
        attribute_from_json(inner)?
    } else {
        attribute_from_json(&value)?
    };
    match attribute {
        AttributeValue::S(_) | AttributeValue::N(_) | AttributeValue::B(_) => Ok(attribute),
        other => Err(KeyJsonError(format!(
            "{other:?} cannot be a key; use S, N or B"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(item_from_json(&item_to_json(&item)), Ok(item));
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
