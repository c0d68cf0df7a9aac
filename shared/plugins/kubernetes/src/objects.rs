//! What gannet applies for a manifest: the object with PipeCD's labels and annotations, in its
//! namespace, as a variant (primary, canary or baseline).
//!
//! Every applied object carries the labels `pipecd.dev/managed-by: piped` and
//! `pipecd.dev/application`, by which prune and drift find exactly what gannet owns, and the
//! annotations PipeCD writes (`pipecd.dev/managed-by`, `pipecd.dev/application`,
//! `pipecd.dev/commit-hash`, `pipecd.dev/resource-key`, `pipecd.dev/original-api-version`,
//! `pipecd.dev/variant`). A workload's pods carry the variant label; a canary or baseline copy
//! selects its own pods by it.

use crate::spec::VariantLabel;
use gannet_domain::ids::{AppId, CommitSha};
use serde_json::{json, Map, Value};

use crate::kinds;
use crate::manifest::{Manifest, ObjectRef};

pub const LABEL_MANAGED_BY: &str = "pipecd.dev/managed-by";
pub const LABEL_APPLICATION: &str = "pipecd.dev/application";
pub const ANNOTATION_COMMIT: &str = "pipecd.dev/commit-hash";
pub const ANNOTATION_RESOURCE_KEY: &str = "pipecd.dev/resource-key";
pub const ANNOTATION_ORIGINAL_API_VERSION: &str = "pipecd.dev/original-api-version";
pub const ANNOTATION_VARIANT: &str = "pipecd.dev/variant";
/// PipeCD's value of `pipecd.dev/managed-by`, kept so an app moved from PipeCD stays owned.
pub const MANAGED_BY: &str = "piped";

/// A variant of the app's workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Primary,
    Canary,
    Baseline,
}

impl Variant {
    /// The variant label's value for this variant.
    pub fn value(self, label: &VariantLabel) -> &str {
        match self {
            Self::Primary => &label.primary_value,
            Self::Canary => &label.canary_value,
            Self::Baseline => &label.baseline_value,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Primary => "primary",
            Self::Canary => "canary",
            Self::Baseline => "baseline",
        }
    }
}

/// The app's label value: the app id when it is a valid label value, otherwise its directory's
/// last part (cut to 40 characters) and 10 hex digits of its hash, so it stays unique.
pub fn app_label(app: &AppId) -> String {
    let id = app.as_str();
    if valid_label_value(id) {
        return id.to_owned();
    }
    app.label_value(false)
}

fn valid_label_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && v.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
        && v.chars().last().is_none_or(|c| c.is_ascii_alphanumeric())
}

/// The label selector of everything gannet applied for an app.
pub fn owned_selector(app_label: &str) -> String {
    format!("{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_APPLICATION}={app_label}")
}

/// Where `m` lives: `namespace_override` (`spec.input.namespace`) wins over the manifest's
/// namespace, which wins over the cluster's default; a cluster-scoped object has none.
pub fn place(
    m: &Manifest,
    namespaced: bool,
    namespace_override: &str,
    default_namespace: &str,
) -> ObjectRef {
    let namespace = if !namespaced {
        String::new()
    } else if !namespace_override.is_empty() {
        namespace_override.to_owned()
    } else {
        m.namespace
            .clone()
            .unwrap_or_else(|| default_namespace.to_owned())
    };
    ObjectRef {
        api_version: m.api_version.clone(),
        kind: m.kind.clone(),
        namespace,
        name: m.name.clone(),
    }
}

/// What every object of one apply shares.
#[derive(Clone, Debug)]
pub struct Stamp<'a> {
    pub app: &'a AppId,
    pub app_label: &'a str,
    pub commit: &'a CommitSha,
    pub variant_label: &'a VariantLabel,
    /// `spec.input.namespace`: wins over a manifest's own.
    pub namespace_override: &'a str,
    /// The cluster's default namespace, for manifests that name none.
    pub default_namespace: &'a str,
}

