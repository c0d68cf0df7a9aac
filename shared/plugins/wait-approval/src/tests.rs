//! Tests for WAIT_APPROVAL: validation, who may approve, and when a step finishes.

use std::path::Path;

use gannet_sdk::fixture::RecordingIo as Recorder;

use gannet_domain::deployment::{Deployment, Stage};
use gannet_domain::duration::Millis;
use gannet_domain::ports::Metadata;
use gannet_domain::GoDuration;
use gannet_sdk::plugin::{
    ApproveError, Plugin, Presenter, StageResult, StepContext, StepOutcome, Steps,
};
use serde_json::{json, Value};

use super::WaitApprovalPlugin;

fn approval_stage(with: Value) -> Stage {
    let mut stage = Stage::test("approve", "WAIT_APPROVAL");
    stage.with = WaitApprovalPlugin
        .validate_stage("WAIT_APPROVAL", &with)
        .unwrap();
    stage
}

/// Approves `stage` as each of `users` in turn, merging the metadata as the store would.
fn approved(mut stage: Stage, users: &[&str]) -> Stage {
    for (i, user) in users.iter().enumerate() {
        let entries = WaitApprovalPlugin
            .approve(&stage, user, Millis(50_000 + i as u64))
            .unwrap();
        stage.metadata.extend(entries);
    }
    stage
}

async fn step(stage: &Stage, now: u64, io: &Recorder) -> StepOutcome {
    let deployment = Deployment::test().with_stages(vec![stage.clone()]);
    WaitApprovalPlugin
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
        .unwrap()
}

const POLL: StepOutcome = StepOutcome::Continue {
    after: GoDuration::from_secs(30),
};

/// Validates `with`; `Ok` is the normalised value, `Err` the field the error names.
fn check(with: Value, expected: Result<Value, &str>) {
    let got = WaitApprovalPlugin
        .validate_stage("WAIT_APPROVAL", &with)
        .map_err(|e| e.field);
    assert_eq!(got, expected.map_err(str::to_owned), "with = {with}");
}

#[test]
fn validates_with() {
    let defaults = json!({"approvers": [], "minApproverNum": 1, "timeout": "6h"});
    check(Value::Null, Ok(defaults.clone()));
    check(json!({}), Ok(defaults));
    check(
        json!({"approvers": ["alice", " bob ", "alice"], "minApproverNum": 2, "timeout": "30m"}),
        Ok(json!({"approvers": ["alice", "bob"], "minApproverNum": 2, "timeout": "30m"})),
    );
    check(
        json!({"minApproverNum": 3}),
        Ok(json!({"approvers": [], "minApproverNum": 3, "timeout": "6h"})),
    );
    check(json!({"approvers": "alice"}), Err("approvers"));
    check(json!({"approvers": ["alice", 7]}), Err("approvers[1]"));
    check(json!({"approvers": [""]}), Err("approvers[0]"));
    check(json!({"approvers": ["a,b"]}), Err("approvers[0]"));
    check(json!({"minApproverNum": 0}), Err("minApproverNum"));
    check(json!({"minApproverNum": -1}), Err("minApproverNum"));
    check(json!({"minApproverNum": 1.5}), Err("minApproverNum"));
    check(json!({"minApproverNum": "2"}), Err("minApproverNum"));
    check(
        json!({"approvers": ["alice"], "minApproverNum": 2}),
        Err("minApproverNum"),
    );
    check(json!({"timeout": "forever"}), Err("timeout"));
    check(json!({"timeout": 60}), Err("timeout"));
    check(json!({"approver": ["alice"]}), Err("approver"));
    check(json!(["alice"]), Err("with"));
}

#[test]
fn default_timeout_is_with_timeout() {
    let plugin = WaitApprovalPlugin;
    let stage = approval_stage(json!({"timeout": "45m"}));
    assert_eq!(
        plugin.default_timeout(&stage),
        GoDuration::from_secs(45 * 60)
    );
    let stage = approval_stage(Value::Null);
    assert_eq!(
        plugin.default_timeout(&stage),
        GoDuration::from_secs(6 * 3600)
    );
}

#[test]
fn approval_by_a_non_approver_is_refused() {
    let stage = approval_stage(json!({"approvers": ["alice", "bob"]}));
    let err = WaitApprovalPlugin
        .approve(&stage, "mallory", Millis(1))
        .unwrap_err();
    assert_eq!(
        err,
        ApproveError::NotAnApprover {
            user: "mallory".into(),
            stage: "approve".into(),
        }
    );
    assert!(
        !err.to_string().contains("alice"),
        "a refusal does not say who may approve: {err}"
    );
}

