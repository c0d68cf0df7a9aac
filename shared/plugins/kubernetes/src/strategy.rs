//! PipeCD's rule for a Kubernetes commit: the pipeline runs when the commit changes a
//! workload's pod template, or a ConfigMap or Secret; any other change (a Service, an Ingress,
//! a workload's replicas or labels, nothing at all) is a quick sync. The running commit's
//! manifests are compared with the commit's, object by object (PipeCD's `decideStrategy`).

use std::collections::BTreeMap;

use gannet_domain::deployment::SyncStrategy;
use serde_json::Value;

use crate::manifest::{self, Manifest};
use crate::spec::KubernetesSpec;

/// Pipeline or quick sync for moving from `running` to `target`, with the reason (worded to
/// follow "Pipeline sync, because" or "Quick sync, because").
pub(crate) fn decide(
    running: &[Manifest],
    running_spec: &KubernetesSpec,
    target: &[Manifest],
    spec: &KubernetesSpec,
) -> (SyncStrategy, String) {
    let quick = |why: String| (SyncStrategy::QuickSync, why);
    let pipeline = |why: String| (SyncStrategy::Pipeline, why);
    let olds = manifest::workloads(running_spec, running);
    let news = manifest::workloads(spec, target);
    if olds.is_empty() {
        return quick(
            "no workload was found in the running commit's manifests, so every manifest is applied"
                .into(),
        );
    }
    if news.is_empty() {
        return quick(
            "no workload was found in the manifests, so every manifest is applied".into(),
        );
    }
    let pairs: Vec<(&Manifest, &Manifest)> = news
        .iter()
        .filter_map(|new| {
            olds.iter()
                .find(|old| key(old) == key(new))
                .map(|old| (*old, *new))
        })
        .collect();
    let changed: Vec<&(&Manifest, &Manifest)> = pairs
        .iter()
        .filter(|(old, new)| {
            old.body.pointer("/spec/template") != new.body.pointer("/spec/template")
        })
        .collect();
    if !changed.is_empty() {
        let images: Vec<String> = changed
            .iter()
            .flat_map(|(old, new)| image_changes(old, new))
            .collect();
        if !images.is_empty() {
            return pipeline(format!("the commit updates {}", images.join(", ")));
        }
        let (_, new) = changed[0];
        return pipeline(format!(
            "the pod template of workload {}/{} changed",
            new.kind, new.name
        ));
    }
    if let Some(why) = config_change(running, target) {
        return pipeline(why);
    }
    let mut scaled: Vec<String> = pairs
        .iter()
        .filter_map(|(old, new)| {
            let (from, to) = (replicas(old), replicas(new));
            (from != to).then(|| format!("{}/{} from {from} to {to}", new.kind, new.name))
        })
        .collect();
    if !scaled.is_empty() {
        scaled.sort();
        return quick(format!("the commit only scales {}", scaled.join(", ")));
    }
    quick(
        "no workload's pod template, ConfigMap or Secret changed, so every manifest is applied"
            .into(),
    )
}

/// An object's identity across commits: its kind, namespace (`default` as none) and name; the
/// apiVersion may change between commits.
fn key(m: &Manifest) -> (String, String, String) {
    let namespace = match m.namespace.as_deref() {
        None | Some("default") => String::new(),
        Some(ns) => ns.to_owned(),
    };
    (m.kind.clone(), namespace, m.name.clone())
}

fn replicas(m: &Manifest) -> String {
    m.body
        .pointer("/spec/replicas")
        .map_or_else(|| "unset".to_owned(), Value::to_string)
}

