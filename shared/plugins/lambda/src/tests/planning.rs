//! Planning without AWS: stage options, the stages the planner gets from the plugin, and which
//! deploy target an app uses.

use std::sync::Arc;

use gannet_config::parse_app_config;
use gannet_domain::deployment::{SyncStrategy, Trigger, TriggerKind};
use gannet_domain::CommitSha;
use gannet_sdk::planner::{self, PlanInput};
use gannet_sdk::plugin::{Faces, Plugin, Plugins, StepError};
use serde_json::{json, Value};

use super::harness::{app_config, function_yaml, CANARY, ROLE};
use crate::target::DeployTarget;
use crate::LambdaPlugin;

/// Validates `with` for stage `name`; `Ok` is the normalised value, `Err` the field named.
fn check(name: &str, with: Value, expected: Result<Value, &str>) {
    let got = LambdaPlugin::new(Vec::new())
        .validate_stage(name, &with)
        .map_err(|e| e.field);
    assert_eq!(got, expected.map_err(str::to_owned), "{name} with = {with}");
}

#[test]
fn validates_with() {
    check("LAMBDA_SYNC", Value::Null, Ok(json!({})));
    check("LAMBDA_SYNC", json!({}), Ok(json!({})));
    check("LAMBDA_SYNC", json!({"prune": true}), Err("prune"));
    check("LAMBDA_CANARY_ROLLOUT", Value::Null, Ok(json!({})));
    check("LAMBDA_CANARY_ROLLOUT", json!("x"), Err("with"));
    check(
        "LAMBDA_PROMOTE",
        json!({"percent": 10}),
        Ok(json!({"percent": 10})),
    );
    check(
        "LAMBDA_PROMOTE",
        json!({"percent": "25%"}),
        Ok(json!({"percent": 25})),
    );
    check(
        "LAMBDA_PROMOTE",
        json!({"percent": 100}),
        Ok(json!({"percent": 100})),
    );
    check("LAMBDA_PROMOTE", json!({"percent": 101}), Err("percent"));
    check("LAMBDA_PROMOTE", json!({"percent": "half"}), Err("percent"));
    check("LAMBDA_PROMOTE", json!({}), Err("percent"));
    check("LAMBDA_PROMOTE", Value::Null, Err("percent"));
    check(
        "LAMBDA_PROMOTE",
        json!({"percent": 10, "pct": 1}),
        Err("pct"),
    );
    check("LAMBDA_ROLLBACK", Value::Null, Err(""));
}

/// Plans `pipeline` (empty for none) with a running commit or not; the stage names and ids.
fn plan(pipeline: &str, running: bool) -> Result<(SyncStrategy, Vec<String>), String> {
    plan_with(pipeline, running, Some(function_yaml("web", ROLE, "")))
}

/// [`plan`] with `manifest` as the app's `function.yaml` (`None`: there is none).
fn plan_with(
    pipeline: &str,
    running: bool,
    manifest: Option<String>,
) -> Result<(SyncStrategy, Vec<String>), String> {
    let app = parse_app_config("app/app.pipecd.yaml", &app_config(pipeline)).expect("config");
    let plugins = Plugins::new(vec![Faces::planning(Arc::new(LambdaPlugin::new(
        Vec::new(),
    )))]);
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
        read: &|rel: &str| manifest.clone().filter(|_| rel == "function.yaml"),
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
            let hidden = if s.rollback && !s.visible {
                " (hidden)"
            } else {
                ""
            };
            format!("{} {}{hidden}", s.id, s.name)
        })
        .collect();
    Ok((plan.strategy, stages))
}

#[test]
fn the_planner_gets_quick_sync_pipeline_and_rollback_stages() {
    let quick = Ok((
        SyncStrategy::QuickSync,
        vec![
            "lambda-sync LAMBDA_SYNC".to_owned(),
            "lambda-rollback LAMBDA_ROLLBACK (hidden)".to_owned(),
        ],
    ));
    assert_eq!(plan("", true), quick);
    // A first deployment is a quick sync even with a pipeline.
    assert_eq!(plan(CANARY, false), quick);
    assert_eq!(
        plan(CANARY, true),
        Ok((
            SyncStrategy::Pipeline,
            vec![
                "stage-0 LAMBDA_CANARY_ROLLOUT".to_owned(),
                "stage-1 LAMBDA_PROMOTE".to_owned(),
                "stage-2 LAMBDA_PROMOTE".to_owned(),
                "lambda-rollback LAMBDA_ROLLBACK (hidden)".to_owned(),
            ]
        ))
    );
    let bad = plan("- name: LAMBDA_PROMOTE\n  with: {percent: 150}", true).unwrap_err();
    assert!(
        bad.starts_with("spec.pipeline.stages[0].with.percent: "),
        "{bad}"
    );
}

