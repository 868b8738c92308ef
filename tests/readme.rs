//! The documentation against the code and against itself:
//!
//! - `docs/configuration.md`'s settings table lists exactly the settings of
//!   `ttl_sweeper::config::SETTINGS`, in the same order and with the same defaults, and the
//!   README's short table names only settings, with their defaults;
//! - every relative link in `README.md` and `docs/*.md` points to a file that exists, and every
//!   `#anchor` to a heading of that file;
//! - every `make <target>` they show is a target of the Makefile;
//! - every `ttl_sweeper::...` path they name is a public item of the library.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use ttl_sweeper::config::SETTINGS;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
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
        rows.push(Row { var, default });
    }
    rows
}

/// The text of a cell that is exactly one code span: `` `TABLE_NAME` `` → `TABLE_NAME`.
fn single_code_span(cell: &str) -> Option<String> {
    let inner = cell.strip_prefix('`')?.strip_suffix('`')?;
    (!inner.contains('`')).then(|| inner.to_owned())
}

/// What is wrong with `rows` as a table of `SETTINGS`: unknown variables and wrong defaults;
/// with `complete`, also missing settings and a different order.
fn settings_problems(rows: &[Row], complete: bool) -> Vec<String> {
    let mut problems = Vec::new();
    for row in rows {
        match SETTINGS.iter().find(|s| s.var == row.var) {
            None => problems.push(format!("{} is not a setting", row.var)),
            Some(s) if row.default.as_deref() != s.default => problems.push(format!(
                "{}: the table says default {:?}, SETTINGS {:?}",
                s.var, row.default, s.default
            )),
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
    let page = read(&Path::new(ROOT).join("docs/configuration.md"));
    // The full table is the page's first: the text before its first `## ` section.
    let top = page.split("\n## ").next().unwrap_or_default();
    let problems = settings_problems(&settings_rows(top), true);
    assert!(
        problems.is_empty(),
        "docs/configuration.md's table must list the settings of SETTINGS \
         (src/config/settings.rs), in order, with their defaults:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_readme_short_table_names_settings_with_their_defaults() {
    let readme = read(&Path::new(ROOT).join("README.md"));
    let configure = section(&readme, "Configure it").expect("README.md has `## Configure it`");
    let rows = settings_rows(configure);
    assert!(
        !rows.is_empty(),
        "README.md's `## Configure it` has no settings table"
    );
    let problems = settings_problems(&rows, false);
    assert!(
        problems.is_empty(),
        "README.md's settings table disagrees with SETTINGS:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_table_reader_reads_defaults_and_skips_other_rows() {
    let table = "intro\n## Configuration\n\n| variable | default | accepts |\n|---|---|---|\n\
                 | `TABLE_NAME` | — (required) | a name |\n| `WINDOW_SECONDS` | `60` | 1–86400 |\n\
                 | `CHECKPOINT_TABLE` | — (off) | a table |\n| `AWS_REGION`, credentials | standard | |\n\
                 \n## Next\n| `NOT_CONFIG` | `1` | |\n";
    let rows = settings_rows(section(table, "Configuration").unwrap());
    let row = |var: &str, default: Option<&str>| Row {
        var: var.into(),
        default: default.map(Into::into),
    };
    assert_eq!(
        rows,
        [
            row("TABLE_NAME", None),
            row("WINDOW_SECONDS", Some("60")),
            row("CHECKPOINT_TABLE", Some("")),
        ]
    );
    let problems = settings_problems(&rows[1..], true);
    assert!(
        problems.contains(&"TABLE_NAME has no row".to_owned()),
        "{problems:?}"
    );
    let wrong = [row("WINDOW_SECONDS", Some("30")), row("NOT_CONFIG", None)];
    assert_eq!(settings_problems(&wrong, false).len(), 2);
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
    assert!(
        problems.is_empty(),
        "broken links:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_link_reader_finds_links_and_the_checker_flags_broken_ones() {
    let markdown = "# Top\n\n## Sub-second precision (tick mode)\n\nsee [a](#top), [b](docs/x.md), \
                    `[not](a-link)` and [c](https://example.com)\n```\n[code](x.md)\n# not a heading\n```\n";
    assert_eq!(
        link_targets(markdown),
        ["#top", "docs/x.md", "https://example.com"]
    );
    let found = anchors(markdown);
    assert!(found.contains("top") && found.contains("sub-second-precision-tick-mode"));
    assert!(!found.contains("not-a-heading"));
    let readme = Path::new(ROOT).join("README.md");
    let problems = link_problems(&readme, "[a](docs/no-such-page.md) [b](#no-such-heading)");
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(link_problems(&readme, "[a](docs/design.md#sharded-windows)").is_empty());
}

/// The Makefile's targets (`name:` at the start of a line).
fn make_targets() -> HashSet<String> {
    read(&Path::new(ROOT).join("Makefile"))
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
    assert!(
        targets.contains("test") && targets.contains("demo"),
        "{targets:?}"
    );
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
    assert!(
        problems.is_empty(),
        "not Makefile targets:\n  {}",
        problems.join("\n  ")
    );
    assert_eq!(
        make_commands("run `make demo`\n```\nmake test   # all\n  make bench BENCH_QUICK=1\n```\n"),
        ["demo", "test", "bench"]
    );
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
    let declared = ["fn", "struct", "enum", "trait", "const", "mod", "type"]
        .iter()
        .any(|kind| {
            text.contains(&format!("pub {kind} {item}("))
                || text.contains(&format!("pub {kind} {item}<"))
                || text.contains(&format!("pub {kind} {item} "))
                || text.contains(&format!("pub {kind} {item};"))
                || text.contains(&format!("pub {kind} {item}:"))
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
    assert_eq!(
        library_paths(
            "`ttl_sweeper::streams::is_expiry_removal`\n 3.13% bin [.] ttl_sweeper::engine::sweep::Shared<S>::f\n"
        ),
        ["ttl_sweeper::streams::is_expiry_removal"]
    );
    assert!(
        problems.is_empty(),
        "no such public item:\n  {}",
        problems.join("\n  ")
    );
    assert!(library_path_exists(
        "ttl_sweeper::expiry::window::window_key"
    ));
    assert!(library_path_exists("ttl_sweeper::expiry::is_expired"));
    assert!(!library_path_exists("ttl_sweeper::window::window_key"));
    assert!(!library_path_exists("ttl_sweeper::expiry::no_such_fn"));
    assert_eq!(
        library_paths(
            "use `ttl_sweeper::expiry::Layout`, ttl_sweeper::connect(&c), `ttl_sweeper::...`"
        ),
        ["ttl_sweeper::expiry::Layout", "ttl_sweeper::connect"]
    );
}
