//! How a plugin reads a stage's `with`: into its own serde struct ([`parse`]), with errors
//! that name the field (`percent`, `env.FOO`) and suggest the closest option for a misspelt
//! one; [`none`] for the stages that take no options.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::plugin::StageConfigError;
use gannet_config::typed;
use gannet_domain::duration::GoDuration;

/// A stage's `with` as the plugin's options type `T`. A missing `with` reads as an empty map,
/// so `T`'s defaults apply; anything but a map is refused. `T` should deny unknown fields.
pub fn parse<T: DeserializeOwned>(with: &Value) -> Result<T, StageConfigError> {
    let empty = Value::Object(serde_json::Map::new());
    let with = match with {
        Value::Null => &empty,
        Value::Object(_) => with,
        other => {
            return Err(StageConfigError::new(
                "with",
                format!("expected a map of options, got {}", json_kind(other)),
            ))
        }
    };
    typed::from_value(with, "").map_err(|e| {
        let missing = e
            .message
            .strip_prefix("missing field `")
            .and_then(|rest| rest.strip_suffix('`'));
        match missing {
            Some(field) => StageConfigError::new(typed::join_path(&e.path, field), "is required"),
            None => StageConfigError::new(e.path, e.message),
        }
    })
}

/// The options as they are stored in the planned stage (defaults filled in).
pub fn to_value<T: Serialize>(options: &T) -> Value {
    serde_json::to_value(options).unwrap_or(Value::Null)
}

/// A promote stage's `with` (`LAMBDA_PROMOTE`, `CLOUDRUN_PROMOTE`): `{percent}`, the share of
/// the traffic the new version gets, 0 to 100.
pub fn promote_percent(with: &Value) -> Result<u8, StageConfigError> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct PromoteOptions {
        percent: gannet_config::Percentage,
    }
    parse::<PromoteOptions>(with).map(|o| o.percent.get())
}

/// A promote stage's row summary: its `percent` (`20%`); empty when it does not read.
pub fn promote_summary(with: &Value) -> String {
    promote_percent(with).map_or_else(|_| String::new(), |p| format!("{p}%"))
}

/// A traffic split as a row summary: each variant's share that is not zero, in the order
/// given (`primary 80% / canary 20%`).
pub fn traffic_summary(shares: &[(&str, i64)]) -> String {
    shares
        .iter()
        .filter(|(_, p)| *p != 0)
        .map(|(name, p)| format!("{name} {p}%"))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// A stage that takes no options: `with` must be absent or an empty map.
pub fn none(with: &Value) -> Result<Value, StageConfigError> {
    #[derive(Deserialize, Serialize)]
    #[serde(deny_unknown_fields)]
    struct NoOptions {}
    parse::<NoOptions>(with).map(|o| to_value(&o)).map_err(|e| {
        match e.message.starts_with("unknown field") {
            true => StageConfigError::new(e.field, "unknown option (this stage takes none)"),
            false => e,
        }
    })
}

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

    #[derive(Debug, Deserialize, Serialize, PartialEq)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Promote {
        percent: u8,
        #[serde(default)]
        timeout: Option<GoDuration>,
    }

    #[test]
    fn summaries_read_a_percent_and_a_split() {
        assert_eq!(promote_summary(&serde_json::json!({"percent": 20})), "20%");
        assert_eq!(promote_summary(&serde_json::json!({"percent": "x"})), "");
        assert_eq!(
            traffic_summary(&[("primary", 80), ("canary", 20), ("baseline", 0)]),
            "primary 80% / canary 20%"
        );
    }

    #[test]
    fn typed_options() {
        let check = |v: Value| parse::<Promote>(&v).map_err(|e| e.to_string());
        assert_eq!(
            check(json!({"percent": 10})),
            Ok(Promote {
                percent: 10,
                timeout: None
            })
        );
        assert_eq!(
            check(json!({"percnt": 10})),
            Err("percnt: unknown field `percnt`; did you mean `percent`?".into())
        );
        assert_eq!(check(json!(null)), Err("percent: is required".into()));
        assert_eq!(
            check(json!("10")),
            Err("with: expected a map of options, got a string".into())
        );
        assert!(check(json!({"percent": 300}))
            .unwrap_err()
            .starts_with("percent: invalid value: integer `300`"));
        assert!(check(json!({"percent": 1, "timeout": 5}))
            .unwrap_err()
            .starts_with("timeout: 5 has no unit"));
    }

    #[test]
    fn no_options() {
        assert_eq!(none(&json!(null)), Ok(json!({})));
        assert_eq!(none(&json!({})), Ok(json!({})));
        assert_eq!(
            none(&json!({"x": 1})).map_err(|e| e.to_string()),
            Err("x: unknown option (this stage takes none)".into())
        );
        assert_eq!(
            none(&json!([1])).map_err(|e| e.to_string()),
            Err("with: expected a map of options, got a list".into())
        );
    }

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
