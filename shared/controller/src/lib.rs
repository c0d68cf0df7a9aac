//! gannet's handlers. Each is stateless: it loads what it needs from the store, decides with
//! the core's pure functions, and writes the result and the messages it sends in one
//! [`Changes`](gannet_domain::ports::Changes) set. Every handler is safe to run twice for the
//! same message.

use std::sync::Arc;

use gannet_domain::ports::{Clock, CommitStatuses, GitSource, Store};
use gannet_sdk::jobs::{JobRunner, NoJobs};
use gannet_sdk::plugin::Plugins;
use tracing::Instrument;

use gannet_sdk::sealed::SealingKey;
pub use sealing::Sealing;

mod api;
mod apps;
mod chain;
mod console;
mod diff;
mod drift;
mod error;
pub mod http;
mod notify;
mod plan;
mod preview;
mod resume;
mod sealing;
mod settings;
mod settle;
mod slack;
mod stage;
#[cfg(test)]
mod test_support;
mod trigger;
mod webhook;

pub use api::{ApiError, AppView, DeploymentView, PauseView, StageView, SyncRequest};
pub use apps::RollbackRequest;
pub use chain::{BlockView, ChainView};
pub use console::{routes as console_routes, Console, ConsoleFile};
pub use diff::{answer_diff, diff_from_answer, DiffView, RemoteDiff};
pub use error::{backoff, error_chain, Disposition, HandlerError};
pub use notify::EventBus;
pub use preview::CHECK_NAME;
pub use settings::{
    check_settings, FirstSight, ForkPreviews, IntervalName, Intervals, PreviewSettings, Receiver,
    ReceiverFormat, ReceiverUrl, RepoSettings, Secret, Settings, SettingsError, SettingsField,
    SettingsProblem, Supersede, MIN_INTERVAL,
};
pub use settle::{settle, Removal, Settled};
pub use stage::DEADLINE_MARGIN;
pub use webhook::{WebhookHeaders, WebhookRequest, WebhookResponse, MAX_WEBHOOK_BODY};

use gannet_domain::ports::Received;
use gannet_events::Message;

/// The handlers, with the ports they use. Cheap to clone.
#[derive(Clone)]
pub struct Controller {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    store: Arc<dyn Store>,
    git: Arc<dyn GitSource>,
    clock: Arc<dyn Clock>,
    plugins: Plugins,
    settings: Settings,
    http: reqwest::Client,
    /// Where deployments are reported on their commits (GitHub repositories only).
    statuses: Option<Arc<dyn CommitStatuses>>,
    /// Where stages run long commands ([`gannet_sdk::jobs`]).
    jobs: Arc<dyn JobRunner>,
    /// An event bus that gets every event (Amazon EventBridge on AWS).
    bus: Option<Arc<dyn EventBus>>,
    /// Where `apps diff` reads live state when the plugins here cannot (the AWS api function).
    remote_diff: Option<Arc<dyn RemoteDiff>>,
    /// How many commits a branch head is ahead of a commit, per pair already asked.
    ahead: Arc<std::sync::Mutex<AheadCounts>>,
    /// gannet's key for PipeCD's sealed secrets, and where apps' templates are filled in.
    sealing: Option<Arc<Sealing>>,
    /// The plugins plan previews read with (the deploy targets' `planPreview` credentials).
    previews: gannet_sdk::previews::Previews,
    /// Where plan previews are shown on pull requests (GitHub check runs).
    checks: Option<Arc<dyn gannet_domain::ports::CheckRuns>>,
    /// The console's root URL, which check runs link to.
    console_url: Option<String>,
}

type AheadCounts = std::collections::HashMap<
    (
        gannet_domain::RepoId,
        gannet_domain::CommitSha,
        gannet_domain::CommitSha,
    ),
    u64,
>;

