//! The stage handler: runs exactly one step of a deployment's current stage per message.
//!
//! A message whose `seq` no longer matches the stored deployment is stale (a duplicate, or
//! overtaken by a cancel or an approval) and is dropped. The stage's start is stored before
//! the plugin runs, without bumping `seq`, so a crash mid-step redelivers the same message
//! and the step resumes; the outcome is stored with the next `seq` and the next message in
//! one atomic set. `Continue{after}` becomes a delayed message; nothing sleeps.

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;
use gannet_domain::deployment::{Deployment, DeploymentStatus, Stage};
use gannet_domain::machine::{self, Action, Next, Transition};
use gannet_domain::ports::{Changes, DeploymentFilter, Expect, Metadata, StoreError, Write};
use gannet_domain::{DeploymentId, GoDuration, StageId};
use gannet_events::{Event, EventKind, Message};
use gannet_sdk::plugin::{StageResult, StepContext, StepError, StepIo, StepOutcome, StopContext};
use tokio::sync::Mutex;
use tokio::time::Instant;

use crate::sealing;
use crate::trigger::notify;
use crate::{error_chain, Controller, HandlerError};

/// What a step leaves of its invocation for storing its outcome and sending what follows.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(5);

impl Controller {
    pub(crate) async fn step(
        &self,
        id: &DeploymentId,
        seq: u64,
        deadline: Option<Instant>,
    ) -> Result<(), HandlerError> {
        let inner = &self.inner;
        let Some(d) = inner.store.deployment(id).await? else {
            tracing::warn!(deployment = %id, "step for an unknown deployment dropped");
            return Ok(());
        };
        tracing::Span::current().record("app", d.app.as_str());
        if d.seq != seq {
            tracing::debug!(deployment = %id, message_seq = seq, stored_seq = d.seq, "stale step dropped");
            return Ok(());
        }
        match machine::next_action(&d, inner.clock.now()) {
            Action::Nothing => Ok(()),
            Action::Transition(t) => {
                self.stop_ended(&d, &t.deployment).await?;
                self.store_transition(&d, *t).await.map(drop)
            }
            Action::Run { index } => self.run_step(d, index, deadline).await,
        }
    }

