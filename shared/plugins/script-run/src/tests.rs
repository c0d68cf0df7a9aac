//! Tests for SCRIPT_RUN: validation, real scripts run with `sh` through the embedded job
//! runner, timeouts, the environment, output capture and rollback stages.

use std::path::Path;
use std::time::{Duration, Instant};

use gannet_domain::deployment::{Deployment, Stage, StageStatus};
use gannet_domain::duration::Millis;
use gannet_domain::GoDuration;
use gannet_embedded::ProcessJobs;
use gannet_sdk::jobs::{JobRunner, MAX_LINE_BYTES, MAX_LOG_LINES};
use gannet_sdk::plugin::{
    Plugin, StageResult, StepContext, StepError, StepOutcome, Steps, StopContext,
};
use serde_json::{json, Value};

use super::{rollback_stages_for, ScriptRunPlugin};

pub(crate) use gannet_sdk::fixture::RecordingIo as Recorder;

const NOW: u64 = 1_700_000_000_000;
/// A stage is run to its end within this.
const LIMIT: Duration = Duration::from_secs(20);

/// The script's own output: the log without the echoed commands and the closing line.
fn output(io: &Recorder) -> Vec<String> {
    let logs = io.logs();
    let start = logs
        .iter()
        .position(|l| l == "Running commands...")
        .expect("the script was started");
    let mut out: Vec<String> = logs[start + 1..]
        .iter()
        .skip_while(|l| l.starts_with("   "))
        .cloned()
        .collect();
    out.pop();
    out
}

/// A running SCRIPT_RUN stage (started at [`NOW`], 1h timeout) with `with` validated.
fn script_stage(with: Value) -> Stage {
    let mut stage = Stage::test("script", "SCRIPT_RUN").running_since(NOW);
    stage.with = ScriptRunPlugin::default()
        .validate_stage("SCRIPT_RUN", &with)
        .unwrap();
    stage
}

fn run_script(script: &str) -> Stage {
    script_stage(json!({ "run": script }))
}

struct Dirs<'a> {
    app: &'a Path,
    running: Option<&'a Path>,
}

/// A job runner of its own, in a temporary directory.
struct Jobs {
    _dir: tempfile::TempDir,
    runner: ProcessJobs,
}

fn jobs() -> Jobs {
    let dir = tempfile::tempdir().unwrap();
    let runner = ProcessJobs::new(dir.path().join("jobs")).unwrap();
    Jobs { _dir: dir, runner }
}

/// `stage` alone in a test deployment, in an empty app directory, with a job runner: for
/// tests that take the steps one at a time.
struct Alone {
    app: tempfile::TempDir,
    jobs: Jobs,
    deployment: Deployment,
    plugin: ScriptRunPlugin,
}

impl Alone {
    fn new(stage: &Stage) -> Self {
        Self {
            app: tempfile::tempdir().unwrap(),
            jobs: jobs(),
            deployment: Deployment::test().with_stages(vec![stage.clone()]),
            plugin: ScriptRunPlugin::default(),
        }
    }

    async fn step(&self, stage: &Stage, io: &Recorder, now: u64) -> Result<StepOutcome, StepError> {
        let dirs = Dirs {
            app: self.app.path(),
            running: None,
        };
        one_step(
            &self.plugin,
            stage,
            &self.deployment,
            &dirs,
            io,
            &self.jobs.runner,
            now,
        )
        .await
    }
}

/// One step of `stage` at `now` ms after [`NOW`], with the metadata saved so far.
async fn one_step(
    plugin: &ScriptRunPlugin,
    stage: &Stage,
    deployment: &Deployment,
    dirs: &Dirs<'_>,
    io: &Recorder,
    jobs: &dyn JobRunner,
    now: u64,
) -> Result<StepOutcome, StepError> {
    let mut stage = stage.clone();
    stage.metadata.extend(io.saved());
    plugin
        .execute_step(StepContext {
            deployment,
            stage: &stage,
            app_dir: dirs.app,
            running_app_dir: dirs.running,
            now: Millis(NOW + now),
            io,
            jobs,
        })
        .await
}

