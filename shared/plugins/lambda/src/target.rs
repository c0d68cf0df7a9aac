//! Lambda deploy targets (from the controller config's `plugins.lambda.deployTargets`): where
//! functions are deployed, and the Lambda client for each, built on first use.
//!
//! The client is configured as every AWS plugin's is ([`gannet_plugin_aws_common::sdk_config`]:
//! rustls, timeouts, the standard credential chain, `roleArn` through STS, `endpoint`).

use aws_sdk_lambda::config::SharedCredentialsProvider;
use gannet_core::targets;
use gannet_plugin_aws_common::LazyClients;

use crate::api::LambdaApi;

/// PipeCD's alias name, used when a target names none.
pub const DEFAULT_ALIAS: &str = "Service";

/// One place functions are deployed to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeployTarget {
    pub name: String,
    /// Such as `us-east-1`.
    pub region: String,
    /// A role to assume for every call.
    pub role_arn: Option<String>,
    /// Another endpoint for the AWS APIs (a local AWS API server).
    pub endpoint: Option<String>,
    /// The alias that carries the app's traffic.
    pub alias: String,
}

/// One target as the controller config writes it.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawTarget {
    name: String,
    region: String,
    role_arn: Option<String>,
    endpoint: Option<String>,
    alias: Option<String>,
}

impl DeployTarget {
    /// The targets the controller config lists at `at` (such as
    /// `plugins.lambda.deployTargets`), checked; every error names its field.
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
            let alias = t.alias.unwrap_or_else(|| DEFAULT_ALIAS.to_owned());
            let alias_ok = (1..=128).contains(&alias.len())
                && alias
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                && !alias.chars().all(|c| c.is_ascii_digit());
            if !alias_ok {
                return Err(format!(
                    "{at}.alias: {alias:?} is not a Lambda alias name (letters, digits, - and _, not only digits)"
                ));
            }
            targets.push(Self {
                name: t.name,
                region: t.region,
                role_arn: t.role_arn,
                endpoint: t.endpoint,
                alias,
            });
        }
        Ok(targets)
    }

    /// A target in `region` with the default alias and nothing else set.
    pub fn new(name: impl Into<String>, region: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            region: region.into(),
            role_arn: None,
            endpoint: None,
            alias: DEFAULT_ALIAS.to_owned(),
        }
    }
}

/// A deploy target with its client, built on first use.
#[derive(Debug)]
pub(crate) struct Target {
    pub config: DeployTarget,
    api: LazyClients<LambdaApi>,
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

    pub(crate) async fn api(&self) -> &LambdaApi {
        let c = &self.config;
        let fields = targets::AwsFields {
            name: &c.name,
            region: &c.region,
            role_arn: c.role_arn.as_deref(),
            endpoint: c.endpoint.as_deref(),
        };
        self.api
            .get(fields, |sdk| {
                LambdaApi::new(aws_sdk_lambda::Client::new(sdk))
            })
            .await
    }
}
