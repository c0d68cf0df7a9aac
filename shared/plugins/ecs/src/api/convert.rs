//! Between the plugin's types and the ECS SDK's: the request shapes built from a service
//! definition, and the task sets and tags read back.

use std::collections::BTreeMap;

use aws_sdk_ecs::types::{
    AssignPublicIp, AwsVpcConfiguration, DeploymentConfiguration, NetworkConfiguration,
    PlacementConstraint, PlacementConstraintType, PlacementStrategy, PlacementStrategyType, Tag,
};

use crate::live::{LiveTaskSet, TaskSetStatus};
use crate::manifest::{AwsVpc, ServiceDefinition};

/// CreateTaskSet's idempotency token (at most 36 characters) for `key`.
pub(super) fn client_token(key: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(key.as_bytes()))[..32].to_owned()
}

pub(super) fn live_task_set(t: &aws_sdk_ecs::types::TaskSet) -> LiveTaskSet {
    let text = |v: Option<&str>| v.unwrap_or_default().to_owned();
    LiveTaskSet {
        arn: text(t.task_set_arn()),
        id: text(t.id()),
        status: match t.status() {
            Some("PRIMARY") => TaskSetStatus::Primary,
            Some("DRAINING") => TaskSetStatus::Draining,
            _ => TaskSetStatus::Active,
        },
        task_definition: text(t.task_definition()),
        external_id: text(t.external_id()),
        stability: t
            .stability_status()
            .map(|s| s.as_str().to_owned())
            .unwrap_or_default(),
        computed_desired_count: t.computed_desired_count(),
        running_count: t.running_count(),
        pending_count: t.pending_count(),
        scale: t.scale().map(|s| s.value()),
        target_groups: t
            .load_balancers()
            .iter()
            .filter_map(|l| l.target_group_arn())
            .map(str::to_owned)
            .collect(),
        tags: tag_map(t.tags()),
    }
}

pub(super) fn tag_map(tags: &[Tag]) -> BTreeMap<String, String> {
    tags.iter()
        .filter_map(|t| {
            Some((
                t.key()?.to_owned(),
                t.value().unwrap_or_default().to_owned(),
            ))
        })
        .collect()
}

pub(super) fn tags(map: &BTreeMap<String, String>) -> Vec<Tag> {
    map.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

pub(super) fn network_configuration(
    vpc: &AwsVpc,
) -> Result<NetworkConfiguration, aws_sdk_ecs::error::BuildError> {
    let awsvpc = AwsVpcConfiguration::builder()
        .set_subnets(Some(vpc.subnets.clone()))
        .set_security_groups(Some(vpc.security_groups.clone()).filter(|g| !g.is_empty()))
        .set_assign_public_ip(vpc.assign_public_ip.as_deref().map(AssignPublicIp::from))
        .build()?;
    Ok(NetworkConfiguration::builder()
        .awsvpc_configuration(awsvpc)
        .build())
}

pub(super) fn deployment_configuration(def: &ServiceDefinition) -> Option<DeploymentConfiguration> {
    def.deployment_configuration.as_ref().map(|c| {
        DeploymentConfiguration::builder()
            .set_maximum_percent(c.maximum_percent)
            .set_minimum_healthy_percent(c.minimum_healthy_percent)
            .build()
    })
}

pub(super) fn placement_constraints(def: &ServiceDefinition) -> Option<Vec<PlacementConstraint>> {
    Some(
        def.placement_constraints
            .iter()
            .map(|c| {
                PlacementConstraint::builder()
                    .r#type(PlacementConstraintType::from(c.kind.as_str()))
                    .set_expression(c.expression.clone())
                    .build()
            })
            .collect(),
    )
    .filter(|v: &Vec<_>| !v.is_empty())
}

pub(super) fn placement_strategy(def: &ServiceDefinition) -> Option<Vec<PlacementStrategy>> {
    Some(
        def.placement_strategy
            .iter()
            .map(|s| {
                PlacementStrategy::builder()
                    .r#type(PlacementStrategyType::from(s.kind.as_str()))
                    .set_field(s.field.clone())
                    .build()
            })
            .collect(),
    )
    .filter(|v: &Vec<_>| !v.is_empty())
}