/// Runs `stage` step by step, as the controller would, until it is done (or a step fails).
async fn step_with(
    plugin: &ScriptRunPlugin,
    stage: &Stage,
    deployment: &Deployment,
    dirs: Dirs<'_>,
    io: &Recorder,
) -> Result<StepOutcome, StepError> {
    let jobs = jobs();
    let began = Instant::now();
    loop {
        let now = u64::try_from(began.elapsed().as_millis()).unwrap();
        let outcome = one_step(plugin, stage, deployment, &dirs, io, &jobs.runner, now).await?;
        match outcome {
            StepOutcome::Continue { after } => {
                assert!(
                    began.elapsed() < LIMIT,
                    "the stage never ended: {:?}",
                    io.logs()
                );
                tokio::time::sleep(after.get().min(Duration::from_millis(100))).await;
            }
            done => return Ok(done),
        }
    }
}

async fn step_in(
    stage: &Stage,
    deployment: &Deployment,
    dirs: Dirs<'_>,
    io: &Recorder,
) -> Result<StepOutcome, StepError> {
    step_with(&ScriptRunPlugin::default(), stage, deployment, dirs, io).await
}

async fn step(stage: &Stage, io: &Recorder) -> StepOutcome {
    step_of(&ScriptRunPlugin::default(), stage, io).await
}

/// `stage`, alone in a test deployment, run to its end by `plugin` in an empty directory.
async fn step_of(plugin: &ScriptRunPlugin, stage: &Stage, io: &Recorder) -> StepOutcome {
    let dir = tempfile::tempdir().unwrap();
    let deployment = Deployment::test().with_stages(vec![stage.clone()]);
    let dirs = Dirs {
        app: dir.path(),
        running: None,
    };
    step_with(plugin, stage, &deployment, dirs, io)
        .await
        .unwrap()
}

/// True while `pid` is a live process (not a zombie).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z") && !s.contains(") X"))
        .unwrap_or(false)
}

fn failure(reason: &str) -> StepOutcome {
    StepOutcome::Done(StageResult::Failure {
        reason: reason.to_owned(),
    })
}

const SUCCESS: StepOutcome = StepOutcome::Done(StageResult::Success);

/// Validates `with` for stage `name`; `Ok` is the normalised value, `Err` the field named.
fn check(name: &str, with: Value, expected: Result<Value, &str>) {
    let got = ScriptRunPlugin::default()
        .validate_stage(name, &with)
        .map_err(|e| e.field);
    assert_eq!(got, expected.map_err(str::to_owned), "{name} with = {with}");
}

#[test]
fn validates_with() {
    let sr = "SCRIPT_RUN";
    check(
        sr,
        json!({"run": "echo hi"}),
        Ok(json!({"run": "echo hi", "env": {}, "timeout": "6h"})),
    );
    check(
        sr,
        json!({"run": "make", "env": {"A": "x", "PORT": 8080, "DEBUG": true}, "timeout": "10m", "onRollback": "undo"}),
        Ok(
            json!({"run": "make", "env": {"A": "x", "PORT": "8080", "DEBUG": "true"}, "timeout": "10m", "onRollback": "undo"}),
        ),
    );
    check(
        sr,
        json!({"run": "x", "onRollback": "  "}),
        Ok(json!({"run": "x", "env": {}, "timeout": "6h"})),
    );
    check(sr, Value::Null, Err("run"));
    check(sr, json!({"run": "  \n"}), Err("run"));
    check(sr, json!({"run": ["echo"]}), Err("run"));
    check(sr, json!({"run": "x", "env": ["A=1"]}), Err("env"));
    check(sr, json!({"run": "x", "env": {"A=B": "1"}}), Err("env.A=B"));
    check(
        sr,
        json!({"run": "x", "env": {"A": {"b": 1}}}),
        Err("env.A"),
    );
    check(sr, json!({"run": "x", "timeout": "later"}), Err("timeout"));
    check(sr, json!({"run": "x", "timeout": 30}), Err("timeout"));
    check(sr, json!({"run": "x", "onRollback": 1}), Err("onRollback"));
    check(
        sr,
        json!({"run": "x", "rollbackOf": "s"}),
        Err("rollbackOf"),
    );
    check(sr, json!({"run": "x", "envs": {}}), Err("envs"));
    check(sr, json!("echo"), Err("with"));
    check(
        "SCRIPT_RUN_ROLLBACK",
        json!({"run": "undo", "rollbackOf": "s"}),
        Ok(json!({"run": "undo", "env": {}, "timeout": "6h", "rollbackOf": "s"})),
    );
    check(
        "SCRIPT_RUN_ROLLBACK",
        json!({"run": "undo", "onRollback": "again"}),
        Err("onRollback"),
    );
}

