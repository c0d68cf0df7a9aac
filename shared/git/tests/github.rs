//! `GithubSource` and `GithubStatuses` against a FAKE GitHub API (`tests/github_fake`): a local
//! server on 127.0.0.1 that replays the shapes of GitHub's documented responses. It is not
//! GitHub, and these tests reach nothing else.

mod github_fake;

use std::path::Path;
use std::time::Duration;

use gannet_domain::duration::Millis;
use gannet_domain::ids::{CommitSha, RepoId};
use gannet_domain::ports::{CommitState, CommitStatus, CommitStatuses, GitError, GitSource};
use gannet_domain::report::error_chain;
use gannet_git::github::{GithubAuth, GithubClient, GithubSource, GithubStatuses, Secret};
use github_fake::test_key::{APP_PRIVATE_KEY, APP_PUBLIC_KEY};
use github_fake::{raw_tarball, Credentials, FakeGithub, Fault, Mode};
use tar::EntryType;

const TOKEN: &str = "ghp_testtoken";
const REPO: &str = "acme/shop";

fn shop() -> RepoId {
    RepoId::parse("shop").unwrap()
}

fn sha(s: &str) -> CommitSha {
    CommitSha::parse(s).unwrap()
}

fn token() -> GithubAuth {
    GithubAuth::Token(Secret::new(TOKEN.into()))
}

struct Setup {
    fake: FakeGithub,
    git: GithubSource,
    cache: tempfile::TempDir,
}

async fn with_token() -> Setup {
    let fake = FakeGithub::start(Credentials::Token(TOKEN.into())).await;
    setup(fake, &token(), REPO)
}

fn setup(fake: FakeGithub, auth: &GithubAuth, full_name: &str) -> Setup {
    let cache = tempfile::tempdir().unwrap();
    let client = GithubClient::new(auth, &fake.base).unwrap();
    let git = GithubSource::new(client, vec![(shop(), full_name.into())])
        .unwrap()
        .with_cache_dir(cache.path());
    Setup { fake, git, cache }
}

/// What an error is, in a line a table can hold.
fn describe(err: &GitError) -> String {
    match err {
        GitError::UnknownRepo(r) => format!("unknown repo {r}"),
        GitError::NoBranch { branch, .. } => format!("no branch {branch}"),
        GitError::NoCommit { commit, .. } => format!("no commit {}", &commit[..7]),
        GitError::PullRequest { reason, .. } => format!("pull request: {reason}"),
        GitError::Failed { operation, .. } => format!("{operation} failed: {}", error_chain(err)),
    }
}

fn check_err<T: std::fmt::Debug>(got: Result<T, GitError>, want: &str) {
    match got {
        Ok(v) => panic!("expected an error containing {want:?}, got {v:?}"),
        Err(e) => {
            let text = describe(&e);
            assert!(text.contains(want), "{text:?} should contain {want:?}");
        }
    }
}

#[tokio::test]
async fn head_and_commits() {
    let Setup { fake, git, .. } = with_token().await;
    let c1 = fake.commit(
        REPO,
        &[],
        "first\n\nwith a body\n",
        &[("a.yaml", Mode::File, b"a")],
    );
    fake.set_branch(REPO, "main", &c1);
    fake.set_branch(REPO, "release/1.0", &c1);

    let head = git.head(&shop(), "main").await.unwrap();
    assert_eq!(head.sha, sha(&c1));
    assert_eq!(head.message, "first\n\nwith a body");
    assert_eq!(head.author, "Mona Lisa");
    assert_eq!(head.at, Millis(1_302_796_849_000));
    assert_eq!(git.commit(&shop(), &sha(&c1)).await.unwrap(), head);
    assert_eq!(git.head(&shop(), "release/1.0").await.unwrap(), head);

    let missing = sha(&"f".repeat(40));
    check_err(git.head(&shop(), "nope").await, "no branch nope");
    check_err(git.head(&shop(), "a/../b").await, "no branch a/../b");
    check_err(git.commit(&shop(), &missing).await, "no commit fffffff");
    let other = RepoId::parse("other").unwrap();
    check_err(git.head(&other, "main").await, "unknown repo other");

    // A repository the credentials cannot see is a failure naming it, not a missing branch.
    let Setup {
        fake: _running,
        git: gone,
        ..
    } = setup(fake, &token(), "acme/gone");
    check_err(
        gone.head(&shop(), "main").await,
        "read branch failed: git read branch failed for shop: GET /repos/acme/gone: not found",
    );
}

