//! The documentation against the code and against itself:
//!
//! - `docs/configuration.md`'s settings table lists exactly the settings of
//!   `ttl_sweeper::config::SETTINGS`, in the same order and with the same defaults, and the
//!   README's short table names only settings, with their defaults;
//! - every relative link in `README.md` and `docs/*.md` points to a file that exists, and every
//!   `#anchor` to a heading of that file;
//! - every `make <target>` they show is a target of the Makefile;
//! - every `ttl_sweeper::...` path they name is a public item of the library;
//! - the cost blocks of docs/BENCHMARKS.md, the one place the docs give the cost model, are what
//!   the model (`tests/support/cost.rs`) renders from the code's settings and the measured
//!   figures, and the README's cost figures are theirs;
//! - the README's tagline, and the construct's, quote the lag measured in docs/BENCHMARKS.md;
//! - the README's first screen takes a newcomer from an existing table to a deployed sweeper.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use ttl_sweeper::config::SETTINGS;

use crate::support::{self, cost};

use support::{AssertFields, LOCAL_AWS_ENV};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The file at `rel` from the repository's root.
fn file(rel: &str) -> String {
    read(&Path::new(ROOT).join(rel))
}

/// The file at `rel`, its words joined by single spaces: a phrase of its prose may wrap.
fn words(rel: &str) -> String {
    file(rel).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Asserts that `text`, the file `name` (or a part of it), holds `phrase`; `why` follows the
/// failure's message (where the phrase comes from).
#[track_caller]
fn assert_says(text: &str, name: &str, phrase: &str, why: &str) {
    assert!(text.contains(phrase), "{name} should say {phrase:?}{why}");
}

/// The first line of `table` that starts with `prefix`.
fn row<'a>(table: &'a str, prefix: &str) -> &'a str {
    let row = table.lines().find(|l| l.starts_with(prefix));
    row.unwrap_or_else(|| panic!("no row `{prefix}`"))
}

/// Cell `n` of a table's `row`, trimmed (cell 0 is the text before the first `|`).
fn cell(row: &str, n: usize) -> &str {
    row.split('|').nth(n).unwrap_or_default().trim()
}

/// The text of `text` between the first `open` and the next `close`.
fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    text.split(open).nth(1)?.split(close).next()
}

/// Asserts that there are no `problems`, else lists them under `what`.
#[track_caller]
fn assert_none(problems: &[String], what: &str) {
    assert!(problems.is_empty(), "{what}:\n  {}", problems.join("\n  "));
}

/// `README.md` and every `docs/*.md`, sorted.
fn documents() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("docs"))
        .expect("read docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    docs.insert(0, Path::new(ROOT).join("README.md"));
    docs
}

/// One row of a settings table: the variable and its default as the page shows it.
#[derive(Debug, PartialEq)]
struct Row {
    var: String,
    /// `None` for a required setting (`— (required)`); `Some("")` for one that is off unless
    /// given (`— (off)`); otherwise the backticked value.
    default: Option<String>,
    /// The third cell: what the setting accepts.
    accepts: String,
}

/// The text of `markdown` under the heading `## <title>`, up to the next `## ` heading.
fn section<'a>(markdown: &'a str, title: &str) -> Option<&'a str> {
    markdown
        .split("\n## ")
        .find(|s| s.starts_with(&format!("{title}\n")))
}

/// The rows of the tables in `text` whose first cell is one backticked variable (the row about
/// the AWS SDK's own variables is not a setting).
fn settings_rows(text: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    for line in text.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let Some(var) = single_code_span(cells[0]) else {
            continue;
        };
        let cell = cells.get(1).copied().unwrap_or_default();
        let default = if cell == "— (required)" {
            None
        } else if cell.starts_with('—') {
            Some(String::new())
        } else {
            Some(
                single_code_span(cell)
                    .unwrap_or_else(|| panic!("{var}: default {cell:?} is not one `value`")),
            )
        };
        let accepts = cells.get(2).copied().unwrap_or_default().to_owned();
        rows.push(Row {
            var,
            default,
            accepts,
        });
    }
    rows
}

/// The text of a cell that is exactly one code span: `` `TABLE_NAME` `` → `TABLE_NAME`.
fn single_code_span(cell: &str) -> Option<String> {
    let inner = cell.strip_prefix('`')?.strip_suffix('`')?;
    (!inner.contains('`')).then(|| inner.to_owned())
}

/// What is wrong with `rows` as a table of `SETTINGS`: unknown variables and wrong defaults;
/// with `complete`, also missing settings, a different order, and an `accepts` cell that leaves
/// out a bound or word of the setting's rule.
fn settings_problems(rows: &[Row], complete: bool) -> Vec<String> {
    let mut problems = Vec::new();
    for row in rows {
        match SETTINGS.iter().find(|s| s.var == row.var) {
            None => problems.push(format!("{} is not a setting", row.var)),
            Some(s) if row.default.as_deref() != s.default => problems.push(format!(
                "{}: the table says default {:?}, SETTINGS {:?}",
                s.var, row.default, s.default
            )),
            // A bound or word of the rule the row leaves out (or states otherwise).
            Some(s) if complete => {
                let cell = row.accepts.replace(['`', ','], " ");
                let cell = cell.split_whitespace().collect::<Vec<_>>().join(" ");
                let says = |word: &str| cell.split_whitespace().any(|w| w == word);
                let ranged = |min: &str, max: &str| {
                    cell.contains(&format!("{min}–{max}"))
                        || cell.contains(&format!("{min} to {max}"))
                };
                let missing = match s.rule.words().as_slice() {
                    [min, max] if s.rule.is_ranged() => (!ranged(min, max))
                        .then(|| format!("{min}–{max}"))
                        .into_iter()
                        .collect(),
                    words => words
                        .iter()
                        .filter(|w| !says(w))
                        .cloned()
                        .collect::<Vec<_>>(),
                };
                if !missing.is_empty() {
                    problems.push(format!(
                        "{}: the table's `accepts` does not say {missing:?} (the rule: {})",
                        s.var,
                        s.rule.describe()
                    ));
                }
            }
            Some(_) => {}
        }
    }
    if complete {
        for s in &SETTINGS {
            if !rows.iter().any(|r| r.var == s.var) {
                problems.push(format!("{} has no row", s.var));
            }
        }
        let order: Vec<&str> = rows.iter().map(|r| r.var.as_str()).collect();
        let expected: Vec<&str> = SETTINGS.iter().map(|s| s.var).collect();
        if problems.is_empty() && order != expected {
            problems.push(format!(
                "rows in the order {order:?}, SETTINGS in {expected:?}"
            ));
        }
    }
    problems
}

#[test]
fn the_configuration_page_lists_every_setting_with_its_default() {
    let page = file("docs/configuration.md");
    // The full table is the page's first: the text before its first `## ` section.
    let top = page.split("\n## ").next().unwrap_or_default();
    let problems = settings_problems(&settings_rows(top), true);
    let what = "docs/configuration.md's table must list the settings of SETTINGS \
                (src/config/settings.rs), in order, with their defaults";
    assert_none(&problems, what);
}

