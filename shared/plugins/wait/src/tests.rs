//! Tests for the WAIT stage: validation and resuming a wait from saved metadata.

use std::path::Path;

use gannet_sdk::fixture::RecordingIo as Recorder;

use gannet_domain::deployment::{Deployment, Stage};
use gannet_domain::duration::Millis;
use gannet_domain::GoDuration;
use gannet_sdk::plugin::{Plugin, StageResult, StepContext, StepError, StepOutcome, Steps};
use serde_json::{json, Value};

use super::WaitPlugin;

fn wait_stage(with: Value, metadata: &[(&str, &str)]) -> Stage {
    let mut stage = Stage::test("wait", "WAIT");
    stage.with = WaitPlugin.validate_stage("WAIT", &with).unwrap();
    stage.metadata = metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    stage
}

async fn step(stage: &Stage, now: u64, io: &Recorder) -> Result<StepOutcome, StepError> {
    let deployment = Deployment::test().with_stages(vec![stage.clone()]);
    WaitPlugin
        .execute_step(StepContext {
            deployment: &deployment,
            stage,
            app_dir: Path::new("."),
            running_app_dir: None,
            now: Millis(now),
            io,
            jobs: &gannet_sdk::jobs::NoJobs,
        })
        .await
}

fn after(secs: u64) -> StepOutcome {
    StepOutcome::Continue {
        after: GoDuration::from_secs(secs),
    }
}

/// Validates `with`; `Ok` is the normalised value, `Err` the field the error names.
fn check(with: Value, expected: Result<Value, &str>) {
    let got = WaitPlugin
        .validate_stage("WAIT", &with)
        .map_err(|e| e.field);
    assert_eq!(got, expected.map_err(str::to_owned), "with = {with}");
}

#[test]
fn validates_with() {
    check(Value::Null, Ok(json!({"duration": "1m"})));
    check(json!({}), Ok(json!({"duration": "1m"})));
    check(json!({"duration": "90s"}), Ok(json!({"duration": "1m30s"})));
    check(
        json!({"duration": "1500ms"}),
        Ok(json!({"duration": "1500ms"})),
    );
    check(json!({"duration": "0"}), Ok(json!({"duration": "0s"})));
    check(json!({"duration": "0s"}), Ok(json!({"duration": "0s"})));
    check(json!({"duration": null}), Ok(json!({"duration": "1m"})));
    check(json!({"duration": "ten minutes"}), Err("duration"));
    check(json!({"duration": "-5s"}), Err("duration"));
    check(json!({"duration": 30}), Err("duration"));
    check(json!({"duration": true}), Err("duration"));
    check(json!({"durration": "1m"}), Err("durration"));
    check(json!("5m"), Err("with"));
}

#[test]
fn bad_duration_message_names_the_input() {
    let err = WaitPlugin
        .validate_stage("WAIT", &json!({"duration": "5x"}))
        .unwrap_err();
    assert!(err.to_string().starts_with("duration: "), "{err}");
    assert!(err.to_string().contains("\"5x\""), "{err}");
}

#[tokio::test]
async fn first_step_saves_start_and_continues_for_the_whole_duration() {
    let stage = wait_stage(json!({"duration": "2m"}), &[]);
    let io = Recorder::default();
    let outcome = step(&stage, 10_000, &io).await.unwrap();
    assert_eq!(outcome, after(120));
    assert_eq!(
        io.saved().get("startedAt").map(String::as_str),
        Some("10000")
    );
    assert_eq!(io.logs(), ["Waiting for 2m..."]);
}

#[tokio::test]
async fn later_step_resumes_from_saved_start() {
    let stage = wait_stage(json!({"duration": "2m"}), &[("startedAt", "10000")]);
    let io = Recorder::default();
    let outcome = step(&stage, 10_000 + 45_000, &io).await.unwrap();
    assert_eq!(outcome, after(75));
    assert!(io.saved().is_empty(), "the saved start must not be reset");
    assert_eq!(io.logs(), ["45s of 2m elapsed, 1m15s left"]);
}

#[tokio::test]
async fn saved_start_then_later_step_finishes() {
    let first = wait_stage(json!({"duration": "30s"}), &[]);
    let io = Recorder::default();
    step(&first, 5_000, &io).await.unwrap();

    // The controller stores what the first step saved; the next step sees it.
    let mut second = first.clone();
    second.metadata = io.saved();
    let io = Recorder::default();
    let outcome = step(&second, 35_000, &io).await.unwrap();
    assert_eq!(outcome, StepOutcome::Done(StageResult::Success));
    assert_eq!(io.logs(), ["Waited for 30s"]);
}

#[tokio::test]
async fn remaining_time_is_exact_to_the_millisecond() {
    let stage = wait_stage(json!({"duration": "1m"}), &[("startedAt", "1000")]);
    let outcome = step(&stage, 1_001, &Recorder::default()).await.unwrap();
    assert_eq!(
        outcome,
        StepOutcome::Continue {
            after: GoDuration::from_millis(59_999)
        }
    );
}

#[tokio::test]
async fn unreadable_saved_start_restarts_the_wait() {
    let stage = wait_stage(json!({"duration": "10s"}), &[("startedAt", "yesterday")]);
    let io = Recorder::default();
    let outcome = step(&stage, 7_000, &io).await.unwrap();
    assert_eq!(outcome, after(10));
    assert_eq!(
        io.saved().get("startedAt").map(String::as_str),
        Some("7000")
    );
}

#[tokio::test]
async fn no_continue_without_a_saved_start() {
    let stage = wait_stage(json!({"duration": "10s"}), &[]);
    let io = Recorder::failing_saves();
    let err = step(&stage, 7_000, &io).await.unwrap_err();
    assert!(matches!(err, StepError::Transient { .. }), "{err:?}");
}

#[tokio::test]
async fn invalid_stored_with_fails_the_step() {
    let mut stage = wait_stage(Value::Null, &[]);
    stage.with = json!({"duration": "soon"});
    let err = step(&stage, 7_000, &Recorder::default()).await.unwrap_err();
    match err {
        StepError::Permanent(message) => {
            assert!(message.to_string().contains("with.duration"), "{message}")
        }
        other => panic!("expected a permanent error, got {other:?}"),
    }
}
