//! The two PATCH formats beside JSON merge patch and apply: strategic merge patch (kubectl's
//! `patch`, `set image`, `edit`, client-side `apply`) and JSON patch (RFC 6902).

use serde_json::{Map, Value};

use crate::fields::{self, Path};

/// A failed JSON patch operation: what the real server says, as its 422 message.
pub(crate) type Refused = String;

/// Applies a strategic merge patch to `object` (a built-in kind): maps merge, `null` removes a
/// field, lists the built-in schemas merge by key (containers by name, ...) merge item by
/// item (patch items first, in the patch's order, then the live ones it did not name), other
/// lists are replaced. Directives: `$patch: delete` (an item or map), `$patch: replace`,
/// `$setElementOrder/<list>`, `$deleteFromPrimitiveList/<list>`, `$retainKeys`.
pub(crate) fn strategic_merge(object: &mut Value, patch: &Value) {
    strategic(object, patch, &mut Vec::new());
}

fn strategic(live: &mut Value, patch: &Value, path: &mut Path) {
    let Value::Object(patch) = patch else {
        *live = patch.clone();
        return;
    };
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut replaced = patch.clone();
            replaced.remove("$patch");
            *live = Value::Object(replaced);
            return;
        }
        Some("delete") => {
            *live = Value::Object(Map::new());
            return;
        }
        _ => {}
    }
    if !live.is_object() {
        *live = Value::Object(Map::new());
    }
    let Value::Object(map) = live else { return };
    let mut orders = Vec::new();
    for (name, value) in patch {
        if let Some(list) = name.strip_prefix("$setElementOrder/") {
            orders.push((list.to_string(), value));
            continue;
        }
        if let Some(list) = name.strip_prefix("$deleteFromPrimitiveList/") {
            let gone = value.as_array().cloned().unwrap_or_default();
            if let Some(Value::Array(items)) = map.get_mut(list) {
                items.retain(|item| !gone.contains(item));
            }
            continue;
        }
        if name.starts_with('$') {
            continue;
        }
        if value.is_null() {
            map.remove(name);
            continue;
        }
        path.push(format!("f:{name}"));
        let existing = map.entry(name.clone()).or_insert(Value::Null);
        match (existing, value) {
            (Value::Array(items), Value::Array(patched)) => {
                if let Some(keys) = fields::list_keys(path, false) {
                    merge_list(items, patched, &keys[..1], path);
                } else {
                    *items = patched.clone();
                }
            }
            (existing, value) => strategic(existing, value, path),
        }
        path.pop();
    }
    for (list, order) in orders {
        reorder(map, &list, order, path);
    }
}

/// Merges a keyed list: each patch item onto the live item with its key (or removes it, with
/// `$patch: delete`), patch items first.
fn merge_list(live: &mut Vec<Value>, patch: &[Value], keys: &[&str], path: &mut Path) {
    let mut merged = Vec::new();
    for item in patch {
        let Some(key) = fields::item_key(item, keys) else {
            merged.push(item.clone());
            continue;
        };
        let found = live
            .iter()
            .position(|l| fields::item_key(l, keys).as_ref() == Some(&key));
        let mut current = found.map(|i| live.remove(i)).unwrap_or(Value::Null);
        if item.get("$patch").and_then(Value::as_str) == Some("delete") {
            continue;
        }
        path.push(key);
        strategic(&mut current, item, path);
        path.pop();
        merged.push(current);
    }
    merged.append(live);
    *live = merged;
}

/// Orders a keyed list as `$setElementOrder/<list>` says; items it does not name keep their
/// place after those it does.
fn reorder(map: &mut Map<String, Value>, list: &str, order: &Value, path: &mut Path) {
    path.push(format!("f:{list}"));
    let keys = fields::list_keys(path, false);
    path.pop();
    let (Some(keys), Some(Value::Array(items)), Some(order)) =
        (keys, map.get_mut(list), order.as_array())
    else {
        return;
    };
    let position = |item: &Value| {
        let key = fields::item_key(item, &keys[..1]);
        let named = order
            .iter()
            .position(|o| fields::item_key(o, &keys[..1]) == key);
        named.unwrap_or(order.len())
    };
    items.sort_by_key(position);
}

/// Applies a JSON patch (RFC 6902): `add`, `remove`, `replace`, `move`, `copy`, `test`, all or
/// nothing.
pub(crate) fn json_patch(object: &Value, operations: &Value) -> Result<Value, Refused> {
    let Some(operations) = operations.as_array() else {
        return Err("the JSON patch must be an array of operations".to_string());
    };
    let mut object = object.clone();
    for operation in operations {
        let op = operation["op"].as_str().unwrap_or_default();
        let path = pointer(&operation["path"])?;
        match op {
            "add" => add(&mut object, &path, value_of(operation)?)?,
            "remove" => {
                remove(&mut object, &path)?;
            }
            "replace" => {
                remove(&mut object, &path)?;
                add(&mut object, &path, value_of(operation)?)?;
            }
            "move" => {
                let value = remove(&mut object, &pointer(&operation["from"])?)?;
                add(&mut object, &path, value)?;
            }
            "copy" => {
                let from = pointer(&operation["from"])?;
                let value = get(&object, &from).cloned();
                let value = value.ok_or_else(|| missing(&from))?;
                add(&mut object, &path, value)?;
            }
            "test" => {
                if get(&object, &path) != Some(value_of(operation)?).as_ref() {
                    return Err(format!("testing value {} failed", render(&path)));
                }
            }
            _ => return Err(format!("Unexpected kind: {op}")),
        }
    }
    Ok(object)
}