/// `infra/settings.json`, which the construct reads and the SAM template, the Terraform module and
/// this page's table are checked against, is what `ttl-sweeper settings` prints today
/// (`UPDATE_DOCS=1` or `make settings-spec` writes it).
#[test]
fn the_settings_spec_file_is_current() {
    let path = Path::new(ROOT).join("infra/settings.json");
    let current = ttl_sweeper::config::spec_text();
    if std::env::var("UPDATE_DOCS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &current).unwrap();
    }
    assert!(
        read(&path) == current,
        "infra/settings.json is stale: the settings in src/config/settings.rs changed since it \
         was written; run `make settings-spec` and commit it"
    );
}

#[test]
fn the_readme_short_table_names_settings_with_their_defaults() {
    let readme = file("README.md");
    let configure = section(&readme, "Configure it").expect("README.md has `## Configure it`");
    let rows = settings_rows(configure);
    assert!(
        !rows.is_empty(),
        "README.md's `## Configure it` has no settings table"
    );
    let problems = settings_problems(&rows, false);
    assert_none(
        &problems,
        "README.md's settings table disagrees with SETTINGS",
    );
}

/// The lines of `markdown` outside fenced code blocks, and those inside, apart.
fn prose_and_code(markdown: &str) -> (Vec<&str>, Vec<&str>) {
    let (mut prose, mut code) = (Vec::new(), Vec::new());
    let mut fenced = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if fenced {
            code.push(line);
        } else {
            prose.push(line);
        }
    }
    (prose, code)
}

/// The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of every heading of `markdown` (a repeated heading gets `-1`, `-2`, ...).
fn anchors(markdown: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for line in prose_and_code(markdown).0 {
        let Some(title) = line.strip_prefix('#') else {
            continue;
        };
        let base = slug(title.trim_start_matches('#'));
        let mut anchor = base.clone();
        let mut n = 0;
        while !seen.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
    }
    seen
}

/// The targets of the inline links `[text](target)` in the prose of `markdown`, code spans
/// left out.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose_and_code(markdown).0 {
        // Drop code spans: the odd-numbered pieces between backticks.
        let text: String = line
            .split('`')
            .enumerate()
            .map(|(i, piece)| if i % 2 == 0 { piece } else { "code" })
            .collect();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].trim().to_owned());
            rest = &after[end..];
        }
    }
    targets
}

/// What is wrong with the relative links of the document at `path`.
fn link_problems(path: &Path, markdown: &str) -> Vec<String> {
    let dir = path.parent().expect("a document has a folder");
    let mut problems = Vec::new();
    for target in link_targets(markdown) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((file, anchor)) => (file, Some(anchor)),
            None => (target.as_str(), None),
        };
        let linked = if file.is_empty() {
            path.to_path_buf()
        } else {
            dir.join(file)
        };
        if !linked.exists() {
            problems.push(format!("{}: ({target}): no such file", path.display()));
            continue;
        }
        if let Some(anchor) = anchor {
            let is_markdown = linked.extension().is_some_and(|x| x == "md");
            if is_markdown && !anchors(&read(&linked)).contains(anchor) {
                problems.push(format!("{}: ({target}): no such heading", path.display()));
            }
        }
    }
    problems
}

#[test]
fn every_relative_link_points_to_an_existing_file_and_heading() {
    let mut problems = Vec::new();
    let mut links = 0;
    for path in documents() {
        let markdown = read(&path);
        links += link_targets(&markdown).len();
        problems.extend(link_problems(&path, &markdown));
    }
    assert!(
        links > 20,
        "only {links} links found: is the link reader broken?"
    );
    assert_none(&problems, "broken links");
}

/// The Makefile's targets (`name:` at the start of a line).
fn make_targets() -> HashSet<String> {
    file("Makefile")
        .lines()
        .filter_map(|l| l.split_once(':').map(|(name, _)| name))
        .filter(|name| {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        })
        .map(str::to_owned)
        .collect()
}

/// The targets of the `make <target>` commands `markdown` shows: in code blocks (a line that
/// starts with `make `) and in code spans (`` `make demo` ``).
fn make_commands(markdown: &str) -> Vec<String> {
    let (prose, code) = prose_and_code(markdown);
    let spans = prose
        .iter()
        .flat_map(|l| l.split('`').skip(1).step_by(2))
        .filter(|s| s.starts_with("make "));
    let lines = code
        .iter()
        .map(|l| l.trim_start())
        .filter(|l| l.starts_with("make "));
    spans
        .chain(lines)
        .filter_map(|command| command.split_whitespace().nth(1))
        .filter(|t| !t.contains('='))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_make_command_shown_is_a_makefile_target() {
    let targets = make_targets();
    let known = targets.contains("test") && targets.contains("demo");
    assert!(known, "{targets:?}");
    let mut problems = Vec::new();
    let mut commands = 0;
    for path in documents() {
        for target in make_commands(&read(&path)) {
            commands += 1;
            if !targets.contains(&target) {
                problems.push(format!("{}: make {target}", path.display()));
            }
        }
    }
    assert!(commands >= 5, "only {commands} make commands found");
    assert_none(&problems, "not Makefile targets");
}

/// The `ttl_sweeper::module::item` paths in `markdown` (prose and code), leaving out the
/// symbols of profiler output (`perf report` lines: `[.]` user, `[k]` kernel), which name
/// private functions and closures.
fn library_paths(markdown: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let text: String = markdown
        .lines()
        .filter(|l| !(l.contains(" [.] ") || l.contains(" [k] ")))
        .collect::<Vec<_>>()
        .join("\n");
    let mut rest = text.as_str();
    while let Some(at) = rest.find("ttl_sweeper::") {
        let path: String = rest[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        rest = &rest[at + path.len()..];
        let path = path.trim_end_matches(':');
        // `ttl_sweeper::...` in prose names no item.
        if path.contains("::") {
            paths.push(path.to_owned());
        }
    }
    paths
}

/// Whether `path` (`ttl_sweeper::expiry::window::window_key`) names a public item: its module
/// is a file under `src/`, and that file declares the item `pub` or re-exports it.
fn library_path_exists(path: &str) -> bool {
    let parts: Vec<&str> = path.split("::").skip(1).collect();
    let Some((item, modules)) = parts.split_last() else {
        return false;
    };
    let src = Path::new(ROOT).join("src");
    let file = if modules.is_empty() {
        src.join("lib.rs")
    } else {
        src.join(format!("{}.rs", modules.join("/")))
    };
    let Ok(text) = std::fs::read_to_string(file) else {
        return false;
    };
    let kinds = [
        "fn", "async fn", "struct", "enum", "trait", "const", "mod", "type",
    ];
    let declared = kinds.iter().any(|kind| {
        let name = format!("pub {kind} {item}");
        ["(", "<", " ", ";", ":"]
            .iter()
            .any(|after| text.contains(&format!("{name}{after}")))
    });
    let reexported = text.lines().any(|l| {
        l.trim_start().starts_with("pub use")
            && l.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|word| word == *item)
    });
    declared || reexported
}

#[test]
fn every_library_path_the_docs_name_exists() {
    let mut problems = Vec::new();
    let mut seen = 0;
    for path in documents() {
        for name in library_paths(&read(&path)) {
            seen += 1;
            if !library_path_exists(&name) {
                problems.push(format!("{}: {name}", path.display()));
            }
        }
    }
    assert!(seen >= 3, "only {seen} library paths found");
    assert_none(&problems, "no such public item");
    assert!(library_path_exists(
        "ttl_sweeper::expiry::window::window_key"
    ));
    assert!(library_path_exists("ttl_sweeper::expiry::is_expired"));
    assert!(!library_path_exists("ttl_sweeper::window::window_key"));
    assert!(!library_path_exists("ttl_sweeper::expiry::no_such_fn"));
}

// ---------------------------------------------------------------- generated cost blocks

/// The text between `<!-- name ... -->` and `<!-- /name -->` in `markdown`, without the markers.
/// docs/BENCHMARKS.md's generated cost-model block.
fn cost_model() -> String {
    let bench = file("docs/BENCHMARKS.md");
    let (_, _, model) = generated(&bench, "cost-model").expect("a cost-model block");
    model.to_owned()
}

fn generated<'a>(markdown: &'a str, name: &str) -> Option<(usize, usize, &'a str)> {
    let open = markdown.find(&format!("<!-- {name}"))?;
    let start = open + markdown[open..].find("-->")? + 3;
    let end = start + markdown[start..].find(&format!("<!-- /{name} -->"))?;
    Some((start, end, &markdown[start..end]))
}

