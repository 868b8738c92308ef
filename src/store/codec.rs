//! DynamoDB JSON, written and read in one place: the dialect of the wire protocol, the AWS CLI and
//! the console (`{"id": {"S": "user#42"}}`, binary as standard base64 `{"B": "AAH+/w=="}`).
//!
//! [`Write`] serializes a borrowed [`AttributeValue`] or item with serde, attributes in name order
//! at every level, binary encoded as it is written. [`Read`] deserializes straight into the SDK's
//! types: no intermediate JSON tree, each value allocated once, as the SDK type holds it. Reading
//! is strict: exactly one type tag per value, a known tag, the inner type the tag calls for,
//! `NULL` true, base64 that decodes, an attribute named once per item. Empty sets are read and
//! written as they come.
//!
//! The hot path ([`super::direct`]) writes request bodies and reads `Query` and `BatchWriteItem`
//! answers from bytes with it; [`super::keys`] renders and parses the `serde_json::Value`s of
//! reports, logs, progress files and events with it.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use base64::display::Base64Display;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Deserializer, Serialize};

use super::Key;

/// Serializes a borrowed [`AttributeValue`] or item (`HashMap<String, AttributeValue>`) as
/// DynamoDB JSON, attributes in name order. `NULL` is written `true`; a value of a type this
/// SDK version does not know is written `{"unknown": "<debug>"}`, which [`Read`] refuses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Write<'a, T: ?Sized>(pub(crate) &'a T);

/// Deserializes DynamoDB JSON into an [`AttributeValue`] or an item.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Read<T>(pub(crate) T);

/// Whether `value` can be a key attribute: S, N or B.
pub(crate) fn is_key_value(value: &AttributeValue) -> bool {
    matches!(
        value,
        AttributeValue::S(_) | AttributeValue::N(_) | AttributeValue::B(_)
    )
}

impl Serialize for Write<'_, AttributeValue> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        match self.0 {
            AttributeValue::S(s) => map.serialize_entry("S", s)?,
            AttributeValue::N(n) => map.serialize_entry("N", n)?,
            AttributeValue::B(b) => map.serialize_entry("B", &Base64(b))?,
            AttributeValue::Bool(b) => map.serialize_entry("BOOL", b)?,
            AttributeValue::Null(_) => map.serialize_entry("NULL", &true)?,
            AttributeValue::Ss(v) => map.serialize_entry("SS", v)?,
            AttributeValue::Ns(v) => map.serialize_entry("NS", v)?,
            AttributeValue::Bs(v) => map.serialize_entry("BS", &Blobs(v))?,
            AttributeValue::L(v) => map.serialize_entry("L", &List(v))?,
            AttributeValue::M(m) => map.serialize_entry("M", &Write(m))?,
            other => map.serialize_entry("unknown", &format!("{other:?}"))?,
        }
        map.end()
    }
}

impl Serialize for Write<'_, Key> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        in_name_order(self.0, |name, value| {
            map.serialize_entry(name, &Write(value))
        })?;
        map.end()
    }
}

/// Calls `f` on the attributes of `item` in name order.
fn in_name_order<E>(
    item: &Key,
    mut f: impl FnMut(&String, &AttributeValue) -> Result<(), E>,
) -> Result<(), E> {
    let mut pairs = item.iter();
    match (pairs.next(), pairs.next(), pairs.next()) {
        (None, ..) => Ok(()),
        (Some((name, value)), None, _) => f(name, value),
        // Most keys: a partition key and a sort key, ordered without a buffer.
        (Some(a), Some(b), None) => {
            let (first, second) = if a.0 <= b.0 { (a, b) } else { (b, a) };
            f(first.0, first.1)?;
            f(second.0, second.1)
        }
        _ => {
            let mut entries: Vec<_> = item.iter().collect();
            entries.sort_unstable_by_key(|(name, _)| *name);
            entries
                .into_iter()
                .try_for_each(|(name, value)| f(name, value))
        }
    }
}

/// Bytes as a standard base64 string, encoded as they are written.
struct Base64<'a>(&'a Blob);

impl Serialize for Base64<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&Base64Display::new(self.0.as_ref(), &STANDARD))
    }
}

struct Blobs<'a>(&'a [Blob]);

