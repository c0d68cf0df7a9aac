//! Field paths and field sets, as structured-merge-diff sees an object: maps are granular,
//! lists atomic except the few the built-in schemas merge by key, and the FieldsV1 encoding.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

/// A path to a field: FieldsV1 segments, `f:<field>` or `k:{"<key>":<value>,...}` (a list item).
pub(crate) type Path = Vec<String>;
/// A set of field paths: the leaves and keyed list items of an object.
pub(crate) type FieldSet = BTreeSet<Path>;

/// Which part of an object a request owns: the main resource, or the status subresource.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Scope {
    Main,
    Status,
}

/// The key fields of a list merged by key, or `None` for an atomic list.
pub(crate) fn list_keys(path: &[String], crd: bool) -> Option<&'static [&'static str]> {
    if crd {
        return None;
    }
    let (last, parent) = path.split_last()?;
    Some(match last.as_str() {
        "f:containers"
        | "f:initContainers"
        | "f:ephemeralContainers"
        | "f:env"
        | "f:volumes"
        | "f:imagePullSecrets" => &["name"],
        "f:volumeMounts" => &["mountPath"],
        "f:ownerReferences" => &["uid"],
        "f:ports" if parent.last().is_some_and(|p| p.starts_with("k:")) => {
            &["containerPort", "protocol"]
        }
        "f:ports" if parent == ["f:spec"] => &["port", "protocol"],
        _ => return None,
    })
}

/// Label selectors are atomic maps in every built-in schema.
fn atomic_map(path: &[String], crd: bool) -> bool {
    !crd && path.last().is_some_and(|last| last == "f:selector")
}

/// The `k:{...}` segment of a list item (keys sorted, `protocol` defaulting to TCP).
pub(crate) fn item_key<S: AsRef<str>>(item: &Value, keys: &[S]) -> Option<String> {
    let mut parts = Vec::new();
    for key in keys {
        let key = key.as_ref();
        let value = match item.get(key) {
            Some(value) => value.clone(),
            None if key == "protocol" => json!("TCP"),
            None => return None,
        };
        parts.push(format!("{}:{value}", Value::from(key)));
    }
    Some(format!("k:{{{}}}", parts.join(",")))
}

/// The key fields and values of a `k:{...}` segment.
fn key_of(segment: &str) -> Option<Map<String, Value>> {
    serde_json::from_str(segment.strip_prefix("k:")?).ok()
}

/// The list item a `k:{...}` segment names.
fn find_item(items: &[Value], segment: &str) -> Option<usize> {
    let keys: Vec<String> = key_of(segment)?.keys().cloned().collect();
    items
        .iter()
        .position(|item| item_key(item, &keys).as_deref() == Some(segment))
}

/// Whether a path names a list item (not a field).
pub(crate) fn is_item(path: &[String]) -> bool {
    path.last().is_some_and(|segment| segment.starts_with("k:"))
}

/// Whether a path is a key field of a list item (`f:name` under `k:{"name":"app"}`): it goes
/// with its item, never alone.
pub(crate) fn is_key_field(path: &[String]) -> bool {
    let [.., item, field] = path else {
        return false;
    };
    let name = field.strip_prefix("f:").unwrap_or_default();
    key_of(item).is_some_and(|key| key.contains_key(name))
}

/// Whether every item of a list carries the keys, so that it merges by key.
fn keyed(path: &[String], items: &[Value], crd: bool) -> Option<&'static [&'static str]> {
    let keys = list_keys(path, crd)?;
    let all_keyed = items.iter().all(|item| item_key(item, keys).is_some());
    (!items.is_empty() && all_keyed).then_some(keys)
}

