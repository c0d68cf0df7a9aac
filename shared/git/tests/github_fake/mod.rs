//! A FAKE GitHub API, for tests only. It is not GitHub and talks to nothing: an axum server on
//! 127.0.0.1 (a random port) that replays the shapes of GitHub's documented REST responses for
//! the fields gannet reads — branches, git commits, compare, git trees, the tarball (a 302 to a
//! second, "codeload" server), commit statuses, check runs, GitHub App installation tokens —
//! from repositories the test builds in memory. It records every request (method, path,
//! Authorization header), every posted status and every check run created or updated, and can
//! be told to answer one request with a fault (rate limit, 5xx, a delay).
//!
//! Check runs are validated as GitHub documents them (and only that far): an App installation
//! only (a token gets GitHub's 403); `name` and `head_sha` required on create; `status` one of
//! queued, in_progress, completed; a `conclusion` (GitHub's list) required once completed, and
//! completing the run when given; `output.title` and `output.summary` required with `output`;
//! `output.summary` and `output.text` at most 65535 characters (and bytes); a 404 for an
//! unknown id. The head is not looked up: a test may name commits of a real git repository.
//!
//! The end-to-end tests include it too (`#[path = "../shared/git/tests/github_fake/mod.rs"]`):
//! what it uses must stay dev-dependencies of gannet-cli as well.

#![allow(dead_code)] // each test binary uses a different part

pub mod test_key;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// How a file is stored in a fake commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    File,
    Executable,
    /// The content is the link target.
    Symlink,
}

