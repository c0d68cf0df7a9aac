//! End to end: who may call the API, and the probes a hostile client tried, against a real
//! `gannet up` over HTTP on loopback. Every refused call gets the right status and a JSON
//! error, stores nothing, and leaves the server answering; memory stays bounded.
//!
//! Every loop here is bounded in count and time, and every socket is local.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{
    app_config, run_gannet, stage_named, token_of, Gannet, Repo, UpOptions, ADMIN_TOKEN,
};

const LIMIT: Duration = Duration::from_secs(20);

const APPROVAL: &str =
    "      - name: WAIT_APPROVAL\n        with: {approvers: [alice, bob], minApproverNum: 1}\n";

/// A server whose app `web` has a deployment waiting for approval; returns its id.
fn waiting_for_approval(opts: &UpOptions) -> (Repo, tempfile::TempDir, Gannet, String) {
    let repo = Repo::new();
    let first = repo.commit(
        &[(
            "apps/web/app.pipecd.yaml",
            &app_config("web", "      - name: WAIT\n        with: {duration: 0s}\n"),
        )],
        "add web",
    );
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), opts);
    let id = g.deployment_of(&first, LIMIT);
    g.wait_terminal(&id, LIMIT);
    g.wait_idle(LIMIT);
    let head = repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", APPROVAL))],
        "approval",
    );
    let (status, body) = g.push(&head, &format!("d-{head}"));
    assert_eq!(status, 202, "{body}");
    let id = g.deployment_of(&head, LIMIT);
    g.wait_stage(&id, "WAIT_APPROVAL", "RUNNING", LIMIT);
    // The stage's start is stored before its first step's outcome: wait for that outcome (a
    // step message for the stored seq that no worker has received yet, due in 30 s), so tests
    // that compare stored state start from a settled one.
    g.wait_until(LIMIT, "the first approval step is stored", || {
        let seq = g.stored().deployments.iter().find(|d| d.0 == id)?.2;
        let step = format!("\"deployment\":\"{id}\",\"seq\":{seq}}}");
        let waiting: Vec<String> = g
            .db()
            .prepare("SELECT body FROM messages WHERE queue = 'stage' AND attempts = 0")
            .and_then(|mut q| q.query_map([], |r| r.get(0))?.collect())
            .ok()?;
        waiting.iter().any(|b| b.ends_with(&step)).then_some(())
    });
    (repo, state, g, id)
}

/// `VmRSS` of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn healthy(g: &Gannet) -> bool {
    reqwest::blocking::Client::new()
        .get(format!("{}/healthz", g.url))
        .timeout(Duration::from_secs(2))
        .send()
        .is_ok_and(|r| r.status().is_success())
}

fn host_port(g: &Gannet) -> String {
    g.url.trim_start_matches("http://").to_owned()
}

