//! What keeps `terraform init`'s work between the jobs of one app and deploy target: which
//! cache a job uses ([`cache_name`]) and the key that says when what `init` made is still
//! valid ([`init_key`]). The script does the rest ([`crate::script`]).
//!
//! A job's cache ([`gannet_sdk::jobs::CACHE_ENV`]) holds `plugins/` (terraform's plugin
//! cache, `TF_PLUGIN_CACHE_DIR`) and `init/`: a copy of the `.terraform` directory the last
//! `init` made (`terraform/`), the lock file that `init` wrote when the app has none
//! (`lock.hcl`), and `key`, the key it was made for. A job whose key equals `init/key` copies
//! `init/terraform` into its working directory as `.terraform` and skips `init`; any other job
//! runs `init` and replaces `init/` (built aside, `key` written last, renamed into place).
//!
//! The key is a hash of everything `init`'s result depends on, so that a change re-runs it:
//!
//! - the lock file `.terraform.lock.hcl` (the providers picked), or its absence;
//! - every `terraform { … }` block (required versions and providers, the backend or `cloud`
//!   block) and every `module` call's `source` and `version`, of every `.tf` and `.tf.json`
//!   file under the app's directory (local modules' own calls too), with the file's path: a
//!   changed module source or backend re-runs `init`. A file this reader cannot follow counts
//!   whole. Other blocks (resources, variables, a module call's inputs) are not in it: `init`
//!   does not read them, and keying on them would re-run `init` on every commit;
//! - the terraform to run (the command the target names for the app's `terraformVersion`,
//!   and, added by the script, the size and time of the file it resolves to);
//! - the deploy target: its name, its `env` (settings written in gannet.yaml, such as
//!   `TF_CLI_CONFIG_FILE`) and the names it lets through (`allowEnv`; their values are
//!   credentials and stay out);
//! - `init`'s own arguments: the app's `commandFlags` and `commandEnvs` (shared and init),
//!   such as `-backend-config`.
//!
//! Terraform checks a reused `.terraform` again itself: a plan whose backend, module sources
//! or providers differ from what `init` installed fails asking for `init`, it never runs
//! with them. The cache is per app and deploy target, so no other target's job reads the
//! backend settings `.terraform/terraform.tfstate` keeps; `init` writes there what its
//! arguments and the configuration say, never the job's environment (credentials).

use std::path::{Path, PathBuf};

use gannet_domain::AppId;
use gannet_sdk::jobs::JobKey;
use sha2::{Digest, Sha256};

use crate::spec::TerraformInput;
use crate::target::DeployTarget;

/// Bumped when the key's parts or the cache's layout change, so no older entry is trusted.
const LAYOUT: &str = "gannet terraform init cache 1";
/// The most files and directories read for the key; past it the key is a fresh one (no
/// reuse), so a huge tree costs no more than this.
const MAX_ENTRIES: usize = 20_000;

/// The cache the jobs of `app` on `target` share: no other app or target reads it.
pub fn cache_name(app: &AppId, target: &DeployTarget) -> String {
    JobKey::of(&[
        ("terraform", 9),
        (app.as_str(), 40),
        (target.name.as_str(), 30),
    ])
    .as_str()
    .to_owned()
}

/// The key `init`'s result in `dir` is valid for, as hex; `None` when the directory cannot be
/// read as a whole (then `init` runs and nothing is kept).
pub fn init_key(dir: &Path, target: &DeployTarget, input: &TerraformInput) -> Option<String> {
    let mut hash = Sha256::new();
    let mut part = |name: &str, value: &[u8]| {
        hash.update(name.as_bytes());
        hash.update((value.len() as u64).to_le_bytes());
        hash.update(value);
    };
    part("layout", LAYOUT.as_bytes());
    part(
        "terraform",
        target.binary(&input.terraform_version).as_bytes(),
    );
    part("version", input.terraform_version.as_bytes());
    part("target", target.name.as_bytes());
    for (k, v) in &target.env {
        part("env", format!("{k}={v}").as_bytes());
    }
    for name in &target.allow_env {
        part("allowEnv", name.as_bytes());
    }
    let (flags, envs) = (&input.command_flags, &input.command_envs);
    for f in flags.shared.iter().chain(&flags.init) {
        part("flag", f.as_bytes());
    }
    for e in envs.shared.iter().chain(&envs.init) {
        part("commandEnv", e.as_bytes());
    }
    match std::fs::read(dir.join(".terraform.lock.hcl")) {
        Ok(lock) => part("lock", &lock),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => part("no lock", b""),
        Err(_) => return None,
    }
    for file in config_files(dir)? {
        let text = std::fs::read_to_string(&file).ok()?;
        let rel = file.strip_prefix(dir).unwrap_or(&file).to_string_lossy();
        let json = rel.ends_with(".json");
        let blocks = if json {
            json_init_blocks(&text)
        } else {
            init_blocks(&text)
        };
        match blocks {
            Some(blocks) => part(&format!("blocks {rel}"), blocks.as_bytes()),
            None => part(&format!("file {rel}"), text.as_bytes()),
        }
    }
    Some(hex::encode(hash.finalize()))
}