#[test]
fn a_bad_manifest_fails_the_plan_with_file_and_field() {
    let good = function_yaml("web", ROLE, "");
    let cases = [
        (
            "quick sync, timeout out of range",
            "",
            Some(good.replace("timeout: 10", "timeout: 1000")),
            "spec.input.functionManifestFile: function.yaml: spec.timeout: ",
        ),
        (
            "pipeline, two code sources",
            CANARY,
            Some(format!("{good}  image: ecr/web:1\n")),
            "spec.input.functionManifestFile: function.yaml: spec.",
        ),
        (
            "pipeline, no role",
            CANARY,
            Some(good.replace(&format!("  role: {ROLE}\n"), "")),
            "spec.input.functionManifestFile: function.yaml: spec.role: ",
        ),
        (
            "no manifest",
            CANARY,
            None,
            "spec.input.functionManifestFile: function.yaml: does not exist in the app directory",
        ),
        (
            "not YAML",
            "",
            Some("spec: [".to_owned()),
            "spec.input.functionManifestFile: function.yaml:",
        ),
    ];
    for (case, pipeline, manifest, expected) in cases {
        let err = plan_with(pipeline, true, manifest).expect_err(case);
        assert!(err.starts_with(expected), "{case}: {err}");
    }
}

#[test]
fn a_git_source_is_unsupported_not_invalid() {
    let app = parse_app_config("app/app.pipecd.yaml", &app_config("")).expect("config");
    let trigger = Trigger {
        kind: TriggerKind::OnCommit,
        commander: String::new(),
        pushed_by: String::new(),
        strategy: SyncStrategy::Auto,
        gate_skip: None,
    };
    let ctx = gannet_sdk::plugin::PlanContext {
        app: &app,
        trigger: &trigger,
        running_commit: None,
        app_dir: None,
        running_app_dir: None,
        config_path: None,
    };
    let good = function_yaml("web", ROLE, "");
    let cases = [
        (
            good.replace(
                "  zipFile: fn.zip\n",
                "  source:\n    git: git@github.com:org/fn.git\n    path: fn\n",
            ),
            "spec.source.ref",
            false,
        ),
        (
            good.replace("memory: 128", "memory: 1"),
            "spec.memory",
            false,
        ),
    ];
    for (text, field, unsupported) in cases {
        let err = LambdaPlugin::new(Vec::new())
            .check_app(&ctx, &|rel: &str| {
                (rel == "function.yaml").then(|| text.clone())
            })
            .expect_err(field);
        assert_eq!(
            (
                err.named_by.as_str(),
                err.file.as_str(),
                err.field.as_str(),
                err.unsupported
            ),
            (
                "spec.input.functionManifestFile",
                "function.yaml",
                field,
                unsupported
            ),
            "{err}"
        );
    }
}

#[test]
fn an_app_uses_the_target_it_names_or_the_only_one() {
    let target = |name: &str| DeployTarget::new(name, "us-east-1");
    let lambda_app = parse_app_config("a/app.pipecd.yaml", &app_config("")).expect("config");
    let application = |targets: &str| {
        let text = format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: web\n  plugins:\n    lambda: {{}}\n  deployTargets: [{targets}]\n"
        );
        parse_app_config("a/app.pipecd.yaml", &text).expect("config")
    };
    let pick = |targets: Vec<DeployTarget>, app: &gannet_config::AppConfig| match LambdaPlugin::new(
        targets,
    )
    .target_for(app)
    {
        Ok(t) => Ok(t.config.name.clone()),
        Err(e @ StepError::Permanent(_)) => Err(e.reason()),
        Err(other) => panic!("{other:?}"),
    };
    assert_eq!(pick(vec![target("prod")], &lambda_app), Ok("prod".into()));
    let many = || vec![target("prod"), target("dev")];
    assert_eq!(pick(many(), &application("dev")), Ok("dev".into()));
    let cases = [
        (
            pick(Vec::new(), &lambda_app),
            "plugins.lambda.deployTargets",
        ),
        (
            pick(many(), &lambda_app),
            "2 Lambda deploy targets (prod, dev)",
        ),
        (
            pick(many(), &application("qa")),
            "no Lambda deploy target named \"qa\"",
        ),
    ];
    for (got, expected) in cases {
        let message = got.unwrap_err();
        assert!(message.contains(expected), "{message}");
    }
}

#[test]
fn the_manifest_can_be_checked_before_deploying() {
    use crate::{check_function_manifest, SourceError};
    let app = parse_app_config(
        "a/app.pipecd.yaml",
        "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: web\n  input:\n    functionManifestFile: lambda.yaml\n",
    )
    .expect("config");
    let good = super::harness::function_yaml("web", super::harness::ROLE, "");
    let files =
        |name: &'static str, text: String| move |rel: &str| (rel == name).then(|| text.clone());
    let ok = check_function_manifest(&app, &files("lambda.yaml", good.clone()));
    assert_eq!(ok.expect("a valid manifest").name, "web");
    match check_function_manifest(&app, &files("function.yaml", good.clone())) {
        Err(SourceError::ManifestMissing { field, file }) => {
            assert_eq!(
                (field.as_str(), file.as_str()),
                ("spec.input.functionManifestFile", "lambda.yaml")
            );
        }
        other => panic!("{other:?}"),
    }
    let bad = good.replace("timeout: 10", "timeout: 1000");
    match check_function_manifest(&app, &files("lambda.yaml", bad)) {
        Err(SourceError::Manifest(e)) => {
            assert_eq!(
                (e.file.as_str(), e.field.as_str()),
                ("lambda.yaml", "spec.timeout")
            );
        }
        other => panic!("{other:?}"),
    }
}
