//! The test harness: moto on loopback (from `GANNET_MOTO_ENDPOINT`), commits as directories,
//! a recording `StepIo`, and a driver that runs a deployment through the core's state machine
//! one plugin step at a time, optionally running every step twice in a row.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aws_sdk_lambda::config::{Credentials, SharedCredentialsProvider};
use gannet_core::config::parse_app_config;
use gannet_core::deployment::{
    CancelMode, CancelRequest, Deployment, SyncStrategy, Trigger, TriggerKind,
};
use gannet_core::duration::Millis;
pub use gannet_core::fixture::RecordingIo as Recorder;
use gannet_core::machine::{self, Action};
use gannet_core::planner::{self, PlanInput};
use gannet_core::plugin::{Plugin, Plugins, StageResult, StepContext, StepError, StepOutcome};
use gannet_core::{AppId, CommitSha};

use crate::routing::AliasRouting;
use crate::target::{DeployTarget, Target};
use crate::LambdaPlugin;

/// The role every test function runs as (created in moto's IAM, which Lambda checks).
pub const ROLE: &str = "arn:aws:iam::123456789012:role/gannet-test";
pub const REGION: &str = "us-east-1";
pub const APP: &str = "demo:app/app.pipecd.yaml";

/// moto's endpoint; a clear failure (never a skip) when the tests are run without it.
pub fn moto_endpoint() -> String {
    let Ok(endpoint) = std::env::var("GANNET_MOTO_ENDPOINT") else {
        panic!(
            "GANNET_MOTO_ENDPOINT is not set: these tests need moto_server on loopback. Run `make test`, \
             or: scripts/moto.sh ensure && eval \"$(scripts/moto.sh start /tmp/motostate)\" \
             (and scripts/moto.sh stop /tmp/motostate afterwards)"
        );
    };
    assert!(
        endpoint.starts_with("http://127.0.0.1:"),
        "GANNET_MOTO_ENDPOINT must be a loopback address, got {endpoint}"
    );
    endpoint
}

/// A name no other test (or earlier run against the same moto) uses.
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

fn credentials() -> SharedCredentialsProvider {
    SharedCredentialsProvider::new(Credentials::new("testing", "testing", None, None, "tests"))
}

/// A target on moto, with `alias`.
pub fn moto_target(alias: &str) -> DeployTarget {
    DeployTarget {
        endpoint: Some(moto_endpoint()),
        alias: alias.to_owned(),
        ..DeployTarget::new("local", REGION)
    }
}

/// The plugin deploying to `target` with fixed test credentials.
pub fn plugin(target: DeployTarget) -> LambdaPlugin {
    LambdaPlugin {
        targets: vec![Target::new(target, Some(credentials()))],
    }
}

/// A raw Lambda client on moto, for checking state through the AWS API.
pub async fn lambda_client() -> aws_sdk_lambda::Client {
    let target = Target::new(moto_target("unused"), Some(credentials()));
    target.api().await.client().clone()
}

/// Sends a query-protocol call to one of moto's services (IAM, S3) with a placeholder
/// signature (moto does not check it).
async fn moto_call(
    service: &str,
    method: reqwest::Method,
    path: &str,
    body: Body,
) -> reqwest::Response {
    let auth = format!(
        "AWS4-HMAC-SHA256 Credential=testing/20240101/{REGION}/{service}/aws4_request, SignedHeaders=host, Signature=0"
    );
    let req = reqwest::Client::new()
        .request(method, format!("{}{path}", moto_endpoint()))
        .header("Authorization", auth);
    let req = match body {
        Body::Form(form) => req.form(&form),
        Body::Bytes(bytes) => req.header("Content-Type", "application/zip").body(bytes),
        Body::Empty => req,
    };
    req.send().await.expect("moto answers")
}