#[test]
fn approval_is_recorded_in_metadata() {
    let stage = approval_stage(json!({"approvers": ["alice", "bob"], "minApproverNum": 2}));
    let first = WaitApprovalPlugin
        .approve(&stage, "bob", Millis(1234))
        .unwrap();
    assert_eq!(
        first,
        Metadata::from([
            ("approvedBy".to_owned(), "bob".to_owned()),
            ("approvedAt".to_owned(), "1234".to_owned()),
        ])
    );
    let stage = approved(stage, &["bob"]);
    let second = WaitApprovalPlugin
        .approve(&stage, "alice", Millis(2000))
        .unwrap();
    assert_eq!(second["approvedBy"], "bob, alice");
    assert_eq!(second["approvedAt"], "2000");
}

#[test]
fn second_approval_by_the_same_user_is_refused() {
    let stage = approved(approval_stage(json!({"minApproverNum": 2})), &["alice"]);
    let err = WaitApprovalPlugin
        .approve(&stage, "alice", Millis(1))
        .unwrap_err();
    assert!(
        matches!(err, ApproveError::AlreadyApproved { .. }),
        "{err:?}"
    );
}

#[test]
fn anyone_may_approve_when_no_approvers_are_listed() {
    let stage = approval_stage(Value::Null);
    assert!(WaitApprovalPlugin
        .approve(&stage, "carol", Millis(1))
        .is_ok());
    assert!(WaitApprovalPlugin.approve(&stage, " ", Millis(1)).is_err());
}

#[test]
fn other_stages_are_not_approvable() {
    let stage = Stage::test("wait", "WAIT");
    let err = WaitApprovalPlugin
        .approve(&stage, "alice", Millis(1))
        .unwrap_err();
    assert!(matches!(err, ApproveError::NotApprovable { .. }), "{err:?}");
}

#[tokio::test]
async fn without_approval_the_stage_waits_and_records_its_start() {
    let stage = approval_stage(json!({"approvers": ["alice"]}));
    let io = Recorder::default();
    assert_eq!(step(&stage, 10_000, &io).await, POLL);
    assert_eq!(io.saved()["waitStartedAt"], "10000");
    assert_eq!(
        io.logs(),
        ["Waiting for approval from at least 1 user (approvers: alice)..."]
    );
}

#[tokio::test]
async fn one_approval_finishes_the_default_stage() {
    let stage = approved(approval_stage(json!({"approvers": ["alice"]})), &["alice"]);
    let io = Recorder::default();
    let outcome = step(&stage, 10_000, &io).await;
    assert_eq!(outcome, StepOutcome::Done(StageResult::Success));
    assert!(io
        .logs()
        .contains(&"This stage has been approved by 1 user (alice)".to_owned()));
}

#[tokio::test]
async fn two_approvers_are_needed_when_min_approver_num_is_two() {
    let stage =
        approval_stage(json!({"approvers": ["alice", "bob", "carol"], "minApproverNum": 2}));
    let mut stage = approved(stage, &["carol"]);
    stage
        .metadata
        .insert("waitStartedAt".into(), "10000".into());

    let io = Recorder::default();
    assert_eq!(step(&stage, 20_000, &io).await, POLL);
    assert_eq!(
        io.logs(),
        ["Got approval from \"carol\"", "Waiting for 1 other user..."]
    );
    stage.metadata.extend(io.saved());

    let stage = approved(stage, &["alice"]);
    let io = Recorder::default();
    assert_eq!(
        step(&stage, 30_000, &io).await,
        StepOutcome::Done(StageResult::Success)
    );
    assert_eq!(
        io.logs(),
        [
            "Got approval from \"alice\"",
            "This stage has been approved by 2 users (carol, alice)"
        ]
    );
}

#[tokio::test]
async fn the_stage_fails_when_the_timeout_passes_without_enough_approvals() {
    let mut stage = approval_stage(json!({"timeout": "1h", "minApproverNum": 2}));
    stage.metadata.insert("waitStartedAt".into(), "0".into());

    let near_the_end = step(&stage, 3_600_000 - 5_000, &Recorder::default()).await;
    assert_eq!(
        near_the_end,
        StepOutcome::Continue {
            after: GoDuration::from_secs(5)
        }
    );

    let outcome = step(&stage, 3_600_000, &Recorder::default()).await;
    assert_eq!(
        outcome,
        StepOutcome::Done(StageResult::Failure {
            reason: "timed out after 1h waiting for 2 more approvals".into()
        })
    );
}

#[test]
fn its_row_names_the_approvers_and_who_approved() {
    let stage = approval_stage(json!({"approvers": ["alice", "bob"], "minApproverNum": 2}));
    assert_eq!(
        WaitApprovalPlugin.summary(&stage),
        "approvers: alice, bob (2 needed)"
    );
    assert!(WaitApprovalPlugin.approved_by(&stage).is_empty());
    let stage = approved(stage, &["bob", "alice"]);
    assert_eq!(WaitApprovalPlugin.approved_by(&stage), ["bob", "alice"]);
    let anyone = approval_stage(Value::Null);
    assert_eq!(WaitApprovalPlugin.summary(&anyone), "approvers: anyone");
}
