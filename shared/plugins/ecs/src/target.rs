//! ECS deploy targets (from the controller config's `plugins.ecs.deployTargets`): where services
//! are deployed, and the ECS and ELBv2 clients for each, built on first use.
//!
//! The clients are configured as every AWS plugin's are ([`gannet_plugin_aws_common::sdk_config`]:
//! rustls, timeouts, the standard credential chain, `roleArn` through STS, `endpoint`).

use aws_sdk_ecs::config::SharedCredentialsProvider;
use gannet_core::targets;
use gannet_plugin_aws_common::LazyClients;

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
    api: LazyClients<EcsApi>,
}

impl Target {
    /// `credentials` are fixed ones instead of the standard chain (tests).
    pub(crate) fn new(
        config: DeployTarget,
        credentials: Option<SharedCredentialsProvider>,
    ) -> Self {
        Self {
            config,
            api: LazyClients::new(credentials),
        }
    }

    pub(crate) async fn api(&self) -> &EcsApi {
        let c = &self.config;
        let fields = targets::AwsFields {
            name: &c.name,
            region: &c.region,
            role_arn: c.role_arn.as_deref(),
            endpoint: c.endpoint.as_deref(),
        };
        self.api
            .get(fields, |sdk| {
                EcsApi::new(
                    aws_sdk_ecs::Client::new(sdk),
                    aws_sdk_elasticloadbalancingv2::Client::new(sdk),
                )
            })
            .await
    }
}
