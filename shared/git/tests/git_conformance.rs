//! `LocalGit` reads a repository in process (gix); these tests hold every answer it gives to
//! what the git CLI itself prints for the same question, on a repository built with git that
//! has what trips tree walks up: renames, a file moved between directories, a file replaced by
//! a directory, deletions, a mode change, symbolic links (one leaving the tree), a submodule,
//! paths with spaces, unicode and bytes that are not UTF-8, an empty commit, a multi-line
//! message with trailing newlines, and merges with changes on both sides.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{symlink, PermissionsExt as _};
use std::path::Path;
use std::process::{Command, Output};

use gannet_domain::duration::Millis;
use gannet_domain::ids::{CommitSha, RepoId};
use gannet_domain::ports::{CommitInfo, GitSource};
use gannet_git::{LocalGit, Location, RepoSpec};
use tempfile::TempDir;

/// A work tree the test commits to with the git CLI, and asks questions of.
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

    /// git with fixed identities and times and no user configuration, whatever its status.
    fn run(&self, args: &[&str], secs: u64) -> Output {
        Command::new("git")
            .args(args)
            .current_dir(self.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Zoë Ångström")
            .env("GIT_AUTHOR_EMAIL", "zoe@example.com")
            .env("GIT_AUTHOR_DATE", format!("@{} +0200", secs - 3600))
            .env("GIT_COMMITTER_NAME", "Cy Committer")
            .env("GIT_COMMITTER_EMAIL", "cy@example.com")
            .env("GIT_COMMITTER_DATE", format!("@{secs} -0700"))
            .output()
            .unwrap()
    }

    /// git's stdout; the command must succeed.
    fn bytes(&self, args: &[&str]) -> Vec<u8> {
        let out = self.run(args, 1_700_000_000);
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }

    fn git(&self, args: &[&str]) -> String {
        String::from_utf8(self.bytes(args))
            .unwrap()
            .trim()
            .to_owned()
    }

    fn write(&self, path: impl AsRef<Path>, content: &str) {
        let file = self.path().join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, content).unwrap();
    }

    fn commit_sha(&self, rev: &str) -> CommitSha {
        CommitSha::parse(&self.git(&["rev-parse", rev])).unwrap()
    }

    /// Commits everything (and the submodule at `vendor/sub`, pointing at `submodule`), with
    /// `message` kept verbatim and the committer time `secs`.
    fn commit(&self, message: &str, secs: u64, submodule: &CommitSha) -> CommitSha {
        self.git(&["add", "--all"]);
        let gitlink = format!("160000,{submodule},vendor/sub");
        self.git(&["update-index", "--add", "--cacheinfo", &gitlink]);
        let file = self.path().join(".git/message");
        std::fs::write(&file, message).unwrap();
        let file = file.display().to_string();
        let args = [
            "commit",
            "--quiet",
            "--allow-empty",
            "--no-verify",
            "--cleanup=verbatim",
            "-F",
            &file,
        ];
        let out = self.run(&args, secs);
        assert!(out.status.success(), "{out:?}");
        self.commit_sha("HEAD")
    }
}

/// The history every question is asked of, and its commits.
struct Fixture {
    work: Work,
    commits: Vec<CommitSha>,
}

fn fixture() -> Fixture {
    let w = Work::new();
    // The submodule's commits are any commit ids: a gitlink is only named, never read.
    let sub_one = CommitSha::parse(&"1".repeat(40)).unwrap();
    let sub_two = CommitSha::parse(&"2".repeat(40)).unwrap();

    w.write("README.md", "hello\n");
    w.write("apps/web/app.pipecd.yaml", "kind: ECSApp\n");
    w.write("old/name.txt", "moving\n");
    w.write("gone.txt", "bye\n");
    w.write("bin/run.sh", "#!/bin/sh\necho run\n");
    w.write("dir with space/a file.txt", "spaced\n");
    w.write("ünïcødé/файл.yaml", "unicode\n");
    w.write(OsStr::from_bytes(b"bytes/caf\xe9.txt"), "latin-1 name\n");
    // Names that sort around a directory's: `x`, `x.y`, `x-y` and, later, `x/`.
    w.write("x", "a file, then a directory\n");
    w.write("x.y", "dot\n");
    w.write("x-y", "dash\n");
    w.write("z", "a file, then a directory, with no neighbours\n");
    symlink("README.md", w.path().join("link-in")).unwrap();
    symlink("../../../../../../etc/hostname", w.path().join("link-out")).unwrap();
    let first = w.commit("first", 1_700_000_000, &sub_one);

    std::fs::create_dir(w.path().join("new")).unwrap();
    w.git(&["mv", "old/name.txt", "new/name.txt"]);
    std::fs::create_dir_all(w.path().join("apps/api")).unwrap();
    w.git(&["mv", "apps/web/app.pipecd.yaml", "apps/api/app.pipecd.yaml"]);
    // `x.y` sorts before the directory `x/` but after the file `x`: git lists its removal
    // between them.
    w.git(&["rm", "--quiet", "gone.txt", "x", "x.y", "z"]);
    w.write("x/y", "now inside a directory\n");
    w.write("z/w", "now inside a directory\n");
    let script = w.path().join("bin/run.sh");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let second = w.commit("second: moves", 1_700_000_100, &sub_two);

    let message = "third: nothing changed\n\nA body\nover two lines.\n\n\n";
    let empty = w.commit(message, 1_700_000_200, &sub_two);

    w.git(&["checkout", "--quiet", "-b", "feature"]);
    w.write("feature.txt", "feature\n");
    w.write("apps/api/app.pipecd.yaml", "kind: ECSApp\nspec: {}\n");
    let feature = w.commit("feature: a file and a change", 1_700_000_300, &sub_two);
    w.git(&["checkout", "--quiet", "main"]);
    w.write("README.md", "hello, main\n");
    let main_side = w.commit("main: its own change", 1_700_000_400, &sub_two);
    let merge_args = [
        "merge",
        "--quiet",
        "--no-ff",
        "-m",
        "merge feature",
        "feature",
    ];
    let out = w.run(&merge_args, 1_700_000_500);
    assert!(out.status.success(), "{out:?}");
    let merge = w.commit_sha("HEAD");

    std::fs::remove_file(w.path().join("link-in")).unwrap();
    w.write("dir with space/a file.txt", "changed\n");
    let after = w.commit("after the merge", 1_700_000_600, &sub_two);

    let commits = vec![first, second, empty, feature, main_side, merge, after];
    Fixture { work: w, commits }
}