    async fn run_step(
        &self,
        d: Deployment,
        index: usize,
        deadline: Option<Instant>,
    ) -> Result<(), HandlerError> {
        let inner = &self.inner;
        tracing::Span::current().record("stage", d.stages[index].id.as_str());
        // Too little of the invocation is left to run a step and store its outcome: the next
        // invocation runs it.
        let budget = deadline.map(|at| at.saturating_duration_since(Instant::now()));
        if budget.is_some_and(|left| left < 2 * DEADLINE_MARGIN) {
            tracing::info!(deployment = %d.id, "too close to the invocation's deadline; the step runs in the next one");
            let t = machine::apply_outcome(
                &d,
                index,
                &StepOutcome::Continue {
                    after: GoDuration::default(),
                },
                inner.clock.now(),
            );
            return self.store_transition(&d, t).await.map(drop);
        }
        let now = inner.clock.now();
        let d = if d.stages[index].started_at.is_none() || d.status == DeploymentStatus::Planned {
            let started = machine::start_stage(&d, index, now);
            let mut changes = Changes::default();
            if d.status == DeploymentStatus::Planned {
                changes
                    .send
                    .push(notify(EventKind::DeploymentStarted, &started, now));
            }
            changes
                .send
                .push(stage_event(EventKind::StageStarted, &started, index, now));
            if inner.plugins.approvable(&started.stages[index].name) {
                changes.send.push(stage_event(
                    EventKind::DeploymentWaitApproval,
                    &started,
                    index,
                    now,
                ));
            }
            changes.writes.push(Write::PutDeployment {
                deployment: Box::new(started.clone()),
                expect: Expect::Version(d.seq),
            });
            match inner.store.apply(changes).await {
                Ok(()) => {}
                // Someone moved the deployment on (cancel, duplicate): this message is stale.
                Err(StoreError::Conflict { .. }) => return Ok(()),
                Err(e) => return Err(e.into()),
            }
            let stage = &started.stages[index];
            tracing::info!(deployment = %started.id, stage = %stage.id, name = %stage.name, "stage started");
            started
        } else {
            d
        };
        let stage = d.stages[index].clone();
        let io = StageIo {
            controller: self.clone(),
            current: Mutex::new(d.clone()),
            stage: stage.id.clone(),
        };
        let mut failed = false;
        let budget = budget.map(|left| left - DEADLINE_MARGIN);
        let outcome = match self.execute(&d, &stage, &io, budget).await {
            Ok(outcome) => outcome,
            Err(err @ StepError::Transient { .. }) => {
                io.log(&format!("retrying: {}", error_chain(&err))).await;
                return Err(HandlerError::Step {
                    stage: stage.id.to_string(),
                    source: err,
                });
            }
            Err(err @ StepError::Permanent(_)) => {
                failed = true;
                StepOutcome::Done(StageResult::Failure {
                    reason: err.reason(),
                })
            }
        };
        if let StepOutcome::Done(result) = &outcome {
            let line = match result {
                StageResult::Success => "stage succeeded".to_owned(),
                StageResult::Failure { reason } => format!("stage failed: {reason}"),
                StageResult::Exited { reason } => {
                    format!("stage succeeded and ended the deployment: {reason}")
                }
            };
            io.log(&line).await;
        }
        let latest = io.current.into_inner();
        let t = machine::apply_outcome(&latest, index, &outcome, inner.clock.now());
        let ended = t.deployment.clone();
        let stored = self.store_transition(&latest, t).await?;
        if failed && stored {
            // The plugin did not decide the end: what the stage started may still run. Only
            // once the end is stored: an error of a step that lost a race (its deployment
            // moved on) must not stop the job the winning step follows.
            self.stop_ended(&latest, &ended).await?;
        }
        Ok(())
    }

    /// Runs the plugin for one step, bounded by the stage's and the deployment's deadlines.
    async fn execute(
        &self,
        d: &Deployment,
        stage: &Stage,
        io: &StageIo,
        budget: Option<Duration>,
    ) -> Result<StepOutcome, StepError> {
        let inner = &self.inner;
        let Some(plugin) = inner.plugins.for_stage(&stage.name) else {
            return Err(StepError::permanent(format!(
                "no plugin runs stage {}",
                stage.name
            )));
        };
        // An app's sealed secrets are opened into a private copy of each checkout, which goes
        // when the step ends; the values never reach what the step leaves behind.
        let sealing = inner.sealing.as_ref();
        let checkout = self.app_dir(d, &d.commit.sha).await?;
        let app_dir = match sealing::unseal(sealing, &d.app, checkout.clone()) {
            Ok(dir) => dir,
            // A rollback applies the running commit, whose secrets open below; this commit's
            // that do not (the reason the deployment failed) must not stop it.
            Err(err) if stage.rollback => {
                io.log(&format!(
                    "This commit's sealed secrets are not opened for the rollback: {}",
                    err.reason()
                ))
                .await;
                sealing::AppDir {
                    dir: checkout,
                    unsealed: None,
                }
            }
            Err(err) => return Err(err),
        };
        let running_app_dir = match &d.running_commit {
            Some(sha) => Some(sealing::unseal(
                sealing,
                &d.app,
                self.app_dir(d, sha).await?,
            )?),
            None => None,
        };
        let values: Vec<String> = [Some(&app_dir), running_app_dir.as_ref()]
            .into_iter()
            .flatten()
            .flat_map(|a| a.values().iter().cloned())
            .collect();
        let redacting = sealing::Redacting {
            io,
            values: values.clone(),
        };
        let now = inner.clock.now();
        let ctx = StepContext {
            deployment: d,
            stage,
            app_dir: &app_dir.dir,
            running_app_dir: running_app_dir.as_ref().map(|a| a.dir.as_path()),
            now,
            io: if values.is_empty() { io } else { &redacting },
            jobs: inner.jobs.as_ref(),
        };
        let deadline = [
            d.planned_at.map(|at| at.plus(d.timeout)),
            stage.started_at.map(|at| at.plus(stage.timeout)),
        ]
        .into_iter()
        .flatten()
        .min()
        .map_or(Duration::from_secs(6 * 3600), |limit| {
            limit.since(now).get() + Duration::from_secs(1)
        });
        let deadline = budget.map_or(deadline, |budget| deadline.min(budget));
        let steps = plugin.steps()?;
        match tokio::time::timeout(deadline, steps.execute_step(ctx)).await {
            Ok(Ok(StepOutcome::Done(StageResult::Failure { reason }))) => {
                Ok(StepOutcome::Done(StageResult::Failure {
                    reason: gannet_sdk::sealed::redact(&reason, &values),
                }))
            }
            Ok(result) => result.map_err(|e| sealing::redact_error(e, &values)),
            // A deadline passed mid-step (the stage's, the deployment's or the invocation's):
            // the next step's check ends the stage, or the next invocation goes on with it.
            Err(_) => Ok(StepOutcome::Continue {
                after: GoDuration::default(),
            }),
        }
    }

