//! End to end in a real browser: Debian's Chromium (`scripts/chromium.sh`), driven headless by
//! Playwright (the scenarios in `console/e2e`), against a real `gannet up` serving the web
//! console from its binary. A push deploys while the page shows the stages turning SUCCESS in
//! order; an approver approves from the page and the deployment goes on; a viewer sees no
//! approve (or any other) button; a PENDING deployment says which deployment it waits for and
//! links it; a failing stage shows its log line without a click; the
//! keyboard alone signs in and opens a log, and every control is named; and a screenshot of
//! each page is saved to `artifacts/console/` (linked from the README). `gannet console` serves
//! an AWS API's console, signing every request (against a fake of API Gateway's IAM check).
//!
//! Issue 30's console: each status case (pinned behind its branch, no live state, last failed,
//! and a Lambda function deleted by hand, so MISSING) in the apps list and on the app's page; a
//! sync that shows what it would change before Confirm (Cancel sends nothing); the deployments
//! list a page at a time under day headings, rollbacks marked; every list page at 390 px; a
//! stage's log with stderr marked, times, search and download; a short id's page.
//!
//! `make test` installs Chromium and sets GANNET_CHROMIUM; without it these tests fail saying
//! how to get it. The Lambda tests need moto on loopback (`make test` starts it and sets
//! GANNET_MOTO_ENDPOINT).

mod lambda_moto;
mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use support::{app_config, deployed_web, token_of, CliRun, Gannet, KillOnDrop, Repo, ADMIN_TOKEN};

const LIMIT: Duration = Duration::from_secs(30);
const CONFIG: &str = "apps/web/app.pipecd.yaml";

/// Runs browser scenario `name` against `g`'s app `web`, signed in with `token`.
fn scenario(g: &Gannet, name: &str, token: &str, deployment: &str, expect: Value) -> CliRun {
    support::console_scenario(g, name, token, "web", deployment, &expect)
}