#[test]
fn each_role_may_do_what_it_says_and_nothing_more() {
    let (_repo, _state, g, id) = waiting_for_approval(&UpOptions::default());
    let stage = stage_named(&g.deployment(&id), "WAIT_APPROVAL")["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let reads = [
        "/apps".to_owned(),
        "/apps/web".to_owned(),
        "/deployments".to_owned(),
        format!("/deployments/{id}"),
        format!("/deployments/{id}/stages/{stage}/logs"),
        "/whoami".to_owned(),
    ];
    // (caller, token): no token, a wrong one, then one per role.
    let callers = [
        ("nobody", ""),
        ("a forged token", "e2e-forged-token-0000000000000000"),
        ("vic (viewer)", token_of("vic")),
        ("dora (deployer)", token_of("dora")),
        ("alice (approver)", token_of("alice")),
        ("admin", ADMIN_TOKEN),
    ];
    for (who, token) in callers {
        for path in &reads {
            let (status, body) = g.get_as(token, path);
            let want = if token.is_empty() || who.starts_with("a forged") {
                401
            } else {
                200
            };
            assert_eq!(status, want, "{who} GET {path}: {body}");
            if want != 200 {
                assert!(body["error"].is_string(), "{who} GET {path}: {body}");
            }
        }
    }
    // The changes: every refusal stores nothing. Allowed ones run last, below.
    let changes = [
        ("sync", "/apps/web/sync".to_owned(), ["dora", "admin"]),
        (
            "cancel",
            format!("/deployments/{id}/cancel"),
            ["dora", "admin"],
        ),
        (
            "approve",
            format!("/deployments/{id}/approve"),
            ["alice", "admin"],
        ),
        (
            "roll back",
            "/apps/web/rollback".to_owned(),
            ["dora", "admin"],
        ),
        ("pause", "/apps/web/pause".to_owned(), ["dora", "admin"]),
        ("resume", "/apps/web/resume".to_owned(), ["dora", "admin"]),
    ];
    let mut checked = 0;
    for (what, path, allowed) in &changes {
        for (who, token) in callers {
            let name = who.split(' ').next().unwrap_or(who);
            if allowed.contains(&name) {
                continue;
            }
            let before = g.stored();
            let (status, body) = g.post_as(token, path, json!({}));
            let want = if token.is_empty() || who.starts_with("a forged") {
                401
            } else {
                403
            };
            assert_eq!(status, want, "{who} may not {what}: {body}");
            let error = body["error"].as_str().unwrap_or_default();
            match want {
                401 => assert!(
                    error.contains("token"),
                    "a 401 says what is missing: {error}"
                ),
                _ => assert!(
                    error.contains(name) && error.contains("role"),
                    "a 403 says which role is missing: {error}"
                ),
            }
            assert_eq!(g.stored(), before, "{who} {what} stored something");
            checked += 1;
        }
    }
    assert_eq!(checked, 24, "every refused pair was tried");

    // An admin not on the stage's approvers list is refused by the stage itself.
    let approve = format!("/deployments/{id}/approve");
    let before = g.stored();
    let (status, body) = g.post(&approve, json!({}));
    assert_eq!(status, 403, "{body}");
    assert_eq!(g.stored(), before);

    // The allowed changes, each recorded as the caller, never as a name in the body.
    let (status, body) = g.post_as(token_of("alice"), &approve, json!({"user": "bob"}));
    assert_eq!(status, 403, "alice cannot approve as bob: {body}");
    let (status, body) = g.post_as(token_of("alice"), &approve, json!({}));
    assert_eq!(status, 200, "{body}");
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(
        stage_named(&d, "WAIT_APPROVAL")["metadata"]["approvedBy"],
        "alice",
        "{d}"
    );
    let (status, body) = g.post_as(
        token_of("dora"),
        "/apps/web/sync",
        json!({"commander": "admin"}),
    );
    assert_eq!(status, 403, "dora cannot sync as admin: {body}");
    let (status, body) = g.post_as(token_of("dora"), "/apps/web/sync", json!({}));
    assert_eq!(status, 200, "{body}");
    let synced = body["deployment"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let d = g.deployment(&synced);
    assert_eq!(d["commander"], "dora", "{d}");
}

/// Every answer says `nosniff`, and every answer but the console's files (which revalidate by
/// ETag) says `no-store`: refusals, the framework's own errors and the webhook's too.
#[test]
fn every_answer_is_nosniff_and_no_store() {
    let (_repo, _state, g, id) = waiting_for_approval(&UpOptions::default());
    let http = reqwest::blocking::Client::new();
    let get = |path: &str, token: Option<&str>| {
        let mut req = http.get(format!("{}{path}", g.url));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().expect("request")
    };
    let answers = vec![
        ("apps", get("/api/v1/apps", Some(ADMIN_TOKEN))),
        (
            "a deployment",
            get(&format!("/api/v1/deployments/{id}"), Some(ADMIN_TOKEN)),
        ),
        ("no token", get("/api/v1/apps", None)),
        ("no route", get("/api/v1/nothing", Some(ADMIN_TOKEN))),
        ("healthz", get("/healthz", None)),
        (
            "an unsigned webhook",
            http.post(format!("{}/hooks/github", g.url))
                .body("{}")
                .send()
                .expect("request"),
        ),
        (
            "JSON that does not parse",
            http.post(format!("{}/api/v1/apps/web/sync", g.url))
                .bearer_auth(ADMIN_TOKEN)
                .header("content-type", "application/json")
                .body("{")
                .send()
                .expect("request"),
        ),
    ];
    for (what, res) in answers {
        let h = res.headers();
        assert_eq!(
            h.get("x-content-type-options").map(|v| v.as_bytes()),
            Some(&b"nosniff"[..]),
            "{what}: {h:?}"
        );
        assert_eq!(
            h.get("cache-control").map(|v| v.as_bytes()),
            Some(&b"no-store"[..]),
            "{what}: {h:?}"
        );
    }
    let page = get("/", None);
    assert_eq!(
        page.headers()["cache-control"],
        "no-cache",
        "the console's page revalidates"
    );
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
}

#[test]
fn foreign_origins_and_hosts_change_nothing() {
    let (_repo, _state, g, id) = waiting_for_approval(&UpOptions::default());
    let http = reqwest::blocking::Client::new();
    let cancel = format!("{}/api/v1/deployments/{id}/cancel", g.url);
    let before = g.stored();
    let port = g.url.rsplit(':').next().unwrap_or("").to_owned();
    let probes: Vec<(Option<&str>, Option<String>)> = vec![
        (Some("http://evil.example"), None),
        (Some("null"), None),
        (Some("http://127.0.0.1:1"), None),
        (None, Some("evil.example".into())),
        (None, Some(format!("rebound.example:{port}"))),
    ];
    for (origin, host) in probes {
        let mut req = http
            .post(&cancel)
            .bearer_auth(ADMIN_TOKEN)
            .header("content-type", "application/json")
            .body("{}");
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        if let Some(h) = &host {
            req = req.header("host", h);
        }
        let res = req.send().expect("request");
        let status = res.status().as_u16();
        let body: Value = res.json().unwrap_or(Value::Null);
        assert_eq!(status, 403, "origin {origin:?} host {host:?}: {body}");
        assert!(body["error"].is_string(), "{body}");
    }
    assert_eq!(
        g.stored(),
        before,
        "a foreign origin or host changed nothing"
    );
    // The server's own origin is fine.
    let res = http
        .post(&cancel)
        .bearer_auth(ADMIN_TOKEN)
        .header("origin", g.url.clone())
        .json(&json!({}))
        .send()
        .expect("request");
    assert_eq!(res.status().as_u16(), 200);
}

#[test]
fn a_server_reachable_from_other_machines_needs_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("gannet.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: 0.0.0.0:{}\nstate: state/gannet.db\n",
            support::free_port()
        ),
    )
    .expect("write");
    let run = run_gannet(
        &["up", "--config", config.to_str().unwrap_or_default()],
        &[],
    );
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.contains("listen: 0.0.0.0:") && run.stderr.contains("api.tokens"),
        "{run:?}"
    );
    assert!(
        !dir.path().join("state/gannet.db").exists(),
        "nothing was created"
    );
}

