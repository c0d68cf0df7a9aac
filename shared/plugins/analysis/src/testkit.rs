//! Test support (feature `test-util`): a real Prometheus server, on loopback, scraping an
//! [`Exporter`] whose gauges the test sets.
//!
//! The server is the pinned build that `scripts/prometheus.sh` installs: its path comes from
//! `GANNET_PROMETHEUS` (`make test` sets it), else from `scripts/prometheus.sh path` in this
//! checkout. Install it with `make prometheus-ensure`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use axum::Router;
use serde_json::Value;

/// How to get the Prometheus binary, for error messages.
const INSTALL: &str = "install the pinned Prometheus with `make prometheus-ensure` \
    (scripts/prometheus.sh ensure), or set GANNET_PROMETHEUS to a prometheus binary";
/// How long Prometheus may take to answer `/-/ready` (it usually takes well under a second).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// The pause between two polls of Prometheus.
const POLL: Duration = Duration::from_millis(100);
/// Starts to try when another process takes the chosen port before Prometheus binds it.
const START_ATTEMPTS: usize = 3;
/// The scrape job's name: every scraped series carries `job="gannet-test"`.
pub const JOB: &str = "gannet-test";

/// A series: the metric name and its labels, sorted by label name.
type Series = (String, Vec<(String, String)>);
type Values = Arc<Mutex<BTreeMap<Series, f64>>>;

/// An HTTP server on loopback serving `/metrics` in Prometheus's text format: one gauge line
/// per series set with [`Exporter::set`], at its latest value when it is scraped. The server
/// stops when the exporter is dropped.
pub struct Exporter {
    addr: SocketAddr,
    values: Values,
    server: tokio::task::JoinHandle<()>,
}

impl Exporter {
    /// Starts the server on a free 127.0.0.1 port (in the current Tokio runtime).
    pub async fn start() -> Result<Exporter, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("exporter: binding 127.0.0.1:0: {e}"))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("exporter: local address: {e}"))?;
        let values = Values::default();
        let app = Router::new()
            .route("/metrics", get(metrics))
            .with_state(Arc::clone(&values));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Exporter {
            addr,
            values,
            server,
        })
    }

    /// Sets the gauge `name{labels}` to `value` (label names must be distinct; their order does
    /// not matter). Prometheus sees the new value at its next scrape.
    pub fn set(&self, name: &str, labels: &[(&str, &str)], value: f64) {
        let mut labels: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        labels.sort();
        lock(&self.values).insert((name.to_string(), labels), value);
    }

    /// The address to scrape (pass it to [`Prometheus::start`]).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// An HTTP endpoint on 127.0.0.1 answering `GET /health` with the status the test sets (in
/// `status`) and the body `ok: serving`, for HTTP checks. It runs as long as the Tokio runtime.
pub async fn health_endpoint(status: Arc<Mutex<u16>>) -> SocketAddr {
    async fn health(
        State(status): State<Arc<Mutex<u16>>>,
    ) -> (axum::http::StatusCode, &'static str) {
        let code = *status.lock().unwrap_or_else(PoisonError::into_inner);
        let code = axum::http::StatusCode::from_u16(code)
            .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
        (code, "ok: serving")
    }
    let app = Router::new()
        .route("/health", get(health))
        .with_state(status);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

fn lock(values: &Mutex<BTreeMap<Series, f64>>) -> MutexGuard<'_, BTreeMap<Series, f64>> {
    values.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn metrics(
    State(values): State<Values>,
) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    let body = render(&lock(&values));
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}

/// The exposition text: a `# TYPE` line per metric name, then a line per series.
fn render(values: &BTreeMap<Series, f64>) -> String {
    let mut out = String::new();
    let mut previous: Option<&str> = None;
    for ((name, labels), value) in values {
        if previous != Some(name.as_str()) {
            let _ = writeln!(out, "# TYPE {name} gauge");
            previous = Some(name);
        }
        out.push_str(name);
        if !labels.is_empty() {
            let labels: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
                .collect();
            let _ = write!(out, "{{{}}}", labels.join(","));
        }
        let _ = writeln!(out, " {}", format_value(*value));
    }
    out
}

fn escape_label(value: &str) -> String {
    value
        .replace('\\', r"\\")
        .replace('"', r#"\""#)
        .replace('\n', r"\n")
}

fn format_value(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_string()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        value.to_string()
    }
}