/// The field set of an object in a scope: for the main resource, everything but apiVersion,
/// kind, status and system metadata (only labels, annotations, ownerReferences and finalizers).
pub(crate) fn field_set(object: &Value, scope: Scope, crd: bool) -> FieldSet {
    let mut set = FieldSet::new();
    for (name, value) in object.as_object().into_iter().flatten() {
        let mut path = vec![format!("f:{name}")];
        match (name.as_str(), scope) {
            ("status", Scope::Status) => walk(value, &mut path, &mut set, crd),
            ("metadata", Scope::Main) => {
                for field in ["labels", "annotations", "ownerReferences", "finalizers"] {
                    if let Some(value) = value.get(field) {
                        path.push(format!("f:{field}"));
                        walk(value, &mut path, &mut set, crd);
                        path.pop();
                    }
                }
            }
            ("apiVersion" | "kind" | "status" | "metadata", _) | (_, Scope::Status) => {}
            (_, Scope::Main) => walk(value, &mut path, &mut set, crd),
        }
    }
    set
}

fn walk(value: &Value, path: &mut Path, set: &mut FieldSet, crd: bool) {
    match value {
        Value::Object(map) if !map.is_empty() && !atomic_map(path, crd) => {
            for (name, value) in map {
                path.push(format!("f:{name}"));
                walk(value, path, set, crd);
                path.pop();
            }
        }
        Value::Array(items) if keyed(path, items, crd).is_some() => {
            let keys = list_keys(path, crd).unwrap_or_default();
            for item in items {
                let Some(segment) = item_key(item, keys) else {
                    continue;
                };
                path.push(segment);
                set.insert(path.clone());
                walk(item, path, set, crd);
                path.pop();
            }
        }
        _ => {
            set.insert(path.clone());
        }
    }
}

fn child<'a>(value: &'a Value, segment: &str) -> Option<&'a Value> {
    match segment.strip_prefix("f:") {
        Some(name) => value.get(name),
        None => {
            let items = value.as_array()?;
            items.get(find_item(items, segment)?)
        }
    }
}

/// The value at a path, if the object has one.
pub(crate) fn get<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(object, |value, segment| child(value, segment))
}

fn get_mut<'a>(object: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    let Some((last, parent)) = path.split_last() else {
        return Some(object);
    };
    let container = get_mut(object, parent)?;
    match last.strip_prefix("f:") {
        Some(name) => container.get_mut(name),
        None => {
            let items = container.as_array_mut()?;
            let index = find_item(items, last)?;
            items.get_mut(index)
        }
    }
}

/// Removes the field at a path, then the maps that removal left empty.
pub(crate) fn remove(object: &mut Value, path: &[String]) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    match get_mut(object, parent) {
        Some(Value::Object(map)) => {
            map.remove(last.trim_start_matches("f:"));
        }
        Some(Value::Array(items)) => {
            if let Some(index) = find_item(items, last) {
                items.remove(index);
            }
        }
        _ => return,
    }
    if !parent.is_empty()
        && get(object, parent).is_some_and(|v| v.as_object().is_some_and(Map::is_empty))
    {
        remove(object, parent);
    }
}

/// Server-side apply's merge: maps merged, keyed lists merged by key, everything else replaced.
pub(crate) fn merge(live: &mut Value, applied: &Value, path: &mut Path, crd: bool) {
    match (live, applied) {
        (Value::Object(live), Value::Object(applied)) if !atomic_map(path, crd) => {
            for (name, value) in applied {
                path.push(format!("f:{name}"));
                match live.get_mut(name) {
                    Some(existing) => merge(existing, value, path, crd),
                    None => {
                        live.insert(name.clone(), value.clone());
                    }
                }
                path.pop();
            }
        }
        (Value::Array(live), Value::Array(applied))
            if keyed(path, applied, crd).is_some() && keyed(path, live, crd).is_some() =>
        {
            let keys = list_keys(path, crd).unwrap_or_default();
            for item in applied {
                let Some(key) = item_key(item, keys) else {
                    continue;
                };
                match live
                    .iter_mut()
                    .find(|existing| item_key(existing, keys).as_ref() == Some(&key))
                {
                    Some(existing) => {
                        path.push(key);
                        merge(existing, item, path, crd);
                        path.pop();
                    }
                    None => live.push(item.clone()),
                }
            }
        }
        (live, applied) => *live = applied.clone(),
    }
}

