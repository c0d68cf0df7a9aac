//! Each platform kind's part of an app config: `spec.input`, `spec.quickSync`, and the
//! Kubernetes-only fields, with PipeCD's names and defaults.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A percentage, written `30` or `"30%"` as PipeCD accepts it; always within 0..=100.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Percentage(u8);

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid percentage {input:?}: {reason}")]
pub struct PercentageError {
    input: String,
    reason: &'static str,
}

impl Percentage {
    pub fn new(value: u8) -> Option<Self> {
        (value <= 100).then_some(Self(value))
    }

    pub fn get(self) -> u8 {
        self.0
    }

    pub fn parse(input: &str) -> Result<Self, PercentageError> {
        let err = |reason| PercentageError {
            input: input.to_owned(),
            reason,
        };
        let digits = input
            .trim()
            .strip_suffix('%')
            .unwrap_or(input.trim())
            .trim();
        let value: u64 = digits
            .parse()
            .map_err(|_| err("expected a whole number such as 30 or 30%"))?;
        u8::try_from(value)
            .ok()
            .and_then(Self::new)
            .ok_or_else(|| err("must be between 0 and 100"))
    }
}

impl fmt::Display for Percentage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0)
    }
}

impl Serialize for Percentage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(self.0)
    }
}

impl<'de> Deserialize<'de> for Percentage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(i64),
            Text(String),
        }
        let text = match Raw::deserialize(d)? {
            Raw::Number(n) => n.to_string(),
            Raw::Text(t) => t,
        };
        Percentage::parse(&text).map_err(serde::de::Error::custom)
    }
}

