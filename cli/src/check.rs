//! `gannet config check`: validates every app config under the given paths, with the
//! manifests each references, and prints `file:line: field: message` per problem.

use std::path::{Path, PathBuf};

use gannet_core::check::{check_app, AppCheck};
use gannet_core::config::is_app_config_path;

/// Checks the configs under `paths`; true when every one is valid.
pub fn run(paths: &[PathBuf], json: bool) -> anyhow::Result<bool> {
    let plugins = gannet_plugins::registry().without_settings()?;
    let mut files = Vec::new();
    for p in paths {
        collect(p, &mut files)?;
    }
    files.sort();
    let mut results = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
        let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        let read = move |rel: &str| std::fs::read_to_string(dir.join(rel)).ok();
        results.push(check_app(
            &file.display().to_string(),
            &text,
            &plugins,
            &read,
        ));
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
    for r in results {
        for e in &r.errors {
            let line = e.line.map(|l| format!("{l}:")).unwrap_or_default();
            // A YAML syntax error is about no field; say so rather than print an empty one.
            let field = if e.field.is_empty() {
                "(syntax)"
            } else {
                e.field.as_str()
            };
            println!("{}:{line} {field}: {}", e.file, e.message);
            if e.unsupported {
                unsupported += 1;
            } else {
                invalid += 1;
            }
        }
    }
    let ok = results.iter().filter(|r| r.ok).count();
    println!(
        "{} app configs checked: {ok} ok, {} with problems ({invalid} errors, {unsupported} features not supported yet)",
        results.len(),
        results.len() - ok
    );
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let meta = std::fs::metadata(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    if meta.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<_> = std::fs::read_dir(path)
        .map_err(|e| anyhow::anyhow!("cannot list {}: {e}", path.display()))?
        .filter_map(Result::ok)
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let p = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if name != ".git" && name != "node_modules" {
                collect(&p, out)?;
            }
        } else if is_app_config_path(&name) {
            out.push(p);
        }
    }
    Ok(())
}
