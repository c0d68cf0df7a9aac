//! `GithubChecks` against a FAKE GitHub API (`tests/github_fake`): a local server on 127.0.0.1
//! that replays the shapes of GitHub's documented check-run responses and validates requests as
//! GitHub documents it. It is not GitHub, and these tests reach nothing else.

mod github_fake;

use std::time::Duration;

use gannet_domain::ids::{CommitSha, RepoId};
use gannet_domain::ports::{CheckConclusion, CheckRun, CheckRuns, CheckStatus};
use gannet_domain::report::error_chain;
use gannet_git::github::{GithubAuth, GithubChecks, GithubClient, Secret, OUTPUT_LIMIT};
use github_fake::test_key::{APP_PRIVATE_KEY, APP_PUBLIC_KEY};
use github_fake::{Credentials, FakeGithub, Fault};
use serde_json::json;

const REPO: &str = "acme/shop";
const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";
const URL: &str = "https://gannet.example/previews/p-1";

fn shop() -> RepoId {
    RepoId::parse("shop").unwrap()
}

async fn app_checks() -> (FakeGithub, GithubChecks) {
    let fake = FakeGithub::start(Credentials::App {
        app_id: 42,
        installation_id: 7,
        public_pem: APP_PUBLIC_KEY.into(),
        expires_at: "2099-01-01T00:00:00Z".into(),
    })
    .await;
    fake.create_repo(REPO);
    let secret =
        json!({"appId": 42, "installationId": 7, "privateKey": APP_PRIVATE_KEY}).to_string();
    let auth = GithubAuth::from_secret_json(&secret).unwrap();
    let client = GithubClient::new(&auth, &fake.base).unwrap();
    let checks = GithubChecks::new(client, vec![(shop(), REPO.into())]).unwrap();
    (fake, checks)
}

fn run(status: CheckStatus, conclusion: Option<CheckConclusion>, summary: &str) -> CheckRun {
    CheckRun {
        name: "gannet/plan-preview".into(),
        head_sha: CommitSha::parse(HEAD).unwrap(),
        status,
        conclusion,
        external_id: "p-1".into(),
        details_url: Some(URL.into()),
        title: "Plan preview".into(),
        summary: summary.into(),
        text: String::new(),
    }
}

fn is_time(value: &serde_json::Value) -> bool {
    value
        .as_str()
        .is_some_and(|t| t.len() == 20 && t.ends_with('Z'))
}

#[tokio::test]
async fn a_check_run_is_created_then_replaced_by_its_updates() {
    let (fake, checks) = app_checks().await;
    let id = checks
        .create(
            &shop(),
            &run(CheckStatus::InProgress, None, "2 apps being read"),
        )
        .await
        .unwrap();
    let runs = fake.check_runs();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].0, id);
    let created = &runs[0].1;
    assert_eq!(created["head_sha"], HEAD);
    assert_eq!(created["status"], "in_progress");
    assert_eq!(created["external_id"], "p-1");
    assert_eq!(created["details_url"], URL);
    assert_eq!(created["output"]["summary"], "2 apps being read");
    assert!(is_time(&created["started_at"]), "{created}");
    assert!(created.get("conclusion").is_none());

    let mut done = run(
        CheckStatus::Completed,
        Some(CheckConclusion::Neutral),
        "web: 1 to change",
    );
    done.title = "1 app changes".into();
    done.text = "```diff\n- cpu: 128\n+ cpu: 256\n```".into();
    checks.update(&shop(), id, &done).await.unwrap();
    let runs = fake.check_runs();
    assert_eq!(runs.len(), 1, "an update makes no second run");
    let updated = &runs[0].1;
    assert_eq!(updated["status"], "completed");
    assert_eq!(updated["conclusion"], "neutral");
    assert!(is_time(&updated["completed_at"]), "{updated}");
    assert_eq!(
        updated["output"],
        json!({"title": "1 app changes", "summary": "web: 1 to change", "text": "```diff\n- cpu: 128\n+ cpu: 256\n```"})
    );
    assert_eq!(updated["head_sha"], HEAD, "kept from the create");

    let requests = fake.check_run_requests();
    let shape: Vec<_> = requests
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str(), r.status))
        .collect();
    let patch = format!("/repos/acme/shop/check-runs/{id}");
    assert_eq!(
        shape,
        [
            ("POST", "/repos/acme/shop/check-runs", 201),
            ("PATCH", patch.as_str(), 200),
        ]
    );
    assert!(requests[1].body.get("head_sha").is_none());
    for seen in fake.seen().iter().filter(|s| s.path.contains("check-runs")) {
        assert_eq!(seen.authorization.as_deref(), Some("Bearer ghs_fake1"));
    }

    // An id GitHub does not know.
    let err = checks.update(&shop(), id + 100, &done).await.unwrap_err();
    let text = error_chain(err.as_ref());
    assert!(
        text.contains(&format!("updating check run {} in shop failed", id + 100)),
        "{text}"
    );
    assert!(text.ends_with("not found"), "{text}");
}