#[tokio::test]
async fn changed_files_from_compare_with_renames_as_both_paths() {
    let Setup { fake, git, .. } = with_token().await;
    let c1 = fake.commit(
        REPO,
        &[],
        "one",
        &[
            ("a.yaml", Mode::File, b"a"),
            ("bin/run", Mode::File, b"#!/bin/sh"),
            ("d/b.yaml", Mode::File, b"b"),
            ("d/c.yaml", Mode::File, b"c"),
            ("keep", Mode::File, b"k"),
        ],
    );
    let c2 = fake.commit(
        REPO,
        &[&c1],
        "two",
        &[
            ("a.yaml", Mode::File, b"a2"),
            ("bin/run", Mode::Executable, b"#!/bin/sh"),
            ("e/c.yaml", Mode::File, b"c"),
            ("keep", Mode::File, b"k"),
            ("new.yaml", Mode::File, b"n"),
        ],
    );
    let c3 = fake.commit(
        REPO,
        &[&c1],
        "force-pushed instead of two",
        &[
            ("a.yaml", Mode::File, b"a"),
            ("bin/run", Mode::File, b"#!/bin/sh"),
            ("d/b.yaml", Mode::File, b"b"),
            ("d/c.yaml", Mode::File, b"c3"),
            ("keep", Mode::File, b"k"),
        ],
    );
    let all = [
        "a.yaml", "bin/run", "d/b.yaml", "d/c.yaml", "e/c.yaml", "new.yaml",
    ];
    let cases: [(&str, &str, &[&str], usize); 4] = [
        // head ahead of base: the compare answer is complete, no tree is listed
        (&c1, &c2, &all, 0),
        (&c1, &c1, &[], 0),
        // head behind base, or diverged: compare diffs against the merge base, so the trees
        // are compared instead
        (&c2, &c1, &all, 2),
        (
            &c2,
            &c3,
            &[
                "a.yaml", "bin/run", "d/b.yaml", "d/c.yaml", "e/c.yaml", "new.yaml",
            ],
            2,
        ),
    ];
    for (from, to, want, tree_requests) in cases {
        let before = fake.count("/git/trees/");
        let got = git
            .changed_files(&shop(), &sha(from), &sha(to))
            .await
            .unwrap();
        assert_eq!(got, want, "{} -> {}", &from[..7], &to[..7]);
        assert_eq!(fake.count("/git/trees/") - before, tree_requests);
    }
    let missing = "f".repeat(40);
    check_err(
        git.changed_files(&shop(), &sha(&c1), &sha(&missing)).await,
        "no commit fffffff",
    );
}

/// Whether a commit is on the branch (the head or an ancestor of it), from the compare API
/// alone: no tree or tarball is read.
#[tokio::test]
async fn is_ancestor_from_compare_without_reading_a_tree() {
    let Setup { fake, git, .. } = with_token().await;
    let c1 = fake.commit(REPO, &[], "one", &[("a", Mode::File, b"1")]);
    let c2 = fake.commit(REPO, &[&c1], "two", &[("a", Mode::File, b"2")]);
    let feature = fake.commit(REPO, &[&c1], "feature", &[("a", Mode::File, b"f")]);
    let cases = [
        (&c1, &c2, true),
        (&c2, &c2, true),
        (&c2, &c1, false),
        (&feature, &c2, false),
    ];
    for (commit, head, want) in cases {
        let got = git
            .is_ancestor(&shop(), &sha(commit), &sha(head))
            .await
            .unwrap();
        assert_eq!(got, want, "{} on {}", &commit[..7], &head[..7]);
    }
    check_err(
        git.is_ancestor(&shop(), &sha(&"f".repeat(40)), &sha(&c2))
            .await,
        "no commit fffffff",
    );
    assert_eq!(fake.count("/git/trees/"), 0);
    assert_eq!(fake.count("tarball"), 0);
}

