//! `LocalGit` against real repositories built in temporary directories.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use gannet_domain::duration::Millis;
use gannet_domain::ids::{CommitSha, RepoId};
use gannet_domain::ports::{GitError, GitSource};
use gannet_git::{LocalGit, Location, RepoSpec, SetupError};
use tempfile::TempDir;

/// A working repository the test commits to with the git CLI.
struct Work {
    dir: TempDir,
}

impl Work {
    fn new() -> Self {
        let work = Self {
            dir: TempDir::new().unwrap(),
        };
        work.git(&["init", "--quiet", "--initial-branch=main"]);
        work
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn git(&self, args: &[&str]) -> String {
        self.run(args, 1_600_000_000)
    }

    /// Runs git with fixed identities, the committer time `secs`, and no user configuration.
    fn run(&self, args: &[&str], secs: u64) -> String {
        let date = format!("@{secs} +0000");
        let out = Command::new("git")
            .args(args)
            .current_dir(self.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Ada Author")
            .env("GIT_AUTHOR_EMAIL", "ada@example.com")
            .env("GIT_AUTHOR_DATE", format!("@{} +0000", secs - 50))
            .env("GIT_COMMITTER_NAME", "Cy Committer")
            .env("GIT_COMMITTER_EMAIL", "cy@example.com")
            .env("GIT_COMMITTER_DATE", &date)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn write(&self, path: &str, content: &str) {
        let file = self.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }

    /// Commits everything in the work tree, with the committer time `secs`.
    fn commit(&self, message: &str, secs: u64) -> CommitSha {
        self.git(&["add", "--all"]);
        self.run(
            &[
                "commit",
                "--quiet",
                "--allow-empty",
                "--no-verify",
                "-m",
                message,
            ],
            secs,
        );
        CommitSha::parse(self.git(&["rev-parse", "HEAD"]).trim()).unwrap()
    }
}

fn repo_id() -> RepoId {
    RepoId::parse("demo").unwrap()
}

fn source(location: Location, cache: &Path) -> LocalGit {
    let spec = RepoSpec {
        id: repo_id(),
        location,
        branch: "main".into(),
    };
    LocalGit::new(cache, vec![spec]).unwrap()
}

const MISSING: &str = "0123456789abcdef0123456789abcdef01234567";

fn missing() -> CommitSha {
    CommitSha::parse(MISSING).unwrap()
}

/// What an operation should give: a value, or an error of a kind whose message (with its
/// sources) contains a text.
fn check<T: PartialEq + std::fmt::Debug>(
    what: &str,
    got: Result<T, GitError>,
    want: Result<T, (&str, &str)>,
) {
    match (got, want) {
        (Ok(got), Ok(want)) => assert_eq!(got, want, "{what}"),
        (Err(e), Err((kind, text))) => {
            let got_kind = match &e {
                GitError::UnknownRepo(_) => "UnknownRepo",
                GitError::NoBranch { .. } => "NoBranch",
                GitError::NoCommit { .. } => "NoCommit",
                GitError::PullRequest { .. } => "PullRequest",
                GitError::Failed { .. } => "Failed",
            };
            let mut message = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                message.push_str(&format!(": {s}"));
                source = s.source();
            }
            assert_eq!(got_kind, kind, "{what}: {message}");
            assert!(message.contains(text), "{what}: {message:?} lacks {text:?}");
        }
        (got, want) => panic!("{what}: got {got:?}, wanted {want:?}"),
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Three commits: files added; one modified, one renamed, one deleted, one added; nothing.
struct History {
    work: Work,
    first: CommitSha,
    second: CommitSha,
    third: CommitSha,
}

fn history() -> History {
    let work = Work::new();
    work.write("apps/web/app.pipecd.yaml", "kind: ECSApp\n");
    work.write("README.md", "hello\n");
    work.write("old/name.txt", "moving\n");
    work.write("gone.txt", "bye\n");
    work.write("bin/run.sh", "#!/bin/sh\necho run\n");
    let script = work.path().join("bin/run.sh");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let first = work.commit("first\n\nwith a body", 1_700_000_000);
    work.write("apps/web/app.pipecd.yaml", "kind: ECSApp\nspec: {}\n");
    std::fs::create_dir(work.path().join("new")).unwrap();
    work.git(&["mv", "old/name.txt", "new/name.txt"]);
    work.git(&["rm", "--quiet", "gone.txt"]);
    work.write("added.txt", "new\n");
    let second = work.commit("second", 1_700_000_100);
    let third = work.commit("third: nothing changed", 1_700_000_200);
    History {
        work,
        first,
        second,
        third,
    }
}

#[tokio::test]
async fn a_path_repository_is_read_in_place() {
    let h = history();
    // The user's repository has work in progress: staged and unstaged changes.
    h.work.write("README.md", "edited, not committed\n");
    h.work.write("staged.txt", "staged\n");
    h.work.git(&["add", "staged.txt"]);
    let status_before = h.work.git(&["status", "--porcelain"]);
    let index = h.work.path().join(".git/index");
    let index_before = std::fs::read(&index).unwrap();

    let cache = TempDir::new().unwrap();
    let git = source(Location::Path(h.work.path().to_owned()), cache.path());
    let id = repo_id();
    let (c1, c2, c3) = (&h.first, &h.second, &h.third);

    let head = git.head(&id, "main").await.unwrap();
    assert_eq!(head.sha, *c3);
    assert_eq!(head.message, "third: nothing changed");
    assert_eq!(head.at, Millis(1_700_000_200_000));
    let first = git.commit(&id, c1).await.unwrap();
    assert_eq!(
        (first.message.as_str(), first.author.as_str(), first.at),
        (
            "first\n\nwith a body",
            "Ada Author",
            Millis(1_700_000_000_000)
        )
    );

    let all_changes = strings(&[
        "added.txt",
        "apps/web/app.pipecd.yaml",
        "gone.txt",
        "new/name.txt",
        "old/name.txt",
    ]);
    for (from, to, want) in [
        (c1, c2, all_changes.clone()),
        (c2, c1, all_changes),
        (c2, c3, vec![]),
        (c1, c1, vec![]),
    ] {
        check(
            "changed files",
            git.changed_files(&id, from, to).await,
            Ok(want),
        );
    }

    let listed = [
        (
            c1,
            strings(&[
                "README.md",
                "apps/web/app.pipecd.yaml",
                "bin/run.sh",
                "gone.txt",
                "old/name.txt",
            ]),
        ),
        (
            c2,
            strings(&[
                "README.md",
                "added.txt",
                "apps/web/app.pipecd.yaml",
                "bin/run.sh",
                "new/name.txt",
            ]),
        ),
    ];
    for (commit, want) in listed {
        check("list files", git.list_files(&id, commit).await, Ok(want));
    }

    let bytes = |s: &str| Some(s.as_bytes().to_vec());
    for (commit, path, want) in [
        (c1, "apps/web/app.pipecd.yaml", bytes("kind: ECSApp\n")),
        (
            c2,
            "apps/web/app.pipecd.yaml",
            bytes("kind: ECSApp\nspec: {}\n"),
        ),
        (c2, "new/name.txt", bytes("moving\n")),
        (c1, "README.md", bytes("hello\n")),
        (c2, "gone.txt", None),
        (c1, "new/name.txt", None),
        (c1, "apps", None),
        (c1, "apps/web/", None),
        (c1, "./README.md", None),
        (c1, "../README.md", None),
        (c1, "*.md", None),
        (c1, "README.md/x", None),
        (c3, "staged.txt", None),
    ] {
        check(
            &format!("read {path}"),
            git.read_file(&id, commit, path).await,
            Ok(want),
        );
    }

    let tree = git.checkout(&id, c1).await.unwrap();
    assert_eq!(tree, cache.path().join("trees/demo").join(c1.as_str()));
    assert_eq!(
        std::fs::read_to_string(tree.join("README.md")).unwrap(),
        "hello\n"
    );

    assert_eq!(h.work.git(&["status", "--porcelain"]), status_before);
    assert_eq!(std::fs::read(&index).unwrap(), index_before);
    assert_eq!(h.work.git(&["rev-parse", "HEAD"]).trim(), c3.as_str());
}

/// How far a branch has moved on from a deployed commit: the commits the head has that the
/// base has not, merges' second parents included, as `git rev-list --count` says.
#[tokio::test]
async fn commits_ahead_counts_what_the_head_has_beyond_the_base() {
    let h = history();
    h.work
        .git(&["checkout", "--quiet", "-b", "feature", h.first.as_str()]);
    let feature = h.work.commit("feature only", 1_700_000_300);
    h.work.git(&["checkout", "--quiet", "main"]);
    h.work.git(&[
        "merge",
        "--quiet",
        "--no-ff",
        "-m",
        "merge feature",
        "feature",
    ]);
    let merged = CommitSha::parse(h.work.git(&["rev-parse", "HEAD"]).trim()).unwrap();

    let cache = TempDir::new().unwrap();
    let git = source(Location::Path(h.work.path().to_owned()), cache.path());
    let cases = [
        ("the head itself", &h.third, &h.third, Ok(0)),
        ("two commits on", &h.first, &h.third, Ok(2)),
        ("a base ahead of the head", &h.third, &h.first, Ok(0)),
        (
            "a merge brings its branch's commit",
            &h.third,
            &merged,
            Ok(2),
        ),
        ("a branch's own commit", &feature, &merged, Ok(3)),
    ];
    for (what, base, head, want) in cases {
        let got = git.commits_ahead(&repo_id(), base, head).await;
        assert_eq!(got.map_err(|e| e.to_string()), want, "{what}");
    }
    let err = git
        .commits_ahead(&repo_id(), &missing(), &h.third)
        .await
        .unwrap_err();
    assert!(matches!(err, GitError::NoCommit { .. }), "{err}");
}

/// A commit is on the branch when it is the head or an ancestor of it; a commit on another
/// branch is not. Both for a repository read in place and for a clone (which fetches only the
/// configured branch, so a feature branch's commit is not even there). No tree is checked out.
#[tokio::test]
async fn is_ancestor_says_whether_a_commit_is_on_the_branch_without_a_checkout() {
    let h = history();
    h.work
        .git(&["checkout", "--quiet", "-b", "feature", h.first.as_str()]);
    let feature = h.work.commit("feature only", 1_700_000_300);
    h.work.git(&["checkout", "--quiet", "main"]);

    let cache = TempDir::new().unwrap();
    let in_place = source(Location::Path(h.work.path().to_owned()), cache.path());
    let cases = [
        ("the first commit", &h.first, Ok(true)),
        ("the head itself", &h.third, Ok(true)),
        ("a feature branch's commit", &feature, Ok(false)),
    ];
    for (what, commit, want) in cases {
        check(
            what,
            in_place.is_ancestor(&repo_id(), commit, &h.third).await,
            want,
        );
    }
    check(
        "a later commit is not an ancestor of an earlier one",
        in_place.is_ancestor(&repo_id(), &h.third, &h.first).await,
        Ok(false),
    );
    check(
        "an unknown commit",
        in_place.is_ancestor(&repo_id(), &missing(), &h.third).await,
        Err(("NoCommit", MISSING)),
    );

    let clone_cache = TempDir::new().unwrap();
    let url = format!("file://{}", h.work.path().display());
    let clone = source(Location::Url(url), clone_cache.path());
    let head = clone.head(&repo_id(), "main").await.unwrap().sha;
    check(
        "an ancestor, in a clone",
        clone.is_ancestor(&repo_id(), &h.second, &head).await,
        Ok(true),
    );
    check(
        "a feature branch's commit, which a clone never fetches",
        clone.is_ancestor(&repo_id(), &feature, &head).await,
        Err(("NoCommit", feature.as_str())),
    );
    for dir in [cache.path(), clone_cache.path()] {
        assert!(
            !dir.join("trees").exists(),
            "no tree under {}",
            dir.display()
        );
    }
}

#[tokio::test]
async fn failures_are_named() {
    let h = history();
    let cache = TempDir::new().unwrap();
    let not_a_repo = TempDir::new().unwrap();
    std::fs::create_dir(h.work.path().join("sub")).unwrap();
    let specs = vec![
        RepoSpec {
            id: repo_id(),
            location: Location::Path(h.work.path().to_owned()),
            branch: "main".into(),
        },
        RepoSpec {
            id: RepoId::parse("plain-dir").unwrap(),
            location: Location::Path(not_a_repo.path().to_owned()),
            branch: "main".into(),
        },
        RepoSpec {
            id: RepoId::parse("subdir").unwrap(),
            location: Location::Path(h.work.path().join("sub")),
            branch: "main".into(),
        },
        RepoSpec {
            id: RepoId::parse("vanished").unwrap(),
            location: Location::Path(h.work.path().join("no-such-dir")),
            branch: "main".into(),
        },
    ];
    let git = LocalGit::new(cache.path(), specs).unwrap();
    let id = repo_id();
    let other = |s: &str| RepoId::parse(s).unwrap();

    check(
        "unknown repo",
        git.head(&other("nope"), "main").await,
        Err(("UnknownRepo", "unknown repository nope")),
    );
    check(
        "missing branch",
        git.head(&id, "nope").await,
        Err(("NoBranch", "branch nope not found")),
    );
    check(
        "option as branch",
        git.head(&id, "--upload-pack=x").await,
        Err(("NoBranch", "--upload-pack=x")),
    );
    check(
        "bad ref name",
        git.head(&id, "main..x").await,
        Err(("NoBranch", "main..x")),
    );
    check(
        "missing commit",
        git.commit(&id, &missing()).await,
        Err(("NoCommit", MISSING)),
    );
    check(
        "missing from",
        git.changed_files(&id, &missing(), &h.first).await,
        Err(("NoCommit", MISSING)),
    );
    check(
        "missing to",
        git.changed_files(&id, &h.first, &missing()).await,
        Err(("NoCommit", MISSING)),
    );
    check(
        "list at missing",
        git.list_files(&id, &missing()).await,
        Err(("NoCommit", MISSING)),
    );
    check(
        "read at missing",
        git.read_file(&id, &missing(), "README.md").await,
        Err(("NoCommit", MISSING)),
    );
    check(
        "checkout missing",
        git.checkout(&id, &missing()).await,
        Err(("NoCommit", MISSING)),
    );
    check(
        "not a repository",
        git.head(&other("plain-dir"), "main").await,
        Err(("Failed", "not a git repository")),
    );
    check(
        "a directory inside a repository",
        git.commit(&other("subdir"), &h.first).await,
        Err(("Failed", "not a git repository")),
    );
    check(
        "a path that does not exist",
        git.list_files(&other("vanished"), &h.first).await,
        Err(("Failed", "could not open repository")),
    );
}

#[test]
fn setup_refuses_bad_repository_lists() {
    let spec = |id: &str, location: Location, branch: &str| RepoSpec {
        id: RepoId::parse(id).unwrap(),
        location,
        branch: branch.into(),
    };
    let path = || Location::Path(PathBuf::from("/srv/repo"));
    let cases = [
        (
            vec![spec("a", path(), "main"), spec("a", path(), "dev")],
            "repository a is listed twice",
        ),
        (
            vec![spec("a", path(), "-main")],
            "\"-main\" is not a valid branch name",
        ),
        (
            vec![spec("a", path(), "a b")],
            "\"a b\" is not a valid branch name",
        ),
        (
            vec![spec("a", Location::Url("--upload-pack=x".into()), "main")],
            "is not a usable git URL",
        ),
        (
            vec![spec("a", Location::Url(String::new()), "main")],
            "is not a usable git URL",
        ),
    ];
    for (specs, want) in cases {
        let got: Result<LocalGit, SetupError> = LocalGit::new("/tmp/cache", specs);
        let message = got.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains(want), "{message:?} lacks {want:?}");
    }
}

#[tokio::test]
async fn a_url_repository_is_cloned_then_fetched() {
    let upstream = Work::new();
    upstream.write("app.pipecd.yaml", "v: 1\n");
    let c1 = upstream.commit("one", 1_700_000_000);
    let cache = TempDir::new().unwrap();
    let url = format!("file://{}", upstream.path().display());
    let git = source(Location::Url(url.clone()), cache.path());
    let id = repo_id();

    check(
        "first head",
        git.head(&id, "main").await.map(|c| c.sha),
        Ok(c1.clone()),
    );
    assert!(cache.path().join("repos/demo.git/HEAD").is_file());

    upstream.write("app.pipecd.yaml", "v: 2\n");
    let c2 = upstream.commit("two", 1_700_000_100);
    check(
        "head after push",
        git.head(&id, "main").await.map(|c| c.message),
        Ok("two".to_owned()),
    );
    check(
        "changes",
        git.changed_files(&id, &c1, &c2).await,
        Ok(strings(&["app.pipecd.yaml"])),
    );
    check(
        "read new",
        git.read_file(&id, &c2, "app.pipecd.yaml").await,
        Ok(Some(b"v: 2\n".to_vec())),
    );

    // A forced push that drops c2 still moves the branch.
    upstream.git(&["reset", "--quiet", "--hard", c1.as_str()]);
    upstream.write("other.txt", "x\n");
    let c3 = upstream.commit("three, forced", 1_700_000_200);
    check(
        "head after force push",
        git.head(&id, "main").await.map(|c| c.sha),
        Ok(c3.clone()),
    );

    upstream.git(&["branch", "feature"]);
    check(
        "another branch",
        git.head(&id, "feature").await.map(|c| c.sha),
        Ok(c3.clone()),
    );
    check(
        "missing branch",
        git.head(&id, "nope").await,
        Err(("NoBranch", "branch nope not found")),
    );
    check(
        "missing commit",
        git.commit(&id, &missing()).await,
        Err(("NoCommit", MISSING)),
    );

    // A fresh cache (a restarted controller) finds a commit without being asked for a head,
    // and a plain local path works as a URL.
    let fresh = TempDir::new().unwrap();
    let restarted = source(
        Location::Url(upstream.path().display().to_string()),
        fresh.path(),
    );
    check(
        "commit in a new clone",
        restarted.commit(&id, &c3).await.map(|c| c.message),
        Ok("three, forced".to_owned()),
    );

    let gone = source(
        Location::Url(format!("{url}-missing")),
        TempDir::new().unwrap().path(),
    );
    check(
        "unreachable remote",
        gone.head(&id, "main").await,
        Err(("Failed", "does not appear to be a git repository")),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_checkouts_share_one_complete_tree() {
    let h = history();
    let cache = TempDir::new().unwrap();
    let git = Arc::new(source(
        Location::Path(h.work.path().to_owned()),
        cache.path(),
    ));
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let git = Arc::clone(&git);
            let commit = h.second.clone();
            tokio::spawn(async move { git.checkout(&repo_id(), &commit).await })
        })
        .collect();
    let mut trees = Vec::new();
    for task in tasks {
        trees.push(task.await.unwrap().unwrap());
    }
    let tree = cache.path().join("trees/demo").join(h.second.as_str());
    assert!(trees.iter().all(|t| *t == tree), "{trees:?}");

    let read = |p: &str| std::fs::read_to_string(tree.join(p)).unwrap();
    assert_eq!(read("apps/web/app.pipecd.yaml"), "kind: ECSApp\nspec: {}\n");
    assert_eq!(read("new/name.txt"), "moving\n");
    assert!(!tree.join("gone.txt").exists());
    assert!(!tree.join("old").exists());
    let mode = std::fs::metadata(tree.join("bin/run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "executable bit kept: {mode:o}");
    assert!(!tree.join(".git").exists());

    // Nothing is left half-made, and a second checkout reuses the tree.
    let staging: Vec<_> = std::fs::read_dir(cache.path().join("tmp"))
        .unwrap()
        .collect();
    assert!(staging.is_empty(), "{staging:?}");
    std::fs::write(tree.join("marker"), "kept").unwrap();
    assert_eq!(git.checkout(&repo_id(), &h.second).await.unwrap(), tree);
    assert!(tree.join("marker").exists());

    let older = git.checkout(&repo_id(), &h.first).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(older.join("gone.txt")).unwrap(),
        "bye\n"
    );
}

/// Commits are looked up with git once; a commit seen before that has gone since (a force push,
/// then a gc) still gives NoCommit from every operation, not a failure.
#[tokio::test]
async fn a_commit_gone_since_it_was_seen_is_no_commit() {
    let h = history();
    let cache = TempDir::new().unwrap();
    let git = source(Location::Path(h.work.path().to_owned()), cache.path());
    let id = repo_id();
    check(
        "seen: diff",
        git.changed_files(&id, &h.second, &h.third).await,
        Ok(Vec::new()),
    );
    check(
        "seen: read",
        git.read_file(&id, &h.third, "README.md").await,
        Ok(Some(b"hello\n".to_vec())),
    );

    let first = h.first.to_string();
    h.work.git(&["reset", "--quiet", "--hard", &first]);
    h.work.git(&["reflog", "expire", "--expire=now", "--all"]);
    h.work.git(&["gc", "--quiet", "--prune=now"]);

    let gone = h.third.to_string();
    let gone = gone.as_str();
    check(
        "gone: commit",
        git.commit(&id, &h.third).await.map(|c| c.sha),
        Err(("NoCommit", gone)),
    );
    check(
        "gone: diff to",
        git.changed_files(&id, &h.first, &h.third).await,
        Err(("NoCommit", gone)),
    );
    check(
        "gone: list",
        git.list_files(&id, &h.third).await,
        Err(("NoCommit", gone)),
    );
    check(
        "gone: read",
        git.read_file(&id, &h.third, "README.md").await,
        Err(("NoCommit", gone)),
    );
    check(
        "gone: checkout",
        git.checkout(&id, &h.third).await,
        Err(("NoCommit", gone)),
    );
    check(
        "still there: head",
        git.head(&id, "main").await.map(|c| c.sha),
        Ok(h.first.clone()),
    );
}

#[tokio::test]
async fn a_failing_fetch_never_shows_the_credentials_in_the_url() {
    let cache = TempDir::new().unwrap();
    // Nothing listens on port 1: the clone fails, and git's error quotes the URL.
    let git = source(
        Location::Url("http://x-access-token:ghp_sekrit0123@127.0.0.1:1/o/r.git".into()),
        cache.path(),
    );
    let err = git.head(&repo_id(), "main").await.unwrap_err();
    let text = gannet_domain::report::error_chain(&err);
    assert!(text.contains("127.0.0.1:1"), "{text}");
    assert!(!text.contains("ghp_sekrit0123"), "{text}");
    assert!(!format!("{err:?}").contains("ghp_sekrit0123"), "{err:?}");
}

/// A bare remote that serves a pull request's head on `refs/pull/<n>/head`, as GitHub does,
/// while its branch moves on after the pull request forked.
struct PullRemote {
    work: Work,
    bare: TempDir,
    forked_at: CommitSha,
    branch_head: CommitSha,
    pr_head: CommitSha,
}

impl PullRemote {
    fn new() -> Self {
        let work = Work::new();
        work.write("apps/web/app.pipecd.yaml", "kind: ECSApp\n");
        work.write("apps/api/app.pipecd.yaml", "kind: LambdaApp\n");
        let forked_at = work.commit("base", 1_700_000_000);
        work.git(&["checkout", "--quiet", "-b", "feature"]);
        work.write("apps/web/app.pipecd.yaml", "kind: ECSApp\nspec: {}\n");
        work.write("apps/web/service.json", "{}\n");
        work.commit("web: a service", 1_700_000_100);
        work.write("apps/web/service.json", "{\"cpu\": 256}\n");
        let pr_head = work.commit("web: its cpu", 1_700_000_200);
        work.git(&["checkout", "--quiet", "main"]);
        work.write("apps/api/app.pipecd.yaml", "kind: LambdaApp\nspec: {}\n");
        let branch_head = work.commit("api: moved on", 1_700_000_300);
        let bare = TempDir::new().unwrap();
        let b = bare.path().display().to_string();
        work.git(&["init", "--quiet", "--bare", &b]);
        work.git(&["push", "--quiet", &b, "main"]);
        work.git(&["branch", "--quiet", "-D", "feature"]);
        let remote = Self {
            work,
            bare,
            forked_at,
            branch_head,
            pr_head,
        };
        remote.publish(1, &remote.pr_head.clone());
        remote
    }

    /// Points `refs/pull/<pr>/head` of the remote at `sha` (a push to the pull request).
    fn publish(&self, pr: u64, sha: &CommitSha) {
        let b = self.bare.path().display().to_string();
        let refspec = format!("+{sha}:refs/pull/{pr}/head");
        self.work.git(&["push", "--quiet", &b, &refspec]);
    }

    /// A commit on top of `parent` that only the remote's pull request refs will name.
    fn commit_on(&self, parent: &CommitSha, file: &str, secs: u64) -> CommitSha {
        self.work
            .git(&["checkout", "--quiet", "--detach", parent.as_str()]);
        self.work.write(file, &format!("{secs}\n"));
        let sha = self.work.commit(file, secs);
        self.work.git(&["checkout", "--quiet", "main"]);
        sha
    }

    fn source(&self, cache: &Path) -> LocalGit {
        source(
            Location::Url(format!("file://{}", self.bare.path().display())),
            cache,
        )
    }
}

/// A clone fetches only its branch; a pull request's head becomes readable through
/// `refs/pull/<n>/head`, and what it changes is counted from where it forked, not from where
/// the branch has moved since.
#[tokio::test]
async fn a_pull_request_head_is_fetched_and_compared_from_its_merge_base() {
    let remote = PullRemote::new();
    let cache = TempDir::new().unwrap();
    let git = remote.source(cache.path());
    let id = repo_id();
    let head = &remote.pr_head;

    check(
        "before: the clone has only its branch",
        git.commit(&id, head).await.map(|c| c.sha),
        Err(("NoCommit", head.as_str())),
    );
    let pr = git.pull_request(&id, "main", Some(1), head).await.unwrap();
    assert_eq!(pr.head.sha, *head);
    assert_eq!(pr.head.message, "web: its cpu");
    assert_eq!(pr.head.at, Millis(1_700_000_200_000));
    assert_eq!(pr.base, remote.branch_head);
    assert_eq!(pr.merge_base, remote.forked_at);

    check(
        "the pull request's own changes",
        git.changed_files(&id, &pr.merge_base, head).await,
        Ok(strings(&[
            "apps/web/app.pipecd.yaml",
            "apps/web/service.json",
        ])),
    );
    check(
        "read at the head",
        git.read_file(&id, head, "apps/web/service.json").await,
        Ok(Some(b"{\"cpu\": 256}\n".to_vec())),
    );
    let tree = git.checkout(&id, head).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(tree.join("apps/web/service.json")).unwrap(),
        "{\"cpu\": 256}\n"
    );
    let local_ref = cache.path().join("repos/demo.git/refs/gannet/pull/1");
    assert_eq!(
        std::fs::read_to_string(local_ref).unwrap().trim(),
        head.as_str()
    );

    // Asked again (a repeated webhook): the head is there, nothing is fetched.
    remote.publish(1, &remote.forked_at);
    let again = git.pull_request(&id, "main", Some(1), head).await.unwrap();
    assert_eq!(again, pr);

    // A fresh clone (a restarted controller) fetches it the same way.
    remote.publish(1, head);
    let fresh = TempDir::new().unwrap();
    let restarted = remote.source(fresh.path());
    assert_eq!(
        restarted
            .pull_request(&id, "main", Some(1), head)
            .await
            .unwrap(),
        pr
    );
}

#[tokio::test]
async fn a_pull_request_that_moved_on_or_does_not_exist_is_refused_by_name() {
    let remote = PullRemote::new();
    let cache = TempDir::new().unwrap();
    let git = remote.source(cache.path());
    let id = repo_id();

    // Pushed to again after the webhook named its head: the fetched ref is another commit.
    let asked = remote.commit_on(&remote.forked_at, "a.txt", 1_700_000_400);
    let pushed = remote.commit_on(&asked, "b.txt", 1_700_000_500);
    remote.publish(2, &pushed);
    let err = git
        .pull_request(&id, "main", Some(2), &asked)
        .await
        .unwrap_err();
    let moved = format!("the pull request's head moved to {pushed}: {asked} is no longer");
    let text = gannet_domain::report::error_chain(&err);
    assert!(text.contains(&moved), "{text}");
    // Refused as a pull request that cannot be read as asked (no retry helps).
    assert!(matches!(err, GitError::PullRequest { .. }), "{err:?}");

    check(
        "an unknown pull request",
        git.pull_request(&id, "main", Some(9), &missing()).await,
        Err((
            "PullRequest",
            "pull request #9 not found: the remote has no refs/pull/9/head",
        )),
    );
    check(
        "a branch that does not exist",
        git.pull_request(&id, "nope", Some(1), &remote.pr_head)
            .await,
        Err(("NoBranch", "branch nope not found")),
    );

    // Unrelated histories: a head that shares no commit with the branch.
    remote
        .work
        .git(&["checkout", "--quiet", "--orphan", "other"]);
    remote.work.write("other.txt", "alone\n");
    let orphan = remote.work.commit("orphan", 1_700_000_600);
    remote.work.git(&["checkout", "--quiet", "--force", "main"]);
    remote.publish(3, &orphan);
    check(
        "no merge base",
        git.pull_request(&id, "main", Some(3), &orphan).await,
        Err(("PullRequest", "have no merge base (unrelated histories)")),
    );
}

/// Without a pull request (a preview asked through the API), the commit is fetched by its id:
/// a local remote serves any commit a ref reaches; one it has not is named.
#[tokio::test]
async fn a_head_without_a_pull_request_is_fetched_by_its_id() {
    let remote = PullRemote::new();
    let cache = TempDir::new().unwrap();
    let git = remote.source(cache.path());
    let id = repo_id();

    let pr = git
        .pull_request(&id, "main", None, &remote.pr_head)
        .await
        .unwrap();
    assert_eq!(
        (pr.head.sha, pr.base, pr.merge_base),
        (
            remote.pr_head.clone(),
            remote.branch_head.clone(),
            remote.forked_at.clone()
        )
    );
    assert!(!cache.path().join("repos/demo.git/refs/gannet").exists());

    let unpushed = remote.commit_on(&remote.forked_at, "local.txt", 1_700_000_700);
    check(
        "a commit the remote does not have",
        git.pull_request(&id, "main", None, &unpushed).await,
        Err(("PullRequest", "uploadpack.allowReachableSHA1InWant")),
    );

    // A repository read in place is never fetched into: its commits are there or not.
    let in_place = source(
        Location::Path(remote.work.path().to_owned()),
        TempDir::new().unwrap().path(),
    );
    let pr = in_place
        .pull_request(&id, "main", Some(7), &unpushed)
        .await
        .unwrap();
    assert_eq!(pr.merge_base, remote.forked_at);
    check(
        "in place, a commit it has not",
        in_place
            .pull_request(&id, "main", Some(7), &missing())
            .await,
        Err(("NoCommit", MISSING)),
    );
}

/// As above, with the commits in a pack that has been read from before the gc replaces it: the
/// pack gone from disk is not read from again.
#[tokio::test]
async fn a_commit_gone_from_a_replaced_pack_is_no_commit() {
    let h = history();
    h.work.git(&["gc", "--quiet"]);
    let cache = TempDir::new().unwrap();
    let git = source(Location::Path(h.work.path().to_owned()), cache.path());
    let id = repo_id();
    check(
        "seen, from the pack",
        git.commit(&id, &h.third).await.map(|c| c.sha),
        Ok(h.third.clone()),
    );

    let first = h.first.to_string();
    h.work.git(&["reset", "--quiet", "--hard", &first]);
    h.work.git(&["reflog", "expire", "--expire=now", "--all"]);
    h.work.git(&["gc", "--quiet", "--prune=now"]);

    let gone = h.third.to_string();
    check(
        "gone: commit",
        git.commit(&id, &h.third).await.map(|c| c.sha),
        Err(("NoCommit", gone.as_str())),
    );
    check(
        "gone: list",
        git.list_files(&id, &h.third).await,
        Err(("NoCommit", gone.as_str())),
    );
    check(
        "still there",
        git.commit(&id, &h.first).await.map(|c| c.sha),
        Ok(h.first.clone()),
    );
}

/// A path may name a bare repository or a linked work tree (whose `.git` is a file naming its
/// git directory): each is opened as it is and read.
#[tokio::test]
async fn a_bare_repository_and_a_linked_work_tree_are_read_in_place() {
    let h = history();
    let bare = TempDir::new().unwrap();
    let b = bare.path().display().to_string();
    h.work.git(&["init", "--quiet", "--bare", &b]);
    h.work.git(&["push", "--quiet", &b, "main"]);
    let linked = TempDir::new().unwrap();
    let l = linked.path().join("tree").display().to_string();
    h.work.git(&[
        "worktree",
        "add",
        "--quiet",
        "-b",
        "side",
        &l,
        h.second.as_str(),
    ]);
    for (what, path, branch, want) in [
        ("bare", bare.path().to_owned(), "main", &h.third),
        (
            "linked work tree",
            linked.path().join("tree"),
            "side",
            &h.second,
        ),
    ] {
        let cache = TempDir::new().unwrap();
        let git = source(Location::Path(path), cache.path());
        check(
            what,
            git.head(&repo_id(), branch).await.map(|c| c.sha),
            Ok(want.clone()),
        );
        check(
            what,
            git.read_file(&repo_id(), want, "new/name.txt").await,
            Ok(Some(b"moving\n".to_vec())),
        );
    }
}
