//! The expiry model: what "expired" means, where an item's expiry is stored, and the window math
//! that maps a ttl to the index partition a sweep reads. Pure code, no I/O and no clock.
//!
//! - [`time`]: [`Timestamp`], the one instant type (epoch milliseconds).
//! - [`window`]: ttl parsing, windows, shards, and the windows a sweep reads.
//! - [`layout`]: [`Layout`], the attribute names, window width and shard count.
//! - [`item`]: helpers for application code: what writers store, what readers check and filter.
//! - [`value`]: [`AttributeValueLike`], the SDK's or `serde_dynamo`'s attribute values alike.

pub mod item;
pub mod layout;
pub mod time;
pub mod value;
pub mod window;

pub use item::{expiry_attributes, is_expired, live_items_filter, LiveItemsFilter};
pub use layout::{partition_key_bytes, Layout};
pub use time::{iso_millis, Clock, Held, Timestamp};
pub use value::AttributeValueLike;
pub use window::{TtlError, Window};
