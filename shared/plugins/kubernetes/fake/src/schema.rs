//! The built-in kinds' schemas, as a real kube-apiserver decodes a request: a field no schema
//! declares is unknown, a value of the wrong JSON type (a number in a ConfigMap's `data`) is
//! refused. `schema.json` is a compact copy of the OpenAPI v3 of the Kubernetes version
//! `scripts/kube.sh` pins, written by `schema/generate.py`; custom resources are not checked.

use std::sync::LazyLock;

use serde_json::{Map, Value};

use crate::kinds::Kind;

static SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    serde_json::from_str(include_str!("schema.json")).expect("schema.json is JSON")
});

/// What decoding an object against its kind's schema found, each as `.path: what`.
#[derive(Default)]
pub(crate) struct Findings {
    /// Fields no schema declares (`.spec.replica`).
    pub unknown: Vec<String>,
    /// Values of the wrong type (`.data.a: expected string, got 1`).
    pub wrong_type: Vec<String>,
}

/// Checks `object` against its kind's schema; with [`Unknown::Drop`], removes the unknown
/// fields as a real server does unless `fieldValidation=Strict`.
pub(crate) fn check(kind: &Kind, object: &mut Value, unknown: Unknown) -> Findings {
    let mut findings = Findings::default();
    let key = format!("{}/{}", kind.api_version(), kind.kind);
    if let Some(root) = SCHEMA["kinds"].get(&key) {
        walk(object, root, &mut String::new(), &mut findings, unknown);
    }
    findings
}

/// What [`check`] does with the unknown fields it finds.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Unknown {
    Keep,
    Drop,
}

fn walk(
    value: &mut Value,
    schema: &Value,
    path: &mut String,
    found: &mut Findings,
    unknown: Unknown,
) {
    let fits = match schema {
        Value::String(name) if name.starts_with('#') => {
            let fields = &SCHEMA["types"][&name[1..]];
            return object(value, fields, path, found, unknown);
        }
        Value::String(name) => match name.as_str() {
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            _ => true,
        },
        Value::Object(form) => {
            if let Some(fields) = form.get("object") {
                return object(value, fields, path, found, unknown);
            }
            match (form.get("map"), form.get("list"), &mut *value) {
                (Some(item), _, Value::Object(map)) => {
                    for (name, value) in map.iter_mut() {
                        let length = path.len();
                        path.push_str(&format!(".{name}"));
                        walk(value, item, path, found, unknown);
                        path.truncate(length);
                    }
                    true
                }
                (_, Some(item), Value::Array(items)) => {
                    for (index, value) in items.iter_mut().enumerate() {
                        let length = path.len();
                        path.push_str(&format!("[{index}]"));
                        walk(value, item, path, found, unknown);
                        path.truncate(length);
                    }
                    true
                }
                _ => false,
            }
        }
        _ => true,
    };
    if !fits {
        found.wrong_type.push(format!(
            "{path}: expected {}, got {value}",
            expected(schema)
        ));
    }
}

fn object(
    value: &mut Value,
    fields: &Value,
    path: &mut String,
    found: &mut Findings,
    unknown: Unknown,
) {
    let Value::Object(map) = value else {
        found
            .wrong_type
            .push(format!("{path}: expected object, got {value}"));
        return;
    };
    let empty = Map::new();
    let fields = fields.as_object().unwrap_or(&empty);
    let mut unknown_here = Vec::new();
    for (name, value) in map.iter_mut() {
        let length = path.len();
        path.push_str(&format!(".{name}"));
        match fields.get(name) {
            Some(schema) => walk(value, schema, path, found, unknown),
            None => {
                found.unknown.push(path.clone());
                unknown_here.push(name.clone());
            }
        }
        path.truncate(length);
    }
    if unknown == Unknown::Drop {
        for name in unknown_here {
            map.remove(&name);
        }
    }
}

fn expected(schema: &Value) -> &str {
    match schema {
        Value::String(name) => name,
        Value::Object(form) if form.contains_key("map") => "map",
        Value::Object(form) if form.contains_key("list") => "list",
        _ => "object",
    }
}
