//! Checked-out (or unpacked) trees are kept for reuse, and pruned when they have not been used
//! for a while, by the local git source and the GitHub source alike.
//! A tree's last use is the modification time of a marker beside it (`<commit>.used`),
//! touched on every checkout; the tree itself is never written to.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The marker of the tree at `tree`.
fn marker(tree: &Path) -> PathBuf {
    let mut name = tree.as_os_str().to_owned();
    name.push(".used");
    PathBuf::from(name)
}

/// Records a use of the tree at `tree` now (best effort: a tree that cannot be marked only
/// looks older than it is).
pub(crate) fn touch(tree: &Path) {
    let marked = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(marker(tree))
        .and_then(|f| f.set_modified(SystemTime::now()));
    if let Err(err) = marked {
        tracing::debug!(tree = %tree.display(), error = %err, "cannot mark the tree used");
    }
}

/// When the tree at `tree` was last used: its marker's time, else the tree's own.
fn last_used(tree: &Path) -> SystemTime {
    fs::metadata(marker(tree))
        .or_else(|_| fs::metadata(tree))
        .and_then(|m| m.modified())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Under `trees` (`<repo>/<commit>` directories), removes the trees not used for `idle`,
/// keeping each repository's `keep` most recently used; returns how many went.
pub(crate) fn trees(trees: &Path, idle: Duration, keep: usize) -> io::Result<usize> {
    let Ok(repos) = fs::read_dir(trees) else {
        return Ok(0);
    };
    let now = SystemTime::now();
    let mut removed = 0;
    for repo in repos {
        let repo = repo?.path();
        let hidden = repo
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden || !repo.is_dir() {
            continue;
        }
        let mut commits: Vec<(SystemTime, PathBuf)> = fs::read_dir(&repo)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .map(|p| (last_used(&p), p))
            .collect();
        commits.sort_by_key(|c| std::cmp::Reverse(c.0));
        for (used, tree) in commits.into_iter().skip(keep) {
            let unused = now.duration_since(used).unwrap_or_default();
            if unused < idle {
                continue;
            }
            fs::remove_dir_all(&tree)?;
            let _ = fs::remove_file(marker(&tree));
            tracing::info!(tree = %tree.display(), unused_s = unused.as_secs(), "checked-out tree pruned");
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_unused_past_the_window_go_and_the_newest_stay() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("shop");
        let day = Duration::from_secs(24 * 3600);
        let now = SystemTime::now();
        // (commit, last used) — a and b are old, c is recent, d is old but among the newest.
        for (commit, ago) in [
            ("a", 5 * day),
            ("b", 3 * day),
            ("c", Duration::ZERO),
            ("d", 2 * day),
        ] {
            let tree = repo.join(commit);
            fs::create_dir_all(tree.join("apps")).unwrap();
            fs::write(tree.join("apps/x"), "x").unwrap();
            touch(&tree);
            let marker = fs::OpenOptions::new()
                .write(true)
                .open(marker(&tree))
                .unwrap();
            marker.set_modified(now - ago).unwrap();
        }
        let removed = trees(dir.path(), day, 2).unwrap();
        assert_eq!(removed, 2);
        let mut left: Vec<String> = fs::read_dir(&repo)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["c", "c.used", "d", "d.used"]);
        assert_eq!(
            trees(dir.path(), day, 2).unwrap(),
            0,
            "a second pass finds nothing"
        );
        assert_eq!(trees(&dir.path().join("none"), day, 2).unwrap(), 0);
    }
}
