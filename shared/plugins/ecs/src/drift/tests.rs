//! The comparison of a live service with the manifests, case by case: what is drift (named,
//! with both values) and what is not (desiredCount left to autoscaling, order where AWS gives
//! it no meaning, tags and defaults AWS or gannet add).

use super::*;
use crate::api::ServedTaskSet;

const SERVICE: &str = "cluster: c1\nserviceName: web\ndesiredCount: 2\ndeploymentController:\n  type: EXTERNAL\nlaunchType: FARGATE\nnetworkConfiguration:\n  awsvpcConfiguration:\n    subnets: [subnet-a, subnet-b]\n    securityGroups: [sg-a]\n    assignPublicIp: DISABLED\ntags:\n  - key: team\n    value: web\n";
const TASK: &str = "family: web\ncpu: 256\nmemory: 512\nnetworkMode: awsvpc\nrequiresCompatibilities: [FARGATE]\nexecutionRoleArn: arn:aws:iam::123456789012:role/exec\ncontainerDefinitions:\n  - name: web\n    image: nginx:1\n    command: null\n    cpu: 100\n    memory: 100\n    environment:\n      - {name: MODE, value: prod}\n      - {name: REGION, value: eu}\n    portMappings:\n      - containerPort: 80\n";
const TD: &str = "arn:aws:ecs:us-east-1:123456789012:task-definition/web:3";

/// The manifests, read as a step reads them.
fn desired(service: &str, task: &str) -> Desired {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = "apiVersion: pipecd.dev/v1beta1\nkind: ECSApp\nspec:\n  name: web\n  input:\n    serviceDefinitionFile: servicedef.yaml\n    taskDefinitionFile: taskdef.yaml\n";
    std::fs::write(dir.path().join("servicedef.yaml"), service).expect("write");
    std::fs::write(dir.path().join("taskdef.yaml"), task).expect("write");
    let app = gannet_config::parse_app_config("app/app.pipecd.yaml", config).expect("config");
    source::load(dir.path(), "", &app).expect("valid manifests")
}

fn task_set(status: &str, td: &str, scale: f64) -> ServedTaskSet {
    ServedTaskSet {
        id: format!("ecs-svc/{status}"),
        status: status.into(),
        task_definition: td.into(),
        scale,
        steady: true,
        network: json!({"awsvpcConfiguration": {
            "subnets": ["subnet-a", "subnet-b"],
            "securityGroups": ["sg-a"],
            "assignPublicIp": "DISABLED",
        }}),
    }
}

/// The service exactly as [`SERVICE`] and [`TASK`] ask, plus what AWS and gannet add.
fn matching() -> Served {
    Served {
        service: json!({
            "deploymentController": {"type": "EXTERNAL"},
            "desiredCount": 2,
            "tags": {"team": "web", "gannet.dev/managed-by": "gannet"},
        }),
        task_sets: vec![task_set("PRIMARY", TD, 100.0)],
        task_definition: Some(json!({
            "taskDefinitionArn": TD,
            "family": "web",
            "cpu": "256",
            "memory": "512",
            "networkMode": "awsvpc",
            "executionRoleArn": "arn:aws:iam::123456789012:role/exec",
            "taskRoleArn": null,
            "requiresCompatibilities": ["FARGATE"],
            "containerDefinitions": [{
                "name": "web",
                "image": "nginx:1",
                "cpu": 100,
                "memory": 100,
                "memoryReservation": null,
                "essential": true,
                "command": [],
                "entryPoint": [],
                "environment": [
                    {"name": "MODE", "value": "prod"},
                    {"name": "REGION", "value": "eu"},
                ],
                "portMappings": [{"containerPort": 80, "hostPort": 80, "protocol": "tcp"}],
            }],
            "tags": {"gannet.dev/registered-by": "d-1"},
        })),
        running: 2,
        desired: 2,
    }
}

fn with(change: impl FnOnce(&mut Served)) -> Served {
    let mut s = matching();
    change(&mut s);
    s
}

/// The drift found, as (field, git, live).
fn check(service: &str, served: Option<Served>, expected: &[(&str, &str, &str)]) {
    let d = desired(service, TASK);
    let def = d.service.clone().expect("a service");
    let state = compare(&d, &def, served.as_ref());
    let got: Vec<(&str, &str, &str)> = state
        .drift
        .iter()
        .map(|f| (f.field.as_str(), f.git.as_str(), f.live.as_str()))
        .collect();
    assert_eq!(got, expected, "served: {served:#?}");
}