/// `image nginx from 1.25 to 1.26` for each container whose image changed (by position), or
/// `image a:1 to b:2` when the image's name changed too.
fn image_changes(old: &Manifest, new: &Manifest) -> Vec<String> {
    let images = |m: &Manifest| -> Vec<String> {
        m.body
            .pointer("/spec/template/spec/containers")
            .and_then(Value::as_array)
            .map(|cs| {
                cs.iter()
                    .map(|c| c["image"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let (before, after) = (images(old), images(new));
    before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b != a)
        .map(|(b, a)| {
            let (b_name, b_tag) = split_image(b);
            let (a_name, a_tag) = split_image(a);
            if b_name == a_name {
                format!("image {a_name} from {b_tag} to {a_tag}")
            } else {
                format!("image {b} to {a}")
            }
        })
        .collect()
}

/// `registry:5000/app:1.2` into `registry:5000/app` and `1.2` (no tag: `latest`).
fn split_image(image: &str) -> (&str, &str) {
    let name_start = image.rfind('/').map_or(0, |i| i + 1);
    match image[name_start..].rfind(':') {
        Some(i) => (&image[..name_start + i], &image[name_start + i + 1..]),
        None => (image, "latest"),
    }
}

/// Why the pipeline runs for the commit's ConfigMaps and Secrets, when one was added,
/// deleted or changed.
fn config_change(running: &[Manifest], target: &[Manifest]) -> Option<String> {
    let configs = |ms: &[Manifest]| -> BTreeMap<(String, String, String), Value> {
        ms.iter()
            .filter(|m| m.api_version == "v1" && matches!(m.kind.as_str(), "ConfigMap" | "Secret"))
            .map(|m| (key(m), m.body.clone()))
            .collect()
    };
    let (olds, news) = (configs(running), configs(target));
    if olds.len() > news.len() {
        return Some(format!(
            "{} ConfigMap or Secret was deleted",
            olds.len() - news.len()
        ));
    }
    if news.len() > olds.len() {
        return Some(format!(
            "{} ConfigMap or Secret was added",
            news.len() - olds.len()
        ));
    }
    for (k, old) in &olds {
        let (kind, _, name) = k;
        match news.get(k) {
            None => return Some(format!("{kind} {name} was deleted")),
            Some(new) if new != old => return Some(format!("{kind} {name} was updated")),
            Some(_) => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifests(yaml: &str) -> Vec<Manifest> {
        manifest::parse("m.yaml", yaml).expect("manifests parse")
    }

    const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: REPLICAS\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n        - {name: web, image: IMAGE}\n";
    const SERVICE: &str = "---\napiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec:\n  ports: [{port: PORT}]\n";
    const CONFIG: &str = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config}\ndata: {greeting: GREETING}\n";

    fn app(replicas: &str, image: &str, port: &str, greeting: Option<&str>) -> Vec<Manifest> {
        let mut text = DEPLOYMENT
            .replace("REPLICAS", replicas)
            .replace("IMAGE", image);
        text += &SERVICE.replace("PORT", port);
        if let Some(g) = greeting {
            text += &CONFIG.replace("GREETING", g);
        }
        manifests(&text)
    }

    #[test]
    fn pipecds_rules_in_order() {
        let spec = KubernetesSpec::default();
        let running = app("2", "nginx:1.25", "80", Some("hi"));
        let cases = [
            (
                "a Service only",
                app("2", "nginx:1.25", "8080", Some("hi")),
                SyncStrategy::QuickSync,
                "no workload's pod template, ConfigMap or Secret changed",
            ),
            (
                "nothing",
                app("2", "nginx:1.25", "80", Some("hi")),
                SyncStrategy::QuickSync,
                "no workload's pod template",
            ),
            (
                "an image",
                app("2", "nginx:1.26", "80", Some("hi")),
                SyncStrategy::Pipeline,
                "the commit updates image nginx from 1.25 to 1.26",
            ),
            (
                "another image",
                app("2", "caddy:2", "80", Some("hi")),
                SyncStrategy::Pipeline,
                "the commit updates image nginx:1.25 to caddy:2",
            ),
            (
                "a ConfigMap",
                app("2", "nginx:1.25", "80", Some("hello")),
                SyncStrategy::Pipeline,
                "ConfigMap web-config was updated",
            ),
            (
                "a ConfigMap deleted",
                app("2", "nginx:1.25", "80", None),
                SyncStrategy::Pipeline,
                "1 ConfigMap or Secret was deleted",
            ),
            (
                "replicas",
                app("3", "nginx:1.25", "80", Some("hi")),
                SyncStrategy::QuickSync,
                "the commit only scales Deployment/web from 2 to 3",
            ),
        ];
        for (case, target, strategy, why) in cases {
            let (got, reason) = decide(&running, &spec, &target, &spec);
            assert_eq!(got, strategy, "{case}: {reason}");
            assert!(reason.contains(why), "{case}: {reason:?} lacks {why:?}");
        }
    }

    #[test]
    fn a_pod_template_change_other_than_an_image_runs_the_pipeline() {
        let spec = KubernetesSpec::default();
        let running = app("2", "nginx:1.25", "80", None);
        let labelled = manifests(
            &DEPLOYMENT
                .replace("REPLICAS", "2")
                .replace("IMAGE", "nginx:1.25")
                .replace("{app: web}", "{app: web, tier: front}"),
        );
        let (got, reason) = decide(&running, &spec, &labelled, &spec);
        assert_eq!(got, SyncStrategy::Pipeline);
        assert_eq!(
            reason,
            "the pod template of workload Deployment/web changed"
        );
    }

    #[test]
    fn without_workloads_every_manifest_is_applied() {
        let spec = KubernetesSpec::default();
        let services = manifests(&SERVICE.replace("PORT", "80"));
        let (got, reason) = decide(&services, &spec, &app("2", "a:1", "80", None), &spec);
        assert_eq!(got, SyncStrategy::QuickSync);
        assert!(reason.contains("running commit"), "{reason}");
        let (got, reason) = decide(&app("2", "a:1", "80", None), &spec, &services, &spec);
        assert_eq!(got, SyncStrategy::QuickSync);
        assert!(
            reason.starts_with("no workload was found in the manifests"),
            "{reason}"
        );
    }

    #[test]
    fn an_image_is_split_at_the_tag_not_the_registry_port() {
        assert_eq!(
            split_image("registry:5000/app:1.2"),
            ("registry:5000/app", "1.2")
        );
        assert_eq!(
            split_image("registry:5000/app"),
            ("registry:5000/app", "latest")
        );
        assert_eq!(split_image("nginx"), ("nginx", "latest"));
    }
}
