//! The credentials of a remote never reach a process's arguments: a real fetch over HTTP from a
//! loopback server that demands basic authentication (git's own `git http-backend` behind a
//! small server in this test), while every process's `/proc/<pid>/cmdline` is sampled.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gannet_domain::ids::RepoId;
use gannet_domain::ports::GitSource as _;

use super::Remote;
use crate::{LocalGit, Location, RepoSpec};

const USER: &str = "x-access-token";
const PASSWORD: &str = "ghs_TestSecret0123456789";

#[test]
fn credentials_are_taken_out_of_http_urls_only() {
    let check = |url: &str, want_url: &str, want: Option<(&str, &str)>| {
        let remote = Remote::parse(url);
        assert_eq!(remote.url(), want_url, "{url}");
        let got = remote
            .credentials
            .as_ref()
            .map(|c| (c.username.as_str(), c.password.as_str()));
        assert_eq!(got, want, "{url}");
    };
    check(
        "https://x-access-token:s3cr%40t@github.com/o/r.git",
        "https://github.com/o/r.git",
        Some(("x-access-token", "s3cr@t")),
    );
    check(
        "https://ghp_token@github.com/o/r.git",
        "https://github.com/o/r.git",
        Some(("ghp_token", "")),
    );
    check(
        "HTTP://u:p@127.0.0.1:8080",
        "HTTP://127.0.0.1:8080",
        Some(("u", "p")),
    );
    check(
        "https://github.com/o/r.git",
        "https://github.com/o/r.git",
        None,
    );
    check(
        "ssh://git@github.com/o/r.git",
        "ssh://git@github.com/o/r.git",
        None,
    );
    check("file:///srv/r.git", "file:///srv/r.git", None);
    check("/srv/r.git", "/srv/r.git", None);
    check("https://h/p?q=a@b", "https://h/p?q=a@b", None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_never_shows_the_password_to_other_processes() {
    let upstream = tempfile::tempdir().unwrap();
    let head = bare_repo_with_a_commit(upstream.path());
    let server = Server::start(upstream.path());
    let sampler = Sampler::start(server.port);
    server.hold_until(sampler.saw_git.clone());

    let cache = tempfile::tempdir().unwrap();
    let url = format!(
        "http://{USER}:{PASSWORD}@127.0.0.1:{}/repo.git",
        server.port
    );
    let repo = RepoId::parse("demo").unwrap();
    let git = LocalGit::new(
        cache.path(),
        vec![RepoSpec {
            id: repo.clone(),
            location: Location::Url(url),
            branch: "main".into(),
        }],
    )
    .unwrap();
    let fetched = git.head(&repo, "main").await;
    let seen = sampler.stop();

    assert_eq!(fetched.expect("the fetch").sha.as_str(), head);
    assert!(
        *server.authorized.lock().unwrap() > 0,
        "the server took the credentials"
    );
    assert!(
        seen.git_processes > 0,
        "the sampler saw git while it talked to the server"
    );
    assert!(
        seen.leaked.is_empty(),
        "the password in argv: {:?}",
        seen.leaked
    );
    // Nothing under the cache (the clone's config above all) holds the password.
    for file in files_under(cache.path()) {
        let bytes = std::fs::read(&file).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(PASSWORD),
            "{} holds the password",
            file.display()
        );
    }
    let config = std::fs::read_to_string(cache.path().join("repos/demo.git/config")).unwrap();
    assert!(
        !config.contains(USER) && !config.contains(PASSWORD),
        "{config}"
    );

    // A wrong password is refused by the server, and the error does not show it either.
    let other_cache = tempfile::tempdir().unwrap();
    let wrong = LocalGit::new(
        other_cache.path(),
        vec![RepoSpec {
            id: repo.clone(),
            location: Location::Url(format!(
                "http://{USER}:wrong-{PASSWORD}@127.0.0.1:{}/repo.git",
                server.port
            )),
            branch: "main".into(),
        }],
    )
    .unwrap();
    let err = wrong.head(&repo, "main").await.unwrap_err();
    let text = gannet_domain::report::error_chain(&err);
    assert!(text.contains("127.0.0.1"), "{text}");
    assert!(!text.contains(PASSWORD), "{text}");
}

/// A bare repository `repo.git` under `root` whose `main` holds one commit; its sha.
fn bare_repo_with_a_commit(root: &Path) -> String {
    let work = root.join("work");
    let git = crate::local::test_git;
    std::fs::create_dir(&work).unwrap();
    git(&work, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(work.join("app.pipecd.yaml"), "kind: Application\n").unwrap();
    git(&work, &["add", "--all"]);
    git(&work, &["commit", "--quiet", "-m", "one"]);
    git(root, &["clone", "--quiet", "--bare", "work", "repo.git"]);
    git(&work, &["rev-parse", "HEAD"]).trim().to_owned()
}

fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => pending.push(path),
                Ok(t) if t.is_file() => out.push(path),
                _ => {}
            }
        }
    }
    out
}

