//! Trees at a commit from GitHub's tarball (`/repos/{o}/{r}/tarball/{sha}`): downloaded once per
//! sha, unpacked off to the side and renamed into `<cache>/<repo>/<sha>`, so a crash never
//! leaves a half tree where readers look, and a tree that is there is complete.
//!
//! The archive's top-level directory (`owner-repo-sha7/`) is stripped. Entries that would land
//! outside the tree are refused: `..` or absolute paths, symbolic links whose target leaves the
//! tree, paths through a symbolic link, hard links and special files.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};

use flate2::read::GzDecoder;
use gannet_domain::ids::CommitSha;

use super::client::{ApiError, GithubClient};

static NEXT_STAGING: AtomicU64 = AtomicU64::new(0);

/// Bounds on one tarball, against archives that would fill the disk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub download_bytes: u64,
    pub unpacked_bytes: u64,
    pub entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            download_bytes: 256 << 20,
            unpacked_bytes: 1 << 30,
            entries: 200_000,
        }
    }
}

/// Unpacked trees under one directory.
pub(crate) struct TreeCache {
    root: PathBuf,
    limits: Limits,
    /// One builder per tree at a time within this process.
    building: std::sync::Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum TreeError {
    #[error("downloading the tarball failed")]
    Download(#[source] ApiError),
    #[error("unpacking the tarball failed")]
    Unpack(#[source] UnpackError),
    #[error("cannot {action} {}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum UnpackError {
    #[error("refused entry {entry:?}: {reason}")]
    Unsafe { entry: String, reason: &'static str },
    #[error("the tree is larger than {0} bytes")]
    TooLarge(u64),
    #[error("the archive has more than {0} entries")]
    TooManyEntries(usize),
    #[error("cannot read the archive")]
    Archive(#[source] io::Error),
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// An unpacked tree unused this long may be removed (a step's invocation lasts 15 min at most).
const TREES_IDLE: std::time::Duration = std::time::Duration::from_secs(3600);
/// The most recently used trees of each repository kept whatever their age.
const TREES_KEPT: usize = 3;

impl TreeCache {
    pub fn new(root: PathBuf, limits: Limits) -> Self {
        Self {
            root,
            limits,
            building: std::sync::Mutex::default(),
        }
    }

    /// The unpacked tree of `sha` in the repository `full_name` (`owner/name`), cached under
    /// `repo_dir`; downloaded only when it is not there yet.
    pub async fn tree(
        &self,
        client: &GithubClient,
        repo_dir: &str,
        full_name: &str,
        sha: &CommitSha,
    ) -> Result<PathBuf, TreeError> {
        let target = self.root.join(repo_dir).join(sha.as_str());
        if is_dir(&target).await {
            crate::prune::touch(&target);
            return Ok(target);
        }
        let lock = self.lock_for(&target);
        let _held = lock.lock().await;
        if is_dir(&target).await {
            crate::prune::touch(&target);
            return Ok(target);
        }
        // Before unpacking another tree, make room: on Lambda, /tmp is small (512 MB by
        // default) and outlives invocations.
        let root = self.root.clone();
        let pruned =
            tokio::task::spawn_blocking(move || crate::prune::trees(&root, TREES_IDLE, TREES_KEPT))
                .await
                .map_err(io::Error::other)
                .and_then(|r| r);
        if let Err(err) = pruned {
            tracing::warn!(error = %err, "pruning unpacked trees failed");
        }
        let n = NEXT_STAGING.fetch_add(1, Ordering::Relaxed);
        let label = format!("{repo_dir}-{}-{}-{n}", sha.short(), std::process::id());
        let staging = self.root.join(".staging");
        let archive = staging.join(format!("{label}.tar.gz"));
        let unpacked = staging.join(&label);
        for dir in [&staging, &self.root.join(repo_dir)] {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|source| io_error("create", dir, source))?;
        }
        let built = self
            .build(client, full_name, sha, &archive, &unpacked, &target)
            .await;
        remove_quietly(&archive).await;
        match built {
            Ok(()) => {
                crate::prune::touch(&target);
                Ok(target)
            }
            Err(_) if is_dir(&target).await => {
                // Another process put the tree in place first; it is complete.
                remove_quietly(&unpacked).await;
                Ok(target)
            }
            Err(e) => {
                remove_quietly(&unpacked).await;
                Err(e)
            }
        }
    }

    async fn build(
        &self,
        client: &GithubClient,
        full_name: &str,
        sha: &CommitSha,
        archive: &Path,
        unpacked: &Path,
        target: &Path,
    ) -> Result<(), TreeError> {
        let path = format!("/repos/{full_name}/tarball/{sha}");
        client
            .download(&path, archive, self.limits.download_bytes)
            .await
            .map_err(TreeError::Download)?;
        let (archive_owned, unpacked_owned, limits) =
            (archive.to_owned(), unpacked.to_owned(), self.limits);
        tokio::task::spawn_blocking(move || unpack(&archive_owned, &unpacked_owned, limits))
            .await
            .map_err(|e| io_error("unpack", unpacked, io::Error::other(e)))?
            .map_err(TreeError::Unpack)?;
        tokio::fs::rename(unpacked, target)
            .await
            .map_err(|source| io_error("move into place", target, source))
    }

    fn lock_for(&self, target: &Path) -> Arc<tokio::sync::Mutex<()>> {
        let mut building = self.building.lock().unwrap_or_else(PoisonError::into_inner);
        building.retain(|_, lock| Arc::strong_count(lock) > 1);
        building.entry(target.to_owned()).or_default().clone()
    }
}

fn io_error(action: &'static str, path: &Path, source: io::Error) -> TreeError {
    TreeError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

async fn is_dir(path: &Path) -> bool {
    tokio::fs::metadata(path).await.is_ok_and(|m| m.is_dir())
}

async fn remove_quietly(path: &Path) {
    let removed = match tokio::fs::symlink_metadata(path).await {
        Ok(m) if m.is_dir() => tokio::fs::remove_dir_all(path).await,
        Ok(_) => tokio::fs::remove_file(path).await,
        Err(_) => Ok(()),
    };
    if let Err(error) = removed {
        tracing::warn!(path = %path.display(), %error, "could not remove staging file");
    }
}

/// Unpacks the gzipped tar at `archive` into the new directory `into`, stripping the top-level
/// directory and refusing entries that would escape.
pub(crate) fn unpack(archive: &Path, into: &Path, limits: Limits) -> Result<(), UnpackError> {
    let write_error = |path: &Path| {
        let path = path.to_owned();
        move |source| UnpackError::Write { path, source }
    };
    fs::create_dir_all(into).map_err(write_error(into))?;
    let file = fs::File::open(archive).map_err(UnpackError::Archive)?;
    let mut tar = tar::Archive::new(GzDecoder::new(BufReader::new(file)));
    let mut links = HashSet::new();
    let (mut bytes, mut count) = (0u64, 0usize);
    for entry in tar.entries().map_err(UnpackError::Archive)? {
        let mut entry = entry.map_err(UnpackError::Archive)?;
        let kind = entry.header().entry_type();
        if kind.is_pax_global_extensions() || kind.is_pax_local_extensions() {
            continue;
        }
        count += 1;
        if count > limits.entries {
            return Err(UnpackError::TooManyEntries(limits.entries));
        }
        let raw = entry.path().map_err(UnpackError::Archive)?.into_owned();
        let name = raw.display().to_string();
        let refuse = |reason| UnpackError::Unsafe {
            entry: name.clone(),
            reason,
        };
        let Some(rel) = inside_path(&raw).map_err(refuse)? else {
            continue; // the top-level directory itself
        };
        if rel.ancestors().skip(1).any(|a| links.contains(a)) || links.contains(&rel) {
            return Err(refuse("its path goes through a symbolic link"));
        }
        let dest = into.join(&rel);
        if kind.is_dir() {
            fs::create_dir_all(&dest).map_err(write_error(&dest))?;
        } else if kind.is_file() {
            bytes += entry.size();
            if bytes > limits.unpacked_bytes {
                return Err(UnpackError::TooLarge(limits.unpacked_bytes));
            }
            create_parent(&dest)?;
            let mut out = fs::File::create(&dest).map_err(write_error(&dest))?;
            io::copy(&mut entry, &mut out).map_err(UnpackError::Archive)?;
            let executable = entry.header().mode().is_ok_and(|m| m & 0o111 != 0);
            let mode = if executable { 0o755 } else { 0o644 };
            fs::set_permissions(&dest, fs::Permissions::from_mode(mode))
                .map_err(write_error(&dest))?;
        } else if kind.is_symlink() {
            let target = entry
                .link_name()
                .map_err(UnpackError::Archive)?
                .ok_or_else(|| refuse("symbolic link without a target"))?;
            if !link_stays_inside(&rel, &target) {
                return Err(refuse("symbolic link leads outside the tree"));
            }
            create_parent(&dest)?;
            std::os::unix::fs::symlink(&target, &dest).map_err(write_error(&dest))?;
            links.insert(rel);
        } else {
            return Err(refuse("hard links and special files are not allowed"));
        }
    }
    // Links to links can still climb out where each looked fine alone: resolve them for real.
    let root = fs::canonicalize(into).map_err(write_error(into))?;
    for link in &links {
        if let Ok(resolved) = fs::canonicalize(into.join(link)) {
            if !resolved.starts_with(&root) {
                return Err(UnpackError::Unsafe {
                    entry: link.display().to_string(),
                    reason: "symbolic link leads outside the tree",
                });
            }
        }
    }
    Ok(())
}

fn create_parent(dest: &Path) -> Result<(), UnpackError> {
    match dest.parent() {
        Some(parent) => fs::create_dir_all(parent).map_err(|source| UnpackError::Write {
            path: parent.to_owned(),
            source,
        }),
        None => Ok(()),
    }
}

/// The entry's path below the archive's top-level directory; `None` for that directory.
fn inside_path(raw: &Path) -> Result<Option<PathBuf>, &'static str> {
    let mut parts = Vec::new();
    for component in raw.components() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err("'..' in its path"),
            Component::RootDir | Component::Prefix(_) => return Err("absolute path"),
        }
    }
    if parts.len() <= 1 {
        return Ok(None);
    }
    Ok(Some(parts[1..].iter().collect()))
}

/// Whether a symbolic link at `link` (relative to the tree root) pointing to `target` stays in
/// the tree, reading the target lexically.
fn link_stays_inside(link: &Path, target: &Path) -> bool {
    let mut depth: usize = link.components().count().saturating_sub(1);
    for component in target.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// Every file path (regular files and symbolic links) in an unpacked tree, `/`-separated.
pub(crate) fn list_files(root: &Path) -> io::Result<Vec<String>> {
    let mut files = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(root.join(&dir))? {
            let entry = entry?;
            let rel = dir.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                pending.push(rel);
            } else {
                files.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    files.sort();
    Ok(files)
}

/// The content of `path` in an unpacked tree as git would give it: a file's bytes, a link's
/// target; `None` for a directory, a missing path, or a path through a symbolic link.
pub(crate) fn read_file(root: &Path, path: &str) -> io::Result<Option<Vec<u8>>> {
    let parts: Vec<&str> = path.split('/').collect();
    if parts
        .iter()
        .any(|p| p.is_empty() || *p == "." || *p == "..")
        || path.contains('\0')
    {
        return Ok(None);
    }
    let mut at = root.to_owned();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let meta = match fs::symlink_metadata(&at) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let last = i + 1 == parts.len();
        match (last, meta.file_type()) {
            (false, t) if t.is_dir() => {}
            (false, _) => return Ok(None),
            (true, t) if t.is_symlink() => {
                let target = fs::read_link(&at)?;
                return Ok(Some(target.to_string_lossy().into_owned().into_bytes()));
            }
            (true, t) if t.is_file() => return fs::read(&at).map(Some),
            (true, _) => return Ok(None),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_paths() {
        let check = |raw: &str, want: Result<Option<&str>, &str>| {
            let got = inside_path(Path::new(raw));
            assert_eq!(got, want.map(|p| p.map(PathBuf::from)), "{raw}");
        };
        check("o-r-abc1234/", Ok(None));
        check("o-r-abc1234/a/b.yaml", Ok(Some("a/b.yaml")));
        check("./o-r-abc1234/./a", Ok(Some("a")));
        check("o-r-abc1234/../x", Err("'..' in its path"));
        check("/etc/passwd", Err("absolute path"));
    }

    #[test]
    fn links() {
        let check = |link: &str, target: &str, inside: bool| {
            assert_eq!(
                link_stays_inside(Path::new(link), Path::new(target)),
                inside,
                "{link} -> {target}"
            );
        };
        check("a", "b", true);
        check("a/b", "../c", true);
        check("a/b/c", "../../d/e", true);
        check("a", "../x", false);
        check("a/b", "../../x", false);
        check("a/b", "x/../../..", false);
        check("a", "/etc/passwd", false);
    }
}