fn repo_id() -> RepoId {
    RepoId::parse("demo").unwrap()
}

fn source(work: &Work, cache: &Path) -> LocalGit {
    let spec = RepoSpec {
        id: repo_id(),
        location: Location::Path(work.path().to_owned()),
        branch: "main".into(),
    };
    LocalGit::new(cache, vec![spec]).unwrap()
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn nul_separated(out: &[u8]) -> Vec<String> {
    out.split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(lossy)
        .collect()
}

/// `git ls-tree -z` entries as (type, path).
fn ls_tree(work: &Work, args: &[&str]) -> Vec<(String, String)> {
    let out = work.bytes(&[&["ls-tree", "-z", "--full-tree"], args].concat());
    out.split(|b| *b == 0)
        .filter(|e| !e.is_empty())
        .map(|entry| {
            let tab = entry.iter().position(|b| *b == b'\t').unwrap();
            let meta = lossy(&entry[..tab]);
            let kind = meta.split(' ').nth(1).unwrap().to_owned();
            (kind, lossy(&entry[tab + 1..]))
        })
        .collect()
}

/// What `git log -1 --format=%an%x00%ct%x00%B` says of `sha`, trailing newlines trimmed.
fn git_commit_info(work: &Work, sha: &CommitSha) -> CommitInfo {
    let out = work.bytes(&[
        "log",
        "-1",
        "--no-show-signature",
        "--format=%an%x00%ct%x00%B",
        sha.as_str(),
        "--",
    ]);
    let text = lossy(&out);
    let mut fields = text.splitn(3, '\0');
    let author = fields.next().unwrap().to_owned();
    let seconds: u64 = fields.next().unwrap().parse().unwrap();
    let message = fields.next().unwrap();
    // `git log` ends each entry with a newline of its own.
    CommitInfo {
        sha: sha.clone(),
        message: message.trim_end_matches('\n').to_owned(),
        author,
        at: Millis(seconds * 1000),
    }
}

#[tokio::test]
async fn commits_heads_and_history_answer_as_git_does() {
    let f = fixture();
    let cache = TempDir::new().unwrap();
    let git = source(&f.work, cache.path());
    let id = repo_id();

    let head = git.head(&id, "main").await.unwrap();
    let main = f.work.commit_sha("main");
    assert_eq!(head, git_commit_info(&f.work, &main), "head");
    let empty = git.commit(&id, &f.commits[2]).await.unwrap();
    assert_eq!(
        empty.message,
        "third: nothing changed\n\nA body\nover two lines."
    );
    assert_eq!(
        (empty.author.as_str(), empty.at),
        ("Zoë Ångström", Millis(1_700_000_200_000))
    );

    for sha in &f.commits {
        let got = git.commit(&id, sha).await.unwrap();
        assert_eq!(got, git_commit_info(&f.work, sha), "commit {sha}");
    }
    for a in &f.commits {
        for b in &f.commits {
            let range = format!("{a}..{b}");
            let count: u64 = f
                .work
                .git(&["rev-list", "--count", &range])
                .parse()
                .unwrap();
            let got = git.commits_ahead(&id, a, b).await.unwrap();
            assert_eq!(got, count, "rev-list --count {range}");

            let args = ["merge-base", "--is-ancestor", a.as_str(), b.as_str()];
            let status = f.work.run(&args, 1_700_000_000).status.code();
            let got = git.is_ancestor(&id, a, b).await.unwrap();
            assert_eq!(Some(if got { 0 } else { 1 }), status, "{args:?}");
        }
        // The merge base with the branch's head, as a pull request's head would find it.
        let pr = git.pull_request(&id, "main", None, a).await.unwrap();
        let base = f.work.git(&["merge-base", main.as_str(), a.as_str()]);
        assert_eq!(pr.merge_base.as_str(), base, "merge-base main {a}");
        assert_eq!(
            (pr.base.clone(), pr.head.sha.clone()),
            (main.clone(), a.clone())
        );
    }
}

#[tokio::test]
async fn changed_listed_and_read_files_are_what_git_prints() {
    let f = fixture();
    let cache = TempDir::new().unwrap();
    let git = source(&f.work, cache.path());
    let id = repo_id();

    for from in &f.commits {
        for to in &f.commits {
            let args = [
                "diff-tree",
                "-r",
                "-z",
                "--no-renames",
                "--name-only",
                from.as_str(),
                to.as_str(),
            ];
            let want = nul_separated(&f.work.bytes(&args));
            let got = git.changed_files(&id, from, to).await.unwrap();
            assert_eq!(got, want, "{args:?}");
        }
    }
    // What the fixture means to cover, as git names it.
    let moves = git
        .changed_files(&id, &f.commits[0], &f.commits[1])
        .await
        .unwrap();
    for path in [
        "apps/api/app.pipecd.yaml",
        "apps/web/app.pipecd.yaml",
        "bin/run.sh",
        "new/name.txt",
        "old/name.txt",
        "vendor/sub",
        "x",
        "x.y",
        "x/y",
        "z",
        "z/w",
    ] {
        assert!(moves.contains(&path.to_owned()), "{path} in {moves:?}");
    }

    for sha in &f.commits {
        let entries = ls_tree(&f.work, &["-r", sha.as_str()]);
        let blobs: Vec<String> = entries
            .iter()
            .filter(|(kind, _)| kind == "blob")
            .map(|(_, path)| path.clone())
            .collect();
        assert_eq!(
            git.list_files(&id, sha).await.unwrap(),
            blobs,
            "ls-tree -r {sha}"
        );
        assert!(
            entries.iter().any(|(kind, _)| kind == "commit"),
            "a submodule"
        );

        // Every path with trees too (`-t`), and a few that are not there.
        let mut paths = ls_tree(&f.work, &["-r", "-t", sha.as_str()]);
        for missing in ["nope", "README.md/x", "x/y/z", "vendor/sub/file"] {
            paths.push(("none".to_owned(), missing.to_owned()));
        }
        for (kind, path) in paths {
            if path.contains('\u{fffd}') {
                continue; // a name that is not UTF-8 cannot be asked for by a &str
            }
            let want = (kind == "blob").then(|| {
                let spec = format!("{sha}:{path}");
                f.work.bytes(&["cat-file", "blob", &spec])
            });
            let got = git.read_file(&id, sha, &path).await.unwrap();
            assert_eq!(got, want, "{kind} {path} at {sha}");
        }
    }
}

/// What is at `path`, as a checkout compares it: a directory, a link and its target, or a
/// file's content and whether it is executable.
#[derive(Debug, PartialEq)]
enum Node {
    Dir,
    Link(Vec<u8>),
    File { executable: bool, content: Vec<u8> },
}

fn nodes(root: &Path) -> Vec<(Vec<u8>, Node)> {
    let mut out = Vec::new();
    collect(root, root, &mut out);
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<(Vec<u8>, Node)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .as_os_str()
            .as_bytes()
            .to_vec();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let node = if meta.file_type().is_symlink() {
            Node::Link(
                std::fs::read_link(&path)
                    .unwrap()
                    .as_os_str()
                    .as_bytes()
                    .to_vec(),
            )
        } else if meta.is_dir() {
            collect(root, &path, out);
            Node::Dir
        } else {
            Node::File {
                executable: meta.permissions().mode() & 0o111 != 0,
                content: std::fs::read(&path).unwrap(),
            }
        };
        out.push((rel, node));
    }
}

