//! Planning without AWS: stage options, the stages the planner gets from the plugin, manifests
//! refused at plan time naming file, line and field, PipeCD's examples, and which deploy target
//! an app uses.

use std::sync::Arc;

use gannet_config::parse_app_config;
use gannet_domain::deployment::{SyncStrategy, Trigger, TriggerKind};
use gannet_domain::CommitSha;
use gannet_sdk::planner::{self, PlanInput};
use gannet_sdk::plugin::{Faces, PlanContext, Plugin, Plugins, StepError};
use serde_json::{json, Value};

use crate::target::DeployTarget;
use crate::EcsPlugin;

/// Validates `with` for stage `name`; `Ok` is the normalised value, `Err` the field named.
fn check(name: &str, with: Value, expected: Result<Value, &str>) {
    let got = EcsPlugin::new(Vec::new())
        .validate_stage(name, &with)
        .map_err(|e| e.field);
    assert_eq!(got, expected.map_err(str::to_owned), "{name} with = {with}");
}

#[test]
fn validates_with() {
    check("ECS_SYNC", Value::Null, Ok(json!({})));
    check("ECS_SYNC", json!({"prune": true}), Err("prune"));
    check("ECS_PRIMARY_ROLLOUT", json!({}), Ok(json!({})));
    check("ECS_CANARY_CLEAN", json!("x"), Err("with"));
    check(
        "ECS_CANARY_ROLLOUT",
        json!({"scale": 30}),
        Ok(json!({"scale": 30})),
    );
    check(
        "ECS_CANARY_ROLLOUT",
        json!({"scale": "30%"}),
        Ok(json!({"scale": 30})),
    );
    check("ECS_CANARY_ROLLOUT", json!({"scale": 130}), Err("scale"));
    check("ECS_CANARY_ROLLOUT", json!({}), Err("scale"));
    check("ECS_CANARY_ROLLOUT", Value::Null, Err("scale"));
    check(
        "ECS_CANARY_ROLLOUT",
        json!({"scale": 30, "replicas": 1}),
        Err("replicas"),
    );
    check(
        "ECS_TRAFFIC_ROUTING",
        json!({"canary": 20}),
        Ok(json!({"primary": 80, "canary": 20})),
    );
    check(
        "ECS_TRAFFIC_ROUTING",
        json!({"primary": 100}),
        Ok(json!({"primary": 100, "canary": 0})),
    );
    check(
        "ECS_TRAFFIC_ROUTING",
        Value::Null,
        Ok(json!({"primary": 100, "canary": 0})),
    );
    check("ECS_TRAFFIC_ROUTING", json!({"canary": 101}), Err("canary"));
    check("ECS_ROLLBACK", Value::Null, Err(""));
}

const TASKDEF: &str = "family: web\ncontainerDefinitions:\n  - name: web\n    image: nginx:1\n    portMappings:\n      - containerPort: 80\n";
const SERVICEDEF: &str = "cluster: c\nserviceName: web\ndeploymentController: {type: EXTERNAL}\n";

fn app_yaml(pipeline: &str, input_extra: &str) -> String {
    let mut text = format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: ECSApp\nspec:\n  name: web\n  input:\n    serviceDefinitionFile: servicedef.yaml\n    taskDefinitionFile: taskdef.yaml\n    targetGroups:\n      primary: {{targetGroupArn: tg-p, containerName: web, containerPort: 80}}\n{input_extra}"
    );
    if !pipeline.is_empty() {
        text.push_str("  pipeline:\n    stages:\n");
        for line in pipeline.lines() {
            text.push_str("      ");
            text.push_str(line);
            text.push('\n');
        }
    }
    text
}

