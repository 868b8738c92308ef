//! A [`Store`](ttl_sweeper::store::Store) wrapper that records what a sweep did through it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ttl_sweeper::store::{ConditionalOutcome, ErrorKind, Key, StoreError};

use super::observed::{Answer, Call, Observed, Observer};
use super::{wall_clock, AV};

/// A store wrapper that records the partitions read and the keys deleted, can run a hook before
/// each delete request and can lose the answers of batch deletes. Its [`Recording`] reads as
/// fields of it: `store.partitions`, `store.before_delete = …`.
pub type Instrumented<S> = Observed<S, Recording>;

/// What an [`Instrumented`] store records, and what it does to the calls.
#[derive(Default)]
pub struct Recording {
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
        let observer = Recording::default();
        Observed { inner, observer }
    }
}

impl Recording {
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

    /// Runs the hook, if any, on each of `keys`.
    async fn before_delete(&self, keys: &[&Key]) {
        if let Some(hook) = &self.before_delete {
            for k in keys {
                hook(k).await;
            }
        }
    }
}

impl Observer for Recording {
    type Guard = ();

    async fn before(&self, call: Call<'_>) {
        match call {
            Call::QueryExpired { partition } => {
                self.partitions.lock().unwrap().push(partition.to_owned())
            }
            Call::BatchDelete { keys } => self.before_delete(keys).await,
            Call::DeleteIfExpired { key } => self.before_delete(&[key]).await,
            _ => {}
        }
    }

    fn after(
        &self,
        call: Call<'_>,
        answer: Result<Answer<'_>, &StoreError>,
    ) -> Result<(), StoreError> {
        match (call, answer) {
            (Call::QueryExpired { .. }, Ok(Answer::Page(page))) if page.next.is_some() => {
                self.pages_with_more.fetch_add(1, Ordering::SeqCst);
            }
            (Call::BatchDelete { keys }, Ok(Answer::Keys(unprocessed))) => {
                let lose = |n: usize| n.checked_sub(1);
                let lost =
                    self.lose_batch_answers
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, lose);
                if lost.is_ok() {
                    let message = "answer lost (injected by the test)";
                    return Err(StoreError::new(
                        ErrorKind::Transient,
                        "BatchWriteItem",
                        message,
                    ));
                }
                let done = keys.iter().copied().filter(|k| !unprocessed.contains(k));
                self.record(done, Some(wall_clock()));
            }
            (Call::DeleteIfExpired { key }, Ok(Answer::Conditional(outcome))) => match outcome {
                ConditionalOutcome::Deleted => {
                    self.record(std::iter::once(key), Some(wall_clock()))
                }
                ConditionalOutcome::Gone => self.record(std::iter::once(key), None),
                ConditionalOutcome::Kept => {}
            },
            _ => {}
        }
        Ok(())
    }
}