/// A Prometheus server on a free 127.0.0.1 port, scraping its targets every second as job
/// [`JOB`], with its configuration, storage and log in a temporary directory. Dropping it
/// kills the process and removes the directory.
pub struct Prometheus {
    child: Child,
    url: String,
    http: reqwest::Client,
    // Removed on drop, after the process is gone (fields drop after `Drop::drop`).
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (loopback addresses; none is fine) and waits until
    /// it is ready (a fraction of a second). Prometheus 2.42 applies its scrape targets on a
    /// fixed 5-second tick, so the first samples arrive 5 to 6 seconds after the start: use
    /// [`Prometheus::wait_for_sample`], with a timeout of 15 seconds or more, before querying.
    pub async fn start(targets: &[SocketAddr]) -> Result<Prometheus, String> {
        if let Some(target) = targets.iter().find(|t| !t.ip().is_loopback()) {
            return Err(format!(
                "prometheus: target {target} is not a loopback address"
            ));
        }
        let binary = binary().await?;
        let dir = tempfile::Builder::new()
            .prefix("gannet-prometheus-test.")
            .tempdir()
            .map_err(|e| format!("prometheus: creating a temporary directory: {e}"))?;
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, config_yaml(targets))
            .map_err(|e| format!("prometheus: writing {}: {e}", config.display()))?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("prometheus: HTTP client: {e}"))?;

        let mut failure = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port()?;
            let url = format!("http://127.0.0.1:{port}");
            let mut child = spawn(&binary, dir.path(), port)?;
            match wait_ready(&mut child, &http, &url, &config).await {
                Ok(()) => {
                    return Ok(Prometheus {
                        child,
                        url,
                        http,
                        _dir: dir,
                    })
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let log = log_tail(dir.path());
                    failure = format!(
                        "prometheus ({}): {e}; the end of its log:\n{log}",
                        binary.display()
                    );
                    if !log.contains("address already in use") {
                        break;
                    }
                }
            }
        }
        Err(failure)
    }

    /// The server's base URL, `http://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Runs the instant query `query` until a sample in its result (a vector's or a scalar's)
    /// has a value that `predicate` accepts, and returns that value; fails once `timeout` has
    /// passed, or at once when Prometheus rejects the query.
    pub async fn wait_for_sample(
        &self,
        query: &str,
        predicate: impl Fn(f64) -> bool,
        timeout: Duration,
    ) -> Result<f64, String> {
        let deadline = Instant::now() + timeout;
        let mut last;
        loop {
            let response = self
                .http
                .get(format!("{}/api/v1/query", self.url))
                .query(&[("query", query)])
                .send()
                .await;
            match response {
                Ok(response) => match response.json::<Value>().await {
                    Ok(body) if body["status"] != "success" => {
                        return Err(format!("prometheus: query {query:?} failed: {body}"));
                    }
                    Ok(body) => {
                        if let Some(value) = sample_values(&body["data"]).find(|v| predicate(*v)) {
                            return Ok(value);
                        }
                        last = body.to_string();
                    }
                    Err(e) => last = e.to_string(),
                },
                Err(e) => last = e.to_string(),
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "prometheus: no sample of {query:?} matched within {timeout:?}; last answer: {last}"
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The binary: `GANNET_PROMETHEUS`, else what `scripts/prometheus.sh path` reports.
async fn binary() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("GANNET_PROMETHEUS").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(format!(
                "GANNET_PROMETHEUS={} is not a file; {INSTALL}",
                path.display()
            ));
        }
        return Ok(path);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|dir| dir.join("scripts/prometheus.sh"))
        .find(|script| script.is_file())
        .ok_or_else(|| {
            format!(
                "GANNET_PROMETHEUS is not set and scripts/prometheus.sh was not found; {INSTALL}"
            )
        })?;
    let output = tokio::process::Command::new(&script)
        .arg("path")
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("running {} path: {e}; {INSTALL}", script.display()))?;
    if !output.status.success() {
        // The script's message says how to install.
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("{} path: {}", script.display(), stderr.trim()));
    }
    let dir = String::from_utf8_lossy(&output.stdout).trim().to_string();
    Ok(PathBuf::from(dir).join("prometheus"))
}