/// A checkout holds what `git read-tree` and `git checkout-index` write for the same commit,
/// less the symbolic link that leads out of the tree.
#[tokio::test]
async fn a_checkout_is_what_git_checks_out() {
    let f = fixture();
    let cache = TempDir::new().unwrap();
    let git = source(&f.work, cache.path());
    let id = repo_id();
    for sha in &f.commits {
        let theirs = TempDir::new().unwrap();
        let index = theirs.path().join("index");
        let tree = theirs.path().join("tree");
        std::fs::create_dir(&tree).unwrap();
        let checkout = |args: &[&str]| {
            let out = Command::new("git")
                .args(args)
                .current_dir(f.work.path())
                .env("GIT_INDEX_FILE", &index)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
        };
        checkout(&["read-tree", sha.as_str()]);
        let work_tree = format!("--work-tree={}", tree.display());
        checkout(&[&work_tree, "checkout-index", "--all", "--force"]);
        let mut want = nodes(&tree);
        want.retain(|(path, _)| path != b"link-out");

        let ours = git.checkout(&id, sha).await.unwrap();
        assert_eq!(nodes(&ours), want, "checkout of {sha}");
        assert!(want
            .iter()
            .any(|(p, n)| p == b"vendor/sub" && *n == Node::Dir));
    }
}