impl Controller {
    pub fn new(
        store: Arc<dyn Store>,
        git: Arc<dyn GitSource>,
        clock: Arc<dyn Clock>,
        plugins: Plugins,
        settings: Settings,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                git,
                clock,
                plugins,
                settings,
                http: reqwest::Client::builder()
                    .timeout(std::time::Duration::from_secs(10))
                    .build()
                    .unwrap_or_default(),
                statuses: None,
                jobs: Arc::new(NoJobs),
                bus: None,
                remote_diff: None,
                ahead: Arc::default(),
                sealing: None,
                previews: Default::default(),
                checks: None,
                console_url: None,
            }),
        }
    }

    /// The same controller, also reporting each deployment's state as a commit status on the
    /// commit it deploys (for repositories with a `github` name).
    pub fn with_commit_statuses(mut self, statuses: Arc<dyn CommitStatuses>) -> Self {
        Arc::make_mut(&mut self.inner).statuses = Some(statuses);
        self
    }

    /// Whether an event reaches anyone here: a receiver, the event bus or commit statuses. When
    /// none is set, the notify handler does nothing with an event but log it at DEBUG, so a
    /// runtime whose one process holds all of these (`gannet up`) may leave the notify queue
    /// out. A runtime whose notify handler runs elsewhere (AWS: the notify function holds the
    /// GitHub credentials) must not ask this of another handler's controller.
    pub fn hears_events(&self) -> bool {
        let inner = &self.inner;
        !inner.settings.receivers.is_empty() || inner.bus.is_some() || inner.statuses.is_some()
    }

    /// The same controller, also publishing every event to `bus`.
    pub fn with_event_bus(mut self, bus: Arc<dyn EventBus>) -> Self {
        Arc::make_mut(&mut self.inner).bus = Some(bus);
        self
    }

    /// The same controller, running stages' long commands on `jobs` (without it, a stage that
    /// needs a job fails saying the runtime has no job runner).
    pub fn with_jobs(mut self, jobs: Arc<dyn JobRunner>) -> Self {
        Arc::make_mut(&mut self.inner).jobs = jobs;
        self
    }

    /// The same controller, filling in apps' templates (`spec.encryption` with `sealing`'s
    /// key, `spec.attachment`) in private copies under `sealing`'s directory.
    pub fn with_sealing(mut self, sealing: Sealing) -> Self {
        Arc::make_mut(&mut self.inner).sealing = Some(Arc::new(sealing));
        self
    }

    /// The public key apps seal secrets for (PKIX PEM), when gannet has a key.
    pub fn sealing_public_key(&self) -> Option<String> {
        let sealing = self.inner.sealing.as_ref()?;
        sealing.key.as_ref().map(SealingKey::public_pem)
    }

    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// True when webhooks can be verified (a webhook secret is configured).
    pub fn accepts_webhooks(&self) -> bool {
        self.inner.settings.webhook_secret.is_some()
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// Handles one received message and says what to do with it.
    pub async fn handle(&self, received: &Received) -> Disposition {
        self.handle_by(received, None).await
    }

    /// [`Controller::handle`] in an invocation that ends at `deadline` (a Lambda function's):
    /// a stage step that cannot finish before it is not started, and one that runs too close
    /// to it is cut short; either way the stage goes on in the next invocation.
    ///
    /// The invocation runs in a `handle` span with the queue and, as they are known, the
    /// deployment, app and stage, so a deployment's lines can be followed in the logs of
    /// either runtime.
    pub async fn handle_by(
        &self,
        received: &Received,
        deadline: Option<tokio::time::Instant>,
    ) -> Disposition {
        let span = tracing::info_span!(
            "handle",
            queue = received.queue.as_str(),
            deployment = tracing::field::Empty,
            app = tracing::field::Empty,
            stage = tracing::field::Empty,
        );
        self.handle_in(received, deadline).instrument(span).await
    }

    async fn handle_in(
        &self,
        received: &Received,
        deadline: Option<tokio::time::Instant>,
    ) -> Disposition {
        let result = match Message::decode(&received.body) {
            Ok(message) => {
                record_subject(&message);
                self.dispatch(message, deadline).await
            }
            Err(err) => Err(HandlerError::from(err)),
        };
        match result {
            Ok(()) => Disposition::Ack,
            Err(err) => {
                let disposition = err.disposition(received.attempts);
                let chain = error_chain(&err);
                match &disposition {
                    Disposition::DeadLetter { .. } => {
                        tracing::error!(queue = received.queue.as_str(), error = %chain, "message dead-lettered")
                    }
                    Disposition::Requeue { .. } => {
                        tracing::debug!(queue = received.queue.as_str(), error = %chain, "conflict, requeued")
                    }
                    _ => {
                        tracing::warn!(queue = received.queue.as_str(), attempts = received.attempts, error = %chain, "handler failed, will retry")
                    }
                }
                disposition
            }
        }
    }

    async fn dispatch(
        &self,
        message: Message,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<(), HandlerError> {
        match message {
            Message::Trigger { repo, cause } => self.trigger(&repo, &cause).await,
            Message::Plan { app } => self.plan(&app).await,
            Message::Step { deployment, seq } => self.step(&deployment, seq, deadline).await,
            Message::Notify { event } => self.notify(&event).await,
            Message::DriftCheck { app, head } => self.drift_check(&app, head.as_ref()).await,
            Message::Preview { preview } => self.preview(&preview).await,
            Message::Chain { chain } => self.advance_chain(&chain).await,
        }
    }
}

/// Records on the current `handle` span what `message` names of a deployment, app and stage;
/// [`Controller::step`] adds the rest once the deployment is read.
fn record_subject(message: &Message) {
    let span = tracing::Span::current();
    match message {
        Message::Trigger { .. } | Message::Chain { .. } | Message::Preview { .. } => {}
        Message::Plan { app } | Message::DriftCheck { app, .. } => {
            span.record("app", app.as_str());
        }
        Message::Step { deployment, .. } => {
            span.record("deployment", deployment.as_str());
        }
        Message::Notify { event } => {
            span.record("app", event.data.app.as_str());
            if let Some(deployment) = &event.data.deployment {
                span.record("deployment", deployment.as_str());
            }
            if let Some(stage) = &event.data.stage {
                span.record("stage", stage.as_str());
            }
        }
    }
}