enum Body {
    Form(Vec<(&'static str, String)>),
    Bytes(Vec<u8>),
    Empty,
}

/// Creates [`ROLE`] in moto's IAM (again is fine).
pub async fn ensure_role() {
    let form = vec![
        ("Action", "CreateRole".to_owned()),
        ("Version", "2010-05-08".to_owned()),
        ("RoleName", "gannet-test".to_owned()),
        (
            "AssumeRolePolicyDocument",
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#.to_owned(),
        ),
    ];
    let status = moto_call("iam", reqwest::Method::POST, "/", Body::Form(form))
        .await
        .status();
    assert!(
        status.is_success() || status.as_u16() == 409,
        "CreateRole: {status}"
    );
}

/// Puts `bytes` at `s3://bucket/key` in moto's S3, creating the bucket.
pub async fn put_object(bucket: &str, key: &str, bytes: Vec<u8>) {
    let made = moto_call(
        "s3",
        reqwest::Method::PUT,
        &format!("/{bucket}"),
        Body::Empty,
    )
    .await;
    assert!(
        made.status().is_success(),
        "CreateBucket: {}",
        made.status()
    );
    let put = moto_call(
        "s3",
        reqwest::Method::PUT,
        &format!("/{bucket}/{key}"),
        Body::Bytes(bytes),
    )
    .await;
    assert!(put.status().is_success(), "PutObject: {}", put.status());
}

/// Zip-looking bytes (Lambda on moto hashes the code; it never unpacks it).
pub fn zip_bytes(content: &str) -> Vec<u8> {
    let mut bytes = b"PK\x03\x04".to_vec();
    bytes.extend_from_slice(content.as_bytes());
    bytes
}

/// A LambdaApp config; `pipeline` is the YAML list of stages, or empty for none.
pub fn app_config(pipeline: &str) -> String {
    let mut text =
        "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: web\n".to_owned();
    if !pipeline.is_empty() {
        text.push_str("  pipeline:\n    stages:\n");
        for line in pipeline.lines() {
            text.push_str("      ");
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

/// The canary pipeline of the issue, without its WAIT.
pub const CANARY: &str = "- name: LAMBDA_CANARY_ROLLOUT\n- name: LAMBDA_PROMOTE\n  with: {percent: 10}\n- name: LAMBDA_PROMOTE\n  with: {percent: 100}";

/// A function manifest deploying `fn.zip` as `name`; `extra` adds spec lines.
pub fn function_yaml(name: &str, role: &str, extra: &str) -> String {
    let mut text = format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: LambdaFunction\nspec:\n  name: {name}\n  role: {role}\n  handler: index.handler\n  runtime: python3.12\n  memory: 128\n  timeout: 10\n"
    );
    if !extra.contains("s3Bucket") && !extra.contains("image:") {
        text.push_str("  zipFile: fn.zip\n");
    }
    for line in extra.lines() {
        text.push_str("  ");
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// One commit of the app's repository: `app/app.pipecd.yaml`, `app/function.yaml` and
/// `app/fn.zip` in a directory of their own.
pub struct Commit {
    pub sha: CommitSha,
    dir: tempfile::TempDir,
}

impl Commit {
    pub fn new(sha_digit: char, app_yaml: &str, function_yaml: &str, zip: &[u8]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let app = dir.path().join("app");
        std::fs::create_dir_all(&app).expect("app dir");
        std::fs::write(app.join("app.pipecd.yaml"), app_yaml).expect("write app config");
        std::fs::write(app.join("function.yaml"), function_yaml).expect("write manifest");
        std::fs::write(app.join("fn.zip"), zip).expect("write zip");
        Self {
            sha: CommitSha::parse(&sha_digit.to_string().repeat(40)).expect("sha"),
            dir,
        }
    }

    pub fn app_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("app")
    }
}

/// How each step is delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    Once,
    /// Every step runs again at once (a duplicate message), and must leave the same state.
    Twice,
}

/// A deployment being driven, with the stage logs so far.
pub struct Run {
    pub deployment: Deployment,
    pub logs: BTreeMap<String, Vec<String>>,
    plugin: Arc<LambdaPlugin>,
    alias: String,
    now: u64,
}

impl Run {
    /// Plans `commit` (with `running` live) through the core planner and this plugin.
    pub fn plan(plugin: LambdaPlugin, commit: &Commit, running: Option<&Commit>) -> Self {
        Self::try_plan(plugin, commit, running).expect("the deployment plans")
    }

    /// [`Run::plan`], or why the planner refused it.
    pub fn try_plan(
        plugin: LambdaPlugin,
        commit: &Commit,
        running: Option<&Commit>,
    ) -> Result<Self, planner::PlanError> {
        let alias = plugin.targets[0].config.alias.clone();
        let plugin = Arc::new(plugin);
        let text =
            std::fs::read_to_string(commit.app_dir().join("app.pipecd.yaml")).expect("read config");
        let app = parse_app_config("app/app.pipecd.yaml", &text).expect("valid app config");
        let trigger = Trigger {
            kind: TriggerKind::OnCommit,
            commander: String::new(),
            strategy: SyncStrategy::Auto,
        };
        let plugins = Plugins::new(vec![plugin.clone() as Arc<dyn Plugin>]);
        let running_sha = running.map(|c| c.sha.clone());
        let app_dir = commit.app_dir();
        let read = |rel: &str| std::fs::read_to_string(app_dir.join(rel)).ok();
        let plan = planner::plan(&PlanInput {
            app: &app,
            trigger: &trigger,
            commit_message: "change",
            changed_files: &[],
            running_commit: running_sha.as_ref(),
            plugins: &plugins,
            read: &read,
        })?;
        let mut deployment = Deployment::test().with_stages(plan.stages);
        deployment.app = AppId::parse(APP).expect("app id");
        deployment.kind = "LambdaApp".into();
        deployment.commit.sha = commit.sha.clone();
        deployment.running_commit = running_sha;
        deployment.strategy = Some(plan.strategy);
        Ok(Self {
            deployment,
            logs: BTreeMap::new(),
            plugin,
            alias,
            now: 10_000,
        })
    }

    /// The planned stage names, hidden ones included.
    pub fn stage_names(&self) -> Vec<&str> {
        self.deployment
            .stages
            .iter()
            .map(|s| s.name.as_str())
            .collect()
    }

    /// Runs until the stage now running (or next to run) has finished, or the deployment has;
    /// returns that stage's index. With [`Delivery::Twice`] every step runs again at once and
    /// must leave the AWS state as the first run left it.
    pub async fn run_stage(&mut self, commits: &Commits<'_>, delivery: Delivery) -> Option<usize> {
        let mut current = None;
        for _ in 0..50 {
            self.now += 1000;
            match machine::next_action(&self.deployment, Millis(self.now)) {
                Action::Nothing => return current,
                Action::Transition(t) => {
                    self.deployment = t.deployment;
                    if current.is_some_and(|i| self.deployment.stages[i].status.is_finished()) {
                        return current;
                    }
                }
                Action::Run { index } => {
                    if current.is_some_and(|i| i != index) {
                        return current;
                    }
                    current = Some(index);
                    self.deployment =
                        machine::start_stage(&self.deployment, index, Millis(self.now));
                    let outcome = self.step(index, commits).await;
                    if delivery == Delivery::Twice {
                        let before = state_of(&self.deployment, &self.alias).await;
                        let again = self.step(index, commits).await;
                        let after = state_of(&self.deployment, &self.alias).await;
                        assert_eq!(
                            before, after,
                            "a repeated step of stage {} changed AWS state",
                            self.deployment.stages[index].id
                        );
                        assert_eq!(
                            again, outcome,
                            "a repeated step of stage {} answered differently",
                            self.deployment.stages[index].id
                        );
                    }
                    let t =
                        machine::apply_outcome(&self.deployment, index, &outcome, Millis(self.now));
                    self.deployment = t.deployment;
                    if self.deployment.stages[index].status.is_finished() {
                        return current;
                    }
                }
            }
        }
        panic!(
            "stage did not finish within 50 steps: {:#?}",
            self.deployment.stages
        );
    }

    /// Runs every remaining stage.
    pub async fn run_all(&mut self, commits: &Commits<'_>, delivery: Delivery) {
        for _ in 0..20 {
            if self.deployment.status.is_terminal() {
                return;
            }
            self.run_stage(commits, delivery).await;
        }
        panic!("deployment did not finish: {:#?}", self.deployment);
    }

    /// Asks for a cancel, as the API would.
    pub fn cancel(&mut self, mode: CancelMode) {
        self.deployment.cancel = Some(CancelRequest {
            mode,
            by: "tester".into(),
            at: Millis(self.now),
        });
    }

    /// One step of stage `index`; its saved metadata is merged into the deployment.
    async fn step(&mut self, index: usize, commits: &Commits<'_>) -> StepOutcome {
        let io = Recorder::default();
        let stage = self.deployment.stages[index].clone();
        let app_dir = commits.target.app_dir();
        let running_dir = commits.running.map(Commit::app_dir);
        let result = self
            .plugin
            .execute_step(StepContext {
                deployment: &self.deployment,
                stage: &stage,
                app_dir: &app_dir,
                running_app_dir: running_dir.as_deref(),
                now: Millis(self.now),
                io: &io,
            })
            .await;
        let saved = io.saved();
        self.deployment.stages[index].metadata.extend(saved);
        let lines = io.logs();
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(StepError::Permanent(reason)) => StepOutcome::Done(StageResult::Failure { reason }),
            Err(err @ StepError::Transient { .. }) => {
                panic!(
                    "stage {} hit a transient error: {err:?} (logs: {lines:?})",
                    stage.id
                )
            }
        };
        self.logs
            .entry(stage.id.to_string())
            .or_default()
            .extend(lines);
        outcome
    }

    pub fn stage_log(&self, id: &str) -> String {
        self.logs.get(id).map(|l| l.join("\n")).unwrap_or_default()
    }
}

/// The directories of the deployment's commit and of the running commit.
pub struct Commits<'a> {
    pub target: &'a Commit,
    pub running: Option<&'a Commit>,
}

/// What AWS says about the functions a deployment touches: versions and alias routing.
#[derive(Debug, PartialEq)]
pub struct AwsState {
    pub functions: BTreeMap<String, FunctionState>,
}

#[derive(Debug, PartialEq)]
pub struct FunctionState {
    pub versions: Vec<String>,
    pub alias: Option<AliasRouting>,
    pub code_sha256: String,
}

async fn state_of(d: &Deployment, alias: &str) -> AwsState {
    let mut functions = BTreeMap::new();
    for stage in &d.stages {
        if let Some(name) = stage.metadata.get(crate::meta::FUNCTION) {
            functions.insert(name.clone(), function_state(name, alias).await);
        }
    }
    AwsState { functions }
}

/// The published versions, the alias `alias` and the `$LATEST` code of `name`.
pub async fn function_state(name: &str, alias: &str) -> FunctionState {
    let client = lambda_client().await;
    let versions = match client
        .list_versions_by_function()
        .function_name(name)
        .send()
        .await
    {
        Ok(out) => out
            .versions()
            .iter()
            .filter_map(|v| v.version())
            .filter(|v| *v != "$LATEST")
            .map(str::to_owned)
            .collect(),
        Err(_) => Vec::new(),
    };
    let routing = match client
        .get_alias()
        .function_name(name)
        .name(alias)
        .send()
        .await
    {
        Ok(out) => Some(AliasRouting {
            version: out.function_version().unwrap_or_default().to_owned(),
            weights: out
                .routing_config()
                .and_then(|r| r.additional_version_weights())
                .map(|w| w.iter().map(|(k, v)| (k.clone(), *v)).collect())
                .unwrap_or_default(),
        }),
        Err(_) => None,
    };
    let code_sha256 = match client.get_function().function_name(name).send().await {
        Ok(out) => out
            .configuration()
            .and_then(|c| c.code_sha256())
            .unwrap_or_default()
            .to_owned(),
        Err(_) => String::new(),
    };
    FunctionState {
        versions,
        alias: routing,
        code_sha256,
    }
}

/// The tags on function `name`.
pub async fn tags_of(name: &str) -> BTreeMap<String, String> {
    let out = lambda_client()
        .await
        .get_function()
        .function_name(name)
        .send()
        .await
        .expect("GetFunction");
    out.tags()
        .map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

/// The `CodeSha256` Lambda reports for `bytes`.
pub fn sha256_b64(bytes: &[u8]) -> String {
    match crate::function::Code::zip(bytes.to_vec()) {
        crate::function::Code::Zip { sha256, .. } => sha256,
        _ => unreachable!("a zip"),
    }
}