/// How far a branch has moved on from a commit: the compare API's `ahead_by`.
#[tokio::test]
async fn commits_ahead_from_compare() {
    let Setup { fake, git, .. } = with_token().await;
    let c1 = fake.commit(REPO, &[], "one", &[("a", Mode::File, b"1")]);
    let c2 = fake.commit(REPO, &[&c1], "two", &[("a", Mode::File, b"2")]);
    let c3 = fake.commit(REPO, &[&c2], "three", &[("a", Mode::File, b"3")]);
    for (base, head, want) in [(&c1, &c3, 2), (&c3, &c3, 0), (&c2, &c3, 1), (&c3, &c1, 0)] {
        let got = git
            .commits_ahead(&shop(), &sha(base), &sha(head))
            .await
            .unwrap();
        assert_eq!(got, want, "{} ahead of {}", &head[..7], &base[..7]);
    }
    check_err(
        git.commits_ahead(&shop(), &sha(&"f".repeat(40)), &sha(&c2))
            .await,
        "no commit fffffff",
    );
    assert_eq!(fake.count("tarball"), 0);
}

#[tokio::test]
async fn a_compare_at_its_300_file_limit_falls_back_to_the_trees() {
    let Setup { fake, git, .. } = with_token().await;
    let base = fake.commit(REPO, &[], "base", &[("readme", Mode::File, b"r")]);
    let names: Vec<String> = (0..305)
        .map(|i| format!("apps/a{}/f{i}.yaml", i % 7))
        .collect();
    let mut files: Vec<(&str, Mode, &[u8])> = names
        .iter()
        .map(|n| (n.as_str(), Mode::File, &b"x"[..]))
        .collect();
    files.push(("readme", Mode::File, b"r"));
    let head = fake.commit(REPO, &[&base], "many", &files);
    let mut want = names.clone();
    want.sort();

    let got = git
        .changed_files(&shop(), &sha(&base), &sha(&head))
        .await
        .unwrap();
    assert_eq!(got, want);
    assert_eq!(fake.count("recursive=1"), 2);

    // When GitHub truncates the recursive listings too, the trees are walked level by level,
    // skipping subtrees whose sha did not change.
    fake.truncate_recursive_trees();
    let before = fake.count("/git/trees/");
    let got = git
        .changed_files(&shop(), &sha(&base), &sha(&head))
        .await
        .unwrap();
    assert_eq!(got, want);
    let walked = fake.count("/git/trees/") - before - 2;
    // the root on both sides; apps/ and its 7 directories exist on the new side only
    assert_eq!(walked, 2 + 1 + 7);
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn checkout_unpacks_the_tarball_once_per_commit() {
    let Setup { fake, git, cache } = with_token().await;
    let c1 = fake.commit(
        REPO,
        &[],
        "tree",
        &[
            ("app.pipecd.yaml", Mode::File, b"kind: LambdaApp"),
            ("apps/web/function.yaml", Mode::File, b"name: web"),
            ("apps/shared", Mode::Symlink, b"web"),
            ("bin/deploy.sh", Mode::Executable, b"#!/bin/sh\n"),
            ("link", Mode::Symlink, b"apps/web/function.yaml"),
        ],
    );
    let commit = sha(&c1);
    let dir = git.checkout(&shop(), &commit).await.unwrap();
    assert_eq!(dir, cache.path().join("shop").join(&c1));
    assert_eq!(
        std::fs::read(dir.join("apps/web/function.yaml")).unwrap(),
        b"name: web"
    );
    assert_eq!(mode_of(&dir.join("bin/deploy.sh")), 0o755);
    assert_eq!(mode_of(&dir.join("app.pipecd.yaml")), 0o644);
    assert_eq!(
        std::fs::read_link(dir.join("link")).unwrap(),
        Path::new("apps/web/function.yaml")
    );
    assert_eq!(
        git.list_files(&shop(), &commit).await.unwrap(),
        [
            "app.pipecd.yaml",
            "apps/shared",
            "apps/web/function.yaml",
            "bin/deploy.sh",
            "link"
        ]
    );
    let reads: [(&str, Option<&[u8]>); 7] = [
        ("apps/web/function.yaml", Some(b"name: web")),
        ("link", Some(b"apps/web/function.yaml")),
        ("apps", None),
        ("missing.yaml", None),
        ("../../etc/passwd", None),
        ("/etc/passwd", None),
        // git has no blob at a path through a symbolic link
        ("apps/shared/function.yaml", None),
    ];
    for (path, want) in reads {
        let got = git.read_file(&shop(), &commit, path).await.unwrap();
        assert_eq!(got.as_deref(), want, "{path}");
    }
    assert_eq!(fake.count("/tarball/"), 1);
    assert_eq!(fake.count("/legacy.tar.gz/"), 1);

    // The tree stays on disk: a new source over the same cache asks GitHub nothing.
    let again = source_at(&fake, cache.path());
    assert_eq!(again.checkout(&shop(), &commit).await.unwrap(), dir);
    assert_eq!(fake.count("/tarball/"), 1);
    let staging: Vec<_> = std::fs::read_dir(cache.path().join(".staging"))
        .unwrap()
        .collect();
    assert!(staging.is_empty(), "staging left behind: {staging:?}");

    // Credentials go to the API only; codeload's URL carries its own token.
    for seen in fake.seen() {
        let want = (seen.server == "api").then(|| format!("Bearer {TOKEN}"));
        assert_eq!(seen.authorization, want, "{} {}", seen.server, seen.path);
    }
    check_err(
        git.checkout(&shop(), &sha(&"e".repeat(40))).await,
        "no commit eeeeeee",
    );
}

fn source_at(fake: &FakeGithub, cache: &Path) -> GithubSource {
    let client = GithubClient::new(&token(), &fake.base).unwrap();
    GithubSource::new(client, vec![(shop(), REPO.into())])
        .unwrap()
        .with_cache_dir(cache)
}

/// A tar entry written raw: path, type, link target.
type RawEntry = (&'static str, EntryType, &'static str);

#[tokio::test]
async fn tarball_entries_that_would_escape_are_refused() {
    let Setup { fake, git, cache } = with_token().await;
    let regular = EntryType::Regular;
    let symlink = EntryType::Symlink;
    let cases: [(&str, Vec<RawEntry>, &str); 7] = [
        (
            "dotdot",
            vec![("top/../../evil", regular, "")],
            "'..' in its path",
        ),
        (
            "absolute",
            vec![("/tmp/gannet-evil", regular, "")],
            "absolute path",
        ),
        (
            "link out",
            vec![("top/out", symlink, "../../etc")],
            "leads outside the tree",
        ),
        (
            "link abs",
            vec![("top/abs", symlink, "/etc/passwd")],
            "leads outside the tree",
        ),
        (
            "link chain",
            vec![("top/d/up", symlink, ".."), ("top/a", symlink, "d/up/..")],
            "leads outside the tree",
        ),
        (
            "through link",
            vec![("top/l", symlink, "sub"), ("top/l/x", regular, "")],
            "goes through a symbolic link",
        ),
        (
            "hard link",
            vec![("top/x", regular, ""), ("top/h", EntryType::Link, "top/x")],
            "hard links and special files",
        ),
    ];
    for (name, entries, want) in cases {
        let c = fake.commit(REPO, &[], name, &[("f", Mode::File, b"f")]);
        fake.set_tarball(&c, raw_tarball(&entries));
        check_err(git.checkout(&shop(), &sha(&c)).await, want);
        assert!(
            !cache.path().join("shop").join(&c).exists(),
            "{name}: tree left in place"
        );
    }
    assert!(!Path::new("/tmp/gannet-evil").exists());
    assert!(!cache.path().join("evil").exists());
    let staging: Vec<_> = std::fs::read_dir(cache.path().join(".staging"))
        .unwrap()
        .collect();
    assert!(staging.is_empty(), "staging left behind: {staging:?}");
}

#[tokio::test]
async fn rate_limits_server_errors_and_timeouts_are_failures() {
    let Setup { fake, git, .. } = with_token().await;
    let c1 = fake.commit(REPO, &[], "one", &[("a", Mode::File, b"a")]);
    fake.set_branch(REPO, "main", &c1);
    let reset = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 120;
    let fault = |status: u16, headers: &[(&str, String)], body: &str| Fault {
        path: "/branches/main".into(),
        status,
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        body: body.into(),
        delay: Duration::ZERO,
    };
    let limited = r#"{"message":"API rate limit exceeded for user ID 1."}"#;
    let cases = [
        (
            fault(
                403,
                &[
                    ("x-ratelimit-remaining", "0".into()),
                    ("x-ratelimit-reset", reset.to_string()),
                ],
                limited,
            ),
            "GitHub API rate limit exhausted; resets at ",
        ),
        (
            fault(429, &[("retry-after", "30".into())], limited),
            "GitHub API rate limit exhausted; retry after 30s",
        ),
        (
            fault(
                403,
                &[("retry-after", "60".into())],
                r#"{"message":"You have exceeded a secondary rate limit."}"#,
            ),
            "rate limit exhausted; retry after 60s",
        ),
        (
            fault(
                403,
                &[],
                r#"{"message":"Resource not accessible by integration"}"#,
            ),
            "HTTP 403: Resource not accessible by integration",
        ),
        (
            fault(502, &[], "<html>Bad gateway</html>"),
            "HTTP 502: <html>Bad gateway</html>",
        ),
    ];
    for (fault, want) in cases {
        fake.fault(fault);
        check_err(git.head(&shop(), "main").await, want);
    }
    // The reset is told in the message, with the seconds left.
    fake.fault(fault(
        403,
        &[
            ("x-ratelimit-remaining", "0".into()),
            ("x-ratelimit-reset", reset.to_string()),
        ],
        limited,
    ));
    let err = git.head(&shop(), "main").await.unwrap_err();
    let text = error_chain(&err);
    assert!(text.contains("(in 1") && text.ends_with("s)"), "{text}");

    // A server that does not answer in time.
    let cache = tempfile::tempdir().unwrap();
    let client = GithubClient::new(&token(), &fake.base)
        .unwrap()
        .with_timeout(Duration::from_secs(1));
    let slow = GithubSource::new(client, vec![(shop(), REPO.into())])
        .unwrap()
        .with_cache_dir(cache.path());
    let mut stall = fault(200, &[], "{}");
    stall.delay = Duration::from_secs(5);
    fake.fault(stall);
    check_err(
        slow.head(&shop(), "main").await,
        "no complete answer in time",
    );
    // ... and it recovers on the next call.
    assert_eq!(slow.head(&shop(), "main").await.unwrap().sha, sha(&c1));

    // Wrong credentials.
    let bad = GithubAuth::Token(Secret::new("ghp_wrong".into()));
    let client = GithubClient::new(&bad, &fake.base).unwrap();
    let wrong = GithubSource::new(client, vec![(shop(), REPO.into())]).unwrap();
    check_err(
        wrong.head(&shop(), "main").await,
        "HTTP 401: Bad credentials",
    );
}

fn app_secret(app_id: u64) -> GithubAuth {
    let json =
        serde_json::json!({"appId": app_id, "installationId": 7, "privateKey": APP_PRIVATE_KEY});
    GithubAuth::from_secret_json(&json.to_string()).unwrap()
}

fn app_credentials(expires_at: &str) -> Credentials {
    Credentials::App {
        app_id: 42,
        installation_id: 7,
        public_pem: APP_PUBLIC_KEY.into(),
        expires_at: expires_at.into(),
    }
}

#[tokio::test]
async fn app_auth_exchanges_a_jwt_for_a_cached_installation_token() {
    let fake = FakeGithub::start(app_credentials("2099-01-01T00:00:00Z")).await;
    let c1 = fake.commit(REPO, &[], "one", &[("a", Mode::File, b"a")]);
    fake.set_branch(REPO, "main", &c1);
    let Setup { fake, git, .. } = setup(fake, &app_secret(42), REPO);
    git.head(&shop(), "main").await.unwrap();
    git.commit(&shop(), &sha(&c1)).await.unwrap();
    git.checkout(&shop(), &sha(&c1)).await.unwrap();
    assert_eq!(fake.issued_tokens(), ["ghs_fake1"]);
    for seen in fake.seen() {
        let auth = seen.authorization.unwrap_or_default();
        match seen.server {
            "codeload" => assert_eq!(auth, ""),
            _ if seen.path.contains("/access_tokens") => {
                assert!(auth.starts_with("Bearer ey"), "a JWT: {auth}")
            }
            _ => assert_eq!(auth, "Bearer ghs_fake1", "{}", seen.path),
        }
    }

    // A token about to expire is not reused.
    let fake = FakeGithub::start(app_credentials("2000-01-01T00:00:00Z")).await;
    let c1 = fake.commit(REPO, &[], "one", &[("a", Mode::File, b"a")]);
    fake.set_branch(REPO, "main", &c1);
    let Setup { fake, git, .. } = setup(fake, &app_secret(42), REPO);
    git.head(&shop(), "main").await.unwrap();
    git.head(&shop(), "main").await.unwrap();
    assert_eq!(fake.issued_tokens(), ["ghs_fake1", "ghs_fake2"]);

    // GitHub refuses a JWT for another App.
    let Setup { fake, git, .. } = setup(fake, &app_secret(43), REPO);
    check_err(git.head(&shop(), "main").await, "read branch failed");
    assert_eq!(fake.issued_tokens().len(), 2);

    // A key that is not an RSA key fails at set-up.
    let bad = GithubAuth::App {
        app_id: 42,
        installation_id: 7,
        private_key: Secret::new(
            "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n".into(),
        ),
    };
    let err = GithubClient::new(&bad, &fake.base).err().unwrap();
    assert_eq!(
        err.to_string(),
        "GitHub App private key is not a usable PEM-encoded RSA private key"
    );
}

#[tokio::test]
async fn enterprise_base_uri_with_a_path() {
    let fake = FakeGithub::start_at("/api/v3", Credentials::Token(TOKEN.into())).await;
    assert!(fake.base.ends_with("/api/v3"));
    let c1 = fake.commit(REPO, &[], "one", &[("a.yaml", Mode::File, b"a")]);
    fake.set_branch(REPO, "main", &c1);
    let Setup { fake, git, .. } = setup(fake, &token(), REPO);
    assert_eq!(git.head(&shop(), "main").await.unwrap().sha, sha(&c1));
    assert_eq!(
        git.read_file(&shop(), &sha(&c1), "a.yaml").await.unwrap(),
        Some(b"a".to_vec())
    );
    for seen in fake.seen().iter().filter(|s| s.server == "api") {
        assert!(
            seen.path.starts_with("/api/v3/repos/acme/shop/"),
            "{}",
            seen.path
        );
    }
    assert_eq!(
        fake.count("/legacy.tar.gz/"),
        1,
        "the redirect is followed as given"
    );
}

#[tokio::test]
async fn commit_statuses_are_posted_per_state_with_short_descriptions() {
    let fake = FakeGithub::start(Credentials::Token(TOKEN.into())).await;
    let c1 = fake.commit(REPO, &[], "one", &[("a", Mode::File, b"a")]);
    let client = GithubClient::new(&token(), &fake.base).unwrap();
    let statuses = GithubStatuses::new(client, vec![(shop(), REPO.into())]).unwrap();
    let status = |state, description: &str, url: Option<&str>| CommitStatus {
        commit: sha(&c1),
        context: "gannet/web".into(),
        state,
        description: description.into(),
        target_url: url.map(Into::into),
    };
    let long = format!(
        "FAILURE at LAMBDA_PROMOTE: {} · rolled back",
        "é".repeat(200)
    );
    let cases = [
        (
            status(
                CommitState::Pending,
                "3/5 stages · LAMBDA_PROMOTE running",
                None,
            ),
            serde_json::json!({"state": "pending", "context": "gannet/web", "description": "3/5 stages · LAMBDA_PROMOTE running"}),
        ),
        (
            status(
                CommitState::Success,
                "SUCCESS · 5 stages in 2m10s",
                Some("https://gannet.example/d/1"),
            ),
            serde_json::json!({"state": "success", "context": "gannet/web", "description": "SUCCESS · 5 stages in 2m10s", "target_url": "https://gannet.example/d/1"}),
        ),
        (
            status(CommitState::Failure, &long, None),
            serde_json::json!({"state": "failure", "context": "gannet/web", "description": format!("{}…", long.chars().take(139).collect::<String>())}),
        ),
        (
            status(CommitState::Error, "ERROR", None),
            serde_json::json!({"state": "error", "context": "gannet/web", "description": "ERROR"}),
        ),
    ];
    for (i, (status, want)) in cases.into_iter().enumerate() {
        statuses.report(&shop(), &status).await.unwrap();
        let posted = fake.statuses();
        assert_eq!(posted.len(), i + 1);
        assert_eq!(posted[i].0, format!("/repos/acme/shop/statuses/{c1}"));
        assert_eq!(posted[i].1, want);
    }
    for seen in fake.seen() {
        assert_eq!(seen.authorization.as_deref(), Some("Bearer ghp_testtoken"));
    }

    let unknown = RepoId::parse("other").unwrap();
    let pending = status(CommitState::Pending, "x", None);
    let err = statuses.report(&unknown, &pending).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "repository other is not a configured GitHub repository"
    );
    fake.fault(Fault {
        path: "/statuses/".into(),
        status: 500,
        headers: Vec::new(),
        body: r#"{"message":"Server Error"}"#.into(),
        delay: Duration::ZERO,
    });
    let err = statuses.report(&shop(), &pending).await.unwrap_err();
    assert!(
        error_chain(err.as_ref()).ends_with("HTTP 500: Server Error"),
        "{}",
        error_chain(err.as_ref())
    );
}

