//! Deployments against moto: the quick sync, the canary, rollback, cancel, duplicate steps,
//! refused input. State is read back through the Lambda API.

use gannet_domain::deployment::{CancelMode, DeploymentStatus, StageStatus, SyncStrategy};

use super::harness::*;
use crate::routing::AliasRouting;
use crate::{TAG_APP, TAG_COMMIT, TAG_MANAGED_BY};

/// A function deployed by a first deployment (quick sync) of commit `a`, with the canary
/// pipeline configured for later commits.
async fn deployed(name: &str, zip: &[u8]) -> Commit {
    ensure_role().await;
    let a = app_commit(
        'a',
        &app_config(CANARY),
        &function_yaml(name, ROLE, ""),
        zip,
    );
    let mut run = Run::plan(plugin(moto_target("Service")), &a, None);
    run.run_all(
        &Commits {
            target: &a,
            running: None,
        },
        Delivery::Once,
    )
    .await;
    assert_eq!(
        run.deployment.status,
        DeploymentStatus::Success,
        "{:#?}",
        run.logs
    );
    a
}

fn all_to(version: &str) -> Option<AliasRouting> {
    Some(AliasRouting::all_to(version))
}

fn split(new: &str, old: &str, old_weight: f64) -> Option<AliasRouting> {
    Some(AliasRouting {
        version: new.into(),
        weights: [(old.to_owned(), old_weight)].into(),
    })
}

#[tokio::test]
async fn first_deployment_is_a_quick_sync_to_all_traffic() {
    ensure_role().await;
    let name = unique("first");
    let zip = zip_bytes("v1");
    let a = app_commit(
        'a',
        &app_config(CANARY),
        &function_yaml(&name, ROLE, "tags: {team: web}"),
        &zip,
    );
    let mut run = Run::plan(plugin(moto_target("Service")), &a, None);
    assert_eq!(run.deployment.strategy, Some(SyncStrategy::QuickSync));
    assert_eq!(run.stage_names(), ["LAMBDA_SYNC", "LAMBDA_ROLLBACK"]);
    run.run_all(
        &Commits {
            target: &a,
            running: None,
        },
        Delivery::Twice,
    )
    .await;

    assert_eq!(
        run.deployment.status,
        DeploymentStatus::Success,
        "{:#?}",
        run.logs
    );
    let state = function_state(&name, "Service").await;
    assert_eq!(state.versions, ["1"]);
    assert_eq!(state.alias, all_to("1"));
    assert_eq!(state.code_sha256, sha256_b64(&zip));
    let tags = tags_of(&name).await;
    assert_eq!(tags[TAG_MANAGED_BY], "gannet");
    assert_eq!(tags[TAG_APP], APP);
    assert_eq!(tags[TAG_COMMIT], a.sha.as_str());
    assert_eq!(tags["team"], "web");
    let sync = &run.deployment.stages[0];
    assert_eq!(sync.metadata["version"], "1");
    assert_eq!(sync.metadata["aliasBefore"], "none");
    let log = run.stage_log("lambda-sync");
    assert!(
        log.contains("Alias Service routes: version 1 100% (was: no alias)"),
        "{log}"
    );
    assert_eq!(run.deployment.stages[1].status, StageStatus::NotStartedYet);
}

#[tokio::test]
async fn the_alias_name_comes_from_the_deploy_target() {
    ensure_role().await;
    let name = unique("alias");
    let a = app_commit(
        'a',
        &app_config(""),
        &function_yaml(&name, ROLE, ""),
        &zip_bytes("v1"),
    );
    let mut run = Run::plan(plugin(moto_target("live")), &a, None);
    run.run_all(
        &Commits {
            target: &a,
            running: None,
        },
        Delivery::Once,
    )
    .await;
    assert_eq!(
        run.deployment.status,
        DeploymentStatus::Success,
        "{:#?}",
        run.logs
    );
    assert_eq!(function_state(&name, "live").await.alias, all_to("1"));
    assert_eq!(function_state(&name, "Service").await.alias, None);
}