impl Stamp<'_> {
    /// Where `m` is applied, given whether its kind is namespaced.
    pub fn object_ref(&self, m: &Manifest, namespaced: bool) -> ObjectRef {
        place(
            m,
            namespaced,
            self.namespace_override,
            self.default_namespace,
        )
    }

    /// The object to apply for `m` at `at` as `variant`. `variant_selector` adds the variant
    /// label to a workload's selector too (always for a canary or baseline copy).
    pub fn object(
        &self,
        m: &Manifest,
        at: &ObjectRef,
        variant: Variant,
        variant_selector: bool,
    ) -> Value {
        let mut body = m.body.clone();
        let Some(object) = body.as_object_mut() else {
            return body;
        };
        object.remove("status");
        let metadata = object
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = metadata.as_object_mut() {
            for server_owned in [
                "resourceVersion",
                "uid",
                "creationTimestamp",
                "managedFields",
                "generation",
                "selfLink",
            ] {
                meta.remove(server_owned);
            }
            meta.insert("name".into(), json!(at.name));
            if at.namespace.is_empty() {
                meta.remove("namespace");
            } else {
                meta.insert("namespace".into(), json!(at.namespace));
            }
            let value = variant.value(self.variant_label);
            let labels = map_at(meta, "labels");
            labels.insert(LABEL_MANAGED_BY.into(), json!(MANAGED_BY));
            labels.insert(LABEL_APPLICATION.into(), json!(self.app_label));
            if variant != Variant::Primary {
                labels.insert(self.variant_label.key.clone(), json!(value));
            }
            let annotations = map_at(meta, "annotations");
            annotations.insert(LABEL_MANAGED_BY.into(), json!(MANAGED_BY));
            annotations.insert(LABEL_APPLICATION.into(), json!(self.app.as_str()));
            annotations.insert(ANNOTATION_COMMIT.into(), json!(self.commit.as_str()));
            annotations.insert(ANNOTATION_RESOURCE_KEY.into(), json!(at.pipecd_key()));
            annotations.insert(ANNOTATION_ORIGINAL_API_VERSION.into(), json!(m.api_version));
            annotations.insert(ANNOTATION_VARIANT.into(), json!(variant.name()));
        }
        if kinds::is_workload(&m.kind) {
            self.label_pods(object, variant, variant_selector);
        }
        body
    }

    /// The variant label on a workload's pod template, and on its selector when asked or
    /// when the selector already has the key.
    fn label_pods(
        &self,
        object: &mut Map<String, Value>,
        variant: Variant,
        variant_selector: bool,
    ) {
        let key = &self.variant_label.key;
        let value = json!(variant.value(self.variant_label));
        let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
            return;
        };
        if let Some(template) = spec.get_mut("template").and_then(Value::as_object_mut) {
            let meta = template
                .entry("metadata")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Some(meta) = meta.as_object_mut() {
                map_at(meta, "labels").insert(key.clone(), value.clone());
            }
        }
        let selector = spec
            .entry("selector")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(selector) = selector.as_object_mut() {
            let labels = map_at(selector, "matchLabels");
            if variant_selector || labels.contains_key(key) {
                labels.insert(key.clone(), value);
            }
        }
    }
}

/// The object at `key` of `map`, made one when it is missing or not an object.
fn map_at<'m>(map: &'m mut Map<String, Value>, key: &str) -> &'m mut Map<String, Value> {
    let slot = map.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(m) => m,
        _ => unreachable!("made an object above"),
    }
}

/// A workload's replica count in Git (1 when unset, as the API server defaults it).
pub fn replicas(body: &Value) -> u64 {
    body.pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(1)
}

/// Sets a workload's replica count.
pub fn set_replicas(body: &mut Value, n: u64) {
    if let Some(spec) = body.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("replicas".into(), json!(n));
    }
}

/// A Service copy for a variant: its own name, selecting only the variant's pods, with the
/// addresses the API server assigns left out.
pub fn variant_service(body: &mut Value, key: &str, value: &str) {
    if let Some(spec) = body.get_mut("spec").and_then(Value::as_object_mut) {
        for assigned in [
            "clusterIP",
            "clusterIPs",
            "externalIPs",
            "loadBalancerIP",
            "healthCheckNodePort",
        ] {
            spec.remove(assigned);
        }
        if let Some(Value::Array(ports)) = spec.get_mut("ports") {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                p.remove("nodePort");
            }
        }
    }
    select_variant(body, key, value);
}

