//! End to end in a real browser: Debian's Chromium (`scripts/chromium.sh`), driven headless by
//! Playwright (the scenarios in `console/e2e`), against a real `gannet up` serving the web
//! console from its binary. A push deploys while the page shows the stages turning SUCCESS in
//! order; an approver approves from the page and the deployment goes on; a viewer sees no
//! approve (or any other) button; a failing stage shows its log line without a click; and a
//! screenshot of each page is saved to `artifacts/console/` (linked from the README).
//!
//! `make test` installs Chromium and sets GANNET_CHROMIUM; without it these tests fail saying
//! how to get it.

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::{app_config, finish, token_of, CliRun, Gannet, Repo, UpOptions, ADMIN_TOKEN};

const LIMIT: Duration = Duration::from_secs(30);
/// A scenario's own waits are bounded at 30 s each; the process at this.
const SCENARIO_LIMIT: Duration = Duration::from_secs(120);
const CONFIG: &str = "apps/web/app.pipecd.yaml";

/// The workspace root (this file is `tests/` under it).
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Where screenshots go: `artifacts/console/` in the checkout (git-ignored).
fn artifacts() -> PathBuf {
    let dir = root().join("artifacts/console");
    std::fs::create_dir_all(&dir).expect("artifacts dir");
    dir
}

fn chromium() -> String {
    std::env::var("GANNET_CHROMIUM").unwrap_or_else(|_| {
        panic!("GANNET_CHROMIUM is not set: run `scripts/chromium.sh ensure` and set it to `scripts/chromium.sh path` (make test does both)")
    })
}

/// Runs browser scenario `name` (console/e2e/run.mjs) against `g`, signed in with `token`.
fn scenario(g: &Gannet, name: &str, token: &str, deployment: &str, expect: Value) -> CliRun {
    let child = Command::new("node")
        .arg(root().join("console/e2e/run.mjs"))
        .arg(name)
        .current_dir(root().join("console"))
        .env("GANNET_CHROMIUM", chromium())
        .env("GANNET_URL", &g.url)
        .env("GANNET_TOKEN", token)
        .env("GANNET_DEPLOYMENT", deployment)
        .env("GANNET_APP", "web")
        // The screenshots scenario's pictures are the README's; the others' go beside them.
        .env(
            "GANNET_SCREENSHOTS",
            match name {
                "screenshots" => artifacts(),
                other => artifacts().join(other),
            },
        )
        .env("GANNET_EXPECT", expect.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs (Node.js 20 or newer is needed)");
    let run = finish(child, SCENARIO_LIMIT);
    support::assert_no_secrets("a browser scenario's output", &run.stdout);
    run
}

fn passes(g: &Gannet, run: &CliRun, what: &str) {
    assert_eq!(run.code, 0, "{what}: {run:?}\n{}", g.log());
}

/// A repository whose app `web` runs `stages`, a `gannet up` on it, and the id of the
/// deployment of its first commit (ended).
fn server(stages: &str) -> (Repo, tempfile::TempDir, Gannet, String) {
    let repo = Repo::new();
    let head = repo.commit(&[(CONFIG, &app_config("web", stages))], "add web");
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());
    let id = g.deployment_of(&head, LIMIT);
    g.wait_terminal(&id, LIMIT);
    (repo, state, g, id)
}

/// Pushes a commit of `web` with `stages`; returns its deployment's id.
fn push(repo: &Repo, g: &Gannet, stages: &str, message: &str) -> String {
    let head = repo.commit(&[(CONFIG, &app_config("web", stages))], message);
    let (status, body) = g.push(&head, message);
    assert_eq!(status, 202, "{body}");
    g.deployment_of(&head, LIMIT)
}

const QUICK: &str = "      - name: SCRIPT_RUN\n        with: {run: echo first}\n";

#[test]
fn a_push_deploys_while_the_page_shows_its_stages_turning_success_in_order() {
    let (repo, _state, g, _) = server(QUICK);
    let stages = "      - name: WAIT\n        with: {duration: 3s}\n      - name: SCRIPT_RUN\n        with: {run: 'for i in 1 2 3; do echo step-$i; sleep 0.5; done'}\n      - name: WAIT\n        with: {duration: 2s}\n";
    let id = push(&repo, &g, stages, "three stages");
    let run = scenario(
        &g,
        "stages-in-order",
        token_of("vic"),
        &id,
        json!({"stages": ["stage-0", "stage-1", "stage-2"]}),
    );
    passes(&g, &run, "stages-in-order");
    assert_eq!(g.deployment(&id)["status"], "SUCCESS");
}

