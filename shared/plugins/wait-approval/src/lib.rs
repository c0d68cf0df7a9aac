//! The WAIT_APPROVAL stage: holds the pipeline until enough listed users approve it.
//!
//! Approvals arrive through the API, which calls [`Plugin::approve`] and stores the metadata it
//! returns (`approvedBy`, a comma-separated list, and `approvedAt`), then re-drives the stage
//! at once. A step reads those approvals from the stage metadata: enough of them finish the
//! stage; otherwise it asks to run again in 30 s, a backstop for a lost re-drive. The first
//! step records `waitStartedAt`, so the stage fails once `with.timeout` (6h by default, as in
//! PipeCD) has passed without enough approvals, across restarts.

mod options;

use async_trait::async_trait;
use gannet_domain::deployment::Stage;
use gannet_domain::duration::Millis;
use gannet_domain::ports::Metadata;
use gannet_domain::GoDuration;
use gannet_sdk::plugin::{
    ApproveError, Plugin, Presenter, StageConfigError, StageResult, StepContext, StepError,
    StepOutcome, Steps,
};
use gannet_sdk::registry::PluginSpec;
use gannet_sdk::stage_options;
use serde_json::Value;

use crate::options::{ApprovalOptions, DEFAULT_TIMEOUT};

/// The stage name this plugin runs.
pub const STAGE_WAIT_APPROVAL: &str = "WAIT_APPROVAL";

/// How often a waiting stage looks again when no approval re-drives it.
const POLL_INTERVAL: GoDuration = GoDuration::from_secs(30);

/// Stage metadata keys.
const APPROVED_BY: &str = "approvedBy";
const APPROVED_AT: &str = "approvedAt";
const WAIT_STARTED_AT: &str = "waitStartedAt";
/// How many approvals the stage log has already reported.
const APPROVALS_LOGGED: &str = "approvalsLogged";

/// Runs `WAIT_APPROVAL` stages and records approvals of them.
#[derive(Clone, Copy, Debug, Default)]
pub struct WaitApprovalPlugin;

/// The plugin's name, and its key under gannet.yaml's `plugins:`.
pub const NAME: &str = "wait-approval";

/// The registry's entry: `plugins.wait-approval` takes no settings.
pub const SPEC: PluginSpec = PluginSpec::stages_without_settings::<WaitApprovalPlugin>(NAME);

/// The users recorded in `approvedBy`, in approval order.
fn approved_by(metadata: &Metadata) -> Vec<&str> {
    metadata
        .get(APPROVED_BY)
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

fn users(n: usize) -> &'static str {
    if n == 1 {
        "user"
    } else {
        "users"
    }
}

impl Plugin for WaitApprovalPlugin {
    fn name(&self) -> &'static str {
        NAME
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &[STAGE_WAIT_APPROVAL]
    }

    fn validate_stage(&self, _name: &str, with: &Value) -> Result<Value, StageConfigError> {
        ApprovalOptions::parse(with).map(|o| stage_options::to_value(&o))
    }

    /// `with.timeout`: how long the stage waits for approvals.
    fn default_timeout(&self, stage: &Stage) -> GoDuration {
        ApprovalOptions::parse(&stage.with).map_or(DEFAULT_TIMEOUT, |o| o.timeout)
    }
}

impl Presenter for WaitApprovalPlugin {
    fn approvable(&self, stage: &str) -> bool {
        stage == STAGE_WAIT_APPROVAL
    }

    /// Who may approve, and how many must when that is more than one.
    fn summary(&self, stage: &Stage) -> String {
        let Ok(opts) = ApprovalOptions::parse(&stage.with) else {
            return String::new();
        };
        let who = if opts.approvers.is_empty() {
            "approvers: anyone".to_owned()
        } else {
            format!("approvers: {}", opts.approvers.join(", "))
        };
        match opts.min_approver_num {
            1 => who,
            n => format!("{who} ({n} needed)"),
        }
    }

