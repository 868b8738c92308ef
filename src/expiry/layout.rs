//! [`Layout`]: where and how items carry their expiry — the ttl and window attributes, the window
//! width and the shard count. Writers, the sweeper, backfill and audit all read the same layout.

use super::value::AttributeValueLike;
use super::window::{window_attribute, TtlError};

/// The window layout writers and the sweeper agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The ttl attribute (Number, epoch seconds).
    pub ttl_attribute: String,
    /// The window attribute (String).
    pub window_attribute: String,
    /// Window width in seconds.
    pub window_seconds: u32,
    /// Shards per window.
    pub window_shards: u32,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            ttl_attribute: "ttl".into(),
            window_attribute: "expirationWindow".into(),
            window_seconds: 60,
            window_shards: 1,
        }
    }
}

impl Layout {
    /// The window attribute value for an item with `ttl` and partition key value `pk`.
    pub fn window_for(&self, ttl: f64, pk: &impl AttributeValueLike) -> Result<String, TtlError> {
        let bytes = partition_key_bytes(pk).unwrap_or_default();
        window_attribute(ttl, self.window_seconds, self.window_shards, &bytes)
    }
}

/// The bytes a partition key value is sharded by, owned ([`AttributeValueLike::key_bytes`]).
pub fn partition_key_bytes(value: &impl AttributeValueLike) -> Option<Vec<u8>> {
    value.key_bytes().map(<[u8]>::to_vec)
}