    /// Lets the plugin of each stage that was running in `before` and has ended in `after`
    /// stop what the stage left running, before that end is stored (a failure to stop that
    /// may pass is retried with the message; one that will not is written to the stage log).
    async fn stop_ended(
        &self,
        before: &Deployment,
        after: &Deployment,
    ) -> Result<(), HandlerError> {
        let ended = before.stages.iter().zip(&after.stages).filter(|(b, a)| {
            b.status == gannet_domain::deployment::StageStatus::Running && a.status.is_finished()
        });
        for (stage, _) in ended {
            let Some(plugin) = self.inner.plugins.for_stage(&stage.name) else {
                continue;
            };
            let io = StageIo {
                controller: self.clone(),
                current: Mutex::new(before.clone()),
                stage: stage.id.clone(),
            };
            let ctx = StopContext {
                deployment: before,
                stage,
                io: &io,
                jobs: self.inner.jobs.as_ref(),
            };
            match async { plugin.steps()?.stop(ctx).await }.await {
                Ok(()) => {}
                Err(err @ StepError::Transient { .. }) => {
                    return Err(HandlerError::Step {
                        stage: stage.id.to_string(),
                        source: err,
                    })
                }
                Err(err) => {
                    io.log(&format!(
                        "could not stop what the stage started: {}",
                        err.reason()
                    ))
                    .await;
                }
            }
        }
        Ok(())
    }

    async fn app_dir(
        &self,
        d: &Deployment,
        sha: &gannet_domain::CommitSha,
    ) -> Result<PathBuf, StepError> {
        let root = self
            .inner
            .git
            .checkout(&d.app.repo(), sha)
            .await
            .map_err(|e| StepError::transient(format!("checkout of {}", sha.short()), e))?;
        Ok(root.join(d.app.dir()))
    }

