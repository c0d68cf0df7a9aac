//! Live state and drift of a Cloud Run app: one GET of its service, compared with the manifest
//! at the branch head.
//!
//! - The fields Git sets (image, env, resources, scaling, service account, ...) compare with
//!   the service's as [`gannet_domain::drift::diff`] compares: only Git's fields, so what the
//!   platform fills in (the default service account, `cpuIdle`, the port's name, the URI) is
//!   never drift. gannet's own labels and the revision's name are not Git's fields.
//! - The traffic: gannet leaves 100% on the revision of the service's template. Another split
//!   (a person moved traffic in the console, a canary was left half-way) is drift.
//! - The template itself: a template gannet did not write (no `pipecd-dev-commit-hash` label:
//!   `gcloud run deploy` made the serving revision) is drift, even when its fields match Git.

use gannet_domain::drift::{self, DriftField, Health, LiveResource, LiveState, Rules};
use gannet_sdk::plugin::StepError;

use crate::api::Api;
use crate::converge::{Observed, Split, LABEL_COMMIT};
use crate::manifest::ServiceManifest;

/// A variable by its name (`env[name=LOG_LEVEL]`), as the other platforms name it.
const RULES: Rules<'static> = Rules {
    unordered: &[],
    ignored: &[],
    keyed: &[("template.containers.*.env", "name")],
};

/// The service named by `manifest` against `manifest`.
pub(crate) async fn read(api: &Api, manifest: &ServiceManifest) -> Result<LiveState, StepError> {
    let Some(live) = api.get_service(&manifest.name).await? else {
        return Ok(LiveState {
            resources: Vec::new(),
            drift: vec![DriftField {
                field: format!("service {}", manifest.name),
                git: "exists".to_owned(),
                live: drift::UNSET.to_owned(),
            }],
        });
    };
    let observed: Observed = serde_json::from_value(live.clone()).map_err(|e| {
        StepError::permanent(format!(
            "Cloud Run: service {} reads as: {e}",
            manifest.name
        ))
    })?;
    let mut fields = drift::diff(&manifest.body, &live, &RULES);
    let template = &observed.template.revision;
    if !observed.template.labels.contains_key(LABEL_COMMIT) {
        fields.push(DriftField {
            field: "template.revision".to_owned(),
            git: "a revision gannet deployed from a commit".to_owned(),
            live: format!("{template} (written by another client)"),
        });
    }
    let split = observed.split();
    let expected = Split::all(template);
    if split != expected {
        fields.push(DriftField {
            field: "traffic".to_owned(),
            git: expected.to_string(),
            live: split.to_string(),
        });
    }
    let health = match observed
        .terminal_condition
        .as_ref()
        .map(|c| c.state.as_str())
    {
        Some("CONDITION_SUCCEEDED") => Health::Healthy,
        Some("CONDITION_FAILED") => Health::Unhealthy,
        _ => Health::Unknown,
    };
    let uri = live["uri"].as_str().unwrap_or_default();
    let serving = observed.serving();
    let summary = match uri {
        "" => format!("serves {serving}"),
        u => format!("serves {serving} at {u}"),
    };
    Ok(LiveState {
        resources: vec![LiveResource {
            kind: "CloudRunService".to_owned(),
            id: manifest.name.clone(),
            health,
            summary,
        }],
        drift: fields,
    })
}
