//! The end-to-end harness: a real git repository built in a tempdir, a real `gannet up`
//! process on a free loopback port, signed webhooks and JSON API calls over real HTTP.
//! Every process started here is killed by its PID when its handle drops.

#![allow(dead_code)] // each test file uses a different part of the harness

pub mod receiver;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const SECRET: &str = "e2e-webhook-secret";
pub const GITHUB: &str = "acme/shop";

/// The API tokens every test server trusts (from `GANNET_E2E_TOKENS`): one per person and role.
pub const ADMIN_TOKEN: &str = "e2e-admin-token-0000000000000000";
pub const TOKENS: &[(&str, &str, &str)] = &[
    ("admin", "admin", ADMIN_TOKEN),
    ("alice", "approver", "e2e-alice-token-000000000000000"),
    ("bob", "approver", "e2e-bob-token-00000000000000000"),
    ("mallory", "approver", "e2e-mallory-token-0000000000000"),
    ("dora", "deployer", "e2e-dora-token-0000000000000000"),
    ("vic", "viewer", "e2e-vic-token-00000000000000000"),
];

/// The token of the person named `name` in [`TOKENS`].
pub fn token_of(name: &str) -> &'static str {
    TOKENS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, _, t)| *t)
        .unwrap_or_else(|| panic!("no e2e token for {name}"))
}

/// Credentials in every test server's environment that must never appear in its log, a stage
/// log, an API answer or the CLI's output (checked on every such read, and when the server's
/// handle drops).
pub const FAKE_AWS_SECRET: &str = "e2eFakeAwsSecretAccessKeyNeverLogged0000";
pub const FAKE_GITHUB_TOKEN: &str = "ghp_e2eFakeGithubTokenNeverLogged00000000";

/// Every secret the end-to-end suite watches for.
pub fn secrets() -> Vec<&'static str> {
    let mut all = vec![SECRET, FAKE_AWS_SECRET, FAKE_GITHUB_TOKEN];
    all.extend(TOKENS.iter().map(|(_, _, token)| *token));
    all
}

/// Panics, naming the secret and where, if `text` holds any of [`secrets`].
pub fn assert_no_secrets(place: &str, text: &str) {
    if let Some(found) = secrets().into_iter().find(|s| text.contains(s)) {
        let at = text.find(found).unwrap_or(0);
        let from = text[..at]
            .char_indices()
            .rev()
            .nth(80)
            .map_or(0, |(i, _)| i);
        panic!(
            "a secret ({}…) leaked into {place}: …{}",
            &found[..6],
            &text[from..at]
        );
    }
}

/// The `api:` section that makes a server trust [`TOKENS`]; configs written by tests add it.
pub const API_CONFIG: &str = "api:\n  tokens: {env: GANNET_E2E_TOKENS}\n";

fn tokens_yaml() -> String {
    TOKENS
        .iter()
        .map(|(name, role, token)| format!("- {{name: {name}, role: {role}, token: {token}}}\n"))
        .collect()
}

/// The gannet binary under test.
pub fn gannet_bin() -> &'static str {
    env!("CARGO_BIN_EXE_gannet")
}

/// Runs git in `dir`, panicking with its stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "e2e")
        .env("GIT_AUTHOR_EMAIL", "e2e@gannet.invalid")
        .env("GIT_COMMITTER_NAME", "e2e")
        .env("GIT_COMMITTER_EMAIL", "e2e@gannet.invalid")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A git repository in a tempdir, on branch `main`.
pub struct Repo {
    pub dir: tempfile::TempDir,
}

impl Repo {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        git(dir.path(), &["init", "-q", "-b", "main"]);
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes files (path, content) and commits them; returns the new head.
    pub fn commit(&self, files: &[(&str, &str)], message: &str) -> String {
        for (path, content) in files {
            let full = self.path().join(path);
            std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            std::fs::write(&full, content).expect("write");
        }
        git(self.path(), &["add", "-A"]);
        git(
            self.path(),
            &["commit", "-q", "--allow-empty", "-m", message],
        );
        self.head()
    }

    pub fn head(&self) -> String {
        git(self.path(), &["rev-parse", "HEAD"])
    }
}

