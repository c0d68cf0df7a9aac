//! The AWS shapes a manifest may use, as data: each shape's members (the API's camelCase names)
//! and their kinds. [`normalize`] checks a manifest against its shape and rewrites it as AWS's
//! API takes it:
//! - keys match as PipeCD matches them (Go's JSON decoding ignores case, so `ServiceName` and
//!   `serviceName` are one field), and come out in AWS's spelling;
//! - a number or boolean where AWS takes a string becomes that string (`cpu: 256`), as PipeCD's
//!   YAML loader does;
//! - nulls, and empty strings in enum fields (`pidMode: ""`), are left out, as Go's SDK leaves
//!   them out;
//! - fields AWS only returns (`taskDefinitionArn`, `status`, ...) are accepted and dropped, so a
//!   `describe-task-definition` answer pasted into the file works;
//! - any other field is an error that names it. gannet is stricter here than PipeCD, which
//!   ignores unknown fields silently.

use serde_json::{Map, Number, Value};

/// What a member holds.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    Str,
    /// A string from a fixed set; an empty list of choices means any value (AWS adds new ones).
    Enum(&'static [&'static str]),
    Int,
    Bool,
    /// Free-form string keys and values (docker labels, log driver options).
    Map,
    List(&'static Kind),
    Shape(&'static Shape),
}

/// An AWS structure.
#[derive(Debug)]
pub(crate) struct Shape {
    pub members: &'static [(&'static str, Kind)],
    /// Accepted and dropped: what AWS returns but does not take.
    pub dropped: &'static [&'static str],
    /// Other names PipeCD accepts for a member (`cluster` for `clusterArn`).
    pub aliases: &'static [(&'static str, &'static str)],
}

/// One step of a path into a document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Seg {
    /// A key as the file spells it.
    Key(String),
    Index(usize),
}

/// A manifest that does not fit its shape: where (as the file spells it, and as AWS names it)
/// and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SchemaError {
    pub path: Vec<Seg>,
    /// Such as `containerDefinitions[0].portMappings[1].containerPort`.
    pub field: String,
    pub message: String,
}

/// Checks `value` against `shape`; returns it with AWS's key spellings and value types.
pub(crate) fn normalize(value: &Value, shape: &'static Shape) -> Result<Value, SchemaError> {
    let mut at = Walk::default();
    at.shape(value, shape)
}

#[derive(Default)]
struct Walk {
    path: Vec<Seg>,
    field: Vec<String>,
}

impl Walk {
    fn error(&self, message: impl Into<String>) -> SchemaError {
        let mut field = String::new();
        for part in &self.field {
            if !field.is_empty() && !part.starts_with('[') {
                field.push('.');
            }
            field.push_str(part);
        }
        SchemaError {
            path: self.path.clone(),
            field,
            message: message.into(),
        }
    }

    fn shape(&mut self, value: &Value, shape: &'static Shape) -> Result<Value, SchemaError> {
        let Value::Object(fields) = value else {
            return Err(self.error(format!("expected a map, got {}", describe(value))));
        };
        let mut out = Map::new();
        for (key, value) in fields {
            let Some(name) = member_name(shape, key) else {
                self.path.push(Seg::Key(key.clone()));
                self.field.push(key.clone());
                return Err(self.error(format!("unknown field `{key}`")));
            };
            let Some(kind) = shape
                .members
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, k)| *k)
            else {
                continue; // dropped: AWS returns it but does not take it
            };
            self.path.push(Seg::Key(key.clone()));
            self.field.push(name.to_owned());
            if out.contains_key(name) {
                return Err(self.error(format!(
                    "`{name}` is given twice (keys match whatever their case)"
                )));
            }
            if let Some(v) = self.value(value, kind)? {
                out.insert(name.to_owned(), v);
            }
            self.path.pop();
            self.field.pop();
        }
        Ok(Value::Object(out))
    }

    /// The value in AWS's form; `None` when it is left out.
    fn value(&mut self, value: &Value, kind: Kind) -> Result<Option<Value>, SchemaError> {
        if value.is_null() {
            return Ok(None);
        }
        let out = match kind {
            Kind::Str => Value::String(self.string(value)?),
            Kind::Enum(choices) => {
                let text = self.string(value)?;
                if text.is_empty() {
                    return Ok(None);
                }
                if !choices.is_empty() && !choices.contains(&text.as_str()) {
                    return Err(
                        self.error(format!("{text:?} is not one of {}", choices.join(", ")))
                    );
                }
                Value::String(text)
            }
            Kind::Int => match value {
                Value::Number(n) if n.is_i64() => {
                    let v = n.as_i64().unwrap_or_default();
                    if i32::try_from(v).is_err() {
                        return Err(self.error(format!("{v} is out of range")));
                    }
                    Value::Number(Number::from(v))
                }
                other => {
                    return Err(
                        self.error(format!("expected a whole number, got {}", describe(other)))
                    )
                }
            },
            Kind::Bool => match value {
                Value::Bool(b) => Value::Bool(*b),
                other => {
                    return Err(
                        self.error(format!("expected true or false, got {}", describe(other)))
                    )
                }
            },
            Kind::Map => {
                let Value::Object(entries) = value else {
                    return Err(self.error(format!(
                        "expected a map of strings, got {}",
                        describe(value)
                    )));
                };
                let mut out = Map::new();
                for (k, v) in entries {
                    self.path.push(Seg::Key(k.clone()));
                    self.field.push(k.clone());
                    if !v.is_null() {
                        out.insert(k.clone(), Value::String(self.string(v)?));
                    }
                    self.path.pop();
                    self.field.pop();
                }
                Value::Object(out)
            }
            Kind::List(item) => {
                let Value::Array(items) = value else {
                    return Err(self.error(format!("expected a list, got {}", describe(value))));
                };
                let mut out = Vec::with_capacity(items.len());
                for (i, v) in items.iter().enumerate() {
                    self.path.push(Seg::Index(i));
                    self.field.push(format!("[{i}]"));
                    if let Some(v) = self.value(v, *item)? {
                        out.push(v);
                    }
                    self.path.pop();
                    self.field.pop();
                }
                Value::Array(out)
            }
            Kind::Shape(shape) => self.shape(value, shape)?,
        };
        Ok(Some(out))
    }

    /// A string, or a number or boolean written where AWS takes a string.
    fn string(&self, value: &Value) -> Result<String, SchemaError> {
        match value {
            Value::String(s) => Ok(s.clone()),
            Value::Number(n) => Ok(n.to_string()),
            Value::Bool(b) => Ok(b.to_string()),
            other => Err(self.error(format!("expected a string, got {}", describe(other)))),
        }
    }
}

