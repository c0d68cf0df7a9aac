//! The service definition file: the fields of an ECS service, checked. gannet (as PipeCD)
//! deploys through task sets, so the service must use the EXTERNAL deployment controller; the
//! launch type, network configuration, service registries, platform version and capacity
//! provider strategy go to each task set, and `loadBalancers` and `taskDefinition` are ignored
//! (the app config's target groups and task definition file decide them).

use serde::Deserialize;

use super::shapes::SERVICE;
use super::{Document, ManifestError};

/// The only deployment controller gannet can deploy through.
pub const CONTROLLER_EXTERNAL: &str = "EXTERNAL";

/// A checked service definition.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceDefinition {
    /// The cluster's ARN or name (`cluster` or `clusterArn` in the file).
    #[serde(rename = "clusterArn")]
    pub cluster: String,
    #[serde(rename = "serviceName")]
    pub name: String,
    /// As written; see [`ServiceDefinition::managed_desired_count`].
    pub desired_count: Option<i32>,
    pub deployment_controller: Option<DeploymentController>,
    pub deployment_configuration: Option<DeploymentConfiguration>,
    pub scheduling_strategy: Option<String>,
    #[serde(rename = "enableECSManagedTags")]
    pub enable_ecs_managed_tags: Option<bool>,
    pub enable_execute_command: Option<bool>,
    pub propagate_tags: Option<String>,
    pub launch_type: Option<String>,
    pub platform_version: Option<String>,
    pub network_configuration: Option<NetworkConfiguration>,
    pub service_registries: Vec<ServiceRegistry>,
    pub placement_constraints: Vec<PlacementConstraint>,
    pub placement_strategy: Vec<PlacementStrategy>,
    pub health_check_grace_period_seconds: Option<i32>,
    #[serde(rename = "roleArn")]
    pub role: Option<String>,
    pub tags: Vec<Tag>,
    pub capacity_provider_strategy: Vec<CapacityProvider>,
    /// Read but not applied (see the module's note).
    pub load_balancers: Vec<serde_json::Value>,
    pub task_definition: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct DeploymentController {
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DeploymentConfiguration {
    pub maximum_percent: Option<i32>,
    pub minimum_healthy_percent: Option<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NetworkConfiguration {
    pub awsvpc_configuration: Option<AwsVpc>,
}

/// Where a task set's tasks get their network interfaces.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AwsVpc {
    pub subnets: Vec<String>,
    pub security_groups: Vec<String>,
    pub assign_public_ip: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceRegistry {
    pub registry_arn: String,
    pub port: Option<i32>,
    pub container_name: Option<String>,
    pub container_port: Option<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct PlacementConstraint {
    #[serde(rename = "type")]
    pub kind: String,
    pub expression: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct PlacementStrategy {
    #[serde(rename = "type")]
    pub kind: String,
    pub field: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CapacityProvider {
    pub capacity_provider: String,
    pub weight: Option<i32>,
    pub base: Option<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Tag {
    pub key: String,
    pub value: String,
}

impl ServiceDefinition {
    /// Parses and checks the service definition `file` (named in errors) from its text.
    pub fn parse(file: &str, text: &str) -> Result<Self, ManifestError> {
        let doc = Document::parse(file, text, &SERVICE)?;
        let def: Self = serde_json::from_value(doc.value.clone())
            .map_err(|e| doc.error("", format!("unreadable after normalising: {e}")))?;
        if def.cluster.trim().is_empty() {
            return Err(doc.error(
                "cluster",
                "missing: the cluster's ARN or name is required (cluster or clusterArn)",
            ));
        }
        if def.name.trim().is_empty() {
            return Err(doc.error("serviceName", "missing: the service's name is required"));
        }
        if let Some(c) = &def.deployment_controller {
            if c.kind != CONTROLLER_EXTERNAL {
                return Err(doc.error(
                    "deploymentController.type",
                    format!(
                        "{:?}: gannet deploys ECS services through task sets, which need the EXTERNAL deployment controller; write `deploymentController: {{type: EXTERNAL}}`",
                        c.kind
                    ),
                ));
            }
        }
        if let Some(n) = def.desired_count.filter(|n| *n < 0) {
            return Err(doc.error("desiredCount", format!("{n} is negative")));
        }
        if def.launch_type.is_some() && !def.capacity_provider_strategy.is_empty() {
            return Err(doc.error(
                "capacityProviderStrategy",
                "conflicts with launchType: give one of them",
            ));
        }
        if let Some(i) = def.tags.iter().position(|t| t.key.is_empty()) {
            return Err(doc.error(&format!("tags[{i}].key"), "missing"));
        }
        Ok(def)
    }

    /// The desired count gannet sets: `None` when Git has 0 or nothing, so the live count (which
    /// autoscaling may own) is never changed (PipeCD #5027).
    pub fn managed_desired_count(&self) -> Option<i32> {
        self.desired_count.filter(|n| *n > 0)
    }

    /// The task sets' network configuration.
    pub fn awsvpc(&self) -> Option<&AwsVpc> {
        self.network_configuration
            .as_ref()
            .and_then(|n| n.awsvpc_configuration.as_ref())
    }

    /// What the file has that gannet reads but does not apply, for the stage log.
    pub fn ignored_fields(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if !self.load_balancers.is_empty() {
            out.push("loadBalancers (the task sets use spec.input.targetGroups)");
        }
        if self.task_definition.is_some() {
            out.push("taskDefinition (the task sets use spec.input.taskDefinitionFile)");
        }
        out
    }
}
