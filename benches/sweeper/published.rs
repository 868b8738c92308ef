//! The published minute-window design's sweep, re-implemented here as a benchmark-only routine:
//! the baseline of sections 1 (expiry lag) and 2 (throughput) of docs/BENCHMARKS.md.

use std::collections::HashMap;
use std::sync::Mutex;

use aws_sdk_dynamodb::types::{DeleteRequest, WriteRequest};
use aws_sdk_dynamodb::Client;
use ttl_sweeper::expiry::window::Window;

use crate::support::*;

/// The published design's sweep at `event_time`: the window containing it, one page, ttl < t,
/// sequential chunks of 25, unprocessed keys retried immediately up to 3 times.
pub async fn published_sweep(
    client: &Client,
    table: &str,
    event_time: i64,
    width: i64,
    deleted: &Mutex<HashMap<String, f64>>,
) {
    let end = event_time.div_euclid(width) * width
        + if event_time.rem_euclid(width) == 0 {
            0
        } else {
            width
        };
    let window = Window {
        start: end - width,
        end,
    }
    .key();
    let out = client
        .query()
        .table_name(table)
        .index_name("expirationWindowIndex")
        .key_condition_expression("#w = :w AND #t < :t")
        .expression_attribute_names("#w", "expirationWindow")
        .expression_attribute_names("#t", "ttl")
        .expression_attribute_values(":w", AV::S(window))
        .expression_attribute_values(":t", AV::N(event_time.to_string()))
        .send()
        .await
        .expect("query");
    let mut ids: Vec<String> = out
        .items()
        .iter()
        .filter_map(|i| i.get("id")?.as_s().ok().cloned())
        .collect();
    for _ in 0..3 {
        let mut unprocessed = Vec::new();
        for chunk in ids.chunks(25) {
            let requests: Vec<WriteRequest> = chunk
                .iter()
                .map(|id| {
                    WriteRequest::builder()
                        .delete_request(
                            DeleteRequest::builder()
                                .set_key(Some(id_key(id)))
                                .build()
                                .unwrap(),
                        )
                        .build()
                })
                .collect();
            match client
                .batch_write_item()
                .request_items(table, requests)
                .send()
                .await
            {
                Ok(out) => {
                    let left: Vec<String> = out
                        .unprocessed_items
                        .and_then(|mut m| m.remove(table))
                        .unwrap_or_default()
                        .into_iter()
                        .filter_map(|w| w.delete_request?.key.get("id")?.as_s().ok().cloned())
                        .collect();
                    let at = wall_clock();
                    let mut map = deleted.lock().unwrap();
                    for id in chunk.iter().filter(|id| !left.contains(id)) {
                        map.insert(id.clone(), at);
                    }
                    unprocessed.extend(left);
                }
                Err(_) => unprocessed.extend(chunk.iter().cloned()),
            }
        }
        if unprocessed.is_empty() {
            break;
        }
        ids = unprocessed;
    }
}