#[test]
fn a_tokens_file_its_group_may_read_stops_start_up_and_plaintext_tokens_are_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.yaml");
    std::fs::write(
        &tokens,
        format!("- {{name: admin, role: admin, token: {ADMIN_TOKEN}}}\n"),
    )
    .expect("write");
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    let config = dir.path().join("gannet.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:{}\nstate: state/gannet.db\napi:\n  tokens: {{file: tokens.yaml}}\n",
            support::free_port()
        ),
    )
    .expect("write");
    // Bounded: a server that accepted the file would run until killed.
    let child = std::process::Command::new(support::gannet_bin())
        .args(["up", "--config", config.to_str().unwrap_or_default()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("gannet up starts");
    let run = support::finish(child, LIMIT);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.contains(&format!(
            "api.tokens.file: {}: its group or other users have access to it (mode 640); run `chmod 600 {}`",
            tokens.display(),
            tokens.display()
        )),
        "{run:?}"
    );
    assert!(!dir.path().join("state").exists(), "nothing was created");

    // The suite's servers are given plaintext tokens (GANNET_E2E_TOKENS): warned about at
    // start, by entry name only (the harness checks the log for every token when it drops).
    let repo = Repo::new();
    repo.commit(&[("README", "x")], "first");
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());
    let log = g.log();
    let warning = log
        .lines()
        .find(|l| l.contains("WARN") && l.contains("plaintext"))
        .unwrap_or_else(|| panic!("no warning about plaintext tokens: {log}"));
    assert!(
        warning.contains("api.tokens.env GANNET_E2E_TOKENS")
            && warning.contains("admin, alice, bob, mallory, dora, vic")
            && warning.contains("sha256:"),
        "{warning}"
    );
}