/// The `.tf` and `.tf.json` files under `dir` (not in `.terraform` or `.git`), sorted.
fn config_files(dir: &Path) -> Option<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_owned()];
    let mut seen = 0;
    while let Some(at) = todo.pop() {
        for entry in std::fs::read_dir(&at).ok()? {
            let entry = entry.ok()?;
            seen += 1;
            if seen > MAX_ENTRIES {
                return None;
            }
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let kind = entry.file_type().ok()?;
            if kind.is_dir() {
                if name != ".terraform" && name != ".git" {
                    todo.push(entry.path());
                }
            } else if name.ends_with(".tf") || name.ends_with(".tf.json") {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    Some(files)
}

/// Of a `.tf` file, the text `init` reads: each `terraform` block whole, and each `module`
/// block's header with its `source` and `version` lines. `None` when the file does not read as
/// blocks (it then counts whole).
pub(crate) fn init_blocks(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    loop {
        i = skip_space(b, i)?;
        if i >= b.len() {
            return Some(out);
        }
        let start = i;
        i = skip_ident(b, i);
        if i == start {
            return None;
        }
        let kind = &text[start..i];
        // The labels, up to the block's `{`.
        loop {
            i = skip_space(b, i)?;
            match b.get(i)? {
                b'{' => break,
                b'"' => i = skip_string(b, i)?,
                _ => {
                    let at = i;
                    i = skip_ident(b, i);
                    if i == at {
                        return None;
                    }
                }
            }
        }
        let end = skip_block(b, i)?;
        let block = &text[start..end];
        match kind {
            "terraform" => {
                out.push_str(block);
                out.push('\n');
            }
            "module" => {
                out.push_str(&text[start..i]);
                out.push('\n');
                for line in block.lines().map(str::trim) {
                    let attr = line.split('=').next().unwrap_or("").trim();
                    if line.contains('=') && (attr == "source" || attr == "version") {
                        out.push_str(line);
                        out.push('\n');
                    }
                }
            }
            _ => {}
        }
        i = end;
    }
}

/// Of a `.tf.json` file, its `terraform` and `module` objects; `None` when it is not JSON.
fn json_init_blocks(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let kept = serde_json::json!({
        "terraform": value.get("terraform"),
        "module": value.get("module"),
    });
    Some(kept.to_string())
}

fn skip_ident(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b'-')) {
        i += 1;
    }
    i
}

/// Past whitespace and comments; `None` in an unterminated comment.
fn skip_space(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        match (b.get(i), b.get(i + 1)) {
            (Some(c), _) if c.is_ascii_whitespace() => i += 1,
            (Some(b'#'), _) | (Some(b'/'), Some(b'/')) => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            (Some(b'/'), Some(b'*')) => {
                let rest = &b[i + 2..];
                let end = rest.windows(2).position(|w| w == b"*/")?;
                i += 2 + end + 2;
            }
            _ => return Some(i),
        }
    }
}

/// Past the string starting at `i` (a `"`), escapes and `${…}` templates included.
fn skip_string(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match b.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            b'$' | b'%' if b.get(i + 1) == Some(&b'{') => i = skip_block(b, i + 1)?,
            b'\n' => return None,
            _ => i += 1,
        }
    }
}

/// Past the heredoc whose `<<` is at `i`: to the end of the line that closes it.
fn skip_heredoc(b: &[u8], mut i: usize) -> Option<usize> {
    i += 2;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    let start = i;
    i = skip_ident(b, i);
    if i == start {
        return None;
    }
    let tag = &b[start..i];
    while i < b.len() && b[i] != b'\n' {
        i += 1;
    }
    loop {
        i += 1;
        let line_start = i;
        while i < b.len() && b[i] != b'\n' {
            i += 1;
        }
        if b[line_start..i].trim_ascii() == tag {
            return Some(i);
        }
        if i >= b.len() {
            return None;
        }
    }
}

/// Past the bracketed text starting at `i` (a `{`), up to its matching `}`.
fn skip_block(b: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0usize;
    loop {
        i = skip_space(b, i)?;
        match b.get(i)? {
            b'{' => {
                depth += 1;
                i += 1;
            }
            b'}' => {
                depth = depth.checked_sub(1)?;
                i += 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            b'"' => i = skip_string(b, i)?,
            b'<' if b.get(i + 1) == Some(&b'<') => i = skip_heredoc(b, i)?,
            _ => i += 1,
        }
    }
}
