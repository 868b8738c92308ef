//! [`Scan`] for [`MemStore`]: the adoption tools' requests as DynamoDB answers them (a segment
//! of a parallel Scan, the window update and the delete conditional on what was read, the look-ups
//! of entries), with the faults, delays and changes the test scripted; and [`StreamPositions`],
//! the stream follower's: the table's stream (the one of `mem_stream`) and its saved position.

use aws_sdk_dynamodb::types::AttributeValue;
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::scan::{ScanPage, UpdateOutcome};
use ttl_sweeper::store::stream::{StreamPositions, TableStream};
use ttl_sweeper::store::{packs, ConditionalOutcome, Key, Scan, StoreError, TableSchema};

use super::script::Op;
use super::{id_of, key, MemStore, AV};

/// The segment of `total` an item's `id` falls in (as DynamoDB's hash of the partition key
/// spreads them): FNV-1a.
fn segment_of(id: &str, total: u32) -> u32 {
    let hash = (id.bytes()).fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % u64::from(total.max(1))) as u32
}

/// Half a read unit an item: what a scan of small items consumes, eventually consistent.
const UNITS_PER_ITEM: f64 = 0.5;

impl Scan for MemStore {
    async fn scan_page(
        &self,
        _: &str,
        segment: u32,
        total: u32,
        start: Option<Key>,
        _: &[String],
        limit: Option<i32>,
    ) -> Result<ScanPage, StoreError> {
        let (n, fault) = self.begin(Op::Scan, None).await?;
        let limit = (self.page_size).unwrap_or(limit.map_or(usize::MAX, |l| l.max(1) as usize));
        let after = start.as_ref().map(id_of);
        let mut items: Vec<Key> = {
            let items = self.items.lock().unwrap();
            items
                .iter()
                .filter(|(id, _)| segment_of(id, total) == segment)
                .filter(|(id, _)| after.as_ref().is_none_or(|a| *id > a))
                .take(limit.saturating_add(1))
                .map(|(_, (_, item))| item.clone())
                .collect()
        };
        let next = (items.len() > limit).then(|| {
            items.truncate(limit);
            key(&id_of(items.last().unwrap()))
        });
        let consumed = items.len() as f64 * UNITS_PER_ITEM;
        let page = ScanPage {
            items,
            next,
            consumed,
        };
        self.answer(Op::Scan, n, None, fault, page)
    }

    async fn set_window_if_unchanged(
        &self,
        schema: &TableSchema,
        key: Key,
        ttl: AttributeValue,
        old: Option<AttributeValue>,
        window: String,
    ) -> Result<(UpdateOutcome, f64), StoreError> {
        let (ttl_attribute, window_attribute) = (
            &schema.layout.ttl_attribute,
            &schema.layout.window_attribute,
        );
        let id = id_of(&key);
        let (n, fault) = self.begin(Op::SetWindow, Some(&id)).await?;
        let found = self.items.lock().unwrap().get(&id).map(|(_, i)| i.clone());
        let outcome = match found {
            Some(mut item)
                if item.get(ttl_attribute) == Some(&ttl)
                    && item.get(window_attribute) == old.as_ref() =>
            {
                item.insert(window_attribute.clone(), AV::S(window));
                self.put_item(item);
                UpdateOutcome::Written
            }
            _ => UpdateOutcome::Changed,
        };
        self.answer(Op::SetWindow, n, Some(&id), fault, (outcome, 1.0))
    }

    async fn has_entry(
        &self,
        _: &str,
        window: &str,
        prefix: &str,
    ) -> Result<(bool, f64), StoreError> {
        let (n, fault) = self.begin(Op::HasEntry, None).await?;
        let entries = self.entries.lock().unwrap();
        let found = (entries.keys()).any(|(w, sort)| w == window && sort.starts_with(prefix));
        drop(entries);
        self.answer(Op::HasEntry, n, None, fault, (found, 1.0))
    }

    async fn has_packed(
        &self,
        schema: &TableSchema,
        _: &str,
        window: &str,
        due: Timestamp,
        key: &Key,
    ) -> Result<(bool, f64), StoreError> {
        let (n, fault) = self.begin(Op::HasEntry, None).await?;
        let prefix = packs::due_prefix(due);
        let packed: Vec<Key> = {
            let entries = self.entries.lock().unwrap();
            (entries.iter())
                .filter(|((w, sort), _)| w == window && sort.starts_with(&prefix))
                .map(|(_, item)| item.clone())
                .collect()
        };
        let listed = packed.into_iter().any(|item| {
            let pack = packs::Pack::from_item(&item).expect("a pack");
            let keys = packs::listed(schema, pack).expect("a pack of this table");
            keys.iter().any(|k| schema.same_key(k, key))
        });
        self.answer(Op::HasEntry, n, None, fault, (listed, 1.0))
    }

    async fn delete_if_ttl_unchanged(
        &self,
        _: &str,
        key: Key,
        ttl_attribute: &str,
        ttl: AttributeValue,
    ) -> Result<(ConditionalOutcome, f64), StoreError> {
        let id = id_of(&key);
        let (n, fault) = self.begin(Op::DeleteRead, Some(&id)).await?;
        let mut items = self.items.lock().unwrap();
        let outcome = match items.get(&id) {
            None => ConditionalOutcome::Gone,
            Some((_, item)) if item.get(ttl_attribute) == Some(&ttl) => {
                self.remove(&mut items, &id);
                ConditionalOutcome::Deleted
            }
            Some(_) => ConditionalOutcome::Kept,
        };
        drop(items);
        self.answer(Op::DeleteRead, n, Some(&id), fault, (outcome, 1.0))
    }
}

/// The stream of the tests' table ([`super::super::mem_stream::MemStream`] reads any ARN).
pub const STREAM_ARN: &str =
    "arn:aws:dynamodb:us-east-1:000000000000:table/sessions/stream/2026-01-01T00:00:00.000";

impl StreamPositions for MemStore {
    async fn table_stream(&self, _: &str) -> Result<Option<TableStream>, StoreError> {
        Ok(Some(TableStream {
            arn: STREAM_ARN.to_owned(),
            view: "NEW_AND_OLD_IMAGES".to_owned(),
        }))
    }

    async fn read_stream_position(
        &self,
        table: &str,
        id: &str,
    ) -> Result<Option<String>, StoreError> {
        let positions = self.stream_positions.lock().unwrap();
        Ok(positions.get(&(table.to_owned(), id.to_owned())).cloned())
    }

    async fn save_stream_position(
        &self,
        table: &str,
        id: &str,
        position: String,
        _: String,
    ) -> Result<(), StoreError> {
        let mut positions = self.stream_positions.lock().unwrap();
        positions.insert((table.to_owned(), id.to_owned()), position);
        Ok(())
    }
}