/// The wall time per delete of the sweep that docs/BENCHMARKS.md section 2 reports
/// (`(640446 deletes/s wall`): the minute-mode input of the cost model.
fn measured_wall_per_delete(bench: &str) -> f64 {
    let at = bench
        .find(" deletes/s wall")
        .expect("BENCHMARKS.md section 2 reports deletes/s wall");
    let start = bench[..at]
        .trim_end_matches(|c: char| c.is_ascii_digit())
        .len();
    1.0 / bench[start..at].parse::<f64>().expect("a rate")
}

/// The units per expired item that docs/BENCHMARKS.md section 4 counted (its `units-counted`
/// block, written by `BENCH_ONLY=units make bench` or `make bench`): the cost model's input.
fn counted() -> cost::Counted {
    let bench = file("docs/BENCHMARKS.md");
    cost::Counted::parse(&bench).expect("docs/BENCHMARKS.md section 4 has a units-counted block")
}

/// Every generated cost block: (file, marker, what the model renders).
fn cost_blocks() -> Vec<(&'static str, &'static str, String)> {
    let bench = file("docs/BENCHMARKS.md");
    let inputs = cost::Inputs::from_code(measured_wall_per_delete(&bench));
    let model = format!("\n{}", cost::benchmarks_section(&inputs, &counted()));
    let memory = cost::memory_sentence(&inputs).trim_end().to_owned();
    let bm = "docs/BENCHMARKS.md";
    vec![(bm, "cost-model", model), (bm, "cost-memory", memory)]
}

/// docs/operations.md's metrics table, from the one table of the report's metrics
/// ([`SWEEP_METRICS`](ttl_sweeper::telemetry::counters::SWEEP_METRICS)) and the rows of the
/// metrics that are not the report's.
fn metrics_table() -> String {
    use ttl_sweeper::telemetry::counters::{Kind, SWEEP_METRICS};
    let mut rows = vec![
        "| metric (EMF) | Prometheus (`run --metrics-addr`) | unit | meaning, alarm |".to_owned(),
        "|---|---|---|---|".to_owned(),
    ];
    for m in SWEEP_METRICS {
        let gauge = if m.kind == Kind::Gauge { "gauge " } else { "" };
        let rare = match m.only_when_not_zero {
            true => " (in an EMF record only where not 0)",
            false => "",
        };
        rows.push(format!(
            "| `{}` | {gauge}`{}` | {} | {}{rare} |",
            m.emf,
            m.prometheus,
            m.unit(),
            m.help
        ));
    }
    rows.extend([
        "| `ColdStart` (Lambda only) | — | Count | 1 per new execution environment, in a record of its own with the dimensions `function_name` and `service` |",
        "| — | `ttl_sweeper_sweeps_total`, `ttl_sweeper_sweeps_failed_total`, gauge `ttl_sweeper_seconds_since_last_success` | Count, Seconds | sweeps run, those that failed; alert on `rate(ttl_sweeper_sweeps_failed_total[5m]) > 0` |",
        "| — | gauge `ttl_sweeper_leader` | — | `LEADER_LEASE`: 1 when the last sweep held the lease. Alarm when `sum(ttl_sweeper_leader)` over the Regions `!= 1` for longer than the lease |",
    ].map(str::to_owned));
    format!("\n{}\n", rows.join("\n"))
}

/// The generated block `name` of the file `rel` against `rendered`: rewritten when
/// `UPDATE_DOCS=1`; otherwise, if they differ, both for the failure's message.
fn stale_block(rel: &str, name: &str, rendered: &str) -> Option<String> {
    let path = Path::new(ROOT).join(rel);
    let text = read(&path);
    let (start, end, block) =
        generated(&text, name).unwrap_or_else(|| panic!("{rel} has no <!-- {name} --> block"));
    if block == rendered {
        return None;
    }
    if std::env::var("UPDATE_DOCS").is_ok_and(|v| v == "1") {
        let updated = format!("{}{rendered}{}", &text[..start], &text[end..]);
        std::fs::write(&path, updated).unwrap();
        return None;
    }
    Some(format!(
        "{rel} <!-- {name} -->:\n--- in the doc\n{block}\n--- from the code\n{rendered}"
    ))
}

/// docs/operations.md's metrics table is [`metrics_table`]; `UPDATE_DOCS=1` writes it.
#[test]
fn the_metrics_table_is_the_report_s_metrics() {
    let stale = stale_block("docs/operations.md", "metrics", &metrics_table());
    assert!(
        stale.is_none(),
        "docs/operations.md's metrics table is not SWEEP_METRICS's (UPDATE_DOCS=1 cargo test \
         --test suite readme::the_metrics_table rewrites it):\n{}",
        stale.unwrap_or_default()
    );
}

/// The cost figures come from the model; `UPDATE_DOCS=1` writes them into the docs.
#[test]
fn cost_blocks_are_what_the_cost_model_renders() {
    let blocks = cost_blocks().into_iter();
    let stale: Vec<String> = blocks
        .filter_map(|(file, name, rendered)| stale_block(file, name, &rendered))
        .collect();
    // The README's first screen rounds the same total.
    let bench = file("docs/BENCHMARKS.md");
    // The bold total of its 1M row.
    let total = (row(&bench, "| 1M | ").split('|'))
        .find(|c| c.trim().starts_with("**$"))
        .map(|cell| cell.trim().trim_matches(['*', '$']))
        .expect("docs/BENCHMARKS.md has a 1M row with a bold total");
    let rounded = format!("about ${:.0} a month", total.parse::<f64>().unwrap());
    let why = format!(" (docs/BENCHMARKS.md section 4: ${total})");
    assert_says(&file("README.md"), "README.md", &rounded, &why);
    assert!(
        stale.is_empty(),
        "cost blocks differ from tests/support/cost.rs (UPDATE_DOCS=1 cargo test --test suite readme::cost rewrites them):\n{}",
        stale.join("\n")
    );
}

