//! Timers: the resume sweep (no non-terminal deployment is ever stranded) and the poll
//! backstop (GitHub never redelivers a failed webhook).

use gannet_domain::deployment::DeploymentStatus;
use gannet_domain::ports::{Changes, DeploymentFilter};
use gannet_events::{Message, TriggerCause};

use crate::{Controller, HandlerError};

/// What one resume sweep re-drove.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resumed {
    pub steps: usize,
    pub plans: usize,
    /// Running chains, each sent a message to move on.
    pub chains: usize,
}

impl Controller {
    /// Re-sends the message that moves each stranded deployment on: a step message for an
    /// active deployment past its due time plus one resume interval, a plan message for an
    /// app with PENDING deployments or a finished lock holder, a chain message for each
    /// running chain. Dedupe keys and the `seq`
    /// check make a needless re-send harmless.
    pub async fn resume(&self) -> Result<Resumed, HandlerError> {
        let inner = &self.inner;
        let now = inner.clock.now();
        let grace = inner.settings.intervals.resume;
        let live = inner
            .store
            .deployments(&DeploymentFilter {
                app: None,
                statuses: vec![
                    DeploymentStatus::Pending,
                    DeploymentStatus::Planned,
                    DeploymentStatus::Running,
                    DeploymentStatus::RollingBack,
                ],
                limit: None,
                before: None,
            })
            .await?;
        let mut changes = Changes::default();
        let mut resumed = Resumed::default();
        let mut plan_apps = Vec::new();
        for d in &live {
            if d.status == DeploymentStatus::Pending {
                plan_apps.push(d.app.clone());
            } else if d.due_at.plus(grace) < now {
                tracing::info!(deployment = %d.id, seq = d.seq, "resuming stranded deployment");
                changes.send.push(
                    Message::Step {
                        deployment: d.id.clone(),
                        seq: d.seq,
                    }
                    .outgoing(),
                );
                resumed.steps += 1;
            }
        }
        for app in inner.store.apps().await? {
            let Some(active) = &app.active_deployment else {
                continue;
            };
            if !live.iter().any(|d| &d.id == active && d.status.is_active()) {
                plan_apps.push(app.id.clone());
            }
        }
        plan_apps.sort();
        plan_apps.dedup();
        resumed.plans = plan_apps.len();
        changes.send.extend(
            plan_apps
                .into_iter()
                .map(|app| Message::Plan { app }.outgoing()),
        );
        let chains = self.running_chains().await?;
        resumed.chains = chains.len();
        changes.send.extend(
            chains
                .into_iter()
                .map(|chain| Message::Chain { chain }.outgoing()),
        );
        if !changes.is_empty() {
            inner.store.apply(changes).await?;
        }
        Ok(resumed)
    }

    /// Queues a trigger for every repository; the trigger handler compares branch heads.
    pub async fn poll(&self) -> Result<(), HandlerError> {
        let send = self
            .inner
            .settings
            .repos
            .iter()
            .map(|r| {
                Message::Trigger {
                    repo: r.id.clone(),
                    cause: TriggerCause::Poll,
                }
                .outgoing()
            })
            .collect();
        self.inner
            .store
            .apply(Changes {
                writes: Vec::new(),
                send,
            })
            .await?;
        Ok(())
    }
}