/// Plans the canary of commit `b` over the running `a`, with `delivery`, and checks the alias
/// after every stage.
async fn canary(delivery: Delivery) {
    let name = unique("canary");
    let a = deployed(&name, &zip_bytes("v1")).await;
    let b_zip = zip_bytes("v2");
    let b = app_commit(
        'b',
        &app_config(CANARY),
        &function_yaml(&name, ROLE, ""),
        &b_zip,
    );
    let commits = Commits {
        target: &b,
        running: Some(&a),
    };
    let mut run = Run::plan(plugin(moto_target("Service")), &b, Some(&a));
    assert_eq!(
        run.stage_names(),
        [
            "LAMBDA_CANARY_ROLLOUT",
            "LAMBDA_PROMOTE",
            "LAMBDA_PROMOTE",
            "LAMBDA_ROLLBACK"
        ]
    );

    run.run_stage(&commits, delivery).await;
    let state = function_state(&name, "Service").await;
    assert_eq!(state.versions, ["1", "2"]);
    assert_eq!(
        state.alias,
        all_to("1"),
        "the canary leaves the alias alone"
    );
    assert_eq!(state.code_sha256, sha256_b64(&b_zip));

    run.run_stage(&commits, delivery).await;
    assert_eq!(
        function_state(&name, "Service").await.alias,
        split("2", "1", 0.9)
    );

    run.run_stage(&commits, delivery).await;
    let state = function_state(&name, "Service").await;
    assert_eq!(state.alias, all_to("2"));
    assert_eq!(state.versions, ["1", "2"], "no version published twice");

    run.run_all(&commits, delivery).await;
    assert_eq!(
        run.deployment.status,
        DeploymentStatus::Success,
        "{:#?}",
        run.logs
    );
    let log = run.stage_log("stage-1");
    assert!(
        log.contains("Alias Service routes: version 2 10%, version 1 90%"),
        "{log}"
    );
}

#[tokio::test]
async fn the_canary_sets_exactly_90_10_then_100() {
    canary(Delivery::Once).await;
}

#[tokio::test]
async fn every_step_run_twice_leaves_the_same_state() {
    canary(Delivery::Twice).await;
}

/// Deploys `a`, then runs commit `b` (memory 256, a new zip) to PROMOTE 10, and returns the
/// run there.
async fn canary_at_10_percent(name: &str, delivery: Delivery) -> (Commit, Commit, Run) {
    let a = deployed(name, &zip_bytes("v1")).await;
    let b = app_commit(
        'b',
        &app_config(CANARY),
        &function_yaml(name, ROLE, "environments: {MODE: canary}")
            .replace("memory: 128", "memory: 256"),
        &zip_bytes("v2"),
    );
    let mut run = Run::plan(plugin(moto_target("Service")), &b, Some(&a));
    let commits = Commits {
        target: &b,
        running: Some(&a),
    };
    run.run_stage(&commits, delivery).await;
    run.run_stage(&commits, delivery).await;
    assert_eq!(
        function_state(name, "Service").await.alias,
        split("2", "1", 0.9)
    );
    (a, b, run)
}

