//! The stage handler and the invocation's deadline, over a real SQLite store and a real git
//! repository, with a plugin whose step would take a minute (a slow platform call).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use gannet_domain::deployment::StageStatus;
use gannet_domain::ports::{Queue, QueueName, Received, Store};
use gannet_domain::RepoId;
use gannet_embedded::{RuntimeOptions, SqliteRuntime, SystemClock};
use gannet_git::{LocalGit, Location, RepoSpec};
use gannet_sdk::plugin::{
    Faces, Plugin, Plugins, Presenter, StageConfigError, StageResult, StepContext, Steps,
};

use gannet_events::Event;

use super::*;
use crate::test_support::git;
use crate::{Disposition, RepoSettings, Settings};

/// A stage whose step takes `delay` (a minute: a slow platform call).
struct Slow {
    calls: AtomicUsize,
    delay: Duration,
}

impl Plugin for Slow {
    fn name(&self) -> &'static str {
        "slow"
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &["SLOW"]
    }

    fn validate_stage(
        &self,
        _name: &str,
        with: &serde_json::Value,
    ) -> Result<serde_json::Value, StageConfigError> {
        Ok(with.clone())
    }
}

impl Presenter for Slow {}

#[async_trait]
impl Steps for Slow {
    async fn execute_step(&self, _ctx: StepContext<'_>) -> Result<StepOutcome, StepError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        tracing::info!("slow step");
        tokio::time::sleep(self.delay).await;
        Ok(StepOutcome::Done(StageResult::Success))
    }
}

struct Lab {
    controller: Controller,
    store: SqliteRuntime,
    slow: Arc<Slow>,
    _repo: tempfile::TempDir,
    _cache: tempfile::TempDir,
}

impl Lab {
    async fn new() -> Self {
        Self::with_delay(Duration::from_secs(60)).await
    }

    async fn with_delay(delay: Duration) -> Self {
        let repo = tempfile::tempdir().expect("tempdir");
        git(repo.path(), &["init", "-q", "-b", "main"]);
        let app = repo.path().join("app");
        std::fs::create_dir(&app).expect("app dir");
        std::fs::write(
            app.join("app.pipecd.yaml"),
            "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: web\n  pipeline:\n    stages:\n      - name: SLOW\n",
        )
        .expect("config");
        git(repo.path(), &["add", "-A"]);
        git(repo.path(), &["commit", "-q", "-m", "add web"]);
        let cache = tempfile::tempdir().expect("tempdir");
        let id = RepoId::parse("demo").expect("repo id");
        let source = LocalGit::new(
            cache.path(),
            vec![RepoSpec {
                id: id.clone(),
                location: Location::Path(repo.path().to_owned()),
                branch: "main".into(),
            }],
        )
        .expect("local git");
        let clock = Arc::new(SystemClock);
        let store = SqliteRuntime::open_in_memory(clock.clone(), RuntimeOptions::default())
            .expect("sqlite");
        let slow = Arc::new(Slow {
            calls: AtomicUsize::new(0),
            delay,
        });
        let settings = Settings {
            repos: vec![RepoSettings {
                id,
                branch: "main".into(),
                github: None,
                url: None,
                supersede: crate::Supersede::Never,
                on_first_sight: crate::FirstSight::Deploy,
                plan_preview: Default::default(),
            }],
            ..Settings::default()
        };
        let controller = Controller::new(
            Arc::new(store.clone()),
            Arc::new(source),
            clock,
            Plugins::new(vec![Faces::stages(slow.clone())]),
            settings,
        );
        Self {
            controller,
            store,
            slow,
            _repo: repo,
            _cache: cache,
        }
    }

    /// Handles trigger and plan messages until a step message waits; returns it.
    async fn first_step(&self) -> Received {
        self.controller.poll().await.expect("poll");
        for _ in 0..20 {
            for queue in [QueueName::Trigger, QueueName::Plan] {
                for m in self.receive(queue).await {
                    self.controller.handle(&m).await;
                    self.store.ack(&m.receipt).await.expect("ack");
                }
            }
            if let Some(step) = self.receive(QueueName::Stage).await.pop() {
                return step;
            }
        }
        panic!("no step message after the trigger and the plan");
    }

    async fn receive(&self, queue: QueueName) -> Vec<Received> {
        self.store
            .receive(queue, 10, GoDuration::from_secs(120))
            .await
            .expect("receive")
    }

    /// The next step message (a Continue sends it at once).
    async fn next_step(&self) -> Received {
        let mut got = self.receive(QueueName::Stage).await;
        assert_eq!(got.len(), 1, "one step message follows: {got:?}");
        got.remove(0)
    }

    async fn stage_status(&self) -> (StageStatus, u64) {
        let d = self
            .store
            .deployments(&Default::default())
            .await
            .expect("deployments")
            .remove(0);
        (d.stages[0].status, d.seq)
    }
}

fn seq_of(m: &Received) -> u64 {
    match Message::decode(&m.body).expect("a message") {
        Message::Step { seq, .. } => seq,
        other => panic!("not a step: {other:?}"),
    }
}

