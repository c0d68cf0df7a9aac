//! Servers on loopback that gannet talks to in tests: a notification receiver keeping what it
//! is sent, and an HTTP endpoint answering the status the test sets (for ANALYSIS's HTTP
//! checks). Each runs on a thread that stops when its handle drops, or after a minute at most.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
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
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    pub fn start(fail_first: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}/", listener.local_addr().expect("addr"));
        let got = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (got, stop) = (got.clone(), stop.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                let mut seen = 0;
                while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(60) {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            seen += 1;
                            let status = if seen <= fail_first { 503 } else { 200 };
                            if let Some((content_type, body)) = serve(stream, status) {
                                got.lock().expect("lock").push(Received {
                                    status,
                                    content_type,
                                    body,
                                });
                            }
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
        };
        Self {
            url,
            got,
            stop,
            thread: Some(thread),
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

impl Drop for Receiver {
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
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Endpoint {
    pub fn start(status: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}/health", listener.local_addr().expect("addr"));
        let status = Arc::new(AtomicU16::new(status));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (status, stop) = (status.clone(), stop.clone());
            std::thread::spawn(move || {
                let started = Instant::now();
                while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(60) {
                    match listener.accept() {
                        Ok((stream, _)) => answer(stream, status.load(Ordering::Relaxed)),
                        Err(_) => std::thread::sleep(Duration::from_millis(10)),
                    }
                }
            })
        };
        Self {
            url,
            status,
            stop,
            thread: Some(thread),
        }
    }

    pub fn set(&self, status: u16) {
        self.status.store(status, Ordering::Relaxed);
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
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