fn value_of(operation: &Value) -> Result<Value, Refused> {
    let value = operation.get("value").cloned();
    value.ok_or_else(|| "missing value in JSON patch operation".to_string())
}

/// The reference tokens of a JSON pointer (RFC 6901).
fn pointer(path: &Value) -> Result<Vec<String>, Refused> {
    let path = path
        .as_str()
        .ok_or("missing path in JSON patch operation")?;
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let tokens = path
        .strip_prefix('/')
        .ok_or("a JSON pointer must start with /")?;
    let unescape = |t: &str| t.replace("~1", "/").replace("~0", "~");
    Ok(tokens.split('/').map(unescape).collect())
}

fn render(path: &[String]) -> String {
    path.iter().map(|t| format!("/{t}")).collect()
}

fn missing(path: &[String]) -> Refused {
    format!("doc is missing path: \"{}\"", render(path))
}

fn get<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(object, |value, token| match value {
        Value::Object(map) => map.get(token),
        Value::Array(items) => items.get(token.parse::<usize>().ok()?),
        _ => None,
    })
}

fn parent<'a>(object: &'a mut Value, path: &[String]) -> Result<&'a mut Value, Refused> {
    let Some((_, parents)) = path.split_last() else {
        return Err(missing(path));
    };
    let mut value = object;
    for token in parents {
        value = match value {
            Value::Object(map) => map.get_mut(token),
            Value::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
            _ => None,
        }
        .ok_or_else(|| missing(path))?;
    }
    Ok(value)
}

fn add(object: &mut Value, path: &[String], value: Value) -> Result<(), Refused> {
    let Some(last) = path.last() else {
        *object = value;
        return Ok(());
    };
    match parent(object, path)? {
        Value::Object(map) => {
            map.insert(last.clone(), value);
        }
        Value::Array(items) if last == "-" => items.push(value),
        Value::Array(items) => match last.parse::<usize>() {
            Ok(index) if index <= items.len() => items.insert(index, value),
            _ => return Err(missing(path)),
        },
        _ => return Err(missing(path)),
    }
    Ok(())
}

fn remove(object: &mut Value, path: &[String]) -> Result<Value, Refused> {
    let last = path.last().ok_or_else(|| missing(path))?;
    let removed = match parent(object, path)? {
        Value::Object(map) => map.remove(last),
        Value::Array(items) => match last.parse::<usize>() {
            Ok(index) if index < items.len() => Some(items.remove(index)),
            _ => None,
        },
        _ => None,
    };
    removed.ok_or_else(|| missing(path))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn strategic_merge_patches_as_the_real_server_does() {
        let live = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]},
            "spec": {"containers": [{"name": "app", "image": "1", "args": ["-v"]},
                                    {"name": "side", "image": "s"}]}});
        let cases = [
            // null removes a field; maps merge.
            (
                json!({"metadata": {"labels": {"a": null, "c": "3"}}}),
                json!({"b": "2", "c": "3"}),
                "/metadata/labels",
            ),
            // Lists without a merge key are replaced.
            (
                json!({"spec": {"containers": [{"name": "app", "args": ["-q"]}]}}),
                json!(["-q"]),
                "/spec/containers/0/args",
            ),
            (
                json!({"$deleteFromPrimitiveList/finalizers": ["x"], "metadata": {}}),
                json!(["x", "y"]),
                "/metadata/finalizers",
            ),
            (
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}),
                json!(["y"]),
                "/metadata/finalizers",
            ),
            // $setElementOrder orders a keyed list.
            (
                json!({"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "app"}]}}),
                json!("side"),
                "/spec/containers/0/name",
            ),
            // $patch: replace replaces a map.
            (
                json!({"metadata": {"labels": {"$patch": "replace", "z": "9"}}}),
                json!({"z": "9"}),
                "/metadata/labels",
            ),
        ];
        for (patch, expected, pointer) in cases {
            let mut object = live.clone();
            super::strategic_merge(&mut object, &patch);
            assert_eq!(object.pointer(pointer), Some(&expected), "{patch}");
        }
    }

    #[test]
    fn json_patch_applies_every_operation_or_none() {
        let live = json!({"a": {"b~c": 1, "d/e": 2}, "list": [1, 2]});
        let cases = [
            (
                json!([{"op": "add", "path": "/list/-", "value": 3}]),
                Some(json!([1, 2, 3])),
                "/list",
            ),
            (
                json!([{"op": "add", "path": "/list/0", "value": 0}]),
                Some(json!([0, 1, 2])),
                "/list",
            ),
            (
                json!([{"op": "remove", "path": "/list/0"}]),
                Some(json!([2])),
                "/list",
            ),
            (
                json!([{"op": "replace", "path": "/a/b~0c", "value": 5}]),
                Some(json!(5)),
                "/a/b~0c",
            ),
            (
                json!([{"op": "move", "from": "/a/d~1e", "path": "/x"}]),
                Some(json!(2)),
                "/x",
            ),
            (
                json!([{"op": "copy", "from": "/list", "path": "/y"}]),
                Some(json!([1, 2])),
                "/y",
            ),
            (
                json!([{"op": "replace", "path": "/nothing", "value": 1}]),
                None,
                "",
            ),
            (json!([{"op": "remove", "path": "/list/5"}]), None, ""),
            (
                json!([{"op": "add", "path": "/z", "value": 1}, {"op": "test", "path": "/z", "value": 2}]),
                None,
                "",
            ),
        ];
        for (patch, expected, pointer) in cases {
            let patched = super::json_patch(&live, &patch);
            match expected {
                Some(value) => {
                    assert_eq!(patched.unwrap().pointer(pointer), Some(&value), "{patch}")
                }
                None => assert!(patched.is_err(), "{patch}"),
            }
        }
    }
}
