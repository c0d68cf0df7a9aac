//! Directories built off to the side and renamed into place, so a crash or a concurrent
//! builder never leaves a half-made one where readers look: checked-out trees (written in
//! this process from the repository's objects) and bare clones (`git init`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use gannet_domain::ids::CommitSha;

use gix::objs::tree::EntryKind;

use super::command::{CommandError, Git};
use super::read;

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

/// Writes the tree of `commit` into `<cache>/trees/<repo_dir>/<sha>` (once) and returns it,
/// from the objects of `repo`, in this process: the repository's own index and work tree are
/// never used.
pub(crate) async fn tree(
    repo: &gix::ThreadSafeRepository,
    cache: &Path,
    repo_dir: &str,
    commit: &CommitSha,
) -> Result<PathBuf, CommandError> {
    let target = cache.join("trees").join(repo_dir).join(commit.as_str());
    let label = format!("tree-{repo_dir}-{}", commit.short());
    build_in_place(cache, &target, &label, |dir| async move {
        let (repo, commit) = (repo.clone(), commit.clone());
        let scanned = dir.clone();
        tokio::task::spawn_blocking(move || write_tree(&repo, &dir, &commit))
            .await
            .map_err(|e| CommandError::io("write a checkout to", &scanned, io::Error::other(e)))?
    })
    .await?;
    Ok(target)
}

/// Writes every entry of `commit`'s tree under the empty directory `dir` as `git
/// checkout-index` does: files with mode 0666 or, executable, 0777 (less the umask), symbolic
/// links as links, and a submodule as an empty directory. Blobs are written as stored: no
/// `.gitattributes` filter or line-ending conversion is applied. Then the links that lead out
/// of `dir` are removed.
fn write_tree(
    repo: &gix::ThreadSafeRepository,
    dir: &Path,
    commit: &CommitSha,
) -> Result<(), CommandError> {
    let repo = read::local(repo);
    read::tree_files(&repo, commit, &mut |file| write_entry(dir, file))
        .map_err(|e| CommandError::Checkout(Box::new(e)))?;
    let removed = remove_escaping_links(dir).map_err(|e| CommandError::io("scan", dir, e))?;
    for link in removed {
        tracing::warn!(commit = %commit, link = %link, "a symbolic link leaving the repository was left out of the checkout");
    }
    Ok(())
}

/// Writes one entry below `dir`. Nothing existing is ever written through: directories are
/// made with `mkdir` and files opened with `O_EXCL`, so an entry that would land on or under
/// an earlier symbolic link fails instead.
fn write_entry(dir: &Path, file: read::TreeFile) -> io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::fs::OpenOptionsExt as _;

    let path = dir.join(std::ffi::OsStr::from_bytes(&file.path));
    let mode = match file.kind {
        EntryKind::Tree | EntryKind::Commit => return std::fs::create_dir(&path),
        EntryKind::Link => {
            return std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&file.content), &path)
        }
        EntryKind::BlobExecutable => 0o777,
        EntryKind::Blob => 0o666,
    };
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&path)?;
    out.write_all(&file.content)
}

/// Removes every symbolic link under `root` that leads outside it (an absolute target, one
/// that climbs out with `..`, or a chain of links that each look inside but together leave),
/// resolving each the way the kernel would, so nothing reading the checkout (a tool such as
/// terraform or kustomize included) can be led to a file of the host; returns them, relative
/// to `root`. Every link is judged before any is removed, so a link through one that leaves
/// goes too. Links that stay inside are kept, and so are links to nothing.
pub(crate) fn remove_escaping_links(root: &Path) -> io::Result<Vec<String>> {
    use gannet_sdk::tree::{self, TreeError};
    let mut links = Vec::new();
    find_links(root, root, &mut links)?;
    let mut leaving = Vec::new();
    for rel in links {
        match tree::resolve(root, &rel) {
            Ok(_) | Err(TreeError::NotFound) => {}
            Err(TreeError::Read(e)) => return Err(e),
            Err(_leaves_or_loops) => leaving.push(rel),
        }
    }
    for rel in &leaving {
        std::fs::remove_file(root.join(rel))?;
    }
    Ok(leaving)
}

/// Every symbolic link under `dir`, relative to `root`; directories are searched without
/// following links.
fn find_links(root: &Path, dir: &Path, out: &mut Vec<String>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.file_type().is_symlink() {
            let rel = path.strip_prefix(root).map_err(io::Error::other)?;
            out.push(rel.to_string_lossy().into_owned());
        } else if meta.is_dir() {
            find_links(root, &path, out)?;
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use gannet_domain::ids::{CommitSha, RepoId};
    use gannet_domain::ports::GitSource as _;

    use crate::local::test_git as git;
    use crate::{LocalGit, Location, RepoSpec};

    /// Links committed to a real repository, each of which looks as if it stays inside, that
    /// together reach a file outside the checkout: the checkout leaves out every link of the
    /// chain that leads out, and keeps the links that stay inside.
    #[tokio::test]
    async fn a_chain_of_links_out_of_the_checkout_is_left_out() {
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        git(w, &["init", "--quiet", "--initial-branch=main"]);
        std::fs::create_dir_all(w.join("apps/web")).unwrap();
        std::fs::create_dir_all(w.join("shared")).unwrap();
        std::fs::write(w.join("shared/values.yaml"), "v: 1\n").unwrap();
        std::fs::write(w.join("apps/web/app.pipecd.yaml"), "kind: KubernetesApp\n").unwrap();
        symlink("../../shared/values.yaml", w.join("apps/web/values.yaml")).unwrap();
        // The checkout is `<cache>/trees/<repo>/<sha>`. Each link alone stays inside (`c`
        // reads as the root), but `up` is the root, so `c` is the cache three levels above.
        symlink("../..", w.join("apps/web/up")).unwrap();
        symlink("up/../../..", w.join("apps/web/c")).unwrap();
        symlink("c", w.join("apps/web/via")).unwrap();
        symlink("missing", w.join("apps/web/dangling")).unwrap();
        git(w, &["add", "--all"]);
        git(w, &["commit", "--quiet", "-m", "links"]);
        let sha = CommitSha::parse(git(w, &["rev-parse", "HEAD"]).trim()).unwrap();

        let cache = tempfile::tempdir().unwrap();
        let repo = RepoId::parse("demo").unwrap();
        let source = LocalGit::new(
            cache.path(),
            vec![RepoSpec {
                id: repo.clone(),
                location: Location::Path(w.to_owned()),
                branch: "main".into(),
            }],
        )
        .unwrap();
        let tree = source.checkout(&repo, &sha).await.unwrap();
        let web = tree.join("apps/web");
        let exists = |name: &str| std::fs::symlink_metadata(web.join(name)).is_ok();
        assert!(
            !exists("c"),
            "the link that climbs out through another is gone"
        );
        assert!(!exists("via"), "a link through it is gone too");
        assert!(exists("up") && exists("values.yaml") && exists("dangling"));
        assert_eq!(
            std::fs::read_to_string(web.join("values.yaml")).unwrap(),
            "v: 1\n"
        );
        // What a lexical check alone would have kept reached the cache.
        let reached = tree.join("apps/web/up/../../..").canonicalize().unwrap();
        assert_eq!(reached, cache.path().canonicalize().unwrap());
    }
}
