//! moto on loopback for the Lambda end-to-end tests: its endpoint (a loud failure when it is
//! not set, never a skip), IAM and S3 set-up, and reads of a function's alias, versions and code
//! through the Lambda API's own HTTP calls. moto does not check signatures, so requests carry a
//! placeholder SigV4 header naming the service (moto routes on it).
//!
//! Also a loopback proxy in front of moto that counts the requests it passes and can hold the
//! next alias update, so a test can kill `gannet up` while a LAMBDA_PROMOTE step is inside its
//! AWS call.

#![allow(dead_code)] // each test file uses a different part of these helpers

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

pub const REGION: &str = "us-east-1";
pub const ROLE_NAME: &str = "gannet-e2e";
pub const ROLE: &str = "arn:aws:iam::123456789012:role/gannet-e2e";

/// moto's endpoint, from `GANNET_MOTO_ENDPOINT`; panics with how to start it when unset.
pub fn endpoint() -> String {
    loopback_endpoint("GANNET_MOTO_ENDPOINT")
}

/// The loopback address in `variable`, which `scripts/moto.sh start` sets (moto_server's, or
/// its CloudWatch front's in `GANNET_MOTO_CLOUDWATCH_ENDPOINT`); a test that needs it fails
/// saying how to start it.
pub fn loopback_endpoint(variable: &str) -> String {
    let Ok(endpoint) = std::env::var(variable) else {
        panic!(
            "{variable} is not set: this test needs moto_server on loopback. \
             Run `make test`, or: scripts/moto.sh ensure && eval \"$(scripts/moto.sh start /tmp/motostate)\" \
             (and scripts/moto.sh stop /tmp/motostate afterwards)"
        );
    };
    assert!(
        endpoint.starts_with("http://127.0.0.1:"),
        "{variable} must be a loopback address, got {endpoint}"
    );
    endpoint
}