impl Mode {
    fn git(self) -> &'static str {
        match self {
            Mode::File => "100644",
            Mode::Executable => "100755",
            Mode::Symlink => "120000",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Commit {
    pub sha: String,
    pub message: String,
    pub author: String,
    pub date: String,
    pub parents: Vec<String>,
    pub files: BTreeMap<String, (Mode, Vec<u8>)>,
}

/// One request as the fake saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub server: &'static str,
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
}

/// A canned answer for the next request whose path contains `path`.
#[derive(Clone, Debug)]
pub struct Fault {
    pub path: String,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub delay: Duration,
}

/// One create or update of a check run as the fake saw it, accepted or refused.
#[derive(Clone, Debug)]
pub struct CheckRunRequest {
    /// `POST` or `PATCH`.
    pub method: String,
    pub path: String,
    /// The run's id (`None` for a create that was refused).
    pub id: Option<u64>,
    pub body: Value,
    /// What the fake answered.
    pub status: u16,
}

/// GitHub's longest `output.summary` and `output.text`.
pub const CHECK_OUTPUT_LIMIT: usize = 65_535;

/// Who may call the API.
#[derive(Clone, Debug)]
pub enum Credentials {
    Token(String),
    App {
        app_id: u64,
        installation_id: u64,
        public_pem: String,
        /// `expires_at` of the installation tokens it issues.
        expires_at: String,
    },
}

#[derive(Default)]
struct Repo {
    branches: BTreeMap<String, String>,
    commits: HashMap<String, Commit>,
    /// Commit sha → its root tree's sha.
    roots: HashMap<String, String>,
    /// Tree sha → its entries (name, mode, type, sha).
    trees: HashMap<String, Vec<(String, String, &'static str, String)>>,
}

struct Inner {
    prefix: String,
    codeload: String,
    credentials: Credentials,
    repos: BTreeMap<String, Repo>,
    issued: Vec<String>,
    seen: Vec<Seen>,
    statuses: Vec<(String, Value)>,
    /// Check run id → (`owner/name`, the run as created and updated since).
    check_runs: BTreeMap<u64, (String, Value)>,
    check_run_requests: Vec<CheckRunRequest>,
    faults: VecDeque<Fault>,
    truncate_recursive: bool,
    tarballs: HashMap<String, Vec<u8>>,
}

type Shared = Arc<Mutex<Inner>>;

/// A running fake; its servers stop when it is dropped.
pub struct FakeGithub {
    /// The API's base URI, with the path prefix when one was asked for.
    pub base: String,
    state: Shared,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for FakeGithub {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl FakeGithub {
    pub async fn start(credentials: Credentials) -> Self {
        Self::start_at("", credentials).await
    }

    /// Serves the API under `prefix` (GitHub Enterprise serves it under `/api/v3`).
    pub async fn start_at(prefix: &str, credentials: Credentials) -> Self {
        let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let codeload = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (api_addr, codeload_addr) = (api.local_addr().unwrap(), codeload.local_addr().unwrap());
        let state = Arc::new(Mutex::new(Inner {
            prefix: prefix.to_owned(),
            codeload: format!("http://{codeload_addr}"),
            credentials,
            repos: BTreeMap::new(),
            issued: Vec::new(),
            seen: Vec::new(),
            statuses: Vec::new(),
            check_runs: BTreeMap::new(),
            check_run_requests: Vec::new(),
            faults: VecDeque::new(),
            truncate_recursive: false,
            tarballs: HashMap::new(),
        }));
        let api_app = Router::new()
            .fallback(api_handler)
            .with_state(state.clone());
        let codeload_app = Router::new()
            .fallback(codeload_handler)
            .with_state(state.clone());
        let tasks = vec![
            tokio::spawn(async move { axum::serve(api, api_app).await.unwrap() }),
            tokio::spawn(async move { axum::serve(codeload, codeload_app).await.unwrap() }),
        ];
        Self {
            base: format!("http://{api_addr}{prefix}"),
            state,
            tasks,
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.state.lock().unwrap()
    }

    /// Adds a commit to `repo` (`owner/name`, created on first use); its sha is derived from
    /// its content and parents.
    pub fn commit(
        &self,
        repo: &str,
        parents: &[&str],
        message: &str,
        files: &[(&str, Mode, &[u8])],
    ) -> String {
        let files: BTreeMap<String, (Mode, Vec<u8>)> = files
            .iter()
            .map(|(p, m, c)| (p.to_string(), (*m, c.to_vec())))
            .collect();
        let mut inner = self.inner();
        let r = inner.repos.entry(repo.to_owned()).or_default();
        let root = store_tree(r, &files);
        let sha = hash(&format!("commit {root} {parents:?} {message}"));
        r.roots.insert(sha.clone(), root);
        r.commits.insert(
            sha.clone(),
            Commit {
                sha: sha.clone(),
                message: message.to_owned(),
                author: "Mona Lisa".to_owned(),
                date: "2011-04-14T16:00:49Z".to_owned(),
                parents: parents.iter().map(|p| p.to_string()).collect(),
                files,
            },
        );
        sha
    }

    pub fn set_branch(&self, repo: &str, branch: &str, sha: &str) {
        let mut inner = self.inner();
        let r = inner.repos.entry(repo.to_owned()).or_default();
        r.branches.insert(branch.to_owned(), sha.to_owned());
    }

    /// Serves these bytes as the tarball of `sha` instead of building one.
    pub fn set_tarball(&self, sha: &str, bytes: Vec<u8>) {
        self.inner().tarballs.insert(sha.to_owned(), bytes);
    }

    /// Marks every recursive tree listing truncated, as GitHub does past its limits.
    pub fn truncate_recursive_trees(&self) {
        self.inner().truncate_recursive = true;
    }

    pub fn fault(&self, fault: Fault) {
        self.inner().faults.push_back(fault);
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.inner().seen.clone()
    }

    /// How many requests had a path containing `part`.
    pub fn count(&self, part: &str) -> usize {
        self.inner()
            .seen
            .iter()
            .filter(|s| s.path.contains(part))
            .count()
    }

    pub fn statuses(&self) -> Vec<(String, Value)> {
        self.inner().statuses.clone()
    }

    /// Makes `repo` (`owner/name`) exist with no commits, for a test that only reports on it
    /// (check runs, statuses) and keeps its commits in a real git repository.
    pub fn create_repo(&self, repo: &str) {
        self.inner().repos.entry(repo.to_owned()).or_default();
    }

    /// Every check run, by id, as created and updated since (each update's fields replacing
    /// the run's, as GitHub does), with `id` added.
    pub fn check_runs(&self) -> Vec<(u64, Value)> {
        self.inner()
            .check_runs
            .iter()
            .map(|(id, (_, run))| (*id, run.clone()))
            .collect()
    }

    /// Every create and update of a check run, in order, refused ones included.
    pub fn check_run_requests(&self) -> Vec<CheckRunRequest> {
        self.inner().check_run_requests.clone()
    }

    pub fn issued_tokens(&self) -> Vec<String> {
        self.inner().issued.clone()
    }
}

fn hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))[..40].to_owned()
}

/// Stores the trees and blobs of `files`; returns the root tree's sha.
fn store_tree(repo: &mut Repo, files: &BTreeMap<String, (Mode, Vec<u8>)>) -> String {
    let mut dirs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    dirs.entry(String::new()).or_default();
    for path in files.keys() {
        let mut parent = String::new();
        for part in path.split('/') {
            let child = join(&parent, part);
            dirs.entry(parent.clone())
                .or_default()
                .insert(child.clone());
            parent = child;
        }
    }
    let mut shas: HashMap<String, String> = HashMap::new();
    // Deepest directories first, so every subtree's sha is known before its parent's.
    let mut order: Vec<&String> = dirs.keys().collect();
    order.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count() + usize::from(!d.is_empty())));
    for dir in order {
        let mut entries = Vec::new();
        for child in &dirs[dir] {
            let name = child.rsplit('/').next().unwrap().to_owned();
            if let Some((mode, content)) = files.get(child) {
                let blob = hash(&format!("blob {}", String::from_utf8_lossy(content)));
                entries.push((name, mode.git().to_owned(), "blob", blob));
            } else {
                entries.push((name, "040000".to_owned(), "tree", shas[child].clone()));
            }
        }
        let sha = hash(&format!("tree {entries:?}"));
        repo.trees.insert(sha.clone(), entries);
        shas.insert(dir.clone(), sha);
    }
    shas[""].clone()
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    }
}