fn passes(g: &Gannet, run: &CliRun, what: &str) {
    assert_eq!(run.code, 0, "{what}: {run:?}\n{}", g.log());
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
    let (repo, _state, g, _) = deployed_web(QUICK);
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
fn an_approver_approves_from_the_page_a_viewer_sees_no_control_and_a_pending_one_says_why() {
    let (repo, _state, g, _) = deployed_web(QUICK);
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

    // A push while it waits: the new deployment is PENDING, and its page says for which.
    let waiting = push(&repo, &g, QUICK, "behind the approval");
    g.wait_until(
        LIMIT,
        "the new deployment records what it waits for",
        || (g.deployment(&waiting)["blocked_by"] == id.as_str()).then_some(()),
    );
    let run = scenario(
        &g,
        "pending-why",
        token_of("vic"),
        &waiting,
        json!({"blocked_by": id}),
    );
    passes(&g, &run, "pending-why");

    // Through the page of the short id the console prints (its first 10 characters).
    let run = scenario(&g, "approve", token_of("alice"), &id[..10], json!({}));
    passes(&g, &run, "approve");
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    let approval = support::stage_named(&d, "WAIT_APPROVAL");
    assert_eq!(approval["metadata"]["approvedBy"], "alice", "{d}");

    // Each stage's row shows its key option and who approved it, as the API presents them.
    assert_eq!(
        approval["presentation"]["approved_by"],
        json!(["alice"]),
        "{d}"
    );
    let summary = approval["presentation"]["summary"]
        .as_str()
        .unwrap_or_default();
    assert!(
        summary.contains("alice"),
        "the approval's summary names its approvers: {d}"
    );
    let stages: Vec<Value> = d["stages"]
        .as_array()
        .expect("stages")
        .iter()
        .filter(|s| s["visible"] == true)
        .map(|s| {
            let p = &s["presentation"];
            json!({"stage": s["id"], "summary": p["summary"].as_str().unwrap_or_default(), "approved_by": p["approved_by"].as_array().cloned().unwrap_or_default()})
        })
        .collect();
    let run = scenario(
        &g,
        "stage-summaries",
        token_of("vic"),
        &id,
        json!({"stages": stages}),
    );
    passes(&g, &run, "stage-summaries");
}

#[test]
fn a_failing_stage_shows_its_log_line_every_page_is_screenshotted_and_works_from_the_keyboard() {
    let (repo, _state, g, _) = deployed_web(QUICK);
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
        let path = support::console_artifacts().join(format!("{name}.png"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            bytes.starts_with(b"\x89PNG"),
            "{} is not a PNG",
            path.display()
        );
        assert!(bytes.len() > 5_000, "{} is nearly empty", path.display());
    }

    // The keyboard alone: sign in, open and close a stage's log; every control is named.
    let run = scenario(
        &g,
        "keyboard",
        ADMIN_TOKEN,
        &id,
        json!({"stage": "stage-0"}),
    );
    passes(&g, &run, "keyboard");
}

#[test]
fn the_console_is_served_with_a_strict_policy_and_its_files_need_no_caller() {
    let (_repo, _state, g, id) = deployed_web(QUICK);
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

/// The fake of API Gateway's IAM authorisation (it cannot run here): checks each request's
/// SigV4 signature for `execute-api` against the test's credentials, as API Gateway checks it,
/// then passes it to `gannet up` as the admin (API Gateway would pass the IAM principal).
mod fake_api_gateway {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    use aws_sigv4::sign::v4;
    use axum::body::Body;
    use axum::extract::{Request, State};
    use axum::http::StatusCode;
    use axum::response::{IntoResponse, Response};

    pub const KEY_ID: &str = "AKIDGANNETCONSOLE01";
    pub const SECRET_KEY: &str = "gannet-console-test-secret-key-0000000000";
    pub const REGION: &str = "us-east-1";

    pub struct Front {
        pub url: String,
        /// Requests whose signature checked out.
        pub verified: Arc<AtomicUsize>,
        /// Serves the front; dropped with it.
        _runtime: tokio::runtime::Runtime,
    }

    struct Upstream {
        gannet: String,
        verified: Arc<AtomicUsize>,
    }

    /// What the signature of this request would be, signed at `time` (x-amz-date).
    fn expected(
        method: &str,
        url: &str,
        host: &str,
        kind: Option<&str>,
        body: &[u8],
        time: SystemTime,
    ) -> String {
        let credentials =
            aws_credential_types::Credentials::new(KEY_ID, SECRET_KEY, None, None, "test");
        let identity = credentials.into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(REGION)
            .name("execute-api")
            .time(time)
            .settings(SigningSettings::default())
            .build()
            .expect("params")
            .into();
        let mut headers = vec![("host", host)];
        if let Some(kind) = kind {
            headers.push(("content-type", kind));
        }
        let signable =
            SignableRequest::new(method, url, headers.into_iter(), SignableBody::Bytes(body))
                .expect("signable");
        let (instructions, _) = sign(signable, &params).expect("sign").into_parts();
        let mut request = http::Request::builder()
            .method(method)
            .uri(url)
            .body(())
            .expect("request");
        instructions.apply_to_request_http1x(&mut request);
        request.headers()["authorization"]
            .to_str()
            .expect("text")
            .to_owned()
    }

    async fn check(State(up): State<Arc<Upstream>>, req: Request) -> Response {
        let (parts, body) = req.into_parts();
        let body = axum::body::to_bytes(body, 1 << 20)
            .await
            .unwrap_or_default();
        let text = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
        let (Some(auth), Some(date), Some(host)) =
            (text("authorization"), text("x-amz-date"), text("host"))
        else {
            return (
                StatusCode::FORBIDDEN,
                r#"{"message":"Missing Authentication Token"}"#,
            )
                .into_response();
        };
        let time = amz_date(date);
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let url = format!("http://{host}{path}");
        if expected(
            parts.method.as_str(),
            &url,
            host,
            text("content-type"),
            &body,
            time,
        ) != auth
        {
            return (StatusCode::FORBIDDEN, r#"{"message":"The request signature we calculated does not match the signature you provided."}"#).into_response();
        }
        up.verified.fetch_add(1, Ordering::SeqCst);
        let mut call = reqwest::Client::new()
            .request(parts.method.clone(), format!("{}{path}", up.gannet))
            .bearer_auth(super::ADMIN_TOKEN)
            .body(body.to_vec());
        if let Some(kind) = text("content-type") {
            call = call.header("content-type", kind);
        }
        let answer = call.send().await.expect("gannet up answers");
        let mut response = Response::builder().status(answer.status().as_u16());
        for (name, value) in answer.headers() {
            response = response.header(name, value);
        }
        response
            .body(Body::from(answer.bytes().await.unwrap_or_default()))
            .expect("response")
    }

    /// `20261126T083000Z` as a time.
    fn amz_date(date: &str) -> SystemTime {
        let n = |range: std::ops::Range<usize>| {
            date.get(range)
                .and_then(|s| s.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let (y, m, d) = (n(0..4), n(4..6), n(6..8));
        let secs = n(9..11) * 3600 + n(11..13) * 60 + n(13..15);
        // Days from civil (Howard Hinnant's algorithm).
        let (y, m) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
        let era = y / 400;
        let yoe = y - era * 400;
        let doy = (153 * m + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        SystemTime::UNIX_EPOCH + Duration::from_secs(days * 86_400 + secs)
    }

    /// Starts the front for the `gannet up` at `gannet`.
    pub fn start(gannet: &str) -> Front {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let verified = Arc::new(AtomicUsize::new(0));
        let up = Arc::new(Upstream {
            gannet: gannet.to_owned(),
            verified: verified.clone(),
        });
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        runtime.spawn(async move {
            let app = axum::Router::new().fallback(check).with_state(up);
            let _ = axum::serve(listener, app).await;
        });
        Front {
            url,
            verified,
            _runtime: runtime,
        }
    }
}

/// The status of `method path` sent to 127.0.0.1:`port` byte for byte as written, with the
/// proxy's own `Host` and `Origin` and `key` as the bearer; bounded at 10 s.
fn raw_request(port: u16, method: &str, path: &str, key: Option<&str>) -> u16 {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream =
        std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://127.0.0.1:{port}\r\n{auth}Content-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut answer = Vec::new();
    let _ = stream.take(64 * 1024).read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    answer
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("{method} {path}: no HTTP answer: {answer:?}"))
}

#[test]
fn gannet_console_serves_an_aws_api_signing_every_request_and_guards_its_port() {
    let (_repo, _state, g, deployment) = deployed_web(QUICK);
    let front = fake_api_gateway::start(&g.url);
    let port = support::free_port();
    let mut child = Command::new(support::gannet_bin())
        .args([
            "console",
            "--server",
            &front.url,
            "--region",
            fake_api_gateway::REGION,
        ])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("AWS_ACCESS_KEY_ID", fake_api_gateway::KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", fake_api_gateway::SECRET_KEY)
        .env("AWS_CONFIG_FILE", "/nonexistent/gannet-e2e")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/gannet-e2e")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gannet console starts");
    // The key is the last of its first three lines.
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let key = (0..3)
        .filter_map(|_| lines.next().and_then(Result::ok))
        .last()
        .map(|l| l.trim().to_owned())
        .expect("the key line");
    assert_eq!(key.len(), 64, "{key}");
    let _console = KillOnDrop(child);
    let proxy = format!("http://127.0.0.1:{port}");
    let http = reqwest::blocking::Client::new();

    // The page and its files, served by `gannet console` itself without the key, with their
    // policy; never signed, never sent to the API.
    let page = http
        .get(format!("{proxy}/deployments"))
        .send()
        .expect("page");
    assert_eq!(page.status(), 200);
    assert!(page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .contains("frame-ancestors 'none'"));
    assert_eq!(
        http.get(format!("{proxy}/assets/app.js"))
            .send()
            .expect("script")
            .status(),
        200
    );
    assert_eq!(
        front.verified.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the console's files are not fetched through the signed path"
    );
    // Data: with the key, signed and checked by the front; without, refused here.
    let apps = http
        .get(format!("{proxy}/api/v1/apps"))
        .bearer_auth(&key)
        .send()
        .expect("apps");
    assert_eq!(apps.status(), 200);
    let apps: Value = apps.json().expect("json");
    assert_eq!(apps["apps"][0]["name"], "web", "{apps}");
    let who = http
        .get(format!("{proxy}/api/v1/whoami"))
        .bearer_auth(&key)
        .send()
        .expect("whoami");
    assert_eq!(who.status(), 200);
    let sync = http
        .post(format!("{proxy}/api/v1/apps/web/sync"))
        .bearer_auth(&key)
        .header("origin", &proxy)
        .json(&json!({}))
        .send()
        .expect("sync");
    assert_eq!(
        sync.status(),
        200,
        "a signed POST with a body: {:?}",
        sync.text()
    );
    let verified = front.verified.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(verified, 3, "every forwarded request was signed correctly");

    let before = g.deployments().len();
    let refusals = [
        (
            http.get(format!("{proxy}/api/v1/apps")),
            401,
            "without the key",
        ),
        (
            http.get(format!("{proxy}/api/v1/apps"))
                .bearer_auth("0".repeat(64)),
            401,
            "with another key",
        ),
        (
            http.get(format!("{proxy}/api/v1/apps"))
                .bearer_auth(&key)
                .header("host", "evil.example:7071"),
            403,
            "for another host",
        ),
        (
            http.post(format!("{proxy}/api/v1/apps/web/sync"))
                .bearer_auth(&key)
                .header("origin", "http://evil.example")
                .json(&json!({})),
            403,
            "from another origin",
        ),
    ];
    for (request, status, what) in refusals {
        let answer = request.send().expect("answer");
        assert_eq!(answer.status(), status, "{what}");
    }
    // Every other spelling of an API path, sent as written (an HTTP client would tidy the
    // path first), is refused before anything else, with the key or without; and every path
    // that is not one of the console's own files needs the key, whatever it is.
    let approve = format!("/api/v1/deployments/{deployment}/approve");
    let mut probes: Vec<(&str, String, bool, u16)> = [
        "/./api/v1/whoami",
        "/api/./v1/whoami",
        "//api/v1/whoami",
        "/api//v1/whoami",
        "/apps/../api/v1/whoami",
        "/assets/..%2fapi/v1/whoami",
        "/%2e/api/v1/whoami",
        "/x/%2E%2E/api/v1/whoami",
        "/x/.%2e/api/v1/whoami",
        "/x%2F..%2Fapi/v1/whoami",
        "/x%5c..%5capi/v1/whoami",
        "/x/..\\api/v1/whoami",
    ]
    .into_iter()
    .flat_map(|path| {
        [
            ("GET", path.to_owned(), false, 400),
            ("GET", path.to_owned(), true, 400),
        ]
    })
    .collect();
    probes.extend([
        ("POST", format!("/x/..{approve}"), false, 400),
        ("POST", format!("/./{approve}"), true, 400),
        ("POST", format!("/x%2f..{approve}"), false, 400),
        ("GET", "/healthz".to_owned(), false, 401),
        ("GET", "/API/v1/whoami".to_owned(), false, 401),
        ("GET", "/apps/../healthz".to_owned(), false, 400),
        ("POST", "/hooks/github".to_owned(), false, 401),
        ("POST", approve.clone(), false, 401),
    ]);
    for (method, path, with_key, status) in &probes {
        let key = with_key.then_some(key.as_str());
        assert_eq!(
            raw_request(port, method, path, key),
            *status,
            "{method} {path} (key: {with_key})"
        );
    }
    assert_eq!(
        front.verified.load(std::sync::atomic::Ordering::SeqCst),
        verified,
        "nothing refused reached the API"
    );
    assert_eq!(g.deployments().len(), before);
}

/// The config of a scripts-only app (no platform plugin, so no live state) named `name`.
fn scripts_app(name: &str, stages: &str) -> (String, String) {
    (
        format!("apps/{name}/app.pipecd.yaml"),
        app_config(name, stages),
    )
}

/// Commits `config` as app `name`'s and pushes it; returns the commit.
fn push_app(repo: &Repo, g: &Gannet, name: &str, stages: &str, message: &str) -> String {
    let (path, config) = scripts_app(name, stages);
    let head = repo.commit(&[(&path, &config)], message);
    let (status, body) = g.push(&head, message);
    assert_eq!(status, 202, "{body}");
    head
}

/// The status cases of issue 30 on scripts-only apps (no live state: no platform plugin deploys
/// them): `pinned`, rolled back to its first commit (which pauses it) and then pushed twice, so
/// the branch is ahead of what runs; `broken`, whose last deployment failed. Each reads so in the
/// apps list and on its page, in Chromium. With those deployments (a rollback among them) the
/// deployments list pages two at a time under "Today" (and "Yesterday" seen from tomorrow),
/// marks the rollback, and every list page fits a 390 px phone.
#[test]
fn each_status_case_shows_in_the_list_and_on_the_app_page_and_the_lists_page_by_day_and_fit_a_phone(
) {
    let repo = Repo::new();
    let apps = [scripts_app("pinned", QUICK), scripts_app("broken", QUICK)];
    let files: Vec<(&str, &str)> = apps.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
    let first = repo.commit(&files, "add pinned and broken");
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), &support::UpOptions::default());
    g.wait_until(LIMIT, "the first deployments end", || {
        let ds = g.deployments();
        (ds.len() == 2 && ds.iter().all(|d| d["status"] == "SUCCESS")).then_some(())
    });
    let pinned_first = g
        .deployments()
        .into_iter()
        .find(|d| d["app"] == "pinned")
        .and_then(|d| d["id"].as_str().map(str::to_owned))
        .expect("pinned's first deployment");

    let second = push_app(
        &repo,
        &g,
        "pinned",
        &QUICK.replace("first", "second"),
        "pinned 2",
    );
    let id = g.deployment_of(&second, LIMIT);
    assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "SUCCESS");
    g.wait_unlocked("pinned", LIMIT);
    let (status, body) = g.post_as(token_of("dora"), "/apps/pinned/rollback", json!({}));
    assert_eq!(status, 200, "{body}");
    let rollback = body["deployment"]["id"].as_str().expect("id").to_owned();
    assert_eq!(
        body["deployment"]["rollback_of"],
        pinned_first.as_str(),
        "{body}"
    );
    assert_eq!(g.wait_terminal(&rollback, LIMIT)["status"], "SUCCESS");
    g.wait_unlocked("pinned", LIMIT);
    // Pushed while paused: nothing deploys it, and the branch moves on.
    push_app(
        &repo,
        &g,
        "pinned",
        &QUICK.replace("first", "third"),
        "pinned 3",
    );
    let failing = push_app(
        &repo,
        &g,
        "broken",
        "      - name: SCRIPT_RUN\n        with: {run: 'echo the database refused us; exit 1'}\n",
        "broken",
    );
    let failed = g.deployment_of(&failing, LIMIT);
    assert_eq!(g.wait_terminal(&failed, LIMIT)["status"], "FAILURE");
    g.wait_unlocked("broken", LIMIT);
    g.wait_idle(LIMIT);

    let pinned = g.wait_until(
        LIMIT,
        "the API says how far pinned's branch is ahead",
        || {
            let app = g.app_view("pinned");
            app["ahead"].as_u64().is_some().then_some(app)
        },
    );
    assert_eq!(pinned["paused"]["commit"], first.as_str(), "{pinned}");
    assert_eq!(pinned["last_result"]["status"], "SUCCESS", "{pinned}");
    assert!(pinned["no_live_state"].is_string(), "{pinned}");
    let broken = g.app_view("broken");
    assert_eq!(broken["last_result"]["status"], "FAILURE", "{broken}");
    let cases = [
        (
            "pinned",
            json!({"health": "NO_LIVE_STATE", "last": "SUCCESS", "pinned": first, "ahead": pinned["ahead"]}),
        ),
        (
            "broken",
            json!({"health": "NO_LIVE_STATE", "last": "FAILURE", "ahead": broken["ahead"]}),
        ),
    ];
    for (app, expect) in cases {
        let run = support::console_scenario(&g, "app-status", ADMIN_TOKEN, app, "", &expect);
        passes(&g, &run, &format!("app-status of {app}"));
    }
    // An app without live state compares its config: the branch head's against the running
    // commit's (pinned runs its first commit; the head is its third). The sync panel lists the
    // fields the API does.
    let (status, diff) = g.get_as(token_of("dora"), "/apps/pinned/diff");
    assert_eq!(status, 200, "{diff}");
    let diff = &diff["diff"];
    assert_eq!(diff["status"], "OUT_OF_SYNC", "{diff}");
    assert!(
        diff["reason"]
            .as_str()
            .is_some_and(|r| r.contains("its config is what compares")),
        "{diff}"
    );
    let fields: Vec<&str> = diff["drift"]
        .as_array()
        .expect("drift")
        .iter()
        .filter_map(|f| f["field"].as_str())
        .collect();
    assert!(!fields.is_empty(), "{diff}");
    let run = support::console_scenario(
        &g,
        "sync-diff",
        token_of("dora"),
        "pinned",
        "",
        &json!({"fields": fields, "confirm": false}),
    );
    passes(&g, &run, "sync-diff of an app without live state");

    let ids: Vec<String> = g
        .deployments()
        .iter()
        .filter_map(|d| d["id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(ids.len(), 5, "{ids:?}");
    let run = support::console_scenario(
        &g,
        "deployments-list",
        token_of("vic"),
        "pinned",
        "",
        &json!({"limit": 2, "ids": ids, "rollback": {"id": rollback, "of": pinned_first}}),
    );
    passes(&g, &run, "deployments-list");
    let run =
        support::console_scenario(&g, "narrow", token_of("vic"), "pinned", &failed, &json!({}));
    passes(&g, &run, "narrow");
    assert_eq!(
        g.deployments().len(),
        5,
        "the browser tests started nothing"
    );
    // What the pages said is the API's count; it must be the branch's: three commits since the
    // one pinned runs (checked last, so the pages are tested whatever the count).
    assert_eq!(
        pinned["ahead"], 3,
        "pinned runs {first}; the branch head is three commits beyond: {pinned}"
    );
}

/// A stage's log in the console: its standard-error lines marked, a timestamp toggle, a search
/// that keeps the lines holding its text, and a download of the whole log; the page opened by
/// the 10-character id the console prints, its commit linked on GitHub.
#[test]
fn a_stage_log_marks_stderr_toggles_times_searches_and_downloads_and_a_short_id_opens_its_page() {
    let (repo, _state, g, _) = deployed_web(QUICK);
    let script = "      - name: SCRIPT_RUN\n        with: {run: 'echo compiling gannet; sleep 0.3; echo warning: unused import >&2; sleep 0.3; echo Compiling the console; sleep 0.3; echo error: a flaky test >&2; sleep 0.3; echo done'}\n";
    let id = push(&repo, &g, script, "a log with stderr");
    assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "SUCCESS");
    let (status, body) = g.get(&format!("/deployments/{id}/stages/stage-0/logs"));
    assert_eq!(status, 200, "{body}");
    let logged = body["lines"].as_array().cloned().unwrap_or_default();
    let text = |l: &Value| l["text"].as_str().unwrap_or_default().to_owned();
    let lines: Vec<String> = logged.iter().map(text).collect();
    let stderr: Vec<String> = logged
        .iter()
        .filter(|l| l["stderr"] == true)
        .map(text)
        .collect();
    let printed = [
        "compiling gannet",
        "warning: unused import",
        "Compiling the console",
        "error: a flaky test",
        "done",
    ];
    let shown: Vec<&str> = lines
        .iter()
        .map(String::as_str)
        .filter(|l| printed.contains(l))
        .collect();
    assert_eq!(shown, printed, "the script's lines, in order: {body}");
    assert_eq!(
        stderr,
        ["warning: unused import", "error: a flaky test"],
        "the lines written to stderr are flagged: {body}"
    );
    let run = scenario(
        &g,
        "log-tools",
        token_of("vic"),
        &id,
        json!({"stage": "stage-0", "lines": lines, "stderr": stderr, "search": "compiling"}),
    );
    passes(&g, &run, "log-tools");
    let d = g.deployment(&id);
    let link = d["commit_url"]
        .as_str()
        .expect("a commit of a repository on GitHub has a link");
    assert!(
        link.starts_with(&format!("https://github.com/{}/commit/", support::GITHUB)),
        "{d}"
    );
    let run = scenario(
        &g,
        "short-id",
        token_of("vic"),
        &id[..10],
        json!({"id": id, "stage": "stage-0", "commit_url": link}),
    );
    passes(&g, &run, "short-id");
}

/// A `LambdaApp` named `fn` (zip code, in moto on loopback) in a repository, and a `gannet up`
/// checking its drift every second, which has deployed code `v1`.
struct LambdaLab {
    repo: Repo,
    g: Gannet,
    function: String,
    v1: String,
    _state: tempfile::TempDir,
}

impl LambdaLab {
    fn start(prefix: &str) -> Self {
        lambda_moto::ensure_role();
        let function = lambda_moto::unique(prefix);
        let repo = Repo::new();
        let v1 = Self::commit_code(&repo, &function, "v1", "");
        let state = tempfile::tempdir().expect("tempdir");
        let opts = support::UpOptions {
            extra_config: format!(
                "intervals: {{poll: 1m, resume: 1s, drift: 1s}}\nqueue: {{visibility: 3s}}\nplugins:\n  lambda:\n    deployTargets:\n      - name: local\n        region: {}\n        endpoint: {}\n",
                lambda_moto::REGION,
                lambda_moto::endpoint()
            ),
            env: lambda_moto::gannet_env(),
            ..support::UpOptions::default()
        };
        let g = Gannet::start(&repo, state.path(), &opts);
        let id = g.deployment_of(&v1, LIMIT);
        let d = g.wait_terminal(&id, LIMIT);
        assert_eq!(d["status"], "SUCCESS", "{d}\n{}", g.log());
        g.wait_unlocked("fn", LIMIT);
        Self {
            repo,
            g,
            function,
            v1,
            _state: state,
        }
    }

    /// Commits code `version` of the function, the app's config holding `trigger` lines.
    fn commit_code(repo: &Repo, function: &str, version: &str, trigger: &str) -> String {
        let zip = String::from_utf8(lambda_moto::zip_bytes(version)).expect("zip bytes are text");
        let config = format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: fn\n{trigger}"
        );
        let manifest = format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: LambdaFunction\nspec:\n  name: {function}\n  role: {}\n  handler: index.handler\n  runtime: python3.12\n  memory: 128\n  timeout: 10\n  zipFile: fn.zip\n",
            lambda_moto::ROLE
        );
        repo.commit(
            &[
                ("apps/fn/app.pipecd.yaml", &config),
                ("apps/fn/function.yaml", &manifest),
                ("apps/fn/fn.zip", &zip),
            ],
            &format!("code {version}"),
        )
    }

    /// Waits until the app, as the API shows it, satisfies `ok`; returns it.
    fn wait_app(&self, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        self.g.wait_until(LIMIT, what, || {
            let app = self.g.app_view("fn");
            ok(&app).then_some(app)
        })
    }
}

/// DeleteFunction, by hand in moto, as an operator would with the AWS CLI.
fn delete_function(function: &str) {
    let auth = format!(
        "AWS4-HMAC-SHA256 Credential=testing/20240101/{}/lambda/aws4_request, SignedHeaders=host, Signature=0",
        lambda_moto::REGION
    );
    let res = reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
        .delete(format!(
            "{}/2015-03-31/functions/{function}",
            lambda_moto::endpoint()
        ))
        .header("Authorization", auth)
        .send()
        .expect("moto answers DeleteFunction");
    assert!(
        res.status().is_success(),
        "DeleteFunction: {}",
        res.status()
    );
}

/// Sync in the console shows what deploying the branch head would change before anything is
/// sent. Code `v2` is pushed with `trigger.onCommit.disabled`, so nothing deploys it: the app
/// page's comparison with the running commit says nothing would change, with the head it names
/// the function's code; the sync panel names it too and offers the strategies; Cancel sends
/// nothing; Confirm with a quick sync deploys `v2`.
#[test]
fn sync_shows_what_deploying_the_head_would_change_cancel_sends_nothing_and_confirm_deploys() {
    let lab = LambdaLab::start("console-sync");
    let g = &lab.g;
    let code_before = lambda_moto::code_sha256(&lab.function).expect("the function exists");
    let v2 = LambdaLab::commit_code(
        &lab.repo,
        &lab.function,
        "v2",
        "  trigger:\n    onCommit:\n      disabled: true\n",
    );
    let (status, body) = g.push(&v2, "v2");
    assert_eq!(status, 202, "{body}");
    lab.wait_app("the trigger has judged v2", |a| {
        a["checked_commit"] == v2.as_str()
    });
    g.wait_idle(LIMIT);
    let before = g.deployments();
    assert!(
        before.iter().all(|d| d["commit"] != v2.as_str()),
        "v2 was deployed"
    );

    let (status, body) = g.get_as(token_of("dora"), "/apps/fn/diff");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (
            body["diff"]["status"].as_str(),
            body["diff"]["commit"].as_str()
        ),
        (Some("OUT_OF_SYNC"), Some(v2.as_str())),
        "{body}"
    );
    let fields: Vec<&str> = body["diff"]["drift"]
        .as_array()
        .expect("drift")
        .iter()
        .filter_map(|f| f["field"].as_str())
        .collect();
    assert!(fields.contains(&"spec.zipFile"), "{body}");

    let run = support::console_scenario(
        g,
        "sync-diff",
        token_of("dora"),
        "fn",
        "",
        &json!({"fields": fields, "same_as": lab.v1, "strategy": "QUICK_SYNC"}),
    );
    passes(g, &run, "sync-diff");
    let shown: Value = run
        .stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("sync-diff printed no deployment: {run:?}"));
    let id = shown["deployment"].as_str().expect("the deployment's id");
    let d = g.wait_terminal(id, LIMIT);
    assert_eq!(
        (
            d["status"].as_str(),
            d["commit"].as_str(),
            d["strategy"].as_str(),
            d["commander"].as_str()
        ),
        (
            Some("SUCCESS"),
            Some(v2.as_str()),
            Some("QUICK_SYNC"),
            Some("dora")
        ),
        "{d}"
    );
    assert_eq!(
        g.deployments().len(),
        before.len() + 1,
        "one sync, one deployment"
    );
    assert_ne!(
        lambda_moto::code_sha256(&lab.function),
        Some(code_before),
        "v2's code is live"
    );
}

