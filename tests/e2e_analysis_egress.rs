//! End to end: an ANALYSIS `https` check written in the repository cannot make a real
//! `gannet up` reach a loopback "admin" page unless the operator allows loopback
//! (`plugins.analysis.http.allowPrivateNetworks`): `gannet config check` and the server refuse
//! it naming the field, and the page sees no request. Allowed, the check follows no redirect and
//! no part of the page's body reaches a stage log, the server's log or the API.
//!
//! Every server is on loopback and every wait is bounded.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use support::{app_config, stage_named, Gannet, Repo, UpOptions};

/// The bound on every wait for the server to get somewhere.
const LIMIT: Duration = Duration::from_secs(45);
/// What the admin page answers: no part of it may leave gannet.
const ADMIN_BODY: &str = "root-password=correct-horse-battery-staple";

/// Requests that reached the admin server, by path.
#[derive(Default)]
struct Hits {
    admin: AtomicUsize,
    redirect: AtomicUsize,
    second: AtomicUsize,
}

/// A loopback "admin" server on a thread: `/admin` answers 200 with [`ADMIN_BODY`],
/// `/redirect` 302 to `/second`, `/second` 200. It stops when dropped, or after two minutes.
struct Admin {
    addr: SocketAddr,
    hits: Arc<Hits>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Admin {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let (hits, stop) = (Arc::new(Hits::default()), Arc::new(AtomicBool::new(false)));
        let (counted, stopped) = (hits.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            while !stopped.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(120) {
                match listener.accept() {
                    Ok((stream, _)) => answer(stream, &counted),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Self {
            addr,
            hits,
            stop,
            thread: Some(thread),
        }
    }

    fn count(&self) -> (usize, usize, usize) {
        let h = &self.hits;
        (
            h.admin.load(Ordering::SeqCst),
            h.redirect.load(Ordering::SeqCst),
            h.second.load(Ordering::SeqCst),
        )
    }
}

impl Drop for Admin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads a request's head and answers it by its path.
fn answer(mut stream: TcpStream, hits: &Hits) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut head = Vec::new();
    let mut chunk = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 << 10 {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or_default();
    let (status, extra, body) = match path {
        "/admin" => {
            hits.admin.fetch_add(1, Ordering::SeqCst);
            ("200 OK", "", ADMIN_BODY)
        }
        "/redirect" => {
            hits.redirect.fetch_add(1, Ordering::SeqCst);
            ("302 Found", "location: /second\r\n", "moved")
        }
        "/second" => {
            hits.second.fetch_add(1, Ordering::SeqCst);
            ("200 OK", "", "second")
        }
        _ => ("404 Not Found", "", "no"),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(reply.as_bytes());
}

/// The app: one ANALYSIS stage checking the admin page (its body must hold `root-password`)
/// and the redirect (which must answer 302).
fn app(admin: &Admin) -> String {
    let addr = admin.addr;
    app_config(
        "web",
        &format!(
            "      - name: ANALYSIS\n        with:\n          duration: 1s\n          https:\n            - url: http://{addr}/admin\n              interval: 1s\n              expectedResponse: root-password\n            - url: http://{addr}/redirect\n              interval: 1s\n              expectedCode: 302\n"
        ),
    )
}

/// The parts of the admin page's body, none of which may be seen outside gannet.
fn assert_no_body(place: &str, text: &str) {
    for part in ["correct-horse", "battery-staple", "root-password="] {
        assert!(!text.contains(part), "{place} holds {part:?}: {text}");
    }
}

#[test]
fn a_check_on_loopback_is_refused_until_allowed_and_then_follows_no_redirect_and_shows_no_body() {
    let admin = Admin::start();
    let repo = Repo::new();
    let config = app(&admin);
    let head = repo.commit(&[("apps/web/app.pipecd.yaml", &config)], "add web");
    let line = 1 + config
        .lines()
        .position(|l| l.contains("/admin"))
        .expect("the url's line");
    let refusal = format!(
        "spec.pipeline.stages[0].with.https[0].url: {} is a loopback address: an ANALYSIS https check may reach it only when plugins.analysis.http.allowPrivateNetworks lists its network",
        admin.addr.ip()
    );

    // `config check` refuses it, naming the file, line and field.
    let apps = repo.path().join("apps");
    let run = support::run_gannet(&["config", "check", &apps.to_string_lossy()], &[]);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stdout
            .contains(&format!("app.pipecd.yaml:{line}: {refusal}")),
        "{run:?}"
    );

    // So does `gannet up`: the app is INVALID_CONFIG, nothing is deployed, nothing is sent.
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());
    let app = g.wait_until(LIMIT, "web is INVALID_CONFIG", || {
        let (status, body) = g.get("/apps/web");
        (status == 200 && body["app"]["sync_status"] == "INVALID_CONFIG").then_some(body)
    });
    let reason = app["app"]["sync_reason"].as_str().unwrap_or_default();
    assert!(reason.contains(&refusal), "{reason}");
    assert!(
        g.deployments().iter().all(|d| d["commit"] != head.as_str()),
        "{:?}",
        g.deployments()
    );
    assert_eq!(admin.count(), (0, 0, 0), "{}", g.log());
    drop(g);

    // The operator allows loopback: the check runs. The redirect is judged as answered (302)
    // and not followed; the body is judged, and shown nowhere.
    let mut opts = UpOptions::default();
    opts.extra_config
        .push_str("plugins:\n  analysis:\n    http: {allowPrivateNetworks: [127.0.0.0/8]}\n");
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), &opts);
    let id = g.deployment_of(&head, LIMIT);
    let d = g.wait_terminal(&id, LIMIT);
    let log = g.stage_log(&id, stage_named(&d, "ANALYSIS")["id"].as_str().expect("id"));
    let log = log.join("\n");
    assert_eq!(d["status"], "SUCCESS", "{d}\n{log}\n{}", g.log());
    let (admin_hits, redirect_hits, second_hits) = admin.count();
    assert!(admin_hits >= 1 && redirect_hits >= 1, "{log}");
    assert_eq!(second_hits, 0, "a redirect was followed: {log}");
    assert!(
        log.contains("[https[0]] #1: HTTP 200 (expected HTTP 2xx with \"root-password\") PASS"),
        "{log}"
    );
    assert!(
        log.contains("[https[1]] #1: HTTP 302 (expected HTTP 302) PASS"),
        "{log}"
    );
    assert_no_body("the stage log", &log);
    assert_no_body("the deployment", &d.to_string());
    assert_no_body("gannet's log", &g.log());
}