#[test]
fn set_up_errors_say_what_is_wrong() {
    let outside = GithubClient::new(&token(), "https://api.github.com").err();
    assert_eq!(
        outside.map(|e| e.to_string()).as_deref(),
        Some("the GitHub client must be built inside a Tokio runtime")
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = |auth: &GithubAuth, base: &str| {
            GithubClient::new(auth, base).err().map(|e| e.to_string())
        };
        assert_eq!(
            client(&token(), "api.github.com").as_deref(),
            Some("GitHub base URI \"api.github.com\" is not an absolute http(s) URI")
        );
        let spaced = GithubAuth::Token(Secret::new("ghp_a b".into()));
        assert_eq!(
            client(&spaced, "https://api.github.com").as_deref(),
            Some("GitHub token must be a non-empty string of visible ASCII characters")
        );
        let ok = || GithubClient::new(&token(), "https://api.github.com").unwrap();
        let repos = |list: &[(&str, &str)]| {
            list.iter()
                .map(|(id, name)| (RepoId::parse(id).unwrap(), name.to_string()))
                .collect::<Vec<_>>()
        };
        let source = |list: &[(&str, &str)]| {
            GithubSource::new(ok(), repos(list))
                .err()
                .map(|e| e.to_string())
        };
        assert_eq!(
            source(&[("shop", "acme")]).as_deref(),
            Some("repository shop: \"acme\" is not OWNER/NAME")
        );
        assert_eq!(
            source(&[("shop", "acme/shop"), ("shop", "acme/other")]).as_deref(),
            Some("repository shop is listed twice")
        );
        assert!(GithubStatuses::new(ok(), repos(&[("shop", "acme/x/y")])).is_err());
    });
}

