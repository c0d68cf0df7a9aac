//! The harness that plays the Lambda service for the functions, against moto on loopback.
//!
//! It provisions a table and queues (unique names per lab), a webhook secret in Secrets
//! Manager and a git repository in a tempdir, builds each function's [`Runtime`] from the
//! same environment the SAM template gives them, and invokes the real handlers with
//! real-shaped events: a Function URL request carrying a signed push, SQS events built from
//! the messages it receives from moto's SQS (deleting afterwards every record the handler did
//! not report as failed, as the event source mapping does), and the Scheduler's input.
//! Every loop is bounded and panics saying what it waited for.

#![allow(dead_code)] // Each test uses its own part of the harness.

pub mod counting;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use aws_sdk_dynamodb::config::{Credentials, SharedCredentialsProvider};
use aws_sdk_sqs::types::{
    DeleteMessageBatchRequestEntry, Message as SqsMessage, MessageSystemAttributeName,
};
use gannet_aws::{
    provision, sdk_config, ClientOptions, DynamoStore, ProvisionOptions, Provisioned, SqsOptions,
    SqsQueue, StoreOptions, SystemClock,
};
use gannet_domain::deployment::{Deployment, StageStatus};
use gannet_domain::ports::{DeploymentFilter, QueueName, Store};
use gannet_domain::DeploymentId;
use gannet_functions::{Clients, Function, FunctionConfig, JobClients, Runtime};
use lambda_runtime::{Context, LambdaEvent};
use serde_json::{json, Value};

use counting::CountingProxy;

pub mod builds;
pub mod stack;

pub const REGION: &str = "us-east-1";
pub const SECRET: &str = "functions-e2e-webhook-secret";
/// How long a record received by the harness stays hidden (the template's is 6× the timeout).
pub const VISIBILITY_SECONDS: i32 = 20;
/// The bound on driving one deployment.
pub const LIMIT: Duration = Duration::from_secs(60);

/// moto's endpoint; a loud failure (never a skip) when the tests run without it.
pub fn moto_endpoint() -> String {
    let Ok(endpoint) = std::env::var("GANNET_MOTO_ENDPOINT") else {
        panic!(
            "GANNET_MOTO_ENDPOINT is not set: the functions tests need moto_server on loopback. \
             Run `make test`, or: scripts/moto.sh ensure && \
             eval \"$(scripts/moto.sh start /tmp/moto-functions)\" \
             (and scripts/moto.sh stop /tmp/moto-functions afterwards)"
        );
    };
    assert!(
        endpoint.starts_with("http://127.0.0.1:"),
        "GANNET_MOTO_ENDPOINT must be a loopback address, got {endpoint}"
    );
    endpoint
}

/// The Lambda plugin reads credentials from the standard chain: give it moto's test ones
/// (as `make test` does) before any test reads the environment.
fn test_credentials() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (name, value) in [
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing"),
            ("AWS_EC2_METADATA_DISABLED", "true"),
        ] {
            if std::env::var_os(name).is_none() {
                std::env::set_var(name, value);
            }
        }
    });
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

/// A port nothing listens on: clients pointed there fail to connect.
pub fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

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
    dir: tempfile::TempDir,
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
        git(self.path(), &["rev-parse", "HEAD"])
    }
}

/// A push payload as GitHub sends it, for `repo` (whose clone URL is its path) at `after`.
pub fn push_payload(repo: &Repo, after: &str) -> String {
    let path = repo.path().display().to_string();
    json!({
        "ref": "refs/heads/main",
        "before": "0000000000000000000000000000000000000000",
        "after": after,
        "created": false,
        "deleted": false,
        "forced": false,
        "head_commit": {"id": after, "message": "change"},
        "repository": {"name": "shop", "full_name": "acme/shop", "html_url": "https://github.com/acme/shop", "clone_url": path},
        "pusher": {"name": "e2e"},
    })
    .to_string()
}

/// A Lambda Function URL event (payload format 2.0) for a webhook delivery.
pub fn function_url_event(headers: &[(&str, &str)], method: &str, body: &str) -> String {
    let headers: serde_json::Map<String, Value> = [
        ("content-type", "application/json"),
        ("user-agent", "GitHub-Hookshot/e2e"),
        ("host", "e2e.lambda-url.us-east-1.on.aws"),
    ]
    .iter()
    .chain(headers)
    .map(|(k, v)| ((*k).to_owned(), json!(v)))
    .collect();
    json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/",
        "rawQueryString": "",
        "headers": headers,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "e2e",
            "domainName": "e2e.lambda-url.us-east-1.on.aws",
            "domainPrefix": "e2e",
            "http": {"method": method, "path": "/", "protocol": "HTTP/1.1", "sourceIp": "140.82.115.1", "userAgent": "GitHub-Hookshot/e2e"},
            "requestId": unique("req"),
            "routeKey": "$default",
            "stage": "$default",
            "time": "01/Jan/2025:00:00:00 +0000",
            "timeEpoch": 1735689600000u64
        },
        "body": body,
        "isBase64Encoded": false
    })
    .to_string()
}

