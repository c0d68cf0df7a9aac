//! A counting HTTP proxy between the functions' AWS clients and moto: every request passes
//! through unchanged and is counted by service (from the SigV4 credential scope) and
//! operation (`X-Amz-Target`, a query-protocol `Action`, or the Lambda REST path).
//!
//! It keeps the variables of each CodeBuild StartBuild (moto keeps none): what a build is
//! given, which the lab's player of builds needs (the job's presigned URLs).
//!
//! For DynamoDB it also estimates the capacity units each request consumes on an on-demand
//! table, from the items' sizes as they cross the wire (attribute names plus values, as
//! DynamoDB sizes items): a write takes one WRU per KB of item (two in a transaction), a
//! strongly consistent read one RRU per 4 KB read (at least one per request).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;

/// Requests counted per (service, operation).
pub type Counts = BTreeMap<(String, String), u64>;

/// DynamoDB capacity units per operation, estimated: (read units, write units).
pub type Units = BTreeMap<String, (u64, u64)>;

/// A StartBuild's environment variables, by name.
pub type BuildVariables = BTreeMap<String, String>;

pub struct CountingProxy {
    pub url: String,
    counts: Arc<Mutex<Counts>>,
    units: Arc<Mutex<Units>>,
    builds: Arc<Mutex<Vec<BuildVariables>>>,
}

#[derive(Clone)]
struct Shared {
    upstream: String,
    http: reqwest::Client,
    counts: Arc<Mutex<Counts>>,
    units: Arc<Mutex<Units>>,
    builds: Arc<Mutex<Vec<BuildVariables>>>,
}

impl CountingProxy {
    /// Starts the proxy to `upstream` on a free loopback port (on the current tokio runtime).
    pub async fn start(upstream: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the counting proxy");
        let url = format!("http://{}", listener.local_addr().expect("proxy address"));
        let counts = Arc::new(Mutex::new(Counts::new()));
        let units = Arc::new(Mutex::new(Units::new()));
        let builds = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            upstream: upstream.to_owned(),
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("proxy client"),
            counts: counts.clone(),
            units: units.clone(),
            builds: builds.clone(),
        };
        let app = Router::new().fallback(forward).with_state(shared);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url,
            counts,
            units,
            builds,
        }
    }

    /// The variables of every build started so far (StartBuild's
    /// `environmentVariablesOverride`), in order.
    pub fn started_builds(&self) -> Vec<BuildVariables> {
        self.builds.lock().expect("builds").clone()
    }

    /// The DynamoDB capacity estimates so far, which start again from zero.
    pub fn take_units(&self) -> Units {
        std::mem::take(&mut *self.units.lock().expect("units"))
    }

    /// The counts so far, which start again from zero.
    pub fn take(&self) -> Counts {
        std::mem::take(&mut *self.counts.lock().expect("counts"))
    }
}

async fn forward(State(s): State<Shared>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = to_bytes(body, 64 * 1024 * 1024).await else {
        return (StatusCode::BAD_REQUEST, "unreadable body").into_response();
    };
    let key = (
        service(&parts.headers),
        operation(
            &parts.method,
            &parts.headers,
            parts.uri.path(),
            parts.uri.query(),
            &body,
        ),
    );
    *s.counts
        .lock()
        .expect("counts")
        .entry(key.clone())
        .or_default() += 1;
    if key == ("codebuild".to_owned(), "StartBuild".to_owned()) {
        let request: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let variables = request["environmentVariablesOverride"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| {
                Some((
                    v["name"].as_str()?.to_owned(),
                    v["value"].as_str()?.to_owned(),
                ))
            })
            .collect();
        s.builds.lock().expect("builds").push(variables);
    }
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut upstream = s
        .http
        .request(parts.method.clone(), format!("{}{path}", s.upstream));
    // The Host header goes as it came: it is signed, and moto (IAM enforced) checks signatures.
    for (name, value) in &parts.headers {
        if name != "content-length" {
            upstream = upstream.header(name, value);
        }
    }
    let answer = match upstream.body(body.clone()).send().await {
        Ok(answer) => answer,
        Err(err) => return (StatusCode::BAD_GATEWAY, err.to_string()).into_response(),
    };
    let status = answer.status();
    let mut headers = HeaderMap::new();
    for (name, value) in answer.headers() {
        if !["content-length", "transfer-encoding", "connection"].contains(&name.as_str()) {
            headers.insert(name.clone(), value.clone());
        }
    }
    let bytes = answer.bytes().await.unwrap_or_default();
    if key.0 == "dynamodb" && status.is_success() {
        let (read, write) = capacity(&key.1, &body, &bytes);
        let mut units = s.units.lock().expect("units");
        let entry = units.entry(key.1.clone()).or_default();
        entry.0 += read;
        entry.1 += write;
    }
    (status, headers, Body::from(bytes)).into_response()
}