impl Serialize for Blobs<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(Base64))
    }
}

struct List<'a>(&'a [AttributeValue]);

impl Serialize for List<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(Write))
    }
}

impl<'de> Deserialize<'de> for Read<AttributeValue> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ValueVisitor).map(Read)
    }
}

impl<'de> Deserialize<'de> for Read<Key> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ItemVisitor).map(Read)
    }
}

struct ItemVisitor;

impl<'de> Visitor<'de> for ItemVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of attributes like {\"id\":{\"S\":\"a\"}}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Key, A::Error> {
        let mut item = HashMap::with_capacity(map.size_hint().unwrap_or(0).min(64));
        while let Some(name) = map.next_key::<String>()? {
            let Read(value) = map.next_value::<Read<AttributeValue>>()?;
            match item.entry(name) {
                Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                Entry::Occupied(slot) => {
                    return Err(de::Error::custom(format!(
                        "attribute {:?} named twice",
                        slot.key()
                    )))
                }
            }
        }
        Ok(item)
    }
}

/// The type tags of DynamoDB JSON.
#[derive(Debug, Clone, Copy)]
enum Tag {
    S,
    N,
    B,
    Bool,
    Null,
    Ss,
    Ns,
    Bs,
    L,
    M,
}

impl Tag {
    fn name(self) -> &'static str {
        match self {
            Tag::S => "S",
            Tag::N => "N",
            Tag::B => "B",
            Tag::Bool => "BOOL",
            Tag::Null => "NULL",
            Tag::Ss => "SS",
            Tag::Ns => "NS",
            Tag::Bs => "BS",
            Tag::L => "L",
            Tag::M => "M",
        }
    }
}

impl<'de> Deserialize<'de> for Tag {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_identifier(TagVisitor)
    }
}

struct TagVisitor;

impl Visitor<'_> for TagVisitor {
    type Value = Tag;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a type: S, N, B, BOOL, NULL, SS, NS, BS, L or M")
    }

    fn visit_str<E: de::Error>(self, tag: &str) -> Result<Tag, E> {
        Ok(match tag {
            "S" => Tag::S,
            "N" => Tag::N,
            "B" => Tag::B,
            "BOOL" => Tag::Bool,
            "NULL" => Tag::Null,
            "SS" => Tag::Ss,
            "NS" => Tag::Ns,
            "BS" => Tag::Bs,
            "L" => Tag::L,
            "M" => Tag::M,
            other => return Err(E::custom(format!("unknown type {other:?}"))),
        })
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = AttributeValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("one typed value like {\"S\":\"a\"}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<AttributeValue, A::Error> {
        let Some(tag) = map.next_key::<Tag>()? else {
            return Err(de::Error::custom(
                "an empty attribute value; expected one typed value like {\"S\":\"a\"}",
            ));
        };
        let value = match tag {
            Tag::S => AttributeValue::S(map.next_value_seed(Text(tag))?),
            Tag::N => AttributeValue::N(map.next_value_seed(Text(tag))?),
            Tag::B => AttributeValue::B(map.next_value_seed(Binary(tag))?),
            Tag::Bool => AttributeValue::Bool(map.next_value_seed(Flag(tag))?),
            Tag::Null => match map.next_value_seed(Flag(tag))? {
                true => AttributeValue::Null(true),
                false => return Err(de::Error::custom("NULL must be true, got false")),
            },
            Tag::Ss => AttributeValue::Ss(map.next_value_seed(Many(Text(tag)))?),
            Tag::Ns => AttributeValue::Ns(map.next_value_seed(Many(Text(tag)))?),
            Tag::Bs => AttributeValue::Bs(map.next_value_seed(Many(Binary(tag)))?),
            Tag::L => AttributeValue::L(map.next_value_seed(Many(Nested))?),
            Tag::M => AttributeValue::M(map.next_value::<Read<Key>>()?.0),
        };
        if let Some(second) = map.next_key::<String>()? {
            return Err(de::Error::custom(format!(
                "an attribute value with two types, {} and {second:?}",
                tag.name()
            )));
        }
        Ok(value)
    }
}

/// The string inside `S`, `N`, `SS` or `NS`.
#[derive(Clone, Copy)]
struct Text(Tag);

