//! The ConfigMaps and Secrets a workload's pods use, so that a canary or baseline runs with its
//! own copy of them (PipeCD's config-change canary): the copies are named `<name>-<suffix>`,
//! and the variant's workload refers to them.

use serde_json::Value;

/// Which kind a reference names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigKind {
    ConfigMap,
    Secret,
}

impl ConfigKind {
    pub fn kind(self) -> &'static str {
        match self {
            Self::ConfigMap => "ConfigMap",
            Self::Secret => "Secret",
        }
    }
}

/// Every place in a pod spec that names a ConfigMap or a Secret: `(pointer to the object that
/// holds the name, the name's key, the kind)`.
fn references(pod: &Value) -> Vec<(String, &'static str, ConfigKind)> {
    let mut out = Vec::new();
    let items = |v: &Value, key: &str| -> Vec<usize> {
        v.get(key)
            .and_then(Value::as_array)
            .map_or_else(Vec::new, |a| (0..a.len()).collect())
    };
    for v in items(pod, "volumes") {
        let at = format!("/volumes/{v}");
        out.push((format!("{at}/configMap"), "name", ConfigKind::ConfigMap));
        out.push((format!("{at}/secret"), "secretName", ConfigKind::Secret));
        let volume = &pod["volumes"][v];
        for s in items(&volume["projected"], "sources") {
            let source = format!("{at}/projected/sources/{s}");
            out.push((format!("{source}/configMap"), "name", ConfigKind::ConfigMap));
            out.push((format!("{source}/secret"), "name", ConfigKind::Secret));
        }
    }
    for list in ["containers", "initContainers"] {
        for c in items(pod, list) {
            let container = &pod[list][c];
            let at = format!("/{list}/{c}");
            for e in items(container, "envFrom") {
                out.push((
                    format!("{at}/envFrom/{e}/configMapRef"),
                    "name",
                    ConfigKind::ConfigMap,
                ));
                out.push((
                    format!("{at}/envFrom/{e}/secretRef"),
                    "name",
                    ConfigKind::Secret,
                ));
            }
            for e in items(container, "env") {
                let from = format!("{at}/env/{e}/valueFrom");
                out.push((
                    format!("{from}/configMapKeyRef"),
                    "name",
                    ConfigKind::ConfigMap,
                ));
                out.push((format!("{from}/secretKeyRef"), "name", ConfigKind::Secret));
            }
        }
    }
    out
}

/// The ConfigMaps and Secrets `workload`'s pods use, by kind and name.
pub fn used_by(workload: &Value) -> Vec<(ConfigKind, String)> {
    let Some(pod) = workload.pointer("/spec/template/spec") else {
        return Vec::new();
    };
    let mut out: Vec<(ConfigKind, String)> = references(pod)
        .into_iter()
        .filter_map(|(at, key, kind)| {
            let name = pod.pointer(&at)?.get(key)?.as_str()?;
            Some((kind, name.to_owned()))
        })
        .collect();
    out.sort_by(|a, b| (a.0.kind(), &a.1).cmp(&(b.0.kind(), &b.1)));
    out.dedup();
    out
}

/// Points `workload`'s pods at the copies: each reference to a name `copied` holds (for its
/// kind) becomes `<name>-<suffix>`.
pub fn refer_to_copies(workload: &mut Value, copied: &[(ConfigKind, String)], suffix: &str) {
    let Some(pod) = workload.pointer_mut("/spec/template/spec") else {
        return;
    };
    for (at, key, kind) in references(pod) {
        let Some(holder) = pod.pointer_mut(&at).and_then(Value::as_object_mut) else {
            continue;
        };
        let Some(name) = holder.get(key).and_then(Value::as_str).map(str::to_owned) else {
            continue;
        };
        if copied.iter().any(|(k, n)| *k == kind && *n == name) {
            holder.insert(key.to_owned(), Value::String(format!("{name}-{suffix}")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn workload() -> Value {
        json!({"spec": {"template": {"spec": {
            "volumes": [
                {"name": "a", "configMap": {"name": "web-config"}},
                {"name": "b", "secret": {"secretName": "web-tls"}},
                {"name": "c", "projected": {"sources": [{"configMap": {"name": "extra"}}]}}
            ],
            "containers": [{"name": "web",
                "envFrom": [{"configMapRef": {"name": "web-config"}}],
                "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "p"}}}]}]
        }}}})
    }

    #[test]
    fn every_reference_is_found_and_only_the_copied_ones_are_renamed() {
        let used = used_by(&workload());
        let names: Vec<(&str, &str)> = used.iter().map(|(k, n)| (k.kind(), n.as_str())).collect();
        assert_eq!(
            names,
            [
                ("ConfigMap", "extra"),
                ("ConfigMap", "web-config"),
                ("Secret", "creds"),
                ("Secret", "web-tls")
            ]
        );
        let mut w = workload();
        let copied = [
            (ConfigKind::ConfigMap, "web-config".to_owned()),
            (ConfigKind::Secret, "creds".to_owned()),
        ];
        refer_to_copies(&mut w, &copied, "canary");
        let pod = &w["spec"]["template"]["spec"];
        assert_eq!(pod["volumes"][0]["configMap"]["name"], "web-config-canary");
        assert_eq!(
            pod["containers"][0]["envFrom"][0]["configMapRef"]["name"],
            "web-config-canary"
        );
        assert_eq!(
            pod["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["name"],
            "creds-canary"
        );
        assert_eq!(
            pod["volumes"][1]["secret"]["secretName"], "web-tls",
            "not in Git: left as it is"
        );
        assert_eq!(
            pod["volumes"][2]["projected"]["sources"][0]["configMap"]["name"],
            "extra"
        );
    }
}
