//! ECS deploy targets (from the controller config's `plugins.ecs.deployTargets`): where services
//! are deployed, and the ECS and ELBv2 clients for each, built on first use.
//!
//! The clients are configured as every AWS plugin's are ([`gannet_plugin_aws_common::sdk_config`]:
//! rustls, timeouts, the standard credential chain, `roleArn` through STS, `endpoint`).

use aws_sdk_ecs::config::SharedCredentialsProvider;
use gannet_plugin_aws_common::{AwsTarget, LazyClients};
use gannet_sdk::targets::Named;

use crate::api::EcsApi;

/// One place ECS services are deployed to: an AWS target and nothing more.
pub type DeployTarget = AwsTarget;

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
        self.api
            .get(self.config.fields(), |sdk| {
                EcsApi::new(
                    aws_sdk_ecs::Client::new(sdk),
                    aws_sdk_elasticloadbalancingv2::Client::new(sdk),
                )
            })
            .await
    }
}

impl Named for Target {
    fn name(&self) -> &str {
        &self.config.name
    }
}
