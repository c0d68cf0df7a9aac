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
//! `make test` installs Chromium and sets GANNET_CHROMIUM; without it these tests fail saying
//! how to get it.

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