/// Plans `app` with files `(name, text)`; the stage names and ids, or the error.
fn plan(
    app: &str,
    files: &[(&str, String)],
    running: bool,
) -> Result<(SyncStrategy, Vec<String>), String> {
    let app = parse_app_config("app/app.pipecd.yaml", app).expect("config");
    let plugins = Plugins::new(vec![
        Faces::planning(Arc::new(EcsPlugin::new(Vec::new()))),
        Faces::planning(Arc::new(gannet_plugin_wait::WaitPlugin)),
    ]);
    let sha = CommitSha::parse(&"a".repeat(40)).expect("sha");
    let plan = planner::plan(&PlanInput {
        app: &app,
        trigger: &Trigger {
            kind: TriggerKind::OnCommit,
            commander: String::new(),
            pushed_by: String::new(),
            strategy: SyncStrategy::Auto,
            gate_skip: None,
        },
        commit_message: "change",
        changed_files: &[],
        running_commit: running.then_some(&sha),
        plugins: &plugins,
        read: &|rel: &str| {
            files
                .iter()
                .find(|(n, _)| *n == rel)
                .map(|(_, t)| t.clone())
        },
        lifecycle: None,
        app_dir: None,
        running_app_dir: None,
        config_path: None,
    })
    .map_err(|e| e.to_string())?;
    let stages = plan
        .stages
        .iter()
        .map(|s| {
            format!(
                "{} {}{}",
                s.id,
                s.name,
                if s.rollback { " (hidden)" } else { "" }
            )
        })
        .collect();
    Ok((plan.strategy, stages))
}

fn good_files() -> Vec<(&'static str, String)> {
    vec![
        ("taskdef.yaml", TASKDEF.to_owned()),
        ("servicedef.yaml", SERVICEDEF.to_owned()),
    ]
}

#[test]
fn the_planner_gets_quick_sync_pipeline_and_rollback_stages() {
    let quick = Ok((
        SyncStrategy::QuickSync,
        vec![
            "ecs-sync ECS_SYNC".to_owned(),
            "ecs-rollback ECS_ROLLBACK (hidden)".to_owned(),
        ],
    ));
    assert_eq!(plan(&app_yaml("", ""), &good_files(), true), quick);
    let pipeline = "- name: ECS_PRIMARY_ROLLOUT\n- name: WAIT\n  with: {duration: 1s}";
    assert_eq!(plan(&app_yaml(pipeline, ""), &good_files(), false), quick);
    assert_eq!(
        plan(&app_yaml(pipeline, ""), &good_files(), true),
        Ok((
            SyncStrategy::Pipeline,
            vec![
                "stage-0 ECS_PRIMARY_ROLLOUT".to_owned(),
                "stage-1 WAIT".to_owned(),
                "ecs-rollback ECS_ROLLBACK (hidden)".to_owned()
            ]
        ))
    );
}

#[test]
fn bad_manifests_fail_the_plan_naming_file_line_and_field() {
    let bad = |name: &'static str, text: String| {
        let mut files = good_files();
        files.retain(|(n, _)| *n != name);
        files.push((name, text));
        files
    };
    let cases = [
        (
            "a container without an image",
            bad("taskdef.yaml", TASKDEF.replace("    image: nginx:1\n", "")),
            "spec.input.taskDefinitionFile: taskdef.yaml:2: containerDefinitions[0].image: missing",
        ),
        (
            "a misspelt field",
            bad("taskdef.yaml", TASKDEF.replace("    image:", "    imag:")),
            "spec.input.taskDefinitionFile: taskdef.yaml:4: containerDefinitions[0].imag: unknown field `imag`",
        ),
        (
            "another deployment controller",
            bad("servicedef.yaml", SERVICEDEF.replace("EXTERNAL", "ECS")),
            "spec.input.serviceDefinitionFile: servicedef.yaml:3: deploymentController.type: \"ECS\": gannet deploys ECS services through task sets",
        ),
        (
            "no service definition file",
            vec![("taskdef.yaml", TASKDEF.to_owned())],
            "spec.input.serviceDefinitionFile: servicedef.yaml: does not exist in the app directory",
        ),
        (
            "not YAML",
            bad("servicedef.yaml", "cluster: [".to_owned()),
            "spec.input.serviceDefinitionFile: servicedef.yaml:",
        ),
        (
            "a target group on a container the task lacks",
            bad("taskdef.yaml", TASKDEF.replace("name: web", "name: api")),
            "spec.input.targetGroups.primary.containerName: taskdef.yaml: \"web\" is not a container of taskdef.yaml (it has: api)",
        ),
        (
            "a target group on a port the container does not map",
            bad("taskdef.yaml", TASKDEF.replace("containerPort: 80", "containerPort: 8080")),
            "spec.input.targetGroups.primary.containerPort: taskdef.yaml: container web of taskdef.yaml maps no containerPort 80",
        ),
    ];
    for (case, files, expected) in cases {
        let err = plan(&app_yaml("", ""), &files, true).expect_err(case);
        assert!(err.starts_with(expected), "{case}: {err}");
    }
}

