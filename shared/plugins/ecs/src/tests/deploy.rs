//! Deployments against moto: the quick sync, the full canary, rollback from the middle of it,
//! duplicate steps, stale task sets, the EXTERNAL controller check, desiredCount left alone, a
//! standalone task. State is read back through the ECS and ELBv2 APIs after every stage.

use gannet_domain::deployment::{CancelMode, DeploymentStatus, StageStatus, SyncStrategy};

use super::harness::*;
use crate::routing::Weights;
use crate::{TAG_APP, TAG_COMMIT, TAG_MANAGED_BY};

fn w(primary: i32, canary: i32) -> Option<Weights> {
    Some(Weights { primary, canary })
}

/// One task set row: role tag, ECS status, scale, target group, image.
async fn rows(world: &World) -> Vec<(String, String, f64, String, String)> {
    let mut out = Vec::new();
    for r in world.task_sets().await {
        let image = world.image_of(&r.task_definition).await;
        out.push((
            r.variant,
            r.status,
            r.scale,
            r.target_groups.join(","),
            image,
        ));
    }
    out
}

fn row(
    variant: &str,
    status: &str,
    scale: f64,
    tg: &str,
    image: &str,
) -> (String, String, f64, String, String) {
    (
        variant.into(),
        status.into(),
        scale,
        tg.into(),
        image.into(),
    )
}

fn commit(world: &World, digit: char, pipeline: &str, image: &str) -> Commit {
    app_commit(
        digit,
        &app_config(world, pipeline, ""),
        &servicedef(world, "desiredCount: 2"),
        &taskdef("web", image),
    )
}

/// Deploys `a` (nginx:1) by quick sync, with the canary pipeline configured for later commits.
async fn first_deployment(world: &World, delivery: Delivery) -> Commit {
    let a = commit(world, 'a', CANARY, "nginx:1");
    let mut run = Run::plan(world, &a, None);
    assert_eq!(run.deployment.strategy, Some(SyncStrategy::QuickSync));
    assert_eq!(run.stage_names(), ["ECS_SYNC", "ECS_ROLLBACK"]);
    run.run_all(
        &Commits {
            target: &a,
            running: None,
        },
        delivery,
    )
    .await;
    assert_eq!(
        run.deployment.status,
        DeploymentStatus::Success,
        "{:#?} {:#?}",
        run.logs,
        run.deployment
            .stages
            .iter()
            .map(|s| &s.status_reason)
            .collect::<Vec<_>>()
    );
    assert_eq!(
        rows(world).await,
        [row(
            "primary",
            "PRIMARY",
            100.0,
            &world.primary_tg,
            "nginx:1"
        )]
    );
    assert_eq!(world.weights().await, (w(100, 0), w(100, 0)));
    let (desired, tags) = world.service_state().await;
    assert_eq!(desired, 2);
    assert_eq!(tags[TAG_MANAGED_BY], "gannet");
    assert_eq!(tags[TAG_APP], APP);
    assert_eq!(tags[TAG_COMMIT], a.sha.as_str());
    assert_eq!(tags["team"], "web");
    a
}

