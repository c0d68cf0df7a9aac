//! The live-state face against moto: a service deployed by a quick sync is in sync; a task
//! definition swapped in by hand (a new PRIMARY task set, as an operator would on an EXTERNAL
//! service) is drift naming the image; a canary left next to the primary and a desired count
//! changed by hand are drift too.

use aws_sdk_ecs::types::{
    ContainerDefinition, LaunchType, NetworkMode, PortMapping, Scale, ScaleUnit,
};
use gannet_config::parse_app_config;
use gannet_domain::deployment::DeploymentStatus;
use gannet_domain::drift::LiveState;
use gannet_domain::{AppId, RepoId};
use gannet_sdk::plugin::{LiveContext, LiveStates};

use super::harness::*;

async fn live(commit: &Commit) -> LiveState {
    let dir = commit.app_dir();
    let text = std::fs::read_to_string(dir.join("app.pipecd.yaml")).expect("read config");
    let app = parse_app_config("app/app.pipecd.yaml", &text).expect("app config");
    plugin()
        .live_state(LiveContext {
            app_id: &AppId::new(
                &RepoId::parse("repo").expect("repo id"),
                "app/app.pipecd.yaml",
            ),
            app: &app,
            app_dir: &dir,
            head: &gannet_domain::fixture::sha(),
            last_deployed: None,
            now: gannet_domain::duration::Millis(0),
            jobs: &gannet_sdk::jobs::NoJobs,
            preview: false,
        })
        .await
        .expect("live state")
        .read()
        .expect("the ecs plugin reads a service's live state")
}

fn fields(state: &LiveState) -> Vec<(String, String, String)> {
    state
        .drift
        .iter()
        .map(|f| (f.field.clone(), f.git.clone(), f.live.clone()))
        .collect()
}

/// Registers the task definition again with `image` (everything else as in Git), makes a
/// task set of it the only PRIMARY one and deletes the old primary: the service now serves
/// another task definition.
async fn swap_task_definition(world: &World, image: &str) {
    let (ecs, _) = clients().await;
    let td = ecs
        .register_task_definition()
        .family("web")
        .cpu("256")
        .memory("512")
        .network_mode(NetworkMode::Bridge)
        .execution_role_arn("arn:aws:iam::123456789012:role/exec")
        .container_definitions(
            ContainerDefinition::builder()
                .name("web")
                .image(image)
                .cpu(100)
                .memory(100)
                .port_mappings(PortMapping::builder().container_port(80).build())
                .build(),
        )
        .send()
        .await
        .expect("RegisterTaskDefinition");
    let td = td
        .task_definition()
        .and_then(|t| t.task_definition_arn())
        .expect("ARN")
        .to_owned();
    let old: Vec<String> = world
        .task_sets()
        .await
        .into_iter()
        .map(|t| t.task_definition)
        .collect();
    let made = ecs
        .create_task_set()
        .cluster(&world.cluster)
        .service(&world.service)
        .task_definition(&td)
        .launch_type(LaunchType::Fargate)
        .scale(
            Scale::builder()
                .unit(ScaleUnit::Percent)
                .value(100.0)
                .build(),
        )
        .send()
        .await
        .expect("CreateTaskSet");
    let arn = made
        .task_set()
        .and_then(|t| t.task_set_arn())
        .expect("task set ARN")
        .to_owned();
    ecs.update_service_primary_task_set()
        .cluster(&world.cluster)
        .service(&world.service)
        .primary_task_set(&arn)
        .send()
        .await
        .expect("UpdateServicePrimaryTaskSet");
    let sets = ecs
        .describe_task_sets()
        .cluster(&world.cluster)
        .service(&world.service)
        .send()
        .await
        .expect("DescribeTaskSets");
    for t in sets.task_sets() {
        if old.iter().any(|o| Some(o.as_str()) == t.task_definition()) {
            ecs.delete_task_set()
                .cluster(&world.cluster)
                .service(&world.service)
                .task_set(t.task_set_arn().unwrap_or_default())
                .send()
                .await
                .expect("DeleteTaskSet");
        }
    }
}

#[tokio::test]
async fn a_task_definition_swapped_by_hand_is_drift_naming_the_image() {
    let world = World::new().await;
    let a = app_commit(
        'a',
        &app_config(&world, "", ""),
        &servicedef(&world, "desiredCount: 2"),
        &taskdef("web", "nginx:1"),
    );
    let mut run = Run::plan(&world, &a, None);
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
    let state = live(&a).await;
    assert_eq!(fields(&state), [], "{state:#?}");
    let kinds: Vec<&str> = state.resources.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["EcsService", "EcsTaskSet"]);

    // A desired count changed by hand, where Git sets one.
    let (ecs, _) = clients().await;
    ecs.update_service()
        .cluster(&world.cluster)
        .service(&world.service)
        .desired_count(5)
        .send()
        .await
        .expect("UpdateService");
    let names: Vec<String> = fields(&live(&a).await).into_iter().map(|f| f.0).collect();
    assert_eq!(names, ["serviceDefinition.desiredCount"]);
    ecs.update_service()
        .cluster(&world.cluster)
        .service(&world.service)
        .desired_count(2)
        .send()
        .await
        .expect("UpdateService");

    // Another task definition, made PRIMARY by hand.
    swap_task_definition(&world, "nginx:2").await;
    let state = live(&a).await;
    assert_eq!(
        fields(&state),
        [(
            "taskDefinition.containerDefinitions[0].image".to_owned(),
            r#""nginx:1""#.to_owned(),
            r#""nginx:2""#.to_owned()
        )],
        "{state:#?}"
    );
}
