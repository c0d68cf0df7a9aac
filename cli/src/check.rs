//! `gannet config check`: validates every app config under the given paths, with the
//! manifests each references, and prints `file:line: field: message` per problem.

use std::path::{Path, PathBuf};

use gannet_config::is_app_config_path;
use gannet_sdk::check::{check_app_files, AppCheck, Issue};
use gannet_sdk::tree::{self, TreeError};

/// Checks the configs under `paths`; true when every one is valid. A config and the files it
/// names are read through gannet's checked reader ([`gannet_sdk::tree`]) from the repository
/// the path is in: an absolute path, one that climbs out of the repository, or a link (or chain
/// of links) leaving it is reported with its file and field, and never read.
pub fn run(paths: &[PathBuf], json: bool) -> anyhow::Result<bool> {
    let plugins = gannet_plugins::registry().without_settings()?;
    let mut files = Vec::new();
    for p in paths {
        collect_in_repo(p, &mut files)?;
    }
    files.sort();
    let mut results = Vec::new();
    for file in &files {
        results.push(check_file(file, &plugins));
    }
    let failed = results.iter().filter(|r| !r.ok).count();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"apps": results}))?
        );
    } else {
        print_human(&results);
    }
    Ok(failed == 0)
}

fn print_human(results: &[AppCheck]) {
    let mut unsupported = 0;
    let mut invalid = 0;
    let mut warnings = 0;
    let show = |e: &Issue, what: &str| {
        let line = e.line.map(|l| format!("{l}:")).unwrap_or_default();
        // A YAML syntax error is about no field; say so rather than print an empty one.
        let field = if e.field.is_empty() {
            "(syntax)"
        } else {
            e.field.as_str()
        };
        println!("{}:{line} {field}: {what}{}", e.file, e.message);
    };
    for r in results {
        for e in &r.errors {
            show(e, "");
            if e.unsupported {
                unsupported += 1;
            } else {
                invalid += 1;
            }
        }
        for w in &r.warnings {
            show(w, "warning: ");
            warnings += 1;
        }
    }
    let ok = results.iter().filter(|r| r.ok).count();
    let warned = match warnings {
        0 => String::new(),
        n => format!(", {n} warning{}", if n == 1 { "" } else { "s" }),
    };
    println!(
        "{} app configs checked: {ok} ok, {} with problems ({invalid} errors, {unsupported} features not supported yet){warned}",
        results.len(),
        results.len() - ok
    );
}

/// A config file found: the repository it is in, its path there, and its path as shown.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct ConfigFile {
    shown: String,
    root: PathBuf,
    rel: String,
}

fn check_file(file: &ConfigFile, plugins: &gannet_sdk::plugin::Plugins) -> AppCheck {
    let max = gannet_config::bounded::MAX_BYTES as u64;
    let text = match tree::read(&file.root, &file.rel, max) {
        Ok(text) => text,
        Err(e) => {
            return AppCheck {
                path: file.shown.clone(),
                kind: None,
                ok: false,
                errors: vec![Issue {
                    file: file.shown.clone(),
                    line: None,
                    field: "(file)".to_owned(),
                    message: format!("the app config {e}"),
                    unsupported: false,
                }],
                warnings: Vec::new(),
            }
        }
    };
    let dir = file.rel.rsplit_once('/').map_or("", |(d, _)| d);
    let read = |rel: &str| {
        let path = tree::in_repo(dir, rel).ok_or(TreeError::OutsidePath)?;
        tree::read(&file.root, &path, max)
    };
    // The app's directory on disk, where it stays inside the repository: the platform plugin
    // checks every file a deployment would read from it.
    let app_dir = tree::dir_in(&file.root, dir);
    let app_dir = app_dir.as_deref().map(|d| (d, file.rel.as_str()));
    check_app_files(&file.shown, &text, plugins, &read, app_dir)
}

/// The configs at `path` (a config file, or a directory searched for them), each with the
/// repository it is in: the nearest directory above holding `.git`, or else `path` itself (its
/// directory, for a file).
fn collect_in_repo(path: &Path, out: &mut Vec<ConfigFile>) -> anyhow::Result<()> {
    let meta = std::fs::metadata(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let (dir, found) = if meta.is_file() {
        let name = path
            .file_name()
            .ok_or_else(|| anyhow::anyhow!("{} is not a file name", path.display()))?;
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        (dir, vec![PathBuf::from(name)])
    } else {
        let mut found = Vec::new();
        collect(path, Path::new(""), &mut found)?;
        (path, found)
    };
    let dir = std::fs::canonicalize(dir)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", dir.display()))?;
    let root = dir
        .ancestors()
        .find(|a| a.join(".git").exists())
        .unwrap_or(&dir)
        .to_owned();
    let below = dir.strip_prefix(&root).unwrap_or(Path::new(""));
    for rel in found {
        let shown = if meta.is_file() {
            path.display().to_string()
        } else {
            path.join(&rel).display().to_string()
        };
        out.push(ConfigFile {
            shown,
            rel: below.join(&rel).to_string_lossy().into_owned(),
            root: root.clone(),
        });
    }
    Ok(())
}

/// The config files under `base.join(rel)`, relative to `base`. Directories are searched
/// without following links; a linked config is listed, and the checked reader judges it.
fn collect(base: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let path = base.join(rel);
    let mut entries: Vec<_> = std::fs::read_dir(&path)
        .map_err(|e| anyhow::anyhow!("cannot list {}: {e}", path.display()))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            if name != ".git" && name != "node_modules" {
                collect(base, &rel.join(&name), out)?;
            }
        } else if is_app_config_path(&name) {
            out.push(rel.join(&name));
        }
    }
    Ok(())
}
