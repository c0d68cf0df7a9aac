//! Table tests for the deployment state machine.

use super::*;
use crate::deployment::StageStatus as S;
use crate::deployment::{CancelMode, CancelRequest, Deployment, DeploymentStatus as D, Stage};

fn secs(s: u64) -> GoDuration {
    GoDuration::from_secs(s)
}

/// A two-stage pipeline with a rollback stage for the first.
fn pipeline() -> Deployment {
    Deployment::test().with_stages(vec![
        Stage::test("build", "SCRIPT_RUN"),
        Stage::test("wait", "WAIT"),
        Stage::test_rollback("build", "SCRIPT_RUN_ROLLBACK"),
    ])
}

fn statuses(d: &Deployment) -> Vec<(&str, S)> {
    d.stages.iter().map(|s| (s.id.as_str(), s.status)).collect()
}

fn transition(action: Action) -> Transition {
    match action {
        Action::Transition(t) => *t,
        other => panic!("expected a transition, got {other:?}"),
    }
}

/// Runs stage `index`'s step with `outcome` at `now`, starting it first.
fn step(d: &Deployment, outcome: StepOutcome, now: u64) -> Transition {
    let Action::Run { index } = next_action(d, Millis(now)) else {
        panic!("expected a step to run in {:?}", statuses(d));
    };
    let started = start_stage(d, index, Millis(now));
    apply_outcome(&started, index, &outcome, Millis(now))
}

const OK: StepOutcome = StepOutcome::Done(StageResult::Success);

fn failed(reason: &str) -> StepOutcome {
    StepOutcome::Done(StageResult::Failure {
        reason: reason.into(),
    })
}

#[test]
fn happy_path_runs_each_stage_then_succeeds() {
    let d = pipeline();
    let t1 = step(&d, OK, 2000);
    assert_eq!(t1.next, Next::Step { after: secs(0) });
    assert_eq!(t1.deployment.status, D::Running);
    assert_eq!(t1.deployment.seq, d.seq + 1);
    let t2 = step(&t1.deployment, OK, 3000);
    assert_eq!(t2.next, Next::Finished);
    assert_eq!(t2.deployment.status, D::Success);
    assert_eq!(
        statuses(&t2.deployment),
        [
            ("build", S::Success),
            ("wait", S::Success),
            ("rollback-build", S::NotStartedYet)
        ]
    );
    assert_eq!(next_action(&t2.deployment, Millis(4000)), Action::Nothing);
}

#[test]
fn continue_is_capped_at_the_nearest_deadline() {
    let d = pipeline();
    // The stage timeout is 1h from its start at t=2000: a 2h continue wakes just past it.
    let t = step(&d, StepOutcome::Continue { after: secs(7200) }, 2000);
    assert_eq!(
        t.next,
        Next::Step {
            after: GoDuration::from_millis(3_600_001)
        }
    );
    assert_eq!(t.deployment.stages[0].status, S::Running);
    let wait = step(&d, StepOutcome::Continue { after: secs(5) }, 2000);
    assert_eq!(wait.next, Next::Step { after: secs(5) });
    assert_eq!(wait.deployment.due_at, Millis(7000));
}

#[test]
fn failure_rolls_back_then_ends_failure() {
    let d = pipeline();
    let t = step(&d, failed("exit 1"), 2000);
    assert_eq!(t.deployment.status, D::RollingBack);
    assert!(
        t.deployment.stages[2].visible,
        "rollback stage shown once it runs"
    );
    let done = step(&t.deployment, OK, 3000);
    assert_eq!(done.deployment.status, D::Failure);
    assert_eq!(done.next, Next::Finished);
    assert!(done.deployment.status_reason.contains("exit 1"));
    assert_eq!(
        statuses(&done.deployment),
        [
            ("build", S::Failure),
            ("wait", S::NotStartedYet),
            ("rollback-build", S::Success)
        ]
    );
}

