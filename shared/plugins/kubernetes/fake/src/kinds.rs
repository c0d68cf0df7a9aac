//! The static table of resource kinds the fake serves, and the discovery documents built from it.

use serde_json::{json, Value};

/// One served resource at one group/version.
#[derive(Debug)]
pub(crate) struct Kind {
    pub kind: &'static str,
    /// "" for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    /// Has a `/status` subresource: writes to the main resource keep the stored `.status`.
    pub status: bool,
    /// The object carries `metadata.generation`.
    pub generation: bool,
}

const NAMESPACED: u8 = 1;
const STATUS: u8 = 2;
const GENERATION: u8 = 4;
const ALL: u8 = NAMESPACED | STATUS | GENERATION;

const fn k(
    kind: &'static str,
    gv: (&'static str, &'static str),
    plural: &'static str,
    flags: u8,
) -> Kind {
    Kind {
        kind,
        group: gv.0,
        version: gv.1,
        plural,
        namespaced: flags & NAMESPACED != 0,
        status: flags & STATUS != 0,
        generation: flags & GENERATION != 0,
    }
}

const CORE: (&str, &str) = ("", "v1");
const APPS: (&str, &str) = ("apps", "v1");
const BATCH: (&str, &str) = ("batch", "v1");
const RBAC: (&str, &str) = ("rbac.authorization.k8s.io", "v1");
const ISTIO_V1: (&str, &str) = ("networking.istio.io", "v1");
const ISTIO_V1BETA1: (&str, &str) = ("networking.istio.io", "v1beta1");

/// Every kind served. The two Istio versions share one storage (same group, kind and plural).
#[rustfmt::skip]
pub(crate) static KINDS: &[Kind] = &[
    k("Namespace", CORE, "namespaces", STATUS),
    k("Service", CORE, "services", NAMESPACED | STATUS),
    k("ConfigMap", CORE, "configmaps", NAMESPACED),
    k("Secret", CORE, "secrets", NAMESPACED),
    k("ServiceAccount", CORE, "serviceaccounts", NAMESPACED),
    k("Pod", CORE, "pods", ALL),
    k("Deployment", APPS, "deployments", ALL),
    k("StatefulSet", APPS, "statefulsets", ALL),
    k("DaemonSet", APPS, "daemonsets", ALL),
    k("ReplicaSet", APPS, "replicasets", ALL),
    k("HorizontalPodAutoscaler", ("autoscaling", "v2"), "horizontalpodautoscalers", ALL),
    k("Ingress", ("networking.k8s.io", "v1"), "ingresses", ALL),
    k("Job", BATCH, "jobs", ALL),
    k("CronJob", BATCH, "cronjobs", ALL),
    k("PodDisruptionBudget", ("policy", "v1"), "poddisruptionbudgets", ALL),
    k("Role", RBAC, "roles", NAMESPACED),
    k("RoleBinding", RBAC, "rolebindings", NAMESPACED),
    k("ClusterRole", RBAC, "clusterroles", 0),
    k("ClusterRoleBinding", RBAC, "clusterrolebindings", 0),
    k("VirtualService", ISTIO_V1, "virtualservices", ALL),
    k("DestinationRule", ISTIO_V1, "destinationrules", ALL),
    k("VirtualService", ISTIO_V1BETA1, "virtualservices", ALL),
    k("DestinationRule", ISTIO_V1BETA1, "destinationrules", ALL),
];

impl Kind {
    /// "apps/v1", or "v1" for the core group.
    pub fn api_version(&self) -> String {
        group_version(self.group, self.version)
    }

    /// "deployments.apps", or "services" for the core group, as in real error messages.
    pub fn qualified_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// A custom resource: every list in it is atomic, and DELETE answers with the object.
    pub fn is_crd(&self) -> bool {
        self.group == "networking.istio.io"
    }

    /// Finds a kind by its apiVersion ("apps/v1", "v1") and kind.
    pub fn by_kind(api_version: &str, kind: &str) -> Option<&'static Kind> {
        KINDS
            .iter()
            .find(|k| k.kind == kind && k.api_version() == api_version)
    }

    /// Finds a kind by the group, version and plural of a request path.
    pub fn by_plural(group: &str, version: &str, plural: &str) -> Option<&'static Kind> {
        KINDS
            .iter()
            .find(|k| k.group == group && k.version == version && k.plural == plural)
    }
}

/// `GET /version`.
pub(crate) fn version() -> Value {
    json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0",
        "gitCommit": "60a317eadfcb839692a68eab88b2096f4d708f4f", "gitTreeState": "clean",
        "buildDate": "2025-04-23T13:07:29Z", "goVersion": "go1.24.2", "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `GET /api`.
pub(crate) fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

/// `GET /apis`: every group but the core one, newest version preferred.
pub(crate) fn group_list() -> Value {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for k in KINDS.iter().filter(|k| !k.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == k.group) {
            Some((_, versions)) if !versions.contains(&k.version) => versions.push(k.version),
            Some(_) => {}
            None => groups.push((k.group, vec![k.version])),
        }
    }
    let groups: Vec<Value> = groups
        .iter()
        .map(|(group, versions)| {
            let gv = |v: &&str| json!({"groupVersion": format!("{group}/{v}"), "version": v});
            json!({"name": group, "versions": versions.iter().map(gv).collect::<Vec<_>>(),
                   "preferredVersion": gv(&versions[0])})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /api/v1` or `GET /apis/{group}/{version}`; `None` for an unknown group/version.
pub(crate) fn resource_list(group: &str, version: &str) -> Option<Value> {
    let verbs = json!(["create", "delete", "get", "list", "patch", "update"]);
    let mut resources = Vec::new();
    for k in KINDS
        .iter()
        .filter(|k| k.group == group && k.version == version)
    {
        resources.push(json!({
            "name": k.plural, "singularName": k.kind.to_lowercase(), "namespaced": k.namespaced,
            "kind": k.kind, "verbs": verbs
        }));
        if k.status {
            resources.push(json!({
                "name": format!("{}/status", k.plural), "singularName": "",
                "namespaced": k.namespaced, "kind": k.kind, "verbs": ["get", "patch", "update"]
            }));
        }
    }
    (!resources.is_empty()).then(|| {
        json!({"kind": "APIResourceList", "apiVersion": "v1",
               "groupVersion": group_version(group, version), "resources": resources})
    })
}

/// "apps/v1", or "v1" for the core group.
fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}
