//! The `with` of SCRIPT_RUN (`run`, `env`, `timeout`, `onRollback`, as PipeCD names them) and
//! of the hidden SCRIPT_RUN_ROLLBACK stage (`run`, `env`, `timeout`, `rollbackOf`).

use std::collections::BTreeMap;

use gannet_core::plugin::StageConfigError;
use gannet_core::stage_options::{self, json_kind};
use gannet_core::GoDuration;
use serde_json::{Map, Value};

use crate::STAGE_SCRIPT_RUN_ROLLBACK;

/// PipeCD's default for `timeout`.
pub(crate) const DEFAULT_TIMEOUT: GoDuration = GoDuration::from_secs(6 * 3600);

const FORWARD_FIELDS: [&str; 4] = ["run", "env", "timeout", "onRollback"];
const ROLLBACK_FIELDS: [&str; 4] = ["run", "env", "timeout", "rollbackOf"];

/// The validated options of either stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ScriptOptions {
    /// The shell script, run with `sh -c`.
    pub(crate) run: String,
    /// Extra environment variables, set after the `SR_*` ones (so they may override them).
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) timeout: GoDuration,
    /// SCRIPT_RUN only: the script a rollback runs.
    pub(crate) on_rollback: Option<String>,
    /// SCRIPT_RUN_ROLLBACK only: the id of the SCRIPT_RUN stage it undoes.
    pub(crate) rollback_of: Option<String>,
}

impl ScriptOptions {
    /// Parses the `with` of a stage named `name`.
    pub(crate) fn parse(name: &str, with: &Value) -> Result<Self, StageConfigError> {
        let empty = Map::new();
        let fields = match with {
            Value::Null => &empty,
            Value::Object(fields) => fields,
            other => {
                return Err(StageConfigError::new(
                    "with",
                    format!("expected a map of options, got {}", json_kind(other)),
                ))
            }
        };
        let rollback = name == STAGE_SCRIPT_RUN_ROLLBACK;
        let allowed = if rollback {
            ROLLBACK_FIELDS
        } else {
            FORWARD_FIELDS
        };
        if let Some(unknown) = fields.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(StageConfigError::new(
                unknown.as_str(),
                format!(
                    "unknown option for a {name} stage (options: {})",
                    allowed.join(", ")
                ),
            ));
        }
        let run = match text(fields, "run")? {
            Some(run) if !run.trim().is_empty() => run,
            _ => {
                return Err(StageConfigError::new(
                    "run",
                    "is required: the commands to run",
                ))
            }
        };
        Ok(Self {
            run,
            env: parse_env(fields.get("env"))?,
            timeout: parse_timeout(fields.get("timeout"))?,
            on_rollback: text(fields, "onRollback")?.filter(|s| !s.trim().is_empty()),
            rollback_of: text(fields, "rollbackOf")?.filter(|s| !s.is_empty()),
        })
    }

    pub(crate) fn to_value(&self) -> Value {
        let mut out = Map::new();
        out.insert("run".into(), Value::String(self.run.clone()));
        let env = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        out.insert("env".into(), Value::Object(env));
        out.insert("timeout".into(), Value::String(self.timeout.to_string()));
        if let Some(script) = &self.on_rollback {
            out.insert("onRollback".into(), Value::String(script.clone()));
        }
        if let Some(of) = &self.rollback_of {
            out.insert("rollbackOf".into(), Value::String(of.clone()));
        }
        Value::Object(out)
    }
}

/// An optional string field.
fn text(fields: &Map<String, Value>, field: &str) -> Result<Option<String>, StageConfigError> {
    match fields.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(StageConfigError::new(
            field,
            format!("expected a string, got {}", json_kind(other)),
        )),
    }
}

/// `env`: a map of names to scalars. Numbers and booleans are taken as their text, which
/// PipeCD (a map of strings) would refuse.
fn parse_env(value: Option<&Value>) -> Result<BTreeMap<String, String>, StageConfigError> {
    let vars = match value {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(vars)) => vars,
        Some(other) => {
            return Err(StageConfigError::new(
                "env",
                format!("expected a map of variables, got {}", json_kind(other)),
            ))
        }
    };
    let mut env = BTreeMap::new();
    for (name, value) in vars {
        let field = format!("env.{name}");
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(StageConfigError::new(
                field,
                "is not a valid variable name (empty, or contains '=' or NUL)",
            ));
        }
        let value = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            other => {
                return Err(StageConfigError::new(
                    field,
                    format!("expected a string, got {}", json_kind(other)),
                ))
            }
        };
        if value.contains('\0') {
            return Err(StageConfigError::new(field, "contains a NUL character"));
        }
        env.insert(name.clone(), value);
    }
    Ok(env)
}

fn parse_timeout(value: Option<&Value>) -> Result<GoDuration, StageConfigError> {
    let timeout = stage_options::duration("timeout", value, "10m")?;
    // As in PipeCD, a zero timeout means the default.
    Ok(match timeout {
        None => DEFAULT_TIMEOUT,
        Some(t) if t == GoDuration::default() => DEFAULT_TIMEOUT,
        Some(t) => GoDuration::from_millis(t.as_millis().max(1)),
    })
}
