//! Code from a git source (PipeCD's `spec.source: {git, ref, path}`): a job fetches the remote
//! at the ref and leaves the directory as a tar ([`TAR`]); gannet turns the tar into a zip
//! that depends on the tree alone: entries sorted by path, one fixed time, each file's mode
//! kept as executable or not, links kept as links. The same tree always gives the same bytes,
//! so deploying it again changes nothing on Lambda (the same `CodeSha256`).
//!
//! The job runs with the base environment plus the variables the deploy target's
//! `git.allowEnv` names (a credential helper's, `GIT_SSH_COMMAND`), never a prompt. Its key
//! is derived from the deployment, the stage, the tree and the commit, so a step delivered
//! twice finds the job it started.

use std::io::{Read, Write};
use std::path::Path;

use gannet_domain::{CommitSha, GoDuration};
use gannet_sdk::jobs::{self, shell_quote as quote, JobEnd, JobKey, Once};
use gannet_sdk::plugin::{StepContext, StepError};
use gannet_sdk::targets::{self, FileRemotes};
use serde::Deserialize;

use crate::function::Code;
use crate::manifest::CodeSource;

/// The file the job leaves the source directory in.
pub(crate) const TAR: &str = "code.tar";
/// The file the job leaves what failed in.
const ERROR: &str = "error.txt";
/// A fetch job is killed after this long.
const TIME_LIMIT: GoDuration = GoDuration::from_secs(600);
/// The largest zip Lambda takes in the request itself.
const MAX_ZIP_BYTES: usize = 50 * 1024 * 1024;
/// Lambda's limit on a function's unzipped size.
const MAX_UNZIPPED_BYTES: u64 = 250 * 1024 * 1024;
/// The zip format without its 64-bit extension holds at most this many entries.
const MAX_ENTRIES: usize = 65_535;

/// A deploy target's `git`: how fetch jobs reach git remotes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GitSettings {
    /// Variables of gannet's environment the job gets (credentials for the remote).
    pub allow_env: Vec<String>,
    /// `file://` remotes (repositories on gannet's own machine), for tests and mirrors.
    pub allow_file_remotes: bool,
}

/// Which of a step's trees the code is fetched for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tree {
    This,
    Running,
}

/// The code of a git source, as far as a step has got.
pub(crate) enum Fetched {
    /// The manifest names no git source.
    NotGit,
    /// The job runs: look again after this long.
    Running(GoDuration),
    Ready(Code),
    /// The fetch failed, or what it left cannot be deployed: why.
    Failed(String),
}

/// The code of a git source (`code`, from the manifest in `dir`, the app's directory at
/// `commit`), fetched by a job the first time a step asks.
pub(crate) async fn fetch(
    ctx: &StepContext<'_>,
    git: &GitSettings,
    tree: Tree,
    dir: &Path,
    commit: &CommitSha,
    code: &CodeSource,
) -> Result<Fetched, StepError> {
    let d = ctx.deployment;
    let CodeSource::Git {
        remote,
        git_ref,
        path,
    } = code
    else {
        return Ok(Fetched::NotGit);
    };
    let what = match path.as_str() {
        "" => format!("{remote} at {git_ref}"),
        p => format!("{p} of {remote} at {git_ref}"),
    };
    let key = JobKey::of(&[
        (d.id.as_str(), 36),
        (ctx.stage.id.as_str(), 16),
        (
            if tree == Tree::This {
                "this"
            } else {
                "running"
            },
            7,
        ),
        (commit.as_str(), 8),
    ]);
    let make = || script(git, remote, git_ref, path);
    let end = match jobs::start_once(ctx.jobs, &key, dir, TIME_LIMIT, make).await? {
        Once::Running(after) => return Ok(Fetched::Running(after)),
        Once::Refused(why) => return Ok(Fetched::Failed(format!("spec.source: {why}"))),
        Once::Ended(end) => end,
    };
    if end != JobEnd::Exited(0) {
        let why = jobs::failure(ctx.jobs, &key, &end, ERROR).await;
        return Ok(Fetched::Failed(format!("fetching {what} failed: {why}")));
    }
    let tar = match ctx.jobs.output(&key, TAR).await {
        Ok(Some(tar)) => tar,
        Ok(None) => return Ok(Fetched::Failed(format!("fetching {what} left no code"))),
        Err(jobs::JobError::Refused(why)) => {
            return Ok(Fetched::Failed(format!(
                "the code of {what}: {why}; Lambda takes at most 50 MB in the request, so upload \
                 a larger function to S3 and use spec.s3Bucket and spec.s3Key"
            )))
        }
        Err(e) => return Err(e.into()),
    };
    Ok(match zip_of_tar(&tar) {
        Ok(zip) => Fetched::Ready(Code::zip(zip)),
        Err(why) => Fetched::Failed(format!("the code of {what}: {why}")),
    })
}