impl<'de> DeserializeSeed<'de> for Text {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_string(self)
    }
}

impl Visitor<'_> for Text {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a string in {}", self.0.name())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        Ok(v.to_owned())
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<String, E> {
        Ok(v)
    }
}

/// The base64 string inside `B` or `BS`, decoded as it is read.
#[derive(Clone, Copy)]
struct Binary(Tag);

impl<'de> DeserializeSeed<'de> for Binary {
    type Value = Blob;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Blob, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for Binary {
    type Value = Blob;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a base64 string in {}", self.0.name())
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Blob, E> {
        STANDARD
            .decode(v)
            .map(Blob::new)
            .map_err(|_| E::custom(format!("{v:?} is not base64")))
    }
}

/// The `true` or `false` inside `BOOL` or `NULL`.
#[derive(Clone, Copy)]
struct Flag(Tag);

impl<'de> DeserializeSeed<'de> for Flag {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_bool(self)
    }
}

impl Visitor<'_> for Flag {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "true or false in {}", self.0.name())
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        Ok(v)
    }
}

/// One element of `L`: any typed value.
#[derive(Clone, Copy)]
struct Nested;

impl<'de> DeserializeSeed<'de> for Nested {
    type Value = AttributeValue;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<AttributeValue, D::Error> {
        d.deserialize_map(ValueVisitor)
    }
}

/// The array inside `SS`, `NS`, `BS` or `L`, each element read by the seed.
struct Many<T>(T);

impl<'de, T: DeserializeSeed<'de> + Copy + Element> DeserializeSeed<'de> for Many<T> {
    type Value = Vec<T::Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, T: DeserializeSeed<'de> + Copy + Element> Visitor<'de> for Many<T> {
    type Value = Vec<T::Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an array in {}", self.0.tag().name())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(element) = seq.next_element_seed(self.0)? {
            out.push(element);
        }
        Ok(out)
    }
}

/// The tag whose array an element is in, for error messages.
trait Element {
    fn tag(&self) -> Tag;
}

impl Element for Text {
    fn tag(&self) -> Tag {
        self.0
    }
}

impl Element for Binary {
    fn tag(&self) -> Tag {
        self.0
    }
}

