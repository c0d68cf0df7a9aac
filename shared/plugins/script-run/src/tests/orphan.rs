//! Tests for the script an interrupted attempt left running: the next attempt kills it, and
//! never a process group that is not this deployment's script.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use async_trait::async_trait;
use gannet_core::deployment::Deployment;
use gannet_core::duration::Millis;
use gannet_core::plugin::{Plugin, StepContext, StepError, StepIo};
use gannet_core::ports::Metadata;
use serde_json::json;

use super::{output, run_script, script_stage, step, step_with, Dirs, Recorder, NOW, SUCCESS};
use crate::runner::OnDrop;
use crate::ScriptRunPlugin;

/// True while `pid` is a live process (not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z") && !s.contains(") X"))
        .unwrap_or(false)
}

/// Waits (up to 5s) for `done`.
async fn eventually(done: impl Fn() -> bool) -> bool {
    for _ in 0..100 {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    done()
}

/// Runs a script that starts a background `sleep`, drops the step mid-script leaving what
/// `on_drop` leaves running, then runs the step again with the metadata the first attempt
/// saved: the first attempt's whole process group must be dead and the second run complete.
async fn check_orphan_is_killed(on_drop: OnDrop) {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("bg.pid");
    let stage = run_script(
        "if [ -e bg.pid ]; then echo second run; else sleep 30 & echo $! > bg.tmp; mv bg.tmp bg.pid; wait; fi",
    );
    let deployment = Deployment::test().with_stages(vec![stage.clone()]);
    let plugin = ScriptRunPlugin {
        on_drop,
        ..ScriptRunPlugin::default()
    };
    let first = Recorder::default();
    let dirs = Dirs {
        app: dir.path(),
        running: None,
    };
    tokio::select! {
        outcome = step_with(&plugin, &stage, &deployment, dirs, &first) => {
            panic!("the first attempt ended: {outcome:?}")
        }
        started = eventually(|| pidfile.exists()) => assert!(started, "the script never started"),
    }
    // The first attempt's step is dropped here, mid-script.
    let saved = first.saved();
    assert_eq!(saved["attempts"], "1");
    let pgid: u32 = saved["pgid"].parse().unwrap();
    let background: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(background), "{on_drop:?}: the background sleep died");
    match on_drop {
        OnDrop::Leave => assert!(alive(pgid), "the shell died"),
        OnDrop::KillShell => assert!(eventually(|| !alive(pgid)).await, "the shell lives"),
    }

    let mut again = stage.clone();
    again.metadata = saved;
    let second = Recorder::default();
    let dirs = Dirs {
        app: dir.path(),
        running: None,
    };
    let outcome = step_with(
        &ScriptRunPlugin::default(),
        &again,
        &deployment,
        dirs,
        &second,
    )
    .await
    .unwrap();
    let alive_after = (alive(pgid), alive(background));
    if alive_after.1 {
        // Do not leave it behind when the test fails.
        let _ = Command::new("kill").arg(background.to_string()).status();
    }
    assert_eq!(alive_after, (false, false), "{on_drop:?}: (shell, sleep)");
    assert_eq!(outcome, SUCCESS, "{on_drop:?}");
    assert_eq!(
        second.logs()[..2],
        [
            format!(
                "killed the previous attempt's script (process group {pgid}) before running again"
            ),
            "An earlier run of this script was interrupted; running it again (attempt 2)".into(),
        ],
        "{on_drop:?}"
    );
    assert_eq!(output(&second), ["second run"], "{on_drop:?}");
    assert_ne!(second.saved()["pgid"], pgid.to_string());
}

#[tokio::test]
async fn the_next_attempt_kills_the_script_an_interrupted_one_left_running() {
    // As after a SIGKILL of gannet: the shell and what it started still run.
    check_orphan_is_killed(OnDrop::Leave).await;
    // As after a dropped step: the shell was killed, its background process still runs.
    check_orphan_is_killed(OnDrop::KillShell).await;
}

#[tokio::test]
async fn a_recorded_group_that_is_not_this_deployments_script_is_not_killed() {
    let cases: [&[(&str, &str)]; 2] = [&[], &[("SR_DEPLOYMENT_ID", "another-deployment")]];
    for env in cases {
        let mut other = Command::new("sleep")
            .arg("30")
            .envs(env.iter().copied())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut stage = run_script("echo ran");
        stage.metadata.insert("pgid".into(), other.id().to_string());
        let io = Recorder::default();
        let outcome = step(&stage, &io).await;
        let still_running = other.try_wait().unwrap().is_none();
        let _ = other.kill();
        other.wait().unwrap();
        assert!(still_running, "env {env:?}: an unrelated group was killed");
        assert_eq!(outcome, SUCCESS, "env {env:?}");
        assert_eq!(output(&io), ["ran"], "env {env:?}");
        assert!(
            !io.logs().iter().any(|l| l.contains("killed")),
            "env {env:?}: {:?}",
            io.logs()
        );
    }
}

#[tokio::test]
async fn the_step_records_the_scripts_process_group_before_it_runs() {
    let stage = script_stage(json!({"run": "echo $$"}));
    let io = Recorder::default();
    assert_eq!(step(&stage, &io).await, SUCCESS);
    assert_eq!(output(&io), [io.saved()["pgid"].clone()]);
}

/// Saves everything but the process group, which fails as a lost database connection would.
struct GroupNotSaved;

#[async_trait]
impl StepIo for GroupNotSaved {
    async fn log(&self, _line: &str) {}

    async fn save_metadata(&self, entries: Metadata) -> Result<(), StepError> {
        if entries.contains_key("pgid") {
            return Err(StepError::transient(
                "saving stage metadata",
                "connection lost",
            ));
        }
        Ok(())
    }
}

#[tokio::test]
async fn the_script_does_not_run_unless_its_process_group_was_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let stage = run_script("touch ran");
    let deployment = Deployment::test();
    let plugin = ScriptRunPlugin::default();
    let ctx = StepContext {
        deployment: &deployment,
        stage: &stage,
        app_dir: dir.path(),
        running_app_dir: None,
        now: Millis(NOW),
        io: &GroupNotSaved,
    };
    let err = plugin.execute_step(ctx).await.unwrap_err();
    assert!(
        matches!(&err, StepError::Transient { operation, .. } if operation == "saving stage metadata"),
        "{err:?}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!dir.path().join("ran").exists(), "the script ran");
}
