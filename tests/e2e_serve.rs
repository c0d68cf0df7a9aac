//! End to end: `gannet up`'s server as the internet meets it. One client holding its
//! connections open cannot lock others out of the webhook (`api.maxConnectionsPerPeer`; the
//! client's surplus connections are closed at once); with `api.tls` it serves HTTPS only, to
//! the CLI (`SSL_CERT_FILE`) and to a signed webhook, and refuses a key file others may read
//! or a file that is not PEM before it listens; the CLI warns before it sends a token over
//! plain HTTP to a host that is not this machine.
//!
//! Other client addresses are other loopback addresses (all of 127.0.0.0/8 is loopback on
//! Linux): a socket bound to 127.0.0.3 before it connects is another peer.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use support::{app_config, run_gannet, Gannet, Repo, ADMIN_TOKEN, GITHUB, SECRET};

const LIMIT: Duration = Duration::from_secs(30);
const CONFIG: &str = "apps/web/app.pipecd.yaml";
const OK: &str = "      - name: SCRIPT_RUN\n        with: {run: echo ok}\n";

/// A gannet.yaml for `repo` on `port`, with `api` (indented keys) under the tokens.
fn config(repo: &Repo, port: u16, api: &str) -> String {
    format!(
        "listen: 127.0.0.1:{port}\nstate: state/gannet.db\nwebhook:\n  secretEnv: GANNET_E2E_SECRET\napi:\n  tokens: {{env: GANNET_E2E_TOKENS}}\n{api}repos:\n  - id: shop\n    path: {}\n    branch: main\n    onFirstSight: deploy\n    github: {GITHUB}\nintervals: {{poll: 1m, resume: 1s}}\n",
        repo.path().display(),
    )
}

/// A TCP connection to `server` from the loopback address `from`.
fn connect_from(from: &str, server: SocketAddr) -> TcpStream {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    let stream = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        let from: IpAddr = from.parse().expect("address");
        socket.bind(SocketAddr::new(from, 0)).expect("bind");
        socket.connect(server).await.expect("connect")
    });
    let stream = stream.into_std().expect("std stream");
    stream.set_nonblocking(false).expect("blocking");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    stream
}

/// Sends `GET /healthz` on `stream` (kept alive); the status line of the answer, or how the
/// connection ended when there was none.
fn healthz(stream: &mut TcpStream, server: SocketAddr) -> Result<String, String> {
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {server}\r\n\r\n");
    // A write to a socket the server already closed may still succeed: the read tells.
    let _ = stream.write_all(request.as_bytes());
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Err("closed".into()),
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return Err("reset".into()),
            Err(e) => return Err(format!("no answer: {e}")),
        }
        let text = String::from_utf8_lossy(&answer);
        // /healthz answers a short body: the whole answer is here once its body is.
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(str::to_owned)
                })
                .and_then(|n| n.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= length {
                return Ok(head.lines().next().unwrap_or_default().to_owned());
            }
        }
    }
}

/// A signed push of `commit` from the loopback address `from`; the answer's status.
fn push_from(from: &str, url: &str, commit: &str) -> u16 {
    let client = reqwest::blocking::Client::builder()
        .local_address(from.parse::<IpAddr>().expect("address"))
        .timeout(LIMIT)
        .build()
        .expect("client");
    let body = support::push_payload(GITHUB, "main", commit);
    let signature = gannet_events::github::sign(SECRET.as_bytes(), body.as_bytes());
    client
        .post(format!("{url}/hooks/github"))
        .header("x-github-event", "push")
        .header("x-github-delivery", format!("{from}-{commit}"))
        .header("x-hub-signature-256", signature)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .expect("the webhook answers")
        .status()
        .as_u16()
}

#[test]
fn one_client_holding_its_connections_open_cannot_lock_others_out_of_the_webhook() {
    let repo = Repo::new();
    let head = repo.commit(&[(CONFIG, &app_config("web", OK))], "add web");
    let state = tempfile::tempdir().expect("tempdir");
    // Without the cap per peer, the hog's 8 connections would take every slot.
    let g = Gannet::start_raw(
        state.path(),
        |port| {
            config(
                &repo,
                port,
                "  maxConnections: 8\n  maxConnectionsPerPeer: 4\n  headerTimeout: 60s\n",
            )
        },
        &[],
    );
    let server: SocketAddr = g
        .url
        .trim_start_matches("http://")
        .parse()
        .expect("address");

    // The hog: 4 connections served and held open (idle, kept alive)...
    let mut held = Vec::new();
    for i in 0..4 {
        let mut stream = connect_from("127.0.0.3", server);
        let answer = healthz(&mut stream, server);
        assert_eq!(answer.as_deref(), Ok("HTTP/1.1 200 OK"), "connection {i}");
        held.push(stream);
    }
    // ... and every one more from it is closed at once, without an answer.
    for i in 4..8 {
        let mut stream = connect_from("127.0.0.3", server);
        let answer = healthz(&mut stream, server);
        assert!(
            matches!(
                answer.as_ref().map_err(String::as_str),
                Err("closed" | "reset")
            ),
            "connection {i} from the same peer: {answer:?}"
        );
    }
    // Another client's webhook is answered meanwhile.
    assert_eq!(push_from("127.0.0.2", &g.url, &head), 202);
    let id = g.deployment_of(&head, LIMIT);
    assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "SUCCESS");
    assert!(
        g.log()
            .contains("too many connections from one client; closing its new ones"),
        "{}",
        g.log()
    );

    // Once the hog lets go, its slots come back.
    drop(held);
    let mut stream = g.wait_until(LIMIT, "the peer's slots come back", || {
        let mut stream = connect_from("127.0.0.3", server);
        healthz(&mut stream, server).ok().map(|_| stream)
    });
    assert_eq!(
        healthz(&mut stream, server).as_deref(),
        Ok("HTTP/1.1 200 OK")
    );
}