#[test]
fn the_cost_model_counts_the_overlap_and_every_default_extra() {
    let i = cost::Inputs::from_code(1.56e-6);
    // The overlap comes from the handler's constant: 60 s + 10 s.
    assert_eq!(i.tick_run_s(), 70.0);
    // 14 sweep metrics and ColdStart.
    assert_eq!(i.metrics, 15);
    let section = cost::benchmarks_section(&i, &counted());
    let row = row(&section, "| 1M |");
    // Lambda at 128 MB, 70 s a minute: 43,200 × 0.125 × 70 GB-s, plus requests.
    assert_eq!(cell(row, 5), "$5.05", "{row}");
    // Metrics $4.50 + key $1 + dashboard $3 + five alarms $0.50.
    assert_eq!(cell(row, 8), "$9.00", "{row}");
    let total: f64 = cell(row, 9).trim_matches(['*', '$']).parse().unwrap();
    assert!((15.0..18.0).contains(&total), "{row}");
}

#[test]
fn the_window_paths_bill_a_record_and_an_entry_per_write_whatever_the_item_s_size() {
    let i = cost::Inputs::from_code(1.56e-6);
    let c = counted();
    let small = i.window_paths(1e6, 1.0, 1.0, &c);
    let large = i.window_paths(1e6, 4.0, 1.0, &c);
    let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
    // A record per write of an item, a key listed for each (no write-back, REMOVE records
    // filtered out): the counted keys listed per expired item.
    assert!(near(small.records, 1e6 * c.keys_listed), "{small:?}");
    assert!((small.invocations * small.per_invocation - small.records).abs() < 1e-3);
    // 1M a month: about one record per invocation.
    assert!((1.0..1.2).contains(&small.per_invocation), "{small:?}");
    // A pack per key listed, at the counted size of a one-key pack, and the removals as counted,
    // whatever the item's size.
    let wru = cost::PRICE_WRU;
    assert!(
        near(small.entry_puts, 1e6 * c.keys_listed * c.one_key_pack * wru),
        "{small:?}"
    );
    assert!(
        c.index_write() >= c.entry_put,
        "a pack per key bills no less than the counted run: {c:?}"
    );
    assert!(near(small.entry_removals, 1e6 * c.entry_removal * wru));
    assert!(near(large.entry_puts, small.entry_puts));
    assert!(near(large.entry_removals, small.entry_removals));
    // The GSI mode: its write and its removal, two write units per item, whatever the size.
    assert!(near(small.gsi, 1.25), "{small:?}");
    assert!(near(large.gsi, small.gsi));
    // The table delete is billed at the item's size; the confirming read is one unit up to 4 KB.
    assert!(near(large.table_delete, 4.0 * small.table_delete));
    let read = 1e6 * c.confirm_read * cost::PRICE_RRU;
    assert!(near(small.confirm_read, read) && near(large.confirm_read, read));
    // The totals are their parts.
    let index = small.entry_puts + small.entry_removals + small.index_reads;
    assert!(near(small.on_lambda, index + small.lambda + small.logs));
    let daemon_index = small.daemon_puts + small.entry_removals + small.index_reads;
    let daemon = daemon_index + small.stream_reads + small.daemon_host;
    assert!(near(small.daemon, daemon), "{small:?}");
    // The daemon's packs list at least a key each, and never bill more than the Lambda's.
    assert!(small.held_keys_per_pack >= 1.0 && small.daemon_puts <= small.entry_puts);
    let ours = small.table_delete + small.confirm_read + small.on_lambda;
    assert!(near(small.ours(), ours));
    assert!(near(
        small.ours_gsi(),
        small.table_delete + small.confirm_read + small.gsi
    ));
    // The strongly consistent queries cost the GSI's queries again, plus the entries' bytes.
    assert!(small.index_reads > i.queries_tick(), "{small:?}");
    // The daemon's reads: 4 calls a second on one shard for 30 days, $0.02 per 100,000.
    assert_eq!(small.shards, 1.0);
    assert!((small.stream_reads - 4.0 * 2_592_000.0 * 0.02 / 1e5).abs() < 1e-6);
    // Three Regions: every Region's indexer puts the entry, only the sweeping one removes it.
    let three = i.window_paths(1e6, 1.0, 3.0, &c);
    assert!(near(three.entry_puts, 3.0 * small.entry_puts), "{three:?}");
    assert!(
        near(three.entry_removals, small.entry_removals),
        "{three:?}"
    );
    assert!(near(three.records, 3.0 * small.records));
    assert!(near(three.lambda, 3.0 * small.lambda));
    assert!(near(three.index_reads, small.index_reads));
    // ... every replica's GSI writes and removes, and the delete reaches every replica.
    assert!(near(three.gsi, 3.0 * small.gsi));
    let replicated = 3.0 * cost::ASSUMED_PRICE_RWRU * 1e6 * c.table_delete;
    assert!(near(three.table_delete, replicated));
    assert!(near(three.confirm_read, small.confirm_read));
    // 1B a month: batches of 1 KB items fill (one shard), and none goes beyond the mapping's
    // batch size, not even with a long batching window.
    let heavy = i.window_paths(1e9, 1.0, 1.0, &c);
    let filled = heavy.per_invocation > 90.0 && heavy.per_invocation <= cost::STREAM_BATCH_SIZE;
    assert!(filled, "{heavy:?}");
    let large = i.window_paths(1e9, 4.0, 1.0, &c);
    assert!(large.shards > 1.0 && large.per_invocation <= cost::STREAM_BATCH_SIZE);
    let windowed = i.window_paths_batched(1e9, 1.0, 1.0, 60.0, &c);
    assert_eq!(windowed.per_invocation, cost::STREAM_BATCH_SIZE);
    // A batching window means fewer invocations at light traffic.
    let light_w = i.window_paths_batched(1e6, 1.0, 1.0, 1.0, &c);
    assert!(light_w.invocations < small.invocations, "{light_w:?}");
    // In full batches the index table costs about its counted entry puts and removals over the
    // GSI's two units (by the rule), and a few cents per million items more.
    let extra_per_million = heavy.per_million(heavy.on_lambda - heavy.gsi);
    let entries = (c.index_write() + c.entry_removal - 2.0) * wru * 1e6;
    assert!(
        (0.0..0.05).contains(&(extra_per_million - entries)),
        "{heavy:?}"
    );
}

/// The model's per-item units are the counted run's (docs/BENCHMARKS.md section 4, the
/// `units-counted` block): every per-item part of every row is its volume times the counted units
/// times the price, and the rows beyond the counted run say they are extrapolated from it.
#[test]
fn the_cost_model_takes_its_units_from_the_counted_run() {
    let i = cost::Inputs::from_code(1.56e-6);
    let c = counted();
    assert_eq!(cost::Counted::parse(&c.block()), Some(c));
    assert!(c.expired > 0 && c.expired <= c.written, "{c:?}");
    let near = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    let (wru, rru) = (cost::PRICE_WRU, cost::PRICE_RRU);
    for r in cost::window_rows(&i, &c) {
        let n = r.items;
        let write = if r.regions > 1.0 {
            r.regions * cost::ASSUMED_PRICE_RWRU
        } else {
            wru
        };
        let kb = r.kb.ceil();
        assert!(
            near(r.table_delete, n * c.table_delete * kb * write),
            "{r:?}"
        );
        let reads = n * c.confirm_read * (r.kb / 4.0).ceil() * rru;
        assert!(near(r.confirm_read, reads), "{r:?}");
        assert!(
            near(
                r.entry_puts,
                r.regions * n * c.keys_listed * c.one_key_pack * wru
            ),
            "{r:?}"
        );
        assert!(near(r.entry_removals, n * c.entry_removal * wru), "{r:?}");
        let entries_read = n * c.keys_listed * c.one_key_bytes / cost::READ_UNIT_BYTES * rru;
        assert!(
            near(r.index_reads, i.queries_tick() + entries_read),
            "{r:?}"
        );
    }
    let section = cost::benchmarks_section(&i, &c);
    let from = format!(
        "extrapolated from the counted run ({} written, {} expired)",
        cost::thousands(c.written as f64),
        cost::thousands(c.expired as f64)
    );
    assert!(section.contains(&from), "section 4 should say {from:?}");
    for volume in ["100M", "1B"] {
        let marked = format!("| {volume} (extrapolated) |");
        assert!(section.contains(&marked), "{marked:?}");
    }
    // The 1M cost table row's deletes: the counted table delete and confirming read, and the
    // GSI entry's removal.
    let deletes = 1e6 * ((c.table_delete + 1.0) * wru + c.confirm_read * rru);
    let cell = cell(row(&section, "| 1M |"), 2);
    assert_eq!(cell, format!("${deletes:.2}"));
}