fn answer(status: u16, body: Value) -> Response {
    let mut response = (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
    let headers = response.headers_mut();
    headers.insert("x-ratelimit-limit", "5000".parse().unwrap());
    headers.insert("x-ratelimit-remaining", "4999".parse().unwrap());
    response
}

fn not_found(message: &str) -> Response {
    answer(
        404,
        json!({"message": message, "documentation_url": "https://docs.github.com/rest", "status": "404"}),
    )
}

fn signature(c: &Commit) -> Value {
    json!({"name": c.author, "email": "octocat@github.com", "date": c.date})
}

fn git_commit(c: &Commit, root: &str) -> Value {
    json!({
        "sha": c.sha,
        "node_id": "C_fake",
        "url": "https://api.github.com/repos/o/r/git/commits/x",
        "author": signature(c),
        "committer": signature(c),
        "message": c.message,
        "tree": {"sha": root, "url": "https://api.github.com/repos/o/r/git/trees/x"},
        "parents": c.parents.iter().map(|p| json!({"sha": p})).collect::<Vec<_>>(),
        "verification": {"verified": false, "reason": "unsigned", "signature": null, "payload": null},
    })
}

async fn api_handler(
    State(state): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let authorization = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let fault = {
        let mut inner = state.lock().unwrap();
        let path = uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
            .to_owned();
        inner.seen.push(Seen {
            server: "api",
            method: method.to_string(),
            path: path.clone(),
            authorization: authorization.clone(),
        });
        let at = inner.faults.iter().position(|f| path.contains(&f.path));
        at.and_then(|i| inner.faults.remove(i))
    };
    if let Some(fault) = fault {
        tokio::time::sleep(fault.delay).await;
        let status = StatusCode::from_u16(fault.status).unwrap();
        let mut response = match serde_json::from_str::<Value>(&fault.body) {
            Ok(body) => answer(fault.status, body),
            Err(_) => (status, fault.body.clone()).into_response(),
        };
        for (k, v) in &fault.headers {
            response.headers_mut().insert(
                axum::http::HeaderName::try_from(k.as_str()).unwrap(),
                v.parse().unwrap(),
            );
        }
        return response;
    }
    let mut inner = state.lock().unwrap();
    let Some(path) = uri.path().strip_prefix(inner.prefix.as_str()) else {
        return not_found("Not Found");
    };
    let path = path.to_owned();
    let query = uri.query().unwrap_or("").to_owned();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if let ["app", "installations", id, "access_tokens"] = parts[..] {
        return issue_token(&mut inner, id, authorization.as_deref());
    }
    if !authorized(&inner, authorization.as_deref()) {
        return answer(
            401,
            json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}),
        );
    }
    let ["repos", owner, name, rest @ ..] = &parts[..] else {
        return not_found("Not Found");
    };
    let full = format!("{owner}/{name}");
    let codeload = inner.codeload.clone();
    let truncate = inner.truncate_recursive;
    let Some(repo) = inner.repos.get(&full) else {
        return not_found("Not Found");
    };
    match (method.as_str(), rest) {
        ("GET", []) => answer(
            200,
            json!({"id": 1296269, "name": name, "full_name": full, "private": false, "default_branch": "main"}),
        ),
        ("GET", ["branches", branch @ ..]) => {
            let branch = branch.join("/").replace("%20", " ");
            let Some(c) = repo.branches.get(&branch).and_then(|s| repo.commits.get(s)) else {
                return not_found("Branch not found");
            };
            let root = root_of(repo, c);
            answer(
                200,
                json!({
                    "name": branch,
                    "commit": {
                        "sha": c.sha,
                        "node_id": "C_fake",
                        "commit": git_commit(c, &root),
                        "url": "https://api.github.com/repos/o/r/commits/x",
                        "html_url": "https://github.com/o/r/commit/x",
                        "parents": c.parents.iter().map(|p| json!({"sha": p})).collect::<Vec<_>>(),
                    },
                    "_links": {"self": "https://api.github.com/repos/o/r/branches/x", "html": "https://github.com/o/r/tree/x"},
                    "protected": false,
                }),
            )
        }
        ("GET", ["git", "commits", sha]) => match repo.commits.get(*sha) {
            Some(c) => answer(200, git_commit(c, &root_of(repo, c))),
            None => not_found("Not Found"),
        },
        ("GET", ["compare", basehead]) => compare(repo, basehead),
        ("GET", ["git", "trees", sha]) => {
            let recursive = query.contains("recursive=1");
            let root = match repo.commits.get(*sha) {
                Some(c) => root_of(repo, c),
                None => sha.to_string(),
            };
            if !repo.trees.contains_key(&root) {
                return not_found("Not Found");
            }
            let mut entries = Vec::new();
            list_tree(repo, &root, "", recursive, &mut entries);
            answer(
                200,
                json!({"sha": root, "url": "https://api.github.com/repos/o/r/git/trees/x", "tree": entries, "truncated": recursive && truncate}),
            )
        }
        ("GET", ["tarball", sha]) => {
            if !repo.commits.contains_key(*sha) {
                return not_found("Not Found");
            }
            Response::builder()
                .status(302)
                .header(
                    "location",
                    format!("{codeload}/{full}/legacy.tar.gz/{sha}?token=CODELOAD_TOKEN"),
                )
                .body(Body::empty())
                .unwrap()
        }
        ("POST", ["statuses", sha]) => {
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let description = body["description"].as_str().unwrap_or("");
            if description.chars().count() > 140 {
                return answer(
                    422,
                    json!({"message": "Validation Failed", "errors": [{"resource": "Status", "code": "custom", "field": "description", "message": "description is too long (maximum is 140 characters)"}]}),
                );
            }
            let state_ok = matches!(
                body["state"].as_str(),
                Some("pending" | "success" | "failure" | "error")
            );
            if !state_ok {
                return answer(422, json!({"message": "Validation Failed"}));
            }
            let reply = json!({
                "url": format!("https://api.github.com/repos/{full}/statuses/{sha}"),
                "id": 1,
                "state": body["state"],
                "description": body["description"],
                "target_url": body.get("target_url").cloned().unwrap_or(Value::Null),
                "context": body["context"],
                "created_at": "2012-07-20T01:19:13Z",
                "updated_at": "2012-07-20T01:19:13Z",
            });
            inner.statuses.push((path.clone(), body));
            answer(201, reply)
        }
        ("POST", ["check-runs"]) => {
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            check_run(&mut inner, &full, None, &path, body)
        }
        ("PATCH", ["check-runs", id]) => {
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let Ok(id) = id.parse::<u64>() else {
                return not_found("Not Found");
            };
            check_run(&mut inner, &full, Some(id), &path, body)
        }
        _ => not_found("Not Found"),
    }
}

