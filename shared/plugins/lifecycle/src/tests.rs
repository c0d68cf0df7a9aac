//! The phases with real parts: tasks are real scripts run by the embedded job runner, and
//! evaluations real ANALYSIS HTTP checks against a server on loopback. Time is the wall clock.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gannet_config::parse_app_config;
use gannet_domain::deployment::{
    Deployment, Stage, StageStatus, SyncStrategy, Trigger, TriggerKind,
};
use gannet_domain::duration::Millis;
use gannet_domain::fixture::wall_clock as now;
use gannet_embedded::ProcessJobs;
use gannet_plugin_analysis::testkit::health_endpoint;
use gannet_sdk::fixture::RecordingIo;
use gannet_sdk::jobs::JobRunner;
use gannet_sdk::lifecycle;
use gannet_sdk::planner::{self, PlanInput};
use gannet_sdk::plugin::{Plugin, Plugins, StageResult, StepContext, StepOutcome, StopContext};
use gannet_sdk::presentation::Detail;
use gannet_sdk::registry::{Registry, RuntimeInfo};
use serde_json::{json, Value};

use super::*;

/// Every phase here ends within this.
const LIMIT: Duration = Duration::from_secs(30);

/// The plugins a phase runs with: script-run and analysis (no providers; its checks may reach
/// loopback, where the tests' endpoints are), then lifecycle, built by the registry as gannet
/// builds them.
fn plugins() -> Plugins {
    let settings = json!({"analysis": {"http": {"allowPrivateNetworks": ["127.0.0.0/8"]}}});
    let settings = settings.as_object().cloned().unwrap_or_default();
    Registry::new(vec![
        gannet_plugin_script_run::SPEC,
        gannet_plugin_analysis::SPEC,
        SPEC,
    ])
    .build(&settings, "plugins", &RuntimeInfo::default())
    .expect("plugins build")
}

/// Runs one phase stage step by step as the controller would, on the wall clock, keeping
/// what each step saved; optionally each step twice (a redelivered message).
struct Driver {
    plugins: Plugins,
    deployment: Deployment,
    jobs: ProcessJobs,
    app: tempfile::TempDir,
    _jobs_dir: tempfile::TempDir,
    twice: bool,
    logs: Vec<String>,
}

impl Driver {
    fn new(with: Value) -> Self {
        let plugins = plugins();
        let with = plugins
            .for_stage(STAGE_PRE_DEPLOYMENT)
            .expect("lifecycle is built")
            .validate_stage(STAGE_PRE_DEPLOYMENT, &with)
            .expect("valid phase");
        let mut stage = Stage::test("pre-deployment", STAGE_PRE_DEPLOYMENT).running_since(now().0);
        stage.with = with;
        let jobs_dir = tempfile::tempdir().unwrap();
        Self {
            plugins,
            deployment: Deployment::test().with_stages(vec![stage]),
            jobs: ProcessJobs::new(jobs_dir.path().join("jobs")).unwrap(),
            app: tempfile::tempdir().unwrap(),
            _jobs_dir: jobs_dir,
            twice: false,
            logs: Vec::new(),
        }
    }

    fn plugin(&self) -> Faces {
        self.plugins
            .for_stage(STAGE_PRE_DEPLOYMENT)
            .expect("lifecycle")
            .clone()
    }

    fn stage(&self) -> &Stage {
        &self.deployment.stages[0]
    }

    async fn step(&mut self) -> StepOutcome {
        let io = RecordingIo::default();
        let stage = self.stage().clone();
        let outcome = self
            .plugin()
            .steps()
            .expect("whole plugins")
            .execute_step(StepContext {
                deployment: &self.deployment,
                stage: &stage,
                app_dir: self.app.path(),
                running_app_dir: None,
                now: now(),
                io: &io,
                jobs: &self.jobs,
            })
            .await
            .expect("the step answers");
        self.deployment.stages[0].metadata.extend(io.saved());
        self.logs.extend(io.logs());
        outcome
    }

    /// Steps until the phase ends.
    async fn run(&mut self) -> StageResult {
        let start = Instant::now();
        while start.elapsed() < LIMIT {
            let outcome = self.step().await;
            if self.twice {
                self.step().await;
            }
            match outcome {
                StepOutcome::Done(result) => return result,
                StepOutcome::Continue { after } => {
                    tokio::time::sleep(after.get().min(Duration::from_millis(200))).await;
                }
            }
        }
        panic!("the phase did not end in {LIMIT:?}; log:\n{}", self.log());
    }

    fn items(&self) -> Records {
        items(&self.stage().metadata)
    }