/// The member (or dropped field) `key` names in `shape`, matched as Go matches JSON keys.
fn member_name(shape: &Shape, key: &str) -> Option<&'static str> {
    let names = shape
        .members
        .iter()
        .map(|(n, _)| *n)
        .chain(shape.dropped.iter().copied());
    let mut found = None;
    for name in names {
        if name == key {
            return Some(name);
        }
        if found.is_none() && name.eq_ignore_ascii_case(key) {
            found = Some(name);
        }
    }
    found.or_else(|| {
        shape
            .aliases
            .iter()
            .find(|(alias, _)| alias.eq_ignore_ascii_case(key))
            .map(|(_, name)| *name)
    })
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "nothing".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "a map".into(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const INNER: Shape = Shape {
        members: &[("containerPort", Kind::Int), ("protocol", Kind::Enum(&[]))],
        dropped: &[],
        aliases: &[],
    };
    const OUTER: Shape = Shape {
        members: &[
            ("clusterArn", Kind::Str),
            ("cpu", Kind::Str),
            ("mode", Kind::Enum(&["awsvpc", "bridge"])),
            ("essential", Kind::Bool),
            ("labels", Kind::Map),
            ("ports", Kind::List(&Kind::Shape(&INNER))),
        ],
        dropped: &["status"],
        aliases: &[("cluster", "clusterArn")],
    };

    fn check(input: Value, expected: Result<Value, (&str, &str)>) {
        let got = normalize(&input, &OUTER).map_err(|e| (e.field, e.message));
        let expected = expected.map_err(|(f, m)| (f.to_owned(), m.to_owned()));
        assert_eq!(got, expected, "{input}");
    }

    #[test]
    fn manifests_come_out_as_aws_takes_them() {
        check(
            json!({"Cpu": 256, "cluster": "c", "Ports": [{"ContainerPort": 80, "protocol": ""}], "status": "ACTIVE", "labels": {"a": 1}, "essential": null}),
            Ok(
                json!({"cpu": "256", "clusterArn": "c", "ports": [{"containerPort": 80}], "labels": {"a": "1"}}),
            ),
        );
        check(json!({"mode": "awsvpc"}), Ok(json!({"mode": "awsvpc"})));
        check(
            json!({"ports": [{"containerPort": 80}, {"containerPort": "x"}]}),
            Err((
                "ports[1].containerPort",
                "expected a whole number, got \"x\"",
            )),
        );
        check(
            json!({"ports": [{"containerPrt": 80}]}),
            Err(("ports[0].containerPrt", "unknown field `containerPrt`")),
        );
        check(
            json!({"mode": "host"}),
            Err(("mode", "\"host\" is not one of awsvpc, bridge")),
        );
        check(
            json!({"essential": "yes"}),
            Err(("essential", "expected true or false, got \"yes\"")),
        );
        check(
            json!({"cpu": 1, "CPU": 2}),
            Err((
                "cpu",
                "`cpu` is given twice (keys match whatever their case)",
            )),
        );
        check(
            json!({"ports": {}}),
            Err(("ports", "expected a list, got a map")),
        );
        check(json!([]), Err(("", "expected a map, got a list")));
        check(
            json!({"ports": [{"containerPort": 4_294_967_296_i64}]}),
            Err(("ports[0].containerPort", "4294967296 is out of range")),
        );
    }

    #[test]
    fn errors_keep_the_path_as_the_file_spells_it() {
        let err = normalize(&json!({"Ports": [{}, {"Bad": 1}]}), &OUTER).unwrap_err();
        assert_eq!(
            err.path,
            [
                Seg::Key("Ports".into()),
                Seg::Index(1),
                Seg::Key("Bad".into())
            ]
        );
    }
}
