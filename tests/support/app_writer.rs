//! An application writing its table through the SDK, remembering what it wrote.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::Client;
use ttl_sweeper::store::Key;

use super::{delete_one, id_key, num, put_many, put_one, ttl_of, wall_clock};

/// One write of an [`AppWriter`].
#[derive(Debug, Clone)]
pub struct AppWrite {
    pub id: String,
    /// When the request was sent (wall clock, epoch seconds).
    pub sent: f64,
    /// The item as written (`None`: deleted).
    pub item: Option<Key>,
}

/// An application writing its table as one that knows nothing of the sweeper does — its own
/// attributes and a ttl, nothing else — that remembers what it wrote: each item's last version
/// and every write in order.
pub struct AppWriter {
    pub client: Client,
    pub table: String,
    /// Each item's last version by `id` (`None`: deleted).
    pub items: BTreeMap<String, Option<Key>>,
    pub writes: Vec<AppWrite>,
}

impl AppWriter {
    pub fn new(client: &Client, table: &str) -> AppWriter {
        AppWriter {
            client: client.clone(),
            table: table.to_owned(),
            items: Default::default(),
            writes: Vec::new(),
        }
    }

    fn wrote(&mut self, id: &str, sent: f64, item: Option<Key>) {
        self.items.insert(id.to_owned(), item.clone());
        let id = id.to_owned();
        self.writes.push(AppWrite { id, sent, item });
    }

    /// `PutItem` of `item` (its `id`, a `payload` and the ttl it has).
    pub async fn put(&mut self, item: Key) {
        let sent = wall_clock();
        put_one(&self.client, &self.table, item.clone()).await;
        self.wrote(&item["id"].as_s().unwrap().clone(), sent, Some(item));
    }

    /// `BatchWriteItem`s of `items`, four writers at once.
    pub async fn put_many(&mut self, items: Vec<Key>) {
        let sent = wall_clock();
        put_many(&self.client, &self.table, items.clone()).await;
        for item in items {
            self.wrote(&item["id"].as_s().unwrap().clone(), sent, Some(item));
        }
    }

    /// `UpdateItem` setting the ttl of an item (there) to `ttl`, and nothing else.
    pub async fn set_ttl(&mut self, id: &str, ttl: i64) {
        self.update_ttl(id, Some(ttl)).await;
    }

    /// `UpdateItem` removing the ttl of an item (there): it never expires.
    pub async fn remove_ttl(&mut self, id: &str) {
        self.update_ttl(id, None).await;
    }

    /// `UpdateItem` setting the ttl of an item (there) to `ttl`, or removing it.
    async fn update_ttl(&mut self, id: &str, ttl: Option<i64>) {
        let sent = wall_clock();
        let update = self.client.update_item().table_name(&self.table);
        let update = update
            .set_key(Some(id_key(id)))
            .expression_attribute_names("#t", "ttl");
        let update = match ttl {
            Some(ttl) => update
                .update_expression("SET #t = :t")
                .expression_attribute_values(":t", num(ttl)),
            None => update.update_expression("REMOVE #t"),
        };
        update.send().await.expect("update ttl");
        let mut item = self.last(id);
        match ttl {
            Some(ttl) => item.insert("ttl".into(), num(ttl)),
            None => item.remove("ttl"),
        };
        self.wrote(id, sent, Some(item));
    }

    /// `DeleteItem` of the item `id`.
    pub async fn delete(&mut self, id: &str) {
        let sent = wall_clock();
        delete_one(&self.client, &self.table, id).await;
        self.wrote(id, sent, None);
    }

    /// The last version of the item `id`, which must be there.
    pub fn last(&self, id: &str) -> Key {
        let last = self.items.get(id).cloned().flatten();
        last.unwrap_or_else(|| panic!("{id} was not written, or deleted"))
    }

    /// The ttl of the item `id` as last written (`None`: none, or deleted, or never written).
    pub fn ttl(&self, id: &str) -> Option<i64> {
        ttl_of(self.items.get(id)?.as_ref()?)
    }

    /// The entries the stream indexer is to write for these writes, as (item `id`, ttl), sorted:
    /// one for each write that gave an item a ttl other than the one it had (a stream with the
    /// old image tells an unchanged ttl, which needs no entry). Every ttl is taken as usable.
    pub fn entries(&self) -> Vec<(String, i64)> {
        let mut had: HashMap<&str, Option<i64>> = HashMap::new();
        let mut entries = Vec::new();
        for w in &self.writes {
            let ttl = w.item.as_ref().and_then(ttl_of);
            let before = had.insert(&w.id, ttl).flatten();
            if let Some(ttl) = ttl.filter(|t| Some(*t) != before) {
                entries.push((w.id.clone(), ttl));
            }
        }
        entries.sort();
        entries
    }

    /// The items the application has, by `id`: what it last wrote of each item it did not
    /// delete, except `swept` (items whose ttl passed).
    pub fn expected(&self, swept: impl Fn(&str, i64) -> bool) -> BTreeMap<String, Key> {
        let items = self.items.iter();
        let there = items.filter_map(|(id, item)| Some((id.clone(), item.clone()?)));
        there
            .filter(|(id, item)| !ttl_of(item).is_some_and(|ttl| swept(id, ttl)))
            .collect()
    }
}
