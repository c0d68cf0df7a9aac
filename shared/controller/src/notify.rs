//! The notify handler: logs every event and posts it to each configured receiver (as a
//! structured CloudEvent, or as a Slack message for the events worth one, see [`crate::slack`]),
//! puts it on the event bus when there is one (EventBridge on AWS), and, where a
//! [`CommitStatuses`] port is configured, reports the deployment the event is about on its
//! commit. A receiver, the bus or a status report that fails makes the message retry, so each
//! gets every event at least once; CloudEvent receivers and bus consumers drop repeats by the
//! event `id`.
//!
//! The commit status is the deployment's state as the store holds it now, not as the event
//! saw it, so messages delivered late, twice or out of order still leave the right status last.

use gannet_domain::app::{App, AppHealth};
use gannet_domain::deployment::{Deployment, DeploymentStatus, Stage, StageStatus};
use gannet_domain::duration::GoDuration;
use gannet_domain::ports::{CommitState, CommitStatus, CommitStatuses};
use gannet_domain::RepoId;
use gannet_events::{Event, EventKind};

use crate::settings::ReceiverFormat;
use crate::{slack, Controller, HandlerError};

/// An event bus that gets every event as it is (Amazon EventBridge on the AWS runtime).
/// Publishing is at least once: the event's `id` is the same on every try.
#[async_trait::async_trait]
pub trait EventBus: Send + Sync {
    /// The bus, as errors and logs name it.
    fn name(&self) -> &str;
    async fn publish(&self, event: &Event) -> Result<(), gannet_domain::ports::BoxError>;
}

impl Controller {
    pub(crate) async fn notify(&self, event: &Event) -> Result<(), HandlerError> {
        // At INFO only where a receiver gets it (then it is the delivery's record); otherwise
        // at DEBUG, so events do not crowd the log of an installation that sends none.
        let level_info = !self.inner.settings.receivers.is_empty();
        let deployment = event
            .data
            .deployment
            .as_ref()
            .map(|d| d.as_str())
            .unwrap_or("");
        let stage = event.data.stage.as_deref().unwrap_or("");
        if level_info {
            tracing::info!(event = %event.kind, app = %event.data.app_name, id = %event.data.app, deployment, stage, status = %event.data.status, "event");
        } else {
            tracing::debug!(event = %event.kind, app = %event.data.app_name, id = %event.data.app, deployment, stage, status = %event.data.status, "event");
        }
        let kind = EventKind::from_cloud_type(&event.kind);
        // The event's deployment as stored, read once, when a Slack message or the commit
        // status needs it.
        let stored = tokio::sync::OnceCell::new();
        for receiver in &self.inner.settings.receivers {
            let request = self.inner.http.post(receiver.url.expose());
            let request = match receiver.format {
                ReceiverFormat::CloudEvents => request
                    .header("content-type", "application/cloudevents+json")
                    .json(event),
                ReceiverFormat::Slack => {
                    let Some(kind) = kind else { continue };
                    let d = self.stored(&stored, event).await?;
                    let mentions = d.map(|d| d.mentions.as_slice()).unwrap_or_default();
                    match slack::message(kind, event, mentions) {
                        Some(message) => request.json(&message),
                        None => continue,
                    }
                }
            };
            request
                .send()
                .await
                .and_then(reqwest::Response::error_for_status)
                .map_err(|source| HandlerError::Notify {
                    receiver: receiver.name.clone(),
                    // The receiver's URL may hold a secret (a token, a secret path).
                    source: source.without_url(),
                })?;
        }
        if let Some(bus) = &self.inner.bus {
            bus.publish(event)
                .await
                .map_err(|source| HandlerError::EventBus {
                    bus: bus.name().to_owned(),
                    source,
                })?;
        }
        if let Some(statuses) = &self.inner.statuses {
            self.report_status(statuses.as_ref(), event, &stored)
                .await?;
            if matches!(
                kind,
                Some(EventKind::ApplicationSynced | EventKind::ApplicationOutOfSync)
            ) {
                self.report_health(statuses.as_ref(), event).await?;
            }
        }
        Ok(())
    }