fn invalid(message: &str) -> Response {
    answer(
        422,
        json!({"message": format!("Invalid request.\n\n{message}"), "documentation_url": "https://docs.github.com/rest/checks/runs", "status": "422"}),
    )
}

/// Checks a check run's fields as GitHub does; the message of its 422 when one is wrong.
fn check_run_error(body: &Value, create: bool) -> Option<String> {
    let Some(fields) = body.as_object() else {
        return Some("the body is not a JSON object.".into());
    };
    let text = |key: &str| fields.get(key).and_then(Value::as_str);
    let required: &[&str] = if create { &["name", "head_sha"] } else { &[] };
    for key in required {
        if text(key).is_none_or(str::is_empty) {
            return Some(format!("\"{key}\" wasn't supplied."));
        }
    }
    if create
        && !text("head_sha")
            .is_some_and(|h| h.len() == 40 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Some("\"head_sha\" is not a commit sha.".into());
    }
    let statuses = ["queued", "in_progress", "completed"];
    if let Some(status) = fields.get("status") {
        if !status.as_str().is_some_and(|s| statuses.contains(&s)) {
            return Some(format!(
                "For 'properties/status', {status} is not a member of {statuses:?}."
            ));
        }
    }
    let conclusions = [
        "success",
        "failure",
        "neutral",
        "cancelled",
        "skipped",
        "timed_out",
        "action_required",
    ];
    match fields.get("conclusion") {
        Some(c) if !c.as_str().is_some_and(|c| conclusions.contains(&c)) => {
            return Some(format!(
                "For 'properties/conclusion', {c} is not a member of {conclusions:?}."
            ));
        }
        None if text("status") == Some("completed") => {
            return Some("\"conclusion\" wasn't supplied.".into());
        }
        _ => {}
    }
    if let Some(output) = fields.get("output") {
        for key in ["title", "summary"] {
            if !output[key].is_string() {
                return Some(format!("\"{key}\" wasn't supplied."));
            }
        }
        for key in ["summary", "text"] {
            let Some(value) = output[key].as_str() else {
                continue;
            };
            let (chars, bytes) = (value.chars().count(), value.len());
            if chars > CHECK_OUTPUT_LIMIT || bytes > CHECK_OUTPUT_LIMIT {
                return Some(format!(
                    "Only {CHECK_OUTPUT_LIMIT} characters are allowed; {} were supplied.",
                    chars.max(bytes)
                ));
            }
        }
    }
    None
}

