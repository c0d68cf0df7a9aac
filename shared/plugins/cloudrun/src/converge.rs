//! Moving a service to a wanted state (a template, the revision it makes, a traffic split), one
//! small step at a time, each safe to repeat. Every stage (CLOUDRUN_SYNC, CLOUDRUN_PROMOTE, the
//! rollback) is this with another wanted state.
//!
//! A step does at most one write and never waits:
//! 1. An operation this stage started and saved is polled (`Continue` until it is done; its
//!    error fails the stage, and stays saved, so a repeated step fails the same way).
//! 2. The service is read. Missing: it is created with the revision and the traffic. Being
//!    changed by an operation whose name was lost (a crash between the write and saving it):
//!    wait.
//! 3. The template is not the wanted revision's: it is written, with the traffic pinned where
//!    it is now, so nothing moves before the new revision is ready.
//! 4. The revision is not ready: wait; it failed: the stage fails with Cloud Run's message.
//! 5. The traffic is not the wanted split: it is written. Already in place: done, nothing
//!    written.
//!
//! Writes carry the `etag` read in step 2, so a write made in between (by a person, or a step
//! delivered twice) is refused by Cloud Run and the next step reads again.

use gannet_domain::GoDuration;
use gannet_sdk::plugin::{StageResult, StepError, StepOutcome};
use gannet_sdk::stage_meta::StageMeta;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::Api;

/// Stage metadata: the operation this stage is waiting for.
const META_OPERATION: &str = "operation";
/// How often an operation or a revision is looked at again.
const POLL: GoDuration = GoDuration::from_secs(2);
/// Revisions are full names in some fields: `projects/P/locations/L/services/S/revisions/R`.
fn short(revision: &str) -> &str {
    revision.rsplit('/').next().unwrap_or(revision)
}

/// Labels on the service and on its revisions, PipeCD's.
pub const LABEL_MANAGED_BY: &str = "pipecd-dev-managed-by";
pub const LABEL_PIPED: &str = "pipecd-dev-piped";
pub const LABEL_APPLICATION: &str = "pipecd-dev-application";
pub const LABEL_COMMIT: &str = "pipecd-dev-commit-hash";
pub const LABEL_REVISION: &str = "pipecd-dev-revision-name";
/// `pipecd-dev-managed-by`'s value, as PipeCD writes it.
pub const MANAGED_BY: &str = "piped";

/// A traffic split: each revision and its percent (those at 0% left out), in a fixed order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split(pub Vec<(String, u8)>);

impl Split {
    pub fn all(revision: &str) -> Self {
        Self(vec![(revision.to_owned(), 100)])
    }

    /// `percent` to `new`, the rest to `old`.
    pub fn between(new: &str, percent: u8, old: &str) -> Self {
        if new == old {
            return Self::all(new);
        }
        let parts = [(new, percent), (old, 100 - percent)];
        Self(
            parts
                .into_iter()
                .filter(|(_, p)| *p > 0)
                .map(|(r, p)| (r.to_owned(), p))
                .collect(),
        )
    }

    fn normalised(mut self) -> Self {
        self.0.retain(|(_, p)| *p > 0);
        self.0.sort();
        self
    }

    fn to_json(&self) -> Value {
        Value::Array(
            self.0
                .iter()
                .map(|(r, p)| json!({"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION", "revision": r, "percent": p}))
                .collect(),
        )
    }
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(r, p)| format!("{p}% {r}")).collect();
        f.write_str(&parts.join(", "))
    }
}

/// The state a stage moves the service to.
pub struct Want {
    /// The service id.
    pub service: String,
    /// The revision the template makes.
    pub revision: String,
    /// The v2 body with the template (its `revision` set) and gannet's labels; no traffic.
    pub body: Value,
    pub traffic: Split,
}

/// What gannet reads of a service.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Observed {
    pub template: ObservedTemplate,
    pub traffic: Vec<Target>,
    pub traffic_statuses: Vec<Target>,
    pub reconciling: bool,
    pub etag: String,
    pub latest_ready_revision: String,
    pub terminal_condition: Option<Condition>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObservedTemplate {
    pub revision: String,
    pub labels: std::collections::BTreeMap<String, String>,
}

/// A traffic target.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Target {
    #[serde(rename = "type")]
    pub kind: String,
    pub revision: String,
    pub percent: u8,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Condition {
    #[serde(rename = "type")]
    pub kind: String,
    pub state: String,
    pub message: String,
}

impl Observed {
    /// The split as the service is asked to route it, `LATEST` resolved to the latest ready
    /// revision.
    pub fn split(&self) -> Split {
        let latest = short(&self.latest_ready_revision);
        Split(
            self.traffic
                .iter()
                .map(|t| {
                    let revision = match t.kind.as_str() {
                        "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST" => latest,
                        _ => short(&t.revision),
                    };
                    (revision.to_owned(), t.percent)
                })
                .collect(),
        )
        .normalised()
    }

    /// The split serving now (`trafficStatuses`).
    pub fn serving(&self) -> Split {
        Split(
            self.traffic_statuses
                .iter()
                .map(|t| (short(&t.revision).to_owned(), t.percent))
                .collect(),
        )
        .normalised()
    }
}