/// Writes `text` to `dir/name` with `mode`.
fn write(dir: &Path, name: &str, text: &[u8], mode: u32) {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn gannet_up_serves_https_itself_to_the_cli_and_the_webhook_and_refuses_bad_key_files() {
    let certs = tempfile::tempdir().expect("tempdir");
    let ca = support::test_certificate(certs.path());
    let key = std::fs::read(certs.path().join("key.pem")).expect("key");
    let cert = std::fs::read(certs.path().join("cert.pem")).expect("cert");
    let repo = Repo::new();
    let head = repo.commit(&[(CONFIG, &app_config("web", OK))], "add web");
    let state = tempfile::tempdir().expect("tempdir");
    let tls = "  tls: {certFile: tls/cert.pem, keyFile: tls/key.pem}\n";
    let tls_dir = state.path().join("tls");
    std::fs::create_dir(&tls_dir).expect("mkdir");

    // Before it listens: a key other users may read, a certificate that is not PEM, a key
    // that is not one.
    let yaml = state.path().join("gannet.yaml");
    std::fs::write(&yaml, config(&repo, support::free_port(), tls)).expect("config");
    let yaml = yaml.to_str().expect("path");
    let tokens = format!("- {{name: admin, role: admin, token: {ADMIN_TOKEN}}}\n");
    let env = [
        ("GANNET_E2E_SECRET", SECRET),
        ("GANNET_E2E_TOKENS", tokens.as_str()),
    ];
    let cases: [(&[u8], &[u8], u32, &str); 3] = [
        (
            &cert,
            &key,
            0o640,
            "api.tls.keyFile: {dir}/key.pem: other users may read the private key (mode 640); chmod 600 it",
        ),
        (
            b"-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA=\n-----END",
            &key,
            0o600,
            "api.tls.certFile: {dir}/cert.pem: ",
        ),
        (
            &cert,
            b"not a key\n",
            0o600,
            "api.tls.keyFile: {dir}/key.pem: holds no private key",
        ),
    ];
    for (cert_text, key_text, mode, expected) in cases {
        write(&tls_dir, "cert.pem", cert_text, 0o644);
        write(&tls_dir, "key.pem", key_text, mode);
        let run = run_gannet(&["up", "--config", yaml], &env);
        let expected = expected.replace("{dir}", &tls_dir.display().to_string());
        assert_ne!(run.code, 0, "{run:?}");
        assert!(run.stderr.contains(&expected), "{expected}: {run:?}");
        assert!(!state.path().join("state/gannet.db").exists(), "{run:?}");
    }

    write(&tls_dir, "cert.pem", &cert, 0o644);
    write(&tls_dir, "key.pem", &key, 0o600);
    let g = Gannet::start_tls(state.path(), |port| config(&repo, port, tls), &ca);
    assert!(g.url.starts_with("https://localhost:"), "{}", g.url);

    // A signed webhook over TLS deploys.
    let (status, body) = g.push(&head, "tls-push");
    assert_eq!(status, 202, "{body}");
    let id = g.deployment_of(&head, LIMIT);
    assert_eq!(g.wait_terminal(&id, LIMIT)["status"], "SUCCESS");

    // The CLI, trusting the test CA, over HTTPS: no plain-HTTP warning.
    let ca = ca.to_str().expect("path");
    let run = g.cli_env(&["apps", "list"], &[("SSL_CERT_FILE", ca)]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("web"), "{run:?}");
    assert!(!run.stderr.contains("plain HTTP"), "{run:?}");

    // Plain HTTP to the TLS port gets no answer.
    let port = g.url.rsplit(':').next().expect("port");
    let plain = reqwest::blocking::Client::builder()
        .timeout(LIMIT)
        .build()
        .expect("client")
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .send();
    assert!(plain.is_err(), "plain HTTP answered: {plain:?}");
}

#[test]
fn the_cli_warns_before_sending_a_token_over_plain_http_beyond_loopback() {
    // 0.0.0.0 is not a loopback address (nothing listens on this port): the CLI warns, naming
    // the host and never the token, before it tries.
    let port = support::free_port();
    let server = format!("http://0.0.0.0:{port}");
    let run = run_gannet(
        &["apps", "list", "--server", &server],
        &[("GANNET_TOKEN", ADMIN_TOKEN)],
    );
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.stderr
            .contains("warning: sending your API token to 0.0.0.0 over plain HTTP"),
        "{run:?}"
    );
    assert!(!run.stderr.contains(ADMIN_TOKEN), "{run:?}");
    // Without a token there is nothing to warn about.
    let run = run_gannet(&["apps", "list", "--server", &server], &[]);
    assert!(!run.stderr.contains("plain HTTP"), "{run:?}");

    // To loopback, no warning.
    let repo = Repo::new();
    repo.commit(&[(CONFIG, &app_config("web", OK))], "add web");
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start_raw(state.path(), |port| config(&repo, port, ""), &[]);
    let run = g.cli_env(&["apps", "list"], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stderr.contains("plain HTTP"), "{run:?}");
}