/// The service named in the SigV4 credential scope (`Credential=AK/date/region/SERVICE/...`).
fn service(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|auth| auth.split("Credential=").nth(1))
        .and_then(|scope| scope.split('/').nth(3))
        .unwrap_or("unknown")
        .to_owned()
}

fn operation(
    method: &Method,
    headers: &HeaderMap,
    path: &str,
    query: Option<&str>,
    body: &[u8],
) -> String {
    if let Some(target) = headers.get("x-amz-target").and_then(|v| v.to_str().ok()) {
        return target.rsplit('.').next().unwrap_or(target).to_owned();
    }
    let form = std::str::from_utf8(body).unwrap_or_default();
    for pairs in [query.unwrap_or_default(), form] {
        if let Some(action) = pairs.split('&').find_map(|p| p.strip_prefix("Action=")) {
            return action.to_owned();
        }
    }
    lambda_operation(method, path)
}

/// The Lambda REST API's operation for a method and path.
fn lambda_operation(method: &Method, path: &str) -> String {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let name = match (method.as_str(), segments.as_slice()) {
        ("POST", [_, "functions"]) => "CreateFunction",
        ("GET", [_, "functions", _]) => "GetFunction",
        ("PUT", [_, "functions", _, "code"]) => "UpdateFunctionCode",
        ("GET", [_, "functions", _, "configuration"]) => "GetFunctionConfiguration",
        ("PUT", [_, "functions", _, "configuration"]) => "UpdateFunctionConfiguration",
        ("POST", [_, "functions", _, "versions"]) => "PublishVersion",
        ("GET", [_, "functions", _, "versions"]) => "ListVersionsByFunction",
        ("POST", [_, "functions", _, "aliases"]) => "CreateAlias",
        ("GET", [_, "functions", _, "aliases", _]) => "GetAlias",
        ("PUT", [_, "functions", _, "aliases", _]) => "UpdateAlias",
        ("DELETE", [_, "functions", _, "aliases", _]) => "DeleteAlias",
        ("POST", [_, "tags", ..]) => "TagResource",
        ("GET", [_, "tags", ..]) => "ListTags",
        _ => return format!("{method} {path}"),
    };
    name.to_owned()
}

/// (read units, write units) one DynamoDB request consumed, from its request and response.
fn capacity(operation: &str, request: &[u8], response: &[u8]) -> (u64, u64) {
    let json = |b: &[u8]| serde_json::from_slice::<serde_json::Value>(b).unwrap_or_default();
    let kb = |size: usize, unit: usize| size.div_ceil(unit).max(1) as u64;
    match operation {
        "PutItem" => (0, kb(item_size(&json(request)["Item"]), 1024)),
        "TransactWriteItems" => {
            let writes = json(request)["TransactItems"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .map(|i| 2 * kb(item_size(&i["Put"]["Item"]), 1024))
                        .sum()
                })
                .unwrap_or(0);
            (0, writes)
        }
        "GetItem" => (kb(item_size(&json(response)["Item"]), 4096), 0),
        "Query" => {
            let size = json(response)["Items"]
                .as_array()
                .map(|items| items.iter().map(item_size).sum())
                .unwrap_or(0);
            (kb(size, 4096), 0)
        }
        "BatchGetItem" => {
            let reads = json(response)["Responses"]
                .as_object()
                .map(|tables| {
                    tables
                        .values()
                        .filter_map(|t| t.as_array())
                        .flatten()
                        .map(|item| kb(item_size(item), 4096))
                        .sum()
                })
                .unwrap_or(0);
            (reads, 0)
        }
        _ => (0, 0),
    }
}

/// An item's size as DynamoDB counts it: each attribute's name plus its value.
fn item_size(item: &serde_json::Value) -> usize {
    item.as_object().map_or(0, |attrs| {
        attrs
            .iter()
            .map(|(name, value)| name.len() + value_size(value))
            .sum()
    })
}

fn value_size(value: &serde_json::Value) -> usize {
    let Some((kind, v)) = value.as_object().and_then(|o| o.iter().next()) else {
        return 0;
    };
    match (kind.as_str(), v) {
        ("S", serde_json::Value::String(s)) => s.len(),
        ("N", serde_json::Value::String(n)) => n.len().div_ceil(2) + 1,
        ("B", serde_json::Value::String(b)) => b.len() * 3 / 4,
        ("BOOL" | "NULL", _) => 1,
        ("M", m) => 3 + item_size(m),
        ("L", serde_json::Value::Array(l)) => {
            3 + l.iter().map(|v| 1 + value_size(v)).sum::<usize>()
        }
        (_, serde_json::Value::Array(set)) => set.iter().map(|v| v.to_string().len()).sum(),
        _ => 0,
    }
}