/// `POST check-runs` (`id` `None`) or `PATCH check-runs/{id}`.
fn check_run(inner: &mut Inner, full: &str, id: Option<u64>, path: &str, body: Value) -> Response {
    let method = if id.is_some() { "PATCH" } else { "POST" };
    let seen = |inner: &mut Inner, id: Option<u64>, status: u16| {
        inner.check_run_requests.push(CheckRunRequest {
            method: method.to_owned(),
            path: path.to_owned(),
            id,
            body: body.clone(),
            status,
        });
    };
    if matches!(inner.credentials, Credentials::Token(_)) {
        seen(inner, id, 403);
        return answer(
            403,
            json!({"message": "You must authenticate via a GitHub App.", "documentation_url": "https://docs.github.com/rest/checks/runs#create-a-check-run", "status": "403"}),
        );
    }
    if let Some(id) = id {
        if inner
            .check_runs
            .get(&id)
            .is_none_or(|(repo, _)| repo != full)
        {
            seen(inner, Some(id), 404);
            return not_found("Not Found");
        }
    }
    if let Some(message) = check_run_error(&body, id.is_none()) {
        seen(inner, id, 422);
        return invalid(&message);
    }
    let id = id.unwrap_or_else(|| {
        inner
            .check_runs
            .keys()
            .next_back()
            .map_or(4, |last| last + 1)
    });
    let (_, run) = inner
        .check_runs
        .entry(id)
        .or_insert_with(|| (full.to_owned(), json!({"id": id})));
    for (key, value) in body.as_object().into_iter().flatten() {
        if key != "head_sha" || run.get("head_sha").is_none() {
            run[key] = value.clone();
        }
    }
    // A conclusion completes the run.
    if run.get("conclusion").is_some_and(|c| !c.is_null()) {
        run["status"] = json!("completed");
    }
    let reply = json!({
        "id": id,
        "head_sha": run["head_sha"],
        "node_id": "CR_fake",
        "external_id": run.get("external_id").cloned().unwrap_or(json!("")),
        "url": format!("https://api.github.com/repos/{full}/check-runs/{id}"),
        "html_url": format!("https://github.com/{full}/runs/{id}"),
        "details_url": run.get("details_url").cloned().unwrap_or(Value::Null),
        "status": run.get("status").cloned().unwrap_or(json!("queued")),
        "conclusion": run.get("conclusion").cloned().unwrap_or(Value::Null),
        "started_at": run.get("started_at").cloned().unwrap_or(json!("2018-05-04T01:14:52Z")),
        "completed_at": run.get("completed_at").cloned().unwrap_or(Value::Null),
        "output": {
            "title": run["output"]["title"],
            "summary": run["output"]["summary"],
            "text": run["output"]["text"],
            "annotations_count": 0,
            "annotations_url": format!("https://api.github.com/repos/{full}/check-runs/{id}/annotations"),
        },
        "name": run["name"],
        "check_suite": {"id": 5},
        "app": {"id": 1, "slug": "gannet", "name": "gannet"},
        "pull_requests": [],
    });
    let status = if method == "POST" { 201 } else { 200 };
    seen(inner, Some(id), status);
    answer(status, reply)
}