#[test]
fn default_timeout_is_with_timeout() {
    let stage = script_stage(json!({"run": "x", "timeout": "15m"}));
    assert_eq!(
        ScriptRunPlugin::default().default_timeout(&stage),
        GoDuration::from_secs(900)
    );
}

#[tokio::test]
async fn output_is_logged_line_by_line_in_order_with_stderr_marked() {
    let stage =
        run_script("echo one; sleep 0.2; echo two >&2; sleep 0.2; printf 'three\\r\\nfour'");
    let io = Recorder::default();
    assert_eq!(step(&stage, &io).await, SUCCESS);
    // The stage log keeps stderr's lines marked; the API shows them flagged.
    assert_eq!(output(&io), ["one", "\u{1e}two", "three", "four"]);
    let logs = io.logs();
    assert_eq!(logs[0], "Running commands...");
    assert_eq!(
        logs.last().map(String::as_str),
        Some("Script finished successfully")
    );
}

#[tokio::test]
async fn non_zero_exit_fails_the_stage() {
    let stage = run_script("echo about to fail; exit 3");
    let io = Recorder::default();
    assert_eq!(
        step(&stage, &io).await,
        failure("script exited with code 3")
    );
    assert_eq!(output(&io), ["about to fail"]);
}

#[tokio::test]
async fn a_killed_script_fails_the_stage() {
    let stage = run_script("kill -s TERM $$");
    assert_eq!(
        step(&stage, &Recorder::default()).await,
        failure("script exited with code 143 (killed by signal 15)")
    );
}

#[tokio::test]
async fn the_script_is_killed_at_the_timeout() {
    let mut stage = run_script("echo started; sleep 5");
    stage.timeout = GoDuration::from_secs(1);
    let io = Recorder::default();
    let began = Instant::now();
    let outcome = step(&stage, &io).await;
    assert!(
        began.elapsed() < Duration::from_secs(4),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(outcome, failure("script timed out after 1s"));
    assert_eq!(output(&io), ["started"]);
}

#[tokio::test]
async fn the_timeout_kills_processes_the_script_started() {
    let mut stage = run_script("sleep 30 & echo $!; wait");
    stage.timeout = GoDuration::from_secs(1);
    let io = Recorder::default();
    assert_eq!(
        step(&stage, &io).await,
        failure("script timed out after 1s")
    );
    let pid = &output(&io)[0];
    assert!(!alive(pid), "background sleep {pid} survived the timeout");
}

#[tokio::test]
async fn the_timeout_counts_from_the_stage_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut stage = script_stage(json!({"run": "touch \"$OUT/ran\"", "env": {"OUT": dir.path()}}));
    stage.timeout = GoDuration::from_secs(1);
    stage.started_at = Some(Millis(NOW - 2_000));
    let deployment = Deployment::test();
    let dirs = Dirs {
        app: dir.path(),
        running: None,
    };
    let outcome = step_in(&stage, &deployment, dirs, &Recorder::default()).await;
    assert_eq!(outcome.unwrap(), failure("script timed out after 1s"));
    assert!(!dir.path().join("ran").exists(), "the script must not run");
}

#[tokio::test]
async fn with_timeout_bounds_a_longer_stage_timeout() {
    let stage = script_stage(json!({"run": "sleep 5", "timeout": "1s"}));
    assert_eq!(stage.timeout, GoDuration::from_secs(3600));
    assert_eq!(
        step(&stage, &Recorder::default()).await,
        failure("script timed out after 1s")
    );
}