    /// Reports the app's health and sync status on the commit it runs, as its own context
    /// (`gannet/<app name>/health`), so a deployment's status on the commit stays what the
    /// deployment did: at each sync-status change, for apps in GitHub repositories.
    async fn report_health(
        &self,
        statuses: &dyn CommitStatuses,
        event: &Event,
    ) -> Result<(), HandlerError> {
        let repo = event.data.app.repo();
        if self
            .inner
            .settings
            .repo(&repo)
            .and_then(|r| r.github.as_ref())
            .is_none()
        {
            return Ok(());
        }
        let Some(app) = self.inner.store.app(&event.data.app).await? else {
            return Ok(());
        };
        let Some(status) = health_status(&app) else {
            return Ok(());
        };
        report(statuses, &repo, &status).await?;
        tracing::debug!(app = %app.name, id = %app.id, state = status.state.as_str(), "health status reported");
        Ok(())
    }

    /// The event's deployment as the store holds it (`None` for app events, or when it is
    /// gone), read the first time it is asked for.
    async fn stored<'a>(
        &self,
        cell: &'a tokio::sync::OnceCell<Option<Deployment>>,
        event: &Event,
    ) -> Result<Option<&'a Deployment>, HandlerError> {
        let d = cell
            .get_or_try_init(|| async {
                match &event.data.deployment {
                    Some(id) => self.inner.store.deployment(id).await,
                    None => Ok(None),
                }
            })
            .await?;
        Ok(d.as_ref())
    }

    /// Reports the deployment's current state on its commit, for apps in GitHub repositories.
    async fn report_status(
        &self,
        statuses: &dyn CommitStatuses,
        event: &Event,
        stored: &tokio::sync::OnceCell<Option<Deployment>>,
    ) -> Result<(), HandlerError> {
        let Some(id) = &event.data.deployment else {
            return Ok(());
        };
        let repo = event.data.app.repo();
        let on_github = self
            .inner
            .settings
            .repo(&repo)
            .is_some_and(|r| r.github.is_some());
        if !on_github {
            return Ok(());
        }
        let Some(deployment) = self.stored(stored, event).await? else {
            tracing::debug!(deployment = %id, "no such deployment, no commit status");
            return Ok(());
        };
        let status = commit_status(deployment);
        report(statuses, &repo, &status).await?;
        tracing::debug!(deployment = %id, state = status.state.as_str(), "commit status reported");
        Ok(())
    }
}

/// Sets `status` on its commit of `repo`; a failure retries the event.
async fn report(
    statuses: &dyn CommitStatuses,
    repo: &RepoId,
    status: &CommitStatus,
) -> Result<(), HandlerError> {
    statuses
        .report(repo, status)
        .await
        .map_err(|source| HandlerError::CommitStatus {
            repo: repo.clone(),
            source,
        })
}

/// The status that reports `app`'s health on the commit it runs (none before its first
/// deployment): HEALTHY is success, DEGRADED and MISSING failure, the rest pending; the
/// description adds the sync status and why.
pub(crate) fn health_status(app: &App) -> Option<CommitStatus> {
    let commit = app.running_commit.clone()?;
    let health = app.health();
    let state = match health {
        AppHealth::Healthy => CommitState::Success,
        AppHealth::Degraded | AppHealth::Missing => CommitState::Failure,
        AppHealth::Progressing | AppHealth::Unknown => CommitState::Pending,
    };
    let mut description = format!("{} · {}", health.as_str(), app.sync_status.as_str());
    if !app.sync_reason.is_empty() {
        description.push_str(": ");
        description.push_str(&first_line(&app.sync_reason));
    }
    Some(CommitStatus {
        commit,
        context: format!("gannet/{}/health", app.name),
        state,
        description,
        target_url: None,
    })
}

/// The commit status that reports `d` as it stands: context `gannet/<app name>`, and a one-line
/// summary of its stages.
pub(crate) fn commit_status(d: &Deployment) -> CommitStatus {
    let state = match d.status {
        DeploymentStatus::Pending
        | DeploymentStatus::Planned
        | DeploymentStatus::Running
        | DeploymentStatus::RollingBack => CommitState::Pending,
        DeploymentStatus::Success => CommitState::Success,
        DeploymentStatus::Failure | DeploymentStatus::Cancelled => CommitState::Failure,
    };
    CommitStatus {
        commit: d.commit.sha.clone(),
        context: format!("gannet/{}", d.app_name),
        state,
        description: summary(d),
        target_url: None,
    }
}