#[tokio::test]
async fn a_step_too_close_to_the_deadline_waits_for_the_next_invocation() {
    let lab = Lab::new().await;
    let step = lab.first_step().await;
    let began = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(3);
    let disposition = lab.controller.handle_by(&step, Some(deadline.into())).await;
    assert_eq!(disposition, Disposition::Ack);
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(
        lab.slow.calls.load(Ordering::SeqCst),
        0,
        "the step was not started"
    );
    let next = lab.next_step().await;
    assert_eq!(seq_of(&next), seq_of(&step) + 1);
    assert_eq!(
        lab.stage_status().await.0,
        StageStatus::NotStartedYet,
        "nothing started: the next invocation starts the stage"
    );
}

#[tokio::test]
async fn a_step_running_into_the_deadline_is_cut_short_and_goes_on_in_the_next_invocation() {
    let lab = Lab::new().await;
    let step = lab.first_step().await;
    let began = Instant::now();
    // 11 s left: the step may run 11 - 5 = 6 s, then the outcome is stored.
    let deadline = Instant::now() + Duration::from_secs(11);
    let disposition = lab.controller.handle_by(&step, Some(deadline.into())).await;
    let took = began.elapsed();
    assert_eq!(disposition, Disposition::Ack);
    assert!(
        took >= Duration::from_secs(5) && took < deadline - began,
        "the step ended {took:?} in; the invocation had 11 s and keeps 5 for itself"
    );
    assert_eq!(lab.slow.calls.load(Ordering::SeqCst), 1);
    let (status, seq) = lab.stage_status().await;
    assert_eq!(status, StageStatus::Running, "the stage goes on");
    let next = lab.next_step().await;
    assert_eq!(seq_of(&next), seq);
}

#[tokio::test]
async fn every_step_delivered_twice_still_raises_each_event_once() {
    let lab = Lab::with_delay(Duration::ZERO).await;
    let mut step = Some(lab.first_step().await);
    let mut events: Vec<Event> = Vec::new();
    for _ in 0..20 {
        if let Some(m) = step.take() {
            // The same message twice, as SQS may deliver it: the second is stale.
            lab.controller.handle(&m).await;
            lab.controller.handle(&m).await;
            lab.store.ack(&m.receipt).await.expect("ack");
        }
        for n in lab.receive(QueueName::Notify).await {
            match Message::decode(&n.body).expect("a message") {
                Message::Notify { event } => events.push(*event),
                other => panic!("not a notification: {other:?}"),
            }
            lab.store.ack(&n.receipt).await.expect("ack");
        }
        step = lab.receive(QueueName::Stage).await.pop();
        if step.is_none() && lab.stage_status().await.0 == StageStatus::Success {
            break;
        }
    }
    assert_eq!(
        lab.slow.calls.load(Ordering::SeqCst),
        1,
        "the step ran once"
    );
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    for kind in [
        "dev.gannet.deployment.started",
        "dev.gannet.stage.started",
        "dev.gannet.stage.succeeded",
        "dev.gannet.deployment.succeeded",
    ] {
        assert_eq!(
            kinds.iter().filter(|k| **k == kind).count(),
            1,
            "{kind}: {kinds:?}"
        );
    }
    let mut ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), events.len(), "an event id twice: {kinds:?}");
    let stage = events
        .iter()
        .find(|e| e.kind == "dev.gannet.stage.succeeded")
        .expect("stage event");
    assert_eq!(stage.data.stage_name.as_deref(), Some("SLOW"));
    assert_eq!(stage.data.phase.as_deref(), Some("deployment"));
    assert_eq!(stage.data.result, "SUCCESS");
}

/// A log writer that keeps what is written, for the span test.
#[derive(Clone, Default)]
struct Lines(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lines").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_steps_log_lines_carry_the_deployment_app_and_stage_of_its_handler_span() {
    let lab = Lab::with_delay(Duration::ZERO).await;
    let step = lab.first_step().await;
    let Message::Step { deployment, .. } = Message::decode(&step.body).expect("a message") else {
        panic!("not a step");
    };
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_current_span(true)
        .with_writer(move || writer.clone())
        .finish();
    let _default = tracing::subscriber::set_default(subscriber);
    lab.controller.handle(&step).await;
    let text = String::from_utf8(lines.0.lock().expect("lines").clone()).expect("utf-8");
    let line = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("a JSON line"))
        .find(|l| l["fields"]["message"] == "slow step")
        .unwrap_or_else(|| panic!("the step's line: {text}"));
    let span = &line["span"];
    assert_eq!(span["name"], "handle", "{line}");
    assert_eq!(span["queue"], QueueName::Stage.as_str(), "{line}");
    assert_eq!(span["deployment"], deployment.as_str(), "{line}");
    assert_eq!(span["app"], "demo:app/app.pipecd.yaml", "{line}");
    assert_eq!(span["stage"], "stage-0", "{line}");
}
