//! Field paths as the API server keeps them. Lists that Kubernetes merges by key (containers by
//! name, ports by port and protocol, …) become maps keyed `[name=app]`, so two objects compare
//! item by item whatever the order, and a `managedFields` entry (FieldsV1) reads as the same
//! paths.

use serde_json::{Map, Value};

/// The key fields of the items of a list named `field`, when Kubernetes merges it by key.
fn key_fields(field: &str, item: &Value) -> Option<&'static [&'static str]> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets" => &["name"],
        "volumeMounts" => &["mountPath"],
        "ports" if item.get("containerPort").is_some() => &["containerPort", "protocol"],
        "ports" if item.get("port").is_some() => &["port", "protocol"],
        _ => return None,
    })
}

/// `[a=1,b=x]` from key fields and their values (sorted by field name, as FieldsV1 has them).
fn key_string(pairs: &mut [(String, String)]) -> String {
    pairs.sort();
    let inner: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("[{}]", inner.join(","))
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The item's key, with the API server's default `protocol: TCP` for a port.
fn item_key(fields: &[&str], item: &Value) -> Option<String> {
    let mut pairs = Vec::new();
    for f in fields {
        let value = match item.get(*f) {
            Some(v) => scalar(v),
            None if *f == "protocol" => "TCP".to_owned(),
            None => return None,
        };
        pairs.push(((*f).to_owned(), value));
    }
    Some(key_string(&mut pairs))
}

/// `value` with every keyed list turned into a map by key. A list whose items lack their key
/// stays a list (compared by position).
pub fn keyed(value: &Value) -> Value {
    keyed_at("", value)
}

fn keyed_at(field: &str, value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), keyed_at(k, v)))
                .collect(),
        ),
        Value::Array(items) => {
            let keys: Option<Vec<String>> = items
                .iter()
                .map(|item| key_fields(field, item).and_then(|f| item_key(f, item)))
                .collect();
            match keys {
                Some(keys) if !items.is_empty() => {
                    let mut map = Map::new();
                    for (k, item) in keys.into_iter().zip(items) {
                        map.insert(k, keyed_at("", item));
                    }
                    Value::Object(map)
                }
                _ => Value::Array(items.iter().map(|i| keyed_at("", i)).collect()),
            }
        }
        other => other.clone(),
    }
}

/// The leaf paths a FieldsV1 set names, in [`keyed`]'s form (`spec`, `template`, …,
/// `containers`, `[name=app]`, `image`).
pub fn owned_paths(fields_v1: &Value) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    walk(&mut Vec::new(), fields_v1, &mut out);
    out
}

fn walk(path: &mut Vec<String>, set: &Value, out: &mut Vec<Vec<String>>) {
    let Some(map) = set.as_object() else {
        return;
    };
    if map.is_empty() {
        out.push(path.clone());
        return;
    }
    for (k, v) in map {
        if k == "." {
            out.push(path.clone());
            continue;
        }
        let part = if let Some(name) = k.strip_prefix("f:") {
            name.to_owned()
        } else if let Some(json) = k.strip_prefix("k:") {
            let Ok(Value::Object(key)) = serde_json::from_str::<Value>(json) else {
                continue;
            };
            let mut pairs: Vec<(String, String)> =
                key.iter().map(|(k, v)| (k.clone(), scalar(v))).collect();
            key_string(&mut pairs)
        } else if let Some(index) = k.strip_prefix("i:") {
            index.to_owned()
        } else {
            // `v:` (an item of a set) names a whole value: its list is owned as one.
            out.push(path.clone());
            continue;
        };
        path.push(part);
        walk(path, v, out);
        path.pop();
    }
}

/// Removes the field at `path` from `value`, if it is there.
pub fn remove_path(value: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = value;
    for p in parents {
        let next = match at {
            Value::Object(m) => m.get_mut(p),
            Value::Array(a) => p.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
            _ => None,
        };
        match next {
            Some(n) => at = n,
            None => return,
        }
    }
    if let Value::Object(m) = at {
        m.remove(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keyed_lists_become_maps_and_match_managed_field_paths() {
        let deployment = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "web:1", "ports": [{"containerPort": 80}], "env": [{"name": "A", "value": "1"}]}
        ]}}}});
        let k = keyed(&deployment);
        let c = &k["spec"]["template"]["spec"]["containers"]["[name=app]"];
        assert_eq!(c["image"], "web:1");
        assert_eq!(
            c["ports"]["[containerPort=80,protocol=TCP]"]["containerPort"],
            80
        );
        assert_eq!(c["env"]["[name=A]"]["value"], "1");

        let managed = json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
            "k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}}}}}}}}});
        let mut paths = owned_paths(&managed);
        paths.sort();
        let image: Vec<String> = [
            "spec",
            "template",
            "spec",
            "containers",
            "[name=app]",
            "image",
        ]
        .map(String::from)
        .to_vec();
        assert!(paths.contains(&image), "{paths:?}");
        assert!(paths.contains(&vec!["spec".to_owned(), "replicas".to_owned()]));
        let port: Vec<String> = [
            "spec",
            "template",
            "spec",
            "containers",
            "[name=app]",
            "ports",
            "[containerPort=80,protocol=TCP]",
        ]
        .map(String::from)
        .to_vec();
        assert!(paths.contains(&port), "{paths:?}");

        let mut k = k;
        remove_path(&mut k, &image);
        assert!(k["spec"]["template"]["spec"]["containers"]["[name=app]"]
            .get("image")
            .is_none());
    }

    #[test]
    fn a_list_without_keys_stays_a_list() {
        let v = json!({"args": ["a", "b"], "containers": [{"image": "x"}]});
        assert_eq!(keyed(&v), v);
    }
}
