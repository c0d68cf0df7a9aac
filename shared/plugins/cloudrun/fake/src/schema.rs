//! The shapes of the Cloud Run v2 messages, read from `v2_schema.json`, which is what Google's
//! own client describes (`tests/google_client.py schema`, google-cloud-run as
//! scripts/gcloud-client.sh pins it; `tests/google_client.rs` checks the two agree). JSON is
//! read and written with it as Google's JSON parser does: unknown fields refused, enums stored
//! by name (a number is turned into its name), output-only fields on input ignored, a value at
//! its proto3 default (`false`, `0`, `""`, an empty list or map, an enum's `..._UNSPECIFIED`)
//! no value unless the field tracks presence, and enums answered as numbers to a client that
//! asks for `$alt=json;enum-encoding=int`.

use std::collections::HashMap;
use std::sync::LazyLock;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{self, Failure};

pub(crate) const SERVICE: &str = "google.cloud.run.v2.Service";
pub(crate) const REVISION: &str = "google.cloud.run.v2.Revision";
pub(crate) const REVISION_TEMPLATE: &str = "google.cloud.run.v2.RevisionTemplate";

/// The committed copy of what Google's client prints.
pub(crate) const JSON: &str = include_str!("v2_schema.json");

#[derive(Deserialize)]
struct Schema {
    messages: HashMap<String, Vec<Field>>,
    enums: HashMap<String, HashMap<String, i64>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Field {
    /// The JSON name (`maxInstanceCount`).
    pub(crate) name: String,
    /// The proto name (`max_instance_count`), which Google's errors use in paths.
    pub(crate) proto: String,
    kind: Kind,
    #[serde(rename = "type")]
    type_name: Option<String>,
    #[serde(default)]
    repeated: bool,
    #[serde(default)]
    pub(crate) output_only: bool,
    /// Kept even at its default value (a oneof member, `optional`, a Timestamp or Duration).
    #[serde(default)]
    presence: bool,
}

#[derive(Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
enum Kind {
    Scalar,
    Map,
    Message,
    Enum,
}

static SCHEMA: LazyLock<Schema> = LazyLock::new(|| {
    serde_json::from_str(JSON).expect("v2_schema.json is the schema Google's client printed")
});

/// The fields of a message (none for one the schema does not have).
pub(crate) fn fields(message: &str) -> &'static [Field] {
    SCHEMA.messages.get(message).map_or(&[], Vec::as_slice)
}

/// The field of a message by its JSON or proto name.
fn field(message: &str, name: &str) -> Option<&'static Field> {
    fields(message)
        .iter()
        .find(|f| f.name == name || f.proto == name)
}

/// True if `path` (`template.containers`, dotted JSON or proto names) names a field of
/// `message`, through singular message fields.
pub(crate) fn has_path(message: &str, path: &str) -> bool {
    let mut message = message.to_string();
    let mut segments = path.split('.').peekable();
    while let Some(segment) = segments.next() {
        let Some(found) = field(&message, segment) else {
            return false;
        };
        if segments.peek().is_none() {
            return true;
        }
        match (&found.kind, &found.type_name, found.repeated) {
            (Kind::Message, Some(nested), false) => message = nested.clone(),
            _ => return false,
        }
    }
    false
}

/// The message a field holds, if it holds one.
pub(crate) fn message_type(field: &Field) -> Option<&str> {
    match field.kind {
        Kind::Message => field.type_name.as_deref(),
        _ => None,
    }
}

/// The JSON name of a field named by its JSON or proto name.
pub(crate) fn json_name(message: &str, name: &str) -> Option<&'static str> {
    field(message, name).map(|f| f.name.as_str())
}

