//! The `SR_*` environment variables PipeCD gives a script: what deployment runs it, and why.
//!
//! Names and formats follow PipeCD's script-run stage: `SR_TRIGGERED_AT` is in Unix seconds,
//! each label `k: v` becomes `SR_LABELS_<K uppercased>=v`, and `SR_CONTEXT_RAW` holds the same
//! values as JSON (empty values left out). gannet does not track the repository's remote URL,
//! so `SR_REPOSITORY_URL` is empty.

use gannet_domain::deployment::Deployment;
use serde_json::{Map, Value};

/// Whether the script undoes a stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RunKind {
    Forward,
    Rollback,
}

/// The `SR_*` variables for a script run by `deployment`.
pub(crate) fn context_env(deployment: &Deployment, kind: RunKind) -> Vec<(String, String)> {
    let d = deployment;
    let triggered_at = d.created_at.0 / 1000;
    let is_rollback = kind == RunKind::Rollback;

    let mut raw = Map::new();
    let mut put = |key: &str, value: &str| {
        if !value.is_empty() {
            raw.insert(key.to_owned(), Value::String(value.to_owned()));
        }
    };
    put("deploymentID", d.id.as_str());
    put("applicationID", d.app.as_str());
    put("applicationName", &d.app_name);
    put("triggeredCommitHash", d.commit.sha.as_str());
    put("triggeredCommander", &d.trigger.commander);
    put("summary", &d.summary);
    if triggered_at > 0 {
        raw.insert("triggeredAt".into(), Value::from(triggered_at));
    }
    if !d.labels.is_empty() {
        let labels = d
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        raw.insert("labels".into(), Value::Object(labels));
    }
    if is_rollback {
        raw.insert("isRollback".into(), Value::Bool(true));
    }

    let mut env: Vec<(String, String)> = [
        ("SR_DEPLOYMENT_ID", d.id.to_string()),
        ("SR_APPLICATION_ID", d.app.to_string()),
        ("SR_APPLICATION_NAME", d.app_name.clone()),
        ("SR_TRIGGERED_AT", triggered_at.to_string()),
        ("SR_TRIGGERED_COMMIT_HASH", d.commit.sha.to_string()),
        ("SR_TRIGGERED_COMMANDER", d.trigger.commander.clone()),
        ("SR_REPOSITORY_URL", String::new()),
        ("SR_SUMMARY", d.summary.clone()),
        ("SR_IS_ROLLBACK", is_rollback.to_string()),
        ("SR_CONTEXT_RAW", Value::Object(raw).to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    for (key, value) in &d.labels {
        env.push((format!("SR_LABELS_{}", key.to_uppercase()), value.clone()));
    }
    // The OS refuses a NUL anywhere and '=' in a name; leave such a variable out.
    env.retain(|(k, v)| !k.contains(['=', '\0']) && !v.contains('\0'));
    env
}
