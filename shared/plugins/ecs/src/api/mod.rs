//! The ECS and ELBv2 APIs as the stages use them. Each call maps the SDK's types to the
//! plugin's own ([`crate::live`]) and its errors to [`ApiError`] (see `errors`). The ECS calls
//! are in `ecs`, the load balancer calls in `elb`, the type mapping in `convert`.

mod convert;
mod ecs;
mod elb;
mod served;

pub(crate) use ecs::{NewService, NewTaskSet, StandaloneTask};
pub(crate) use served::Served;
#[cfg(test)]
pub(crate) use served::ServedTaskSet;

/// The ECS and ELBv2 clients of one deploy target.
#[derive(Clone, Debug)]
pub(crate) struct EcsApi {
    ecs: aws_sdk_ecs::Client,
    elb: aws_sdk_elasticloadbalancingv2::Client,
}

impl EcsApi {
    pub(crate) fn new(
        ecs: aws_sdk_ecs::Client,
        elb: aws_sdk_elasticloadbalancingv2::Client,
    ) -> Self {
        Self { ecs, elb }
    }

    /// The raw clients, for checking state in tests.
    #[cfg(test)]
    pub(crate) fn clients(
        &self,
    ) -> (
        &aws_sdk_ecs::Client,
        &aws_sdk_elasticloadbalancingv2::Client,
    ) {
        (&self.ecs, &self.elb)
    }
}
