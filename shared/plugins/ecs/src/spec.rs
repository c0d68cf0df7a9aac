//! An ECSApp's own fields: the app config's `spec.input` and `spec.quickSync`, which this plugin
//! owns ([`gannet_config::V0_KINDS`]), with PipeCD's names and defaults.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct EcsSpec {
    pub input: EcsInput,
    pub quick_sync: EcsQuickSync,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct EcsInput {
    /// The cluster's ARN.
    pub cluster_arn: String,
    pub launch_type: LaunchType,
    pub awsvpc_configuration: AwsVpcConfiguration,
    /// The service definition file; empty means the app is a standalone task.
    pub service_definition_file: String,
    pub task_definition_file: String,
    pub target_groups: TargetGroups,
    /// Deprecated in PipeCD in favour of `spec.planner.autoRollback`; honoured when set.
    pub auto_rollback: Option<bool>,
    /// Run the task as a standalone task during deployment (PipeCD's default: true).
    pub run_standalone_task: bool,
    pub access_type: AccessType,
}

impl Default for EcsInput {
    fn default() -> Self {
        Self {
            cluster_arn: String::new(),
            launch_type: LaunchType::Fargate,
            awsvpc_configuration: AwsVpcConfiguration::default(),
            service_definition_file: String::new(),
            task_definition_file: "taskdef.json".to_owned(),
            target_groups: TargetGroups::default(),
            auto_rollback: None,
            run_standalone_task: true,
            access_type: AccessType::Elb,
        }
    }
}

impl EcsInput {
    /// No service definition: the app runs as a standalone task.
    pub fn is_standalone_task(&self) -> bool {
        self.service_definition_file.is_empty()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LaunchType {
    #[default]
    Fargate,
    Ec2,
    External,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AccessType {
    /// Through a load balancer and target groups.
    #[default]
    #[serde(rename = "ELB")]
    Elb,
    /// Through ECS Service Discovery.
    ServiceDiscovery,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct AwsVpcConfiguration {
    pub subnets: Vec<String>,
    pub assign_public_ip: Option<AssignPublicIp>,
    pub security_groups: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AssignPublicIp {
    Enabled,
    Disabled,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TargetGroups {
    pub primary: Option<TargetGroup>,
    pub canary: Option<TargetGroup>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TargetGroup {
    pub target_group_arn: String,
    pub container_name: String,
    pub container_port: u16,
    pub load_balancer_name: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EcsQuickSync {
    /// Delete the old task sets before creating the new ones (brief unavailability).
    pub recreate: bool,
}