/// One step towards `want`.
pub async fn step(
    api: &Api,
    meta: &mut StageMeta<'_>,
    want: &Want,
) -> Result<StepOutcome, StepError> {
    let io = meta.io();
    if let Some(name) = meta.get(META_OPERATION).filter(|n| !n.is_empty()) {
        let op = api.get_operation(name).await?;
        if !op.done {
            return Ok(StepOutcome::Continue { after: POLL });
        }
        // A failed operation stays saved: a repeated step gives the same failure.
        if let Some(e) = op.error {
            let reason = format!("Cloud Run: {}", e.message);
            io.log(&reason).await;
            return Ok(StepOutcome::Done(StageResult::Failure { reason }));
        }
        meta.save(&[(META_OPERATION, String::new())]).await?;
    }
    let Some(raw) = api.get_service(&want.service).await? else {
        let mut body = want.body.clone();
        body["traffic"] = want.traffic.to_json();
        let op = api.create_service(&want.service, &body).await?;
        io.log(&format!(
            "Creating service {} with revision {} ({})",
            want.service, want.revision, want.traffic
        ))
        .await;
        return started(meta, op.name).await;
    };
    let observed: Observed = serde_json::from_value(raw).map_err(|e| {
        StepError::permanent(format!("Cloud Run: service {} reads as: {e}", want.service))
    })?;
    if observed.reconciling {
        io.log(&format!(
            "Service {} is being changed by an operation this stage is not following; waiting for it",
            want.service
        ))
        .await;
        return Ok(StepOutcome::Continue { after: POLL });
    }
    if observed.template.revision != want.revision {
        let mut body = want.body.clone();
        let pinned = observed.serving();
        // A new service (no traffic yet) or one whose traffic is on a revision that is gone
        // gets the wanted split at once.
        let traffic = if pinned.0.is_empty() {
            &want.traffic
        } else {
            &pinned
        };
        body["traffic"] = traffic.to_json();
        body["etag"] = json!(observed.etag);
        let op = api.update_service(&want.service, &body).await?;
        io.log(&format!(
            "Deploying revision {} to service {} (traffic stays: {traffic})",
            want.revision, want.service
        ))
        .await;
        return started(meta, op.name).await;
    }
    let revision = api
        .get_revision(&want.service, &want.revision)
        .await?
        .ok_or_else(|| {
            StepError::permanent(format!(
                "Cloud Run: service {}'s template names revision {}, which does not exist",
                want.service, want.revision
            ))
        })?;
    let conditions: Vec<Condition> =
        serde_json::from_value(revision["conditions"].clone()).unwrap_or_default();
    match conditions
        .iter()
        .find(|c| c.kind == "Ready")
        .map(|c| (c.state.as_str(), c))
    {
        Some(("CONDITION_SUCCEEDED", _)) => {}
        Some(("CONDITION_FAILED", c)) => {
            let reason = format!(
                "Cloud Run: revision {} is not ready: {}",
                want.revision, c.message
            );
            io.log(&reason).await;
            return Ok(StepOutcome::Done(StageResult::Failure { reason }));
        }
        _ => return Ok(StepOutcome::Continue { after: POLL }),
    }
    let current = observed.split();
    if current == want.traffic.clone().normalised() {
        io.log(&format!(
            "Service {} serves {} (revision {} is ready)",
            want.service, want.traffic, want.revision
        ))
        .await;
        return Ok(StepOutcome::Done(StageResult::Success));
    }
    let mut body = want.body.clone();
    body["traffic"] = want.traffic.to_json();
    body["etag"] = json!(observed.etag);
    let op = api.update_service(&want.service, &body).await?;
    io.log(&format!(
        "Routing service {}: {} (was {current})",
        want.service, want.traffic
    ))
    .await;
    started(meta, op.name).await
}

/// Saves the operation the step started, to be followed by the next steps.
async fn started(meta: &mut StageMeta<'_>, operation: String) -> Result<StepOutcome, StepError> {
    meta.save(&[(META_OPERATION, operation)]).await?;
    Ok(StepOutcome::Continue { after: POLL })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_compare_whatever_the_order_and_drop_zero_percent() {
        assert_eq!(
            Split::between("b", 10, "a").normalised(),
            Split(vec![("a".into(), 90), ("b".into(), 10)])
        );
        assert_eq!(Split::between("b", 100, "a"), Split::all("b"));
        assert_eq!(Split::between("b", 0, "a"), Split::all("a"));
        assert_eq!(Split::between("a", 30, "a"), Split::all("a"));
        assert_eq!(Split::between("b", 10, "a").to_string(), "10% b, 90% a");
    }

    #[test]
    fn latest_resolves_to_the_latest_ready_revision() {
        let o: Observed = serde_json::from_value(json!({
            "latestReadyRevision": "projects/p/locations/l/services/s/revisions/s-2",
            "traffic": [
                {"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "percent": 60},
                {"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION", "revision": "s-1", "percent": 40},
                {"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION", "revision": "s-0", "tag": "old"},
            ],
        }))
        .unwrap();
        assert_eq!(
            o.split(),
            Split(vec![("s-1".into(), 40), ("s-2".into(), 60)])
        );
    }
}