/// PipeCD's own ECS examples (shared/pipecd-examples) pass the plan-time check.
#[test]
fn pipecds_examples_pass_the_check() {
    // Skipped on a fresh clone without the corpus; `make test` says so in one line.
    let Some(examples) = gannet_config::fixture::pipecd_examples() else {
        return;
    };
    let root = examples.join("v0/ecs");
    let Ok(entries) = std::fs::read_dir(&root) else {
        panic!("PipeCD's ECS examples are missing at {}", root.display());
    };
    let mut checked = 0;
    let mut dirs: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    for dir in dirs.drain(..) {
        let mut stack = vec![dir];
        while let Some(dir) = stack.pop() {
            let config = dir.join("app.pipecd.yaml");
            if let Ok(text) = std::fs::read_to_string(&config) {
                let app = parse_app_config("app/app.pipecd.yaml", &text).expect("config");
                let trigger = Trigger {
                    kind: TriggerKind::OnCommit,
                    commander: String::new(),
                    pushed_by: String::new(),
                    strategy: SyncStrategy::Auto,
                    gate_skip: None,
                };
                let ctx = PlanContext {
                    app: &app,
                    trigger: &trigger,
                    running_commit: None,
                    app_dir: None,
                    running_app_dir: None,
                    config_path: None,
                };
                let read = |rel: &str| std::fs::read_to_string(dir.join(rel)).ok();
                let result = EcsPlugin::new(Vec::new()).check_app(&ctx, &read);
                // The attachment example's container `command` is a string (a template filled
                // from its attachment), where a task definition takes a list: PipeCD could not
                // register it either. The wait-approval example names no manifests at all and
                // so reads the default taskdef.json, which it does not ship.
                if dir.ends_with("attachment") {
                    let err = result.expect_err("a command that is not a list");
                    assert!(
                        !err.unsupported && err.message.contains("expected a list"),
                        "{err}"
                    );
                } else if dir.ends_with("wait-approval") {
                    let err = result.expect_err("no taskdef.json");
                    assert_eq!(err.file, "taskdef.json");
                } else {
                    assert_eq!(result, Ok(()), "{}", dir.display());
                }
                checked += 1;
            }
            for sub in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if sub.path().is_dir() {
                    stack.push(sub.path());
                }
            }
        }
    }
    assert!(checked >= 9, "only {checked} examples found");
}

#[test]
fn an_app_uses_the_target_it_names_or_the_only_one() {
    let target = |name: &str| DeployTarget::new(name, "us-east-1");
    let ecs_app = parse_app_config("a/app.pipecd.yaml", &app_yaml("", "")).expect("config");
    let application = |targets: &str| {
        let text = format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: web\n  plugins:\n    ecs: {{}}\n  deployTargets: [{targets}]\n"
        );
        parse_app_config("a/app.pipecd.yaml", &text).expect("config")
    };
    let pick =
        |targets: Vec<DeployTarget>, app: &gannet_config::AppConfig| match EcsPlugin::new(targets)
            .target_for(app)
        {
            Ok(t) => Ok(t.config.name.clone()),
            Err(e @ StepError::Permanent(_)) => Err(e.reason()),
            Err(other) => panic!("{other:?}"),
        };
    assert_eq!(pick(vec![target("prod")], &ecs_app), Ok("prod".into()));
    let many = || vec![target("prod"), target("dev")];
    assert_eq!(pick(many(), &application("dev")), Ok("dev".into()));
    let cases = [
        (pick(Vec::new(), &ecs_app), "plugins.ecs.deployTargets"),
        (pick(many(), &ecs_app), "2 ECS deploy targets (prod, dev)"),
        (
            pick(many(), &application("qa")),
            "no ECS deploy target named \"qa\"",
        ),
    ];
    for (got, expected) in cases {
        let message = got.unwrap_err();
        assert!(message.contains(expected), "{message}");
    }
}