    /// Stores a transition and sends what follows it; false when it was not stored. A conflict
    /// means the deployment moved on without us (a duplicate or a command); the message is
    /// then stale and dropped.
    async fn store_transition(
        &self,
        stored: &Deployment,
        t: Transition,
    ) -> Result<bool, HandlerError> {
        let now = self.inner.clock.now();
        let next = &t.deployment;
        let mut changes = Changes::default();
        match t.next {
            Next::Step { after } => changes.send.push(
                Message::Step {
                    deployment: next.id.clone(),
                    seq: next.seq,
                }
                .outgoing_after(after),
            ),
            Next::Finished => {
                changes.send.push(
                    Message::Plan {
                        app: next.app.clone(),
                    }
                    .outgoing(),
                );
                tracing::info!(deployment = %next.id, app = %next.app_name, id = %next.app, status = next.status.as_str(), reason = %next.status_reason, "deployment finished");
            }
        }
        if next.status != stored.status {
            if let Some(kind) = EventKind::for_status(next.status) {
                changes.send.push(notify(kind, next, now));
            }
        }
        for (i, (before, after)) in stored.stages.iter().zip(&next.stages).enumerate() {
            if before.status != after.status && after.status.is_finished() {
                let kind = match after.status {
                    gannet_domain::deployment::StageStatus::Success => EventKind::StageSucceeded,
                    gannet_domain::deployment::StageStatus::Failure => EventKind::StageFailed,
                    _ => continue,
                };
                changes.send.push(stage_event(kind, next, i, now));
            }
        }
        crate::chain::on_deployment_change(&mut changes, stored, next, now);
        changes.writes.push(Write::PutDeployment {
            deployment: Box::new(t.deployment),
            expect: Expect::Version(stored.seq),
        });
        match self.inner.store.apply(changes).await {
            Ok(()) => Ok(true),
            Err(StoreError::Conflict { .. }) => {
                tracing::info!(deployment = %stored.id, "deployment changed during the step; outcome dropped");
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }
}

fn stage_event(
    kind: EventKind,
    d: &Deployment,
    index: usize,
    now: gannet_domain::duration::Millis,
) -> gannet_domain::ports::Outgoing {
    Message::Notify {
        event: Box::new(Event::deployment(
            kind,
            d,
            Some(d.stages[index].id.as_str()),
            now,
        )),
    }
    .outgoing()
}

/// The step's window onto gannet's state: stage log lines and metadata, saved at once.
struct StageIo {
    controller: Controller,
    current: Mutex<Deployment>,
    stage: StageId,
}

#[async_trait]
impl StepIo for StageIo {
    async fn log(&self, line: &str) {
        let inner = &self.controller.inner;
        let id = self.current.lock().await.id.clone();
        let lines = [line.to_owned()];
        if let Err(err) = inner
            .store
            .append_log(&id, &self.stage, inner.clock.now(), &lines)
            .await
        {
            tracing::warn!(deployment = %id, stage = %self.stage, error = %error_chain(&err), "stage log line lost");
        }
    }

    async fn save_metadata(&self, entries: Metadata) -> Result<(), StepError> {
        let inner = &self.controller.inner;
        let mut current = self.current.lock().await;
        let mut next = current.clone();
        if let Some(stage) = next.stage_mut(&self.stage) {
            stage.metadata.extend(entries);
        }
        next.updated_at = inner.clock.now();
        let changes = Changes {
            writes: vec![Write::PutDeployment {
                deployment: Box::new(next.clone()),
                expect: Expect::Version(current.seq),
            }],
            send: Vec::new(),
        };
        match inner.store.apply(changes).await {
            Ok(()) => {
                *current = next;
                Ok(())
            }
            Err(StoreError::Conflict { .. }) => Err(StepError::permanent(
                "the deployment changed while this step ran (cancelled?); step abandoned",
            )),
            Err(err) => Err(StepError::transient("saving stage metadata", err)),
        }
    }

    async fn previous_success(&self) -> Result<Option<Deployment>, StepError> {
        let (app, id) = {
            let current = self.current.lock().await;
            (current.app.clone(), current.id.clone())
        };
        let filter = DeploymentFilter {
            app: Some(app),
            statuses: vec![DeploymentStatus::Success],
            limit: Some(2),
            before: None,
        };
        let found = self
            .controller
            .inner
            .store
            .deployments(&filter)
            .await
            .map_err(|e| StepError::transient("reading the last successful deployment", e))?;
        Ok(found.into_iter().find(|d| d.id != id))
    }
}

#[cfg(test)]
mod tests;