fn config_yaml(targets: &[SocketAddr]) -> String {
    let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
         scrape_configs:\n  - job_name: {JOB}\n    static_configs:\n      - targets: [{}]\n",
        targets.join(", ")
    )
}

/// A port that was free a moment ago (another process may take it before Prometheus does).
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|e| format!("prometheus: finding a free port: {e}"))
}

/// Starts the process, its output to `prometheus.log` in `dir`. The console directories point
/// into `dir` so that nothing under /etc/prometheus is read (Debian's build serves its web UI
/// from /usr/share/prometheus, which the API does not need).
fn spawn(binary: &Path, dir: &Path, port: u16) -> Result<Child, String> {
    let log_path = dir.join("prometheus.log");
    let log = File::create(&log_path)
        .map_err(|e| format!("prometheus: creating {}: {e}", log_path.display()))?;
    let log_err = log
        .try_clone()
        .map_err(|e| format!("prometheus: {}: {e}", log_path.display()))?;
    let arg = |flag: &str, path: &str| format!("--{flag}={}", dir.join(path).display());
    Command::new(binary)
        .arg(arg("config.file", "prometheus.yml"))
        .arg(arg("storage.tsdb.path", "data"))
        .arg(arg("web.console.templates", "consoles"))
        .arg(arg("web.console.libraries", "console_libraries"))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| format!("prometheus: starting {}: {e}; {INSTALL}", binary.display()))
}

/// Polls `/-/ready` until it answers 200 (from this process), the process exits or
/// [`READY_TIMEOUT`] passes.
async fn wait_ready(
    child: &mut Child,
    http: &reqwest::Client,
    url: &str,
    config: &Path,
) -> Result<(), String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Err(format!("it exited ({status}) before it was ready")),
            Ok(None) => {}
            Err(e) => return Err(format!("waiting for it: {e}")),
        }
        if answers_ready(http, url, config).await {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "it was not ready on {url} within {READY_TIMEOUT:?}"
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}

/// True when the server at `url` is ready and is the one reading `config`, not another
/// server that took the port first.
async fn answers_ready(http: &reqwest::Client, url: &str, config: &Path) -> bool {
    let ready = http.get(format!("{url}/-/ready")).send().await;
    if !ready.is_ok_and(|response| response.status().is_success()) {
        return false;
    }
    let flags: Option<Value> = match http.get(format!("{url}/api/v1/status/flags")).send().await {
        Ok(response) => response.json().await.ok(),
        Err(_) => None,
    };
    flags.is_some_and(|flags| flags["data"]["config.file"] == config.display().to_string())
}

/// The last lines of the log in `dir`.
fn log_tail(dir: &Path) -> String {
    const LINES: usize = 30;
    match std::fs::read_to_string(dir.join("prometheus.log")) {
        Ok(log) => {
            let lines: Vec<&str> = log.lines().collect();
            if lines.is_empty() {
                return "(empty)".to_string();
            }
            lines[lines.len().saturating_sub(LINES)..].join("\n")
        }
        Err(e) => format!("(no log: {e})"),
    }
}