/// `3/5 stages · LAMBDA_PROMOTE running`, `SUCCESS · 5 stages in 2m10s`,
/// `FAILURE at LAMBDA_PROMOTE: <reason> · rolled back`, ...
fn summary(d: &Deployment) -> String {
    let forward: Vec<&Stage> = d.stages.iter().filter(|s| !s.rollback).collect();
    let total = forward.len();
    let stages = if total == 1 { "stage" } else { "stages" };
    let done = forward
        .iter()
        .filter(|s| matches!(s.status, StageStatus::Success | StageStatus::Skipped))
        .count();
    let failed = forward
        .iter()
        .copied()
        .find(|s| matches!(s.status, StageStatus::Failure));
    let why = |stage: Option<&Stage>| {
        let reason = stage
            .map(|s| s.status_reason.as_str())
            .filter(|r| !r.is_empty())
            .unwrap_or(&d.status_reason);
        first_line(reason)
    };
    match d.status {
        DeploymentStatus::Pending => match &d.blocked_by {
            Some(holder) => format!("PENDING · waiting for {holder}"),
            None => "PENDING · waiting to be planned".to_owned(),
        },
        DeploymentStatus::Planned => format!("PLANNED · {total} {stages}"),
        DeploymentStatus::Running => {
            match forward.iter().find(|s| s.status == StageStatus::Running) {
                Some(s) => format!("{done}/{total} {stages} · {} running", s.name),
                None => format!("{done}/{total} {stages} done"),
            }
        }
        DeploymentStatus::RollingBack => match failed {
            Some(s) => format!("ROLLING_BACK after {} failed: {}", s.name, why(Some(s))),
            None => format!("ROLLING_BACK: {}", why(None)),
        },
        DeploymentStatus::Success => {
            let started = d.planned_at.unwrap_or(d.created_at);
            let took = d.completed_at.map(|end| rounded(end.since(started)));
            match took {
                Some(took) => format!("SUCCESS · {total} {stages} in {took}"),
                None => format!("SUCCESS · {total} {stages}"),
            }
        }
        DeploymentStatus::Failure => {
            let head = match failed {
                Some(s) => format!("FAILURE at {}: {}", s.name, why(Some(s))),
                None => format!("FAILURE: {}", why(None)),
            };
            head + rollback(d)
        }
        DeploymentStatus::Cancelled => {
            let head = match &d.cancel {
                Some(c) if !c.by.is_empty() => format!("CANCELLED by {}", c.by),
                _ => format!("CANCELLED: {}", why(None)),
            };
            head + rollback(d)
        }
    }
}

/// How the rollback went, if one ran: ` · rolled back`, ` · rollback failed`.
fn rollback(d: &Deployment) -> &'static str {
    let ran: Vec<StageStatus> = d
        .stages
        .iter()
        .filter(|s| s.rollback && s.status != StageStatus::NotStartedYet)
        .map(|s| s.status)
        .collect();
    if ran.is_empty() {
        ""
    } else if ran.iter().any(|s| !s.is_finished()) {
        " · rolling back"
    } else if ran
        .iter()
        .all(|s| matches!(s, StageStatus::Success | StageStatus::Skipped))
    {
        " · rolled back"
    } else {
        " · rollback failed"
    }
}

