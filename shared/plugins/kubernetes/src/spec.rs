//! A KubernetesApp's own fields: the app config's `spec.input`, `spec.quickSync`, `spec.service`,
//! `spec.workloads`, `spec.trafficRouting`, `spec.variantLabel` and `spec.resourceRoutes`, which
//! this plugin owns ([`gannet_config::V0_KINDS`]), with PipeCD's names and defaults.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
    /// The kubernetes_multicluster plugin's targets, each with its own manifests.
    pub multi_targets: Vec<MultiTarget>,
}

/// One cluster of a kubernetes_multicluster app (`spec.plugins.kubernetes_multicluster.input
/// .multiTargets[i]`): which deploy target, and the manifests it gets instead of the app's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MultiTarget {
    pub target: MultiTargetName,
    /// Empty means the app's `input.manifests`.
    pub manifests: Vec<String>,
    /// PipeCD's pinned kubectl: gannet talks to the API itself, so the value is only accepted.
    pub kubectl_version: String,
    pub kustomize_dir: String,
    pub kustomize_version: String,
    pub kustomize_options: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MultiTargetName {
    pub name: String,
    pub labels: BTreeMap<String, String>,
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
