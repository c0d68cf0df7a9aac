//! The test harness: moto on loopback (from `GANNET_MOTO_ENDPOINT`), commits as directories,
//! a recording `StepIo`, and a driver that runs a deployment through the core's state machine
//! one plugin step at a time, optionally running every step twice in a row.

use std::collections::BTreeMap;
use std::sync::Arc;

use gannet_domain::deployment::Deployment;
use gannet_plugin_aws_common::test_util::{self, credentials, moto_endpoint, Platform};
pub use gannet_plugin_aws_common::test_util::{unique, Commit, Commits, Delivery, APP, REGION};
use gannet_sdk::plugin::Faces;

use crate::routing::AliasRouting;
use crate::target::{DeployTarget, Target};
use crate::LambdaPlugin;

/// A deployment driven through this plugin.
pub type Run = test_util::Run<LambdaPlugin>;

/// The role every test function runs as (created in moto's IAM, which Lambda checks).
pub const ROLE: &str = "arn:aws:iam::123456789012:role/gannet-test";

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
pub fn app_commit(sha_digit: char, app_yaml: &str, function_yaml: &str, zip: &[u8]) -> Commit {
    Commit::with_files(
        sha_digit,
        app_yaml,
        &[("function.yaml", function_yaml.as_bytes()), ("fn.zip", zip)],
    )
}

impl Platform for LambdaPlugin {
    const KIND: &'static str = "LambdaApp";
    type State = AwsState;

    fn plugins(this: &Arc<Self>) -> Vec<Faces> {
        vec![Faces::platform(this.clone())]
    }

    async fn state(&self, d: &Deployment) -> AwsState {
        state_of(d, &self.targets[0].config.alias).await
    }
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
