//! ECS deploy targets (from the controller config's `plugins.ecs.deployTargets`): where services
//! are deployed, and the ECS and ELBv2 clients for each, built on first use.
//!
//! The clients speak HTTPS through rustls with the ring provider. Credentials come from the
//! standard AWS chain; with `roleArn` they are used to assume that role through STS, refreshed
//! as they expire. `endpoint` sends every call (STS included) to another server, such as moto on
//! loopback.

use std::time::Duration;

use aws_config::sts::AssumeRoleProvider;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_ecs::config::SharedCredentialsProvider;
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use gannet_core::targets;
use tokio::sync::OnceCell;

use crate::api::EcsApi;

/// One place ECS services are deployed to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeployTarget {
    pub name: String,
    /// Such as `us-east-1`.
    pub region: String,
    /// A role to assume for every call.
    pub role_arn: Option<String>,
    /// Another endpoint for the AWS APIs (a local AWS API server).
    pub endpoint: Option<String>,
}

/// One target as the controller config writes it.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawTarget {
    name: String,
    region: String,
    role_arn: Option<String>,
    endpoint: Option<String>,
}

impl DeployTarget {
    /// The targets the controller config lists at `at` (such as `plugins.ecs.deployTargets`),
    /// checked; every error names its field.
    pub fn parse_list(values: &[serde_json::Value], at: &str) -> Result<Vec<Self>, String> {
        let mut targets: Vec<Self> = Vec::new();
        for (at, t) in targets::parse_list::<RawTarget>(values, at)? {
            let seen: Vec<&str> = targets.iter().map(|d| d.name.as_str()).collect();
            let fields = targets::AwsFields {
                name: &t.name,
                region: &t.region,
                role_arn: t.role_arn.as_deref(),
                endpoint: t.endpoint.as_deref(),
            };
            targets::check_aws(&at, fields, &seen)?;
            targets.push(Self {
                name: t.name,
                region: t.region,
                role_arn: t.role_arn,
                endpoint: t.endpoint,
            });
        }
        Ok(targets)
    }

    /// A target in `region` with nothing else set.
    pub fn new(name: impl Into<String>, region: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            region: region.into(),
            role_arn: None,
            endpoint: None,
        }
    }
}

/// A deploy target with its clients, built on first use.
#[derive(Debug)]
pub(crate) struct Target {
    pub config: DeployTarget,
    /// Fixed credentials instead of the standard chain (tests).
    credentials: Option<SharedCredentialsProvider>,
    api: OnceCell<EcsApi>,
}

impl Target {
    pub(crate) fn new(
        config: DeployTarget,
        credentials: Option<SharedCredentialsProvider>,
    ) -> Self {
        Self {
            config,
            credentials,
            api: OnceCell::new(),
        }
    }

    pub(crate) async fn api(&self) -> &EcsApi {
        self.api
            .get_or_init(|| build_api(&self.config, self.credentials.clone()))
            .await
    }
}

async fn build_api(
    target: &DeployTarget,
    credentials: Option<SharedCredentialsProvider>,
) -> EcsApi {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let timeouts = TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(5))
        .operation_attempt_timeout(Duration::from_secs(30))
        .operation_timeout(Duration::from_secs(90))
        .build();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(target.region.clone()))
        .http_client(http)
        .timeout_config(timeouts);
    if let Some(endpoint) = &target.endpoint {
        loader = loader.endpoint_url(endpoint);
    }
    if let Some(credentials) = credentials {
        loader = loader.credentials_provider(credentials);
    }
    let mut base: SdkConfig = loader.load().await;
    if let Some(role) = &target.role_arn {
        let assumed = AssumeRoleProvider::builder(role)
            .session_name("gannet")
            .configure(&base)
            .build()
            .await;
        base = base
            .into_builder()
            .credentials_provider(SharedCredentialsProvider::new(assumed))
            .build();
    }
    EcsApi::new(
        aws_sdk_ecs::Client::new(&base),
        aws_sdk_elasticloadbalancingv2::Client::new(&base),
    )
}