// ---------------------------------------------------------------- Lambda

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LambdaSpec {
    pub input: LambdaInput,
    pub quick_sync: EmptyOptions,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct LambdaInput {
    /// The function manifest in the app directory.
    pub function_manifest_file: String,
    /// Deprecated in PipeCD in favour of `spec.planner.autoRollback`; honoured when set.
    pub auto_rollback: Option<bool>,
}

impl Default for LambdaInput {
    fn default() -> Self {
        Self {
            function_manifest_file: "function.yaml".to_owned(),
            auto_rollback: None,
        }
    }
}

/// Options of a quick sync that takes none (`LAMBDA_SYNC`, `CLOUDRUN_SYNC`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmptyOptions {}

// ---------------------------------------------------------------- ECS

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

// ---------------------------------------------------------------- Cloud Run

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CloudRunSpec {
    pub input: CloudRunInput,
    pub quick_sync: EmptyOptions,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CloudRunInput {
    /// The service manifest in the app directory.
    pub service_manifest_file: String,
    /// Deprecated in PipeCD in favour of `spec.planner.autoRollback`; honoured when set.
    pub auto_rollback: Option<bool>,
}

impl Default for CloudRunInput {
    fn default() -> Self {
        Self {
            service_manifest_file: "service.yaml".to_owned(),
            auto_rollback: None,
        }
    }
}

// ---------------------------------------------------------------- Terraform

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TerraformSpec {
    pub input: TerraformInput,
    pub quick_sync: TerraformQuickSync,
}

/// A TerraformApp's `quickSync` (PipeCD's TERRAFORM_SYNC options).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TerraformQuickSync {
    /// PipeCD retries a failed apply this many times; gannet does not (reported as unsupported).
    pub retries: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct TerraformInput {
    /// Empty means the `default` workspace.
    pub workspace: String,
    /// Empty means the installed terraform.
    pub terraform_version: String,
    /// `-var` values, each `key=value`.
    pub vars: Vec<String>,
    /// `-var-file` files.
    pub var_files: Vec<String>,
    /// Deprecated in PipeCD in favour of `spec.planner.autoRollback`; honoured when set.
    pub auto_rollback: Option<bool>,
    pub command_flags: TerraformCommandLists,
    pub command_envs: TerraformCommandLists,
}

/// Extra flags or environment variables for each terraform command.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TerraformCommandLists {
    pub shared: Vec<String>,
    pub init: Vec<String>,
    pub plan: Vec<String>,
    pub apply: Vec<String>,
}

// ---------------------------------------------------------------- Kubernetes

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct KubernetesSpec {
    pub input: KubernetesInput,
    pub quick_sync: KubernetesQuickSync,
    /// The Service of the app; empty means the first Service.
    pub service: ResourceRef,
    /// The workloads of the app; empty means all Deployments.
    pub workloads: Vec<ResourceRef>,
    pub traffic_routing: Option<TrafficRouting>,
    pub variant_label: VariantLabel,
    pub resource_routes: Vec<ResourceRoute>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct KubernetesInput {
    /// Manifest files in the app directory; empty means every manifest there.
    pub manifests: Vec<String>,
    pub kubectl_version: String,
    pub kustomize_version: String,
    pub kustomize_options: BTreeMap<String, String>,
    pub helm_version: String,
    pub helm_chart: Option<HelmChart>,
    pub helm_options: Option<HelmOptions>,
    /// The namespace to apply to.
    pub namespace: String,
    /// Deprecated in PipeCD in favour of `spec.planner.autoRollback`; honoured when set.
    pub auto_rollback: Option<bool>,
    pub auto_create_namespace: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HelmChart {
    /// A git remote holding the chart; empty means this repository.
    pub git_remote: String,
    #[serde(rename = "ref")]
    pub git_ref: String,
    /// The chart directory, relative to the repository root (or to the app directory).
    pub path: String,
    /// An added Helm chart repository.
    pub repository: String,
    pub name: String,
    pub version: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct HelmOptions {
    /// Empty means the app's name.
    pub release_name: String,
    pub set_values: BTreeMap<String, String>,
    pub value_files: Vec<String>,
    pub set_files: BTreeMap<String, String>,
    pub api_versions: Vec<String>,
    pub kube_version: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct KubernetesQuickSync {
    pub add_variant_label_to_selector: bool,
    /// Remove resources that are no longer in git.
    pub prune: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResourceRef {
    pub kind: String,
    pub name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrafficRouting {
    pub method: TrafficRoutingMethod,
    pub istio: Option<IstioTrafficRouting>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrafficRoutingMethod {
    /// Switch traffic by updating the Service's selector.
    #[default]
    #[serde(rename = "podselector")]
    PodSelector,
    Istio,
    Smi,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct IstioTrafficRouting {
    /// Routes of the VirtualService that may be edited; empty means all.
    pub editable_routes: Vec<String>,
    pub host: String,
    pub virtual_service: ResourceRef,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct VariantLabel {
    pub key: String,
    pub primary_value: String,
    pub canary_value: String,
    pub baseline_value: String,
}

impl Default for VariantLabel {
    fn default() -> Self {
        Self {
            key: "pipecd.dev/variant".to_owned(),
            primary_value: "primary".to_owned(),
            canary_value: "canary".to_owned(),
            baseline_value: "baseline".to_owned(),
        }
    }
}

/// Sends the resources that match to another deploy target.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResourceRoute {
    pub provider: ProviderMatcher,
    #[serde(rename = "match")]
    pub matcher: Option<ResourceRef>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProviderMatcher {
    pub name: String,
    pub labels: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages() {
        let cases = [
            ("30", Some(30)),
            ("30%", Some(30)),
            (" 100% ", Some(100)),
            ("0", Some(0)),
            ("101", None),
            ("-1", None),
            ("abc", None),
            ("%", None),
        ];
        for (input, want) in cases {
            assert_eq!(
                Percentage::parse(input).ok().map(Percentage::get),
                want,
                "{input}"
            );
        }
        let from_yaml: Percentage = serde_yaml::from_str("30").unwrap();
        assert_eq!(from_yaml.get(), 30);
        let from_text: Percentage = serde_yaml::from_str("\"30%\"").unwrap();
        assert_eq!(from_text.to_string(), "30%");
        assert!(serde_yaml::from_str::<Percentage>("130").is_err());
    }
}