#[test]
fn a_failed_pre_deployment_phase_ends_the_deployment_without_rollback() {
    let d = Deployment::test().with_stages(vec![
        Stage::test("pre-deployment", "PRE_DEPLOYMENT"),
        Stage::test("sync", "LAMBDA_SYNC"),
        Stage::test("post-deployment", "POST_DEPLOYMENT"),
        Stage::test_rollback("sync", "LAMBDA_ROLLBACK"),
    ]);
    let t = step(&d, failed("evaluation upstream failed"), 2000);
    assert_eq!(t.deployment.status, D::Failure);
    assert_eq!(t.next, Next::Finished);
    assert_eq!(
        statuses(&t.deployment),
        [
            ("pre-deployment", S::Failure),
            ("sync", S::NotStartedYet),
            ("post-deployment", S::NotStartedYet),
            ("rollback-sync", S::NotStartedYet)
        ]
    );
    // A failed post-deployment phase rolls the platform back, as any failed stage does.
    let t = step(&d, OK, 2000);
    let t = step(&t.deployment, OK, 3000);
    let t = step(&t.deployment, failed("task smoke failed"), 4000);
    assert_eq!(t.deployment.status, D::RollingBack);
    let done = step(&t.deployment, OK, 5000);
    assert_eq!(done.deployment.status, D::Failure);
    assert_eq!(done.deployment.stages[3].status, S::Success);
}

#[test]
fn failure_without_rollback_stages_ends_failure_at_once() {
    let d = Deployment::test().with_stages(vec![Stage::test("a", "WAIT")]);
    let t = step(&d, failed("boom"), 2000);
    assert_eq!(t.deployment.status, D::Failure);
    assert_eq!(t.next, Next::Finished);
}

#[test]
fn rollback_of_a_stage_that_never_started_is_skipped() {
    let d = Deployment::test().with_stages(vec![
        Stage::test("a", "WAIT"),
        Stage::test("b", "SCRIPT_RUN"),
        Stage::test_rollback("b", "SCRIPT_RUN_ROLLBACK"),
    ]);
    let t = step(&d, failed("boom"), 2000);
    assert_eq!(t.deployment.status, D::RollingBack);
    let t = transition(next_action(&t.deployment, Millis(2001)));
    assert_eq!(t.deployment.status, D::Failure);
    assert_eq!(t.deployment.stages[2].status, S::Skipped);
}

#[test]
fn a_failing_rollback_ends_failure() {
    let d = pipeline();
    let t = step(&d, failed("boom"), 2000);
    let done = step(&t.deployment, failed("rollback broke"), 3000);
    assert_eq!(done.deployment.status, D::Failure);
    assert!(done.deployment.status_reason.starts_with("rollback failed"));
}

#[test]
fn timeouts_are_enforced_rollback_included() {
    struct Case {
        name: &'static str,
        deployment: Deployment,
        now: u64,
        status: D,
        reason: &'static str,
    }
    let mut stuck_rollback = pipeline().with_status(D::RollingBack);
    stuck_rollback.stages[0] = Stage::test("build", "SCRIPT_RUN").finished(S::Failure);
    stuck_rollback.stages[2] =
        Stage::test_rollback("build", "SCRIPT_RUN_ROLLBACK").running_since(5000);
    let mut long_deploy = pipeline().with_status(D::Running);
    long_deploy.stages[0] = Stage::test("build", "SCRIPT_RUN").running_since(1000);
    long_deploy.timeout = secs(60);
    let mut stage_over = pipeline().with_status(D::Running);
    stage_over.stages[0] = Stage::test("build", "SCRIPT_RUN").running_since(1000);
    let cases = [
        Case {
            name: "stage timeout rolls back",
            deployment: stage_over,
            now: 1000 + 3_600_001,
            status: D::RollingBack,
            reason: "stage build timed out after 1h",
        },
        Case {
            name: "deployment timeout rolls back",
            deployment: long_deploy,
            now: 1000 + 60_001,
            status: D::RollingBack,
            reason: "deployment timed out after 1m",
        },
        Case {
            name: "stuck rollback fails",
            deployment: stuck_rollback,
            now: 5000 + 3_600_001,
            status: D::Failure,
            reason: "rollback failed: stage rollback-build timed out after 1h",
        },
    ];
    for c in cases {
        let t = transition(next_action(&c.deployment, Millis(c.now)));
        assert_eq!(t.deployment.status, c.status, "{}", c.name);
        assert_eq!(t.deployment.status_reason, c.reason, "{}", c.name);
    }
}

