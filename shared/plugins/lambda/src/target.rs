//! Lambda deploy targets (from the controller config's `plugins.lambda.deployTargets`): where
//! functions are deployed, and the Lambda client for each, built on first use.
//!
//! The client is configured as every AWS plugin's is ([`gannet_plugin_aws_common::sdk_config`]:
//! rustls, timeouts, the standard credential chain, `roleArn` through STS, `endpoint`).

use aws_sdk_lambda::config::SharedCredentialsProvider;
use gannet_config::typed::FieldError;
use gannet_plugin_aws_common::{check_target, AwsFields, LazyClients};
use gannet_sdk::targets::Named;

use crate::api::LambdaApi;
use crate::gitzip::GitSettings;

/// PipeCD's alias name, used when a target names none.
pub const DEFAULT_ALIAS: &str = "Service";

/// One place functions are deployed to, as the controller config writes it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeployTarget {
    pub name: String,
    /// Such as `us-east-1`.
    pub region: String,
    /// A role to assume for every call.
    #[serde(default)]
    pub role_arn: Option<String>,
    /// Another endpoint for the AWS APIs (a local AWS API server).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The alias that carries the app's traffic.
    #[serde(default = "default_alias")]
    pub alias: String,
    /// How jobs fetch a function's code from git (`spec.source`).
    #[serde(default)]
    pub git: GitSettings,
}

fn default_alias() -> String {
    DEFAULT_ALIAS.to_owned()
}

impl DeployTarget {
    /// A target in `region` with the default alias and nothing else set.
    pub fn new(name: impl Into<String>, region: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            region: region.into(),
            role_arn: None,
            endpoint: None,
            alias: default_alias(),
            git: GitSettings::default(),
        }
    }

    pub(crate) fn fields(&self) -> AwsFields<'_> {
        AwsFields {
            name: &self.name,
            region: &self.region,
            role_arn: self.role_arn.as_deref(),
            endpoint: self.endpoint.as_deref(),
        }
    }

    /// Checks the target written at `at`: its AWS fields, an alias Lambda accepts, and no
    /// secret of gannet's (`secret_env`, its credentials) among what fetch jobs get.
    pub(crate) fn check(&self, at: &str, secret_env: &[String]) -> Result<(), FieldError> {
        check_target(at, self.fields())?;
        let alias = &self.alias;
        let alias_ok = (1..=128).contains(&alias.len())
            && alias
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            && !alias.chars().all(|c| c.is_ascii_digit());
        gannet_sdk::jobs::check_allowed_env(
            &format!("{at}.git.allowEnv"),
            &self.git.allow_env,
            secret_env,
            "give the fetch job a credential of its own under another name (such as a \
             GIT_SSH_COMMAND naming a deploy key's file)",
        )?;
        if !alias_ok {
            return Err(FieldError {
                path: format!("{at}.alias"),
                message: format!(
                    "{alias:?} is not a Lambda alias name (letters, digits, - and _, not only digits)"
                ),
            });
        }
        Ok(())
    }
}

impl Named for DeployTarget {
    fn name(&self) -> &str {
        &self.name
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
        self.api
            .get(self.config.fields(), |sdk| {
                LambdaApi::new(aws_sdk_lambda::Client::new(sdk))
            })
            .await
    }
}

impl Named for Target {
    fn name(&self) -> &str {
        &self.config.name
    }
}
