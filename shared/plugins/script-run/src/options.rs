//! The `with` of SCRIPT_RUN (`run`, `env`, `timeout`, `onRollback`, as PipeCD names them), of
//! the hidden SCRIPT_RUN_ROLLBACK stage (`run`, `env`, `timeout`, `rollbackOf`), of CUSTOM_SYNC
//! (`run`, `envs`, `timeout`) and of the hidden CUSTOM_SYNC_ROLLBACK (`rollbackOf`).

use std::collections::BTreeMap;
use std::fmt;

use gannet_domain::GoDuration;
use gannet_sdk::plugin::StageConfigError;
use gannet_sdk::stage_options;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{STAGE_CUSTOM_SYNC, STAGE_SCRIPT_RUN_ROLLBACK};

/// PipeCD's default for `timeout`.
pub(crate) const DEFAULT_TIMEOUT: GoDuration = GoDuration::from_secs(6 * 3600);

/// SCRIPT_RUN's options as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Forward {
    #[serde(default)]
    run: Option<String>,
    #[serde(default)]
    env: Option<BTreeMap<String, EnvValue>>,
    #[serde(default)]
    timeout: Option<GoDuration>,
    #[serde(default)]
    on_rollback: Option<String>,
}

/// SCRIPT_RUN_ROLLBACK's options, as gannet plans them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Rollback {
    #[serde(default)]
    run: Option<String>,
    #[serde(default)]
    env: Option<BTreeMap<String, EnvValue>>,
    #[serde(default)]
    timeout: Option<GoDuration>,
    #[serde(default)]
    rollback_of: Option<String>,
}

/// CUSTOM_SYNC's options as written. PipeCD names the variables `envs`; its own example writes
/// `env` (which PipeCD drops without a word), so gannet reads that as `envs`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CustomSync {
    #[serde(default)]
    run: Option<String>,
    #[serde(default, alias = "env")]
    envs: Option<BTreeMap<String, EnvValue>>,
    #[serde(default)]
    timeout: Option<GoDuration>,
}

/// CUSTOM_SYNC_ROLLBACK's options, as gannet plans them: the CUSTOM_SYNC stage it undoes (the
/// script is the running commit's CUSTOM_SYNC, read when it runs).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CustomSyncRollback {
    pub(crate) rollback_of: String,
}

impl CustomSyncRollback {
    pub(crate) fn parse(with: &Value) -> Result<Self, StageConfigError> {
        stage_options::parse(with)
    }
}

/// An `env` value: a string, or a number or boolean taken as its text (which PipeCD, a map
/// of strings, would refuse).
struct EnvValue(String);

impl<'de> Deserialize<'de> for EnvValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = EnvValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, number or boolean")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<EnvValue, E> {
                Ok(EnvValue(v.to_owned()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<EnvValue, E> {
                Ok(EnvValue(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<EnvValue, E> {
                Ok(EnvValue(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<EnvValue, E> {
                Ok(EnvValue(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<EnvValue, E> {
                Ok(EnvValue(v.to_string()))
            }
        }
        d.deserialize_any(Text)
    }
}

/// The validated options of either stage, as they are stored in the plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ScriptOptions {
    /// The shell script, run with `sh -c`.
    pub(crate) run: String,
    /// Extra environment variables, set after the `SR_*` ones (so they may override them).
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) timeout: GoDuration,
    /// SCRIPT_RUN only: the script a rollback runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) on_rollback: Option<String>,
    /// SCRIPT_RUN_ROLLBACK only: the id of the SCRIPT_RUN stage it undoes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) rollback_of: Option<String>,
}

impl ScriptOptions {
    /// Parses the `with` of a stage named `name`.
    pub(crate) fn parse(name: &str, with: &Value) -> Result<Self, StageConfigError> {
        let (run, env, timeout, on_rollback, rollback_of) = match name {
            STAGE_SCRIPT_RUN_ROLLBACK => {
                let r: Rollback = stage_options::parse(with)?;
                (r.run, r.env, r.timeout, None, r.rollback_of)
            }
            STAGE_CUSTOM_SYNC => {
                let c: CustomSync = stage_options::parse(with)?;
                (c.run, c.envs, c.timeout, None, None)
            }
            _ => {
                let f: Forward = stage_options::parse(with)?;
                (f.run, f.env, f.timeout, f.on_rollback, None)
            }
        };
        let run = run
            .filter(|run| !run.trim().is_empty())
            .ok_or_else(|| StageConfigError::new("run", "is required: the commands to run"))?;
        Ok(Self {
            run,
            env: checked_env(env.unwrap_or_default())?,
            // As in PipeCD, a zero timeout means the default.
            timeout: match timeout {
                None => DEFAULT_TIMEOUT,
                Some(t) if t == GoDuration::default() => DEFAULT_TIMEOUT,
                Some(t) => GoDuration::from_millis(t.as_millis().max(1)),
            },
            on_rollback: on_rollback.filter(|s| !s.trim().is_empty()),
            rollback_of: rollback_of.filter(|s| !s.is_empty()),
        })
    }

    pub(crate) fn to_value(&self) -> Value {
        stage_options::to_value(self)
    }
}

/// Names and values a process environment can hold: a name neither empty nor with `=` or
/// NUL, a value without NUL.
fn checked_env(
    written: BTreeMap<String, EnvValue>,
) -> Result<BTreeMap<String, String>, StageConfigError> {
    let mut env = BTreeMap::new();
    for (name, EnvValue(value)) in written {
        let field = format!("env.{name}");
        if name.is_empty() || name.contains(['=', '\0']) {
            return Err(StageConfigError::new(
                field,
                "is not a valid variable name (empty, or contains '=' or NUL)",
            ));
        }
        if value.contains('\0') {
            return Err(StageConfigError::new(field, "contains a NUL character"));
        }
        env.insert(name, value);
    }
    Ok(env)
}