/// The cost model's keys a pack for the daemon (`held_keys_per_pack`, a formula) is the steady
/// state of the follower's rule for writing what it holds, simulated over hours.
#[test]
fn the_held_keys_formula_is_the_steady_state_of_the_gathering_rule() {
    for (rate, spread, hold) in [
        (10.0, 3_600.0, 300.0),
        (40.0, 1_200.0, 45.0),
        (2.0, 7_200.0, 900.0),
    ] {
        let formula = cost::held_keys_per_pack(rate, hold, f64::INFINITY, spread);
        let hours = 6.0 * 3600.0;
        let simulated =
            cost::simulate_held_keys_per_pack(rate, 180.0, spread, hold, hours, hours + hold, 7);
        let off = (simulated / formula - 1.0).abs();
        assert!(off < 0.05, "rate {rate}, spread {spread}, hold {hold}: formula {formula:.3}, simulated {simulated:.3}");
    }
    // A short run stops mid-hold: fewer keys a pack than the steady state.
    let short = cost::simulate_held_keys_per_pack(40.0, 180.0, 1_200.0, 45.0, 150.0, 198.0, 7);
    assert!(short < cost::held_keys_per_pack(40.0, 45.0, f64::INFINITY, 1_200.0));
}

/// The README's monthly figure at 1M expiries a month in tick mode is the cost model's, for both
/// indexes: the cost table's total (GSI mode) and the index table's fixed and per-item parts
/// (`followStream`, batch mode).
#[test]
fn the_readme_quotes_the_monthly_cost_of_both_indexes_at_1m() {
    let model = &cost_model();
    let gsi = cell(row(model, "| 1M |"), 9)
        .trim_matches(['*', '$'])
        .to_owned();
    let i = cost::Inputs::from_code(1.56e-6);
    let light = i.window_paths(1e6, 1.0, 1.0, &counted());
    let follow = cost::fixed_month(&i, &light) + cost::per_item_month(&i, &light).0;
    let says = format!("with `followStream` ${follow:.2}, in GSI mode ${gsi})");
    assert_says(&words("README.md"), "README.md", &says, "");
}

/// Each cost goal's verdict follows from its figures: "met" exactly when the cheapest of the four
/// (each delete mode on Lambda and on the daemon) comes to at most the goal, and the cheapest is
/// the least of them, named.
#[test]
fn each_cost_goal_says_met_exactly_when_its_cheapest_figure_is_within_it() {
    let i = cost::Inputs::from_code(1.56e-6);
    let section = cost::benchmarks_section(&i, &counted());
    let start = section.find("**Goals**").expect("section 4 has its goals");
    let money = |c: &str| c.trim().trim_start_matches('$').parse::<f64>().unwrap();
    let names = [
        "Lambda, batch",
        "Lambda, conditional",
        "daemon, batch",
        "daemon, conditional",
    ];
    let mut rows = 0;
    for line in section[start..]
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("$"))
    {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let most = money(cells[2]);
        let figures: Vec<f64> = cells[3..7].iter().map(|c| money(c)).collect();
        let least = figures.iter().copied().fold(f64::INFINITY, f64::min);
        let (best, verdict) = cells[7].split_once(": ").expect("a figure and a verdict");
        let (figure, which) = best.split_once(" (").expect("the cheapest named");
        assert_eq!(money(figure), least, "{line}");
        let which = which.trim_end_matches(')');
        let at = names
            .iter()
            .position(|n| *n == which)
            .expect("a known path");
        assert_eq!(figures[at], least, "{line}");
        let met = least <= most;
        assert_eq!(
            verdict,
            if met { "**met**" } else { "**not met**" },
            "{line}"
        );
        rows += 1;
    }
    assert_eq!(rows, 5, "{section}");
}

/// The model's stream mapping is the construct's: batches of `STREAM_BATCH_SIZE` records, no
/// batching window, only `INSERT` and `MODIFY` records (one per write of an item), the function
/// at the `memorySize` default.
#[test]
fn the_cost_model_takes_the_stream_mapping_of_the_construct() {
    let ts = file("infra/src/stream-indexer.ts");
    let settings = file("infra/src/resolve.ts");
    let stream = between(&ts, "const STREAM = {", "} as const")
        .expect("infra/src/stream-indexer.ts declares `const STREAM = {`");
    let batch = format!("batchSize: {},", cost::STREAM_BATCH_SIZE);
    assert!(stream.contains(&batch), "STREAM lacks `{batch}`:{stream}");
    assert!(ts.contains("batchSize: STREAM.batchSize,"));
    assert!(ts.contains("maxBatchingWindow: Duration.seconds(0),"));
    assert!(ts.contains("lambda.FilterRule.or('INSERT', 'MODIFY')"));
    let memory = format!("props.memorySize ?? {},", cost::INDEX_MB);
    assert!(
        settings.contains(&memory),
        "the construct's memorySize default (infra/src/resolve.ts) is not {memory}"
    );
}

/// The README's sentence on giving items their window quotes the per-million table of
/// docs/BENCHMARKS.md section 4 (1 KB items, one Region): the GSI mode's index, the expiry index
/// table's at 1M and at 1B a month, and ours at 1B a month against the peer's figure.
#[test]
fn the_readme_quotes_what_giving_items_their_window_costs() {
    let model = &cost_model();
    let per_million = model
        .split("\n| per million items")
        .nth(1)
        .expect("section 4 has a per-million table");
    // The cells of a row: "", volume, size, Regions, delete and read, GSI mode, index table on
    // Lambda, daemon, ours in GSI mode, ours with the index table on Lambda, "".
    let dollars = |volume: f64, n: usize| -> f64 {
        let volume = cost::volume(volume);
        let cell = cell(row(per_million, &format!("| {volume} | 1 KB | 1 |")), n);
        cell.trim_matches(['*', '$']).parse().unwrap()
    };
    let expected = [
        format!("${:.2} per million items", dollars(1e6, 5)),
        format!(
            "${:.2} per million 1 KB items at 1M a month",
            dollars(1e6, 6)
        ),
        format!("${:.2} at 1B a month", dollars(1e9, 6)),
        format!(
            "ours comes to ${:.2} per million 1 KB items at 1B a month",
            dollars(1e9, 9)
        ),
        format!("${:.2} for a per-item scheduler", cost::PEER_PER_MILLION),
    ];
    // Ours on the daemon, all told: the cheapest of its delete modes in the goals' 1B row.
    let goal = model
        .lines()
        .find(|l| l.starts_with("| one Region, 1B a month, all |"))
        .expect("the goals' 1B row");
    let money = |n: usize| -> f64 { cell(goal, n).trim_matches('$').parse().unwrap() };
    let daemon = money(5).min(money(6));
    let daemon =
        format!("ours on the daemon comes to ${daemon:.2} per million 1 KB items at 1B a month");
    let readme = words("README.md");
    assert_says(&readme, "README.md", &daemon, "");
    // docs/choosing.md quotes the index's costs in the same words.
    let (readme, choosing) = (words("README.md"), words("docs/choosing.md"));
    for (i, phrase) in expected.iter().enumerate() {
        assert_says(
            &readme,
            "README.md",
            phrase,
            " (docs/BENCHMARKS.md section 4)",
        );
        if i < 3 {
            assert_says(&choosing, "docs/choosing.md", phrase, ", as README.md does");
        }
    }
}