fn root_of(repo: &Repo, c: &Commit) -> String {
    repo.roots[&c.sha].clone()
}

fn list_tree(repo: &Repo, sha: &str, at: &str, recursive: bool, out: &mut Vec<Value>) {
    for (name, mode, kind, child) in &repo.trees[sha] {
        let path = if recursive {
            join(at, name)
        } else {
            name.clone()
        };
        out.push(json!({"path": path, "mode": mode, "type": kind, "sha": child, "url": "https://api.github.com/x"}));
        if recursive && *kind == "tree" {
            list_tree(repo, child, &join(at, name), true, out);
        }
    }
}

fn ancestors(repo: &Repo, sha: &str) -> Vec<String> {
    let mut order = Vec::new();
    let mut queue = VecDeque::from([sha.to_owned()]);
    let mut seen = HashSet::new();
    while let Some(s) = queue.pop_front() {
        if !seen.insert(s.clone()) {
            continue;
        }
        if let Some(c) = repo.commits.get(&s) {
            queue.extend(c.parents.iter().cloned());
        }
        order.push(s);
    }
    order
}

/// GitHub's compare: head's files against the merge base, at most 300 of them.
fn compare(repo: &Repo, basehead: &str) -> Response {
    let Some((base, head)) = basehead.split_once("...") else {
        return not_found("Not Found");
    };
    let (Some(_), Some(head_commit)) = (repo.commits.get(base), repo.commits.get(head)) else {
        return not_found("Not Found");
    };
    let head_line = ancestors(repo, head);
    let base_line = ancestors(repo, base);
    let merge_base = head_line.iter().find(|s| base_line.contains(s)).cloned();
    // GitHub answers two commits that share no history with a 404.
    let Some(merge_base_commit) = merge_base.as_ref().and_then(|m| repo.commits.get(m)) else {
        return not_found(&format!("No common ancestor between {base} and {head}."));
    };
    let commit_object = |c: &Commit| {
        json!({
            "sha": c.sha,
            "node_id": "C_fake",
            "commit": git_commit(c, &root_of(repo, c)),
            "url": "https://api.github.com/repos/o/r/commits/x",
            "html_url": "https://github.com/o/r/commit/x",
            "parents": c.parents.iter().map(|p| json!({"sha": p})).collect::<Vec<_>>(),
        })
    };
    let status = if base == head {
        "identical"
    } else if head_line.iter().any(|s| s == base) {
        "ahead"
    } else if base_line.iter().any(|s| s == head) {
        "behind"
    } else {
        "diverged"
    };
    let old = &merge_base_commit.files;
    let new = &head_commit.files;
    let mut files = Vec::new();
    let added: Vec<&String> = new.keys().filter(|p| !old.contains_key(*p)).collect();
    let mut renamed_to = HashSet::new();
    for (path, entry) in old {
        match new.get(path) {
            Some(now) if now == entry => {}
            Some(_) => files.push(json!({"sha": "x", "filename": path, "status": "modified", "additions": 1, "deletions": 1, "changes": 2})),
            None => match added.iter().find(|a| new[**a] == *entry && !renamed_to.contains(**a)) {
                Some(to) => {
                    renamed_to.insert((*to).clone());
                    files.push(json!({"sha": "x", "filename": to, "previous_filename": path, "status": "renamed", "additions": 0, "deletions": 0, "changes": 0}));
                }
                None => files.push(json!({"sha": "x", "filename": path, "status": "removed", "additions": 0, "deletions": 1, "changes": 1})),
            },
        }
    }
    for path in added.into_iter().filter(|a| !renamed_to.contains(*a)) {
        files.push(json!({"sha": "x", "filename": path, "status": "added", "additions": 1, "deletions": 0, "changes": 1}));
    }
    files.truncate(300);
    let behind = base_line
        .iter()
        .take_while(|s| Some(*s) != merge_base.as_ref())
        .count();
    let ahead = head_line
        .iter()
        .take_while(|s| Some(*s) != merge_base.as_ref())
        .count();
    answer(
        200,
        json!({
            "url": "https://api.github.com/repos/o/r/compare/x",
            "base_commit": commit_object(&repo.commits[base]),
            "merge_base_commit": commit_object(merge_base_commit),
            "status": status,
            "ahead_by": ahead,
            "behind_by": behind,
            "total_commits": ahead,
            "commits": [],
            "files": files,
        }),
    )
}

