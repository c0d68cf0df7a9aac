//! One path through the real Lambda Runtime API. `cargo lambda watch --only-lambda-apis` (the
//! pinned cargo-lambda from PyPI, found through `GANNET_CARGO_LAMBDA`) emulates Lambda on
//! loopback, and the `webhook`, `trigger`, `plan` and `stage` binaries built for this test run
//! under it as Lambda runs them: each polls the Runtime API for its next invocation.
//!
//! The test plays GitHub and the SQS event source mappings, over HTTP only:
//! - a signed push goes to the `webhook` function's Function URL route (`/lambda-url/webhook/`);
//! - messages received from moto's SQS become real-shaped SQS events, invoked through the
//!   Invoke API route (`/2015-03-31/functions/<name>/invocations`); the records the partial
//!   batch response does not name are deleted, as the event source mapping does;
//! - until the app's deployment (two `WAIT 0s` stages) is SUCCESS in the DynamoDB store.
//!
//! One batch carries a bad record and a record the function cannot settle; the response that
//! comes back over the Runtime API names only the latter.
//!
//! A second path: `apps diff` through the `api` function, which has only the plugins' planning
//! faces, answered by the `drift` function over the Invoke API, reading the live state on moto;
//! a commit off the branch (409), or a viewer's at any commit but the head (403), is refused
//! by the api function, and the drift function is not invoked.
//!
//! A third: the api function answers only events from its own HTTP API (`GANNET_API_ID` in
//! `GANNET_ACCOUNT_ID`); a forged event is refused, logged, and stores nothing. And it serves
//! the web console it embeds.
//!
//! Needs moto (`GANNET_MOTO_ENDPOINT`) and cargo-lambda (`GANNET_CARGO_LAMBDA`); `make test`
//! sets both, and without them the test fails saying how to get them.

#[path = "../../tests/lambda_moto/mod.rs"]
mod lambda_moto;
// Shared with lambda_e2e.rs: moto's endpoint, unique names, the git repository, the push.
mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, Message, MessageSystemAttributeName};
use gannet_aws::{
    provision, DynamoStore, ProvisionOptions, Provisioned, SqsOptions, SqsQueue, StoreOptions,
    SystemClock,
};
use gannet_domain::deployment::{Deployment, DeploymentStatus, StageStatus};
use gannet_domain::ports::{DeploymentFilter, QueueName, Store};
use serde_json::{json, Value};
use support::{moto_endpoint, push_payload, record, sdk_on, unique, Repo, REGION, SECRET};

const APP: &str = "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: web\n  pipeline:\n    stages:\n      - name: WAIT\n        with: {duration: 0s}\n      - name: WAIT\n        with: {duration: 0s}\n";
/// A record no handler can decode: it goes to the dead-letter queue with its reason.
const BAD_RECORD: &str = "this is not a gannet message";
/// The id of a record without a receipt handle, which the function cannot settle.
const UNSETTLED_ID: &str = "no-receipt-handle";
/// The functions under the emulator, with their binaries.
const FUNCTIONS: [(&str, &str); 4] = [
    ("webhook", env!("CARGO_BIN_EXE_webhook")),
    ("trigger", env!("CARGO_BIN_EXE_trigger")),
    ("plan", env!("CARGO_BIN_EXE_plan")),
    ("stage", env!("CARGO_BIN_EXE_stage")),
];
/// The SQS consumers, in the order a deployment moves through them.
const CONSUMERS: [(QueueName, &str); 3] = [
    (QueueName::Trigger, "trigger"),
    (QueueName::Plan, "plan"),
    (QueueName::Stage, "stage"),
];

/// Processes started by the test: killed by PID and reaped when this drops, on a panic too
/// (then their logs are printed).
struct Processes {
    logs: tempfile::TempDir,
    running: Vec<(String, Child)>,
}

impl Processes {
    fn new() -> Self {
        Self {
            logs: tempfile::tempdir().expect("tempdir for logs"),
            running: Vec::new(),
        }
    }

    fn log_path(&self, name: &str) -> PathBuf {
        self.logs.path().join(format!("{name}.log"))
    }