impl Element for Nested {
    fn tag(&self) -> Tag {
        Tag::L
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::store::keys::{
        attribute_from_json, attribute_to_json, item_from_json, item_to_json,
    };
    use proptest::prelude::*;
    use serde_json::{json, Value};

    /// Any value a key attribute can hold: S, N or B.
    pub(crate) fn key_value() -> impl Strategy<Value = AttributeValue> {
        prop_oneof![
            any::<String>().prop_map(AttributeValue::S),
            any::<i64>().prop_map(|n| AttributeValue::N(n.to_string())),
            proptest::collection::vec(any::<u8>(), 1..40)
                .prop_map(|b| AttributeValue::B(Blob::new(b))),
        ]
    }

    /// Any attribute value, nested lists and maps included; sets may be empty, as the dialect
    /// reads and writes them (DynamoDB itself never answers an empty set).
    pub(crate) fn any_value() -> impl Strategy<Value = AttributeValue> {
        let blobs = proptest::collection::vec(any::<u8>(), 0..12).prop_map(Blob::new);
        let leaf = prop_oneof![
            key_value(),
            any::<bool>().prop_map(AttributeValue::Bool),
            Just(AttributeValue::Null(true)),
            proptest::collection::vec("-?[0-9]{1,5}(\\.[0-9]{1,3})?", 0..3)
                .prop_map(AttributeValue::Ns),
            proptest::collection::vec(any::<String>(), 0..3).prop_map(AttributeValue::Ss),
            proptest::collection::vec(blobs, 0..3).prop_map(AttributeValue::Bs),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(AttributeValue::L),
                proptest::collection::hash_map("[a-z\"é]{1,4}", inner, 0..4)
                    .prop_map(AttributeValue::M),
            ]
        })
    }

    fn any_item() -> impl Strategy<Value = Key> {
        // Keys of 0, 1 and 2 attributes as often as larger items.
        let size = prop_oneof![0..3usize, 3..12usize];
        size.prop_flat_map(|n| {
            proptest::collection::hash_map("[a-zA-Z\"\\\\é#]{1,6}", any_value(), n)
        })
    }

    /// JSON of every shape, mostly near DynamoDB JSON: the known tags and a few others as keys,
    /// strings that are or are not base64, numbers, booleans, null, nesting.
    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            prop_oneof![
                Just("AAH+/w==".to_string()),
                Just("42".to_string()),
                Just("not base64!".to_string()),
                any::<String>(),
            ]
            .prop_map(Value::String),
        ];
        let name = prop_oneof![
            proptest::sample::select(vec![
                "S", "N", "B", "BOOL", "NULL", "SS", "NS", "BS", "L", "M", "X", "s", "id",
            ])
            .prop_map(str::to_owned),
            any::<String>(),
        ];
        leaf.prop_recursive(4, 32, 4, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((name.clone(), inner), 0..3)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    fn to_bytes<T: ?Sized>(value: &T) -> Vec<u8>
    where
        for<'a> Write<'a, T>: Serialize,
    {
        serde_json::to_vec(&Write(value)).unwrap()
    }

    fn read_item(bytes: &[u8]) -> Result<Key, serde_json::Error> {
        serde_json::from_slice::<Read<Key>>(bytes).map(|r| r.0)
    }

    #[test]
    fn every_type_is_written_as_dynamodb_json_in_name_order() {
        let item: Key = HashMap::from([
            ("s".into(), AttributeValue::S("a\"\n".into())),
            ("n".into(), AttributeValue::N("-1.5e3".into())),
            (
                "b".into(),
                AttributeValue::B(Blob::new(vec![0, 1, 254, 255])),
            ),
            ("bool".into(), AttributeValue::Bool(false)),
            ("null".into(), AttributeValue::Null(true)),
            (
                "ss".into(),
                AttributeValue::Ss(vec!["x".into(), "y".into()]),
            ),
            ("ns".into(), AttributeValue::Ns(vec![])),
            ("bs".into(), AttributeValue::Bs(vec![Blob::new(vec![7])])),
            (
                "l".into(),
                AttributeValue::L(vec![AttributeValue::N("1".into())]),
            ),
            (
                "m".into(),
                AttributeValue::M(HashMap::from([
                    ("z".into(), AttributeValue::Null(true)),
                    ("a".into(), AttributeValue::S("".into())),
                ])),
            ),
        ]);
        assert_eq!(
            String::from_utf8(to_bytes(&item)).unwrap(),
            concat!(
                r#"{"b":{"B":"AAH+/w=="},"bool":{"BOOL":false},"bs":{"BS":["Bw=="]},"#,
                r#""l":{"L":[{"N":"1"}]},"m":{"M":{"a":{"S":""},"z":{"NULL":true}}},"#,
                r#""n":{"N":"-1.5e3"},"ns":{"NS":[]},"null":{"NULL":true},"#,
                r#""s":{"S":"a\"\n"},"ss":{"SS":["x","y"]}}"#
            )
        );
        assert_eq!(read_item(&to_bytes(&item)).unwrap(), item);
    }

    #[test]
    fn reading_is_strict_and_says_what_is_wrong() {
        let cases: [(&str, &str); 17] = [
            (r#"{"a":{}}"#, "an empty attribute value"),
            (r#"{"a":{"S":"x","N":"1"}}"#, "two types, S and \"N\""),
            (r#"{"a":{"S":"x","S":"y"}}"#, "two types, S and \"S\""),
            (r#"{"a":{"X":"1"}}"#, "unknown type \"X\""),
            (r#"{"a":{"s":"1"}}"#, "unknown type \"s\""),
            (r#"{"a":{"S":1}}"#, "expected a string in S"),
            (r#"{"a":{"N":1.5}}"#, "expected a string in N"),
            (
                r#"{"a":{"B":"not base64!"}}"#,
                "\"not base64!\" is not base64",
            ),
            (r#"{"a":{"BOOL":"yes"}}"#, "expected true or false in BOOL"),
            (r#"{"a":{"NULL":false}}"#, "NULL must be true, got false"),
            (r#"{"a":{"NULL":null}}"#, "expected true or false in NULL"),
            (r#"{"a":{"SS":"x"}}"#, "expected an array in SS"),
            (r#"{"a":{"NS":[1]}}"#, "expected a string in NS"),
            (r#"{"a":{"BS":["%%"]}}"#, "\"%%\" is not base64"),
            (r#"{"a":{"L":[{"S":"x"},"y"]}}"#, "expected one typed value"),
            (r#"{"a":{"M":[]}}"#, "expected an object of attributes"),
            (
                r#"{"a":{"S":"x"},"a":{"S":"y"}}"#,
                "attribute \"a\" named twice",
            ),
        ];
        for (text, message) in cases {
            let err = read_item(text.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(message), "{text}: {err}");
        }
        assert!(read_item(b"[]").is_err());
    }

    #[test]
    fn keys_are_s_n_or_b() {
        for value in [
            AttributeValue::S("a".into()),
            AttributeValue::N("1".into()),
            AttributeValue::B(Blob::new(vec![1])),
        ] {
            assert!(is_key_value(&value), "{value:?}");
        }
        for value in [
            AttributeValue::Bool(true),
            AttributeValue::Null(true),
            AttributeValue::Ss(vec!["a".into()]),
            AttributeValue::L(vec![]),
            AttributeValue::M(HashMap::new()),
        ] {
            assert!(!is_key_value(&value), "{value:?}");
        }
    }

    proptest! {
        /// Any value and any item, written as bytes, reads back equal.
        #[test]
        fn any_value_round_trips(value in any_value(), item in any_item()) {
            let read = serde_json::from_slice::<Read<AttributeValue>>(&to_bytes(&value));
            prop_assert_eq!(read.unwrap().0, value);
            prop_assert_eq!(read_item(&to_bytes(&item)).unwrap(), item);
        }

        /// An item's attributes are written in name order, whatever their number.
        #[test]
        fn attributes_are_written_in_name_order(item in any_item()) {
            let mut names: Vec<&String> = item.keys().collect();
            names.sort();
            let attributes: Vec<String> = names
                .into_iter()
                .map(|n| format!("{}:{}", json!(n), String::from_utf8(to_bytes(&item[n])).unwrap()))
                .collect();
            let expected = format!("{{{}}}", attributes.join(","));
            prop_assert_eq!(String::from_utf8(to_bytes(&item)).unwrap(), expected);
        }

        /// The `serde_json::Value` functions of the key dialect write the same text and read the
        /// same values as the byte codec.
        #[test]
        fn the_value_functions_agree_with_the_byte_codec(value in any_value(), item in any_item()) {
            prop_assert_eq!(attribute_to_json(&value).to_string().into_bytes(), to_bytes(&value));
            prop_assert_eq!(item_to_json(&item).to_string().into_bytes(), to_bytes(&item));
            prop_assert_eq!(attribute_from_json(&attribute_to_json(&value)), Ok(value));
            prop_assert_eq!(item_from_json(&item_to_json(&item)), Ok(item));
        }

        /// On any JSON, reading a `serde_json::Value` and reading its bytes accept the same
        /// inputs and read the same items.
        #[test]
        fn both_readers_accept_the_same_json(json in any_json()) {
            let from_value = item_from_json(&json).ok();
            let from_bytes = read_item(json.to_string().as_bytes()).ok();
            prop_assert_eq!(from_value, from_bytes);
            let wrapped = json!({ "a": json });
            prop_assert_eq!(
                item_from_json(&wrapped).ok(),
                read_item(wrapped.to_string().as_bytes()).ok()
            );
        }

        /// Reading never panics: any JSON, and any bytes, is an item or a specific error.
        #[test]
        fn reading_any_input_is_an_item_or_a_specific_error(
            json in any_json(),
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let specific = [
                "an empty attribute value",
                "two types",
                "unknown type",
                "is not base64",
                "NULL must be true",
                "named twice",
                "invalid type",
            ];
            for text in [json.to_string(), json!({ "a": json }).to_string()] {
                if let Err(e) = read_item(text.as_bytes()) {
                    let message = e.to_string();
                    prop_assert!(
                        specific.iter().any(|s| message.contains(s)),
                        "{}: {}", text, message
                    );
                }
            }
            let _ = read_item(&bytes);
        }
    }
}