/// What the sampler saw.
struct Seen {
    /// Processes whose arguments named the server.
    git_processes: usize,
    /// Arguments that held the password.
    leaked: std::collections::BTreeSet<String>,
}

/// Reads every process's arguments over and over until stopped (at most 60 s).
struct Sampler {
    stop: Arc<AtomicBool>,
    saw_git: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Seen>,
}

impl Sampler {
    fn start(port: u16) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let saw_git = Arc::new(AtomicBool::new(false));
        let (stop2, saw2) = (stop.clone(), saw_git.clone());
        let server = format!("127.0.0.1:{port}");
        let thread = std::thread::spawn(move || {
            let mut seen = Seen {
                git_processes: 0,
                leaked: Default::default(),
            };
            let deadline = Instant::now() + Duration::from_secs(60);
            while !stop2.load(Ordering::SeqCst) && Instant::now() < deadline {
                for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                    let Ok(bytes) = std::fs::read(entry.path().join("cmdline")) else {
                        continue;
                    };
                    let argv = String::from_utf8_lossy(&bytes).replace('\0', " ");
                    if argv.contains(&server) && !argv.contains("cargo") {
                        seen.git_processes += 1;
                        saw2.store(true, Ordering::SeqCst);
                    }
                    if argv.contains(PASSWORD) {
                        seen.leaked.insert(argv);
                    }
                }
            }
            seen
        });
        Self {
            stop,
            saw_git,
            thread,
        }
    }

    fn stop(self) -> Seen {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

/// `git http-backend` over HTTP/1.1 on loopback, behind basic authentication.
struct Server {
    port: u16,
    authorized: Arc<Mutex<usize>>,
    /// Until set (or 20 s pass), the first answer waits: git is then surely running.
    hold: Arc<Mutex<Option<Arc<AtomicBool>>>>,
}

impl Server {
    fn start(root: &Path) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let authorized = Arc::new(Mutex::new(0));
        let hold: Arc<Mutex<Option<Arc<AtomicBool>>>> = Arc::default();
        let (root, counted, held) = (root.to_owned(), authorized.clone(), hold.clone());
        // The listener lives as long as the test process; each connection gets a thread.
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (root, counted, held) = (root.clone(), counted.clone(), held.clone());
                std::thread::spawn(move || serve(stream, &root, &counted, &held));
            }
        });
        Self {
            port,
            authorized,
            hold,
        }
    }

    fn hold_until(&self, flag: Arc<AtomicBool>) {
        *self.hold.lock().unwrap() = Some(flag);
    }
}

fn serve(
    stream: TcpStream,
    root: &Path,
    authorized: &Mutex<usize>,
    hold: &Mutex<Option<Arc<AtomicBool>>>,
) {
    let flag = hold.lock().unwrap().take();
    if let Some(flag) = flag {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !flag.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::yield_now();
        }
    }
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end().to_owned();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut out = stream;
    let expected = format!("Basic {}", base64(&format!("{USER}:{PASSWORD}")));
    if header("authorization").as_deref() != Some(expected.as_str()) {
        let _ = out.write_all(b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
    }
    *authorized.lock().unwrap() += 1;
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let length: usize = header("content-length").map_or(0, |l| l.parse().unwrap());
    assert!(header("transfer-encoding").is_none(), "small requests only");
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let mut cgi = Command::new("git");
    cgi.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("REMOTE_USER", USER)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("CONTENT_LENGTH", length.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (name, var) in [
        ("content-type", "CONTENT_TYPE"),
        ("content-encoding", "HTTP_CONTENT_ENCODING"),
        ("git-protocol", "GIT_PROTOCOL"),
    ] {
        if let Some(value) = header(name) {
            cgi.env(var, value);
        }
    }
    let mut child = cgi.spawn().unwrap();
    child.stdin.take().unwrap().write_all(&body).unwrap();
    let output = child.wait_with_output().unwrap();
    let split = output
        .stdout
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| (at, 4))
        .or_else(|| {
            output
                .stdout
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|at| (at, 2))
        })
        .expect("CGI headers");
    let (head, rest) = output.stdout.split_at(split.0);
    let content = &rest[split.1..];
    let mut status = "200 OK".to_owned();
    let mut response = Vec::new();
    for line in String::from_utf8_lossy(head).lines() {
        match line.split_once(':') {
            Some((k, v)) if k.eq_ignore_ascii_case("status") => status = v.trim().to_owned(),
            Some(_) => response.extend_from_slice(format!("{line}\r\n").as_bytes()),
            None => {}
        }
    }
    let mut answer = format!("HTTP/1.1 {status}\r\n").into_bytes();
    answer.extend_from_slice(&response);
    answer.extend_from_slice(
        format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n",
            content.len()
        )
        .as_bytes(),
    );
    answer.extend_from_slice(content);
    let _ = out.write_all(&answer);
}

fn base64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}