/// A pull request's head (a fork's included: GitHub's API reads it through the base
/// repository) needs no fetch; its merge base comes from the compare API, so what it changes
/// is counted from where it forked even when the branch has moved on since.
#[tokio::test]
async fn a_pull_request_is_read_with_its_merge_base_from_compare() {
    let Setup { fake, git, .. } = with_token().await;
    let forked = fake.commit(
        REPO,
        &[],
        "base",
        &[
            ("web/app.yaml", Mode::File, b"w"),
            ("api/app.yaml", Mode::File, b"a"),
        ],
    );
    let moved_on = fake.commit(
        REPO,
        &[&forked],
        "api: moved on",
        &[
            ("web/app.yaml", Mode::File, b"w"),
            ("api/app.yaml", Mode::File, b"a2"),
        ],
    );
    fake.set_branch(REPO, "main", &moved_on);
    let head = fake.commit(
        REPO,
        &[&forked],
        "web: a change\n",
        &[
            ("web/app.yaml", Mode::File, b"w2"),
            ("web/service.json", Mode::File, b"{}"),
            ("api/app.yaml", Mode::File, b"a"),
        ],
    );

    let pr = git
        .pull_request(&shop(), "main", Some(7), &sha(&head))
        .await
        .unwrap();
    assert_eq!(pr.head.sha, sha(&head));
    assert_eq!(pr.head.message, "web: a change");
    assert_eq!(pr.base, sha(&moved_on));
    assert_eq!(pr.merge_base, sha(&forked));
    let compared = format!("/repos/acme/shop/compare/{moved_on}...{head}");
    assert_eq!(fake.count(&compared), 1);
    assert_eq!(
        git.changed_files(&shop(), &pr.merge_base, &pr.head.sha)
            .await
            .unwrap(),
        ["web/app.yaml", "web/service.json"]
    );
    assert_eq!(
        git.pull_request(&shop(), "main", None, &sha(&head))
            .await
            .unwrap(),
        pr
    );

    check_err(
        git.pull_request(&shop(), "main", Some(7), &sha(&"f".repeat(40)))
            .await,
        "no commit fffffff",
    );
    check_err(
        git.pull_request(&shop(), "nope", Some(7), &sha(&head))
            .await,
        "no branch nope",
    );
    let orphan = fake.commit(REPO, &[], "orphan", &[("x", Mode::File, b"x")]);
    check_err(
        git.pull_request(&shop(), "main", Some(8), &sha(&orphan))
            .await,
        "have no merge base (unrelated histories)",
    );
}
