//! Checks on the names handed to git, and file-system-safe names for cache entries.

use gannet_domain::ids::RepoId;

/// Whether git would accept `name` as a branch (the rules of `git check-ref-format --branch`).
/// A name that could be taken for an option (a leading `-`) is refused as well.
pub(crate) fn is_branch_name(name: &str) -> bool {
    let forbidden = |b: u8| b < 0x20 || b == 0x7f || b" ~^:?*[\\".contains(&b);
    !name.is_empty()
        && name != "@"
        && !name.starts_with('-')
        && !name.starts_with('/')
        && !name.ends_with('/')
        && !name.ends_with('.')
        && !name.contains("..")
        && !name.contains("//")
        && !name.contains("@{")
        && !name.bytes().any(forbidden)
        && name
            .split('/')
            .all(|part| !part.starts_with('.') && !part.ends_with(".lock"))
}

/// Whether `path` can name an entry of a tree: relative, `/`-separated, with no empty, `.` or
/// `..` parts.
pub(crate) fn is_tree_path(path: &str) -> bool {
    !path.is_empty()
        && !path.contains('\0')
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// A directory name for `repo` that cannot leave its parent directory: letters, digits, `-`,
/// `_` and (not first) `.` are kept, everything else is written `%XX`. Distinct ids give
/// distinct names.
pub(crate) fn dir_name(repo: &RepoId) -> String {
    let mut name = String::new();
    for (i, b) in repo.as_str().bytes().enumerate() {
        let keep = b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0);
        if keep {
            name.push(char::from(b));
        } else {
            name.push_str(&format!("%{b:02X}"));
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn branch_names() {
        let check = |name: &str, valid: bool| assert_eq!(is_branch_name(name), valid, "{name:?}");
        for name in ["main", "release/1.2", "feature/x-y_z", "v1.0", "a@b"] {
            check(name, true);
        }
        let invalid = [
            "",
            "-x",
            "--upload-pack=x",
            "/main",
            "main/",
            "main.",
            "a..b",
            "a//b",
            "a@{1}",
            "a b",
            "a~1",
            "a^",
            "a:b",
            "a?",
            "a*",
            "a[",
            "a\\b",
            "a\tb",
            ".hidden",
            "x/.y",
            "x.lock",
            "x.lock/y",
            "@",
        ];
        for name in invalid {
            check(name, false);
        }
    }

    #[test]
    fn tree_paths() {
        let check = |path: &str, valid: bool| assert_eq!(is_tree_path(path), valid, "{path:?}");
        for path in ["a", "a/b.yaml", ".github/workflows/x.yml", "a..b"] {
            check(path, true);
        }
        for path in ["", "/a", "a/", "a//b", "./a", "a/../b", "..", "a\0b"] {
            check(path, false);
        }
    }

    #[test]
    fn dir_names_stay_in_their_parent() {
        let check = |id: &str, want: &str| {
            assert_eq!(dir_name(&RepoId::parse(id).unwrap()), want, "{id:?}");
        };
        check("demo", "demo");
        check("my.repo-1_x", "my.repo-1_x");
        check("..", "%2E.");
        check("a/b", "a%2Fb");
        check("a%2Fb", "a%252Fb");
        check(".git", "%2Egit");
    }
}
