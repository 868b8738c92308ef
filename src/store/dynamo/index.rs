//! [`DynamoStore`]'s writes of entries to the expiry index table, and two
//! refusals the store answers: a conditional delete refused, an item of another table.

use super::*;

impl DynamoStore {
    /// Up to 25 [`EntryWrite`]s in one `BatchWriteItem` on the expiry index table `index_table`,
    /// one attempt; answers the writes left unprocessed.
    pub(in crate::store) async fn write_index(
        &self,
        index_table: &str,
        writes: Vec<EntryWrite>,
    ) -> Result<Vec<EntryWrite>, StoreError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let request = |write| match write {
            EntryWrite::Remove(id) => delete_request(id),
            EntryWrite::Put(item) => {
                let put = PutRequest::builder().set_item(Some(item)).build();
                let put = built(OP, put)?;
                Ok(WriteRequest::builder().put_request(put).build())
            }
        };
        let requests = writes.into_iter().map(request).collect::<Result<_, _>>()?;
        let unprocessed = batch_write(&self.client, index_table, requests).await?;
        let write = |r: WriteRequest| match (r.put_request, r.delete_request) {
            (Some(put), _) => Some(EntryWrite::Put(put.item)),
            (None, delete) => delete.map(|d| EntryWrite::Remove(d.key)),
        };
        Ok(unprocessed.into_iter().filter_map(write).collect())
    }
}

/// A conditional `DeleteItem` that failed: [`ConditionalOutcome::Kept`] when its condition did
/// not hold on an item that exists (returned with `ReturnValuesOnConditionCheckFailure=ALL_OLD`),
/// [`ConditionalOutcome::Gone`] when there was no item; any other error as it is.
pub(in crate::store) fn refused_delete(
    e: SdkError<DeleteItemError, HttpResponse>,
) -> Result<ConditionalOutcome, StoreError> {
    match e.as_service_error() {
        Some(DeleteItemError::ConditionalCheckFailedException(c)) => Ok(match &c.item {
            Some(item) if !item.is_empty() => ConditionalOutcome::Kept,
            _ => ConditionalOutcome::Gone,
        }),
        _ => Err(StoreError::from_sdk("DeleteItem", e)),
    }
}

/// The refusal of an item of `index_table` that is no `what` (entry or pack) of `schema`'s table:
/// the index table is another table's too.
pub(super) fn foreign_item(schema: &TableSchema, index_table: &str, what: &str) -> StoreError {
    let message = format!(
        "expiry index table {index_table:?} holds an item that is no {what} of table {:?} (keyed \
         on {:?}): give each swept table an index table of its own",
        schema.table_name, schema.key_attributes
    );
    StoreError::new(ErrorKind::Validation, "Query", message)
}
