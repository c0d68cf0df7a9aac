//! What a deployment reads of a repository given by path (its head, a file, the changed files,
//! a checkout) starts no git process. The test puts a `git` first on `PATH` that records each
//! run and fails; that changes this process's environment, so this file holds this one test
//! alone (its own test binary), and the runtime starts only after the change.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

use gannet_domain::ids::{CommitSha, RepoId};
use gannet_domain::ports::GitSource;
use gannet_git::{LocalGit, Location, RepoSpec};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Ada")
        .env("GIT_AUTHOR_EMAIL", "ada@example.com")
        .env("GIT_COMMITTER_NAME", "Ada")
        .env("GIT_COMMITTER_EMAIL", "ada@example.com")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn reading_a_path_repository_starts_no_git_process() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    git(w, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(w.join("app.pipecd.yaml"), "v: 1\n").unwrap();
    git(w, &["add", "--all"]);
    git(w, &["commit", "--quiet", "-m", "one"]);
    let first = CommitSha::parse(&git(w, &["rev-parse", "HEAD"])).unwrap();
    std::fs::write(w.join("app.pipecd.yaml"), "v: 2\n").unwrap();
    git(w, &["commit", "--quiet", "--all", "-m", "two"]);

    // From here on, `git` is a shim that leaves a mark and fails.
    let shim = tempfile::tempdir().unwrap();
    let marks = shim.path().join("runs");
    let script = format!("#!/bin/sh\necho \"$@\" >> '{}'\nexit 97\n", marks.display());
    let git_shim = shim.path().join("git");
    std::fs::write(&git_shim, script).unwrap();
    std::fs::set_permissions(&git_shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![shim.path().to_owned()];
    paths.extend(std::env::split_paths(&path));
    std::env::set_var("PATH", std::env::join_paths(paths).unwrap());
    let shim_runs = Command::new("git").arg("--version").status().unwrap();
    assert_eq!(
        shim_runs.code(),
        Some(97),
        "the shim is the git found first"
    );
    std::fs::remove_file(&marks).unwrap();

    let cache = tempfile::tempdir().unwrap();
    let id = RepoId::parse("demo").unwrap();
    let source = LocalGit::new(
        cache.path(),
        vec![RepoSpec {
            id: id.clone(),
            location: Location::Path(w.to_owned()),
            branch: "main".into(),
        }],
    )
    .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    runtime.block_on(async {
        let head = source.head(&id, "main").await.unwrap();
        let file = source.read_file(&id, &head.sha, "app.pipecd.yaml").await;
        assert_eq!(file.unwrap(), Some(b"v: 2\n".to_vec()));
        let changed = source.changed_files(&id, &first, &head.sha).await;
        assert_eq!(changed.unwrap(), vec!["app.pipecd.yaml".to_owned()]);
        let tree = source.checkout(&id, &head.sha).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(tree.join("app.pipecd.yaml")).unwrap(),
            "v: 2\n"
        );
    });
    let runs = std::fs::read_to_string(&marks).unwrap_or_default();
    assert!(runs.is_empty(), "git ran: {runs}");
}
