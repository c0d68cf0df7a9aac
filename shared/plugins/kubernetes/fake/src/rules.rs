//! The few defaults the fake fills in and the few validations it makes (422 Invalid).

use serde_json::{json, Map, Value};

use crate::kinds::Kind;
use crate::selector;
use crate::status::FieldError;

fn map_at<'a>(value: &'a mut Value, path: &[&str]) -> Option<&'a mut Map<String, Value>> {
    path.iter()
        .try_fold(value, |v, key| v.get_mut(key))?
        .as_object_mut()
}

/// The maps in the list at `key` of `map`.
fn maps_in<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    let items = map
        .get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten();
    items.filter_map(Value::as_object_mut)
}

/// Sets each field of `defaults` that `map` lacks.
fn fill(map: &mut Map<String, Value>, defaults: Value) {
    for (key, value) in defaults.as_object().into_iter().flatten() {
        map.entry(key).or_insert_with(|| value.clone());
    }
}

/// [`fill`] of the map at `path`, if there is one.
fn fill_at(object: &mut Value, path: &[&str], defaults: Value) {
    if let Some(map) = map_at(object, path) {
        fill(map, defaults);
    }
}

/// Fills the real server's defaults that no manager owns. `old` is the stored object, if any
/// (a Service keeps its cluster IP); `allocate_ip` hands out a new one.
pub(crate) fn default(
    kind: &Kind,
    object: &mut Value,
    old: Option<&Value>,
    allocate_ip: impl FnOnce() -> String,
) {
    match kind.kind {
        "Deployment" => {
            let defaults = json!({"replicas": 1, "revisionHistoryLimit": 10,
                "progressDeadlineSeconds": 600, "strategy": {"type": "RollingUpdate"}});
            fill_at(object, &["spec"], defaults);
            if object["spec"]["strategy"]["type"] == "RollingUpdate" {
                let rolling =
                    json!({"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}});
                fill_at(object, &["spec", "strategy"], rolling);
            }
            pod_spec(map_at(object, &["spec", "template", "spec"]));
        }
        "StatefulSet" | "DaemonSet" | "ReplicaSet" => {
            pod_spec(map_at(object, &["spec", "template", "spec"]))
        }
        "Pod" => pod_spec(map_at(object, &["spec"])),
        "Service" => service(object, old, allocate_ip),
        "Secret" => secret(object),
        "Namespace" => {
            let name = object["metadata"]["name"].clone();
            fill_at(object, &[], json!({"status": {"phase": "Active"}}));
            fill_at(object, &["metadata"], json!({"labels": {}}));
            let label = json!({"kubernetes.io/metadata.name": name});
            fill_at(object, &["metadata", "labels"], label);
        }
        _ => {}
    }
}

/// `stringData` is write-only: the server folds it into `data`, base64-encoded.
fn secret(object: &mut Value) {
    use base64::Engine;
    let Some(map) = object.as_object_mut() else {
        return;
    };
    let Some(Value::Object(plain)) = map.remove("stringData") else {
        return;
    };
    let data = map.entry("data").or_insert_with(|| json!({}));
    if let Value::Object(data) = data {
        for (k, v) in plain {
            let text = v.as_str().unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            data.insert(k, Value::String(encoded));
        }
    }
}

fn pod_spec(spec: Option<&mut Map<String, Value>>) {
    let Some(spec) = spec else { return };
    let defaults = json!({"restartPolicy": "Always", "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 30,
        "securityContext": {}});
    fill(spec, defaults);
    for list in ["containers", "initContainers"] {
        for container in maps_in(spec, list) {
            let image = container
                .get("image")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let last = image.rsplit('/').next().unwrap_or_default();
            let latest = !image.contains('@') && (!last.contains(':') || last.ends_with(":latest"));
            let defaults = json!({"imagePullPolicy": if latest { "Always" } else { "IfNotPresent" },
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File"});
            fill(container, defaults);
            maps_in(container, "ports").for_each(|port| fill(port, json!({"protocol": "TCP"})));
        }
    }
}

fn service(object: &mut Value, old: Option<&Value>, allocate_ip: impl FnOnce() -> String) {
    let Some(spec) = map_at(object, &["spec"]) else {
        return;
    };
    fill(
        spec,
        json!({"type": "ClusterIP", "sessionAffinity": "None"}),
    );
    if spec.get("type") != Some(&json!("ExternalName")) {
        let old_ip = old
            .map(|old| &old["spec"]["clusterIP"])
            .filter(|ip| ip.is_string());
        let ip = match spec.get("clusterIP").or(old_ip) {
            Some(ip) => ip.clone(),
            None => json!(allocate_ip()),
        };
        let defaults = json!({"clusterIP": ip, "clusterIPs": [ip], "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster"});
        fill(spec, defaults);
    }
    for port in maps_in(spec, "ports") {
        let target = port.get("port").cloned().unwrap_or_default();
        fill(port, json!({"protocol": "TCP", "targetPort": target}));
    }
}

/// The validation errors of an object about to be stored (`old`: the stored one, if any).
pub(crate) fn validate(kind: &Kind, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match object["metadata"]["name"].as_str().unwrap_or_default() {
        "" => errors.push(FieldError {
            field: "metadata.name".to_string(),
            detail: "Required value: name or generateName is required".to_string(),
        }),
        name if !is_dns_subdomain(name) => errors.push(FieldError::invalid(
            "metadata.name",
            format!(
                "{name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
                 characters, '-' or '.', and must start and end with an alphanumeric character \
                 (e.g. 'example.com', regex used for validation is \
                 '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ),
        )),
        _ => {}
    }
    labels(
        &object["metadata"]["labels"],
        "metadata.labels",
        &mut errors,
    );
    let template_labels = &object["spec"]["template"]["metadata"]["labels"];
    labels(
        template_labels,
        "spec.template.metadata.labels",
        &mut errors,
    );
    match kind.kind {
        "Deployment" => {
            let selector = &object["spec"]["selector"];
            if selector.is_null() {
                errors.push(FieldError::required("spec.selector"));
            }
            let requirements = selector::from_object(selector);
            if selector.is_null() || !selector::matches(&requirements, Some(template_labels)) {
                errors.push(FieldError::invalid(
                    "spec.template.metadata.labels",
                    format!(
                        "{}: `selector` does not match template `labels`",
                        go_map(template_labels)
                    ),
                ));
            }
            if old.is_some_and(|old| old["spec"]["selector"] != *selector) {
                let shown = go_selector(selector);
                errors.push(FieldError::invalid(
                    "spec.selector",
                    format!("{shown}: field is immutable"),
                ));
            }
        }
        "Service" => {
            let spec = &object["spec"];
            let headless = spec["clusterIP"] == "None" || spec["type"] == "ExternalName";
            let no_ports = spec["ports"].as_array().is_none_or(Vec::is_empty);
            if no_ports && !headless {
                errors.push(FieldError::required("spec.ports"));
            }
            let old_ip = old.map(|old| &old["spec"]["clusterIP"]);
            if old_ip.is_some_and(|ip| ip.is_string() && *ip != spec["clusterIP"]) {
                errors.push(FieldError::invalid(
                    "spec.clusterIPs[0]",
                    format!("[]string{{{}}}: may not change once set", spec["clusterIP"]),
                ));
            }
        }
        _ => {}
    }
    errors
}

const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric \
    characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. \
    'MyValue',  or 'my_value',  or '12345', regex used for validation is \
    '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn labels(labels: &Value, field: &str, errors: &mut Vec<FieldError>) {
    for value in labels
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(_, v)| v.as_str())
    {
        let valid_char = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
        let edges_alnum = value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric());
        if value.len() > 63 {
            errors.push(FieldError::invalid(
                field,
                format!("{value:?}: must be no more than 63 characters"),
            ));
        } else if !(value.is_empty() || edges_alnum && value.chars().all(valid_char)) {
            errors.push(FieldError::invalid(
                field,
                format!("{value:?}: {LABEL_VALUE}"),
            ));
        }
    }
}

fn is_dns_subdomain(name: &str) -> bool {
    let label_ok = |label: &str| {
        let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        label.starts_with(alnum)
            && label.ends_with(alnum)
            && label.chars().all(|c| alnum(c) || c == '-')
    };
    name.len() <= 253 && name.split('.').all(label_ok)
}

/// A JSON map of strings as Go prints a `map[string]string` with `%#v`.
fn go_map(map: &Value) -> String {
    let Some(map) = map.as_object() else {
        return "map[string]string(nil)".to_string();
    };
    let pairs: Vec<String> = map.iter().map(|(k, v)| format!("{k:?}:{}", v)).collect();
    format!("map[string]string{{{}}}", pairs.join(", "))
}

/// A `LabelSelector` as Go prints one with `%#v` in an immutable-field error.
fn go_selector(selector: &Value) -> String {
    let expressions = match selector["matchExpressions"].as_array() {
        Some(list) if !list.is_empty() => {
            let shown: Vec<String> =
                list.iter()
                    .map(|e| {
                        let values = e["values"].as_array().into_iter().flatten();
                        let values: Vec<String> = values.map(Value::to_string).collect();
                        format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:[]string{{{}}}}}",
                        e["key"], e["operator"], values.join(", ")
                    )
                    })
                    .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", shown.join(", "))
        }
        _ => "[]v1.LabelSelectorRequirement(nil)".to_string(),
    };
    let labels = go_map(&selector["matchLabels"]);
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{expressions}}}")
}