#[tokio::test]
async fn background_processes_do_not_hold_the_stage() {
    let stage = run_script("sleep 30 & echo $!; echo done");
    let io = Recorder::default();
    let began = Instant::now();
    assert_eq!(step(&stage, &io).await, SUCCESS);
    assert!(
        began.elapsed() < Duration::from_secs(4),
        "{:?}",
        began.elapsed()
    );
    let out = output(&io);
    assert_eq!(out[1], "done");
    assert!(
        !alive(&out[0]),
        "what the script left running was not killed"
    );
}

#[tokio::test]
async fn the_script_sees_the_deployment_in_sr_variables() {
    let mut deployment = Deployment::test();
    deployment.labels = [("env", "prod"), ("team", "web")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into();
    deployment.summary = "Quick sync".into();
    deployment.trigger.commander = "alice".into();
    deployment.created_at = Millis(1_719_571_113_250);
    let stage = script_stage(json!({
        "run": "env | grep '^SR_' | LC_ALL=C sort; echo \"MSG=$MSG\"",
        "env": {"MSG": "hello", "SR_SUMMARY": "from with.env"},
    }));
    let dir = tempfile::tempdir().unwrap();
    let io = Recorder::default();
    let dirs = Dirs {
        app: dir.path(),
        running: None,
    };
    let outcome = step_in(&stage, &deployment, dirs, &io).await.unwrap();
    assert_eq!(outcome, SUCCESS);
    let id = deployment.id.as_str();
    let sha = "c".repeat(40);
    let raw = format!(
        r#"{{"applicationID":"demo:app/app.pipecd.yaml","applicationName":"app","deploymentID":"{id}","labels":{{"env":"prod","team":"web"}},"summary":"Quick sync","triggeredAt":1719571113,"triggeredCommander":"alice","triggeredCommitHash":"{sha}"}}"#
    );
    let expected = [
        "SR_APPLICATION_ID=demo:app/app.pipecd.yaml".to_owned(),
        "SR_APPLICATION_NAME=app".to_owned(),
        format!("SR_CONTEXT_RAW={raw}"),
        format!("SR_DEPLOYMENT_ID={id}"),
        "SR_IS_ROLLBACK=false".to_owned(),
        "SR_LABELS_ENV=prod".to_owned(),
        "SR_LABELS_TEAM=web".to_owned(),
        "SR_REPOSITORY_URL=".to_owned(),
        "SR_SUMMARY=from with.env".to_owned(),
        "SR_TRIGGERED_AT=1719571113".to_owned(),
        "SR_TRIGGERED_COMMANDER=alice".to_owned(),
        format!("SR_TRIGGERED_COMMIT_HASH={sha}"),
        "MSG=hello".to_owned(),
    ];
    assert_eq!(output(&io), expected);
}

#[tokio::test]
async fn the_script_runs_in_the_app_directory() {
    let app = tempfile::tempdir().unwrap();
    std::fs::write(app.path().join("which.txt"), "the app at the commit\n").unwrap();
    let stage = run_script("cat which.txt; echo \"$SR_IS_ROLLBACK\"; touch made");
    let io = Recorder::default();
    let deployment = Deployment::test();
    let dirs = Dirs {
        app: app.path(),
        running: None,
    };
    step_in(&stage, &deployment, dirs, &io).await.unwrap();
    assert_eq!(output(&io), ["the app at the commit", "false"]);
    assert!(
        !app.path().join("made").exists(),
        "a script works in a copy; the checkout stays as it was"
    );
}

fn rollback_of(forward: &Stage) -> Stage {
    let mut stages = rollback_stages_for(std::slice::from_ref(forward));
    assert_eq!(stages.len(), 1);
    let mut stage = stages.remove(0);
    stage.status = StageStatus::Running;
    stage.started_at = Some(Millis(NOW));
    stage
}

#[tokio::test]
async fn rollback_runs_on_rollback_in_the_running_commit_directory() {
    let forward = script_stage(json!({"run": "true", "onRollback": "cat which.txt; echo \"$SR_IS_ROLLBACK $R\"", "env": {"R": "undo"}}))
        .finished(StageStatus::Failure);
    let rollback = rollback_of(&forward);
    let deployment = Deployment::test().with_stages(vec![forward, rollback.clone()]);
    let (app, running) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(app.path().join("which.txt"), "deployment's commit\n").unwrap();
    std::fs::write(running.path().join("which.txt"), "running commit\n").unwrap();

    let io = Recorder::default();
    let dirs = Dirs {
        app: app.path(),
        running: Some(running.path()),
    };
    let outcome = step_in(&rollback, &deployment, dirs, &io).await.unwrap();
    assert_eq!(outcome, SUCCESS);
    assert_eq!(output(&io), ["running commit", "true undo"]);

    // A first deployment has no running commit: the rollback runs at the deployment's.
    let io = Recorder::default();
    let dirs = Dirs {
        app: app.path(),
        running: None,
    };
    step_in(&rollback, &deployment, dirs, &io).await.unwrap();
    assert_eq!(output(&io)[0], "deployment's commit");
}

#[tokio::test]
async fn rollback_of_a_stage_that_never_ran_does_nothing() {
    let forward = script_stage(json!({"run": "true", "onRollback": "touch undone"}));
    let mut forward = forward;
    forward.status = StageStatus::NotStartedYet;
    forward.started_at = None;
    let rollback = rollback_of(&forward);
    let deployment = Deployment::test().with_stages(vec![forward, rollback.clone()]);
    let app = tempfile::tempdir().unwrap();
    let io = Recorder::default();
    let dirs = Dirs {
        app: app.path(),
        running: None,
    };
    let outcome = step_in(&rollback, &deployment, dirs, &io).await.unwrap();
    assert_eq!(outcome, SUCCESS);
    assert!(!app.path().join("undone").exists());
    assert_eq!(
        io.logs(),
        ["Stage script did not run, so there is nothing to roll back"]
    );
}

#[test]
fn rollback_stages_only_for_stages_with_on_rollback() {
    let mut with_undo =
        script_stage(json!({"run": "deploy", "onRollback": "undo", "env": {"A": "1"}}));
    with_undo.id = gannet_domain::StageId::parse("migrate").unwrap();
    with_undo.index = 2;
    with_undo.timeout = GoDuration::from_secs(600);
    let without = script_stage(json!({"run": "notify"}));
    let wait = Stage::test("wait", "WAIT");

    let stages = rollback_stages_for(&[wait, without, with_undo]);
    assert_eq!(stages.len(), 1);
    let s = &stages[0];
    assert_eq!(s.id.as_str(), "rollback-migrate");
    assert_eq!(s.name, "SCRIPT_RUN_ROLLBACK");
    assert_eq!(s.index, 2);
    assert!(s.rollback && !s.visible);
    assert_eq!(s.status, StageStatus::NotStartedYet);
    assert_eq!(s.timeout, GoDuration::from_secs(600));
    assert_eq!(
        s.with,
        json!({"run": "undo", "env": {"A": "1"}, "timeout": "6h", "rollbackOf": "migrate"})
    );
    // The planner may validate it like any stage.
    assert_eq!(
        ScriptRunPlugin::default()
            .validate_stage(&s.name, &s.with)
            .unwrap(),
        s.with
    );
}

#[tokio::test]
async fn a_long_line_is_cut() {
    let stage = run_script("head -c 5000 /dev/zero | tr '\\0' a; echo; echo next");
    let io = Recorder::default();
    assert_eq!(step(&stage, &io).await, SUCCESS);
    let expected = format!("{} [line cut at 4096 bytes]", "a".repeat(MAX_LINE_BYTES));
    assert_eq!(output(&io), [expected.as_str(), "next"]);
}

#[tokio::test]
async fn output_past_the_line_cap_is_counted_not_kept() {
    let stage = run_script("seq 1 10005");
    let io = Recorder::default();
    assert_eq!(step(&stage, &io).await, SUCCESS);
    let out = output(&io);
    let max = usize::try_from(MAX_LOG_LINES).unwrap();
    assert_eq!(out.len(), max + 1);
    assert_eq!(out[0], "1");
    assert_eq!(out[max - 1], "10000");
    assert_eq!(
        out[max],
        "[5 more lines of output not shown: the log keeps the first 10000]"
    );
}

#[tokio::test]
async fn a_step_delivered_twice_or_crashed_finds_its_job_and_the_script_runs_once() {
    let out = tempfile::tempdir().unwrap();
    let stage = script_stage(json!({
        "run": "echo ran >> \"$OUT/runs\"; sleep 0.5; echo finished",
        "env": {"OUT": out.path()},
    }));
    let alone = Alone::new(&stage);
    // The first step started the job, then its process died before the record was saved:
    // the redelivered step starts the same key again.
    let crashed = Recorder::default();
    let first = alone.step(&stage, &crashed, 0).await;
    assert!(
        matches!(first, Ok(StepOutcome::Continue { .. })),
        "{first:?}"
    );
    let io = Recorder::default();
    let mut outcome = StepOutcome::Continue {
        after: GoDuration::default(),
    };
    let began = Instant::now();
    while matches!(outcome, StepOutcome::Continue { .. }) {
        assert!(began.elapsed() < LIMIT);
        // Every step is delivered twice.
        for _ in 0..2 {
            outcome = alone.step(&stage, &io, 100).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(outcome, SUCCESS);
    let runs = std::fs::read_to_string(out.path().join("runs")).unwrap();
    assert_eq!(runs, "ran\n", "the script ran once");
    let finished = io.logs().iter().filter(|l| *l == "finished").count();
    assert!(finished >= 1, "{:?}", io.logs());
}

#[tokio::test]
async fn stop_kills_the_running_script_and_the_stage_reads_cancelled() {
    let stage = run_script("sleep 30 & echo $!; echo started; wait");
    let alone = Alone::new(&stage);
    let io = Recorder::default();
    let began = Instant::now();
    while !io.logs().iter().any(|l| l == "started") {
        assert!(began.elapsed() < LIMIT, "{:?}", io.logs());
        let outcome = alone.step(&stage, &io, 0).await;
        assert!(
            matches!(outcome, Ok(StepOutcome::Continue { .. })),
            "{outcome:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut stopped = stage.clone();
    stopped.metadata.extend(io.saved());
    for _ in 0..2 {
        alone
            .plugin
            .stop(StopContext {
                deployment: &alone.deployment,
                stage: &stopped,
                io: &io,
                jobs: &alone.jobs.runner,
            })
            .await
            .unwrap();
    }
    let pid = output(&io)[0].clone();
    assert!(!alive(&pid), "the script's child {pid} survived the stop");
    let outcome = alone.step(&stage, &io, 0).await;
    assert_eq!(outcome.unwrap(), failure("script was cancelled"));
}

#[tokio::test]
async fn a_missing_app_directory_is_a_permanent_error() {
    let stage = run_script("true");
    let deployment = Deployment::test();
    let dirs = Dirs {
        app: Path::new("/nonexistent/gannet-app"),
        running: None,
    };
    let err = step_in(&stage, &deployment, dirs, &Recorder::default())
        .await
        .unwrap_err();
    match err {
        err @ StepError::Permanent(_) => {
            let message = err.reason();
            assert!(
                message.starts_with("cannot copy /nonexistent/gannet-app for the job: "),
                "{message}"
            )
        }
        other => panic!("expected a permanent error, got {other:?}"),
    }
}

#[tokio::test]
async fn scripts_get_only_the_allowed_part_of_gannets_environment() {
    // Set once for this test process; the names are unique to this test.
    std::env::set_var("GANNET_SCRIPT_RUN_TEST_SECRET", "hush");
    std::env::set_var("GANNET_SCRIPT_RUN_TEST_VISIBLE", "shown");
    let stage = script_stage(json!({
        "run": "echo \"secret=[$GANNET_SCRIPT_RUN_TEST_SECRET] visible=[$GANNET_SCRIPT_RUN_TEST_VISIBLE] path=[${PATH:+set}] id=[$SR_DEPLOYMENT_ID]\"; env | wc -l",
        "env": {"FROM_WITH": "1"}
    }));
    let io = Recorder::default();
    let plugin = ScriptRunPlugin::allowing_env(vec!["GANNET_SCRIPT_RUN_TEST_VISIBLE".into()]);
    assert_eq!(step_of(&plugin, &stage, &io).await, SUCCESS);
    let logs = io.logs();
    let want = format!(
        "secret=[] visible=[shown] path=[set] id=[{}]",
        Deployment::test().id
    );
    assert!(logs.contains(&want), "{logs:?}");
    // What a script sees is small and known: the base list, the SR_* variables, with.env.
    let count: usize = logs
        .iter()
        .rev()
        .find_map(|l| l.trim().parse().ok())
        .expect("env | wc -l");
    assert!(count < 40, "the script saw {count} variables: {logs:?}");
}

#[test]
fn the_operator_allows_variables_but_never_gannets_secrets() {
    use gannet_sdk::registry::{PluginSettings, RuntimeInfo};
    let runtime = RuntimeInfo {
        secret_env: vec!["GANNET_WEBHOOK_SECRET".into()],
        ..RuntimeInfo::default()
    };
    let build = |value: serde_json::Value| {
        (crate::SPEC.build)(&PluginSettings::new("plugins.script-run", &value, &runtime))
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    assert_eq!(build(json!(null)), Ok(()));
    assert_eq!(build(json!({"allowEnv": ["KUBECONFIG"]})), Ok(()));
    assert_eq!(
        build(json!({"allowEnv": ["KUBECONFIG", "GANNET_WEBHOOK_SECRET"]})),
        Err("plugins.script-run.allowEnv[1]: GANNET_WEBHOOK_SECRET holds one of gannet's own secrets; jobs never get it".into())
    );
    assert!(build(json!({"allowEnv": ["A=B"]}))
        .unwrap_err()
        .starts_with("plugins.script-run.allowEnv[0]:"));
    // gannet's own credentials, by name, with what to do instead.
    for name in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GANNET_TOKENS",
        "DD_API_KEY",
        "GOOGLE_APPLICATION_CREDENTIALS",
    ] {
        let err = build(json!({"allowEnv": ["KUBECONFIG", name]})).unwrap_err();
        assert!(
            err.starts_with(&format!("plugins.script-run.allowEnv[1]: {name} holds ")),
            "{err}"
        );
        assert!(err.contains("DEPLOY_AWS_ACCESS_KEY_ID"), "{err}");
    }
    assert_eq!(
        build(json!({"allowEnv": ["AWS_REGION", "DEPLOY_AWS_ACCESS_KEY_ID"]})),
        Ok(())
    );
    assert!(build(json!({"alowEnv": []}))
        .unwrap_err()
        .contains("did you mean `allowEnv`?"));
}

#[tokio::test]
async fn a_script_runs_in_a_session_of_its_own() {
    let stage = script_stage(json!({
        "run": "read -r pid comm state ppid pgrp sid rest < /proc/$$/stat; echo \"$sid $pgrp\""
    }));
    let io = Recorder::default();
    assert_eq!(step(&stage, &io).await, SUCCESS);
    let out = output(&io);
    let (sid, pgrp) = out[0].split_once(' ').expect("sid and group");
    let own = std::fs::read_to_string("/proc/self/stat").unwrap();
    let own_sid = own[own.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(4)
        .unwrap()
        .to_owned();
    assert_eq!(
        sid, pgrp,
        "the job's first process leads its session and group"
    );
    assert_ne!(sid, own_sid, "the script shares gannet's session");
}

/// A running CUSTOM_SYNC stage with `with` validated.
fn custom_sync(with: Value) -> Stage {
    let mut stage = Stage::test("sync", "CUSTOM_SYNC").running_since(NOW);
    stage.with = ScriptRunPlugin::default()
        .validate_stage("CUSTOM_SYNC", &with)
        .unwrap();
    stage
}

#[tokio::test]
async fn custom_sync_runs_once_though_each_step_comes_twice_and_takes_pipecds_env_too() {
    let marks = tempfile::tempdir().unwrap();
    let mark = marks.path().join("runs");
    let stage = custom_sync(json!({
        "run": format!("echo \"$AWS_PROFILE\" >> {}", mark.display()),
        "env": {"AWS_PROFILE": "sample"},
    }));
    assert_eq!(
        stage.with["env"],
        json!({"AWS_PROFILE": "sample"}),
        "env is read as envs"
    );
    let alone = Alone::new(&stage);
    let io = Recorder::default();
    let began = Instant::now();
    let outcome = loop {
        let now = u64::try_from(began.elapsed().as_millis()).unwrap();
        let first = alone.step(&stage, &io, now).await.unwrap();
        let again = alone.step(&stage, &io, now).await.unwrap();
        // The job may end between the two: the repeat then finds it ended. Never the reverse,
        // and never a second run (the mark below).
        assert!(
            first == again || matches!(first, StepOutcome::Continue { .. }),
            "a step delivered twice answers the same, or later: {first:?} then {again:?}"
        );
        match again {
            StepOutcome::Continue { .. } if began.elapsed() < LIMIT => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            done => break done,
        }
    };
    assert_eq!(outcome, SUCCESS, "{:?}", io.logs());
    assert_eq!(
        std::fs::read_to_string(&mark).unwrap(),
        "sample\n",
        "one run"
    );

    for (with, says) in [
        (json!({}), "run"),
        (json!({"run": "x", "envs": {"A=B": "1"}}), "env.A=B"),
        (json!({"run": "x", "onRollback": "y"}), "onRollback"),
    ] {
        let e = ScriptRunPlugin::default()
            .validate_stage("CUSTOM_SYNC", &with)
            .unwrap_err();
        assert!(e.field.starts_with(says), "{with}: {e:?}");
    }
    assert!(ScriptRunPlugin::default()
        .validate_stage("CUSTOM_SYNC_ROLLBACK", &json!({}))
        .is_err());
}

#[tokio::test]
async fn a_custom_syncs_rollback_runs_the_running_commits_custom_sync_there() {
    let forward = custom_sync(json!({"run": "echo forward"})).finished(StageStatus::Failure);
    let rollback = rollback_of(&forward);
    assert_eq!(rollback.name, "CUSTOM_SYNC_ROLLBACK");
    let mut deployment = Deployment::test().with_stages(vec![forward.clone(), rollback.clone()]);
    let (app, running) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = deployment
        .app
        .config_path()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    std::fs::write(
        running.path().join(&config),
        "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: web\n  pipeline:\n    stages:\n      - name: CUSTOM_SYNC\n        with:\n          envs: {V: \"1\"}\n          run: echo \"back to $V in $(cat which.txt)\"\n",
    )
    .unwrap();
    std::fs::write(running.path().join("which.txt"), "the running commit").unwrap();

    // A first deployment has nothing to go back to.
    let io = Recorder::default();
    let dirs = Dirs {
        app: app.path(),
        running: None,
    };
    let e = step_in(&rollback, &deployment, dirs, &io)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("first deployment"), "{e}");

    deployment.running_commit = Some(gannet_domain::CommitSha::parse(&"b".repeat(40)).unwrap());
    let io = Recorder::default();
    let dirs = Dirs {
        app: app.path(),
        running: Some(running.path()),
    };
    let outcome = step_in(&rollback, &deployment, dirs, &io).await.unwrap();
    assert_eq!(outcome, SUCCESS, "{:?}", io.logs());
    assert_eq!(output(&io), ["back to 1 in the running commit"]);

    // A CUSTOM_SYNC that never ran has nothing to undo.
    let mut not_run = forward;
    not_run.status = StageStatus::NotStartedYet;
    let deployment = Deployment::test().with_stages(vec![not_run, rollback.clone()]);
    let io = Recorder::default();
    let dirs = Dirs {
        app: app.path(),
        running: None,
    };
    assert_eq!(
        step_in(&rollback, &deployment, dirs, &io).await.unwrap(),
        SUCCESS
    );
}