/// The job's script and environment: fetch `remote` at `git_ref` (shallow, or whole when the
/// remote refuses a shallow fetch of that ref) and archive `path` of it as [`TAR`].
fn script(
    git: &GitSettings,
    remote: &str,
    git_ref: &str,
    path: &str,
) -> Result<(String, Vec<(String, String)>), String> {
    let files = if git.allow_file_remotes {
        FileRemotes::Allowed
    } else {
        FileRemotes::Refused {
            setting: "the deploy target's git.allowFileRemotes",
        }
    };
    targets::git_remote(remote, files).map_err(|why| format!("git {remote:?} {why}"))?;
    let mut env = jobs::inherited_env(&git.allow_env);
    env.push(("GIT_TERMINAL_PROMPT".into(), "0".into()));
    if !git.allow_env.iter().any(|n| n == "GIT_SSH_COMMAND") {
        env.push(("GIT_SSH_COMMAND".into(), "ssh -o BatchMode=yes".into()));
    }
    // `"$rev"` followed by the quoted rest: the tree of the ref, or its directory.
    let tree = if path.is_empty() {
        quote("^{tree}")
    } else {
        quote(&format!(":{path}"))
    };
    let s = format!(
        r#"set -u
w="$(mktemp -d)"
fail() {{ {{ printf '%s\n' "$1"; tail -n 5 "$w/err"; }} > "$GANNET_JOB_OUT/{ERROR}"; cat "$w/err" >&2; exit 1; }}
git init -q "$w/src" 2> "$w/err" || fail 'git init failed:'
cd "$w/src"
if git fetch -q --depth 1 -- {remote} {git_ref} 2> "$w/err"; then
  rev="$(git rev-parse FETCH_HEAD)"
else
  git fetch -q -- {remote} '+refs/heads/*:refs/remotes/origin/*' '+refs/tags/*:refs/tags/*' 2> "$w/err" || fail {no_ref}
  rev="$(git rev-parse -q --verify origin/{git_ref}'^{{commit}}' || git rev-parse -q --verify {git_ref}'^{{commit}}')" || fail {no_ref}
fi
git cat-file -e "$rev"{tree} 2> "$w/err" || fail {no_path}
git archive --format=tar -o "$GANNET_JOB_OUT/{TAR}" "$rev"{tree} 2> "$w/err" || fail 'git archive failed:'
echo "fetched {what} at commit $rev"
"#,
        remote = quote(remote),
        git_ref = quote(git_ref),
        no_ref = quote(&format!("cannot fetch ref {git_ref} from {remote}:")),
        no_path = quote(&format!("{remote} at {git_ref} has no directory {path}")),
        what = if path.is_empty() {
            "the root".to_owned()
        } else {
            path.replace(['\'', '"', '$', '`', '\\'], "_")
        },
    );
    Ok((s, env))
}

/// One file of the zip.
struct Entry {
    name: String,
    /// The Unix mode, type bits included.
    mode: u32,
    data: Vec<u8>,
}