    fn item(&self, name: &str) -> ItemRecord {
        self.items()
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no record of {name}: {:?}", self.stage().metadata))
            .1
    }

    fn log(&self) -> String {
        self.logs.join("\n")
    }
}

/// A task that appends a line to `marks` when it starts and ends, taking `secs`.
fn task(name: &str, marks: &Path, secs: u32) -> Value {
    json!({"name": name, "with": {
        "run": format!("echo {name} >> {m}; echo working; sleep {secs}; echo {name} done >> {m}", m = marks.display()),
    }})
}

/// An evaluation checking the endpoint at `addr` every second for `duration`.
fn upstream(addr: std::net::SocketAddr, duration: &str, failure_limit: u32) -> Value {
    json!({"name": "upstream", "with": {"duration": duration, "https": [{
        "url": format!("http://{addr}/health"), "expectedCode": 200, "interval": "1s",
        "failureLimit": failure_limit}]}})
}

#[tokio::test]
async fn two_tasks_and_an_evaluation_run_at_the_same_time_with_each_step_twice() {
    let addr = health_endpoint(Arc::new(Mutex::new(200))).await;
    let marks_dir = tempfile::tempdir().unwrap();
    let marks = marks_dir.path().join("marks");
    let with = json!({
        "tasks": [task("migrate", &marks, 2), task("warm-cache", &marks, 2)],
        "evaluations": [upstream(addr, "3s", 1)],
    });
    let mut d = Driver::new(with);
    d.twice = true;
    assert_eq!(d.run().await, StageResult::Success, "{}", d.log());
    let records = d.items();
    assert_eq!(records.len(), 3, "{records:?}");
    for (name, r) in &records {
        assert_eq!(r.status, ItemStatus::Success, "{name}: {r:?}");
    }
    // At the same time: every item started before any ended.
    let last_start = records.values().map(|r| r.started_at).max().unwrap();
    let first_end = records
        .values()
        .map(|r| r.completed_at.expect("ended"))
        .min()
        .unwrap();
    assert!(
        last_start < first_end,
        "items ran one after another: {records:?}"
    );
    // Each task ran once, though every step was delivered twice.
    let marks = std::fs::read_to_string(&marks).unwrap();
    let mut lines: Vec<&str> = marks.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        ["migrate", "migrate done", "warm-cache", "warm-cache done"]
    );
    // Each item's log lines carry its name.
    let log = d.log();
    assert!(log.contains("[task migrate] working"), "{log}");
    assert!(log.contains("[task warm-cache] working"), "{log}");
    assert!(log.contains("[evaluation upstream] [https[0]] #1"), "{log}");
    assert!(log.contains("[evaluation upstream] succeeded"), "{log}");
    assert!(log.contains("all 3 items succeeded"), "{log}");
    assert_eq!(log.matches("[task migrate] succeeded").count(), 1, "{log}");
}

#[tokio::test]
async fn a_failing_evaluation_fails_the_phase_and_stops_the_tasks() {
    let addr = health_endpoint(Arc::new(Mutex::new(503))).await;
    let marks_dir = tempfile::tempdir().unwrap();
    let marks = marks_dir.path().join("marks");
    let with = json!({
        "tasks": [task("slow", &marks, 60)],
        "evaluations": [upstream(addr, "30s", 0)],
    });
    let mut d = Driver::new(with);
    let started = Instant::now();
    let reason = match d.run().await {
        StageResult::Failure { reason } => reason,
        other => panic!("expected a failure, got {other:?}\n{}", d.log()),
    };
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "it waited for the task"
    );
    assert!(
        reason.starts_with("evaluation upstream failed: https[0]: 1 of 1 measurements failed"),
        "{reason}"
    );
    assert_eq!(d.item("upstream").status, ItemStatus::Failure);
    let slow = d.item("slow");
    assert_eq!(slow.status, ItemStatus::Stopped, "{slow:?}");
    assert_eq!(slow.reason, "evaluation upstream failed");
    // The task's job was killed: it ends, and never wrote its last mark.
    let key = gannet_sdk::jobs::JobKey::parse(
        d.stage()
            .metadata
            .get("item.slow.job")
            .expect("the job's key"),
    )
    .unwrap();
    let poll = d.jobs.poll(&key, "").await.unwrap();
    assert!(poll.end.is_some(), "the task still runs");
    let marks = std::fs::read_to_string(&marks).unwrap();
    assert_eq!(marks.trim(), "slow");
    assert!(d.log().contains("[task slow] stopped"), "{}", d.log());
    // The phase shows its items, then the evaluation as the ANALYSIS plugin shows it.
    let shown = d.plugins.present(d.stage()).details;
    let tables: Vec<(&str, Vec<&str>)> = shown
        .iter()
        .map(|detail| match detail {
            Detail::Table { title, rows, .. } => {
                (title.as_str(), rows.iter().map(|r| r[0].as_str()).collect())
            }
            other => panic!("a phase shows tables, not {other:?}"),
        })
        .collect();
    assert_eq!(
        tables,
        [
            ("Items", vec!["slow", "upstream"]),
            ("Measurements of evaluation upstream", vec!["https[0]"]),
        ]
    );
    let Detail::Table { rows, .. } = &shown[1] else {
        unreachable!()
    };
    assert_eq!(rows[0][1..5], ["#1", "HTTP 503", "HTTP 200", "FAIL"]);
    // A repeated step answers the same failure and starts nothing.
    let again = d.step().await;
    assert_eq!(again, StepOutcome::Done(StageResult::Failure { reason }));
}

