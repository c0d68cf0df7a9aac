//! Directories built off to the side and renamed into place, so a crash or a concurrent
//! builder never leaves a half-made one where readers look: checked-out trees and bare clones.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use gannet_core::ids::CommitSha;

use super::command::{prefixed, CommandError, Git};

static NEXT_STAGING: AtomicU64 = AtomicU64::new(0);

/// A fresh path under `<cache>/tmp` (same file system as the cache, so renames are atomic).
fn staging_path(cache: &Path, label: &str) -> PathBuf {
    let n = NEXT_STAGING.fetch_add(1, Ordering::Relaxed);
    cache
        .join("tmp")
        .join(format!("{label}.{}.{n}", std::process::id()))
}

/// Builds a directory at `target` unless it is there already. `build` fills the empty
/// directory it is given; the result is renamed onto `target` only when `build` succeeds.
/// When someone else put `target` in place first, theirs is kept and ours is thrown away.
async fn build_in_place<F, Fut>(
    cache: &Path,
    target: &Path,
    label: &str,
    build: F,
) -> Result<(), CommandError>
where
    F: FnOnce(PathBuf) -> Fut,
    Fut: std::future::Future<Output = Result<(), CommandError>>,
{
    if is_dir(target).await {
        return Ok(());
    }
    let staging = staging_path(cache, label);
    let parents = [staging.parent(), target.parent()];
    for parent in parents.into_iter().flatten() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| CommandError::io("create directory", parent, e))?;
    }
    tokio::fs::create_dir(&staging)
        .await
        .map_err(|e| CommandError::io("create directory", &staging, e))?;
    let built = match build(staging.clone()).await {
        Ok(()) => tokio::fs::rename(&staging, target)
            .await
            .map_err(|e| CommandError::io("move into place", target, e)),
        Err(e) => Err(e),
    };
    match built {
        Ok(()) => Ok(()),
        Err(_) if is_dir(target).await => {
            // Another builder won the race: its directory is complete, ours is redundant.
            remove_quietly(&staging).await;
            Ok(())
        }
        Err(e) => {
            remove_quietly(&staging).await;
            Err(e)
        }
    }
}

/// Writes the tree of `commit` into `<cache>/trees/<repo_dir>/<sha>` (once) and returns it.
/// The repository's own index and work tree are never used: a private index file is.
pub(crate) async fn tree(
    git_dir: &Path,
    cache: &Path,
    repo_dir: &str,
    commit: &CommitSha,
) -> Result<PathBuf, CommandError> {
    let target = cache.join("trees").join(repo_dir).join(commit.as_str());
    let label = format!("tree-{repo_dir}-{}", commit.short());
    build_in_place(cache, &target, &label, |dir| async move {
        let mut index = dir.clone().into_os_string();
        index.push(".index");
        let index = PathBuf::from(index);
        let written = write_tree(git_dir, &dir, &index, commit).await;
        match tokio::fs::remove_file(&index).await {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) if written.is_ok() => return Err(CommandError::io("remove", &index, e)),
            Err(_) => {}
        }
        written
    })
    .await?;
    Ok(target)
}

async fn write_tree(
    git_dir: &Path,
    dir: &Path,
    index: &Path,
    commit: &CommitSha,
) -> Result<(), CommandError> {
    Git::on(git_dir)
        .env("GIT_INDEX_FILE", index.as_os_str())
        .arg("read-tree")
        .arg(commit.as_str())
        .stdout()
        .await?;
    Git::on(git_dir)
        .env("GIT_INDEX_FILE", index.as_os_str())
        .arg(prefixed("--work-tree=", dir))
        .args(["checkout-index", "--all", "--force"])
        .stdout()
        .await?;
    let root = dir.to_owned();
    let removed = tokio::task::spawn_blocking(move || remove_escaping_links(&root, &root))
        .await
        .map_err(|e| CommandError::io("scan", dir, io::Error::other(e)))?
        .map_err(|e| CommandError::io("scan", dir, e))?;
    for link in removed {
        tracing::warn!(commit = %commit, link = %link, "a symbolic link leaving the repository was left out of the checkout");
    }
    Ok(())
}

/// Removes every symbolic link under `dir` whose target lies outside `root` (an absolute
/// target, or one that climbs out with `..`), so nothing reading the checkout can be led to a
/// file of the host; returns them, relative to `root`. Links that stay inside are kept.
pub(crate) fn remove_escaping_links(root: &Path, dir: &Path) -> io::Result<Vec<String>> {
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path)?;
            let parent = path.parent().unwrap_or(root);
            if !stays_inside(root, parent, &target) {
                std::fs::remove_file(&path)?;
                removed.push(
                    path.strip_prefix(root)
                        .unwrap_or(&path)
                        .display()
                        .to_string(),
                );
            }
        } else if meta.is_dir() {
            removed.extend(remove_escaping_links(root, &path)?);
        }
    }
    Ok(removed)
}

/// True when `target`, read from a link in `parent`, names a path inside `root` (lexically:
/// the links it may cross are checked on their own).
fn stays_inside(root: &Path, parent: &Path, target: &Path) -> bool {
    use std::path::Component;
    if target.is_absolute() {
        return false;
    }
    let Ok(start) = parent.strip_prefix(root) else {
        return false;
    };
    let mut depth: Vec<_> = start.components().collect();
    for part in target.components() {
        match part {
            Component::Normal(_) => depth.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if depth.pop().is_none() {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// Makes an empty bare repository at `git_dir` unless one is there.
pub(crate) async fn bare_repo(
    cache: &Path,
    git_dir: &Path,
    label: &str,
) -> Result<(), CommandError> {
    build_in_place(cache, git_dir, label, |dir| async move {
        Git::in_dir(&dir)
            .args(["init", "--bare", "--quiet", "."])
            .stdout()
            .await
            .map(drop)
    })
    .await
}

async fn is_dir(path: &Path) -> bool {
    tokio::fs::metadata(path).await.is_ok_and(|m| m.is_dir())
}

async fn remove_quietly(dir: &Path) {
    if let Err(error) = tokio::fs::remove_dir_all(dir).await {
        tracing::warn!(dir = %dir.display(), %error, "could not remove staging directory");
    }
}