// ---------------------------------------------------------------- docs/choosing.md

/// The figures of `text`: sums in dollars (`$2.61`), times in decimal seconds (`0.053 s`), sizes in
/// MiB, shares in %, other decimal numbers, and counts of four digits or more (`140072`); link
/// targets and code spans left out.
fn figures(text: &str) -> Vec<String> {
    let mut plain = String::new();
    for line in prose_and_code(text).0 {
        let line: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            plain.push_str(&rest[..at]);
            rest = rest[at..].split_once(')').map_or("", |(_, after)| after);
        }
        plain.push_str(rest);
        plain.push('\n');
    }
    let words: Vec<&str> = plain
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| ",;:()|*".contains(c)))
        .map(|w| {
            let bare = w.strip_suffix('.').unwrap_or(w);
            let unit = ["s", "MiB", "%"].contains(&bare);
            if unit || bare.trim_start_matches('$').parse::<f64>().is_ok() {
                bare
            } else {
                w
            }
        })
        .collect();
    let number = |w: &str| w.parse::<f64>().is_ok();
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let next = words.get(i + 1).copied().unwrap_or_default();
        if w.len() > 1 && w.starts_with('$') && number(&w[1..]) {
            out.push((*w).to_owned());
        } else if number(w) && w.contains('.') && next == "s" {
            out.push(format!("{w} s"));
        } else if number(w) && ["MiB", "%"].contains(&next) {
            out.push(format!("{w} {next}"));
        } else if (number(w) && w.contains('.'))
            || (w.len() >= 4 && w.chars().all(|c| c.is_ascii_digit()))
        {
            out.push((*w).to_owned());
        }
    }
    out
}

/// The text of each section of `markdown` by its anchor: from its heading to the next heading of
/// its level or above.
fn sections_by_anchor(markdown: &str) -> std::collections::HashMap<String, String> {
    let lines: Vec<&str> = markdown.lines().collect();
    let level = |l: &str| {
        let hashes = l.chars().take_while(|c| *c == '#').count();
        (hashes > 0 && l[hashes..].starts_with(' ')).then_some(hashes)
    };
    let mut out = std::collections::HashMap::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(n) = level(line) else { continue };
        let end = (i + 1..lines.len())
            .find(|&j| level(lines[j]).is_some_and(|m| m <= n))
            .unwrap_or(lines.len());
        out.insert(slug(&line[n..]), lines[i..end].join("\n"));
    }
    out
}

/// docs/choosing.md quotes docs/BENCHMARKS.md and nothing else: every figure of each of its `## `
/// sections is in a section of BENCHMARKS.md that the same section links to.
#[test]
fn the_choices_page_quotes_only_the_benchmark_sections_it_links() {
    let bench = file("docs/BENCHMARKS.md");
    let sections = sections_by_anchor(&bench);
    let page = file("docs/choosing.md");
    let mut problems = Vec::new();
    let mut quoted = 0;
    let mut choices = 0;
    for part in page.split("\n## ").skip(1) {
        let title = part.lines().next().unwrap_or_default();
        choices += 1;
        let linked: Vec<&String> = link_targets(part)
            .iter()
            .filter_map(|t| t.strip_prefix("BENCHMARKS.md#"))
            .map(|anchor| {
                sections
                    .get(anchor)
                    .unwrap_or_else(|| panic!("{title}: no section #{anchor}"))
            })
            .collect();
        let found = figures(part);
        if found.is_empty() {
            problems.push(format!("{title}: no figure"));
        }
        for figure in found {
            quoted += 1;
            if !linked.iter().any(|s| s.contains(&figure)) {
                problems.push(format!("{title}: {figure} is in no section it links"));
            }
        }
    }
    assert!(
        choices >= 6 && quoted >= 30,
        "{choices} choices, {quoted} figures"
    );
    assert_none(&problems, "docs/choosing.md");
    // The figure reader finds what it should.
    let sample = "| 0.074 s | $1.25 per million, 23.5 MiB, at most 0.00 %. 140072, 24.5 and 2 s ([x](BENCHMARKS.md#1-a)) `9.99 s`";
    let expected = ["0.074 s", "$1.25", "23.5 MiB", "0.00 %", "140072", "24.5"];
    assert_eq!(figures(sample), expected);
}

/// The sweeper's Lambda and queries per month (docs/BENCHMARKS.md section 4, 1M row; also in the
/// cost blocks of docs/scaling.md and infra/README.md) as docs/choosing.md quotes them.
#[test]
fn the_choices_page_quotes_the_cost_model_s_lambda_figures() {
    let model = &cost_model();
    let (header, row) = (row(model, "| expiries / month |"), row(model, "| 1M |"));
    let column = |name: &str| {
        let column = header.split('|').position(|c| c.trim() == name).unwrap();
        cell(row, column)
    };
    let minute = column("sweeper Lambda, minute");
    let tick = column("sweeper Lambda, tick 1 s");
    let queries = column("queries, tick 1 s");
    let page = file("docs/choosing.md");
    let says = format!("| {minute} | {tick}, and {queries} of queries |");
    assert_says(&page, "docs/choosing.md", &says, "");
    let per_function = format!("{tick} of sweeper Lambda in tick mode");
    assert!(page.contains(&per_function), "{per_function:?}");
    let lambda = format!("{tick} for the sweeper Lambda");
    assert!(page.contains(&lambda), "{lambda:?}");
}

/// Section 1's tick mode as docs/BENCHMARKS.md reports it: the p99 lag of the continuous loop and
/// of the deployed shape (the release Lambda binary ticking every second, across handoffs), each
/// the median over its runs.
fn tick_p99s() -> (String, String) {
    let bench = file("docs/BENCHMARKS.md");
    let ticks = bench
        .split("### Tick mode, repeated")
        .nth(1)
        .expect("BENCHMARKS.md section 1 has a Tick mode, repeated part");
    let (looped, deployed) = ticks
        .split_once("**Deployed shape**")
        .expect("a **Deployed shape** part");
    // The cells: "", the label, then the run's columns up to p50 and p99 (the deployed shape has
    // one more before them: deleted before ttl).
    let p99 = |part: &str, at: usize| {
        let row = row(part, "| **median");
        let p99 = cell(row, at).split(" (").next().unwrap_or_default();
        assert!(p99.ends_with(" s"), "p99 cell {p99:?} in {row}");
        p99.to_owned()
    };
    (p99(looped, 5), p99(deployed, 6))
}