fn authorized(inner: &Inner, authorization: Option<&str>) -> bool {
    let Some(value) = authorization else {
        return false;
    };
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("token "))
        .unwrap_or("");
    match &inner.credentials {
        Credentials::Token(t) => token == t,
        Credentials::App { .. } => inner.issued.iter().any(|t| t == token),
    }
}

/// `POST /app/installations/{id}/access_tokens`: checks the App's JWT (RS256, signed with the
/// App's key, `iss` = app id) and issues a fresh installation token.
fn issue_token(inner: &mut Inner, id: &str, authorization: Option<&str>) -> Response {
    let Credentials::App {
        app_id,
        installation_id,
        public_pem,
        expires_at,
    } = &inner.credentials
    else {
        return not_found("Not Found");
    };
    if id != installation_id.to_string() {
        return not_found("Not Found");
    }
    let jwt = authorization
        .and_then(|a| a.strip_prefix("Bearer "))
        .unwrap_or("");
    #[derive(serde::Deserialize)]
    struct Claims {
        iss: u64,
        iat: u64,
        exp: u64,
    }
    use octocrab::jsonwebtoken::{decode, Algorithm, DecodingKey, Validation};
    let key = DecodingKey::from_rsa_pem(public_pem.as_bytes()).unwrap();
    let claims = match decode::<Claims>(jwt, &key, &Validation::new(Algorithm::RS256)) {
        Ok(data) => data.claims,
        Err(_) => {
            return answer(
                401,
                json!({"message": "A JSON web token could not be decoded"}),
            );
        }
    };
    if claims.iss != *app_id || claims.exp <= claims.iat || claims.exp - claims.iat > 660 {
        return answer(
            401,
            json!({"message": "'Issuer' claim ('iss') must be an Integer"}),
        );
    }
    let token = format!("ghs_fake{}", inner.issued.len() + 1);
    inner.issued.push(token.clone());
    answer(
        201,
        json!({"token": token, "expires_at": expires_at, "permissions": {"contents": "read", "statuses": "write"}, "repository_selection": "all"}),
    )
}

