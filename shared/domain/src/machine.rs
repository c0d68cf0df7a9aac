//! The deployment state machine: pure functions from a deployment, the time and an event to
//! the next state. The stage handler loads a deployment, asks [`next_action`], runs at most one
//! plugin step, and stores what [`apply_outcome`] returns.
//!
//! Rules:
//! - Stages run in order; SKIPPED stages are passed over.
//! - A failed stage (or a timeout) starts the rollback stages when there are any; a failed or
//!   timed-out rollback stage ends the deployment FAILURE at once (a stuck rollback fails).
//! - Cancel with rollback runs the rollback stages and ends CANCELLED; without rollback it
//!   stops at once.
//! - The deployment timeout (from PLANNED) and each stage's timeout are checked before every
//!   step, and a `Continue` never sleeps past the nearest deadline.
//! - A rollback stage `rollback-X` is skipped when stage `X` never started.
//! - When nothing but the pre-deployment phase ([`PRE_DEPLOYMENT_STAGE_ID`]) started, a failure or a
//!   cancel ends the deployment without rollback: no platform stage ran.

use crate::deployment::{CancelMode, Deployment, DeploymentStatus, Stage, StageStatus};
use crate::duration::{GoDuration, Millis};

/// What the stage handler should do with a deployment now.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Run one step of the stage at this index (after [`start_stage`] when it has not started).
    Run { index: usize },
    /// The deployment moves on without running a plugin: store it.
    Transition(Box<Transition>),
    /// Terminal: nothing to do.
    Nothing,
}

/// A new state to store (its `seq` already bumped) and what follows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    pub deployment: Deployment,
    pub next: Next,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Send a step message for the new seq after this long.
    Step { after: GoDuration },
    /// The deployment reached a terminal status: release the app's lock, plan the next one.
    Finished,
}

/// Why the forward pipeline stopped and rollback began; decides the final status.
fn final_status(d: &Deployment) -> DeploymentStatus {
    if d.cancel.is_some() {
        DeploymentStatus::Cancelled
    } else if d.status == DeploymentStatus::RollingBack || d.status == DeploymentStatus::Failure {
        DeploymentStatus::Failure
    } else {
        DeploymentStatus::Success
    }
}

fn deadline(d: &Deployment) -> Option<Millis> {
    d.planned_at.map(|at| at.plus(d.timeout))
}

fn stage_deadline(s: &Stage) -> Option<Millis> {
    s.started_at.map(|at| at.plus(s.timeout))
}

/// The index of the stage to run next, for the deployment's current phase.
fn current_stage(d: &Deployment) -> Option<usize> {
    let rolling_back = d.status == DeploymentStatus::RollingBack;
    d.stages
        .iter()
        .position(|s| s.rollback == rolling_back && !s.status.is_finished())
}

/// Decides what to do with `d` at `now`, before any plugin runs.
pub fn next_action(d: &Deployment, now: Millis) -> Action {
    if d.status.is_terminal() || d.status == DeploymentStatus::Pending {
        return Action::Nothing;
    }
    if let Some(cancel) = &d.cancel {
        let rolling_back = d.status == DeploymentStatus::RollingBack;
        let reason = cancel_reason(&cancel.by);
        return match (cancel.mode, rolling_back) {
            // Already undoing: a cancel with rollback lets the rollback finish.
            (CancelMode::WithRollback, true) => run_or_advance(d, now),
            (CancelMode::WithRollback, false) => Action::Transition(Box::new(
                stop_current_and_roll_back(d, now, StageStatus::Cancelled, reason),
            )),
            (CancelMode::WithoutRollback, _) => {
                let mut next = stop_current(d, now, StageStatus::Cancelled, &reason);
                finish(&mut next, DeploymentStatus::Cancelled, reason, now);
                Action::Transition(Box::new(Transition {
                    deployment: next,
                    next: Next::Finished,
                }))
            }
        };
    }
    if let Some(limit) = deadline(d) {
        if now > limit {
            let reason = format!("deployment timed out after {}", d.timeout);
            return Action::Transition(Box::new(fail_current(d, now, reason)));
        }
    }
    if let Some(i) = current_stage(d) {
        let s = &d.stages[i];
        if let Some(limit) = stage_deadline(s) {
            if now > limit {
                let reason = format!("stage {} timed out after {}", s.id, s.timeout);
                return Action::Transition(Box::new(fail_current(d, now, reason)));
            }
        }
    }
    run_or_advance(d, now)
}

