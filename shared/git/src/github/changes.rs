//! Which paths differ between two commits, from GitHub's compare API, or from the commits'
//! trees where the compare answer cannot be trusted to be complete.
//!
//! The compare API (`/compare/{base}...{head}`) lists at most 300 files, and it diffs head
//! against the merge base, which is `base` only when head is ahead of it. So its list is used
//! when it has fewer than 300 files and head is `ahead` (or `identical`). Otherwise the two
//! trees are compared by blob sha and mode: first as two recursive listings
//! (`git/trees/{sha}?recursive=1`), and when GitHub truncates either listing, level by level,
//! descending only into subtrees whose sha differs. No change is ever missed.

use std::collections::{BTreeMap, BTreeSet};

use super::wire::TreeEntry;

/// The compare API's limit on listed files.
pub(crate) const COMPARE_FILE_LIMIT: usize = 300;

/// At most this many tree listings for one level-by-level comparison.
pub(crate) const MAX_TREE_REQUESTS: usize = 5_000;

/// Whether a compare answer with this status and file count lists every changed path.
pub(crate) fn compare_is_complete(status: &str, files: usize) -> bool {
    matches!(status, "ahead" | "identical") && files < COMPARE_FILE_LIMIT
}

/// Whether a compare answer (`{base}...{head}`) with this status says head is base or one of
/// its ancestors.
pub(crate) fn is_behind_or_identical(status: &str) -> bool {
    matches!(status, "behind" | "identical")
}

/// Paths whose entry (blob or submodule; mode and sha) differs between two full listings.
/// Trees themselves are skipped: the entries below them carry the change.
pub(crate) fn diff_listings(from: &[TreeEntry], to: &[TreeEntry]) -> BTreeSet<String> {
    let leaves = |entries: &[TreeEntry]| -> BTreeMap<String, (String, String)> {
        entries
            .iter()
            .filter(|e| !e.is_tree())
            .map(|e| (e.path.clone(), (e.mode.clone(), e.sha.clone())))
            .collect()
    };
    let (from, to) = (leaves(from), leaves(to));
    let mut changed = BTreeSet::new();
    for (path, entry) in &from {
        if to.get(path) != Some(entry) {
            changed.insert(path.clone());
        }
    }
    for path in to.keys() {
        if !from.contains_key(path) {
            changed.insert(path.clone());
        }
    }
    changed
}

/// A pair of subtrees still to compare: their path, and each side's tree sha (`None` where the
/// directory does not exist on that side).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pending {
    pub path: String,
    pub from: Option<String>,
    pub to: Option<String>,
}

/// Compares one level: records changed leaves under `at` in `changed` and returns the subtrees
/// that differ, to be listed and compared next.
pub(crate) fn diff_level(
    at: &str,
    from: &[TreeEntry],
    to: &[TreeEntry],
    changed: &mut BTreeSet<String>,
) -> Vec<Pending> {
    let by_name = |entries: &[TreeEntry]| -> BTreeMap<String, TreeEntry> {
        entries
            .iter()
            .map(|e| (e.path.clone(), e.clone()))
            .collect()
    };
    let (from, to) = (by_name(from), by_name(to));
    let names: BTreeSet<&String> = from.keys().chain(to.keys()).collect();
    let full = |name: &str| {
        if at.is_empty() {
            name.to_owned()
        } else {
            format!("{at}/{name}")
        }
    };
    let mut next = Vec::new();
    for name in names {
        let (a, b) = (from.get(name), to.get(name));
        if a == b {
            continue;
        }
        let tree_sha = |e: Option<&TreeEntry>| e.filter(|e| e.is_tree()).map(|e| e.sha.clone());
        let (tree_a, tree_b) = (tree_sha(a), tree_sha(b));
        if tree_a.is_some() || tree_b.is_some() {
            next.push(Pending {
                path: full(name),
                from: tree_a,
                to: tree_b,
            });
        }
        let is_leaf = |e: Option<&TreeEntry>| e.is_some_and(|e| !e.is_tree());
        if is_leaf(a) || is_leaf(b) {
            changed.insert(full(name));
        }
    }
    next
}

/// Every path of a compare answer's files; a rename gives both its paths.
pub(crate) fn compare_paths<'a>(
    files: impl Iterator<Item = (&'a str, Option<&'a str>)>,
) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    for (name, previous) in files {
        paths.insert(name.to_owned());
        if let Some(previous) = previous {
            paths.insert(previous.to_owned());
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, kind: &str, sha: &str) -> TreeEntry {
        let mode = if kind == "tree" { "040000" } else { "100644" };
        TreeEntry {
            path: path.into(),
            mode: mode.into(),
            kind: kind.into(),
            sha: sha.into(),
        }
    }

    #[test]
    fn listings() {
        let from = [
            entry("a", "blob", "1"),
            entry("d", "tree", "t1"),
            entry("d/b", "blob", "2"),
            entry("d/gone", "blob", "3"),
            entry("same", "blob", "4"),
        ];
        let mut exec = entry("same", "blob", "4");
        exec.mode = "100755".into();
        let to = [
            entry("a", "blob", "1b"),
            entry("d", "tree", "t2"),
            entry("d/b", "blob", "2"),
            entry("d/new", "blob", "5"),
            exec,
        ];
        let got: Vec<String> = diff_listings(&from, &to).into_iter().collect();
        assert_eq!(got, ["a", "d/gone", "d/new", "same"]);
    }

    #[test]
    fn one_level() {
        let from = [
            entry("a", "blob", "1"),
            entry("d", "tree", "t1"),
            entry("kept", "tree", "t9"),
            entry("x", "blob", "7"),
        ];
        let to = [
            entry("a", "blob", "1"),
            entry("d", "tree", "t2"),
            entry("kept", "tree", "t9"),
            entry("x", "tree", "t3"),
            entry("y", "tree", "t4"),
        ];
        let mut changed = BTreeSet::new();
        let next = diff_level("top", &from, &to, &mut changed);
        let pending = |path: &str, from: Option<&str>, to: Option<&str>| Pending {
            path: path.into(),
            from: from.map(Into::into),
            to: to.map(Into::into),
        };
        assert_eq!(
            next,
            [
                pending("top/d", Some("t1"), Some("t2")),
                pending("top/x", None, Some("t3")),
                pending("top/y", None, Some("t4")),
            ]
        );
        assert_eq!(changed.into_iter().collect::<Vec<_>>(), ["top/x"]);
    }

    #[test]
    fn when_compare_is_trusted() {
        let check = |status: &str, files: usize, want: bool| {
            assert_eq!(compare_is_complete(status, files), want, "{status} {files}");
        };
        check("ahead", 0, true);
        check("identical", 0, true);
        check("ahead", 299, true);
        check("ahead", 300, false);
        check("behind", 3, false);
        check("diverged", 3, false);
    }

    #[test]
    fn when_head_is_an_ancestor_of_base() {
        for (status, want) in [
            ("behind", true),
            ("identical", true),
            ("ahead", false),
            ("diverged", false),
            ("", false),
        ] {
            assert_eq!(is_behind_or_identical(status), want, "{status}");
        }
    }

    #[test]
    fn renames_give_both_paths() {
        let files = [("new/name", Some("old/name")), ("plain", None)];
        let got: Vec<String> = compare_paths(files.into_iter()).into_iter().collect();
        assert_eq!(got, ["new/name", "old/name", "plain"]);
    }
}