/// A degraded live state, the cheapest real way: a Lambda function deployed to moto, then
/// deleted by hand. The next drift check finds nothing live where Git describes a function, so
/// the app's health is MISSING: so in the apps list and on its page, never "matches Git".
#[test]
fn a_lambda_function_deleted_by_hand_reads_missing_in_the_list_and_on_the_app_page() {
    let lab = LambdaLab::start("console-missing");
    lab.wait_app("a drift check sees the function healthy", |a| {
        a["health"] == "HEALTHY"
    });
    delete_function(&lab.function);
    let app = lab.wait_app("a drift check sees the function gone", |a| {
        a["health"] == "MISSING"
    });
    assert_eq!(app["last_result"]["status"], "SUCCESS", "{app}");
    // The CLI says so too.
    let list = lab.g.cli_env(&["apps", "list"], &[]);
    assert!(
        list.stdout
            .lines()
            .any(|l| l.starts_with("fn ") && l.contains("MISSING")),
        "{list:?}"
    );
    let show = lab.g.cli_env(&["apps", "show", "fn"], &[]);
    assert!(show.stdout.contains("MISSING"), "{show:?}");
    let run = support::console_scenario(
        &lab.g,
        "app-status",
        token_of("vic"),
        "fn",
        "",
        &json!({"health": "MISSING", "last": "SUCCESS", "ahead": app["ahead"]}),
    );
    passes(&lab.g, &run, "app-status of a missing function");
}

#[test]
fn a_plan_preview_page_shows_its_apps_and_details_and_the_list_links_it() {
    let (repo, _state, g, _) = deployed_web(QUICK);
    support::git(repo.path(), &["checkout", "-q", "-b", "change", "main"]);
    let head = repo.commit(
        &[(
            CONFIG,
            &app_config("web", &QUICK.replace("first", "previewed")),
        )],
        "change web",
    );
    support::git(repo.path(), &["checkout", "-q", "main"]);
    let (status, body) = g.post("/plan-previews", json!({ "head": head }));
    assert_eq!(status, 202, "{body}");
    let id = body["preview"]["id"].as_str().expect("an id").to_owned();
    g.wait_until(LIMIT, "the preview to end", || {
        let (_, body) = g.get(&format!("/plan-previews/{id}"));
        (body["preview"]["status"] == "DONE").then_some(())
    });
    let run = scenario(
        &g,
        "preview",
        token_of("vic"),
        &id,
        json!({
            "status": "DONE",
            "result": "CHANGES",
            "apps": {"web": "CHANGES"},
            "details": "echo previewed",
            "credentials": false,
        }),
    );
    passes(&g, &run, "preview");
}