/// An `Application` config with the given stages (YAML list items, indented 6 spaces).
pub fn app_config(name: &str, stages: &str) -> String {
    format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: {name}\n  pipeline:\n    stages:\n{stages}"
    )
}

/// Options for a `gannet up` under test.
#[derive(Clone)]
pub struct UpOptions {
    pub extra_config: String,
    pub supersede: bool,
    /// `repos[].onFirstSight`: `deploy` (the tests' default, so the first scan deploys every
    /// app) or `adopt` (gannet's default).
    pub on_first_sight: &'static str,
    pub env: Vec<(String, String)>,
}

impl UpOptions {
    /// The same options, with `key` (a PEM private key) as gannet's key for sealed secrets,
    /// given in an environment variable as `secretManagement.privateKeyEnv` names it.
    pub fn with_sealing_key(mut self, key: String) -> Self {
        self.extra_config
            .push_str("secretManagement: {privateKeyEnv: GANNET_SEALING_KEY}\n");
        self.env.push(("GANNET_SEALING_KEY".to_owned(), key));
        self
    }
}

impl Default for UpOptions {
    fn default() -> Self {
        Self {
            extra_config: "intervals: {poll: 1m, resume: 1s}\nqueue: {visibility: 3s}\n".into(),
            supersede: false,
            on_first_sight: "deploy",
            env: Vec::new(),
        }
    }
}

/// A running `gannet up`, killed (SIGKILL) on drop.
pub struct Gannet {
    pub child: Child,
    pub url: String,
    pub state_dir: PathBuf,
    pub config: PathBuf,
    log: PathBuf,
    http: reqwest::blocking::Client,
    /// The extra environment it was started with, kept for [`Gannet::restart`].
    env: Vec<(String, String)>,
}

/// Where the harness reaches a plain-HTTP `gannet up`, without the port.
const LOOPBACK: &str = "http://127.0.0.1";
const LOOPBACK_IP: &str = "127.0.0.1";

/// The harness's HTTP client for a plain-HTTP `gannet up`.
fn plain_client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client")
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

impl Gannet {
    /// Writes a gannet.yaml for `repo` into `state_dir` and starts `gannet up`.
    pub fn start(repo: &Repo, state_dir: &Path, opts: &UpOptions) -> Self {
        Self::on_a_free_port(state_dir, LOOPBACK, plain_client(), &opts.env, |port| {
            Self::write_config(repo, state_dir, opts, port)
        })
    }

    /// Starts `gannet up` as a user would: in `state_dir`, with `--config gannet.yaml`, a
    /// relative path (and the config's own paths relative too).
    pub fn start_in_dir(repo: &Repo, state_dir: &Path, opts: &UpOptions) -> Self {
        Self::on_a_free_port(state_dir, LOOPBACK, plain_client(), &opts.env, |port| {
            Self::write_config(repo, state_dir, opts, port);
            PathBuf::from("gannet.yaml")
        })
    }

    /// Writes `state_dir/gannet.yaml` for `repo` listening on `port`; returns its path.
    fn write_config(repo: &Repo, state_dir: &Path, opts: &UpOptions, port: u16) -> PathBuf {
        let config = state_dir.join("gannet.yaml");
        std::fs::write(
            &config,
            format!(
                "listen: 127.0.0.1:{port}\nstate: state/gannet.db\nwebhook:\n  secretEnv: GANNET_E2E_SECRET\n{API_CONFIG}repos:\n  - id: shop\n    path: {}\n    branch: main\n    onFirstSight: {}\n    github: {GITHUB}\n    supersede: {}\n{}",
                repo.path().display(),
                opts.on_first_sight,
                opts.supersede,
                opts.extra_config
            ),
        )
        .expect("write config");
        config
    }