#[test]
fn an_approver_approves_from_the_page_and_a_viewer_sees_no_control() {
    let (repo, _state, g, _) = server(QUICK);
    let stages = "      - name: SCRIPT_RUN\n        with: {run: echo before}\n      - name: WAIT_APPROVAL\n        with: {approvers: [alice]}\n      - name: SCRIPT_RUN\n        with: {run: echo after}\n";
    let id = push(&repo, &g, stages, "approval");
    g.wait_stage(&id, "WAIT_APPROVAL", "RUNNING", LIMIT);

    let run = scenario(&g, "viewer-no-approve", token_of("vic"), &id, json!({}));
    passes(&g, &run, "viewer-no-approve");
    assert_eq!(
        g.deployment(&id)["status"],
        "RUNNING",
        "a viewer's visit changed nothing"
    );

    let run = scenario(&g, "approve", token_of("alice"), &id, json!({}));
    passes(&g, &run, "approve");
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    let approval = support::stage_named(&d, "WAIT_APPROVAL");
    assert_eq!(approval["metadata"]["approvedBy"], "alice", "{d}");
}

#[test]
fn a_failing_stage_shows_its_log_line_and_every_page_is_screenshotted() {
    let (repo, _state, g, _) = server(QUICK);
    let failing = "      - name: SCRIPT_RUN\n        with: {run: echo warming up}\n      - name: SCRIPT_RUN\n        with: {run: 'echo connection refused by db-7; exit 1'}\n";
    let id = push(&repo, &g, failing, "failing");
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "FAILURE", "{d}");
    let run = scenario(
        &g,
        "failing-stage-log",
        token_of("vic"),
        &id,
        json!({"line": "connection refused by db-7"}),
    );
    passes(&g, &run, "failing-stage-log");

    // Every page, as the admin: a deployment with a few stages and a log behind it.
    let stages = "      - name: SCRIPT_RUN\n        with: {run: 'for i in $(seq 1 40); do echo build line $i; done'}\n      - name: WAIT\n        with: {duration: 1s}\n      - name: SCRIPT_RUN\n        with: {run: echo smoke test passed}\n";
    let id = push(&repo, &g, stages, "screenshots");
    g.wait_terminal(&id, LIMIT);
    let run = scenario(&g, "screenshots", ADMIN_TOKEN, &id, json!({}));
    passes(&g, &run, "screenshots");
    for name in [
        "apps",
        "app",
        "deployments",
        "deployment",
        "deployment-phone",
    ] {
        let path = artifacts().join(format!("{name}.png"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            bytes.starts_with(b"\x89PNG"),
            "{} is not a PNG",
            path.display()
        );
        assert!(bytes.len() > 5_000, "{} is nearly empty", path.display());
    }
}

#[test]
fn the_console_is_served_with_a_strict_policy_and_its_files_need_no_caller() {
    let (_repo, _state, g, id) = server(QUICK);
    let http = reqwest::blocking::Client::new();
    for path in [
        "/",
        "/apps",
        "/apps/web",
        "/deployments",
        &format!("/deployments/{id}"),
    ] {
        let res = http.get(format!("{}{path}", g.url)).send().expect("page");
        assert_eq!(res.status(), 200, "{path}");
        let headers = res.headers().clone();
        let csp = headers["content-security-policy"].to_str().expect("csp");
        assert!(
            csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
            "{csp}"
        );
        assert_eq!(headers["x-content-type-options"], "nosniff");
        let page = res.text().expect("text");
        assert!(page.contains("/assets/app.js"), "{page}");
    }
    let res = http
        .get(format!("{}/assets/app.js", g.url))
        .send()
        .expect("app.js");
    assert_eq!(res.status(), 200);
    let etag = res.headers()["etag"].to_str().expect("etag").to_owned();
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    let again = http
        .get(format!("{}/assets/app.js", g.url))
        .header("if-none-match", &etag)
        .send()
        .expect("app.js again");
    assert_eq!(again.status(), 304);
    for missing in [
        "/assets/nope.js",
        "/assets/..%2Fgannet.yaml",
        "/assets/index.html",
    ] {
        let res = http
            .get(format!("{}{missing}", g.url))
            .send()
            .expect("missing");
        assert_eq!(res.status(), 404, "{missing}");
    }
    // The data stays behind the API's callers.
    let res = http
        .get(format!("{}/api/v1/apps", g.url))
        .send()
        .expect("api");
    assert_eq!(res.status(), 401);
    let (status, who) = g.get_as(token_of("alice"), "/whoami");
    assert_eq!(status, 200, "{who}");
    assert_eq!(
        who,
        json!({"caller": {"name": "alice", "role": "approver"}, "may": {"read": true, "deploy": false, "approve": true}})
    );
}