fn run_or_advance(d: &Deployment, now: Millis) -> Action {
    match current_stage(d) {
        Some(index) if should_skip_rollback(d, index) => {
            let mut next = d.clone();
            let s = &mut next.stages[index];
            s.status = StageStatus::Skipped;
            s.status_reason = "the stage it undoes never started".into();
            s.completed_at = Some(now);
            Action::Transition(Box::new(advance(next, now)))
        }
        Some(index) => Action::Run { index },
        None => Action::Transition(Box::new(advance(d.clone(), now))),
    }
}

/// A rollback stage `rollback-X` has nothing to undo if stage `X` never ran.
fn should_skip_rollback(d: &Deployment, index: usize) -> bool {
    let s = &d.stages[index];
    if !s.rollback {
        return false;
    }
    let Some(owner) = s.id.as_str().strip_prefix("rollback-") else {
        return false;
    };
    d.stages
        .iter()
        .find(|o| !o.rollback && o.id.as_str() == owner)
        .is_some_and(|o| o.started_at.is_none())
}

/// Marks stage `index` RUNNING (and the deployment RUNNING when it was PLANNED). The result
/// is stored with the same `seq`: it records progress, it does not consume the step message.
pub fn start_stage(d: &Deployment, index: usize, now: Millis) -> Deployment {
    let mut next = d.clone();
    if next.status == DeploymentStatus::Planned {
        next.status = DeploymentStatus::Running;
        next.status_reason = String::new();
    }
    let s = &mut next.stages[index];
    if s.status == StageStatus::NotStartedYet {
        s.status = StageStatus::Running;
        s.started_at = Some(now);
        s.visible = true;
    }
    next.due_at = stage_deadline(s).unwrap_or(now);
    next.updated_at = now;
    next
}

/// The result of one step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepOutcome {
    /// Not finished: run the same stage again after this long. Never sleep in a step.
    Continue {
        after: GoDuration,
    },
    Done(StageResult),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StageResult {
    Success,
    Failure {
        reason: String,
    },
    /// The stage succeeded and the deployment has nothing left to do: it ends SUCCESS and its
    /// later stages are skipped (PipeCD's EXITED, such as a plan with no changes).
    Exited {
        reason: String,
    },
}

/// The id of the stage that runs an app's pre-deployment tasks and evaluations (PipeCD's
/// `spec.preDeployment`); the machine treats a failure there as nothing deployed.
pub const PRE_DEPLOYMENT_STAGE_ID: &str = "pre-deployment";

/// The id of the stage that runs an app's post-deployment tasks and evaluations.
pub const POST_DEPLOYMENT_STAGE_ID: &str = "post-deployment";

/// Applies the outcome of one step of stage `index`.
pub fn apply_outcome(
    d: &Deployment,
    index: usize,
    outcome: &StepOutcome,
    now: Millis,
) -> Transition {
    match outcome {
        StepOutcome::Continue { after } => {
            let mut next = d.clone();
            let wake = now.plus(*after);
            let limits = [deadline(d), stage_deadline(&d.stages[index])];
            // Wake no later than just past the nearest deadline, so timeouts are enforced.
            let wake = limits
                .into_iter()
                .flatten()
                .map(|l| Millis(l.0 + 1))
                .fold(wake, Millis::min);
            next.due_at = wake;
            next.updated_at = now;
            next.seq += 1;
            Transition {
                deployment: next,
                next: Next::Step {
                    after: wake.since(now),
                },
            }
        }
        StepOutcome::Done(StageResult::Success) => {
            let mut next = d.clone();
            let s = &mut next.stages[index];
            s.status = StageStatus::Success;
            s.completed_at = Some(now);
            advance(next, now)
        }
        StepOutcome::Done(StageResult::Failure { reason }) => {
            let reason = format!("stage {} failed: {reason}", d.stages[index].id);
            fail_current(d, now, reason)
        }
        StepOutcome::Done(StageResult::Exited { reason }) => exit_early(d, index, reason, now),
    }
}