/// A duration to the second (`2m10s`), or in milliseconds under one second.
fn rounded(d: GoDuration) -> GoDuration {
    let ms = d.as_millis();
    if ms < 1000 {
        d
    } else {
        GoDuration::from_secs(ms / 1000)
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or("").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex};

    use async_trait::async_trait;
    use gannet_domain::app::RepoState;
    use gannet_domain::deployment::{CancelMode, CancelRequest};
    use gannet_domain::duration::Millis;
    use gannet_domain::ids::{AppId, CommitSha, DeploymentId, RepoId, StageId};
    use gannet_domain::ports::{
        BoxError, Changes, Clock, CommitInfo, DeploymentFilter, GitError, GitSource, LogLine,
        QueueName, Receipt, Received, Store, StoreError,
    };
    use gannet_events::{EventKind, Message};
    use gannet_sdk::plugin::Plugins;

    use super::*;
    use crate::{Disposition, RepoSettings, Settings, Supersede};

    /// A store holding deployments only: the notify handler reads nothing else.
    #[derive(Default)]
    struct Deployments(Mutex<HashMap<DeploymentId, Deployment>>);

    #[async_trait]
    impl Store for Deployments {
        async fn apply(&self, _: Changes) -> Result<(), StoreError> {
            unreachable!("notify writes nothing")
        }
        async fn app(&self, _: &AppId) -> Result<Option<App>, StoreError> {
            Ok(None)
        }
        async fn apps(&self) -> Result<Vec<App>, StoreError> {
            Ok(Vec::new())
        }
        async fn repo(&self, _: &RepoId) -> Result<Option<RepoState>, StoreError> {
            Ok(None)
        }
        async fn deployment(&self, id: &DeploymentId) -> Result<Option<Deployment>, StoreError> {
            Ok(self.0.lock().unwrap().get(id).cloned())
        }
        async fn deployments(&self, _: &DeploymentFilter) -> Result<Vec<Deployment>, StoreError> {
            Ok(self.0.lock().unwrap().values().cloned().collect())
        }
        async fn chain(
            &self,
            _: &gannet_domain::ChainId,
        ) -> Result<Option<gannet_domain::chain::Chain>, StoreError> {
            Ok(None)
        }
        async fn chains(
            &self,
            _: &gannet_domain::ports::ChainFilter,
        ) -> Result<Vec<gannet_domain::chain::Chain>, StoreError> {
            Ok(Vec::new())
        }
        async fn preview(
            &self,
            _: &gannet_domain::PreviewId,
        ) -> Result<Option<gannet_domain::preview::Preview>, StoreError> {
            Ok(None)
        }
        async fn previews(
            &self,
            _: &gannet_domain::ports::PreviewFilter,
        ) -> Result<Vec<gannet_domain::preview::Preview>, StoreError> {
            Ok(Vec::new())
        }
        async fn append_log(
            &self,
            _: &DeploymentId,
            _: &StageId,
            _: Millis,
            _: &[String],
        ) -> Result<(), StoreError> {
            Ok(())
        }
        async fn logs(
            &self,
            _: &DeploymentId,
            _: &StageId,
            _: u64,
            _: usize,
        ) -> Result<Vec<LogLine>, StoreError> {
            Ok(Vec::new())
        }
    }

    /// No repository: the notify handler reads no git.
    struct NoGit;

    #[async_trait]
    impl GitSource for NoGit {
        async fn head(&self, repo: &RepoId, _: &str) -> Result<CommitInfo, GitError> {
            Err(GitError::UnknownRepo(repo.clone()))
        }
        async fn commit(&self, repo: &RepoId, _: &CommitSha) -> Result<CommitInfo, GitError> {
            Err(GitError::UnknownRepo(repo.clone()))
        }
        async fn changed_files(
            &self,
            repo: &RepoId,
            _: &CommitSha,
            _: &CommitSha,
        ) -> Result<Vec<String>, GitError> {
            Err(GitError::UnknownRepo(repo.clone()))
        }
        async fn list_files(&self, repo: &RepoId, _: &CommitSha) -> Result<Vec<String>, GitError> {
            Err(GitError::UnknownRepo(repo.clone()))
        }
        async fn read_file(
            &self,
            repo: &RepoId,
            _: &CommitSha,
            _: &str,
        ) -> Result<Option<Vec<u8>>, GitError> {
            Err(GitError::UnknownRepo(repo.clone()))
        }
        async fn checkout(&self, repo: &RepoId, _: &CommitSha) -> Result<PathBuf, GitError> {
            Err(GitError::UnknownRepo(repo.clone()))
        }
        async fn is_ancestor(
            &self,
            repo: &RepoId,
            _: &CommitSha,
            _: &CommitSha,
        ) -> Result<bool, GitError> {
            Err(GitError::UnknownRepo(repo.clone()))
        }
        async fn pull_request(
            &self,
            repo: &RepoId,
            _: &str,
            _: Option<u64>,
            _: &CommitSha,
        ) -> Result<gannet_domain::ports::PullRequestCommits, GitError> {
            Err(GitError::UnknownRepo(repo.clone()))
        }
        async fn commits_ahead(
            &self,
            repo: &RepoId,
            _: &CommitSha,
            _: &CommitSha,
        ) -> Result<u64, GitError> {
            Err(GitError::UnknownRepo(repo.clone()))
        }
    }

    struct Fixed;

    impl Clock for Fixed {
        fn now(&self) -> Millis {
            Millis(500_000)
        }
    }

    /// Records every report; fails them all while `failing` is set.
    #[derive(Default)]
    struct Recording {
        reports: Mutex<Vec<(RepoId, CommitStatus)>>,
        failing: Mutex<bool>,
    }

    #[async_trait]
    impl CommitStatuses for Recording {
        async fn report(&self, repo: &RepoId, status: &CommitStatus) -> Result<(), BoxError> {
            if *self.failing.lock().unwrap() {
                return Err("GitHub answered 502".into());
            }
            self.reports
                .lock()
                .unwrap()
                .push((repo.clone(), status.clone()));
            Ok(())
        }
    }

    fn stage(id: &str, name: &str, status: StageStatus, reason: &str) -> Stage {
        let mut s = Stage::test(id, name);
        s.status = status;
        s.status_reason = reason.into();
        s
    }

    fn rollback(of: &str, status: StageStatus) -> Stage {
        let mut s = Stage::test_rollback(of, "LAMBDA_ROLLBACK");
        s.status = status;
        s
    }

    /// Five stages: the first `done` succeeded, the next has `next`, the rest have not started,
    /// and a rollback stage in `rolled`.
    fn five(done: usize, next: StageStatus, rolled: StageStatus) -> Vec<Stage> {
        let names = [
            "LAMBDA_SYNC",
            "WAIT",
            "LAMBDA_CANARY_ROLLOUT",
            "LAMBDA_PROMOTE",
            "SCRIPT_RUN",
        ];
        let mut stages: Vec<Stage> = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let status = match i.cmp(&done) {
                    std::cmp::Ordering::Less => StageStatus::Success,
                    std::cmp::Ordering::Equal => next,
                    std::cmp::Ordering::Greater => StageStatus::NotStartedYet,
                };
                let reason = if status == StageStatus::Failure {
                    "alias Service not found\nmore detail"
                } else {
                    ""
                };
                stage(&format!("s{i}"), name, status, reason)
            })
            .collect();
        stages.push(rollback("s0", rolled));
        stages
    }

    fn deployment(status: DeploymentStatus, stages: Vec<Stage>) -> Deployment {
        let mut d = Deployment::test().with_status(status).with_stages(stages);
        d.app_name = "web".into();
        d
    }

    fn check(d: Deployment, state: CommitState, description: &str) {
        let got = commit_status(&d);
        assert_eq!(got.commit, d.commit.sha);
        assert_eq!(got.context, "gannet/web");
        assert_eq!(
            (got.state, got.description.as_str()),
            (state, description),
            "{:?}",
            d.status
        );
    }

    #[test]
    fn states_and_summaries() {
        use CommitState::{Failure, Pending, Success};
        use DeploymentStatus as D;
        use StageStatus as S;
        let idle = S::NotStartedYet;
        check(
            deployment(D::Pending, Vec::new()),
            Pending,
            "PENDING · waiting to be planned",
        );
        let mut blocked = deployment(D::Pending, Vec::new());
        blocked.blocked_by = Some(DeploymentId::parse("d-older").unwrap());
        check(blocked, Pending, "PENDING · waiting for d-older");
        check(
            deployment(D::Planned, five(0, idle, idle)),
            Pending,
            "PLANNED · 5 stages",
        );
        check(
            deployment(D::Running, five(3, S::Running, idle)),
            Pending,
            "3/5 stages · LAMBDA_PROMOTE running",
        );
        check(
            deployment(D::RollingBack, five(3, S::Failure, S::Running)),
            Pending,
            "ROLLING_BACK after LAMBDA_PROMOTE failed: alias Service not found",
        );
        let mut done = deployment(D::Success, five(5, idle, idle));
        done.completed_at = Some(Millis(1000 + 130_400));
        check(done, Success, "SUCCESS · 5 stages in 2m10s");
        let mut quick = deployment(D::Success, vec![stage("s0", "LAMBDA_SYNC", S::Success, "")]);
        quick.completed_at = Some(Millis(1000 + 250));
        check(quick, Success, "SUCCESS · 1 stage in 250ms");
        check(
            deployment(D::Failure, five(3, S::Failure, S::Success)),
            Failure,
            "FAILURE at LAMBDA_PROMOTE: alias Service not found · rolled back",
        );
        check(
            deployment(D::Failure, five(3, S::Failure, S::Failure)),
            Failure,
            "FAILURE at LAMBDA_PROMOTE: alias Service not found · rollback failed",
        );
        let mut timed_out = deployment(D::Failure, five(1, S::Success, idle));
        timed_out.status_reason = "deployment timed out after 6h".into();
        check(timed_out, Failure, "FAILURE: deployment timed out after 6h");
        let mut cancelled = deployment(D::Cancelled, five(2, S::Cancelled, idle));
        cancelled.cancel = Some(CancelRequest {
            mode: CancelMode::WithoutRollback,
            by: "alice".into(),
            at: Millis(2000),
        });
        check(cancelled, Failure, "CANCELLED by alice");
        let mut superseded = deployment(D::Cancelled, Vec::new());
        superseded.status_reason = "superseded by d-newer".into();
        check(superseded, Failure, "CANCELLED: superseded by d-newer");
    }

    #[test]
    fn an_apps_health_is_reported_on_the_commit_it_runs_as_its_own_context() {
        use gannet_domain::app::SyncStatus;
        use gannet_domain::drift::{Health, LiveResource};
        let mut app = App::new(
            AppId::parse("demo:apps/web/app.pipecd.yaml").unwrap(),
            "web".into(),
            "LambdaApp".into(),
            Millis(1),
        );
        assert_eq!(health_status(&app), None, "nothing runs yet");
        app.running_commit = Some(CommitSha::parse(&"c".repeat(40)).unwrap());
        app.sync_status = SyncStatus::Synced;
        let resource = |health| LiveResource {
            kind: "LambdaAlias".into(),
            id: "web".into(),
            health,
            summary: String::new(),
        };
        app.live = vec![resource(Health::Healthy)];
        let status = health_status(&app).unwrap();
        assert_eq!(status.context, "gannet/web/health");
        assert_eq!(status.commit, app.running_commit.clone().unwrap());
        assert_eq!(
            (status.state, status.description.as_str()),
            (CommitState::Success, "HEALTHY · SYNCED")
        );
        app.live = vec![resource(Health::Unhealthy)];
        app.sync_status = SyncStatus::OutOfSync;
        app.sync_reason = "1 field differs from Git: memorySize\nmore".into();
        let status = health_status(&app).unwrap();
        assert_eq!(
            (status.state, status.description.as_str()),
            (
                CommitState::Failure,
                "DEGRADED · OUT_OF_SYNC: 1 field differs from Git: memorySize"
            )
        );
    }

    struct Harness {
        controller: Controller,
        store: Arc<Deployments>,
        statuses: Arc<Recording>,
    }

    fn harness(github: Option<&str>, with_statuses: bool) -> Harness {
        let store = Arc::new(Deployments::default());
        let statuses = Arc::new(Recording::default());
        let settings = Settings {
            repos: vec![RepoSettings {
                id: RepoId::parse("demo").unwrap(),
                branch: "main".into(),
                github: github.map(Into::into),
                url: None,
                supersede: Supersede::Never,
                on_first_sight: crate::FirstSight::default(),
                plan_preview: Default::default(),
            }],
            ..Settings::default()
        };
        let mut controller = Controller::new(
            store.clone(),
            Arc::new(NoGit),
            Arc::new(Fixed),
            Plugins::default(),
            settings,
        );
        if with_statuses {
            controller = controller.with_commit_statuses(statuses.clone());
        }
        Harness {
            controller,
            store,
            statuses,
        }
    }

    impl Harness {
        fn store(&self, d: &Deployment) {
            self.store.0.lock().unwrap().insert(d.id.clone(), d.clone());
        }

        /// Delivers a notify message for `kind` about `d` as the event saw it.
        async fn deliver(&self, kind: EventKind, d: &Deployment) -> Disposition {
            let event = Event::deployment(kind, d, None, Millis(1000));
            self.deliver_event(event).await
        }

        async fn deliver_event(&self, event: Event) -> Disposition {
            let message = Message::Notify {
                event: Box::new(event),
            };
            let received = Received {
                receipt: Receipt("r1".into()),
                queue: QueueName::Notify,
                body: message.encode(),
                attempts: 1,
            };
            self.controller.handle(&received).await
        }

        fn reported(&self) -> Vec<(String, CommitState, String)> {
            let reports = self.statuses.reports.lock().unwrap();
            reports
                .iter()
                .map(|(repo, s)| (repo.to_string(), s.state, s.description.clone()))
                .collect()
        }
    }

    #[tokio::test]
    async fn late_and_repeated_events_report_the_stored_state() {
        let h = harness(Some("acme/demo"), true);
        let running = deployment(
            DeploymentStatus::Running,
            five(1, StageStatus::Running, StageStatus::NotStartedYet),
        );
        let mut finished = running.clone().with_status(DeploymentStatus::Success);
        finished.stages = five(5, StageStatus::NotStartedYet, StageStatus::NotStartedYet);
        finished.completed_at = Some(Millis(61_000));
        h.store(&running);
        assert_eq!(
            h.deliver(EventKind::DeploymentStarted, &running).await,
            Disposition::Ack
        );
        h.store(&finished);
        // The success event, then the started event delivered late, then the success again.
        for (kind, seen) in [
            (EventKind::DeploymentSucceeded, &finished),
            (EventKind::DeploymentStarted, &running),
            (EventKind::DeploymentSucceeded, &finished),
        ] {
            assert_eq!(h.deliver(kind, seen).await, Disposition::Ack);
        }
        let success = (
            "demo".to_owned(),
            CommitState::Success,
            "SUCCESS · 5 stages in 1m".to_owned(),
        );
        assert_eq!(
            h.reported(),
            [
                (
                    "demo".to_owned(),
                    CommitState::Pending,
                    "1/5 stages · WAIT running".to_owned()
                ),
                success.clone(),
                success.clone(),
                success,
            ]
        );
        let (_, status) = h.statuses.reports.lock().unwrap()[0].clone();
        assert_eq!(status.context, "gannet/web");
        assert_eq!(status.commit, running.commit.sha);
    }

    #[tokio::test]
    async fn a_failed_report_retries_the_message() {
        let h = harness(Some("acme/demo"), true);
        let d = deployment(
            DeploymentStatus::Planned,
            five(0, StageStatus::NotStartedYet, StageStatus::NotStartedYet),
        );
        h.store(&d);
        *h.statuses.failing.lock().unwrap() = true;
        match h.deliver(EventKind::DeploymentPlanned, &d).await {
            Disposition::Retry { reason, .. } => assert!(
                reason.contains("commit status on") && reason.ends_with("GitHub answered 502"),
                "{reason}"
            ),
            other => panic!("expected a retry, got {other:?}"),
        }
        *h.statuses.failing.lock().unwrap() = false;
        assert_eq!(
            h.deliver(EventKind::DeploymentPlanned, &d).await,
            Disposition::Ack
        );
        assert_eq!(h.reported().len(), 1);
    }

    #[tokio::test]
    async fn only_known_deployments_in_github_repositories_are_reported() {
        let d = deployment(DeploymentStatus::Planned, Vec::new());
        // not a GitHub repository
        let h = harness(None, true);
        h.store(&d);
        assert_eq!(
            h.deliver(EventKind::DeploymentPlanned, &d).await,
            Disposition::Ack
        );
        assert!(h.reported().is_empty());
        // no commit statuses configured
        let h = harness(Some("acme/demo"), false);
        h.store(&d);
        assert_eq!(
            h.deliver(EventKind::DeploymentPlanned, &d).await,
            Disposition::Ack
        );
        assert!(h.statuses.reports.lock().unwrap().is_empty());
        // a deployment the store does not hold
        let h = harness(Some("acme/demo"), true);
        assert_eq!(
            h.deliver(EventKind::DeploymentPlanned, &d).await,
            Disposition::Ack
        );
        assert!(h.reported().is_empty());
        // an event about an app, not a deployment
        let app = App::new(
            d.app.clone(),
            "web".into(),
            "LambdaApp".into(),
            Millis(1000),
        );
        let event = Event::application(EventKind::ApplicationSynced, &app, Millis(1000));
        assert_eq!(h.deliver_event(event).await, Disposition::Ack);
        assert!(h.reported().is_empty());
    }
}