#[test]
fn idle_and_slow_connections_are_closed_and_healthz_still_answers() {
    // The api section of the default config, with a short head timeout, and room for all the
    // sockets one peer opens here (e2e_serve tests the per-peer cap).
    let api = "intervals: {poll: 1m, resume: 1s}\napi:\n  tokens: {env: GANNET_E2E_TOKENS}\n  headerTimeout: 1s\n  maxConnectionsPerPeer: 512\n";
    let repo = Repo::new();
    repo.commit(&[("README", "x")], "empty");
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start_raw(
        state.path(),
        |port| {
            format!(
                "listen: 127.0.0.1:{port}\nstate: state/gannet.db\nrepos:\n  - id: shop\n    path: {}\n{}",
                repo.path().display(),
                api
            )
        },
        &[],
    );
    let addr = host_port(&g);
    let rss_before = rss_kib(g.child.id());
    let idle: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect(&addr).ok())
        .collect();
    assert_eq!(idle.len(), 300, "300 idle sockets opened");
    let started = Instant::now();
    assert!(healthy(&g), "/healthz answers beside 300 idle sockets");
    assert!(started.elapsed() < Duration::from_secs(2));

    // A request head that never ends.
    let mut slow = TcpStream::connect(&addr).expect("connect");
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .expect("write");
    slow.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut buf = [0u8; 256];
    let started = Instant::now();
    let n = slow.read(&mut buf).unwrap_or(0);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the slow head was cut off after the header timeout"
    );
    let answer = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(n == 0 || answer.contains("408"), "{answer}");

    // The idle ones were closed too.
    let mut closed = 0;
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        if matches!(s.read(&mut buf), Ok(0)) {
            closed += 1;
        }
    }
    assert!(closed >= 290, "idle sockets closed: {closed} of 300");
    assert!(healthy(&g));
    let grown = rss_kib(g.child.id()).saturating_sub(rss_before);
    assert!(grown < 8 * 1024, "RSS grew by {grown} KiB");
}

/// Announces a webhook of `len` bytes, writes `written` of them, and returns the status line.
/// A refusal that comes before the body is read is read before the rest is sent, as a real
/// client would see it.
fn big_webhook(addr: &str, len: usize, written: usize, signature: Option<&str>) -> String {
    let sig = signature
        .map(|s| format!("X-Hub-Signature-256: {s}\r\n"))
        .unwrap_or_default();
    raw_post(
        addr,
        "/hooks/github",
        &format!("X-GitHub-Event: push\r\nX-GitHub-Delivery: big\r\n{sig}"),
        len,
        written,
    )
}