/// The environment `gannet up` gets: fixed test credentials and no ambient AWS config.
pub fn gannet_env() -> Vec<(String, String)> {
    [
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("AWS_CONFIG_FILE", "/nonexistent/gannet-e2e"),
        ("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/gannet-e2e"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect()
}

/// A name no other test, or earlier run against the same moto, uses.
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("http client")
}

/// One call to a moto service; returns (status, body).
fn call(
    service: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<(&str, Vec<u8>)>,
) -> (u16, String) {
    let auth = format!(
        "AWS4-HMAC-SHA256 Credential=testing/20240101/{REGION}/{service}/aws4_request, SignedHeaders=host, Signature=0"
    );
    let mut req = client()
        .request(method.clone(), format!("{}{path}", endpoint()))
        .header("Authorization", auth);
    if let Some((content_type, bytes)) = body {
        req = req.header("Content-Type", content_type).body(bytes);
    }
    let res = req
        .send()
        .unwrap_or_else(|e| panic!("moto answers {method} {path}: {e}"));
    (
        res.status().as_u16(),
        res.text().expect("moto's answer is text"),
    )
}

/// Creates the role functions run as in moto's IAM (which Lambda checks); again is fine.
pub fn ensure_role() {
    let policy = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    let form = format!(
        "Action=CreateRole&Version=2010-05-08&RoleName={ROLE_NAME}&AssumeRolePolicyDocument={}",
        urlencode(policy)
    );
    let (status, body) = call(
        "iam",
        reqwest::Method::POST,
        "/",
        Some(("application/x-www-form-urlencoded", form.into_bytes())),
    );
    assert!(
        (200..300).contains(&status) || status == 409,
        "CreateRole: {status} {body}"
    );
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Creates `bucket` in moto's S3.
pub fn create_bucket(bucket: &str) {
    let (status, body) = call("s3", reqwest::Method::PUT, &format!("/{bucket}"), None);
    assert!(
        (200..300).contains(&status),
        "CreateBucket: {status} {body}"
    );
}

/// Puts `bytes` at `s3://bucket/key`.
pub fn put_object(bucket: &str, key: &str, bytes: Vec<u8>) {
    let (status, body) = call(
        "s3",
        reqwest::Method::PUT,
        &format!("/{bucket}/{key}"),
        Some(("application/zip", bytes)),
    );
    assert!((200..300).contains(&status), "PutObject: {status} {body}");
}

/// A function name on moto, unused so far, and a new bucket for its code.
pub struct Function {
    pub name: String,
    pub bucket: String,
}

impl Function {
    pub fn new(prefix: &str) -> Self {
        ensure_role();
        let bucket = unique("code").to_lowercase();
        create_bucket(&bucket);
        Self {
            name: unique(prefix),
            bucket,
        }
    }

    /// Uploads code `version`; returns the function manifest deploying it ([`upload_code`]).
    pub fn upload(&self, version: &str) -> String {
        upload_code(&self.name, &self.bucket, version)
    }

    /// What the alias `alias` routes now.
    pub fn alias(&self, alias_name: &str) -> Option<Routing> {
        alias(&self.name, alias_name)
    }
}

/// Uploads code `version` to `s3://bucket/<version>.zip` and returns the function manifest
/// (`function.yaml`) deploying it as `function`.
pub fn upload_code(function: &str, bucket: &str, version: &str) -> String {
    let key = format!("{version}.zip");
    put_object(bucket, &key, zip_bytes(version));
    format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: LambdaFunction\nspec:\n  name: {function}\n  role: {ROLE}\n  handler: index.handler\n  runtime: python3.12\n  memory: 128\n  timeout: 10\n  s3Bucket: {bucket}\n  s3Key: {key}\n"
    )
}

/// Zip-looking bytes (moto's Lambda hashes the code; it never unpacks it).
pub fn zip_bytes(content: &str) -> Vec<u8> {
    let mut bytes = b"PK\x03\x04".to_vec();
    bytes.extend_from_slice(content.as_bytes());
    bytes
}

/// What an alias routes, as GetAlias reports it: `FunctionVersion` and
/// `RoutingConfig.AdditionalVersionWeights` (empty when there is no routing config).
#[derive(Clone, Debug, PartialEq)]
pub struct Routing {
    pub version: String,
    pub weights: BTreeMap<String, f64>,
}

impl Routing {
    pub fn all_to(version: &str) -> Self {
        Self {
            version: version.to_owned(),
            weights: BTreeMap::new(),
        }
    }

    /// `version` carries the alias, `other` gets `weight` of the traffic.
    pub fn split(version: &str, other: &str, weight: f64) -> Self {
        Self {
            version: version.to_owned(),
            weights: BTreeMap::from([(other.to_owned(), weight)]),
        }
    }
}

fn lambda_get(path: &str) -> Option<Value> {
    let (status, body) = call("lambda", reqwest::Method::GET, path, None);
    match status {
        404 => None,
        // moto answers GetAlias with 201.
        200..=299 => Some(serde_json::from_str(&body).expect("Lambda answers JSON")),
        other => panic!("GET {path}: {other} {body}"),
    }
}

/// GetAlias; `None` when the alias (or the function) does not exist.
pub fn alias(function: &str, alias: &str) -> Option<Routing> {
    let out = lambda_get(&format!("/2015-03-31/functions/{function}/aliases/{alias}"))?;
    let weights = out["RoutingConfig"]["AdditionalVersionWeights"]
        .as_object()
        .map(|w| {
            w.iter()
                .map(|(k, v)| (k.clone(), v.as_f64().expect("a weight is a number")))
                .collect()
        })
        .unwrap_or_default();
    Some(Routing {
        version: out["FunctionVersion"]
            .as_str()
            .expect("FunctionVersion")
            .to_owned(),
        weights,
    })
}

/// ListVersionsByFunction, without `$LATEST`; empty when the function does not exist.
pub fn versions(function: &str) -> Vec<String> {
    let Some(out) = lambda_get(&format!("/2015-03-31/functions/{function}/versions")) else {
        return Vec::new();
    };
    out["Versions"]
        .as_array()
        .expect("Versions")
        .iter()
        .filter_map(|v| v["Version"].as_str())
        .filter(|v| *v != "$LATEST")
        .map(str::to_owned)
        .collect()
}

/// `$LATEST`'s `CodeSha256`; `None` when the function does not exist.
pub fn code_sha256(function: &str) -> Option<String> {
    let out = lambda_get(&format!("/2015-03-31/functions/{function}"))?;
    out["Configuration"]["CodeSha256"]
        .as_str()
        .map(str::to_owned)
}

/// `$LATEST`'s environment variables; empty when the function has none (or does not exist).
pub fn environment(function: &str) -> BTreeMap<String, String> {
    lambda_get(&format!("/2015-03-31/functions/{function}"))
        .and_then(|out| {
            serde_json::from_value(out["Configuration"]["Environment"]["Variables"].clone()).ok()
        })
        .unwrap_or_default()
}

/// Changes made by hand, as an operator would with the AWS CLI.
fn lambda_send(method: reqwest::Method, path: &str, body: &Value) -> Value {
    let (status, text) = call(
        "lambda",
        method.clone(),
        path,
        Some(("application/json", body.to_string().into_bytes())),
    );
    assert!(
        (200..300).contains(&status),
        "{method} {path}: {status} {text}"
    );
    serde_json::from_str(&text).unwrap_or(Value::Null)
}

/// UpdateAlias: `alias` of `function` to `routing`.
pub fn update_alias(function: &str, alias: &str, routing: &Routing) {
    lambda_send(
        reqwest::Method::PUT,
        &format!("/2015-03-31/functions/{function}/aliases/{alias}"),
        &serde_json::json!({
            "FunctionVersion": routing.version,
            "RoutingConfig": {"AdditionalVersionWeights": routing.weights},
        }),
    );
}

/// UpdateFunctionConfiguration of `$LATEST`: its VPC subnets and security groups.
pub fn update_vpc(function: &str, subnets: &[&str], security_groups: &[&str]) {
    lambda_send(
        reqwest::Method::PUT,
        &format!("/2015-03-31/functions/{function}/configuration"),
        &serde_json::json!({
            "VpcConfig": {"SubnetIds": subnets, "SecurityGroupIds": security_groups},
        }),
    );
}

/// UpdateFunctionConfiguration of `$LATEST`: its memory size.
pub fn update_memory(function: &str, megabytes: u32) {
    lambda_send(
        reqwest::Method::PUT,
        &format!("/2015-03-31/functions/{function}/configuration"),
        &serde_json::json!({"MemorySize": megabytes}),
    );
}

/// PublishVersion of `$LATEST`; returns the version.
pub fn publish_version(function: &str) -> String {
    let out = lambda_send(
        reqwest::Method::POST,
        &format!("/2015-03-31/functions/{function}/versions"),
        &serde_json::json!({}),
    );
    out["Version"].as_str().expect("a version").to_owned()
}

// ------------------------------------------------------------------ a proxy that can hold

/// A loopback HTTP proxy to moto. Every request passes through (and is counted), except that
/// after [`Proxy::hold_next_alias_update`] the next UpdateAlias call is held until
/// [`Proxy::release`], then sent on (its answer goes to whoever still listens).
pub struct Proxy {
    pub url: String,
    shared: Arc<Shared>,
    held: Receiver<String>,
    release: Sender<()>,
}

struct Shared {
    stop: AtomicBool,
    hold: AtomicBool,
    /// Requests received so far.
    requests: AtomicU64,
    upstream: String,
    held: Mutex<Sender<String>>,
    release: Mutex<Receiver<()>>,
}

impl Proxy {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let url = format!("http://{}", listener.local_addr().expect("proxy address"));
        listener.set_nonblocking(true).expect("nonblocking");
        let (held_tx, held) = mpsc::channel();
        let (release, release_rx) = mpsc::channel();
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            hold: AtomicBool::new(false),
            requests: AtomicU64::new(0),
            upstream: endpoint(),
            held: Mutex::new(held_tx),
            release: Mutex::new(release_rx),
        });
        let accepting = shared.clone();
        std::thread::spawn(move || accept(&listener, &accepting));
        Self {
            url,
            shared,
            held,
            release,
        }
    }

    /// How many requests have reached the proxy so far.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// The next UpdateAlias call will be held.
    pub fn hold_next_alias_update(&self) {
        self.shared.hold.store(true, Ordering::SeqCst);
    }

    /// Waits until a call is held; returns its request line.
    pub fn wait_held(&self, limit: Duration) -> String {
        self.held.recv_timeout(limit).unwrap_or_else(|e| {
            panic!("no UpdateAlias call reached the proxy within {limit:?}: {e}")
        })
    }

    /// Sends the held call on to moto.
    pub fn release(&self) {
        self.release.send(()).expect("the held call is waiting");
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

fn accept(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((conn, _)) => {
                let shared = shared.clone();
                std::thread::spawn(move || {
                    // A connection that breaks (gannet killed) just ends.
                    let _ = serve(conn, &shared);
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(_) => return,
        }
    }
}

/// Serves the requests of one keep-alive connection, each forwarded to moto.
fn serve(conn: TcpStream, shared: &Shared) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut writer = conn;
    let http = client();
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        let mut parts = request_line.split_whitespace();
        let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
            return Ok(());
        };
        let (method, path) = (method.to_owned(), path.to_owned());
        shared.requests.fetch_add(1, Ordering::SeqCst);
        let mut headers = Vec::new();
        let mut length = 0usize;
        let mut close = false;
        for _ in 0..200 {
            let mut line = String::new();
            reader.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_owned());
            match name.as_str() {
                "content-length" => length = value.parse().unwrap_or(0),
                "transfer-encoding" => panic!("the proxy does not take chunked requests"),
                "connection" => close = value.eq_ignore_ascii_case("close"),
                "expect" => writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?,
                "host" => {}
                _ => headers.push((name, value)),
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;

        if method == "PUT"
            && path.contains("/aliases/")
            && shared.hold.swap(false, Ordering::SeqCst)
        {
            let _ = shared
                .held
                .lock()
                .expect("held sender")
                .send(request_line.trim().to_owned());
            let released = shared
                .release
                .lock()
                .expect("release receiver")
                .recv_timeout(Duration::from_secs(120));
            if released.is_err() {
                return Ok(());
            }
        }

        let mut req = http.request(
            reqwest::Method::from_bytes(method.as_bytes()).expect("an HTTP method"),
            format!("{}{path}", shared.upstream),
        );
        for (name, value) in &headers {
            req = req.header(name.as_str(), value.as_str());
        }
        let res = req
            .body(body)
            .send()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let status = res.status();
        let mut head = format!(
            "HTTP/1.1 {} {}\r\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        );
        for (name, value) in res.headers() {
            if ["content-length", "transfer-encoding", "connection"].contains(&name.as_str()) {
                continue;
            }
            head.push_str(&format!(
                "{name}: {}\r\n",
                value.to_str().unwrap_or_default()
            ));
        }
        let bytes = res
            .bytes()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        head.push_str(&format!("content-length: {}\r\n\r\n", bytes.len()));
        writer.write_all(head.as_bytes())?;
        writer.write_all(&bytes)?;
        writer.flush()?;
        if close {
            return Ok(());
        }
    }
}