/// The canary, every stage checked through the AWS APIs, then a rollback from the
/// middle of the same pipeline on the next commit.
async fn canary(delivery: Delivery) {
    let world = World::new().await;
    let a = first_deployment(&world, delivery).await;
    let b = commit(&world, 'b', CANARY, "nginx:2");
    let commits = Commits {
        target: &b,
        running: Some(&a),
    };
    let mut run = Run::plan(&world, &b, Some(&a));
    assert_eq!(
        run.stage_names(),
        [
            "ECS_CANARY_ROLLOUT",
            "ECS_TRAFFIC_ROUTING",
            "WAIT",
            "ECS_PRIMARY_ROLLOUT",
            "ECS_TRAFFIC_ROUTING",
            "ECS_CANARY_CLEAN",
            "ECS_ROLLBACK"
        ]
    );
    let (p, c) = (world.primary_tg.as_str(), world.canary_tg.as_str());

    run.run_stage(&commits, delivery).await;
    assert_eq!(
        rows(&world).await,
        [
            row("canary", "ACTIVE", 30.0, c, "nginx:2"),
            row("primary", "PRIMARY", 100.0, p, "nginx:1")
        ],
        "canary at scale 30 on the canary target group"
    );
    assert_eq!(
        world.weights().await,
        (w(100, 0), w(100, 0)),
        "the canary gets no traffic yet"
    );

    run.run_stage(&commits, delivery).await;
    assert_eq!(
        world.weights().await,
        (w(80, 20), w(80, 20)),
        "listener and rule both at 80/20"
    );

    run.run_stage(&commits, delivery).await; // WAIT
    assert_eq!(run.deployment.stages[2].status, StageStatus::Success);

    run.run_stage(&commits, delivery).await;
    assert_eq!(
        rows(&world).await,
        [
            row("canary", "ACTIVE", 30.0, c, "nginx:2"),
            row("primary", "PRIMARY", 100.0, p, "nginx:2")
        ],
        "the old primary is gone; the canary still serves its 20% (PipeCD #4710)"
    );
    assert_eq!(world.weights().await, (w(80, 20), w(80, 20)));

    run.run_stage(&commits, delivery).await;
    assert_eq!(world.weights().await, (w(100, 0), w(100, 0)));
    assert_eq!(
        rows(&world).await.len(),
        2,
        "the canary stays until ECS_CANARY_CLEAN"
    );

    run.run_stage(&commits, delivery).await;
    assert_eq!(
        rows(&world).await,
        [row("primary", "PRIMARY", 100.0, p, "nginx:2")]
    );
    run.run_all(&commits, delivery).await;
    assert_eq!(
        run.deployment.status,
        DeploymentStatus::Success,
        "{:#?} {:#?}",
        run.logs,
        run.deployment
            .stages
            .iter()
            .map(|s| &s.status_reason)
            .collect::<Vec<_>>()
    );
    assert_eq!(run.deployment.stages[6].status, StageStatus::NotStartedYet);
    assert_eq!(world.service_state().await.1[TAG_COMMIT], b.sha.as_str());

    // The same pipeline for commit c, cancelled with rollback after its primary rollout.
    let c_commit = commit(&world, 'c', CANARY, "nginx:3");
    let commits = Commits {
        target: &c_commit,
        running: Some(&b),
    };
    let mut run = Run::plan(&world, &c_commit, Some(&b));
    for _ in 0..4 {
        run.run_stage(&commits, delivery).await;
    }
    assert_eq!(
        rows(&world).await,
        [
            row("canary", "ACTIVE", 30.0, c, "nginx:3"),
            row("primary", "PRIMARY", 100.0, p, "nginx:3")
        ]
    );
    assert_eq!(world.weights().await, (w(80, 20), w(80, 20)));
    run.cancel(CancelMode::WithRollback);
    run.run_all(&commits, delivery).await;
    assert_eq!(run.deployment.status, DeploymentStatus::Cancelled);
    let rollback = run.deployment.stages.last().expect("rollback stage");
    assert_eq!(rollback.status, StageStatus::Success, "{:#?}", run.logs);
    assert_eq!(
        world.weights().await,
        (w(100, 0), w(100, 0)),
        "weights reset to 100/0"
    );
    assert_eq!(
        rows(&world).await,
        [row("primary", "PRIMARY", 100.0, p, "nginx:2")],
        "the running commit's task definition at 100%, the canary removed"
    );
    assert_eq!(world.service_state().await.1[TAG_COMMIT], b.sha.as_str());
}

#[tokio::test]
async fn a_full_canary_then_a_rollback_from_its_middle() {
    canary(Delivery::Once).await;
}

#[tokio::test]
async fn every_step_delivered_twice_leaves_one_task_set_per_role() {
    canary(Delivery::Twice).await;
}

#[tokio::test]
async fn cancel_with_rollback_before_the_primary_rollout_keeps_the_old_primary() {
    let world = World::new().await;
    let a = first_deployment(&world, Delivery::Once).await;
    let before = world.task_sets().await;
    let b = commit(&world, 'b', CANARY, "nginx:2");
    let commits = Commits {
        target: &b,
        running: Some(&a),
    };
    let mut run = Run::plan(&world, &b, Some(&a));
    run.run_stage(&commits, Delivery::Once).await;
    run.run_stage(&commits, Delivery::Once).await;
    assert_eq!(world.weights().await, (w(80, 20), w(80, 20)));
    run.cancel(CancelMode::WithRollback);
    run.run_all(&commits, Delivery::Twice).await;
    assert_eq!(run.deployment.status, DeploymentStatus::Cancelled);
    assert_eq!(world.weights().await, (w(100, 0), w(100, 0)));
    assert_eq!(
        world.task_sets().await,
        before,
        "the same primary task set, the canary gone (PipeCD #4329)"
    );
    let log = run.stage_log("ecs-rollback");
    assert!(log.contains("keeping"), "{log}");
}