/// The sample values of an instant query's `data`: `[<time>, "<value>"]` pairs.
fn sample_values(data: &Value) -> impl Iterator<Item = f64> + '_ {
    let pairs: Vec<&Value> = match data["resultType"].as_str() {
        Some("vector") => data["result"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|sample| &sample["value"])
            .collect(),
        Some("scalar") => vec![&data["result"]],
        _ => Vec::new(),
    };
    pairs
        .into_iter()
        .filter_map(|pair| pair.get(1)?.as_str()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{SystemTime, UNIX_EPOCH};

    const WAIT: Duration = Duration::from_secs(30);
    const METRIC: &str = "gannet_test_latency_seconds";

    #[tokio::test]
    async fn the_exporter_serves_the_current_values() {
        let exporter = Exporter::start().await.expect("exporter starts");
        let url = format!("http://{}/metrics", exporter.addr());
        exporter.set("b_total", &[], 1.0);
        exporter.set(
            METRIC,
            &[("variant", "canary"), ("app", "a\"b\\c\nd")],
            0.25,
        );
        exporter.set(
            METRIC,
            &[("app", "x"), ("variant", "baseline")],
            f64::INFINITY,
        );
        let body = reqwest::get(&url).await.unwrap().text().await.unwrap();
        assert_eq!(
            body,
            "# TYPE b_total gauge\n\
             b_total 1\n\
             # TYPE gannet_test_latency_seconds gauge\n\
             gannet_test_latency_seconds{app=\"a\\\"b\\\\c\\nd\",variant=\"canary\"} 0.25\n\
             gannet_test_latency_seconds{app=\"x\",variant=\"baseline\"} +Inf\n"
        );

        // Values are read when scraped; the label order of `set` does not matter.
        exporter.set(METRIC, &[("variant", "baseline"), ("app", "x")], f64::NAN);
        let body = reqwest::get(&url).await.unwrap().text().await.unwrap();
        assert!(
            body.ends_with("{app=\"x\",variant=\"baseline\"} NaN\n"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn prometheus_scrapes_the_exporter() {
        let exporter = Exporter::start().await.expect("exporter starts");
        let labels = [("app", "demo"), ("variant", "canary")];
        exporter.set(METRIC, &labels, 0.25);
        let started = Instant::now();
        let prometheus = Prometheus::start(&[exporter.addr()])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let ready = started.elapsed();

        // A scalar result counts; a query Prometheus rejects fails at once.
        let two = prometheus
            .wait_for_sample("1 + 1", |v| v == 2.0, WAIT)
            .await;
        assert_eq!(two, Ok(2.0));
        let error = prometheus
            .wait_for_sample("sum(", |_| true, WAIT)
            .await
            .expect_err("a bad query fails");
        assert!(error.contains("bad_data"), "{error}");

        let query = format!("{METRIC}{{variant=\"canary\"}}");
        let seen = prometheus
            .wait_for_sample(&query, |v| v == 0.25, WAIT)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(seen, 0.25);
        eprintln!(
            "prometheus: ready after {ready:?}, first sample after {:?}",
            started.elapsed()
        );
        exporter.set(METRIC, &labels, 0.75);
        prometheus
            .wait_for_sample(&query, |v| v == 0.75, WAIT)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        prometheus
            .wait_for_sample(&format!("up{{job=\"{JOB}\"}}"), |v| v == 1.0, WAIT)
            .await
            .unwrap_or_else(|e| panic!("{e}"));

        // Now, to the millisecond (Prometheus rounds times to milliseconds).
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let end = now.as_millis() as f64 / 1000.0;
        let response = reqwest::Client::new()
            .get(format!("{}/api/v1/query_range", prometheus.url()))
            .query(&[
                ("query", query.as_str()),
                ("start", &(end - 60.0).to_string()),
                ("end", &end.to_string()),
                ("step", "1"),
            ])
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["status"], "success", "{body}");
        assert_eq!(body["data"]["resultType"], "matrix", "{body}");
        let result = body["data"]["result"]
            .as_array()
            .expect("result is an array");
        assert_eq!(result.len(), 1, "{body}");
        assert_eq!(
            result[0]["metric"],
            serde_json::json!({
                "__name__": METRIC,
                "app": "demo",
                "variant": "canary",
                "job": JOB,
                "instance": exporter.addr().to_string(),
            })
        );
        let values = result[0]["values"].as_array().expect("values is an array");
        let points: Vec<(f64, &str)> = values
            .iter()
            .map(|point| match point.as_array().map(Vec::as_slice) {
                Some([time, value]) => (
                    time.as_f64().expect("the time is a number"),
                    value.as_str().expect("the value is a string"),
                ),
                _ => panic!("a point is [time, value]: {point}"),
            })
            .collect();
        assert!(points.windows(2).all(|w| w[0].0 < w[1].0), "{body}");
        assert!(
            points.iter().all(|(t, _)| (end - 60.0..=end).contains(t)),
            "{body}"
        );
        assert!(points.iter().any(|(_, v)| *v == "0.25"), "{body}");
        assert_eq!(points.last().map(|p| p.1), Some("0.75"), "{body}");
    }

    #[tokio::test]
    async fn prometheus_scrapes_only_loopback() {
        let target: SocketAddr = "192.0.2.1:9100".parse().unwrap();
        let error = Prometheus::start(&[target]).await.err().expect("refused");
        assert!(error.contains("not a loopback address"), "{error}");
    }
}