/// An HTTP API event (payload format 2.0) as the lab's API Gateway sends it (API `e2e` in
/// account 123456789012), signed by the IAM `principal` (`None`: no IAM authorizer context).
pub fn http_api_event(
    principal: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Value {
    let authorizer = match principal {
        Some(arn) => {
            json!({"iam": {"accessKey": "AKIA", "accountId": "123456789012", "callerId": "AIDA", "principalOrgId": null, "userArn": arn, "userId": "AIDA"}})
        }
        None => Value::Null,
    };
    let mut headers = json!({"host": "e2e.execute-api.us-east-1.amazonaws.com"});
    if body.is_some() {
        headers["content-type"] = json!("application/json");
    }
    json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": headers,
        "body": body.map(|b| b.to_string()),
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "e2e",
            "authorizer": authorizer,
            "domainName": "e2e.execute-api.us-east-1.amazonaws.com",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "10.0.0.1", "userAgent": "e2e"},
            "requestId": unique("req"),
            "routeKey": "$default",
            "stage": "$default",
            "time": "01/Jan/2025:00:00:00 +0000",
            "timeEpoch": 1735689600000u64
        },
        "isBase64Encoded": false
    })
}

/// What the lab is made of beyond the defaults.
#[derive(Default)]
pub struct LabOptions {
    /// More `GANNET_REPOS` entries.
    pub extra_repos: Vec<Value>,
    /// `GANNET_RESUME_INTERVAL`; 1s when `None`.
    pub resume_interval: Option<&'static str>,
    /// More `GANNET_PLUGINS` entries (a plugin's settings by its name).
    pub extra_plugins: serde_json::Map<String, Value>,
    /// The lab's own resources from gannet's stack on the IAM-enforcing moto, each function
    /// running as its role; `None`: made by `provision` on moto, with moto's test keys.
    pub stack: Option<stack::Template>,
    /// gannet's private key for sealed secrets (PEM), put in an SSM `SecureString` parameter
    /// whose ARN is `GANNET_SEALING_KEY_ARN` (on the SAM stack, its `SealingKeyArn`).
    pub sealing_key: Option<String>,
    /// The sealing key in a Secrets Manager secret instead.
    pub sealing_key_in_secrets_manager: bool,
    /// GitHub's API for the repositories with `github` (the GitHub fake): its base URL and the
    /// credentials' JSON, put in a Secrets Manager secret whose ARN is
    /// `GANNET_GITHUB_SECRET_ARN` (on the SAM stack, its `GithubSecretArn`).
    pub github: Option<GithubApi>,
    /// The Lambda target's `planPreview.roleArn`: the role plan previews read with.
    pub lambda_preview_role: Option<String>,
    /// More variables every function gets (`GANNET_CONSOLE_URL`, say).
    pub extra_env: Vec<(&'static str, String)>,
}

/// Where the functions reach GitHub's API, and as whom.
pub struct GithubApi {
    pub api_url: String,
    /// `{"token"}` or a GitHub App's `{"appId", "installationId", "privateKey"}`.
    pub secret_json: String,
}

/// The IAM principal the lab's API requests are signed by, unless a test says otherwise:
/// mapped to the role admin (an unmapped principal is a viewer).
pub const OPS_PRINCIPAL: &str = "arn:aws:iam::123456789012:user/ops";
/// Every session of the `Admin` role: mapped to `erin`, an admin, by a prefix entry.
pub const ADMIN_PRINCIPALS: &str = "arn:aws:sts::123456789012:assumed-role/Admin/*";

/// Moto, the provisioned resources, the repository and one runtime per function.
pub struct Lab {
    pub rt: tokio::runtime::Runtime,
    pub proxy: CountingProxy,
    /// Clients straight to moto: the harness's own (the event source mapping, state reads).
    pub direct: Clients,
    pub made: Provisioned,
    pub config: FunctionConfig,
    pub repo: Repo,
    pub repo_id: String,
    pub functions: BTreeMap<Function, Runtime>,
    /// Invocations of each function's handler.
    pub invocations: BTreeMap<Function, u64>,
    /// Time spent inside each function's handler (what Lambda bills).
    pub busy: BTreeMap<Function, Duration>,
    /// The event source mapping's work: non-empty receives and delete calls.
    pub esm: BTreeMap<&'static str, u64>,
    /// Reads state without going through any function.
    pub store: DynamoStore,
    /// The jobs' project, bucket and log group, clients straight to moto for them, and the
    /// keys of the builds played so far.
    pub jobs: gannet_aws::JobsConfig,
    pub direct_jobs: JobClients,
    pub played: std::collections::BTreeSet<String>,
    /// The HTTP API the api function answers (its events' `requestContext.apiId`).
    pub api_id: String,
    /// On a stack, each consumer's SQS client straight to moto, with its role (the event
    /// source mapping's).
    esm_clients: BTreeMap<Function, aws_sdk_sqs::Client>,
    /// The stack the lab runs on, if it does.
    pub stack: Option<stack::Stack>,
    /// The SSM parameter holding the sealing key, when the lab has one.
    pub sealing_key_arn: Option<String>,
    _git_cache: tempfile::TempDir,
    _sealed_dir: tempfile::TempDir,
}

/// The lab's repositories, plugins and callers (JSON), as the SAM stack's parameters.
struct StackSettings {
    repos: String,
    plugins: String,
    callers: String,
    /// The GitHub credentials' JSON for the `GithubSecretArn` parameter (the webhook secret's
    /// ARN otherwise, as no test reads GitHub through it).
    github_secret: Option<String>,
}

/// Makes the webhook secret `name` in Secrets Manager; its ARN.
fn create_secret(rt: &tokio::runtime::Runtime, direct: &Clients, name: &str) -> String {
    rt.block_on(
        direct
            .secrets
            .create_secret()
            .name(name)
            .secret_string(SECRET)
            .send(),
    )
    .expect("create the webhook secret")
    .arn()
    .expect("secret ARN")
    .to_owned()
}

/// Makes the Secrets Manager secret `<name>-github` holding GitHub credentials (`json`); its ARN.
fn create_github_secret(
    rt: &tokio::runtime::Runtime,
    direct: &Clients,
    name: &str,
    json: &str,
) -> String {
    rt.block_on(
        direct
            .secrets
            .create_secret()
            .name(format!("{name}-github"))
            .secret_string(json)
            .send(),
    )
    .expect("create the GitHub secret")
    .arn()
    .expect("secret ARN")
    .to_owned()
}

/// Puts `pem` in the SSM `SecureString` parameter `/gannet/<name>/sealing-key`, or in the
/// Secrets Manager secret `gannet/<name>/sealing-key`; its ARN.
fn put_sealing_key(
    rt: &tokio::runtime::Runtime,
    direct: &Clients,
    name: &str,
    (pem, in_secrets_manager): (&str, bool),
) -> String {
    if in_secrets_manager {
        return rt
            .block_on(
                direct
                    .secrets
                    .create_secret()
                    .name(format!("gannet/{name}/sealing-key"))
                    .secret_string(pem)
                    .send(),
            )
            .expect("create the sealing key's secret")
            .arn()
            .expect("secret ARN")
            .to_owned();
    }
    let parameter = format!("/gannet/{name}/sealing-key");
    rt.block_on(
        direct
            .ssm
            .put_parameter()
            .name(&parameter)
            .value(pem)
            .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
            .send(),
    )
    .expect("put the sealing key");
    format!("arn:aws:ssm:{REGION}:123456789012:parameter{parameter}")
}

/// Where the lab's table, queues, secret and jobs' resources are, and each function's clients.
struct Resources {
    proxy: CountingProxy,
    direct: Clients,
    direct_jobs: JobClients,
    made: Provisioned,
    jobs: gannet_aws::JobsConfig,
    secret_arn: String,
    sealing_key_arn: Option<String>,
    api_id: String,
    stack: Option<stack::Stack>,
    /// Each function's environment as its template gives it (empty without a stack).
    environment: BTreeMap<Function, BTreeMap<String, String>>,
    /// Each function's clients (and the stage function's job clients), through the proxy.
    clients: BTreeMap<Function, (Clients, JobClients)>,
    /// On a stack, each function's SQS client straight to moto, with its role.
    esm_clients: BTreeMap<Function, aws_sdk_sqs::Client>,
}

impl Resources {
    /// `provision` on moto, moto's test keys for every function.
    fn provisioned(
        rt: &tokio::runtime::Runtime,
        name: &str,
        sealing_key: Option<(&str, bool)>,
    ) -> Self {
        let moto = moto_endpoint();
        let proxy = rt.block_on(CountingProxy::start(&moto));
        let direct = rt.block_on(clients_on(&moto));
        let made = rt
            .block_on(provision(
                &direct.dynamodb,
                &direct.sqs,
                name,
                &ProvisionOptions {
                    visibility_timeout_seconds: u32::try_from(VISIBILITY_SECONDS).unwrap_or(30),
                    ..ProvisionOptions::default()
                },
            ))
            .expect("provision on moto");
        let secret_arn = create_secret(rt, &direct, name);
        let sealing_key_arn = sealing_key.map(|pem| put_sealing_key(rt, &direct, name, pem));
        let direct_jobs = JobClients::new(&rt.block_on(sdk_on(&moto)));
        let jobs = rt.block_on(builds::provision_jobs(&direct_jobs, name));
        let via_proxy = rt.block_on(sdk_on(&proxy.url));
        let clients = Function::ALL
            .into_iter()
            .map(|f| (f, (Clients::new(&via_proxy), JobClients::new(&via_proxy))))
            .collect();
        Self {
            proxy,
            direct,
            direct_jobs,
            made,
            jobs,
            secret_arn,
            sealing_key_arn,
            api_id: "e2e".to_owned(),
            stack: None,
            environment: BTreeMap::new(),
            clients,
            esm_clients: BTreeMap::new(),
        }
    }