/// POSTs `len` announced bytes to `path` over a raw socket, writing `written` of them (a
/// write the server refuses to read is not an error), and returns the status line.
fn raw_post(addr: &str, path: &str, headers: &str, len: usize, written: usize) -> String {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return "connect failed".into();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(20)));
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
    );
    let _ = s.write_all(head.as_bytes());
    let chunk = vec![b' '; 64 * 1024];
    let mut sent = 0;
    while sent < written.min(len) {
        let n = chunk.len().min(written.min(len) - sent);
        if s.write_all(&chunk[..n]).is_err() {
            break;
        }
        sent += n;
    }
    let mut answer = Vec::new();
    let mut buf = [0u8; 512];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&buf[..n]);
        if answer.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn large_bodies_and_fields_are_refused_with_bounded_memory() {
    let (_repo, _state, g, id) = waiting_for_approval(&UpOptions::default());
    let addr = host_port(&g);
    let pid = g.child.id();
    let before = g.stored();
    let rss_before = rss_kib(pid);

    // 40 unsigned 24 MB bodies at once: refused without being read.
    let unsigned: Vec<_> = (0..40)
        .map(|_| {
            let addr = addr.clone();
            std::thread::spawn(move || big_webhook(&addr, 24 * 1024 * 1024, 1024 * 1024, None))
        })
        .collect();
    for t in unsigned {
        let line = t.join().expect("thread");
        assert!(line.contains("401"), "{line}");
    }
    let unsigned_growth = rss_kib(pid).saturating_sub(rss_before);
    assert!(
        unsigned_growth < 8 * 1024,
        "40 unsigned 24 MB bodies grew RSS by {unsigned_growth} KiB"
    );
    // Bodies with a forged signature must be read to be refused: a few at a time, so memory
    // stays bounded whatever their number; a second flood does not grow it further.
    let forged_flood = || {
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let len = 24 * 1024 * 1024;
                    big_webhook(&addr, len, len, Some("sha256=00"))
                })
            })
            .collect();
        for t in threads {
            let line = t.join().expect("thread");
            assert!(line.contains("401"), "{line}");
        }
    };
    // Two bodies are read at a time, so however many floods come, RSS stays within a few
    // bodies' worth (eight bodies at once would be 192 MB per flood). The allocator keeps some
    // of what it was given, so the growth is measured, not expected to return to zero.
    let body_kib = 24 * 1024;
    let mut after = Vec::new();
    for _ in 0..4 {
        forged_flood();
        after.push(rss_kib(pid).saturating_sub(rss_before));
    }
    assert!(
        after.iter().all(|kib| *kib < 4 * body_kib),
        "RSS growth after each of 4 floods of 8 forged 24 MB bodies: {after:?} KiB"
    );
    // 26 MB is over GitHub's cap.
    let over = 26 * 1024 * 1024;
    assert!(big_webhook(&addr, over, over, Some("sha256=00")).contains("413"));

    // A 20 MB commander, and capped fields.
    let line = raw_post(
        &addr,
        "/api/v1/apps/web/sync",
        &format!("Authorization: Bearer {ADMIN_TOKEN}\r\n"),
        20 * 1024 * 1024,
        1024 * 1024,
    );
    assert!(line.contains("413"), "a 20 MB commander: {line}");
    let (status, body) = g.post_as(
        token_of("alice"),
        &format!("/deployments/{id}/approve"),
        json!({"stage": "s".repeat(300)}),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .starts_with("stage: too long"),
        "{body}"
    );
    let (status, body) = g.post("/apps/web/sync", json!({"key": "k".repeat(300)}));
    assert_eq!(status, 400, "{body}");
    // Not JSON, and no such route: JSON errors all the same.
    let res = reqwest::blocking::Client::new()
        .post(format!("{}/api/v1/apps/web/sync", g.url))
        .bearer_auth(ADMIN_TOKEN)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .expect("request");
    assert_eq!(res.status().as_u16(), 400);
    let body: Value = res.json().unwrap_or(Value::Null);
    assert!(body["error"].is_string(), "{body}");
    let (status, body) = g.get("/no/such/route");
    assert_eq!(status, 404, "{body}");
    assert!(body["error"].is_string(), "{body}");

    assert_eq!(g.stored(), before, "nothing was stored");
    assert!(healthy(&g), "the server still answers");
}

#[test]
fn the_suite_wide_secret_check_catches_a_leak() {
    // Every Gannet handle checks its log, stage logs, API answers and CLI output with this
    // check (tests/support); here it must refuse each watched secret.
    for secret in support::secrets() {
        let leaked = std::panic::catch_unwind(|| {
            support::assert_no_secrets("a planted line", &format!("token={secret} end"))
        });
        assert!(leaked.is_err(), "{} was not caught", &secret[..6]);
    }
    support::assert_no_secrets("a clean line", "nothing to see");
}

#[test]
fn the_state_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let repo = Repo::new();
    repo.commit(&[("README", "x")], "empty");
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());
    assert!(healthy(&g));
    let mode = |name: &str| {
        std::fs::metadata(state.path().join(name))
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
    };
    assert_eq!(mode("state"), 0o700, "the state directory");
    for file in [
        "state/gannet.db",
        "state/gannet.lock",
        "state/gannet.db-wal",
        "state/gannet.db-shm",
    ] {
        assert_eq!(mode(file), 0o600, "{file}");
    }
}