#[test]
fn cancel_modes() {
    let cancel = |mode| CancelRequest {
        mode,
        by: "alice".into(),
        at: Millis(2500),
    };
    let running = step(&pipeline(), OK, 2000).deployment; // build done, wait next
    let mut with_rb = running.clone();
    with_rb.cancel = Some(cancel(CancelMode::WithRollback));
    let t = transition(next_action(&with_rb, Millis(3000)));
    assert_eq!(t.deployment.status, D::RollingBack);
    assert_eq!(t.deployment.stages[1].status, S::Cancelled);
    let done = step(&t.deployment, OK, 3100);
    assert_eq!(done.deployment.status, D::Cancelled);
    assert_eq!(done.deployment.stages[2].status, S::Success);

    let mut without = running;
    without.cancel = Some(cancel(CancelMode::WithoutRollback));
    let t = transition(next_action(&without, Millis(3000)));
    assert_eq!(t.deployment.status, D::Cancelled);
    assert_eq!(t.next, Next::Finished);
    assert_eq!(
        t.deployment.stages[2].status,
        S::NotStartedYet,
        "no rollback ran"
    );
    assert_eq!(t.deployment.status_reason, "cancelled by alice");
}

#[test]
fn cancel_before_any_stage_skips_rollback() {
    let mut d = pipeline();
    d.cancel = Some(CancelRequest {
        mode: CancelMode::WithRollback,
        by: String::new(),
        at: Millis(1500),
    });
    // Nothing started, so nothing needs undoing: the deployment ends at once.
    let t = transition(next_action(&d, Millis(2000)));
    assert_eq!(t.deployment.status, D::Cancelled);
    assert_eq!(t.next, Next::Finished);
    assert!(!t.deployment.stages[2].visible);
}

#[test]
fn skipped_stages_are_passed_over_and_empty_pipelines_succeed() {
    let mut d = pipeline();
    d.stages[0].status = S::Skipped;
    assert_eq!(next_action(&d, Millis(2000)), Action::Run { index: 1 });
    let empty = Deployment::test();
    let t = transition(next_action(&empty, Millis(2000)));
    assert_eq!(t.deployment.status, D::Success);
}

#[test]
fn start_stage_keeps_seq_and_is_idempotent() {
    let d = pipeline();
    let once = start_stage(&d, 0, Millis(2000));
    assert_eq!(once.seq, d.seq);
    assert_eq!(once.stages[0].started_at, Some(Millis(2000)));
    let twice = start_stage(&once, 0, Millis(9000));
    assert_eq!(
        twice.stages[0].started_at,
        Some(Millis(2000)),
        "a redelivery keeps the start"
    );
}

#[test]
fn pending_and_terminal_deployments_do_nothing() {
    for status in [D::Pending, D::Success, D::Failure, D::Cancelled] {
        assert_eq!(
            next_action(&pipeline().with_status(status), Millis(2000)),
            Action::Nothing
        );
    }
}

#[test]
fn an_exiting_stage_skips_the_rest_and_ends_success() {
    let d = pipeline();
    let exited = StepOutcome::Done(StageResult::Exited {
        reason: "no changes".into(),
    });
    let t = step(&d, exited, 2000);
    assert_eq!(t.next, Next::Finished);
    assert_eq!(t.deployment.status, D::Success);
    assert_eq!(
        statuses(&t.deployment),
        vec![
            ("build", S::Exited),
            ("wait", S::Skipped),
            ("rollback-build", S::NotStartedYet)
        ]
    );
    assert!(
        t.deployment.status_reason.contains("no changes"),
        "{}",
        t.deployment.status_reason
    );
    assert_eq!(next_action(&t.deployment, Millis(3000)), Action::Nothing);
}
