//! Helpers for plugins that validate a stage's `with`: readable type names for errors, and
//! Go-duration options.

use serde_json::Value;

use crate::duration::GoDuration;
use crate::plugin::StageConfigError;

/// How a JSON value's type reads in an error message: "a number", "a list", ...
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a map",
    }
}

/// A duration option such as `with.timeout`: `None` when absent or null. A bare number is
/// refused (it has no unit; PipeCD would read it as nanoseconds), as is any other type. The
/// error names `field` and shows `example`.
pub fn duration(
    field: &str,
    value: Option<&Value>,
    example: &str,
) -> Result<Option<GoDuration>, StageConfigError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => GoDuration::parse(text)
            .map(Some)
            .map_err(|e| StageConfigError::new(field, e.to_string())),
        Some(Value::Number(n)) => Err(StageConfigError::new(
            field,
            format!("{n} has no unit; write a duration such as {example}"),
        )),
        Some(other) => Err(StageConfigError::new(
            field,
            format!(
                "expected a duration such as {example}, got {}",
                json_kind(other)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn duration_options() {
        let check = |v: Value| duration("timeout", Some(&v), "6h").map_err(|e| e.to_string());
        assert_eq!(check(json!("90s")), Ok(Some(GoDuration::from_secs(90))));
        assert_eq!(duration("timeout", None, "6h"), Ok(None));
        assert_eq!(check(json!(null)), Ok(None));
        assert_eq!(
            check(json!(30)),
            Err("timeout: 30 has no unit; write a duration such as 6h".into())
        );
        assert_eq!(
            check(json!(["1s"])),
            Err("timeout: expected a duration such as 6h, got a list".into())
        );
        assert!(check(json!("soon"))
            .unwrap_err()
            .starts_with("timeout: invalid duration"));
    }
}
