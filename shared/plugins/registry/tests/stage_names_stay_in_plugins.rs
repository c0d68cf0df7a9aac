//! No code outside `shared/plugins/` names a plugin's stage: the core, the controller, the CLI,
//! the functions and the web console decide by what the plugins say (a stage's presentation,
//! its plugin's `approvable`), never by a stage's name. This scans their sources for every
//! stage name the registry's plugins declare, written as a string literal, and fails naming
//! file and line.
//!
//! Not scanned, because a stage name there is data, not a decision:
//! - test code: `tests/` and `benches/` folders, `tests.rs` files, a `.rs` file from its first
//!   `#[cfg(test)]` line on, and the console's browser scenarios (`console/e2e/`);
//! - [`DATA`]: test fixtures compiled into a library behind a feature, and the list of
//!   PipeCD's stage names the planner tells an unsupported stage from a misspelt one by;
//! - comments (a line starting with `//`);
//! - what is not source: `.git`, `target`, `node_modules`, `dist`, hidden folders.

use std::path::{Path, PathBuf};

/// Files, or a region of one (from a line containing the marker to the next line that is
/// `];`), whose stage names are data.
const DATA: &[(&str, Option<&str>, &str)] = &[
    (
        "shared/embedded/src/conformance/fixtures.rs",
        None,
        "the store conformance suites' fixtures (feature `conformance`, test-only)",
    ),
    (
        "shared/sdk/src/planner.rs",
        Some("pub const PIPECD_STAGES"),
        "PipeCD's vocabulary: tells a stage gannet does not run from a misspelt one",
    ),
];

const SKIPPED_DIRS: &[&str] = &[
    "target",
    "node_modules",
    "dist",
    "tests",
    "benches",
    "e2e",
    "demo-work",
    "artifacts",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn sources(dir: &Path, root: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let relative = path.strip_prefix(root).expect("under the root");
        if path.is_dir() {
            if name.starts_with('.')
                || SKIPPED_DIRS.contains(&name)
                || relative == Path::new("shared/plugins")
            {
                continue;
            }
            sources(&path, root, out);
        } else if [".rs", ".ts", ".tsx"].iter().any(|ext| name.ends_with(ext)) && name != "tests.rs"
        {
            out.push(path);
        }
    }
}

/// Where `text` (the file at `relative`) writes one of `names` as a string literal.
fn named_stages(relative: &str, text: &str, names: &[&str]) -> Vec<(usize, String)> {
    let whole_file_is_data = DATA
        .iter()
        .any(|(f, region, _)| *f == relative && region.is_none());
    if whole_file_is_data {
        return Vec::new();
    }
    let marker = DATA
        .iter()
        .find(|(f, _, _)| *f == relative)
        .and_then(|(_, region, _)| *region);
    let mut found = Vec::new();
    let mut in_data = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if relative.ends_with(".rs") && trimmed == "#[cfg(test)]" {
            break;
        }
        if marker.is_some_and(|m| line.contains(m)) {
            in_data = true;
        }
        if in_data {
            in_data = trimmed != "];";
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        for name in names {
            if line.contains(&format!("\"{name}\"")) || line.contains(&format!("'{name}'")) {
                found.push((i + 1, (*name).to_owned()));
            }
        }
    }
    found
}

#[test]
fn no_code_outside_the_plugins_names_a_plugins_stage() {
    let plugins = gannet_plugins::registry()
        .without_settings()
        .expect("every plugin builds with empty settings");
    let names: Vec<&str> = plugins.stage_names().collect();
    assert!(
        names.len() > plugins.iter().count(),
        "the plugins declare their stages: {names:?}"
    );
    let root = workspace()
        .canonicalize()
        .expect("the workspace root exists");
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("cli/src/wait.rs"))
            && files
                .iter()
                .any(|f| f.ends_with("console/src/components/StageList.tsx")),
        "the scan reaches the CLI and the console"
    );
    let mut breaks = Vec::new();
    for file in &files {
        let relative = file
            .strip_prefix(&root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (line, name) in named_stages(&relative, &text, &names) {
            breaks.push(format!("{relative}:{line}: names stage {name}"));
        }
    }
    assert!(
        breaks.is_empty(),
        "code outside shared/plugins/ decides by a plugin's stage name (ask the plugin: a stage's presentation, `approvable`):\n{}",
        breaks.join("\n")
    );
}

#[test]
fn the_scan_finds_a_stage_name_in_code_and_not_in_comments_or_tests() {
    let names = ["WAIT_APPROVAL"];
    let code = "fn f(s: &S) -> bool {\n    // not \"WAIT_APPROVAL\" here\n    s.name == \"WAIT_APPROVAL\"\n}\n#[cfg(test)]\nmod tests { const X: &str = \"WAIT_APPROVAL\"; }\n";
    assert_eq!(
        named_stages("cli/src/x.rs", code, &names),
        vec![(3, "WAIT_APPROVAL".to_owned())]
    );
    let tsx = "return s.name === 'WAIT_APPROVAL' && s.status === \"RUNNING\";\n";
    assert_eq!(named_stages("console/src/x.tsx", tsx, &names).len(), 1);
    let catalogue = "pub const PIPECD_STAGES: &[&str] = &[\n    \"WAIT_APPROVAL\",\n];\nconst Y: &str = \"WAIT_APPROVAL\";\n";
    assert_eq!(
        named_stages("shared/sdk/src/planner.rs", catalogue, &names),
        vec![(4, "WAIT_APPROVAL".to_owned())]
    );
}