    /// Starts `gannet up` on the config `write` writes for a free port, reached at
    /// `base:<port>`. A free port is only free until someone binds it: when another test's
    /// server took it first (our process exits, unable to listen), it starts again on another.
    fn on_a_free_port(
        state_dir: &Path,
        base: &str,
        http: reqwest::blocking::Client,
        env: &[(String, String)],
        write: impl Fn(u16) -> PathBuf,
    ) -> Self {
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let config = write(port);
            match Self::launch(state_dir, &config, port, base, http.clone(), env) {
                Ok(g) => return g,
                Err(log) => last = log,
            }
        }
        panic!("gannet up found no free port in 5 tries\n--- its last log ---\n{last}")
    }

    /// Starts `gannet up` again on the same config, state and extra environment (after a kill).
    pub fn restart(self) -> Self {
        let (state_dir, config, url, env) = (
            self.state_dir.clone(),
            self.config.clone(),
            self.url.clone(),
            self.env.clone(),
        );
        let http = self.http.clone();
        drop(self);
        let (base, port) = url.rsplit_once(':').expect("a url with a port");
        let port = port.parse().expect("port");
        Self::launch(&state_dir, &config, port, base, http, &env)
            .unwrap_or_else(|log| panic!("gannet up did not start again\n--- its log ---\n{log}"))
    }

    /// Starts `gannet up` on a config that listens on `port` on loopback.
    pub fn start_with_config(
        state_dir: &Path,
        config: &Path,
        port: u16,
        env: &[(String, String)],
    ) -> Self {
        Self::launch(state_dir, config, port, LOOPBACK, plain_client(), env)
            .unwrap_or_else(|log| panic!("gannet up did not start\n--- its log ---\n{log}"))
    }

    /// Starts `gannet up` serving HTTPS (the config's `api.tls`), on a config the caller writes
    /// for the free port it is given. The harness reaches it as `https://localhost:<port>`,
    /// trusting only `ca` (a PEM certificate, such as [`test_certificate`]'s).
    pub fn start_tls(state_dir: &Path, config: impl Fn(u16) -> String, ca: &Path) -> Self {
        let ca = std::fs::read(ca).expect("read the CA");
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(30))
            .tls_built_in_root_certs(false)
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("a PEM CA"))
            .build()
            .expect("client");
        Self::on_a_free_port(state_dir, "https://localhost", http, &[], |port| {
            let path = state_dir.join("gannet.yaml");
            std::fs::write(&path, config(port)).expect("write config");
            path
        })
    }

    /// Spawns `gannet up` and waits until it serves `base:port`. It is ours when our process
    /// logged that address as its own; `Err` with its log when it exited first (the port was
    /// taken).
    fn launch(
        state_dir: &Path,
        config: &Path,
        port: u16,
        base: &str,
        http: reqwest::blocking::Client,
        env: &[(String, String)],
    ) -> Result<Self, String> {
        let url = format!("{base}:{port}");
        let log = state_dir.join(format!(
            "gannet-{}.log",
            Instant::now().elapsed().as_nanos() ^ u128::from(port)
        ));
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log file");
        let child = Command::new(gannet_bin())
            .current_dir(state_dir)
            .args(["up", "--config"])
            .arg(config)
            .env("GANNET_E2E_SECRET", SECRET)
            .env("GANNET_E2E_TOKENS", tokens_yaml())
            .env("AWS_SECRET_ACCESS_KEY", FAKE_AWS_SECRET)
            .env("GITHUB_TOKEN", FAKE_GITHUB_TOKEN)
            .env("GANNET_LOG", "info")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("gannet up starts");
        let mut g = Self {
            child,
            url,
            state_dir: state_dir.to_owned(),
            config: config.to_owned(),
            log,
            http,
            env: env.to_vec(),
        };
        // Its own log line, not just an answer on the port: another test's server may answer.
        let listening = format!("addr={LOOPBACK_IP}:{port}");
        let start = Instant::now();
        loop {
            if g.child.try_wait().expect("wait").is_some() {
                return Err(g.log());
            }
            let up = g.log().contains(&listening)
                && g.http
                    .get(format!("{}/healthz", g.url))
                    .send()
                    .is_ok_and(|r| r.status().is_success());
            if up {
                return Ok(g);
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "timed out after 20s waiting until gannet up serves {}\n--- gannet log ---\n{}",
                g.url,
                g.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What gannet logged so far.
    pub fn log(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Polls `f` every 50 ms until it returns Some, or panics after `limit` with gannet's log.
    pub fn wait_until<T>(
        &self,
        limit: Duration,
        what: &str,
        mut f: impl FnMut() -> Option<T>,
    ) -> T {
        let start = Instant::now();
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(
                start.elapsed() < limit,
                "timed out after {limit:?} waiting until {what}\n--- gannet log ---\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// POSTs a signed push webhook for `after`; returns (status, body).
    pub fn push(&self, after: &str, delivery: &str) -> (u16, Value) {
        let body = push_payload(GITHUB, "main", after);
        let sig = gannet_events::github::sign(SECRET.as_bytes(), body.as_bytes());
        self.hook("push", Some(delivery), Some(&sig), body.into_bytes())
    }

    /// POSTs raw bytes to the webhook endpoint.
    pub fn hook(
        &self,
        event: &str,
        delivery: Option<&str>,
        signature: Option<&str>,
        body: Vec<u8>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .post(format!("{}/hooks/github", self.url))
            .header("x-github-event", event)
            .header("content-type", "application/json")
            .body(body);
        if let Some(d) = delivery {
            req = req.header("x-github-delivery", d);
        }
        if let Some(s) = signature {
            req = req.header("x-hub-signature-256", s);
        }
        let res = req.send().expect("webhook request");
        let status = res.status().as_u16();
        (status, res.json().unwrap_or(Value::Null))
    }

    /// GETs an API path as the admin.
    pub fn get(&self, path: &str) -> (u16, Value) {
        self.get_as(ADMIN_TOKEN, path)
    }

    /// GETs an API path with `token` (empty: none).
    pub fn get_as(&self, token: &str, path: &str) -> (u16, Value) {
        let mut req = self.http.get(format!("{}/api/v1{path}", self.url));
        if !token.is_empty() {
            req = req.bearer_auth(token);
        }
        answer(path, req.send().expect("api request"))
    }

    /// POSTs JSON to an API path with `token` (empty: none).
    pub fn post_as(&self, token: &str, path: &str, body: Value) -> (u16, Value) {
        let mut req = self
            .http
            .post(format!("{}/api/v1{path}", self.url))
            .json(&body);
        if !token.is_empty() {
            req = req.bearer_auth(token);
        }
        answer(path, req.send().expect("api request"))
    }

    /// POSTs JSON to an API path as the admin.
    pub fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.post_as(ADMIN_TOKEN, path, body)
    }

    pub fn deployments(&self) -> Vec<Value> {
        let (status, body) = self.get("/deployments?limit=1000");
        assert_eq!(status, 200, "{body}");
        body["deployments"].as_array().cloned().unwrap_or_default()
    }

    pub fn deployment(&self, id: &str) -> Value {
        let (status, body) = self.get(&format!("/deployments/{id}"));
        assert_eq!(status, 200, "{body}");
        body["deployment"].clone()
    }

    /// Waits for the deployment of `commit` to exist; returns its id.
    pub fn deployment_of(&self, commit: &str, limit: Duration) -> String {
        self.wait_until(limit, &format!("a deployment of {commit} exists"), || {
            self.deployments()
                .into_iter()
                .find(|d| d["commit"] == commit)
                .and_then(|d| d["id"].as_str().map(str::to_owned))
        })
    }

    /// Waits for deployment `id` to reach a terminal status; returns the deployment.
    /// Sends a signed push of `commit`; returns its deployment's id, once it has one.
    pub fn deploy(&self, limit: Duration, commit: &str) -> String {
        let (status, body) = self.push(commit, commit);
        assert_eq!(status, 202, "{body}");
        self.deployment_of(commit, limit)
    }

    pub fn wait_terminal(&self, id: &str, limit: Duration) -> Value {
        self.wait_until(limit, &format!("deployment {id} ends"), || {
            let d = self.deployment(id);
            matches!(
                d["status"].as_str(),
                Some("SUCCESS" | "FAILURE" | "CANCELLED")
            )
            .then_some(d)
        })
    }

    /// Runs a gannet client command against this server; returns (exit code, stdout).
    pub fn cli(&self, args: &[&str]) -> (i32, String) {
        let out = Command::new(gannet_bin())
            .args(args)
            .env("GANNET_SERVER", &self.url)
            .env("GANNET_TOKEN", ADMIN_TOKEN)
            .output()
            .expect("gannet cli runs");
        assert_no_secrets("the CLI's output", &String::from_utf8_lossy(&out.stdout));
        assert_no_secrets("the CLI's errors", &String::from_utf8_lossy(&out.stderr));
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    /// Kills the process at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Opens the state file directly, read-only, to check what was stored.
    pub fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(
            self.state_dir.join("state/gannet.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .expect("open state")
    }

    /// Row count of a table in the state file.
    pub fn count(&self, table: &str) -> i64 {
        self.db()
            .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
            .expect("count")
    }
}

impl Drop for Gannet {
    fn drop(&mut self) {
        self.kill();
        if !std::thread::panicking() {
            self.assert_no_secrets_stored();
        }
    }
}

/// An API answer's status and JSON body, checked for secrets.
fn answer(path: &str, res: reqwest::blocking::Response) -> (u16, Value) {
    let status = res.status().as_u16();
    let text = res.text().unwrap_or_default();
    assert_no_secrets(&format!("the API answer to {path}"), &text);
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

impl Gannet {
    /// Neither the server's log nor any stage log holds a secret.
    pub fn assert_no_secrets_stored(&self) {
        assert_no_secrets("the server log", &self.log());
        let Ok(db) = rusqlite::Connection::open_with_flags(
            self.state_dir.join("state/gannet.db"),
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        ) else {
            return;
        };
        let lines: Vec<String> = db
            .prepare("SELECT text FROM stage_logs")
            .and_then(|mut stmt| {
                stmt.query_map([], |r| r.get::<_, String>(0))?
                    .collect::<Result<Vec<_>, _>>()
            })
            .unwrap_or_default();
        assert_no_secrets("a stage log", &lines.join("\n"));
    }
}

/// A push payload shaped like GitHub's, with the fields gannet reads.
pub fn push_payload(repo: &str, branch: &str, after: &str) -> String {
    serde_json::json!({
        "ref": format!("refs/heads/{branch}"),
        "before": "0000000000000000000000000000000000000000",
        "after": after,
        "created": false,
        "deleted": false,
        "forced": false,
        "head_commit": {"id": after, "message": "change"},
        "repository": {
            "name": repo.rsplit('/').next().unwrap_or(repo),
            "full_name": repo,
            "html_url": format!("https://github.com/{repo}"),
            "clone_url": format!("https://github.com/{repo}.git"),
        },
        "pusher": {"name": "e2e"},
    })
    .to_string()
}

// Helpers for the crash and concurrency tests (e2e_crash.rs, e2e_concurrency.rs).

impl Gannet {
    /// The deployment's body as stored in the state file (times in epoch milliseconds).
    pub fn stored_deployment(&self, id: &str) -> Option<Value> {
        let body: Option<String> = self
            .db()
            .query_row("SELECT body FROM deployments WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .ok();
        body.map(|b| serde_json::from_str(&b).expect("stored deployment is JSON"))
    }

    /// Every `(id, body)` row of a state table (`apps`, `repos`, `deployments`), by id.
    pub fn stored_rows(&self, table: &str) -> Vec<(String, String)> {
        let db = self.db();
        let mut stmt = db
            .prepare(&format!("SELECT id, body FROM {table} ORDER BY id"))
            .expect("prepare");
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .collect::<Result<Vec<(String, String)>, _>>()
            .expect("rows");
        rows
    }

    /// Fails unless `value` (a secret the deployment `id` of app `app` used) is nowhere gannet
    /// shows or keeps: the deployment and the app as the API shows them, every stage's log,
    /// the server's log, and the stored deployments and apps.
    pub fn assert_nowhere(&self, value: &str, id: &str, app: &str) {
        let d = self.deployment(id);
        let logs: Vec<Vec<String>> = d["stages"]
            .as_array()
            .map(|stages| {
                let ids = stages.iter().filter_map(|s| s["id"].as_str());
                ids.map(|stage| self.stage_log(id, stage)).collect()
            })
            .unwrap_or_default();
        let shown = format!("{d}{}{logs:?}{}", self.app_view(app), self.log());
        assert!(!shown.contains(value), "the value shows: {shown}");
        for table in ["deployments", "apps"] {
            let rows = format!("{:?}", self.stored_rows(table));
            assert!(!rows.contains(value), "the value is stored in {table}");
        }
    }

    /// The app as the API shows it (`key`: its id or its unique name).
    pub fn app_view(&self, key: &str) -> Value {
        let (status, body) = self.get(&format!("/apps/{key}"));
        assert_eq!(status, 200, "{body}");
        body["app"].clone()
    }

    /// The text of a stage's log lines, through the API.
    pub fn stage_log(&self, deployment: &str, stage: &str) -> Vec<String> {
        let mut texts = Vec::new();
        let mut after = 0;
        // Page by page (the API returns at most 1,000 lines a call).
        loop {
            let (status, body) = self.get(&format!(
                "/deployments/{deployment}/stages/{stage}/logs?after={after}"
            ));
            assert_eq!(status, 200, "{body}");
            let lines = body["lines"].as_array().cloned().unwrap_or_default();
            let Some(last) = lines.last().and_then(|l| l["seq"].as_u64()) else {
                return texts;
            };
            after = last;
            texts.extend(
                lines
                    .iter()
                    .filter_map(|l| l["text"].as_str().map(str::to_owned)),
            );
        }
    }
}

/// The stage with this id in a deployment (API view or stored body), if it has been planned.
/// `NAME STATUS` of every stage of a deployment, hidden ones included, joined by commas.
pub fn stage_statuses(d: &Value) -> String {
    let all = d["stages"].as_array().into_iter().flatten();
    let each = all.map(|s| format!("{} {}", s["name"], s["status"]).replace('"', ""));
    each.collect::<Vec<_>>().join(", ")
}

pub fn find_stage<'a>(deployment: &'a Value, id: &str) -> Option<&'a Value> {
    deployment["stages"]
        .as_array()
        .and_then(|stages| stages.iter().find(|s| s["id"] == id))
}

/// The stage with this id in a deployment; panics when absent.
pub fn stage_of<'a>(deployment: &'a Value, id: &str) -> &'a Value {
    find_stage(deployment, id).unwrap_or_else(|| panic!("no stage {id} in {deployment}"))
}

/// The lines of a marker file a test script appends to (none when it does not exist yet).
pub fn marker_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

// ---- Bad-input and command tests: custom configs, client runs, stored-state fingerprints ----

/// How a `gannet` command exited and what it printed.
#[derive(Debug)]
pub struct CliRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the gannet binary (no server implied) with extra environment variables.
pub fn run_gannet(args: &[&str], env: &[(&str, &str)]) -> CliRun {
    let out = Command::new(gannet_bin())
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("gannet runs");
    assert_no_secrets("the CLI's output", &String::from_utf8_lossy(&out.stdout));
    assert_no_secrets("the CLI's errors", &String::from_utf8_lossy(&out.stderr));
    CliRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `GANNET_HELM` and `GANNET_KUSTOMIZE` for a gannet process: the binaries `scripts/kube.sh`
/// built (`make test` builds them first).
///
/// # Panics
/// When they are not built, saying how to build them.
pub fn kube_tools() -> Vec<(String, String)> {
    let dir = gannet_kube_fake::tools_dir();
    [("GANNET_HELM", "helm"), ("GANNET_KUSTOMIZE", "kustomize")]
        .into_iter()
        .map(|(var, name)| (var.to_owned(), dir.join(name).display().to_string()))
        .collect()
}

/// A repository whose app `web` (`apps/web/app.pipecd.yaml`) runs `stages`, a `gannet up` on
/// it, and the id of the deployment of its first commit, ended, with the app's lock released.
pub fn deployed_web(stages: &str) -> (Repo, tempfile::TempDir, Gannet, String) {
    let limit = Duration::from_secs(30);
    let repo = Repo::new();
    let head = repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", stages))],
        "add web",
    );
    let state = tempfile::tempdir().expect("tempdir");
    let g = Gannet::start(&repo, state.path(), &UpOptions::default());
    let id = g.deployment_of(&head, limit);
    g.wait_terminal(&id, limit);
    g.wait_unlocked("web", limit);
    (repo, state, g, id)
}

/// Kills a helper process by its PID when dropped (and reaps it).
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits (at most `limit`) for a background process to exit; kills it and panics, with what it
/// printed, when it does not.
pub fn finish(mut child: Child, limit: Duration) -> CliRun {
    let started = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "the process did not exit within {limit:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    CliRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Everything a refused webhook must leave untouched, read straight from the state file.
#[derive(Debug, PartialEq, Eq)]
pub struct Stored {
    pub deliveries: Vec<String>,
    /// (id, status, seq) per deployment.
    pub deployments: Vec<(String, String, i64)>,
    /// (queue, body) of every queued message.
    pub messages: Vec<(String, String)>,
    /// (id, version) per app.
    pub apps: Vec<(String, i64)>,
    /// (id, version) per repository.
    pub repos: Vec<(String, i64)>,
    pub dead_letters: i64,
}

impl Gannet {
    /// Starts `gannet up` on a config the caller writes for the free port it is given.
    pub fn start_raw(
        state_dir: &Path,
        config: impl Fn(u16) -> String,
        env: &[(String, String)],
    ) -> Self {
        Self::on_a_free_port(state_dir, LOOPBACK, plain_client(), env, |port| {
            let path = state_dir.join("gannet.yaml");
            std::fs::write(&path, config(port)).expect("write config");
            path
        })
    }

    /// Runs a client command against this server with extra environment variables.
    pub fn cli_env(&self, args: &[&str], env: &[(&str, &str)]) -> CliRun {
        let mut all = vec![
            ("GANNET_SERVER", self.url.as_str()),
            ("GANNET_TOKEN", ADMIN_TOKEN),
        ];
        all.extend_from_slice(env);
        run_gannet(args, &all)
    }

    /// Opens the state file read-write; only while gannet is stopped.
    pub fn db_rw(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.state_dir.join("state/gannet.db")).expect("open state")
    }

    /// A fingerprint of what is stored.
    pub fn stored(&self) -> Stored {
        let db = self.db();
        let rows = |sql: &str| -> Vec<(String, String, i64)> {
            let mut stmt = db.prepare(sql).expect("prepare");
            stmt.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })
            .expect("query")
            .map(|r| r.expect("row"))
            .collect()
        };
        Stored {
            deliveries: rows("SELECT id, '', at FROM deliveries ORDER BY id")
                .into_iter()
                .map(|r| r.0)
                .collect(),
            deployments: rows("SELECT id, status, seq FROM deployments ORDER BY id"),
            messages: rows("SELECT queue, body, id FROM messages ORDER BY id")
                .into_iter()
                .map(|(q, b, _)| (q, b))
                .collect(),
            apps: rows("SELECT id, '', version FROM apps ORDER BY id")
                .into_iter()
                .map(|(id, _, v)| (id, v))
                .collect(),
            repos: rows("SELECT id, '', version FROM repos ORDER BY id")
                .into_iter()
                .map(|(id, _, v)| (id, v))
                .collect(),
            dead_letters: self.count("dead_letters"),
        }
    }

    /// Waits until every queue is empty (nothing queued, delayed or in flight).
    pub fn wait_idle(&self, limit: Duration) {
        self.wait_until(limit, "every queue is empty", || {
            (self.count("messages") == 0).then_some(())
        });
    }

    /// Waits until app `app` no longer holds a deployment's lock.
    pub fn wait_unlocked(&self, app: &str, limit: Duration) {
        self.wait_until(limit, &format!("{app} is no longer deploying"), || {
            self.get(&format!("/apps/{app}")).1["app"]["active_deployment"]
                .is_null()
                .then_some(())
        });
    }

    /// Waits until stage `name` of deployment `id` has status `status`; returns the deployment.
    pub fn wait_stage(&self, id: &str, name: &str, status: &str, limit: Duration) -> Value {
        self.wait_until(limit, &format!("stage {name} of {id} is {status}"), || {
            let d = self.deployment(id);
            d["stages"]
                .as_array()
                .is_some_and(|s| {
                    s.iter()
                        .any(|st| st["name"] == name && st["status"] == status)
                })
                .then_some(d)
        })
    }
}

/// The stage named `name` in a deployment view.
pub fn stage_named<'a>(d: &'a Value, name: &str) -> &'a Value {
    d["stages"]
        .as_array()
        .and_then(|s| s.iter().find(|st| st["name"] == name))
        .unwrap_or_else(|| panic!("no stage {name} in {d}"))
}

