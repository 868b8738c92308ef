//! Release consistency: one version in every manifest that `make dist` packages (the crate, the
//! construct's npm package and so its Python wheel, the two helper packages), matching the top
//! entry of CHANGELOG.md; and the crate without default features is the helper library alone.

use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn json_version(path: &str) -> String {
    let doc: serde_json::Value = serde_json::from_str(&read(path)).unwrap();
    let version = doc["version"].as_str().map(str::to_owned);
    version.unwrap_or_else(|| panic!("{path} has no version"))
}

/// The `<name> = "..."` line of a TOML table (the first one after `[header]`).
fn toml_field(path: &str, header: &str, name: &str) -> String {
    let text = read(path);
    let table = text.split_once(header).map(|(_, table)| table);
    let table = table.unwrap_or_else(|| panic!("{path} has no {header}"));
    let prefix = format!("{name} = \"");
    (table.lines())
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or_else(|| panic!("{path} has no {name} under {header}"))
        .to_owned()
}

/// The version of CHANGELOG.md's top entry (`## [x.y.z] - YYYY-MM-DD`), after `## [Unreleased]`.
fn changelog_version(text: &str) -> Option<(String, String)> {
    let line = text
        .lines()
        .filter(|l| l.starts_with("## ["))
        .find(|l| !l.starts_with("## [Unreleased]"))?;
    let (version, rest) = line.strip_prefix("## [")?.split_once(']')?;
    let date = rest.strip_prefix(" - ")?;
    Some((version.to_owned(), date.to_owned()))
}

#[test]
fn every_manifest_has_the_crates_version() {
    let json = [
        "infra/package.json",
        "infra/package-lock.json",
        "packages/expiry-js/package.json",
    ];
    let python = "packages/expiry-py/pyproject.toml";
    let mut versions: Vec<(&str, String)> = json.iter().map(|p| (*p, json_version(p))).collect();
    for (path, header) in [(python, "[project]"), ("Cargo.toml", "[package]")] {
        versions.push((path, toml_field(path, header, "version")));
    }
    for (path, version) in versions {
        let why = format!("{path} is at {version}, Cargo.toml at {VERSION}");
        assert_eq!(version, VERSION, "{why}");
    }
}

#[test]
fn the_changelogs_top_entry_is_this_version() {
    let (version, date) = changelog_version(&read("CHANGELOG.md"))
        .expect("CHANGELOG.md has a `## [x.y.z] - date` entry");
    let top = format!("CHANGELOG.md's top entry is {version}, Cargo.toml says {VERSION}");
    assert_eq!(version, VERSION, "{top}");
    let (d, digits) = (date.as_bytes(), date.replace('-', ""));
    let dated = d.len() == 10 && d[4] == b'-' && d[7] == b'-';
    let dated = dated && digits.bytes().all(|b| b.is_ascii_digit());
    assert!(
        dated,
        "CHANGELOG.md's {version} entry has date {date:?}, expected YYYY-MM-DD"
    );
}

#[test]
fn the_changelog_parser_reads_keep_a_changelog_headings() {
    let text =
        "# Changelog\n\n## [Unreleased]\n\n## [1.2.0] - 2026-01-02\n\n## [1.1.0] - 2025-01-01\n";
    let top = Some(("1.2.0".into(), "2026-01-02".into()));
    assert_eq!(changelog_version(text), top);
    assert_eq!(changelog_version("# Changelog\n\n## [Unreleased]\n"), None);
}

#[test]
fn the_crate_is_publishable() {
    let manifest = read("Cargo.toml");
    let forbidden = manifest.contains("publish = false");
    assert!(!forbidden, "Cargo.toml forbids publishing");
    for key in ["repository", "readme", "keywords", "categories", "license"] {
        let set = manifest
            .lines()
            .any(|l| l.starts_with(&format!("{key} = ")));
        assert!(set, "Cargo.toml has no {key}");
    }
    assert!(Path::new(ROOT).join("LICENSE").is_file());
}

/// Packages that must not be in the dependency tree without default features.
const HEAVY: &[&str] = &[
    "aws-config",
    "aws-sdk-",
    "aws-smithy-",
    "aws-sigv4",
    "aws-credential-types",
    "aws-runtime",
    "tokio",
    "lambda_runtime",
    "hyper",
    "clap",
    "tracing",
    "metrics",
];

/// `cargo tree` of the normal dependencies, one package per line, with `features`.
fn cargo_tree(features: &[&str]) -> String {
    let args = "tree --offline --locked -e normal --prefix none --format {p}".split(' ');
    let mut cmd = Command::new(env!("CARGO"));
    let out = cmd
        .current_dir(ROOT)
        .args(args)
        .args(features)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo tree: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn without_default_features_the_crate_is_the_helper_library_alone() {
    let tree = cargo_tree(&["--no-default-features"]);
    let names: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let helpers = names.contains(&"sha2") && names.contains(&"chrono");
    assert!(helpers, "{tree}");
    let heavy: std::collections::BTreeSet<&str> = (names.iter().copied())
        .filter(|name| HEAVY.iter().any(|h| name.starts_with(h)))
        .collect();
    assert!(
        heavy.is_empty(),
        "heavy dependencies without default features: {heavy:?}"
    );
    // With default features they are all there, so the check above can see them.
    let tree = cargo_tree(&[]);
    for name in ["aws-sdk-dynamodb", "tokio", "lambda_runtime", "hyper"] {
        let there = tree.lines().any(|l| l.starts_with(&format!("{name} ")));
        assert!(there, "{name} missing from the default tree");
    }
}

/// The alarms' links to docs/alarms.md (the construct's, the SAM template's, the Terraform
/// module's) name the page as of this release, in the crate's repository: an operator at 3 a.m.
/// reads the runbook of the version deployed, not of whatever `main` holds then.
#[test]
fn the_alarm_links_name_this_release_s_page() {
    let repository = toml_field("Cargo.toml", "[package]", "repository");
    let want = format!("{repository}/blob/v{VERSION}/docs/alarms.md");
    for path in [
        "infra/src/alarms.ts",
        "infra/sam/template.yaml",
        "infra/terraform/main.tf",
    ] {
        let text = read(path);
        let links: Vec<&str> = (text.split("https://").skip(1))
            .map(|rest| rest.split(['\'', '"', ' ', '\n']).next().unwrap())
            .filter(|link| link.ends_with("docs/alarms.md"))
            .collect();
        assert!(!links.is_empty(), "{path} links to no docs/alarms.md");
        for link in links {
            assert_eq!(format!("https://{link}"), want, "{path}");
        }
    }
}