/// A Service that selects only the pods with the variant label `key: value`; nothing else of
/// it changes.
pub fn select_variant(body: &mut Value, key: &str, value: &str) {
    if let Some(spec) = body.get_mut("spec").and_then(Value::as_object_mut) {
        map_at(spec, "selector").insert(key.into(), json!(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gannet_domain::ids::RepoId;

    fn manifest(body: Value) -> Manifest {
        Manifest {
            file: "deployment.yaml".into(),
            line: 1,
            api_version: body["apiVersion"].as_str().unwrap().into(),
            kind: body["kind"].as_str().unwrap().into(),
            name: body["metadata"]["name"].as_str().unwrap().into(),
            namespace: None,
            body,
        }
    }

    #[test]
    fn app_labels_are_valid_label_values_and_unique() {
        let repo = RepoId::parse("demo").unwrap();
        let a = app_label(&AppId::new(&repo, "apps/web/app.pipecd.yaml"));
        let b = app_label(&AppId::new(&repo, "other/web/app.pipecd.yaml"));
        assert!(a.starts_with("web-") && valid_label_value(&a), "{a}");
        assert_ne!(a, b);
        let long = app_label(&AppId::new(
            &repo,
            &format!("{}/app.pipecd.yaml", "x".repeat(90)),
        ));
        assert!(valid_label_value(&long), "{long}");
    }

    #[test]
    fn a_canary_copy_selects_its_own_pods_and_carries_pipecds_labels() {
        let repo = RepoId::parse("demo").unwrap();
        let app = AppId::new(&repo, "apps/web/app.pipecd.yaml");
        let commit = CommitSha::parse(&"a".repeat(40)).unwrap();
        let label = VariantLabel::default();
        let stamp = Stamp {
            app: &app,
            app_label: "web-1",
            commit: &commit,
            variant_label: &label,
            namespace_override: "",
            default_namespace: "default",
        };
        let m = manifest(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}},
            "status": {"replicas": 3}
        }));
        let at = stamp.object_ref(&m, true).renamed("web-canary".into());
        let o = stamp.object(&m, &at, Variant::Canary, true);
        assert_eq!(o["metadata"]["name"], "web-canary");
        assert_eq!(o["metadata"]["namespace"], "default");
        assert_eq!(o["metadata"]["labels"]["pipecd.dev/managed-by"], "piped");
        assert_eq!(o["metadata"]["labels"]["pipecd.dev/variant"], "canary");
        assert_eq!(
            o["metadata"]["annotations"]["pipecd.dev/commit-hash"],
            "a".repeat(40)
        );
        assert_eq!(
            o["metadata"]["annotations"]["pipecd.dev/resource-key"],
            "apps/v1:Deployment:default:web-canary"
        );
        assert_eq!(
            o["spec"]["selector"]["matchLabels"]["pipecd.dev/variant"],
            "canary"
        );
        assert_eq!(
            o["spec"]["template"]["metadata"]["labels"]["pipecd.dev/variant"],
            "canary"
        );
        assert!(o.get("status").is_none());

        // The primary keeps its selector (immutable) unless asked or already labelled.
        let at = stamp.object_ref(&m, true);
        let o = stamp.object(&m, &at, Variant::Primary, false);
        assert!(o["spec"]["selector"]["matchLabels"]
            .get("pipecd.dev/variant")
            .is_none());
        assert_eq!(
            o["spec"]["template"]["metadata"]["labels"]["pipecd.dev/variant"],
            "primary"
        );
    }

    #[test]
    fn routing_changes_only_the_selector_while_a_variant_copy_drops_assigned_addresses() {
        let service = json!({"spec": {"type": "NodePort", "clusterIP": "10.0.0.9",
            "selector": {"app": "web"}, "ports": [{"port": 80, "nodePort": 30080}]}});
        let mut routed = service.clone();
        select_variant(&mut routed, "pipecd.dev/variant", "canary");
        let mut want = service.clone();
        want["spec"]["selector"]["pipecd.dev/variant"] = json!("canary");
        assert_eq!(routed, want);
        let mut copy = service;
        variant_service(&mut copy, "pipecd.dev/variant", "canary");
        assert_eq!(
            copy["spec"]["selector"],
            json!({"app": "web", "pipecd.dev/variant": "canary"})
        );
        assert!(
            copy["spec"].get("clusterIP").is_none()
                && copy["spec"]["ports"][0].get("nodePort").is_none()
        );
    }
}