/// A test CA and a certificate it signed for `localhost` and 127.0.0.1 (a self-signed leaf
/// cannot be a trust anchor for rustls), made by `openssl` in `dir`: `ca.pem` (the CA's
/// certificate), `cert.pem` and `key.pem` (the server's). Returns the path of `ca.pem`.
pub fn test_certificate(dir: &Path) -> PathBuf {
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-days",
                "1",
                "-subj",
                "/CN=gannet test CA",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
            ],
        ]
        .concat(),
    );
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-subj",
                "/CN=localhost",
                "-keyout",
                "key.pem",
                "-out",
                "leaf.csr",
            ],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .expect("ext");
    openssl(&[
        "x509",
        "-req",
        "-in",
        "leaf.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        "ext",
        "-out",
        "cert.pem",
    ]);
    dir.join("ca.pem")
}

/// Where browser scenarios put their screenshots: `artifacts/console/` in the checkout
/// (git-ignored).
pub fn console_artifacts() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../artifacts/console");
    std::fs::create_dir_all(&dir).expect("artifacts dir");
    dir
}

/// Runs browser scenario `name` (console/e2e/run.mjs, in Chromium from `GANNET_CHROMIUM`)
/// against `g`'s web console, signed in with `token`, on `deployment` of `app`, with `expect`
/// as its GANNET_EXPECT. Screenshots go to `artifacts/console/<name>/`, the `screenshots`
/// scenario's (the README's pictures) to `artifacts/console/`. Bounded at two minutes.
pub fn console_scenario(
    g: &Gannet,
    name: &str,
    token: &str,
    app: &str,
    deployment: &str,
    expect: &Value,
) -> CliRun {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let chromium = std::env::var("GANNET_CHROMIUM").unwrap_or_else(|_| {
        panic!("GANNET_CHROMIUM is not set: run `scripts/chromium.sh ensure` and set it to `scripts/chromium.sh path` (make test does both)")
    });
    let screenshots = match name {
        "screenshots" => console_artifacts(),
        other => console_artifacts().join(other),
    };
    let child = Command::new("node")
        .arg(root.join("console/e2e/run.mjs"))
        .arg(name)
        .current_dir(root.join("console"))
        .env("GANNET_CHROMIUM", chromium)
        .env("GANNET_URL", &g.url)
        .env("GANNET_TOKEN", token)
        .env("GANNET_APP", app)
        .env("GANNET_DEPLOYMENT", deployment)
        .env("GANNET_SCREENSHOTS", screenshots)
        .env("GANNET_EXPECT", expect.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs (Node.js 20 or newer is needed)");
    let run = finish(child, Duration::from_secs(120));
    assert_no_secrets("a browser scenario's output", &run.stdout);
    run
}

impl Gannet {
    /// Starts a client command against this server in the background, as the admin; read it
    /// with [`finish`].
    pub fn cli_spawn(&self, args: &[&str]) -> Child {
        Command::new(gannet_bin())
            .args(args)
            .env("GANNET_SERVER", &self.url)
            .env("GANNET_TOKEN", ADMIN_TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("gannet runs")
    }
}

/// A new RSA private key in PKCS#8 PEM, as `openssl genpkey -algorithm RSA` writes one (for
/// sealed secrets).
pub fn private_key() -> String {
    use rsa::pkcs8::{EncodePrivateKey, LineEnding};
    let key = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 2048).expect("a key");
    key.to_pkcs8_pem(LineEnding::LF).expect("pem").to_string()
}
