//! Section 1 of docs/BENCHMARKS.md, "Expiry lag, end to end": the published design, ours on the
//! minute schedule and ours in tick mode, each sweeping its own table side by side; the lag table
//! and its CDF plot (docs/bench-lag.svg). The repeated runs that follow in section 1 ("Tick mode,
//! repeated") are in `sub_second`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use ttl_sweeper::engine::Stop;
use ttl_sweeper::expiry::Timestamp;
use ttl_sweeper::store::Key;

use crate::published::published_sweep;
use crate::support::*;
use crate::{pct, Scale};

pub struct LagResult {
    name: &'static str,
    lags: Vec<f64>,
    not_deleted: usize,
    boundary_missed: usize,
}

async fn until_boundary(period: i64) -> i64 {
    let now = wall_clock();
    let next = ((now / period as f64).floor() as i64 + 1) * period;
    tokio::time::sleep(Duration::from_secs_f64(next as f64 - now + 0.02)).await;
    next
}

pub async fn expiry_lag(s: &Scale) -> Vec<LagResult> {
    let client = client().await;
    let width = s.schedule as u32;
    let t0 = now();
    let ttls: Vec<(String, i64)> = (0..s.lag_items)
        .map(|i| (format!("lag-{i:05}"), t0 + 5 + i % (s.lag_spread + 1)))
        .collect();
    let make = || {
        ttls.iter()
            .map(|(id, ttl)| {
                let mut item = session(id, *ttl);
                item.insert(
                    "expirationWindow".into(),
                    AV::S(ttl_sweeper::expiry::window::window_key(*ttl as f64, width).unwrap()),
                );
                item
            })
            .collect::<Vec<Key>>()
    };
    let tables: Vec<String> = ["lag_published", "lag_minute", "lag_tick"]
        .iter()
        .map(|p| table_name(p))
        .collect();
    for t in &tables {
        create_table(&client, &TableSpec::simple(t)).await;
        put_many(&client, t, make()).await;
    }
    let end_at = t0 + 5 + s.lag_spread + 2 * s.schedule + 3;
    eprintln!(
        "expiry lag: {} items over {} s in each of 3 tables; running until {} s from now",
        s.lag_items,
        s.lag_spread,
        end_at - now()
    );
    let cfg = |t: &str| {
        config(
            t,
            &[
                ("WINDOW_SECONDS", &width.to_string()),
                ("SCHEDULE_SECONDS", &s.schedule.to_string()),
            ],
        )
    };

    let published = {
        let (client, table) = (client.clone(), tables[0].clone());
        let period = s.schedule;
        async move {
            let deleted = Mutex::new(HashMap::new());
            while now() < end_at {
                let t = until_boundary(period).await;
                published_sweep(&client, &table, t, period, &deleted).await;
            }
            deleted.into_inner().unwrap()
        }
    };
    let minute = {
        let c = cfg(&tables[1]);
        let sweeper = sweeper_over(&c, Instrumented::new).await;
        let period = s.schedule;
        async move {
            while now() < end_at {
                let t = until_boundary(period).await;
                sweeper.sweep(Timestamp::from_secs(t), &Stop::never()).await;
            }
            sweeper.store().deleted_at.lock().unwrap().clone()
        }
    };
    let tick = {
        let c = cfg(&tables[2]);
        let sweeper = sweeper_over(&c, Instrumented::new).await;
        async move {
            tick_until(&sweeper, end_at, |_| {}).await;
            sweeper.store().deleted_at.lock().unwrap().clone()
        }
    };
    let (published, minute, tick) = tokio::join!(published, minute, tick);
    let results = [
        ("published design, minute", published),
        ("ours, minute", minute),
        ("ours, tick 1 s", tick),
    ];
    results
        .into_iter()
        .map(|(name, deleted)| {
            let mut lags: Vec<f64> = ttls
                .iter()
                .filter_map(|(id, ttl)| deleted.get(id).map(|at| at - *ttl as f64))
                .collect();
            lags.sort_by(f64::total_cmp);
            let missed: Vec<&(String, i64)> = ttls
                .iter()
                .filter(|(id, _)| !deleted.contains_key(id))
                .collect();
            LagResult {
                name,
                not_deleted: missed.len(),
                boundary_missed: missed
                    .iter()
                    .filter(|(_, ttl)| ttl % s.schedule == 0)
                    .count(),
                lags,
            }
        })
        .collect()
}

/// Section 1's heading, its lag table and the paragraph under it.
pub fn render(d: &mut String, s: &Scale, lag: &[LagResult]) {
    let _ = writeln!(d, "## 1. Expiry lag, end to end\n");
    let _ = writeln!(d, "{} items with ttls spread over {} s in whole seconds (some on window boundaries), written to three tables on one server, each swept by one strategy. Lag: from the ttl to DynamoDB's acknowledgement of the delete. Windows are {} s wide; the minute strategies run at each boundary.\n", s.lag_items, s.lag_spread, s.schedule);
    crate::table_head(d, "| strategy | deleted | never deleted (of which on a boundary) | p50 lag | p99 lag | max lag |");
    for r in lag {
        let _ = writeln!(
            d,
            "| {} | {} | {} ({}) | {:.2} s | {:.2} s | {:.2} s |",
            r.name,
            r.lags.len(),
            r.not_deleted,
            r.boundary_missed,
            pct(&r.lags, 0.5),
            pct(&r.lags, 0.99),
            r.lags.last().copied().unwrap_or(f64::NAN)
        );
    }
    let _ = writeln!(d, "\n![expiry lag CDF](bench-lag.svg)\n");
    let _ = writeln!(d, "The published design misses items whose ttl is exactly on a window boundary (it asks for `ttl < t`); they wait for native TTL, \"within a few days\", not measured here.\n");
}

pub fn plot(lag: &[LagResult], s: &Scale) {
    use plotters::prelude::*;
    let path = if s.quick {
        "target/bench-lag-quick.svg"
    } else {
        "docs/bench-lag.svg"
    };
    let max_x = lag
        .iter()
        .filter_map(|r| r.lags.last().copied())
        .fold(1.0, f64::max)
        .ceil();
    let root = SVGBackend::new(path, (800, 450)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Expiry lag: share of items deleted within x seconds of their ttl",
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..max_x, 0.0..1.0)
        .unwrap();
    chart
        .configure_mesh()
        .x_desc("seconds after ttl")
        .y_desc("share deleted")
        .draw()
        .unwrap();
    let colors = [RED, BLUE, GREEN];
    for (r, color) in lag.iter().zip(colors) {
        let n = (r.lags.len() + r.not_deleted) as f64;
        let points: Vec<(f64, f64)> = r
            .lags
            .iter()
            .enumerate()
            .map(|(i, l)| (*l, (i + 1) as f64 / n))
            .collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .unwrap()
            .label(r.name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .unwrap();
    root.present().unwrap();
}