    /// gannet's stack from `template` on the IAM-enforcing moto; each function's clients
    /// with its role's credentials.
    fn on_stack(
        rt: &tokio::runtime::Runtime,
        template: stack::Template,
        name: &str,
        settings: &StackSettings,
        sealing_key: Option<(&str, bool)>,
    ) -> Self {
        let moto = stack::IamMoto::from_env();
        let proxy = rt.block_on(CountingProxy::start(&moto.endpoint));
        let admin = rt.block_on(moto.sdk(&moto.endpoint, moto.admin.clone()));
        let direct = Clients::new(&admin);
        let direct_jobs = JobClients::new(&admin);
        let sealing_key_arn = sealing_key.map(|pem| put_sealing_key(rt, &direct, name, pem));
        let (secret_arn, stack) = match template {
            stack::Template::Sam => {
                let secret_arn = create_secret(rt, &direct, name);
                let github_secret_arn = match &settings.github_secret {
                    Some(json) => create_github_secret(rt, &direct, name, json),
                    None => secret_arn.clone(),
                };
                let mut parameters = vec![
                    ("WebhookSecretArn", secret_arn.clone()),
                    ("GithubSecretArn", github_secret_arn),
                    ("ReposJson", settings.repos.clone()),
                    ("PluginsJson", settings.plugins.clone()),
                    ("CallerNamesJson", settings.callers.clone()),
                ];
                if let Some(arn) = &sealing_key_arn {
                    parameters.push(("SealingKeyArn", arn.clone()));
                }
                let made = stack::Stack::create(&moto, template, name, &parameters, &[]);
                (secret_arn, made)
            }
            stack::Template::Cdk => {
                assert!(
                    sealing_key_arn.is_none() && settings.github_secret.is_none(),
                    "the CDK example app has no sealing key and reads no GitHub; use the SAM stack"
                );
                // The example app reads its secrets from SSM parameters in the account it
                // names, which becomes moto's; its repositories, plugins and callers are the
                // lab's (below), as its props would say.
                let parameter = format!("/gannet/{name}/webhook-secret");
                rt.block_on(
                    direct
                        .ssm
                        .put_parameter()
                        .name(&parameter)
                        .value(SECRET)
                        .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
                        .send(),
                )
                .expect("put the webhook secret");
                let secret_arn = format!("arn:aws:ssm:{REGION}:123456789012:parameter{parameter}");
                let replace = [
                    ("111122223333", "123456789012".to_owned()),
                    (
                        "parameter/gannet/webhook-secret",
                        format!("parameter{parameter}"),
                    ),
                ];
                let made = stack::Stack::create(&moto, template, name, &[], &replace);
                (secret_arn, made)
            }
        };
        let mut clients = BTreeMap::new();
        let mut esm_clients = BTreeMap::new();
        for f in Function::ALL {
            let role = stack.function(f)["role"]
                .as_str()
                .expect("a role")
                .to_owned();
            let credentials = rt.block_on(moto.assume(&role, f.name()));
            let sdk = rt.block_on(moto.sdk(&proxy.url, credentials.clone()));
            clients.insert(f, (Clients::new(&sdk), JobClients::new(&sdk)));
            let straight = rt.block_on(moto.sdk(&moto.endpoint, credentials));
            esm_clients.insert(f, aws_sdk_sqs::Client::new(&straight));
        }
        Self {
            proxy,
            direct,
            direct_jobs,
            made: stack.provisioned(),
            jobs: stack.jobs(),
            secret_arn,
            sealing_key_arn,
            api_id: stack.environment(Function::Api)["GANNET_API_ID"].clone(),
            environment: Function::ALL
                .into_iter()
                .map(|f| (f, stack.environment(f)))
                .collect(),
            stack: Some(stack),
            clients,
            esm_clients,
        }
    }
}

fn runtime_tokio() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Clients on `endpoint` with moto's test credentials.
pub async fn clients_on(endpoint: &str) -> Clients {
    Clients::new(&sdk_on(endpoint).await)
}

/// The SDK configuration on `endpoint` with moto's test credentials.
pub async fn sdk_on(endpoint: &str) -> aws_config::SdkConfig {
    sdk_config(&ClientOptions {
        region: REGION.to_owned(),
        endpoint: Some(endpoint.to_owned()),
        credentials: Some(SharedCredentialsProvider::new(Credentials::new(
            "testing", "testing", None, None, "e2e",
        ))),
    })
    .await
}

impl Lab {
    pub fn new(options: LabOptions) -> Self {
        test_credentials();
        let rt = runtime_tokio();
        let name = unique("fn");
        let repo = Repo::new();
        let repo_id = unique("shop");
        let git_cache = tempfile::tempdir().expect("tempdir");
        let sealed_dir = tempfile::tempdir().expect("tempdir");
        let mut repos = vec![
            json!({"id": repo_id, "url": repo.path().display().to_string(), "onFirstSight": "deploy"}),
        ];
        repos.extend(options.extra_repos);
        let settings = |lambda_endpoint: &str| {
            let mut plugins = json!({
                "lambda": {"deployTargets": [{"name": "moto", "region": REGION, "endpoint": lambda_endpoint}]},
                // Terraform (on PATH in `make test`) with moto's credentials.
                "terraform": {"deployTargets": [{"name": "moto", "env": {
                    "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                    "AWS_REGION": REGION, "TF_CLI_CONFIG_FILE": "/dev/null"}}]},
            });
            if let Some(role) = &options.lambda_preview_role {
                plugins["lambda"]["deployTargets"][0]["planPreview"] = json!({"roleArn": role});
            }
            if let Value::Object(map) = &mut plugins {
                map.extend(options.extra_plugins.clone());
            }
            StackSettings {
                repos: Value::Array(repos.clone()).to_string(),
                plugins: plugins.to_string(),
                callers: json!({
                    OPS_PRINCIPAL: {"name": "ops", "role": "admin"},
                    ADMIN_PRINCIPALS: {"name": "erin", "role": "admin"},
                    "arn:aws:sts::123456789012:assumed-role/Deployer/*": {"name": "alice", "role": "deployer"},
                    "arn:aws:iam::123456789012:user/ops/vic": "vic",
                    "arn:aws:iam::123456789012:user/ops/dora": {"name": "dora", "role": "deployer"}
                })
                .to_string(),
                github_secret: options.github.as_ref().map(|g| g.secret_json.clone()),
            }
        };
        let sealing_key = options
            .sealing_key
            .as_deref()
            .map(|pem| (pem, options.sealing_key_in_secrets_manager));
        let (resources, settings) = match options.stack {
            None => {
                let resources = Resources::provisioned(&rt, &name, sealing_key);
                let settings = settings(&resources.proxy.url);
                (resources, settings)
            }
            // The deploy targets are another account's: moto without IAM, with its test keys
            // (the stack's DeployTargetsPolicy, which would let the stage role assume their
            // roles, is not exercised).
            Some(template) => {
                let settings = settings(&moto_endpoint());
                (
                    Resources::on_stack(&rt, template, &name, &settings, sealing_key),
                    settings,
                )
            }
        };
        let made = &resources.made;
        let jobs = &resources.jobs;
        let queues: serde_json::Map<String, Value> = made
            .queues
            .iter()
            .map(|(q, urls)| {
                (
                    q.as_str().to_owned(),
                    json!({"queue": urls.queue, "dead_letter": urls.dead_letter}),
                )
            })
            .collect();
        // What the stack's template gives each function, or the whole environment without one.
        let mut provisioned: BTreeMap<&str, String> = [
            ("GANNET_TABLE", made.table.clone()),
            ("GANNET_QUEUES", Value::Object(queues).to_string()),
            ("GANNET_WEBHOOK_SECRET_ARN", resources.secret_arn.clone()),
            ("GANNET_JOBS_PROJECT", jobs.project.clone()),
            ("GANNET_JOBS_BUCKET", jobs.bucket.clone()),
            ("GANNET_JOBS_LOG_GROUP", jobs.log_group.clone()),
            // The lab's API Gateway: its events' requestContext (http_api_event).
            ("GANNET_API_ID", resources.api_id.clone()),
            ("GANNET_ACCOUNT_ID", "123456789012".to_owned()),
        ]
        .into_iter()
        .collect();
        if let Some(arn) = &resources.sealing_key_arn {
            provisioned.insert("GANNET_SEALING_KEY_ARN", arn.clone());
        }
        // What the lab sets either way: the endpoint (the proxy), its repositories, plugins
        // and callers (the SAM stack's parameters already; the CDK example's props otherwise),
        // and intervals in seconds where the template's are minutes.
        let mut lab: BTreeMap<&str, String> = [
            ("AWS_REGION", REGION.to_owned()),
            ("AWS_ENDPOINT_URL", resources.proxy.url.clone()),
            ("GANNET_REPOS", settings.repos),
            ("GANNET_PLUGINS", settings.plugins),
            ("GANNET_CALLER_NAMES", settings.callers),
            (
                "GANNET_RESUME_INTERVAL",
                options.resume_interval.unwrap_or("1s").to_owned(),
            ),
            ("GANNET_POLL_INTERVAL", "1m".to_owned()),
        ]
        .into_iter()
        .collect();
        // On a stack, GithubSecretArn already names the GitHub secret.
        if let Some(github) = &options.github {
            if resources.stack.is_none() {
                let arn = create_github_secret(&rt, &resources.direct, &name, &github.secret_json);
                lab.insert("GANNET_GITHUB_SECRET_ARN", arn);
            }
            lab.insert("GANNET_GITHUB_API_URL", github.api_url.clone());
        }
        lab.extend(options.extra_env.iter().cloned());
        let config_of = |f: Function| {
            let template = resources.environment.get(&f);
            let lookup = |name: &str| {
                lab.get(name).cloned().or_else(|| match template {
                    Some(env) => env.get(name).cloned(),
                    None => provisioned.get(name).cloned(),
                })
            };
            let mut config =
                FunctionConfig::from_lookup(&lookup, Some(&gannet_plugins::registry()))
                    .unwrap_or_else(|e| {
                        panic!("the {f} function's environment is a valid config: {e}")
                    });
            config.git_cache = git_cache.path().to_owned();
            config.sealed_dir = sealed_dir.path().to_owned();
            config
        };
        let config = config_of(Function::Stage);
        let functions = Function::ALL
            .into_iter()
            .map(|f| {
                let (clients, job_clients) = &resources.clients[&f];
                let runtime = rt
                    .block_on(Runtime::with_clients(f, &config_of(f), clients))
                    .unwrap_or_else(|e| panic!("the {f} function starts: {e:?}"));
                // As the stage function's main does.
                let runtime = match f {
                    Function::Stage => runtime.with_jobs(job_clients.runner(jobs)),
                    _ => runtime,
                };
                (f, runtime)
            })
            .collect();
        let Resources {
            proxy,
            direct,
            direct_jobs,
            made,
            jobs,
            api_id,
            stack,
            esm_clients,
            sealing_key_arn,
            ..
        } = resources;
        let store = DynamoStore::new(
            direct.dynamodb.clone(),
            made.table.clone(),
            std::sync::Arc::new(SqsQueue::new(
                direct.sqs.clone(),
                made.queues.clone(),
                std::sync::Arc::new(SystemClock),
                SqsOptions::default(),
            )),
            StoreOptions::default(),
        );
        Self {
            rt,
            proxy,
            direct,
            made,
            config,
            repo,
            repo_id,
            functions,
            invocations: BTreeMap::new(),
            busy: BTreeMap::new(),
            esm: BTreeMap::new(),
            store,
            jobs,
            direct_jobs,
            played: std::collections::BTreeSet::new(),
            api_id,
            esm_clients,
            stack,
            sealing_key_arn,
            _git_cache: git_cache,
            _sealed_dir: sealed_dir,
        }
    }

    /// `aws iam ARGS...` as the admin of the IAM-enforcing moto the lab's stack is on.
    pub fn iam(&self, args: &[&str]) {
        let moto = stack::IamMoto::from_env();
        let cli = std::env::var("GANNET_AWS_CLI")
            .expect("GANNET_AWS_CLI: the AWS CLI (scripts/awscli.sh path), as `make test` sets it");
        let out = Command::new(cli)
            .arg("iam")
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("AWS_ACCESS_KEY_ID", moto.admin.access_key_id())
            .env("AWS_SECRET_ACCESS_KEY", moto.admin.secret_access_key())
            .env("AWS_DEFAULT_REGION", REGION)
            .env("AWS_ENDPOINT_URL", &moto.endpoint)
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
            .output()
            .expect("the AWS CLI runs");
        assert!(
            out.status.success(),
            "aws iam {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn runtime(&self, f: Function) -> &Runtime {
        &self.functions[&f]
    }

    fn count(&mut self, f: Function) {
        *self.invocations.entry(f).or_default() += 1;
    }

    /// Invokes `webhook` with a Function URL request; returns (status, JSON body).
    pub fn webhook(&mut self, headers: &[(&str, &str)], method: &str, body: &str) -> (u16, Value) {
        let event = function_url_event(headers, method, body);
        let request = lambda_http::request::from_str(&event).expect("a Function URL event");
        self.count(Function::Webhook);
        let started = Instant::now();
        let response = self.rt.block_on(gannet_functions::http::webhook(
            self.runtime(Function::Webhook),
            request,
        ));
        *self.busy.entry(Function::Webhook).or_default() += started.elapsed();
        let body: Value = serde_json::from_slice(response.body()).unwrap_or(Value::Null);
        (response.status().as_u16(), body)
    }

    /// A signed push of `after`, as GitHub delivers it.
    pub fn push(&mut self, after: &str) -> (u16, Value) {
        let body = push_payload(&self.repo, after);
        let signature = gannet_events::github::sign(SECRET.as_bytes(), body.as_bytes());
        let delivery = unique("delivery");
        self.webhook(
            &[
                ("x-github-event", "push"),
                ("x-github-delivery", &delivery),
                ("x-hub-signature-256", &signature),
            ],
            "POST",
            &body,
        )
    }

    /// Invokes `api` with an HTTP API request (payload format 2.0, IAM-authorised); returns
    /// (status, JSON body).
    pub fn api(&mut self, method: &str, path: &str) -> (u16, Value) {
        self.api_as(Some(OPS_PRINCIPAL), method, path, None)
    }

    /// An HTTP API request signed by the IAM `principal` (`None`: no IAM authorizer context).
    pub fn api_as(
        &mut self,
        principal: Option<&str>,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut event = http_api_event(principal, method, path, body);
        event["requestContext"]["apiId"] = json!(self.api_id);
        self.api_event(&event)
    }

    /// Invokes `api` with `event` as it is (a forged one, say); returns (status, JSON body).
    pub fn api_event(&mut self, event: &Value) -> (u16, Value) {
        let request = lambda_http::request::from_str(&event.to_string())
            .expect("an HTTP API event (lambda_http reads it)");
        self.count(Function::Api);
        let router = gannet_functions::http::api(self.runtime(Function::Api));
        self.rt.block_on(async move {
            use tower::ServiceExt;
            let response = router.oneshot(request).await.expect("the router answers");
            let status = response.status().as_u16();
            let bytes = axum::body::to_bytes(response.into_body(), 16 * 1024 * 1024)
                .await
                .expect("the body");
            (
                status,
                serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            )
        })
    }

    /// The event source mapping's SQS client for `queue`: on a stack, with the consumer
    /// function's role, as Lambda polls with the function's execution role.
    fn esm_sqs(&self, queue: QueueName) -> &aws_sdk_sqs::Client {
        self.esm_clients
            .get(&consumer(queue))
            .unwrap_or(&self.direct.sqs)
    }

    /// ReceiveMessage on `queue`, as the event source mapping does.
    pub fn receive(&mut self, queue: QueueName, visibility: i32) -> Vec<SqsMessage> {
        let url = &self.made.queues[&queue].queue;
        let out = self
            .rt
            .block_on(
                self.esm_sqs(queue)
                    .receive_message()
                    .queue_url(url)
                    .max_number_of_messages(10)
                    .visibility_timeout(visibility)
                    .wait_time_seconds(0)
                    .message_system_attribute_names(MessageSystemAttributeName::All)
                    .message_attribute_names("All")
                    .send(),
            )
            .expect("ReceiveMessage");
        let messages = out.messages().to_vec();
        if !messages.is_empty() {
            *self.esm.entry("ReceiveMessage").or_default() += 1;
        }
        messages
    }

    /// The Lambda SQS event for `messages` from `queue`.
    pub fn event(&self, queue: QueueName, messages: &[SqsMessage]) -> SqsEvent {
        let url = &self.made.queues[&queue].queue;
        let records: Vec<Value> = messages.iter().map(|m| record(url, m)).collect();
        serde_json::from_value(json!({ "Records": records })).expect("an SQS event")
    }

    /// Invokes the consumer of `queue` (through `runtime`) with `messages`.
    pub fn invoke_with(
        &mut self,
        runtime: &Runtime,
        queue: QueueName,
        messages: &[SqsMessage],
    ) -> SqsBatchResponse {
        let event = LambdaEvent::new(self.event(queue, messages), Context::default());
        self.count(runtime.function());
        let started = Instant::now();
        let response = self
            .rt
            .block_on(gannet_functions::sqs::handle_batch(runtime, queue, event));
        *self.busy.entry(runtime.function()).or_default() += started.elapsed();
        response
    }

    /// Invokes the consumer of `queue` with `messages`.
    pub fn invoke(&mut self, queue: QueueName, messages: &[SqsMessage]) -> SqsBatchResponse {
        let runtime = self.runtime(consumer(queue)).clone();
        self.invoke_with(&runtime, queue, messages)
    }

    /// Deletes `messages` except those the response reports as failed (DeleteMessageBatch;
    /// a delete that fails is left alone, as the event source mapping does).
    pub fn delete_done(
        &mut self,
        queue: QueueName,
        messages: &[SqsMessage],
        response: &SqsBatchResponse,
    ) {
        let failed: Vec<&str> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        let entries: Vec<DeleteMessageBatchRequestEntry> = messages
            .iter()
            .filter(|m| !failed.contains(&m.message_id().unwrap_or_default()))
            .enumerate()
            .map(|(i, m)| {
                DeleteMessageBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(m.receipt_handle().unwrap_or_default())
                    .build()
                    .expect("a delete entry")
            })
            .collect();
        if entries.is_empty() {
            return;
        }
        *self.esm.entry("DeleteMessageBatch").or_default() += 1;
        let url = self.made.queues[&queue].queue.clone();
        self.rt
            .block_on(
                self.esm_sqs(queue)
                    .delete_message_batch()
                    .queue_url(url)
                    .set_entries(Some(entries))
                    .send(),
            )
            .expect("DeleteMessageBatch");
    }

    /// Deletes one message (a crashed invocation's record the harness gives up on).
    pub fn drop_message(&self, queue: QueueName, message: &SqsMessage) {
        self.rt
            .block_on(
                self.direct
                    .sqs
                    .delete_message()
                    .queue_url(&self.made.queues[&queue].queue)
                    .receipt_handle(message.receipt_handle().unwrap_or_default())
                    .send(),
            )
            .expect("DeleteMessage");
    }

    /// One poll of `queue` by the event source mapping: receive, invoke, delete the
    /// successes. Returns how many records it delivered.
    pub fn deliver(&mut self, queue: QueueName) -> usize {
        let messages = self.receive(queue, VISIBILITY_SECONDS);
        if messages.is_empty() {
            return 0;
        }
        let response = self.invoke(queue, &messages);
        self.delete_done(queue, &messages, &response);
        messages.len()
    }

    /// One poll of every queue a function consumes (after playing the builds started since
    /// the last round, as CodeBuild would run them).
    pub fn round(&mut self) -> usize {
        let played = self.rt.block_on(builds::play_builds(
            &self.direct_jobs,
            &self.jobs,
            &self.proxy,
            &mut self.played,
        ));
        let delivered: usize = Function::ALL
            .into_iter()
            .filter_map(Function::queue)
            .map(|q| self.deliver(q))
            .sum();
        played + delivered
    }

    /// Delivers messages until a round finds none and `done` holds; panics after `limit`.
    pub fn drive_until(
        &mut self,
        what: &str,
        limit: Duration,
        mut done: impl FnMut(&mut Self) -> bool,
    ) {
        let deadline = Instant::now() + limit;
        loop {
            let delivered = self.round();
            if delivered == 0 && done(self) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: not done within {limit:?}; deployments: {:#?}",
                self.summaries()
            );
            if delivered == 0 {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// Drives `id` to a terminal status (and the queues to quiet); returns it.
    pub fn drive_to_end(&mut self, id: &DeploymentId) -> Deployment {
        self.drive_until(&format!("deployment {id} to end"), LIMIT, |lab| {
            lab.deployment(id).status.is_terminal()
        });
        self.deployment(id)
    }

    /// Invokes the `resume` function with the Scheduler's input.
    pub fn resume(&mut self) -> Value {
        self.count(Function::Resume);
        let event = LambdaEvent::new(json!({"job": "resume"}), Context::default());
        self.rt
            .block_on(gannet_functions::schedule::resume(
                self.runtime(Function::Resume),
                event,
            ))
            .expect("the resume sweep")
    }

    /// Invokes the `poll` function with the Scheduler's input.
    pub fn poll(&mut self) -> Value {
        self.count(Function::Poll);
        let event = LambdaEvent::new(json!({"job": "poll"}), Context::default());
        self.rt
            .block_on(gannet_functions::schedule::poll(
                self.runtime(Function::Poll),
                event,
            ))
            .expect("the poll sweep")
    }

    /// Invokes the `drift` function with the Scheduler's input (the sweep).
    pub fn drift(&mut self) -> Value {
        self.count(Function::Drift);
        let event = LambdaEvent::new(json!({"job": "drift"}), Context::default());
        self.rt
            .block_on(gannet_functions::schedule::drift(
                self.runtime(Function::Drift),
                event,
            ))
            .expect("the drift sweep")
    }

    /// Every app the store knows.
    pub fn apps(&self) -> Vec<gannet_domain::app::App> {
        self.rt.block_on(self.store.apps()).expect("list apps")
    }

    pub fn deployment(&self, id: &DeploymentId) -> Deployment {
        self.rt
            .block_on(self.store.deployment(id))
            .expect("read the deployment")
            .unwrap_or_else(|| panic!("deployment {id} exists"))
    }

    pub fn deployments(&self) -> Vec<Deployment> {
        self.rt
            .block_on(self.store.deployments(&DeploymentFilter::default()))
            .expect("list deployments")
    }

    /// The deployment of `commit`, if the trigger has made it (delivering nothing).
    pub fn find_deployment(&self, commit: &str) -> Option<DeploymentId> {
        self.deployments()
            .into_iter()
            .find(|d| d.commit.sha.as_str() == commit)
            .map(|d| d.id)
    }

    /// The deployment of `commit`, delivering messages until the trigger has made it.
    pub fn deployment_of(&mut self, commit: &str) -> DeploymentId {
        let mut found = None;
        self.drive_until(&format!("a deployment of {commit}"), LIMIT, |lab| {
            found = lab.find_deployment(commit);
            found.is_some()
        });
        found.unwrap_or_else(|| panic!("a deployment of {commit}"))
    }

    /// `(id, status, stages)` of every deployment, for panic messages.
    fn summaries(&self) -> Vec<String> {
        self.deployments()
            .iter()
            .map(|d| {
                format!(
                    "{} {} {} {:?}",
                    d.id,
                    d.status.as_str(),
                    d.status_reason,
                    stages(d)
                )
            })
            .collect()
    }
}

impl Drop for Lab {
    /// Deletes the lab's table, queues and webhook secret from moto (best effort).
    fn drop(&mut self) {
        let direct = self.direct.clone();
        let made = self.made.clone();
        self.rt.block_on(async move {
            let _ = direct
                .dynamodb
                .delete_table()
                .table_name(&made.table)
                .send()
                .await;
            for urls in made.queues.values() {
                for url in [&urls.queue, &urls.dead_letter] {
                    let _ = direct.sqs.delete_queue().queue_url(url).send().await;
                }
            }
            let _ = direct
                .secrets
                .delete_secret()
                .secret_id(&made.table)
                .force_delete_without_recovery(true)
                .send()
                .await;
        });
    }
}

/// The function that consumes `queue`.
pub fn consumer(queue: QueueName) -> Function {
    Function::ALL
        .into_iter()
        .find(|f| f.queue() == Some(queue))
        .unwrap_or_else(|| panic!("a consumer of {}", queue.as_str()))
}

/// `(name, status)` of every stage, hidden ones included.
pub fn stages(d: &Deployment) -> Vec<(String, &'static str)> {
    d.stages
        .iter()
        .map(|s| (s.name.clone(), s.status.as_str()))
        .collect()
}

pub fn owned(pairs: &[(&str, StageStatus)]) -> Vec<(String, &'static str)> {
    pairs
        .iter()
        .map(|(n, s)| ((*n).to_owned(), s.as_str()))
        .collect()
}

/// An SQS event record, as Lambda's event source mapping builds it from a received message.
pub fn record(queue_url: &str, m: &SqsMessage) -> Value {
    let (account, name) = queue_url
        .trim_end_matches('/')
        .rsplit_once('/')
        .map(|(rest, name)| (rest.rsplit('/').next().unwrap_or("123456789012"), name))
        .expect("queue URL has a path");
    let attributes: BTreeMap<&str, &str> = m
        .attributes()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let message_attributes: BTreeMap<&str, Value> = m
        .message_attributes()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let value = json!({
                "stringValue": v.string_value(),
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": v.data_type(),
            });
            (k.as_str(), value)
        })
        .collect();
    json!({
        "messageId": m.message_id(),
        "receiptHandle": m.receipt_handle(),
        "body": m.body(),
        "attributes": attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": m.md5_of_body(),
        "eventSource": "aws:sqs",
        "eventSourceARN": format!("arn:aws:sqs:{REGION}:{account}:{name}"),
        "awsRegion": REGION,
    })
}