    /// Starts `command` with stdout and stderr in `<name>.log`.
    fn spawn(&mut self, name: &str, mut command: Command) {
        let log = std::fs::File::create(self.log_path(name)).expect("log file");
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        self.running.push((name.to_owned(), child));
    }

    /// Panics (with the logs) if a process has exited.
    fn assert_alive(&mut self) {
        for (name, child) in &mut self.running {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("{name} exited ({status})");
            }
        }
    }

    /// Sends SIGTERM to `name` (by its PID) and waits for it to exit; `None` if it did not
    /// within `limit`.
    async fn terminate(&mut self, name: &str, limit: Duration) -> Option<ExitStatus> {
        let (_, child) = self
            .running
            .iter_mut()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no process {name}"));
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -TERM {name}");
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.log_path(name)).unwrap_or_default()
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        // The functions before the emulator they poll.
        for (_, child) in self.running.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            let mut err = std::io::stderr().lock();
            for (name, _) in &self.running {
                let log = self.log(name);
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                let _ = writeln!(err, "---- {name} (last 40 lines) ----");
                for line in tail.into_iter().rev() {
                    let _ = writeln!(err, "{line}");
                }
            }
        }
    }
}

/// The pinned cargo-lambda; a loud failure (never a skip) without it.
fn cargo_lambda() -> PathBuf {
    let path = std::env::var_os("GANNET_CARGO_LAMBDA").unwrap_or_else(|| {
        panic!(
            "GANNET_CARGO_LAMBDA is not set: this test runs the functions under `cargo lambda watch`. \
             Run `make test`, or `make lambda-ensure` and set GANNET_CARGO_LAMBDA to the path \
             `scripts/cargo-lambda.sh path` prints"
        )
    });
    let path = PathBuf::from(path);
    assert!(
        path.is_file(),
        "GANNET_CARGO_LAMBDA={} does not exist; run `make lambda-ensure`",
        path.display()
    );
    path
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

/// The test's side of AWS and of the emulator.
struct Harness {
    sqs: aws_sdk_sqs::Client,
    provisioned: Provisioned,
    store: DynamoStore,
    http: reqwest::Client,
    emulator: String,
}

impl Harness {
    /// Stores the app `id` as the trigger would have recorded it.
    async fn put_app(&self, id: &str, name: &str, kind: &str) {
        let id = gannet_domain::AppId::parse(id).expect("app id");
        let app = gannet_domain::app::App::new(
            id,
            name.into(),
            kind.into(),
            gannet_domain::duration::Millis(1),
        );
        self.store
            .apply(gannet_domain::ports::Changes {
                writes: vec![gannet_domain::ports::Write::PutApp {
                    app: Box::new(app),
                    expect: gannet_domain::ports::Expect::Absent,
                }],
                send: Vec::new(),
            })
            .await
            .expect("the app is stored");
    }

    fn urls(&self, queue: QueueName) -> &gannet_aws::QueueUrls {
        &self.provisioned.queues[&queue]
    }

    /// Invokes `function` with `event` through the Invoke API; returns its response.
    async fn invoke(&self, function: &str, event: &Value) -> Value {
        let (status, text) = self.invoke_raw(function, event).await;
        assert_eq!(status, 200, "invoking {function}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{function} answered {text:?}: {e}"))
    }

    /// Invokes `function` with `event`; returns the Invoke API's status and body as they are
    /// (a function error included).
    async fn invoke_raw(&self, function: &str, event: &Value) -> (u16, String) {
        let url = format!(
            "{}/2015-03-31/functions/{function}/invocations",
            self.emulator
        );
        let res = self
            .http
            .post(&url)
            .json(event)
            .send()
            .await
            .unwrap_or_else(|e| panic!("invoking {function}: {e}"));
        let status = res.status().as_u16();
        (status, res.text().await.unwrap_or_default())
    }

    /// Receives up to ten messages from `url` with every attribute an SQS event carries.
    async fn receive(&self, url: &str, wait_seconds: i32) -> Vec<Message> {
        self.sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(wait_seconds)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .expect("receive from moto")
            .messages
            .unwrap_or_default()
    }

    /// Deletes the records a batch response did not name, as the event source mapping does.
    async fn delete_done(&self, queue: QueueName, records: &[Value], response: &Value) {
        let failed = failures(response);
        let entries: Vec<DeleteMessageBatchRequestEntry> = records
            .iter()
            .filter(|r| !failed.iter().any(|id| r["messageId"] == id.as_str()))
            .filter_map(|r| r["receiptHandle"].as_str())
            .enumerate()
            .map(|(i, handle)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(format!("e{i}"))
                    .receipt_handle(handle)
                    .build()
                    .expect("delete entry")
            })
            .collect();
        if entries.is_empty() {
            return;
        }
        // An entry the function already deleted (dead-lettered, forwarded) may fail; as for
        // the event source mapping, that does not matter.
        self.sqs
            .delete_message_batch()
            .queue_url(&self.urls(queue).queue)
            .set_entries(Some(entries))
            .send()
            .await
            .expect("delete batch");
    }

    /// One round of the event source mappings: each consumer gets what its queue holds.
    /// Returns how many records were delivered.
    async fn pump(&self) -> usize {
        let mut delivered = 0;
        for (queue, function) in CONSUMERS {
            let messages = self.receive(&self.urls(queue).queue, 0).await;
            if messages.is_empty() {
                continue;
            }
            let records: Vec<Value> = messages
                .iter()
                .map(|m| record(&self.urls(queue).queue, m))
                .collect();
            let response = self.invoke(function, &json!({ "Records": records })).await;
            assert_eq!(
                failures(&response),
                Vec::<String>::new(),
                "{function} failed records: {response}"
            );
            self.delete_done(queue, &records, &response).await;
            delivered += records.len();
        }
        delivered
    }
}