    fn approved_by(&self, stage: &Stage) -> Vec<String> {
        approved_by(&stage.metadata)
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    fn approve(&self, stage: &Stage, user: &str, now: Millis) -> Result<Metadata, ApproveError> {
        if stage.name != STAGE_WAIT_APPROVAL {
            return Err(ApproveError::NotApprovable {
                stage: stage.id.to_string(),
                name: stage.name.clone(),
            });
        }
        let user = user.trim();
        let opts =
            ApprovalOptions::parse(&stage.with).map_err(|e| ApproveError::InvalidOptions {
                stage: stage.id.to_string(),
                reason: e.to_string(),
            })?;
        // A comma would split the name in `approvedBy`; no valid approver contains one.
        if user.is_empty() || user.contains(',') || !opts.allows(user) {
            return Err(ApproveError::NotAnApprover {
                user: user.to_owned(),
                stage: stage.id.to_string(),
            });
        }
        let mut approvals = approved_by(&stage.metadata);
        if approvals.contains(&user) {
            return Err(ApproveError::AlreadyApproved {
                user: user.to_owned(),
                stage: stage.id.to_string(),
            });
        }
        approvals.push(user);
        Ok(Metadata::from([
            (APPROVED_BY.to_owned(), approvals.join(", ")),
            (APPROVED_AT.to_owned(), now.0.to_string()),
        ]))
    }
}

#[async_trait]
impl Steps for WaitApprovalPlugin {
    async fn execute_step(&self, ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        let stage = ctx.stage;
        let opts = ApprovalOptions::parse(&stage.with)
            .map_err(|e| StepError::permanent(format!("stage {}: invalid with.{e}", stage.id)))?;
        let started = match stage
            .metadata
            .get(WAIT_STARTED_AT)
            .and_then(|s| s.parse().ok())
        {
            Some(at) => Millis(at),
            None => {
                let entry = Metadata::from([(WAIT_STARTED_AT.to_owned(), ctx.now.0.to_string())]);
                ctx.io.save_metadata(entry).await?;
                ctx.io
                    .log(&format!(
                        "Waiting for approval from at least {} {} (approvers: {})...",
                        opts.min_approver_num,
                        users(opts.min_approver_num),
                        opts.approvers_text()
                    ))
                    .await;
                ctx.now
            }
        };

        // Only listed users count, in case the metadata holds anything else.
        let approvals: Vec<&str> = approved_by(&stage.metadata)
            .into_iter()
            .filter(|u| opts.allows(u))
            .collect();
        let logged: usize = stage
            .metadata
            .get(APPROVALS_LOGGED)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if approvals.len() > logged {
            for user in &approvals[logged..] {
                ctx.io.log(&format!("Got approval from {user:?}")).await;
            }
            let entry =
                Metadata::from([(APPROVALS_LOGGED.to_owned(), approvals.len().to_string())]);
            ctx.io.save_metadata(entry).await?;
        }

        if approvals.len() >= opts.min_approver_num {
            ctx.io
                .log(&format!(
                    "This stage has been approved by {} {} ({})",
                    approvals.len(),
                    users(approvals.len()),
                    approvals.join(", ")
                ))
                .await;
            return Ok(StepOutcome::Done(StageResult::Success));
        }

        let missing = opts.min_approver_num - approvals.len();
        let elapsed = ctx.now.since(started);
        if elapsed >= opts.timeout {
            let reason = format!(
                "timed out after {} waiting for {missing} more {}",
                opts.timeout,
                if missing == 1 {
                    "approval"
                } else {
                    "approvals"
                }
            );
            ctx.io.log(&reason).await;
            return Ok(StepOutcome::Done(StageResult::Failure { reason }));
        }
        if approvals.len() > logged {
            ctx.io
                .log(&format!(
                    "Waiting for {missing} other {}...",
                    users(missing)
                ))
                .await;
        }
        let left = GoDuration::from_millis(opts.timeout.as_millis() - elapsed.as_millis());
        Ok(StepOutcome::Continue {
            after: left.min(POLL_INTERVAL),
        })
    }
}

#[cfg(test)]
mod tests;