#[tokio::test]
async fn repeated_cancels_never_pile_up_task_sets() {
    let world = World::new().await;
    let a = first_deployment(&world, Delivery::Once).await;
    for (i, digit) in ['b', 'c', 'd', 'e', 'f', '1'].into_iter().enumerate() {
        let next = commit(&world, digit, CANARY, &format!("nginx:{}", i + 2));
        let commits = Commits {
            target: &next,
            running: Some(&a),
        };
        let mut run = Run::plan(&world, &next, Some(&a));
        run.run_stage(&commits, Delivery::Once).await;
        run.run_stage(&commits, Delivery::Once).await;
        run.cancel(CancelMode::WithoutRollback);
        run.run_all(&commits, Delivery::Once).await;
        assert_eq!(run.deployment.status, DeploymentStatus::Cancelled);
        let sets = rows(&world).await;
        assert_eq!(
            sets.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
            ["canary", "primary"],
            "cancel {i}: one canary (the newest) and the primary, never more (PipeCD #4692): {sets:?}"
        );
        assert_eq!(sets[0].4, format!("nginx:{}", i + 2));
    }
    // A quick sync then routes everything to the primary before removing the stale canary.
    assert_eq!(world.weights().await, (w(80, 20), w(80, 20)));
    let z = commit(&world, '2', "", "nginx:9");
    let mut run = Run::plan(&world, &z, Some(&a));
    run.run_all(
        &Commits {
            target: &z,
            running: Some(&a),
        },
        Delivery::Twice,
    )
    .await;
    assert_eq!(
        run.deployment.status,
        DeploymentStatus::Success,
        "{:#?} {:#?}",
        run.logs,
        run.deployment
            .stages
            .iter()
            .map(|s| &s.status_reason)
            .collect::<Vec<_>>()
    );
    assert_eq!(world.weights().await, (w(100, 0), w(100, 0)));
    assert_eq!(
        rows(&world).await,
        [row(
            "primary",
            "PRIMARY",
            100.0,
            &world.primary_tg,
            "nginx:9"
        )]
    );
}

#[tokio::test]
async fn a_service_on_another_deployment_controller_fails_the_stage_saying_how_to_fix_it() {
    let world = World::new().await;
    let (ecs, _) = clients().await;
    ecs.create_service()
        .cluster(&world.cluster)
        .service_name(&world.service)
        .desired_count(1)
        .send()
        .await
        .expect("CreateService");
    let a = commit(&world, 'a', "", "nginx:1");
    let mut run = Run::plan(&world, &a, None);
    run.run_all(
        &Commits {
            target: &a,
            running: None,
        },
        Delivery::Once,
    )
    .await;
    assert_eq!(run.deployment.status, DeploymentStatus::Failure);
    let reason = &run.deployment.stages[0].status_reason;
    assert!(
        reason.contains("uses the ECS deployment controller")
            && reason.contains("need the EXTERNAL deployment controller"),
        "{reason}"
    );
    assert!(world.task_sets().await.is_empty(), "nothing was deployed");
}

#[tokio::test]
async fn a_desired_count_of_zero_or_none_in_git_is_never_applied() {
    let world = World::new().await;
    let a = first_deployment(&world, Delivery::Once).await;
    let (ecs, _) = clients().await;
    ecs.update_service()
        .cluster(&world.cluster)
        .service(&world.service)
        .desired_count(5)
        .send()
        .await
        .expect("autoscaling sets 5");
    let cases = [
        ('b', "", 5),
        ('c', "desiredCount: 0", 5),
        ('d', "desiredCount: 3", 3),
    ];
    for (digit, line, expected) in cases {
        let next = app_commit(
            digit,
            &app_config(&world, "", ""),
            &servicedef(&world, line),
            &taskdef("web", "nginx:2"),
        );
        let mut run = Run::plan(&world, &next, Some(&a));
        run.run_all(
            &Commits {
                target: &next,
                running: Some(&a),
            },
            Delivery::Once,
        )
        .await;
        assert_eq!(
            run.deployment.status,
            DeploymentStatus::Success,
            "{:#?} {:#?}",
            run.logs,
            run.deployment
                .stages
                .iter()
                .map(|s| &s.status_reason)
                .collect::<Vec<_>>()
        );
        assert_eq!(world.service_state().await.0, expected, "{line:?}");
    }
}

#[tokio::test]
async fn a_standalone_task_runs_once() {
    let world = World::new().await;
    let app = format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: ECSApp\nspec:\n  name: job\n  input:\n    taskDefinitionFile: taskdef.yaml\n    clusterArn: {}\n",
        world.cluster
    );
    let family = unique("job");
    let a = app_commit('a', &app, "", &taskdef(&family, "busybox:1"));
    let mut run = Run::plan(&world, &a, None);
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
        "{:#?} {:#?}",
        run.logs,
        run.deployment
            .stages
            .iter()
            .map(|s| &s.status_reason)
            .collect::<Vec<_>>()
    );
    let started_by = run.deployment.stages[0].metadata["startedBy"].clone();
    let (ecs, _) = clients().await;
    let tasks = ecs
        .list_tasks()
        .cluster(&world.cluster)
        .started_by(&started_by)
        .send()
        .await
        .expect("ListTasks");
    assert_eq!(
        tasks.task_arns().len(),
        1,
        "one task, though the step ran twice"
    );
}