/// The message ids a partial batch response names.
fn failures(response: &Value) -> Vec<String> {
    response["batchItemFailures"]
        .as_array()
        .unwrap_or_else(|| panic!("not a partial batch response: {response}"))
        .iter()
        .map(|f| f["itemIdentifier"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Starts the emulator on a free port (a few tries, as another process may take the port).
async fn start_emulator(procs: &mut Processes, cargo_lambda: &Path) -> u16 {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    for attempt in 1..=3 {
        let port = free_port();
        let mut command = Command::new(cargo_lambda);
        command
            .args([
                "lambda",
                "watch",
                "--only-lambda-apis",
                "--invoke-address",
                "127.0.0.1",
            ])
            .args(["--invoke-port", &port.to_string()])
            .current_dir(root);
        let name = format!("emulator-{attempt}");
        procs.spawn(&name, command);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return port;
            }
            let exited = procs
                .running
                .last_mut()
                .and_then(|(_, c)| c.try_wait().ok().flatten());
            if exited.is_some() {
                eprintln!("emulator exited on port {port}: {}", procs.log(&name));
                break;
            }
            assert!(
                Instant::now() < deadline,
                "cargo lambda watch did not listen on {addr} within 60 s: {}",
                procs.log(&name)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    panic!("cargo lambda watch did not start");
}

/// Starts `function` polling the emulator's Runtime API, with gannet's environment.
fn start_function(
    procs: &mut Processes,
    (name, binary): (&str, &str),
    port: u16,
    gannet_env: &[(&str, String)],
) {
    let mut command = Command::new(binary);
    command.env_clear();
    for keep in ["PATH", "HOME"] {
        if let Some(value) = std::env::var_os(keep) {
            command.env(keep, value);
        }
    }
    command
        // What `cargo lambda watch` gives the functions it starts itself.
        .env("AWS_LAMBDA_FUNCTION_NAME", name)
        .env("AWS_LAMBDA_FUNCTION_VERSION", "1")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "4096")
        .env(
            "AWS_LAMBDA_RUNTIME_API",
            format!("http://127.0.0.1:{port}/.rt/{name}"),
        )
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("RUST_LOG", "info");
    for (key, value) in gannet_env {
        command.env(key, value);
    }
    if name == "webhook" {
        command.env("GANNET_WEBHOOK_SECRET", SECRET);
    }
    procs.spawn(name, command);
}

/// Provisions a table and queues on moto, commits the app, starts the emulator and the
/// functions under it.
async fn start() -> (Harness, Processes, Repo, String) {
    start_with(&[("apps/web/app.pipecd.yaml", APP)], &FUNCTIONS, &[]).await
}

/// [`start`] with these files in the first commit, these functions, and more environment.
async fn start_with(
    files: &[(&str, &str)],
    functions: &[(&str, &str)],
    extra_env: &[(&str, String)],
) -> (Harness, Processes, Repo, String) {
    let cargo_lambda = cargo_lambda();
    let endpoint = moto_endpoint();
    let sdk = sdk_on(&endpoint).await;
    let dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let provisioned = provision(&dynamodb, &sqs, &unique("rt"), &ProvisionOptions::default())
        .await
        .expect("provision table and queues on moto");
    let repo = Repo::new();
    let head = repo.commit(files, "add the app");

    let queues: BTreeMap<&str, Value> = provisioned
        .queues
        .iter()
        .map(|(q, urls)| {
            let urls = json!({"queue": urls.queue, "dead_letter": urls.dead_letter});
            (q.as_str(), urls)
        })
        .collect();
    let repos =
        json!([{"id": "shop", "url": repo.path().display().to_string(), "onFirstSight": "deploy"}]);
    let mut gannet_env = vec![
        ("AWS_REGION", REGION.to_owned()),
        ("AWS_ENDPOINT_URL", endpoint),
        ("GANNET_TABLE", provisioned.table.clone()),
        ("GANNET_QUEUES", json!(queues).to_string()),
        ("GANNET_REPOS", repos.to_string()),
        // The HTTP API whose events the api function answers (http_api_event's).
        ("GANNET_API_ID", "e2e".to_owned()),
        ("GANNET_ACCOUNT_ID", "123456789012".to_owned()),
    ];
    gannet_env.extend(extra_env.iter().cloned());
    let mut procs = Processes::new();
    let port = start_emulator(&mut procs, &cargo_lambda).await;
    // The api function invokes others through the emulator's Invoke API (AWS's variable for
    // one service's endpoint).
    gannet_env.push((
        "AWS_ENDPOINT_URL_LAMBDA",
        format!("http://127.0.0.1:{port}"),
    ));
    for function in functions {
        start_function(&mut procs, *function, port, &gannet_env);
    }

    let queue = SqsQueue::new(
        sqs.clone(),
        provisioned.queues.clone(),
        Arc::new(SystemClock),
        SqsOptions::default(),
    );
    let store = DynamoStore::new(
        dynamodb,
        provisioned.table.clone(),
        Arc::new(queue),
        StoreOptions::default(),
    );
    // Generous: on a loaded 2-core machine an api invocation that asks the drift function
    // (a checkout and a live read) has taken over 30 s.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("http client");
    let h = Harness {
        sqs,
        provisioned,
        store,
        http,
        emulator: format!("http://127.0.0.1:{port}"),
    };
    (h, procs, repo, head)
}

impl Harness {
    /// POSTs `body` to the webhook's Function URL route; returns (status, content type, JSON).
    async fn hook(&self, body: &str, signature: &str, delivery: &str) -> (u16, String, Value) {
        let res = self
            .http
            .post(format!("{}/lambda-url/webhook/", self.emulator))
            .header("content-type", "application/json")
            .header("x-github-event", "push")
            .header("x-github-delivery", delivery)
            .header("x-hub-signature-256", signature)
            .body(body.to_owned())
            .send()
            .await
            .unwrap_or_else(|e| panic!("webhook delivery {delivery}: {e}"));
        let status = res.status().as_u16();
        let content_type = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        (
            status,
            content_type,
            res.json().await.unwrap_or(Value::Null),
        )
    }

    /// Sends a bad record to the trigger queue, then invokes `trigger` with it, the queued
    /// push's record and a record without a receipt handle; returns the records and the
    /// partial batch response.
    async fn invoke_mixed_batch(&self) -> (Vec<Value>, Value) {
        let urls = self.urls(QueueName::Trigger).clone();
        self.sqs
            .send_message()
            .queue_url(&urls.queue)
            .message_body(BAD_RECORD)
            .send()
            .await
            .expect("send the bad record");
        let mut messages = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        while messages.len() < 2 {
            assert!(
                Instant::now() < deadline,
                "the trigger queue did not give both messages: {messages:?}"
            );
            messages.extend(self.receive(&urls.queue, 1).await);
        }
        let mut records: Vec<Value> = messages.iter().map(|m| record(&urls.queue, m)).collect();
        let mut unsettled = records[0].clone();
        unsettled["messageId"] = json!(UNSETTLED_ID);
        unsettled["body"] = json!("never handled");
        if let Some(fields) = unsettled.as_object_mut() {
            fields.remove("receiptHandle");
        }
        records.push(unsettled);
        let response = self.invoke("trigger", &json!({ "Records": records })).await;
        self.delete_done(QueueName::Trigger, &records, &response)
            .await;
        (records, response)
    }

    /// (body, reason) of what the trigger queue's DLQ holds.
    async fn dead_letters(&self) -> Vec<(String, String)> {
        let url = self.urls(QueueName::Trigger).dead_letter.clone();
        self.receive(&url, 1)
            .await
            .iter()
            .map(|m| {
                let reason = m
                    .message_attributes()
                    .and_then(|a| a.get("reason"))
                    .and_then(|r| r.string_value());
                let body = m.body().unwrap_or_default().to_owned();
                (body, reason.unwrap_or_default().to_owned())
            })
            .collect()
    }

    /// Plays the event source mappings until a deployment ends; returns it.
    async fn drive_to_end(&self, procs: &mut Processes) -> Deployment {
        let limit = Duration::from_secs(90);
        let deadline = Instant::now() + limit;
        loop {
            procs.assert_alive();
            let delivered = self.pump().await;
            let all = self
                .store
                .deployments(&DeploymentFilter::default())
                .await
                .expect("deployments from the store");
            if let Some(d) = all.iter().find(|d| d.status.is_terminal()) {
                assert_eq!(all.len(), 1, "one push, one deployment: {all:?}");
                return d.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no deployment ended within {limit:?}: {all:?}"
            );
            if delivered == 0 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_push_reaches_success_through_the_runtime_api() {
    let (h, mut procs, repo, head) = start().await;

    // GitHub's side: the webhook over the Function URL route, through lambda_http.
    let body = push_payload(&repo, &head);
    let signed = gannet_events::github::sign(SECRET.as_bytes(), body.as_bytes());
    let forged = gannet_events::github::sign(b"another secret", body.as_bytes());
    let cases = [
        ("bad signature", &forged, "d-bad", 401, "rejected"),
        ("signed push", &signed, "d-1", 202, "queued"),
        ("same delivery again", &signed, "d-1", 200, "duplicate"),
    ];
    for (case, signature, delivery, status, outcome) in cases {
        let (got, content_type, answer) = h.hook(&body, signature, delivery).await;
        assert_eq!(
            (got, answer["status"].as_str(), content_type.as_str()),
            (status, Some(outcome), "application/json"),
            "{case}: {answer}"
        );
    }

    // One batch: the queued push, a bad record, a record the function cannot settle.
    let (records, response) = h.invoke_mixed_batch().await;
    assert_eq!(records.len(), 3);
    assert_eq!(
        response,
        json!({"batchItemFailures": [{"itemIdentifier": UNSETTLED_ID}]}),
        "only the record without a receipt handle is reported failed"
    );
    let dead = h.dead_letters().await;
    assert!(
        matches!(dead.as_slice(), [(body, reason)] if body == BAD_RECORD && !reason.is_empty()),
        "the bad record is dead-lettered with its reason: {dead:?}"
    );

    // The event source mappings, until the deployment ends.
    let deployment = h.drive_to_end(&mut procs).await;
    assert_eq!(
        deployment.status,
        DeploymentStatus::Success,
        "{deployment:?}"
    );
    assert_eq!(deployment.commit.sha.to_string(), head);
    let stages: Vec<(&str, StageStatus)> = deployment
        .stages
        .iter()
        .filter(|s| !s.rollback)
        .map(|s| (s.name.as_str(), s.status))
        .collect();
    let wait_done = ("WAIT", StageStatus::Success);
    assert_eq!(stages, [wait_done, wait_done], "{deployment:?}");
    // Each function did its part (a message sent to the wrong consumer would be handled too).
    let work = [
        ("webhook", "push queued"),
        ("trigger", "push triggered"),
        ("plan", "deployment planned"),
        ("stage", "deployment finished"),
    ];
    for (name, line) in work {
        let log = procs.log(name);
        assert!(log.contains(line), "{name} logged {line:?}: {log}");
    }

    // Lambda's shutdown: the function registered its no-op extension with the emulator's
    // Extensions API (which makes Lambda send SIGTERM), and stops cleanly on SIGTERM.
    let log = procs.log("stage");
    assert!(
        !log.contains("no graceful shutdown"),
        "stage registered its extension: {log}"
    );
    let status = procs.terminate("stage", Duration::from_secs(10)).await;
    assert!(
        status.is_some_and(|s| s.success()),
        "stage exits cleanly on SIGTERM: {status:?}"
    );
    let log = procs.log("stage");
    assert!(
        log.contains("\"shutting down\""),
        "stage logs its shutdown: {log}"
    );
}

/// An HTTP API (payload format 2.0) event for `GET path?query`, IAM-authorised as API Gateway
/// sends it to the api function.
fn http_api_event(path: &str, query: &str) -> Value {
    json!({
        "version": "2.0",
        "routeKey": "ANY /{proxy+}",
        "rawPath": path,
        "rawQueryString": query,
        "headers": {"host": "e2e.execute-api.us-east-1.amazonaws.com"},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "e2e",
            "authorizer": {"iam": {"accessKey": "AKIA", "accountId": "123456789012", "callerId": "AIDA", "principalOrgId": null, "userArn": support::OPS_PRINCIPAL, "userId": "AIDA"}},
            "domainName": "e2e.execute-api.us-east-1.amazonaws.com",
            "http": {"method": "GET", "path": path, "protocol": "HTTP/1.1", "sourceIp": "10.0.0.1", "userAgent": "e2e"},
            "requestId": unique("req"),
            "routeKey": "ANY /{proxy+}",
            "stage": "$default",
            "time": "01/Jan/2025:00:00:00 +0000",
            "timeEpoch": 1735689600000u64
        },
        "isBase64Encoded": false
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_diff_through_the_api_function_is_answered_by_the_drift_function() {
    let function = lambda_moto::unique("diff");
    let zip = String::from_utf8(lambda_moto::zip_bytes("v1")).expect("zip bytes are text");
    let manifest = format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: LambdaFunction\nspec:\n  name: {function}\n  role: {}\n  handler: index.handler\n  runtime: python3.12\n  memory: 128\n  timeout: 10\n  zipFile: fn.zip\n",
        lambda_moto::ROLE
    );
    let app = "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: fn\n";
    let plugins = json!({"lambda": {"deployTargets": [{"name": "local", "region": REGION, "endpoint": moto_endpoint()}]}});
    let (h, mut procs, repo, head) = start_with(
        &[
            ("apps/fn/app.pipecd.yaml", app),
            ("apps/fn/function.yaml", &manifest),
            ("apps/fn/fn.zip", &zip),
        ],
        &[
            ("api", env!("CARGO_BIN_EXE_api")),
            ("drift", env!("CARGO_BIN_EXE_drift")),
        ],
        &[
            ("GANNET_PLUGINS", plugins.to_string()),
            ("GANNET_DIFF_FUNCTION", "drift".to_owned()),
            (
                "GANNET_CALLER_NAMES",
                json!({
                    support::OPS_PRINCIPAL: {"name": "ops", "role": "admin"},
                    VIEWER_PRINCIPAL: {"name": "vic", "role": "viewer"}
                })
                .to_string(),
            ),
        ],
    )
    .await;
    // The app as the trigger would have recorded it.
    h.put_app("shop:apps/fn/app.pipecd.yaml", "fn", "LambdaApp")
        .await;

    let answer = h
        .invoke(
            "api",
            &http_api_event("/api/v1/apps/fn/diff", &format!("commit={head}")),
        )
        .await;
    procs.assert_alive();
    assert_eq!(answer["statusCode"], 200, "{answer}\n{}", procs.log("api"));
    let body: Value = serde_json::from_str(answer["body"].as_str().unwrap_or_default())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {answer}"));
    // The function is not on moto yet: the drift function read that (with the lambda plugin
    // whole; the api function's planning face cannot read live state at all).
    assert_eq!(body["diff"]["status"], "OUT_OF_SYNC", "{body}");
    assert_eq!(body["diff"]["commit"], head.as_str(), "{body}");
    let fields: Vec<&str> = body["diff"]["drift"]
        .as_array()
        .expect("drift")
        .iter()
        .filter_map(|f| f["field"].as_str())
        .collect();
    assert_eq!(fields, ["function"], "{body}");
    let drift_log = procs.log("drift");
    assert!(drift_log.contains("\"started\""), "{drift_log}");
    let asked = |procs: &Processes| procs.log("drift").matches("diff requested").count();
    assert_eq!(
        asked(&procs),
        1,
        "the drift function logs each diff it is asked for"
    );

    // A commit on a feature branch only: refused by the api function (409), and by role for a
    // viewer (403), before the drift function is asked: it runs no code of that commit.
    let feature = feature_commit(repo.path(), &head);
    let off_branch = http_api_event("/api/v1/apps/fn/diff", &format!("commit={feature}"));
    let mut as_viewer = off_branch.clone();
    as_viewer["requestContext"]["authorizer"]["iam"]["userArn"] = json!(VIEWER_PRINCIPAL);
    for (event, status, words) in [
        (&off_branch, 409, "is not on branch main"),
        (&as_viewer, 403, "needs the role deployer or admin"),
    ] {
        let answer = h.invoke("api", event).await;
        assert_eq!(answer["statusCode"], status, "{answer}");
        let body = answer["body"].as_str().unwrap_or_default();
        assert!(body.contains(words), "{body}");
    }
    procs.assert_alive();
    assert_eq!(asked(&procs), 1, "the drift function was not invoked");

    // An unknown commit is refused before the drift function is asked.
    let answer = h
        .invoke(
            "api",
            &http_api_event(
                "/api/v1/apps/fn/diff",
                &format!("commit={}", "0".repeat(40)),
            ),
        )
        .await;
    assert_eq!(answer["statusCode"], 404, "{answer}");
    assert_eq!(asked(&procs), 1, "the drift function was not invoked");
}

/// The api binary under the Runtime API answers only its own HTTP API's events: one naming
/// another API or account (claiming an admin) is answered 403 in JSON and logged, one that is
/// no HTTP API event at all is refused by the runtime before any handler runs, and neither
/// stores anything; the same sync through the stack's API is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_function_answers_only_its_own_http_api() {
    let (h, mut procs, _repo, _head) = start_with(
        &[("apps/web/app.pipecd.yaml", APP)],
        &[("api", env!("CARGO_BIN_EXE_api"))],
        &[(
            "GANNET_CALLER_NAMES",
            json!({support::OPS_PRINCIPAL: {"name": "ops", "role": "admin"}}).to_string(),
        )],
    )
    .await;
    h.put_app("shop:apps/web/app.pipecd.yaml", "web", "KubernetesApp")
        .await;
    let stored = |h: &Harness| {
        let store = h.store.clone();
        async move {
            store
                .deployments(&DeploymentFilter::default())
                .await
                .expect("deployments from the store")
                .len()
        }
    };
    let mut sync = http_api_event("/api/v1/apps/web/sync", "");
    sync["requestContext"]["http"]["method"] = json!("POST");
    sync["headers"]["content-type"] = json!("application/json");
    sync["body"] = json!("{}");
    let forged = |change: &dyn Fn(&mut Value)| {
        let mut event = sync.clone();
        change(&mut event);
        event
    };
    for (what, event) in [
        (
            "another API",
            forged(&|e| e["requestContext"]["apiId"] = json!("a1b2c3d4e5")),
        ),
        (
            "another account",
            forged(&|e| e["requestContext"]["accountId"] = json!("210987654321")),
        ),
    ] {
        let answer = h.invoke("api", &event).await;
        assert_eq!(answer["statusCode"], 403, "{what}: {answer}");
        let body: Value = serde_json::from_str(answer["body"].as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {answer}"));
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|e| e.contains("only requests through its own HTTP API")),
            "{what}: {body}"
        );
    }
    let refusals = |procs: &Processes| {
        procs
            .log("api")
            .matches("refused an event that did not come from this stack's HTTP API")
            .count()
    };
    assert_eq!(refusals(&procs), 2, "each refusal is logged once");
    assert!(
        !procs.log("api").contains(support::OPS_PRINCIPAL),
        "the principal an event claims is not logged"
    );
    // No API Gateway context, or no HTTP API event at all: the runtime refuses it (lambda_http
    // cannot read it as a request), the handler never runs, and the function goes on.
    for (what, event) in [
        (
            "no requestContext",
            forged(&|e| {
                e.as_object_mut().map(|o| o.remove("requestContext"));
            }),
        ),
        (
            "a diff request",
            json!({"diff": {"app": "shop:apps/web/app.pipecd.yaml", "commit": "0".repeat(40)}}),
        ),
    ] {
        let (status, text) = h.invoke_raw("api", &event).await;
        assert!(
            text.contains("errorType") && !text.contains("statusCode"),
            "{what}: {status} {text}"
        );
        procs.assert_alive();
    }
    assert_eq!(
        procs
            .log("api")
            .matches("The handler will not be called")
            .count(),
        2,
        "{}",
        procs.log("api")
    );
    assert_eq!(stored(&h).await, 0, "no refused event stored anything");
    // The same sync from the stack's API is answered, by the admin it names.
    let answer = h.invoke("api", &sync).await;
    assert_eq!(answer["statusCode"], 200, "{answer}\n{}", procs.log("api"));
    assert_eq!(stored(&h).await, 1);
}

/// The api binary serves the web console it embeds (`make console` builds it): the page for
/// each console route and its files under `/assets/`, through the stack's API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_function_serves_the_web_console_it_embeds() {
    let (h, mut procs, _repo, _head) = start_with(
        &[("apps/web/app.pipecd.yaml", APP)],
        &[("api", env!("CARGO_BIN_EXE_api"))],
        &[],
    )
    .await;
    for (path, content_type, holds) in [
        ("/", "text/html", "/assets/app.js"),
        ("/deployments/d-1", "text/html", "/assets/app.js"),
        ("/assets/app.js", "text/javascript", ""),
        ("/assets/app.css", "text/css", ""),
    ] {
        let answer = h.invoke("api", &http_api_event(path, "")).await;
        assert_eq!(
            answer["statusCode"],
            200,
            "{path}: {answer}\n{}",
            procs.log("api")
        );
        let headers = &answer["headers"];
        assert!(
            headers["content-type"]
                .as_str()
                .is_some_and(|t| t.starts_with(content_type)),
            "{path}: {headers}"
        );
        assert!(
            headers["content-security-policy"].is_string(),
            "{path}: {headers}"
        );
        let body = answer["body"].as_str().unwrap_or_default();
        assert!(!body.is_empty() && body.contains(holds), "{path}: {answer}");
    }
    procs.assert_alive();
}

/// An IAM principal the api function maps to a viewer.
const VIEWER_PRINCIPAL: &str = "arn:aws:iam::123456789012:user/ops/vic";

/// Commits a change to the function's manifest on a new branch `feature` from `base`, and
/// goes back to `main`; returns the feature commit.
fn feature_commit(repo: &Path, base: &str) -> String {
    let git = |args: &[&str]| support::git(repo, args);
    git(&["checkout", "-q", "-b", "feature", base]);
    git(&["commit", "-q", "--allow-empty", "-m", "feature only"]);
    let feature = git(&["rev-parse", "HEAD"]);
    git(&["checkout", "-q", "main"]);
    feature
}
