//! Writer and reader helpers for application code that writes and reads swept tables.
//!
//! Writers call [`expiry_attributes`] on every put and ttl update for the ttl and window attributes
//! to store. Readers that must never see an expired item — even in the seconds before the sweeper
//! deletes it — check [`is_expired`] or add [`live_items_filter`] to their Query or Scan.
//!
//! They take and return the SDK's `AttributeValue` (feature `aws-sdk-dynamodb`, on by default)
//! or `serde_dynamo`'s, through [`AttributeValueLike`].

use super::layout::Layout;
use super::time::Timestamp;
use super::value::AttributeValueLike;
use super::window::{parse_ttl, ttl_state, TtlError, TtlState};

/// The attributes to store on an item expiring at `ttl` (epoch seconds): `[(ttl, N), (window, S)]`.
///
/// ```
/// use aws_sdk_dynamodb::types::AttributeValue;
/// use ttl_sweeper::expiry::{expiry_attributes, Layout};
/// let attrs = expiry_attributes(1658265980, &AttributeValue::S("user#42".into()), &Layout::default()).unwrap();
/// assert_eq!(attrs[0], ("ttl".to_string(), AttributeValue::N("1658265980".into())));
/// assert_eq!(
///     attrs[1].1,
///     AttributeValue::S("2022-07-19T21:26:00.000Z_2022-07-19T21:27:00.000Z".into())
/// );
/// ```
pub fn expiry_attributes<V: AttributeValueLike>(
    ttl: i64,
    partition_key: &V,
    layout: &Layout,
) -> Result<[(String, V); 2], TtlError> {
    let window = layout.window_for(ttl as f64, partition_key)?;
    Ok([
        (layout.ttl_attribute.clone(), V::number(ttl.to_string())),
        (layout.window_attribute.clone(), V::string(window)),
    ])
}

/// True when `item` has a usable numeric ttl that is before `now` (epoch seconds), and not more
/// than five years before it — the rule native TTL and the sweeper delete by. Items without a
/// ttl, or with one neither can use, never expire.
pub fn is_expired<V: AttributeValueLike>(
    item: &std::collections::HashMap<String, V>,
    ttl_attribute: &str,
    now: i64,
) -> bool {
    let expired = |ttl| ttl_state(ttl, Timestamp::from_secs(now)) == TtlState::Expired;
    let ttl = item.get(ttl_attribute).and_then(V::as_number_text);
    ttl.is_some_and(|n| parse_ttl(n).is_ok_and(expired))
}

/// A filter expression that hides expired-but-present items from a Query or Scan:
/// `(#ttl >= :now OR attribute_not_exists(#ttl))`, with its placeholder names and values.
///
/// DynamoDB filters *after* reading: hidden items still consume read capacity and page space.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveItemsFilter<V> {
    /// The filter expression.
    pub expression: String,
    /// `#ttl` → the ttl attribute.
    pub names: Vec<(String, String)>,
    /// `:now` → now.
    pub values: Vec<(String, V)>,
}

/// Builds the [`LiveItemsFilter`] for `ttl_attribute` as of `now`.
///
/// ```
/// use aws_sdk_dynamodb::types::AttributeValue;
/// use ttl_sweeper::expiry::{live_items_filter, LiveItemsFilter};
/// let f: LiveItemsFilter<AttributeValue> = live_items_filter("ttl", 1658265980);
/// assert_eq!(f.expression, "(#ttl >= :now OR attribute_not_exists(#ttl))");
/// assert_eq!(f.values, [(":now".to_string(), AttributeValue::N("1658265980".into()))]);
/// ```
pub fn live_items_filter<V: AttributeValueLike>(
    ttl_attribute: &str,
    now: i64,
) -> LiveItemsFilter<V> {
    LiveItemsFilter {
        expression: "(#ttl >= :now OR attribute_not_exists(#ttl))".into(),
        names: vec![("#ttl".into(), ttl_attribute.into())],
        values: vec![(":now".into(), V::number(now.to_string()))],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_dynamo::AttributeValue;
    use std::collections::HashMap;

    fn item(ttl: Option<AttributeValue>) -> HashMap<String, AttributeValue> {
        let mut m = HashMap::from([("id".to_string(), AttributeValue::S("a".into()))]);
        if let Some(t) = ttl {
            m.insert("ttl".into(), t);
        }
        m
    }

    #[test]
    fn expiry_follows_the_sweepers_rule() {
        let now = 1_658_265_980;
        let expired = |ttl, now| is_expired(&item(ttl), "ttl", now);
        let n = |t: i64| Some(AttributeValue::N(t.to_string()));
        assert!(expired(n(now - 1), now));
        assert!(!expired(n(now), now));
        assert!(!expired(n(now + 1), now));
        assert!(!expired(None, now));
        // native TTL's rule: more than five years in the past never expires
        assert!(!expired(n(0), now));
        assert!(!expired(Some(AttributeValue::S("1".into())), now));
        assert!(!expired(n(now * 1000), now + 10_000_000_000));
    }

    #[test]
    fn writer_attributes_use_the_layout() {
        let layout = Layout {
            ttl_attribute: "expiresAt".into(),
            window_attribute: "win".into(),
            window_seconds: 300,
            window_shards: 8,
        };
        let attrs =
            expiry_attributes(1658265980, &AttributeValue::S("user#42".into()), &layout).unwrap();
        assert_eq!(attrs[0].0, "expiresAt");
        assert_eq!(attrs[1].0, "win");
        assert_eq!(
            attrs[1].1,
            AttributeValue::S("2022-07-19T21:25:00.000Z_2022-07-19T21:30:00.000Z#5".into())
        );
        assert!(expiry_attributes(1658265980000, &AttributeValue::S("x".into()), &layout).is_err());
    }
}