#[tokio::test]
async fn an_output_over_githubs_limit_is_cut_and_accepted() {
    let (fake, checks) = app_checks().await;
    let summary = format!("## web\n{}", "é".repeat(OUTPUT_LIMIT));
    let mut long = run(
        CheckStatus::Completed,
        Some(CheckConclusion::Success),
        &summary,
    );
    long.text = "x".repeat(OUTPUT_LIMIT + 1);
    long.title = "t".repeat(1_000);
    let id = checks.create(&shop(), &long).await.unwrap();
    let (_, created) = &fake.check_runs()[0];
    assert_eq!(fake.check_runs()[0].0, id);
    for key in ["summary", "text"] {
        let text = created["output"][key].as_str().unwrap();
        assert!(text.len() <= OUTPUT_LIMIT, "{key}: {} bytes", text.len());
        assert!(
            text.ends_with(&format!("The whole preview: {URL}")),
            "{key}: {}",
            &text[text.len() - 200..]
        );
    }
    assert!(created["output"]["summary"]
        .as_str()
        .unwrap()
        .starts_with("## web\néé"));
    assert_eq!(
        created["output"]["title"].as_str().unwrap().chars().count(),
        255
    );
}

/// A request straight to the fake (as GitHub's docs show them, not as gannet makes them), over
/// a plain HTTP/1.1 connection; the status and JSON answered.
async fn send(
    fake: &FakeGithub,
    method: &str,
    path: &str,
    body: &serde_json::Value,
) -> (u16, serde_json::Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let token = fake.issued_tokens().last().cloned().unwrap_or_default();
    let addr = fake.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = body.to_string();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8(answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let (_, json) = answer.split_once("\r\n\r\n").unwrap();
    (status, serde_json::from_str(json).unwrap_or_default())
}

/// The fake refuses what GitHub refuses, so a test passing against it is not one GitHub would
/// fail.
#[tokio::test]
async fn the_fake_validates_check_runs_as_github_does() {
    let (fake, checks) = app_checks().await;
    let id = checks
        .create(&shop(), &run(CheckStatus::Queued, None, "queued"))
        .await
        .unwrap();
    let runs = "/repos/acme/shop/check-runs";
    let one = format!("{runs}/{id}");
    let output = |summary: String| json!({"title": "t", "summary": summary});
    let cases = [
        (
            "POST",
            runs,
            json!({"head_sha": HEAD}),
            422,
            "\"name\" wasn't supplied",
        ),
        (
            "POST",
            runs,
            json!({"name": "n"}),
            422,
            "\"head_sha\" wasn't supplied",
        ),
        (
            "POST",
            runs,
            json!({"name": "n", "head_sha": HEAD, "status": "done"}),
            422,
            "is not a member",
        ),
        (
            "PATCH",
            &one,
            json!({"status": "completed"}),
            422,
            "\"conclusion\" wasn't supplied",
        ),
        (
            "PATCH",
            &one,
            json!({"conclusion": "stale"}),
            422,
            "is not a member",
        ),
        (
            "PATCH",
            &one,
            json!({"output": {"title": "t"}}),
            422,
            "\"summary\" wasn't supplied",
        ),
        (
            "PATCH",
            &one,
            json!({"output": {"summary": "s"}}),
            422,
            "\"title\" wasn't supplied",
        ),
        // 65,535 characters, but 131,070 bytes
        (
            "PATCH",
            &one,
            json!({"output": output("é".repeat(OUTPUT_LIMIT))}),
            422,
            "Only 65535 characters are allowed",
        ),
        (
            "PATCH",
            &one,
            json!({"output": {"title": "t", "summary": "s", "text": "x".repeat(OUTPUT_LIMIT + 1)}}),
            422,
            "Only 65535",
        ),
        (
            "PATCH",
            &format!("{runs}/999"),
            json!({"status": "queued"}),
            404,
            "Not Found",
        ),
        (
            "PATCH",
            &one,
            json!({"output": output("x".repeat(OUTPUT_LIMIT))}),
            200,
            "",
        ),
        ("PATCH", &one, json!({"conclusion": "timed_out"}), 200, ""),
    ];
    for (method, path, body, want, message) in cases {
        let (status, answer) = send(&fake, method, path, &body).await;
        assert_eq!(status, want, "{method} {path} {body:.100}: {answer}");
        let got = answer["message"].as_str().unwrap_or_default();
        assert!(got.contains(message), "{got:?} lacks {message:?}");
    }
    let (_, run) = &fake.check_runs()[0];
    assert_eq!(
        (&run["status"], &run["conclusion"]),
        (&json!("completed"), &json!("timed_out")),
        "a conclusion completes the run"
    );
    let refused = fake
        .check_run_requests()
        .iter()
        .filter(|r| r.status >= 400)
        .count();
    assert_eq!(refused, 10);
}

#[tokio::test]
async fn a_token_cannot_make_check_runs_and_github_refusals_are_named() {
    // A token cannot write check runs (GitHub answers 403): the run is a commit status of the
    // same name instead, its title the description and its details_url the link.
    let fake = FakeGithub::start(Credentials::Token("ghp_testtoken".into())).await;
    fake.create_repo(REPO);
    let auth = GithubAuth::Token(Secret::new("ghp_testtoken".into()));
    let client = GithubClient::new(&auth, &fake.base).unwrap();
    let checks = GithubChecks::new(client, vec![(shop(), REPO.into())]).unwrap();
    let id = checks
        .create(&shop(), &run(CheckStatus::InProgress, None, "running"))
        .await
        .expect("shown as a status");
    let mut done = run(
        CheckStatus::Completed,
        Some(CheckConclusion::Failure),
        "failed",
    );
    done.title = "1 app: 0 with changes, 0 unchanged, 1 with errors".into();
    checks.update(&shop(), id, &done).await.expect("status");
    assert!(
        fake.check_run_requests().is_empty(),
        "no check-runs call with a token"
    );
    let statuses = fake.statuses();
    let states: Vec<(&str, &str, &str)> = statuses
        .iter()
        .map(|(_, s)| {
            (
                s["state"].as_str().unwrap(),
                s["context"].as_str().unwrap(),
                s["target_url"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("pending", "gannet/plan-preview", URL),
            ("failure", "gannet/plan-preview", URL)
        ]
    );
    assert_eq!(
        statuses[1].1["description"],
        "1 app: 0 with changes, 0 unchanged, 1 with errors"
    );

    let (fake, checks) = app_checks().await;
    // A 422 says what GitHub found wrong.
    fake.fault(Fault {
        path: "/check-runs".into(),
        status: 422,
        headers: Vec::new(),
        body: r#"{"message":"Validation Failed","errors":[{"resource":"CheckRun","code":"invalid","field":"head_sha","message":"No commit found for SHA: 0123456"}]}"#.into(),
        delay: Duration::ZERO,
    });
    let err = checks
        .create(&shop(), &run(CheckStatus::Queued, None, "queued"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("GitHub refused creating check run \"gannet/plan-preview\" on {HEAD} in shop: POST /repos/acme/shop/check-runs: HTTP 422: Validation Failed: No commit found for SHA: 0123456")
    );
    // An App installation without the permission.
    fake.fault(Fault {
        path: "/check-runs".into(),
        status: 403,
        headers: Vec::new(),
        body: r#"{"message":"Resource not accessible by integration"}"#.into(),
        delay: Duration::ZERO,
    });
    let err = checks
        .create(&shop(), &run(CheckStatus::Queued, None, "queued"))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .ends_with("the GitHub App installation needs the checks: write permission"),
        "{err}"
    );
    let unknown = RepoId::parse("other").unwrap();
    let err = checks
        .create(&unknown, &run(CheckStatus::Queued, None, "queued"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "repository other is not a configured GitHub repository"
    );
}