/// A written `message` made as Google's JSON parser makes it: an unknown field is refused, a
/// `null` is no value, an enum number becomes its name (an unknown name or number is refused),
/// an output-only field is dropped, and so is a value at its proto3 default in a field without
/// presence (as Google stores it: an empty map is no map). `at` is the path errors name.
pub(crate) fn read_input(value: &mut Value, message: &str, at: &str) -> Result<(), Failure> {
    let Some(object) = value.as_object_mut() else {
        return Err(error::invalid_value(at, message, value));
    };
    object.retain(|_, v| !v.is_null());
    if let Some(unknown) = object.keys().find(|key| field(message, key).is_none()) {
        return Err(error::unknown_field(unknown, at));
    }
    let mut read = Map::new();
    for (key, mut child) in std::mem::take(object) {
        let Some(field) = field(message, &key) else {
            continue;
        };
        if field.output_only {
            continue;
        }
        let path = format!("{at}.{}", field.proto);
        match (field.repeated, child.as_array_mut()) {
            (true, Some(items)) => {
                for (i, item) in items.iter_mut().enumerate() {
                    read_value(item, field, &format!("{path}[{i}]"))?;
                }
            }
            (true, None) => {
                let type_name = field.type_name.as_deref().unwrap_or("ListValue");
                return Err(error::invalid_value(&path, type_name, &child));
            }
            (false, _) => read_value(&mut child, field, &path)?,
        }
        if field.presence || !is_default(&child, field) {
            read.insert(field.name.clone(), child);
        }
    }
    *object = read;
    Ok(())
}

/// True for proto3's default of a field: what Google's JSON leaves out.
fn is_default(value: &Value, field: &Field) -> bool {
    match value {
        Value::Bool(set) => !set,
        Value::Number(number) => number.as_f64() == Some(0.0),
        Value::String(text) if field.kind == Kind::Enum => {
            let enums = field.type_name.as_ref().and_then(|t| SCHEMA.enums.get(t));
            enums.and_then(|e| e.get(text)) == Some(&0)
        }
        Value::String(text) => text.is_empty(),
        Value::Array(items) => items.is_empty(),
        Value::Object(entries) => field.kind == Kind::Map && entries.is_empty(),
        Value::Null => true,
    }
}

fn read_value(value: &mut Value, field: &Field, at: &str) -> Result<(), Failure> {
    let type_name = field.type_name.as_deref().unwrap_or_default();
    match field.kind {
        Kind::Message => read_input(value, type_name, at),
        Kind::Enum => {
            let names = SCHEMA.enums.get(type_name);
            let name = match &*value {
                Value::String(name) => names.and_then(|n| n.get_key_value(name)).map(|(k, _)| k),
                Value::Number(number) => names.and_then(|n| {
                    let number = number.as_i64()?;
                    n.iter().find(|(_, v)| **v == number).map(|(k, _)| k)
                }),
                _ => None,
            };
            match name {
                Some(name) => {
                    *value = Value::String(name.clone());
                    Ok(())
                }
                None => Err(error::invalid_value(at, type_name, value)),
            }
        }
        Kind::Map if !value.is_object() => Err(error::invalid_value(at, "Map", value)),
        Kind::Map | Kind::Scalar => Ok(()),
    }
}

/// Every enum of a `message` (stored by name) as its number, for a client that asked for
/// `$alt=json;enum-encoding=int`. An `Any` (`{"@type": ...}`) is read as its type.
pub(crate) fn enums_as_numbers(value: &mut Value, message: &str) {
    let Some(object) = value.as_object_mut() else {
        return;
    };
    for (key, child) in object.iter_mut() {
        let Some(field) = field(message, key) else {
            continue;
        };
        let items: Vec<&mut Value> = match child {
            Value::Array(items) if field.repeated => items.iter_mut().collect(),
            _ => vec![child],
        };
        let type_name = field.type_name.as_deref().unwrap_or_default();
        for item in items {
            match field.kind {
                Kind::Message => enums_as_numbers(item, type_name),
                Kind::Enum => {
                    let names = SCHEMA.enums.get(type_name);
                    let number = item.as_str().and_then(|n| names?.get(n));
                    if let Some(number) = number {
                        *item = Value::from(*number);
                    }
                }
                Kind::Map | Kind::Scalar => {}
            }
        }
    }
}

/// An `Any` holding a message of this schema (`{"@type": "type.googleapis.com/...", ...}`),
/// its enums as numbers.
pub(crate) fn any_enums_as_numbers(value: &mut Value) {
    let type_url = value["@type"].as_str().unwrap_or_default().to_string();
    if let Some(message) = type_url.strip_prefix("type.googleapis.com/") {
        enums_as_numbers(value, message);
    }
}