async fn codeload_handler(State(state): State<Shared>, uri: Uri, headers: HeaderMap) -> Response {
    let mut inner = state.lock().unwrap();
    inner.seen.push(Seen {
        server: "codeload",
        method: "GET".into(),
        path: uri.path().to_owned(),
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    });
    if uri.query() != Some("token=CODELOAD_TOKEN") {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    }
    let parts: Vec<&str> = uri.path().trim_start_matches('/').split('/').collect();
    let [owner, name, "legacy.tar.gz", sha] = parts[..] else {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    };
    if let Some(bytes) = inner.tarballs.get(sha) {
        return tarball_response(bytes.clone());
    }
    let Some(commit) = inner
        .repos
        .get(&format!("{owner}/{name}"))
        .and_then(|r| r.commits.get(sha))
    else {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    };
    let top = format!("{owner}-{name}-{}", &sha[..7]);
    tarball_response(build_tarball(&top, sha, &commit.files))
}

fn tarball_response(bytes: Vec<u8>) -> Response {
    Response::builder()
        .header("content-type", "application/x-gzip")
        .body(Body::from(bytes))
        .unwrap()
}

/// A .tar.gz laid out as `git archive` writes it: a pax global header carrying the commit id,
/// then `top/` and every directory and file below it.
pub fn build_tarball(top: &str, sha: &str, files: &BTreeMap<String, (Mode, Vec<u8>)>) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    let record = format!("comment={sha}\n");
    let pax = format!("{} {record}", record.len() + 3);
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(tar::EntryType::XGlobalHeader);
    header.set_path("pax_global_header").unwrap();
    header.set_size(pax.len() as u64);
    header.set_cksum();
    tar.append(&header, pax.as_bytes()).unwrap();
    let mut dirs = BTreeSet::from([format!("{top}/")]);
    for path in files.keys() {
        let mut at = top.to_owned();
        for part in path.split('/').take(path.split('/').count() - 1) {
            at = format!("{at}/{part}");
            dirs.insert(format!("{at}/"));
        }
    }
    for dir in dirs {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_path(&dir).unwrap();
        h.set_mode(0o775);
        h.set_size(0);
        h.set_cksum();
        tar.append(&h, &[][..]).unwrap();
    }
    for (path, (mode, content)) in files {
        let mut h = tar::Header::new_ustar();
        let full = format!("{top}/{path}");
        match mode {
            Mode::Symlink => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_path(&full).unwrap();
                h.set_link_name_literal(content).unwrap();
                h.set_mode(0o777);
                h.set_size(0);
                h.set_cksum();
                tar.append(&h, &[][..]).unwrap();
            }
            _ => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_path(&full).unwrap();
                h.set_mode(if *mode == Mode::Executable {
                    0o775
                } else {
                    0o664
                });
                h.set_size(content.len() as u64);
                h.set_cksum();
                tar.append(&h, &content[..]).unwrap();
            }
        }
    }
    tar.into_inner().unwrap().finish().unwrap()
}

/// A .tar.gz with one entry written raw, path and all, so tests can offer what a well-behaved
/// archiver refuses to write (`..`, absolute paths, links out).
pub fn raw_tarball(entries: &[(&str, tar::EntryType, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (path, kind, link) in entries {
        let mut h = tar::Header::new_old();
        let name = &mut h.as_old_mut().name;
        name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_entry_type(*kind);
        h.set_mode(0o644);
        if !link.is_empty() {
            h.set_link_name_literal(link).unwrap();
        }
        let data: &[u8] = if *kind == tar::EntryType::Regular {
            b"evil"
        } else {
            b""
        };
        h.set_size(data.len() as u64);
        h.set_cksum();
        tar.append(&h, data).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}
