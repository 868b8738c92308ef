//! The README's configuration table lists exactly the settings of `ttl_sweeper::config::SETTINGS`,
//! in the same order and with the same defaults.

use ttl_sweeper::config::SETTINGS;

/// One row of the table: the variable and its default as the README shows it.
#[derive(Debug, PartialEq)]
struct Row {
    var: String,
    /// `None` for a required setting (`— (required)`); `Some("")` for one that is off unless
    /// given (`— (off)`); otherwise the backticked value.
    default: Option<String>,
}

/// The rows of the table under `## Configuration` whose first cell is one backticked variable
/// (the row about the AWS SDK's own variables is not a setting).
fn configuration_rows(readme: &str) -> Vec<Row> {
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Configuration\n"))
        .expect("README.md has a `## Configuration` section");
    let mut rows = Vec::new();
    for line in section.lines().filter(|l| l.starts_with('|')) {
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

#[test]
fn the_configuration_table_lists_every_setting_with_its_default() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("read README.md");
    let rows = configuration_rows(&readme);
    let mut problems = Vec::new();
    for s in &SETTINGS {
        match rows.iter().find(|r| r.var == s.var) {
            None => problems.push(format!("{} has no row", s.var)),
            Some(row) if row.default.as_deref() != s.default => problems.push(format!(
                "{}: the README says default {:?}, SETTINGS {:?}",
                s.var, row.default, s.default
            )),
            Some(_) => {}
        }
    }
    for row in &rows {
        if !SETTINGS.iter().any(|s| s.var == row.var) {
            problems.push(format!("{} is not a setting", row.var));
        }
    }
    let order: Vec<&str> = rows.iter().map(|r| r.var.as_str()).collect();
    let expected: Vec<&str> = SETTINGS.iter().map(|s| s.var).collect();
    if problems.is_empty() && order != expected {
        problems.push(format!(
            "rows in the order {order:?}, SETTINGS in {expected:?}"
        ));
    }
    assert!(
        problems.is_empty(),
        "README.md's configuration table must list the settings of SETTINGS \
         (src/config/settings.rs), in order, with their defaults:\n  {}",
        problems.join("\n  ")
    );
}

#[test]
fn the_table_reader_reads_defaults_and_skips_other_rows() {
    let table = "intro\n## Configuration\n\n| variable | default | accepts |\n|---|---|---|\n\
                 | `TABLE_NAME` | — (required) | a name |\n| `WINDOW_SECONDS` | `60` | 1–86400 |\n\
                 | `CHECKPOINT_TABLE` | — (off) | a table |\n| `AWS_REGION`, credentials | standard | |\n\
                 \n## Next\n| `NOT_CONFIG` | `1` | |\n";
    let rows = configuration_rows(table);
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
}