#[tokio::test]
async fn cancel_with_rollback_mid_canary_restores_routing_and_configuration() {
    let name = unique("rollback");
    let (a, b, mut run) = canary_at_10_percent(&name, Delivery::Twice).await;
    let before = function_state(&name, "Service").await;

    run.cancel(CancelMode::WithRollback);
    run.run_all(
        &Commits {
            target: &b,
            running: Some(&a),
        },
        Delivery::Twice,
    )
    .await;

    assert_eq!(run.deployment.status, DeploymentStatus::Cancelled);
    let rollback = run.deployment.stages.last().expect("rollback stage");
    assert_eq!(rollback.status, StageStatus::Success, "{:#?}", run.logs);
    let state = function_state(&name, "Service").await;
    assert_eq!(
        state.alias,
        all_to("1"),
        "the routing before the deployment, exactly"
    );
    assert_eq!(
        state.versions, before.versions,
        "rollback publishes nothing"
    );
    assert_eq!(state.code_sha256, sha256_b64(&zip_bytes("v1")));
    let live = lambda_client()
        .await
        .get_function()
        .function_name(&name)
        .send()
        .await
        .expect("GetFunction");
    let config = live.configuration().expect("configuration");
    assert_eq!(config.memory_size(), Some(128));
    assert!(config
        .environment()
        .and_then(|e| e.variables())
        .is_none_or(|v| v.is_empty()));
    assert_eq!(tags_of(&name).await[TAG_COMMIT], a.sha.as_str());
}

#[tokio::test]
async fn cancel_without_rollback_leaves_the_canary_as_it_is() {
    let name = unique("norollback");
    let (a, b, mut run) = canary_at_10_percent(&name, Delivery::Once).await;
    run.cancel(CancelMode::WithoutRollback);
    run.run_all(
        &Commits {
            target: &b,
            running: Some(&a),
        },
        Delivery::Once,
    )
    .await;
    assert_eq!(run.deployment.status, DeploymentStatus::Cancelled);
    assert_eq!(
        run.deployment.stages.last().map(|s| s.status),
        Some(StageStatus::NotStartedYet)
    );
    assert_eq!(
        function_state(&name, "Service").await.alias,
        split("2", "1", 0.9)
    );
}

#[tokio::test]
async fn a_role_lambda_refuses_fails_the_stage_with_awss_message_and_rolls_back() {
    let old = unique("role-old");
    let a = deployed(&old, &zip_bytes("v1")).await;
    // The new commit moves the app to a new function whose role does not exist in IAM.
    let new = unique("role-new");
    let missing = "arn:aws:iam::123456789012:role/no-such-role";
    let b = app_commit(
        'b',
        &app_config(CANARY),
        &function_yaml(&new, missing, ""),
        &zip_bytes("v2"),
    );
    let mut run = Run::plan(plugin(moto_target("Service")), &b, Some(&a));
    run.run_all(
        &Commits {
            target: &b,
            running: Some(&a),
        },
        Delivery::Twice,
    )
    .await;

    assert_eq!(run.deployment.status, DeploymentStatus::Failure);
    let canary = &run.deployment.stages[0];
    assert_eq!(canary.status, StageStatus::Failure);
    assert!(
        run.deployment.status_reason.contains(
            "Lambda CreateFunction was refused: InvalidParameterValueException: The role defined for the function cannot be assumed by Lambda."
        ),
        "{}",
        run.deployment.status_reason
    );
    let rollback = run.deployment.stages.last().expect("rollback stage");
    assert_eq!(rollback.status, StageStatus::Success, "{:#?}", run.logs);
    assert_eq!(function_state(&old, "Service").await.alias, all_to("1"));
}

#[tokio::test]
async fn a_first_deployment_that_fails_cannot_roll_back_and_says_why() {
    ensure_role().await;
    let name = unique("badrole");
    let a = app_commit(
        'a',
        &app_config(""),
        &function_yaml(&name, "not-a-role", ""),
        &zip_bytes("v1"),
    );
    let mut run = Run::plan(plugin(moto_target("Service")), &a, None);
    run.run_all(
        &Commits {
            target: &a,
            running: None,
        },
        Delivery::Once,
    )
    .await;

    assert_eq!(run.deployment.status, DeploymentStatus::Failure);
    let sync = run.stage_log("lambda-sync");
    assert!(sync.is_empty() || !sync.contains("Published"), "{sync}");
    let reason = &run.deployment.stages[0].status_reason;
    assert!(
        reason.contains("ValidationException") && reason.contains("'not-a-role' at 'role'"),
        "AWS's message: {reason}"
    );
    let rollback = &run.deployment.stages[1];
    assert_eq!(rollback.status, StageStatus::Failure);
    assert!(
        rollback.status_reason.contains("first deployment"),
        "{}",
        rollback.status_reason
    );
}