#[test]
fn what_is_not_drift() {
    check(SERVICE, Some(matching()), &[]);
    check(
        SERVICE,
        Some(with(|s| {
            // Reordered subnets and environment variables; a draining-free ACTIVE task set at 0%.
            s.task_sets[0].network["awsvpcConfiguration"]["subnets"] =
                json!(["subnet-b", "subnet-a"]);
            let env = &mut s.task_definition.as_mut().expect("td")["containerDefinitions"][0]
                ["environment"];
            env.as_array_mut().expect("env").reverse();
            s.task_sets.push(task_set(
                "ACTIVE",
                "arn:aws:ecs:x:task-definition/web:2",
                0.0,
            ));
        })),
        &[],
    );
    // desiredCount unset or 0 in Git: whatever autoscaling set is not drift (PipeCD #5027).
    for count in ["", "desiredCount: 0\n"] {
        let service = SERVICE.replace("desiredCount: 2\n", count);
        check(
            &service,
            Some(with(|s| s.service["desiredCount"] = json!(7))),
            &[],
        );
    }
}

#[test]
fn a_service_serving_another_task_definition_is_drift_naming_the_field() {
    check(
        SERVICE,
        Some(with(|s| {
            let td = s.task_definition.as_mut().expect("td");
            td["containerDefinitions"][0]["image"] = json!("nginx:2");
            td["memory"] = json!("1024");
        })),
        &[
            (
                "taskDefinition.containerDefinitions[0].image",
                r#""nginx:1""#,
                r#""nginx:2""#,
            ),
            ("taskDefinition.memory", r#""512""#, r#""1024""#),
        ],
    );
    check(
        SERVICE,
        Some(with(|s| {
            s.service["desiredCount"] = json!(5);
            s.service["tags"]["team"] = json!("ops");
            s.task_sets[0].network["awsvpcConfiguration"]["subnets"] = json!(["subnet-c"]);
        })),
        &[
            ("serviceDefinition.desiredCount", "2", "5"),
            (
                "serviceDefinition.networkConfiguration.awsvpcConfiguration.subnets",
                r#"["subnet-a","subnet-b"]"#,
                r#"["subnet-c"]"#,
            ),
            ("serviceDefinition.tags.team", r#""web""#, r#""ops""#),
        ],
    );
}

#[test]
fn task_sets_must_be_one_primary_at_full_scale() {
    let canary = "arn:aws:ecs:us-east-1:123456789012:task-definition/web:4";
    check(
        SERVICE,
        Some(with(|s| s.task_sets.push(task_set("ACTIVE", canary, 30.0)))),
        &[(
            "taskSets",
            r#""one PRIMARY task set at 100%""#,
            r#""PRIMARY web:3 100%, ACTIVE web:4 30%""#,
        )],
    );
    // Nothing serves: the task sets say so, and there is no task definition to compare.
    check(
        SERVICE,
        Some(with(|s| {
            s.task_sets.clear();
            s.task_definition = None;
        })),
        &[("taskSets", r#""one PRIMARY task set at 100%""#, r#""none""#)],
    );
    // Another controller: named, not a task-set question.
    check(
        SERVICE,
        Some(with(|s| {
            s.service["deploymentController"]["type"] = json!("ECS");
            s.task_sets.clear();
        })),
        &[(
            "serviceDefinition.deploymentController.type",
            r#""EXTERNAL""#,
            r#""ECS""#,
        )],
    );
    check(SERVICE, None, &[("service", r#""web""#, UNSET)]);
}

#[test]
fn live_resources_say_what_serves() {
    let d = desired(SERVICE, TASK);
    let def = d.service.clone().expect("a service");
    let served = with(|s| {
        s.running = 1;
        s.task_sets[0].steady = false;
    });
    let state = compare(&d, &def, Some(&served));
    let got: Vec<(&str, &str, Health, &str)> = state
        .resources
        .iter()
        .map(|r| (r.kind.as_str(), r.id.as_str(), r.health, r.summary.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "EcsService",
                "web",
                Health::Unknown,
                "1 of 2 tasks running, EXTERNAL controller"
            ),
            (
                "EcsTaskSet",
                "ecs-svc/PRIMARY",
                Health::Unknown,
                "PRIMARY web:3 at 100%"
            ),
        ]
    );
}