#[tokio::test]
async fn a_failing_task_fails_the_phase_with_its_reason_and_a_cancel_stops_the_rest() {
    let marks_dir = tempfile::tempdir().unwrap();
    let marks = marks_dir.path().join("marks");
    let with = json!({"tasks": [
        {"name": "check", "with": {"run": "echo no such table >&2; exit 3"}},
        task("slow", &marks, 60),
    ]});
    let mut d = Driver::new(with);
    let result = d.run().await;
    assert_eq!(
        result,
        StageResult::Failure {
            reason: "task check failed: script exited with code 3".into()
        },
        "{}",
        d.log()
    );
    assert_eq!(d.item("slow").status, ItemStatus::Stopped);

    // A cancel (the controller's stop) kills a running task's job.
    let mut d = Driver::new(json!({"tasks": [task("slow", &marks, 60)]}));
    assert!(matches!(d.step().await, StepOutcome::Continue { .. }));
    let io = RecordingIo::default();
    let stage = d.stage().clone();
    d.plugin()
        .steps()
        .expect("whole plugins")
        .stop(StopContext {
            deployment: &d.deployment,
            stage: &stage,
            io: &io,
            jobs: &d.jobs,
        })
        .await
        .expect("stops");
    let key = gannet_sdk::jobs::JobKey::parse(&stage.metadata["item.slow.job"]).unwrap();
    let poll = d.jobs.poll(&key, "").await.unwrap();
    assert!(poll.end.is_some(), "the cancelled task still runs");
    assert!(io
        .logs()
        .iter()
        .any(|l| l.starts_with("[task slow] stopped the script")));
}

#[test]
fn items_are_validated_by_their_own_plugins_and_errors_name_the_field() {
    let plugins = plugins();
    let p = plugins.for_stage(STAGE_PRE_DEPLOYMENT).unwrap();
    let cases = [
        (
            json!({"tasks": [{"name": "a", "with": {}}]}),
            "tasks[0].with.run",
        ),
        (
            json!({"tasks": [{"name": "a", "with": {"run": "x", "onRollback": "y"}}]}),
            "tasks[0].with.onRollback",
        ),
        (
            json!({"evaluations": [{"name": "e", "with": {"duration": "1m", "https": [{"url": "https://x"}]}}]}),
            "evaluations[0].with.https[0].interval",
        ),
        (
            json!({"evaluations": [{"name": "e", "with": {"duration": "1m", "https": [{"url": "http://169.254.169.254/", "interval": "1m"}]}}]}),
            "evaluations[0].with.https[0].url",
        ),
        (
            json!({"evaluations": [{"name": "e", "with": {"duration": "1m", "logs": [{"provider": "x", "query": "y"}]}}]}),
            "evaluations[0].with.logs[0].interval",
        ),
        (json!({"tasks": [], "jobs": []}), "jobs"),
    ];
    for (with, field) in cases {
        let err = p
            .validate_stage(STAGE_PRE_DEPLOYMENT, &with)
            .expect_err(&with.to_string());
        assert_eq!(err.field, field, "{with}: {err}");
    }
    // Without the plugins it runs, a phase says what is missing.
    let alone = LifecyclePlugin::default();
    let err = alone
        .validate_stage(
            STAGE_PRE_DEPLOYMENT,
            &json!({"tasks": [{"name": "a", "with": {"run": "x"}}]}),
        )
        .unwrap_err();
    assert!(
        err.message
            .contains("no compiled-in plugin runs SCRIPT_RUN"),
        "{err}"
    );
}