#[tokio::test]
async fn a_bad_manifest_fails_the_plan_and_the_step_naming_the_field_and_changes_nothing() {
    let name = unique("badmanifest");
    let a = deployed(&name, &zip_bytes("v1")).await;
    let b = app_commit(
        'b',
        &app_config(CANARY),
        &function_yaml(&name, ROLE, "").replace("memory: 128", "memory: 64"),
        &zip_bytes("v2"),
    );
    let refused = Run::try_plan(plugin(moto_target("Service")), &b, Some(&a))
        .err()
        .expect("the plan is refused")
        .to_string();
    assert!(
        refused.starts_with(
            "spec.input.functionManifestFile: function.yaml: spec.memory: 64 is out of range"
        ),
        "{refused}"
    );
    // A step still refuses it (a deployment planned before the check existed): plan the same
    // commit with a valid manifest, then run its steps on the bad one.
    let planned_from = app_commit(
        'b',
        &app_config(CANARY),
        &function_yaml(&name, ROLE, ""),
        &zip_bytes("v2"),
    );
    let mut run = Run::plan(plugin(moto_target("Service")), &planned_from, Some(&a));
    run.run_all(
        &Commits {
            target: &b,
            running: Some(&a),
        },
        Delivery::Once,
    )
    .await;
    assert_eq!(run.deployment.status, DeploymentStatus::Failure);
    let reason = &run.deployment.stages[0].status_reason;
    assert!(
        reason.contains("function.yaml: spec.memory: 64 is out of range"),
        "{reason}"
    );
    let state = function_state(&name, "Service").await;
    assert_eq!(
        (state.versions, state.alias),
        (vec!["1".to_owned()], all_to("1"))
    );
}

#[tokio::test]
async fn s3_code_is_deployed_once() {
    ensure_role().await;
    let name = unique("s3");
    let bucket = unique("code").to_lowercase();
    let object = zip_bytes("from s3");
    put_object(&bucket, "web.zip", object.clone()).await;
    let manifest = function_yaml(&name, ROLE, &format!("s3Bucket: {bucket}\ns3Key: web.zip"));
    let a = app_commit('a', &app_config(""), &manifest, &zip_bytes("unused"));
    let mut run = Run::plan(plugin(moto_target("Service")), &a, None);
    run.run_all(
        &Commits {
            target: &a,
            running: None,
        },
        Delivery::Twice,
    )
    .await;
    assert_eq!(
        run.deployment.status,
        DeploymentStatus::Success,
        "{:#?}",
        run.logs
    );
    let state = function_state(&name, "Service").await;
    assert_eq!(state.versions, ["1"]);
    assert_eq!(state.alias, all_to("1"));
    assert_eq!(state.code_sha256, sha256_b64(&object));
}

/// The assumed role's credentials come from STS at the target's endpoint too: were STS called
/// on AWS itself, the step would fail to connect.
#[tokio::test]
async fn a_target_with_a_role_assumes_it_through_sts() {
    ensure_role().await;
    let name = unique("assume");
    let a = app_commit(
        'a',
        &app_config(""),
        &function_yaml(&name, ROLE, ""),
        &zip_bytes("v1"),
    );
    let target = crate::DeployTarget {
        role_arn: Some(ROLE.to_owned()),
        ..moto_target("Service")
    };
    let mut run = Run::plan(plugin(target), &a, None);
    run.run_all(
        &Commits {
            target: &a,
            running: None,
        },
        Delivery::Once,
    )
    .await;
    assert_eq!(
        run.deployment.status,
        DeploymentStatus::Success,
        "{:#?}",
        run.logs
    );
    assert_eq!(function_state(&name, "Service").await.alias, all_to("1"));
}