/// Stage `index` ended the deployment early: it is EXITED, the forward stages after it are
/// SKIPPED, and the deployment ends SUCCESS. A rollback stage that exits is just done.
fn exit_early(d: &Deployment, index: usize, reason: &str, now: Millis) -> Transition {
    let mut next = d.clone();
    let s = &mut next.stages[index];
    s.completed_at = Some(now);
    if s.rollback {
        s.status = StageStatus::Success;
        return advance(next, now);
    }
    s.status = StageStatus::Exited;
    s.status_reason = reason.to_owned();
    let exited_by = s.id.clone();
    for later in next
        .stages
        .iter_mut()
        .filter(|s| !s.rollback && s.status == StageStatus::NotStartedYet)
    {
        later.status = StageStatus::Skipped;
        later.status_reason = format!("stage {exited_by} ended the deployment: {reason}");
        later.completed_at = Some(now);
    }
    finish(
        &mut next,
        DeploymentStatus::Success,
        format!("stage {exited_by} ended the deployment early: {reason}"),
        now,
    );
    Transition {
        deployment: next,
        next: Next::Finished,
    }
}

/// Moves past finished stages: the next stage's step now, or the end of the deployment.
fn advance(mut d: Deployment, now: Millis) -> Transition {
    d.updated_at = now;
    if current_stage(&d).is_some() {
        d.seq += 1;
        d.due_at = now;
        return Transition {
            deployment: d,
            next: Next::Step {
                after: GoDuration::default(),
            },
        };
    }
    let status = final_status(&d);
    let reason = match status {
        DeploymentStatus::Success => "all stages completed".to_owned(),
        _ => d.status_reason.clone(),
    };
    finish(&mut d, status, reason, now);
    Transition {
        deployment: d,
        next: Next::Finished,
    }
}

fn finish(d: &mut Deployment, status: DeploymentStatus, reason: String, now: Millis) {
    d.status = status;
    d.status_reason = reason;
    d.completed_at = Some(now);
    d.updated_at = now;
    d.due_at = now;
    d.seq += 1;
}

/// Ends the current stage with `status` (if one is under way).
fn stop_current(d: &Deployment, now: Millis, status: StageStatus, reason: &str) -> Deployment {
    let mut next = d.clone();
    if let Some(i) = current_stage(d) {
        let s = &mut next.stages[i];
        if s.status == StageStatus::Running || status == StageStatus::Cancelled {
            s.status = status;
            s.status_reason = reason.to_owned();
            s.completed_at = Some(now);
        }
    }
    next
}

/// The current stage failed (or timed out): roll back, or end FAILURE when already rolling
/// back or when there is nothing to roll back with.
fn fail_current(d: &Deployment, now: Millis, reason: String) -> Transition {
    if d.status == DeploymentStatus::RollingBack {
        let mut next = stop_current(d, now, StageStatus::Failure, &reason);
        finish(
            &mut next,
            DeploymentStatus::Failure,
            format!("rollback failed: {reason}"),
            now,
        );
        return Transition {
            deployment: next,
            next: Next::Finished,
        };
    }
    stop_current_and_roll_back(d, now, StageStatus::Failure, reason)
}

fn stop_current_and_roll_back(
    d: &Deployment,
    now: Millis,
    stage_status: StageStatus,
    reason: String,
) -> Transition {
    let mut next = stop_current(d, now, stage_status, &reason);
    next.status_reason = reason.clone();
    // A failed or cancelled pre-deployment phase stops the deployment before any platform
    // stage ran: there is nothing to undo.
    let deployed = next
        .stages
        .iter()
        .any(|s| !s.rollback && s.started_at.is_some() && s.id.as_str() != PRE_DEPLOYMENT_STAGE_ID);
    let has_rollback = next.stages.iter().any(|s| s.rollback);
    if !has_rollback || !deployed {
        let status = if next.cancel.is_some() {
            DeploymentStatus::Cancelled
        } else {
            DeploymentStatus::Failure
        };
        finish(&mut next, status, reason, now);
        return Transition {
            deployment: next,
            next: Next::Finished,
        };
    }
    next.status = DeploymentStatus::RollingBack;
    next.seq += 1;
    next.due_at = now;
    next.updated_at = now;
    for s in next.stages.iter_mut().filter(|s| s.rollback) {
        s.visible = true;
    }
    Transition {
        deployment: next,
        next: Next::Step {
            after: GoDuration::default(),
        },
    }
}

/// Why a deployment was cancelled, naming who cancelled it.
pub fn cancel_reason(by: &str) -> String {
    let who = if by.is_empty() { "an unnamed user" } else { by };
    format!("cancelled by {who}")
}

#[cfg(test)]
mod tests;
