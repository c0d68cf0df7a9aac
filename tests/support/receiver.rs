//! Servers on loopback that gannet talks to in tests: a notification receiver keeping what it
//! is sent, and an HTTP endpoint answering the status the test sets (for ANALYSIS's HTTP
//! checks). Each runs on a thread that stops when its handle drops, or after a minute at most.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A notification receiver on loopback: answers 503 to the first `fail_first` requests and 200
/// after, keeping every request it was sent. It stops when dropped, or after a minute at most.
pub struct Receiver {
    pub url: String,
    got: Arc<Mutex<Vec<Received>>>,
    _server: Server,
}

impl Receiver {
    pub fn start(fail_first: usize) -> Self {
        let got = Arc::new(Mutex::new(Vec::new()));
        let kept = got.clone();
        let mut seen = 0;
        let (addr, server) = Server::start(move |stream| {
            seen += 1;
            let status = if seen <= fail_first { 503 } else { 200 };
            if let Some((content_type, body)) = serve(stream, status) {
                kept.lock().expect("lock").push(Received {
                    status,
                    content_type,
                    body,
                });
            }
        });
        Self {
            url: format!("http://{addr}/"),
            got,
            _server: server,
        }
    }

    /// What was answered 200.
    pub fn events(&self) -> Vec<(String, Value)> {
        self.got
            .lock()
            .expect("lock")
            .iter()
            .filter(|r| r.status == 200)
            .map(|r| (r.content_type.clone(), r.body.clone()))
            .collect()
    }

    /// The ids of the events answered with an error.
    pub fn refused(&self) -> Vec<String> {
        self.got
            .lock()
            .expect("lock")
            .iter()
            .filter(|r| r.status != 200)
            .filter_map(|r| r.body["id"].as_str().map(str::to_owned))
            .collect()
    }
}

#[derive(Clone)]
struct Received {
    status: u16,
    content_type: String,
    body: Value,
}

/// A thread answering each connection to a 127.0.0.1 port with `handle`, until it is dropped
/// or a minute has passed.
struct Server {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    fn start(mut handle: impl FnMut(TcpStream) + Send + 'static) -> (SocketAddr, Self) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            while !stopped.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(60) {
                match listener.accept() {
                    Ok((stream, _)) => handle(stream),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        let server = Self {
            stop,
            thread: Some(thread),
        };
        (addr, server)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads one HTTP request and answers `status`; returns its content type and JSON body.
fn serve(mut stream: TcpStream, status: u16) -> Option<(String, Value)> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let header = |name: &str| {
        head.lines()
            .find_map(|l| {
                l.strip_prefix(&format!("{name}:"))
                    .map(|v| v.trim().to_owned())
            })
            .unwrap_or_default()
    };
    let length: usize = header("content-length").parse().ok()?;
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let reply = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    stream.write_all(reply.as_bytes()).ok()?;
    let body = serde_json::from_slice(&buf[head_end..head_end + length]).ok()?;
    Some((header("content-type"), body))
}

/// An HTTP endpoint on loopback answering every request with the status the test sets.
pub struct Endpoint {
    pub url: String,
    status: Arc<AtomicU16>,
    _server: Server,
}

impl Endpoint {
    pub fn start(status: u16) -> Self {
        let status = Arc::new(AtomicU16::new(status));
        let current = status.clone();
        let (addr, server) = Server::start(move |stream| {
            answer(stream, current.load(Ordering::Relaxed));
        });
        Self {
            url: format!("http://{addr}/health"),
            status,
            _server: server,
        }
    }

    pub fn set(&self, status: u16) {
        self.status.store(status, Ordering::Relaxed);
    }
}

/// Reads a request's head and answers `status` with a short body.
fn answer(mut stream: TcpStream, status: u16) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let reply = format!("HTTP/1.1 {status} X\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
    let _ = stream.write_all(reply.as_bytes());
}