/// The tagline of the README and of the construct's README quotes the p99 lag of section 1's
/// deployed shape.
#[test]
fn the_readme_tagline_quotes_the_measured_lag() {
    let (_, p99) = tick_p99s();
    let tagline = format!("expired items gone {p99} after their ttl (p99 in tick mode");
    for file in ["README.md", "infra/README.md"] {
        let why = " (docs/BENCHMARKS.md section 1, deployed shape)";
        assert_says(&words(file), file, &tagline, why);
    }
}

/// docs/choosing.md quotes section 1's tick mode as measured: the p99 of the deployed shape and
/// of the continuous loop.
#[test]
fn choosing_quotes_the_measured_tick_lag() {
    let (looped, deployed) = tick_p99s();
    let choosing = words("docs/choosing.md");
    let both = format!("| {deployed} (the deployed shape) | {looped} (the continuous loop) |");
    assert_says(&choosing, "docs/choosing.md", &both, "");
    let alone = format!("| — | {deployed} |");
    assert_says(&choosing, "docs/choosing.md", &alone, "");
}

// ---------------------------------------------------------------- a newcomer's first screen

/// What the README shows before its first `## ` heading after the deploy steps: the path from an
/// existing table to a deployed, verified sweeper.
#[test]
fn the_readme_first_screen_goes_from_an_existing_table_to_a_verified_sweeper() {
    let readme = file("README.md");
    let steps = section(&readme, "Quick start: your own table")
        .expect("README.md has a `## Quick start: your own table` section");
    // In this order: the index, bootstrap, install, deploy, back-fill, audit.
    let order = [
        "aws dynamodb update-table",
        "cdk bootstrap",
        "npm install",
        "new TtlSweeper(",
        "-c tableName=",
        "ttl-sweeper backfill",
        "ttl-sweeper audit",
    ];
    let mut from = 0;
    for step in order {
        let at = steps[from..]
            .find(step)
            .unwrap_or_else(|| panic!("the quick start lacks `{step}` after byte {from}"));
        from += at + step.len();
    }
    for needed in [
        "pip install",
        "cargo install",
        "make dist",
        "--global-secondary-index-updates",
    ] {
        assert!(
            steps.contains(needed),
            "the quick start does not mention `{needed}`"
        );
    }
    // The TypeScript snippet imports everything it uses.
    let ts = between(steps, "```ts", "```").expect("a ```ts snippet");
    for (used, import) in [
        ("cdk.", "import * as cdk from 'aws-cdk-lib'"),
        (
            "dynamodb.",
            "import * as dynamodb from 'aws-cdk-lib/aws-dynamodb'",
        ),
        ("TtlSweeper", "from 'ttl-sweeper-cdk'"),
    ] {
        let imported = !ts.contains(used) || ts.contains(import);
        assert!(imported, "the snippet uses {used} without `{import}`");
    }
    // The index it creates is the one the sweeper queries by default.
    let default = |var: &str| SETTINGS.iter().find(|s| s.var == var).unwrap().default;
    let index = default("INDEX_NAME").unwrap();
    let window = default("WINDOW_ATTRIBUTE").unwrap();
    let ttl = default("TTL_ATTRIBUTE").unwrap();
    for expected in [
        format!("IndexName={index}"),
        format!("AttributeName={window},KeyType=HASH"),
        format!("AttributeName={ttl},KeyType=RANGE"),
        "ProjectionType=KEYS_ONLY".to_owned(),
    ] {
        let has = steps.contains(&expected);
        assert!(has, "the index command lacks {expected}");
    }
    // The quick start comes before the first screen ends: right after the introduction.
    let first_heading = readme.lines().find(|l| l.starts_with("## "));
    let first = Some("## Quick start: your own table");
    assert_eq!(first_heading, first, "the quick start is the first section");
}

// ---------------------------------------------------------------- the install commands

/// The README's install step is a block `make install-test` runs as written: between
/// `<!-- install:begin` and `<!-- install:end -->` in the quick start, one ```sh fence whose
/// commands build the release files (`make dist`) and install the construct's tarball from `dist/`
/// under the name `scripts/dist.sh` gives it. `make install-test` runs scripts/install-test.sh,
/// which reads that block, and `make test` does not run it (it builds releases: minutes).
#[test]
fn the_readme_install_commands_are_the_block_make_install_test_runs() {
    let readme = file("README.md");
    let quick = section(&readme, "Quick start: your own table").expect("a quick start");
    assert_eq!(readme.matches("<!-- install:begin").count(), 1);
    assert_eq!(readme.matches("<!-- install:end -->").count(), 1);
    let block = between(quick, "<!-- install:begin", "<!-- install:end -->")
        .expect("the install block is in the quick start");
    let fence = between(block, "```sh\n", "```").expect("a ```sh fence in the install block");
    let commands: Vec<&str> = fence
        .lines()
        .map(|l| l.split(" #").next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(commands.first(), Some(&"make dist"), "{commands:?}");
    let tarball = "dist/ttl-sweeper-cdk-<version>.tgz";
    let install = commands
        .iter()
        .find(|c| c.starts_with("npm install "))
        .unwrap_or_else(|| panic!("no npm install in {commands:?}"));
    assert!(
        install.contains(&format!("<checkout>/{tarball}")),
        "{install}"
    );
    // The name dist.sh writes (and checks for) is the one the README installs.
    let dist = file("scripts/dist.sh");
    assert!(dist.contains("\"ttl-sweeper-cdk-$version.tgz\""));
    // Every placeholder is one install-test.sh fills in.
    let script = file("scripts/install-test.sh");
    for placeholder in fence
        .split('<')
        .skip(1)
        .map(|p| p.split('>').next().unwrap())
    {
        let filled = script.contains(&format!("<{placeholder}>/$"));
        assert!(
            filled,
            "scripts/install-test.sh does not fill in <{placeholder}>"
        );
    }
    assert!(script.contains("<!-- install:begin") && script.contains("<!-- install:end -->"));
    // `make install-test` runs the script; `make test` does not.
    let makefile = file("Makefile");
    let recipe =
        between(&makefile, "\ninstall-test:", "\n\n").expect("a Makefile target install-test");
    assert!(recipe.contains("scripts/install-test.sh"), "{recipe}");
    let test = between(&makefile, "\ntest:", "\n\n").expect("a Makefile target test");
    assert!(
        !test.contains("install-test") && !test.contains(" dist"),
        "{test}"
    );
}

// ---------------------------------------------------------------- cargo lambda deploy, dry

/// The first fenced block of `lang` after `heading` in `markdown`.
fn block_after<'a>(markdown: &'a str, heading: &str, lang: &str) -> Option<&'a str> {
    let from = markdown.find(heading)?;
    let open = from + markdown[from..].find(&format!("```{lang}\n"))? + lang.len() + 4;
    let close = open + markdown[open..].find("```")?;
    Some(&markdown[open..close])
}