/// An app config carrying a billion-laughs bomb of `levels` nested aliases, padded to about
/// `bytes` bytes.
fn yaml_bomb(levels: usize, bytes: usize) -> String {
    let mut text = String::from(
        "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: bomb\nlols:\n",
    );
    for line in gannet_config::fixture::yaml_bomb(levels).lines() {
        text.push_str(&format!("  {line}\n"));
    }
    while text.len() < bytes {
        text.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    text
}

#[test]
fn yaml_bombs_make_the_app_invalid_and_cost_no_memory() {
    let repo = Repo::new();
    repo.commit(&[("README", "x")], "empty");
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());
    g.wait_idle(LIMIT);
    let pid = g.child.id();
    let rss_before = rss_kib(pid);
    for (name, kb) in [("small", 26), ("large", 89)] {
        let bomb = yaml_bomb(40, kb * 1024);
        let head = repo.commit(&[(&format!("apps/{name}/app.pipecd.yaml"), &bomb)], name);
        let (status, body) = g.push(&head, &format!("bomb-{name}"));
        assert_eq!(status, 202, "{body}");
        let app = g.wait_until(LIMIT, "the bomb is judged", || {
            let (status, body) = g.get(&format!("/apps/{name}"));
            (status == 200).then_some(body["app"].clone())
        });
        assert_eq!(app["sync_status"], "INVALID_CONFIG", "{app}");
        let reason = app["sync_reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains(&format!("apps/{name}/app.pipecd.yaml"))
                && reason.contains("too many aliases"),
            "{reason}"
        );
    }
    g.wait_idle(LIMIT);
    assert!(healthy(&g));
    let grown = rss_kib(pid).saturating_sub(rss_before);
    assert!(grown < 8 * 1024, "two YAML bombs grew RSS by {grown} KiB");
    // A restart reads them again, and still answers.
    let g = g.restart();
    assert!(healthy(&g));
}

#[test]
fn symlinks_out_of_the_repository_are_never_followed() {
    let outside = tempfile::tempdir().expect("tempdir");
    let key = outside.path().join("id_fake");
    let material = "FAKEKEYMATERIALneverquoted0123456789";
    std::fs::write(
        &key,
        format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{material}\n-----END OPENSSH PRIVATE KEY-----\n"
        ),
    )
    .expect("write key");
    let repo = Repo::new();
    let lambda = "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: fn\n  input:\n    functionManifestFile: function.yaml\n";
    repo.commit(&[("apps/fn/app.pipecd.yaml", lambda)], "add fn");
    for link in ["apps/linked/app.pipecd.yaml", "apps/fn/function.yaml"] {
        let path = repo.path().join(link);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::os::unix::fs::symlink(&key, &path).expect("symlink");
    }
    let head = repo.commit(&[], "links to a host file");
    let state = tempfile::tempdir().expect("tempdir");
    let opts = UpOptions {
        extra_config: format!(
            "{}plugins: {{lambda: {{deployTargets: [{{name: local, region: us-east-1, endpoint: 'http://127.0.0.1:1'}}]}}}}\n",
            UpOptions::default().extra_config
        ),
        ..UpOptions::default()
    };
    let g = Gannet::start(&repo, state.path(), &opts);
    // The linked config is read from git's objects: the link's target, never the file.
    let app = g.wait_until(LIMIT, "the linked app is judged", || {
        let (status, body) = g.get("/apps/linked");
        (status == 200 && body["app"]["sync_status"] == "INVALID_CONFIG").then_some(body)
    });
    // The function manifest is read from a checkout, where the link was left out.
    let id = g.deployment_of(&head, LIMIT);
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "FAILURE", "{d}");
    let reason = d["status_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("function.yaml"), "{reason}");
    let everything = format!("{app}{d}{}{}", g.get("/apps").1, g.log());
    assert!(
        !everything.contains(material),
        "the host file leaked: {everything}"
    );
    assert!(
        g.log()
            .contains("a symbolic link leaving the repository was left out of the checkout"),
        "{}",
        g.log()
    );
}