/// The planner puts the pre-deployment phase first and the post-deployment phase after the
/// last forward stage, before the hidden rollback stages; the file's errors name its lines.
#[test]
fn the_planner_places_the_phases_around_the_deploying_stages() {
    let app = parse_app_config(
        "app/app.pipecd.yaml",
        "apiVersion: pipecd.dev/v1beta1
kind: Application
spec:
  name: web
  planner:
    alwaysUsePipeline: true
  pipeline:
    stages:
      - name: SCRIPT_RUN
        with:
          run: echo deploy
          onRollback: echo undo
",
    )
    .expect("app config");
    let file = lifecycle::parse(
        "app/app.gannet.yaml",
        "apiVersion: gannet.dev/v1
kind: Lifecycle
spec:
  preDeployment:
    tasks:
      - name: migrate
        run: ./migrate.sh
  postDeployment:
    evaluations:
      - name: smoke
        duration: 1m
        https:
          - url: https://web.example.com/
            interval: 10s
",
    )
    .expect("lifecycle file");
    let plugins = plugins();
    let trigger = Trigger {
        kind: TriggerKind::OnCommit,
        commander: String::new(),
        pushed_by: String::new(),
        strategy: SyncStrategy::Auto,
        gate_skip: None,
    };
    let plan = |file: &lifecycle::Lifecycle| {
        planner::plan(&PlanInput {
            app: &app,
            trigger: &trigger,
            commit_message: "change",
            changed_files: &[],
            running_commit: None,
            plugins: &plugins,
            read: &|_| None,
            lifecycle: Some(file),
            app_dir: None,
            running_app_dir: None,
            config_path: None,
        })
    };
    let planned = plan(&file).expect("plans");
    let stages: Vec<(&str, &str, bool)> = planned
        .stages
        .iter()
        .map(|s| (s.id.as_str(), s.name.as_str(), s.rollback))
        .collect();
    assert_eq!(
        stages,
        [
            ("pre-deployment", "PRE_DEPLOYMENT", false),
            ("stage-0", "SCRIPT_RUN", false),
            ("post-deployment", "POST_DEPLOYMENT", false),
            ("rollback-stage-0", "SCRIPT_RUN_ROLLBACK", true),
        ]
    );
    assert!(
        planned
            .summary
            .ends_with("with the phases of app/app.gannet.yaml"),
        "{}",
        planned.summary
    );
    // An evaluation's own timeout: its duration and time for its last queries.
    assert_eq!(planned.stages[2].timeout.to_string(), "11m");

    let bad = lifecycle::parse(
        "app/app.gannet.yaml",
        "apiVersion: gannet.dev/v1
kind: Lifecycle
spec:
  postDeployment:
    evaluations:
      - name: smoke
        duration: 1m
        https:
          - url: https://web.example.com/
            interval: 2m
",
    )
    .expect("reads");
    let err = plan(&bad).expect_err("the interval is longer than the duration");
    assert!(
        err.to_string()
            .starts_with("app/app.gannet.yaml:10: spec.postDeployment.evaluations[0].https[0].interval: 2m is longer"),
        "{err}"
    );
}

/// An evaluation's PREVIOUS strategy compares with the same item of the previous deployment's
/// phase: through the item's IO, that item is the previous deployment's one stage.
#[tokio::test]
async fn the_previous_deployment_is_seen_as_the_same_items_stage() {
    let with = json!({"evaluations": [{"name": "upstream", "with": {"duration": "1m"}}]});
    let mut phase = Driver::new(with).stage().clone();
    let done = ItemRecord::running(ItemKind::Evaluation, Millis(5_000)).ended(
        ItemStatus::Success,
        String::new(),
        Millis(65_000),
    );
    phase.metadata.extend(record::entries(&Records::from([(
        "upstream".to_owned(),
        done,
    )])));
    phase
        .metadata
        .insert("item.upstream.startedAt".into(), "5000".into());
    let other = Stage::test("sync", "LAMBDA_SYNC");
    let previous = Deployment::test().with_stages(vec![other, phase.clone()]);
    let inner = RecordingIo::with_previous(previous);
    let io = scoped::ScopedIo::new(&inner, ItemKind::Evaluation, "upstream", &phase.id);
    let seen = gannet_sdk::plugin::StepIo::previous_success(&io)
        .await
        .expect("reads")
        .expect("a previous deployment");
    let stages: Vec<(&str, &str, StageStatus)> = seen
        .stages
        .iter()
        .map(|s| (s.id.as_str(), s.name.as_str(), s.status))
        .collect();
    assert_eq!(
        stages,
        [("pre-deployment/upstream", "ANALYSIS", StageStatus::Success)]
    );
    assert_eq!(
        seen.stages[0].metadata.get("startedAt").map(String::as_str),
        Some("5000")
    );
    assert_eq!(seen.stages[0].started_at, Some(Millis(5_000)));
}