/// docs/deploying.md's `cargo lambda deploy` line, run with `--dry` (package, no upload, no AWS
/// call) on its environment file: the function cargo-lambda would deploy has the doc's name,
/// role, timeout, memory, runtime and log retention, and the file holds settings the sweeper
/// accepts, in tick mode with the timeout tick mode needs.
#[test]
fn the_cargo_lambda_deploy_line_of_the_docs_passes_a_dry_run() {
    let doc = file("docs/deploying.md");
    let heading = "## With `cargo lambda deploy`";
    let env_file = block_after(&doc, heading, "ini").expect("an ```ini environment file");
    let commands = block_after(&doc, heading, "sh").expect("a ```sh block");
    let line = commands
        .lines()
        .find(|l| l.contains("cargo-lambda lambda deploy"))
        .expect("a cargo-lambda lambda deploy line");

    // The environment file: known settings, a configuration the sweeper accepts, tick mode.
    let vars: std::collections::HashMap<String, String> = env_file
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    for var in vars.keys() {
        let setting = SETTINGS.iter().any(|s| s.var == var);
        assert!(setting, "{var} is not a setting");
    }
    let config = ttl_sweeper::config::Config::from_lookup(|k| vars.get(k).cloned())
        .expect("the environment file is a valid configuration");
    assert_eq!(config.target.table_name, "sessions");

    let dir = std::env::temp_dir().join(format!("ttl-sweeper-deploy-dry-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("sweeper.env"), env_file).unwrap();
    let cargo_lambda =
        std::env::var("CARGO_LAMBDA").unwrap_or_else(|_| format!("{ROOT}/.venv/bin/cargo-lambda"));
    // The doc's arguments, with this build's binary in place of `make package`'s arm64 one.
    let mut args: Vec<String> = line
        .split_whitespace()
        .skip_while(|w| *w != "deploy")
        .map(|w| w.replace("<account>", "123456789012"))
        .collect();
    let path = args
        .iter()
        .position(|a| a == "--binary-path")
        .expect("the line names the binary with --binary-path");
    assert_eq!(args[path + 1], "target/lambda/ttl-sweeper-lambda/bootstrap");
    args[path + 1] = env!("CARGO_BIN_EXE_ttl-sweeper-lambda").to_owned();
    // Nothing may leave the machine: a closed local port, no credentials.
    let closed = "--endpoint-url http://127.0.0.1:9 --region us-east-1".split(' ');
    let no_credentials = LOCAL_AWS_ENV.iter().filter(|(k, _)| *k != "AWS_REGION");
    let out = std::process::Command::new(&cargo_lambda)
        .arg("lambda")
        .args(&args)
        .args(["--dry", "--output-format", "json", "--manifest-path"])
        .arg(format!("{ROOT}/Cargo.toml"))
        .args(closed)
        .envs(no_credentials.copied())
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("run {cargo_lambda} (make tools installs it): {e}"));
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cargo lambda deploy --dry failed: {stderr}\n{stdout}"
    );
    let plan: serde_json::Value =
        serde_json::from_str(&stdout[stdout.find('{').expect("a JSON plan")..]).unwrap();
    let c = &plan["config"];
    plan.assert_fields(r#"name="ttl-sweeper" kind="function" files=["bootstrap"]"#);
    c.assert_fields(
        r#"role="arn:aws:iam::123456789012:role/ttl-sweeper" runtime="provided.al2023""#,
    );
    c.assert_fields(r#"memory=128 log_retention=30 env_file="sweeper.env""#);
    // Tick mode: the timeout covers the period, the handoff overlap and the deadline margin.
    let timeout = c["timeout"].as_u64().expect("a timeout");
    let needed = config.handler.schedule.as_secs()
        + ttl_sweeper::lambda::handler::HANDOFF_OVERLAP.as_secs()
        + ttl_sweeper::lambda::handler::DEADLINE_MARGIN.as_secs();
    let enough = vars["TICK_SECONDS"] != "off" && timeout >= needed;
    assert!(enough, "timeout {timeout} < {needed}");
}

/// The crate's map (`src/lib.rs`, "Layout") names every top-level module, so that docs/design.md
/// can point to it instead of keeping a second copy.
#[test]
fn the_crate_map_names_every_module() {
    let lib = file("src/lib.rs");
    let map: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';'))
        .collect();
    assert!(modules.len() >= 10, "{modules:?}");
    let missing: Vec<&&str> = modules
        .iter()
        .filter(|m| !map.contains(&format!("[`{m}`]")))
        .collect();
    assert!(
        missing.is_empty(),
        "src/lib.rs's map leaves out {missing:?}"
    );
}

/// Figures that two or more documents quote outside the generated sections, each held in all
/// of its places: a figure changed in one place and not the others fails here. (The generated
/// blocks and the choices page have tests of their own above.)
#[test]
fn figures_quoted_in_several_docs_agree() {
    let bench = "docs/BENCHMARKS.md";
    let quoted: &[(&str, &[&str])] = &[
        // make dist's and make image's time, as make install-test and make image measured them.
        ("about 11 minutes", &["README.md", "docs/releasing.md"]),
        (
            "about 6 minutes per architecture",
            &["docs/container.md", "docs/releasing.md"],
        ),
        // The daemon's host the cost model assumes, and the container page's task.
        ("0.25 vCPU and 1 GB", &[bench, "docs/container.md"]),
        // A pack of one key, counted (section 3), and design.md's account of it.
        ("143.6", &[bench, "docs/design.md"]),
        ("144 bytes", &[bench, "docs/design.md"]),
        // The fleet page's prices, from the cost model.
        ("$5.05", &[bench, "docs/choosing.md", "docs/fleet.md"]),
        ("$0.30", &[bench, "docs/fleet.md"]),
        ("$0.10", &[bench, "docs/fleet.md"]),
        ("$3.00", &[bench, "docs/fleet.md"]),
        // A vCPU's memory, and the planning latency of a BatchWriteItem.
        ("1,769 MB", &[bench, "docs/scaling.md"]),
        // Tick mode's overlap, billed; a read unit's price; DynamoDB's limits the plans use.
        ("70 s of every 60 s", &[bench]),
        (
            "70 of every 60 seconds",
            &["docs/design.md", "infra/README.md"],
        ),
        ("$0.125", &[bench, "docs/events.md"]),
        ("1,000 writes/s", &["README.md", bench, "docs/design.md"]),
        ("ceil(R / 500)", &[bench, "docs/scaling.md"]),
        ("40,000", &[bench, "docs/scaling.md"]),
        ("~20 ms each", &[bench]),
        ("20 ms for a 25-key", &["docs/scaling.md"]),
    ];
    let mut missing = Vec::new();
    for (figure, docs) in quoted {
        for doc in *docs {
            if !words(doc).contains(figure) {
                missing.push(format!("{doc} lacks {figure:?}"));
            }
        }
    }
    assert!(missing.is_empty(), "{missing:#?}");
}

/// docs/scaling.md's CPU-bound deletes a second at 128, 256 and 1024 MB are section 7's table,
/// rounded to hundreds: `make bench` rewriting the table with other figures fails here until the
/// page follows.
#[test]
fn scaling_quotes_section_7_s_deletes_per_second() {
    let (bench, scaling) = (file("docs/BENCHMARKS.md"), words("docs/scaling.md"));
    for memory in ["128 MB", "256 MB", "1024 MB"] {
        let per_second: f64 = cell(row(&bench, &format!("| {memory} |")), 3)
            .parse()
            .unwrap();
        let rounded = ((per_second / 100.0).round() * 100.0) as u64;
        let text = format!("{},{:03}/s", rounded / 1000, rounded % 1000);
        assert!(
            scaling.contains(&text),
            "scaling.md lacks {text} ({memory}: {per_second})"
        );
    }
}
