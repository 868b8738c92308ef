//! [`AttributeValueLike`]: the few things the writer and reader helpers need from a DynamoDB
//! attribute value, so they take the SDK's `AttributeValue` (feature `aws-sdk-dynamodb`, on by
//! default) or `serde_dynamo`'s (always, as in `aws_lambda_events`' Streams records) alike.

/// A DynamoDB attribute value the helpers can read a ttl or a partition key from, and build the
/// Number and String values they return.
pub trait AttributeValueLike: Sized {
    /// A Number value from its decimal text.
    fn number(text: String) -> Self;
    /// A String value.
    fn string(text: String) -> Self;
    /// The text of a Number value; `None` for any other type.
    fn as_number_text(&self) -> Option<&str>;
    /// The bytes a partition key value is sharded by: UTF-8 of a String, the text of a Number,
    /// the raw bytes of a Binary; `None` for types that cannot be keys.
    fn key_bytes(&self) -> Option<&[u8]>;
}

/// The SDK's `AttributeValue` and `serde_dynamo`'s have the same variants: one implementation.
macro_rules! attribute_value_like {
    ($value:ty) => {
        impl AttributeValueLike for $value {
            fn number(text: String) -> Self {
                Self::N(text)
            }

            fn string(text: String) -> Self {
                Self::S(text)
            }

            fn as_number_text(&self) -> Option<&str> {
                match self {
                    Self::N(n) => Some(n),
                    _ => None,
                }
            }

            fn key_bytes(&self) -> Option<&[u8]> {
                match self {
                    Self::S(s) | Self::N(s) => Some(s.as_bytes()),
                    Self::B(b) => Some(b.as_ref()),
                    _ => None,
                }
            }
        }
    };
}

attribute_value_like!(serde_dynamo::AttributeValue);
#[cfg(feature = "aws-sdk-dynamodb")]
attribute_value_like!(aws_sdk_dynamodb::types::AttributeValue);
#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_dynamo::AttributeValue;

    use crate::expiry::{
        expiry_attributes, is_expired, live_items_filter, Layout, LiveItemsFilter,
    };

    #[test]
    fn the_helpers_take_serde_dynamo_values() {
        let now = 1_658_265_980;
        let expired = |ttl: AttributeValue| {
            is_expired(&HashMap::from([("ttl".to_string(), ttl)]), "ttl", now)
        };
        assert!(expired(AttributeValue::N((now - 1).to_string())));
        assert!(!expired(AttributeValue::N(now.to_string())));
        assert!(!expired(AttributeValue::S((now - 1).to_string())));

        let layout = Layout {
            window_shards: 8,
            ..Layout::default()
        };
        let attrs = expiry_attributes(now, &AttributeValue::S("user#42".into()), &layout).unwrap();
        assert_eq!(attrs[0], ("ttl".into(), AttributeValue::N(now.to_string())));
        assert_eq!(
            attrs[1].1,
            AttributeValue::S("2022-07-19T21:26:00.000Z_2022-07-19T21:27:00.000Z#5".into())
        );
        let binary = layout.window_for(now as f64, &AttributeValue::B(vec![1, 2, 3, 255]));
        assert!(binary.is_ok());
        assert!(layout
            .window_for(now as f64, &AttributeValue::Bool(true))
            .is_ok());

        let filter: LiveItemsFilter<AttributeValue> = live_items_filter("ttl", now);
        assert_eq!(
            filter.values,
            [(":now".into(), AttributeValue::N(now.to_string()))]
        );
    }
}
