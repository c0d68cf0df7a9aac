//! The kinds gannet knows without asking the API server: their plural names and scope. Any
//! other kind (a custom resource) is looked up once per cluster through discovery.

use kube::discovery::ApiResource;

/// A kind's REST resource and scope.
#[derive(Clone, Debug)]
pub(crate) struct Kind {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// `(apiVersion, kind, plural, namespaced)`.
const KNOWN: &[(&str, &str, &str, bool)] = &[
    ("v1", "Namespace", "namespaces", false),
    ("v1", "Service", "services", true),
    ("v1", "ConfigMap", "configmaps", true),
    ("v1", "Secret", "secrets", true),
    ("v1", "ServiceAccount", "serviceaccounts", true),
    ("v1", "Pod", "pods", true),
    (
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
    ),
    ("apps/v1", "Deployment", "deployments", true),
    ("apps/v1", "StatefulSet", "statefulsets", true),
    ("apps/v1", "DaemonSet", "daemonsets", true),
    ("apps/v1", "ReplicaSet", "replicasets", true),
    (
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        true,
    ),
    ("networking.k8s.io/v1", "Ingress", "ingresses", true),
    (
        "networking.k8s.io/v1",
        "NetworkPolicy",
        "networkpolicies",
        true,
    ),
    ("batch/v1", "Job", "jobs", true),
    ("batch/v1", "CronJob", "cronjobs", true),
    (
        "policy/v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    (
        "networking.istio.io/v1beta1",
        "VirtualService",
        "virtualservices",
        true,
    ),
    (
        "networking.istio.io/v1beta1",
        "DestinationRule",
        "destinationrules",
        true,
    ),
    (
        "networking.istio.io/v1",
        "VirtualService",
        "virtualservices",
        true,
    ),
    (
        "networking.istio.io/v1",
        "DestinationRule",
        "destinationrules",
        true,
    ),
];

/// The kind if it is one of the well-known ones.
pub(crate) fn known(api_version: &str, kind: &str) -> Option<Kind> {
    KNOWN
        .iter()
        .find(|(v, k, _, _)| *v == api_version && *k == kind)
        .map(|(v, k, plural, namespaced)| Kind {
            resource: resource(v, k, plural),
            namespaced: *namespaced,
        })
}

/// The REST resource of `kind` in `api_version` (`group/version`, or `v1` for the core group).
pub(crate) fn resource(api_version: &str, kind: &str, plural: &str) -> ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource {
        group: group.to_owned(),
        version: version.to_owned(),
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        plural: plural.to_owned(),
    }
}

/// Workloads: kinds whose pods gannet waits for and copies into variants.
pub(crate) fn is_workload(kind: &str) -> bool {
    matches!(kind, "Deployment" | "StatefulSet" | "DaemonSet")
}