/// The fields of `new` (in a scope) that differ from `old`: changed or added leaves, and list
/// items that were not there. An Update operation takes ownership of these.
pub(crate) fn changed(old: &Value, new: &Value, scope: Scope, crd: bool) -> FieldSet {
    let mut set = field_set(new, scope, crd);
    set.retain(|path| match get(old, path) {
        None => true,
        Some(_) if is_item(path) => false,
        Some(before) => Some(before) != get(new, path),
    });
    set
}

/// The FieldsV1 encoding of a set: a trie of segments, `.` marking a member that has children
/// (always present on list items).
pub(crate) fn to_fields_v1(set: &FieldSet) -> Value {
    let paths: Vec<&[String]> = set.iter().map(Vec::as_slice).collect();
    Value::Object(encode(&paths))
}

fn encode(paths: &[&[String]]) -> Map<String, Value> {
    let mut groups: BTreeMap<&String, (bool, Vec<&[String]>)> = BTreeMap::new();
    for path in paths {
        if let Some((first, rest)) = path.split_first() {
            let group = groups.entry(first).or_default();
            if rest.is_empty() {
                group.0 = true;
            } else {
                group.1.push(rest);
            }
        }
    }
    let mut map = Map::new();
    for (segment, (member, children)) in groups {
        let mut node = encode(&children);
        if member && (segment.starts_with("k:") || !children.is_empty()) {
            node.insert(".".to_string(), json!({}));
        }
        map.insert(segment.clone(), Value::Object(node));
    }
    map
}

/// A path as structured-merge-diff prints it in conflicts:
/// `.spec.template.spec.containers[name="app"].image`.
pub(crate) fn display(path: &[String]) -> String {
    let mut text = String::new();
    for segment in path {
        match segment.strip_prefix("f:") {
            Some(name) => text.push_str(&format!(".{name}")),
            None => {
                let key = key_of(segment).unwrap_or_default();
                let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
                text.push_str(&format!("[{}]", parts.join(",")));
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(segments: &[&str]) -> Path {
        segments.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn fields_v1_marks_list_items_and_keys_ports_by_port_and_protocol() {
        let deployment = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"spec": {"containers": [
                         {"name": "app", "image": "web:1", "ports": [{"containerPort": 80}]}]}}},
            "status": {"replicas": 2}
        });
        let set = field_set(&deployment, Scope::Main, false);
        let expected = json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {"f:spec": {
                "f:containers": {"k:{\"name\":\"app\"}": {
                    ".": {}, "f:image": {}, "f:name": {}, "f:ports": {
                        "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                            ".": {}, "f:containerPort": {}}}}}}}}
        });
        assert_eq!(to_fields_v1(&set), expected);
        let port = path(&[
            "f:spec",
            "f:template",
            "f:spec",
            "f:containers",
            "k:{\"name\":\"app\"}",
            "f:ports",
            "k:{\"containerPort\":80,\"protocol\":\"TCP\"}",
            "f:containerPort",
        ]);
        assert_eq!(get(&deployment, &port), Some(&json!(80)));
        let shown = ".spec.template.spec.containers[name=\"app\"]\
            .ports[containerPort=80,protocol=\"TCP\"].containerPort";
        assert_eq!(display(&port), shown);
    }

    #[test]
    fn merge_keeps_other_list_items_and_replaces_atomic_lists() {
        let mut live = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b"}],
                                       "args": ["x", "y"]}});
        let applied = json!({"spec": {"containers": [{"name": "a", "image": "2"}], "args": ["z"]}});
        merge(&mut live, &applied, &mut Vec::new(), false);
        assert_eq!(
            live,
            json!({"spec": {"containers": [{"name": "a", "image": "2"}, {"name": "b"}],
                                         "args": ["z"]}})
        );
        remove(
            &mut live,
            &path(&["f:spec", "f:containers", "k:{\"name\":\"b\"}"]),
        );
        remove(&mut live, &path(&["f:spec", "f:args"]));
        assert_eq!(
            live,
            json!({"spec": {"containers": [{"name": "a", "image": "2"}]}})
        );
    }
}