/// The zip of the tar's files and links, the same bytes for the same tree (see the module
/// docs); why not, for a tar that cannot be a function.
pub(crate) fn zip_of_tar(tar: &[u8]) -> Result<Vec<u8>, String> {
    let mut entries = Vec::new();
    let mut unzipped = 0u64;
    let mut archive = tar::Archive::new(tar);
    let list = archive
        .entries()
        .map_err(|e| format!("not a tar archive: {e}"))?;
    for entry in list {
        let mut entry = entry.map_err(|e| format!("a broken tar entry: {e}"))?;
        let path = entry
            .path()
            .map_err(|e| format!("a tar entry without a path: {e}"))?;
        let name = path.to_string_lossy().trim_start_matches("./").to_owned();
        let climbs = name.split('/').any(|p| p == "..");
        if name.starts_with('/') || climbs {
            return Err(format!("{name:?} leads out of the directory"));
        }
        let header = entry.header();
        let kind = header.entry_type();
        let mode = header.mode().unwrap_or(0o644);
        let (mode, data) = if kind.is_dir() || kind.is_pax_global_extensions() {
            continue;
        } else if kind.is_file() {
            let mut data = Vec::new();
            entry
                .read_to_end(&mut data)
                .map_err(|e| format!("cannot read {name}: {e}"))?;
            let perm = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
            (0o100_000 | perm, data)
        } else if kind.is_symlink() {
            let target = entry
                .link_name()
                .ok()
                .flatten()
                .ok_or_else(|| format!("the link {name} names no target"))?;
            (0o120_777, target.to_string_lossy().as_bytes().to_vec())
        } else {
            return Err(format!(
                "{name} is neither a file, a directory nor a link; a function holds only those"
            ));
        };
        unzipped += data.len() as u64;
        if unzipped > MAX_UNZIPPED_BYTES {
            return Err("more than 250 MB unzipped, Lambda's limit for a function".into());
        }
        entries.push(Entry { name, mode, data });
    }
    if entries.is_empty() {
        return Err("the directory holds no file".into());
    }
    if entries.len() > MAX_ENTRIES {
        return Err(format!(
            "{} files; a zip holds at most {MAX_ENTRIES}",
            entries.len()
        ));
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let zip = write_zip(&entries)?;
    if zip.len() > MAX_ZIP_BYTES {
        return Err(format!(
            "{} MB zipped; Lambda takes at most 50 MB in the request, so upload it to S3 and use \
             spec.s3Bucket and spec.s3Key",
            zip.len() / (1024 * 1024)
        ));
    }
    Ok(zip)
}

/// 1980-01-01 00:00, the zip format's first date, for every entry.
const DOS_DATE: u16 = (1 << 5) | 1;
const DOS_TIME: u16 = 0;
/// Names are UTF-8 (general purpose flag bit 11).
const UTF8: u16 = 1 << 11;
const DEFLATE: u16 = 8;
/// Version 2.0 (deflate); "made by" Unix (3), so the external attributes hold the mode.
const VERSION: u16 = 20;
const MADE_BY_UNIX: u16 = (3 << 8) | VERSION;

fn write_zip(entries: &[Entry]) -> Result<Vec<u8>, String> {
    let too_big = || "a file or the whole is too large for a zip without ZIP64".to_owned();
    let u32_of = |n: usize| u32::try_from(n).map_err(|_| too_big());
    let mut out = Vec::new();
    let mut central = Vec::new();
    for e in entries {
        let mut deflate =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        deflate
            .write_all(&e.data)
            .and_then(|()| deflate.flush())
            .map_err(|err| format!("cannot compress {}: {err}", e.name))?;
        let packed = deflate
            .finish()
            .map_err(|err| format!("cannot compress {}: {err}", e.name))?;
        let crc = crc32fast::hash(&e.data);
        let name = e.name.as_bytes();
        let name_len =
            u16::try_from(name.len()).map_err(|_| format!("{}: name too long", e.name))?;
        let offset = u32_of(out.len())?;
        let (packed_len, plain_len) = (u32_of(packed.len())?, u32_of(e.data.len())?);
        // Local file header.
        out.extend(0x0403_4b50u32.to_le_bytes());
        for half in [VERSION, UTF8, DEFLATE, DOS_TIME, DOS_DATE] {
            out.extend(half.to_le_bytes());
        }
        for word in [crc, packed_len, plain_len] {
            out.extend(word.to_le_bytes());
        }
        out.extend(name_len.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(name);
        out.extend(&packed);
        // Its central directory record.
        central.extend(0x0201_4b50u32.to_le_bytes());
        for half in [MADE_BY_UNIX, VERSION, UTF8, DEFLATE, DOS_TIME, DOS_DATE] {
            central.extend(half.to_le_bytes());
        }
        for word in [crc, packed_len, plain_len] {
            central.extend(word.to_le_bytes());
        }
        // Name length, no extra field, no comment, disk 0, no internal attributes.
        for half in [name_len, 0, 0, 0, 0] {
            central.extend(half.to_le_bytes());
        }
        central.extend((e.mode << 16).to_le_bytes());
        central.extend(offset.to_le_bytes());
        central.extend(name);
    }
    let count = u16::try_from(entries.len()).map_err(|_| too_big())?;
    let (central_at, central_len) = (u32_of(out.len())?, u32_of(central.len())?);
    out.extend(&central);
    // End of central directory.
    out.extend(0x0605_4b50u32.to_le_bytes());
    for half in [0u16, 0, count, count] {
        out.extend(half.to_le_bytes());
    }
    out.extend(central_len.to_le_bytes());
    out.extend(central_at.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests;
