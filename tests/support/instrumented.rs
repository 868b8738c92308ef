//! A [`Store`] wrapper that records what a sweep did through it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::{
    ConditionalOutcome, EntryWrite, ErrorKind, Key, LeaseItem, Page, Store, StoreError, TableSchema,
};

use super::{wall_clock, AV};

/// A [`Store`] wrapper that records the partitions read and the keys deleted,
/// can run a hook before each delete request and can lose the answers of batch deletes.
pub struct Instrumented<S> {
    pub inner: S,
    /// The partitions queried, in order.
    pub partitions: Mutex<Vec<String>>,
    /// How many times each `id` was deleted or (by a conditional delete) found gone; share it
    /// between stores to count across them.
    pub settled: Arc<Mutex<HashMap<String, u32>>>,
    pub pages_with_more: AtomicUsize,
    /// The answers of this many next `BatchWriteItem` calls are lost after DynamoDB applied
    /// them: the caller sees a transient error, as after a timed-out attempt or a dropped
    /// connection.
    pub lose_batch_answers: AtomicUsize,
    /// Wall-clock time (epoch seconds) at which each deleted item's delete was acknowledged, by `id`.
    pub deleted_at: Mutex<HashMap<String, f64>>,
    pub before_delete: Option<BeforeDelete>,
}

/// What [`Instrumented`] runs before each delete.
pub type BeforeDelete = Box<
    dyn Fn(&Key) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync,
>;

impl<S> Instrumented<S> {
    pub fn new(inner: S) -> Self {
        Instrumented {
            inner,
            partitions: Mutex::default(),
            settled: Arc::default(),
            pages_with_more: AtomicUsize::new(0),
            lose_batch_answers: AtomicUsize::new(0),
            deleted_at: Mutex::new(HashMap::new()),
            before_delete: None,
        }
    }

    /// Records keys deleted (`at`: when acknowledged) or, without `at`, found gone.
    fn record<'k>(&self, keys: impl Iterator<Item = &'k Key>, at: Option<f64>) {
        let mut deleted_at = self.deleted_at.lock().unwrap();
        let mut settled = self.settled.lock().unwrap();
        for k in keys {
            if let Some(AV::S(id)) = k.get("id") {
                *settled.entry(id.clone()).or_default() += 1;
                if let Some(at) = at {
                    deleted_at.insert(id.clone(), at);
                }
            }
        }
    }
}

impl<S: Store> Store for Instrumented<S> {
    async fn query_expired(
        &self,
        schema: &TableSchema,
        partition: &str,
        now: Timestamp,
        start: Option<Key>,
        limit: Option<i32>,
    ) -> Result<Page, StoreError> {
        self.partitions.lock().unwrap().push(partition.to_owned());
        let page = self
            .inner
            .query_expired(schema, partition, now, start, limit)
            .await?;
        if page.next.is_some() {
            self.pages_with_more.fetch_add(1, Ordering::SeqCst);
        }
        Ok(page)
    }

    async fn batch_delete(
        &self,
        schema: &TableSchema,
        keys: &[&Key],
    ) -> Result<Vec<Key>, StoreError> {
        if let Some(hook) = &self.before_delete {
            for k in keys {
                hook(k).await;
            }
        }
        let unprocessed = self.inner.batch_delete(schema, keys).await?;
        let lose = |n: usize| n.checked_sub(1);
        if self
            .lose_batch_answers
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, lose)
            .is_ok()
        {
            return Err(StoreError::new(
                ErrorKind::Transient,
                "BatchWriteItem",
                "answer lost (injected by the test)",
            ));
        }
        let done = keys.iter().copied().filter(|k| !unprocessed.contains(k));
        self.record(done, Some(wall_clock()));
        Ok(unprocessed)
    }

    async fn write_entries(
        &self,
        schema: &TableSchema,
        writes: Vec<EntryWrite>,
    ) -> Result<Vec<EntryWrite>, StoreError> {
        self.inner.write_entries(schema, writes).await
    }

    async fn delete_if_expired(
        &self,
        schema: &TableSchema,
        key: Key,
        ttl: &str,
        now: Timestamp,
        return_item: bool,
    ) -> Result<(ConditionalOutcome, Option<Key>), StoreError> {
        if let Some(hook) = &self.before_delete {
            hook(&key).await;
        }
        let answer = self
            .inner
            .delete_if_expired(schema, key.clone(), ttl, now, return_item)
            .await?;
        match answer.0 {
            ConditionalOutcome::Deleted => self.record(std::iter::once(&key), Some(wall_clock())),
            ConditionalOutcome::Gone => self.record(std::iter::once(&key), None),
            ConditionalOutcome::Kept => {}
        }
        Ok(answer)
    }

    async fn get_items(
        &self,
        schema: &TableSchema,
        keys: Vec<Key>,
        ttl_only: bool,
    ) -> Result<Vec<Key>, StoreError> {
        self.inner.get_items(schema, keys, ttl_only).await
    }

    async fn read_checkpoint(
        &self,
        table: &str,
        id: &str,
    ) -> Result<Option<Timestamp>, StoreError> {
        self.inner.read_checkpoint(table, id).await
    }

    async fn advance_checkpoint(
        &self,
        table: &str,
        id: &str,
        to: Timestamp,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        self.inner.advance_checkpoint(table, id, to, at).await
    }

    async fn read_lease(&self, table: &str, id: &str) -> Result<Option<LeaseItem>, StoreError> {
        self.inner.read_lease(table, id).await
    }

    async fn write_lease(
        &self,
        table: &str,
        id: &str,
        lease: &LeaseItem,
        lapsed_before: Timestamp,
    ) -> Result<bool, StoreError> {
        self.inner
            .write_lease(table, id, lease, lapsed_before)
            .await
    }

    async fn release_lease(&self, table: &str, id: &str, holder: &str) -> Result<bool, StoreError> {
        self.inner.release_lease(table, id, holder).await
    }
}
