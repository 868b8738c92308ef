//! The checkpoint table's items as [`DynamoStore`] reads them: the checkpoint and the stream
//! follower's position (`id`, `sweptUntil`), and the leader lease.

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::AttributeValue;

use super::DynamoStore;
use crate::expiry::Timestamp;
use crate::store::{ErrorKind, Key, LeaseItem, StoreError};

/// Attribute of the checkpoint item holding the boundary, epoch seconds.
pub const CHECKPOINT_ATTRIBUTE: &str = "sweptUntil";

/// Attribute of the lease item naming its holder (a String).
pub const LEASE_HOLDER_ATTRIBUTE: &str = "holder";

/// Attribute of the lease item holding when it lapses by DynamoDB's clock, epoch milliseconds.
pub const LEASE_EXPIRES_ATTRIBUTE: &str = "expiresAt";

/// Attribute of the lease item describing its holder's layout (a String; absent from items
/// written before it was recorded).
pub const LEASE_LAYOUT_ATTRIBUTE: &str = "layout";

/// Attribute of the lease item set (a Boolean, `true`) when its holder gave it up; removed when
/// the lease is taken again.
pub const LEASE_RELEASED_ATTRIBUTE: &str = "released";

impl DynamoStore {
    /// Item `id` of checkpoint table `table` (a consistent read), if it exists: the checkpoint,
    /// or the stream follower's position.
    pub(in crate::store) async fn checkpoint_item(
        &self,
        table: &str,
        id: &str,
    ) -> Result<Option<Key>, StoreError> {
        let get = self
            .client
            .get_item()
            .table_name(table)
            .consistent_read(true);
        let out = get.key("id", AttributeValue::S(id.to_owned())).send().await;
        Ok(out.map_err(|e| StoreError::from_sdk("GetItem", e))?.item)
    }

    /// An `UpdateItem` of item `id` of checkpoint table `table`, to be completed.
    pub(super) fn checkpoint_update(&self, table: &str, id: &str) -> UpdateItemFluentBuilder {
        let update = self.client.update_item().table_name(table);
        update.key("id", AttributeValue::S(id.to_owned()))
    }
}

/// A conditional `UpdateItem`'s answer: `true` written, `false` its condition did not hold.
pub(super) fn conditionally_written<T>(
    answer: Result<T, SdkError<UpdateItemError, HttpResponse>>,
) -> Result<bool, StoreError> {
    match answer.map_err(|e| StoreError::from_sdk("UpdateItem", e)) {
        Ok(_) => Ok(true),
        Err(e) if e.kind == ErrorKind::ConditionFailed => Ok(false),
        Err(e) => Err(e),
    }
}

/// The lease item `item` (`id` of checkpoint table `table`) as a [`LeaseItem`]; one that is not a
/// lease is an error naming what is wrong.
pub(super) fn lease_from_item(item: &Key, table: &str, id: &str) -> Result<LeaseItem, StoreError> {
    let invalid = |what: &str| {
        let message = format!("lease item {id:?} of {table}: {what}");
        StoreError::new(ErrorKind::Validation, "GetItem", message)
    };
    let holder = match item.get(LEASE_HOLDER_ATTRIBUTE) {
        Some(AttributeValue::S(h)) => h.clone(),
        _ => return Err(invalid("no String `holder`")),
    };
    let expires_at = match item.get(LEASE_EXPIRES_ATTRIBUTE) {
        Some(AttributeValue::N(n)) => n
            .parse::<i64>()
            .map(Timestamp::from_millis)
            .map_err(|_| invalid("`expiresAt` is not epoch milliseconds"))?,
        _ => return Err(invalid("no Number `expiresAt`")),
    };
    let layout = match item.get(LEASE_LAYOUT_ATTRIBUTE) {
        None => None,
        Some(AttributeValue::S(l)) => Some(l.clone()),
        Some(_) => return Err(invalid("`layout` is not a String")),
    };
    let released = matches!(
        item.get(LEASE_RELEASED_ATTRIBUTE),
        Some(AttributeValue::Bool(true))
    );
    Ok(LeaseItem {
        holder,
        expires_at,
        layout,
        released,
    })
}
