//! The planner: one table per rule, and snapshots of a few representative plans.

use std::sync::Arc;

use gannet_config::{parse_app_config, AppConfig, Percentage};
use gannet_domain::deployment::{GateSkip, Stage, StageStatus, SyncStrategy, Trigger, TriggerKind};
use gannet_domain::{CommitSha, GoDuration, StageId};
use gannet_sdk::planner::{plan, Plan, PlanError, PlanInput};
use gannet_sdk::plugin::{
    AppFileError, Faces, PlanContext, Plugin, Plugins, Presenter, StageConfigError,
};
use serde_json::{json, Value};

// ------------------------------------------------------------------ tiny test plugins

/// WAIT: `with.duration` must be a Go duration; the stage times out an hour after it.
struct Wait;

impl Plugin for Wait {
    fn name(&self) -> &'static str {
        "wait"
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &["WAIT"]
    }

    fn validate_stage(&self, _: &str, with: &Value) -> Result<Value, StageConfigError> {
        let duration = match with.get("duration") {
            None => GoDuration::from_secs(60),
            Some(Value::String(s)) => GoDuration::parse(s)
                .map_err(|e| StageConfigError::new("duration", e.to_string()))?,
            Some(_) => return Err(StageConfigError::new("duration", "expected a duration")),
        };
        Ok(json!({ "duration": duration.to_string() }))
    }

    fn default_timeout(&self, stage: &Stage) -> GoDuration {
        let wait = stage.with["duration"]
            .as_str()
            .and_then(|d| GoDuration::parse(d).ok());
        GoDuration::from_millis(wait.unwrap_or_default().as_millis() + 3_600_000)
    }
}

impl Presenter for Wait {}

/// SCRIPT_RUN: needs `run`; a stage with `onRollback` gets a SCRIPT_RUN_ROLLBACK stage.
struct Script;

impl Plugin for Script {
    fn name(&self) -> &'static str {
        "script-run"
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &["SCRIPT_RUN", "SCRIPT_RUN_ROLLBACK"]
    }

    fn validate_stage(&self, _: &str, with: &Value) -> Result<Value, StageConfigError> {
        match with.get("run") {
            Some(Value::String(_)) => Ok(with.clone()),
            _ => Err(StageConfigError::new(
                "run",
                "a SCRIPT_RUN stage needs a script",
            )),
        }
    }

    fn rollback_stages(&self, _: &PlanContext<'_>, planned: &[Stage]) -> Vec<Stage> {
        planned
            .iter()
            .filter(|s| s.with.get("onRollback").is_some())
            .map(|s| {
                let with = json!({ "run": s.with["onRollback"] });
                Stage::planned(
                    StageId::rollback(s.id.as_str()),
                    "SCRIPT_RUN_ROLLBACK",
                    s.index,
                    with,
                )
            })
            .collect()
    }
}

impl Presenter for Script {}

/// A platform plugin: quick sync is LAMBDA_SYNC, rollback is LAMBDA_ROLLBACK, and it may
/// choose the strategy itself.
struct Lambda {
    choice: Option<(SyncStrategy, &'static str)>,
}

impl Plugin for Lambda {
    fn name(&self) -> &'static str {
        "lambda"
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &[
            "LAMBDA_SYNC",
            "LAMBDA_CANARY_ROLLOUT",
            "LAMBDA_PROMOTE",
            "LAMBDA_ROLLBACK",
        ]
    }

    fn deploys(&self, app: &AppConfig) -> bool {
        app.platform() == Some("lambda")
    }

    fn validate_stage(&self, name: &str, with: &Value) -> Result<Value, StageConfigError> {
        if name != "LAMBDA_PROMOTE" {
            return Ok(json!({}));
        }
        let percent: Percentage = serde_json::from_value(with["percent"].clone())
            .map_err(|e| StageConfigError::new("percent", e.to_string()))?;
        Ok(json!({ "percent": percent.get() }))
    }

    fn quick_sync_stages(&self, _: &PlanContext<'_>) -> Vec<Stage> {
        vec![Stage::planned(
            StageId::by_index(0),
            "LAMBDA_SYNC",
            0,
            json!({}),
        )]
    }

    fn rollback_stages(&self, _: &PlanContext<'_>, planned: &[Stage]) -> Vec<Stage> {
        let index = planned.first().map_or(0, |s| s.index);
        vec![Stage::planned(
            StageId::parse("rollback").unwrap(),
            "LAMBDA_ROLLBACK",
            index,
            json!({}),
        )]
    }

    fn determine_strategy(&self, _: &PlanContext<'_>) -> Option<(SyncStrategy, String)> {
        self.choice.map(|(s, why)| (s, why.to_owned()))
    }

    /// `function.yaml` must exist, and `memory: 0` in it is refused.
    fn check_app(
        &self,
        _: &PlanContext<'_>,
        read: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), AppFileError> {
        let error = |field: &str, message: &str| AppFileError {
            named_by: "spec.input.functionManifestFile".into(),
            file: "function.yaml".into(),
            line: None,
            field: field.into(),
            message: message.into(),
            unsupported: field == "spec.source",
        };
        match read("function.yaml") {
            None => Err(error("", "does not exist")),
            Some(text) if text.contains("memory: 0") => Err(error("spec.memory", "too small")),
            Some(text) if text.contains("source:") => Err(error("spec.source", "not built")),
            Some(_) => Ok(()),
        }
    }
}

impl Presenter for Lambda {}

/// A platform plugin with no quick sync stages.
struct Ecs;

impl Plugin for Ecs {
    fn name(&self) -> &'static str {
        "ecs"
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &["ECS_SYNC"]
    }

    fn deploys(&self, app: &AppConfig) -> bool {
        app.platform() == Some("ecs")
    }

    fn validate_stage(&self, _: &str, _: &Value) -> Result<Value, StageConfigError> {
        Ok(json!({}))
    }
}

impl Presenter for Ecs {}

/// WAIT_APPROVAL: the approval gate.
struct Approval;

impl Plugin for Approval {
    fn name(&self) -> &'static str {
        "wait-approval"
    }

    fn stage_names(&self) -> &'static [&'static str] {
        &["WAIT_APPROVAL"]
    }

    fn validate_stage(&self, _: &str, with: &Value) -> Result<Value, StageConfigError> {
        Ok(with.clone())
    }
}

impl Presenter for Approval {
    fn approvable(&self, _: &str) -> bool {
        true
    }
}

fn plugins(choice: Option<(SyncStrategy, &'static str)>) -> Plugins {
    Plugins::new(vec![
        Faces::planning(Arc::new(Wait)),
        Faces::planning(Arc::new(Approval)),
        Faces::planning(Arc::new(Script)),
        Faces::planning(Arc::new(Lambda { choice })),
        Faces::planning(Arc::new(Ecs)),
    ])
}

// ------------------------------------------------------------------ helpers

fn app(kind: &str, spec: &str) -> AppConfig {
    let yaml = format!("apiVersion: pipecd.dev/v1beta1\nkind: {kind}\nspec:\n  name: demo\n{spec}");
    parse_app_config("demo/app.pipecd.yaml", &yaml).unwrap_or_else(|e| panic!("{e}"))
}

const PIPELINE: &str = "  pipeline:\n    stages:\n      - name: LAMBDA_CANARY_ROLLOUT\n      - name: LAMBDA_PROMOTE\n        with:\n          percent: 10%\n      - name: WAIT\n        with:\n          duration: 30s\n      - name: LAMBDA_PROMOTE\n        with:\n          percent: 100\n";

fn running() -> CommitSha {
    CommitSha::parse(&"a".repeat(40)).unwrap()
}

/// What one planner call sees besides the config.
struct Case<'a> {
    kind: TriggerKind,
    strategy: SyncStrategy,
    commander: &'a str,
    message: &'a str,
    changed: &'a [&'a str],
    first_deployment: bool,
    choice: Option<(SyncStrategy, &'static str)>,
    /// The text of `function.yaml` in the app's directory, if it exists.
    manifest: Option<&'a str>,
    gate_skip: Option<GateSkip>,
}

impl Default for Case<'_> {
    fn default() -> Self {
        Self {
            kind: TriggerKind::OnCommit,
            strategy: SyncStrategy::Auto,
            commander: "",
            message: "update",
            changed: &[],
            first_deployment: false,
            choice: None,
            manifest: Some("memory: 128"),
            gate_skip: None,
        }
    }
}

fn check(app: &AppConfig, case: Case<'_>) -> Result<Plan, PlanError> {
    let trigger = Trigger {
        kind: case.kind,
        commander: case.commander.to_owned(),
        pushed_by: String::new(),
        strategy: case.strategy,
        gate_skip: case.gate_skip,
    };
    let changed: Vec<String> = case.changed.iter().map(|s| s.to_string()).collect();
    let running = running();
    let plugins = plugins(case.choice);
    let read = |path: &str| {
        case.manifest
            .filter(|_| path == "function.yaml")
            .map(str::to_owned)
    };
    plan(&PlanInput {
        app,
        trigger: &trigger,
        commit_message: case.message,
        changed_files: &changed,
        running_commit: (!case.first_deployment).then_some(&running),
        plugins: &plugins,
        read: &read,
        lifecycle: None,
        app_dir: None,
        running_app_dir: None,
        config_path: None,
    })
}

fn names(plan: &Plan) -> Vec<String> {
    plan.stages
        .iter()
        .map(|s| {
            if s.rollback {
                format!("({})", s.name)
            } else {
                s.name.clone()
            }
        })
        .collect()
}

// ------------------------------------------------------------------ strategy

#[test]
fn strategy_rules() {
    let pipeline = app("LambdaApp", PIPELINE);
    let no_pipeline = app("LambdaApp", "");
    let always = app(
        "LambdaApp",
        &format!("  planner:\n    alwaysUsePipeline: true\n{PIPELINE}"),
    );
    let matcher = app(
        "LambdaApp",
        &format!("  commitMatcher:\n    pipeline: \"^canary\"\n    quickSync: \"(?i)hotfix\"\n{PIPELINE}"),
    );
    let on_command = TriggerKind::OnCommand;
    let cases: Vec<(&str, &AppConfig, Case, SyncStrategy, &str)> = vec![
        (
            "command forces quick sync",
            &pipeline,
            Case {
                kind: on_command,
                strategy: SyncStrategy::QuickSync,
                commander: "alice",
                ..Case::default()
            },
            SyncStrategy::QuickSync,
            "Quick sync, because alice asked for a quick sync",
        ),
        (
            "command forces pipeline",
            &always,
            Case {
                kind: on_command,
                strategy: SyncStrategy::Pipeline,
                first_deployment: true,
                ..Case::default()
            },
            SyncStrategy::Pipeline,
            "Pipeline sync, because a command asked for a pipeline sync",
        ),
        (
            "no pipeline",
            &no_pipeline,
            Case::default(),
            SyncStrategy::QuickSync,
            "Quick sync, because no pipeline is configured",
        ),
        (
            "alwaysUsePipeline beats the first deployment",
            &always,
            Case {
                first_deployment: true,
                ..Case::default()
            },
            SyncStrategy::Pipeline,
            "Pipeline sync, because planner.alwaysUsePipeline is set",
        ),
        (
            "commitMatcher.pipeline beats the first deployment",
            &matcher,
            Case {
                message: "canary: try it",
                first_deployment: true,
                ..Case::default()
            },
            SyncStrategy::Pipeline,
            "Pipeline sync, because the commit message matches commitMatcher.pipeline \"^canary\"",
        ),
        (
            "commitMatcher.quickSync",
            &matcher,
            Case {
                message: "HOTFIX now",
                ..Case::default()
            },
            SyncStrategy::QuickSync,
            "Quick sync, because the commit message matches commitMatcher.quickSync \"(?i)hotfix\"",
        ),
        (
            "commitMatcher.pipeline is tried first",
            &matcher,
            Case {
                message: "canary hotfix",
                ..Case::default()
            },
            SyncStrategy::Pipeline,
            "commitMatcher.pipeline",
        ),
        (
            "commitMatcher is ignored for commands",
            &matcher,
            Case {
                kind: on_command,
                message: "canary",
                first_deployment: true,
                ..Case::default()
            },
            SyncStrategy::QuickSync,
            "Quick sync, because this is the app's first deployment",
        ),
        (
            "first deployment",
            &pipeline,
            Case {
                first_deployment: true,
                ..Case::default()
            },
            SyncStrategy::QuickSync,
            "Quick sync, because this is the app's first deployment",
        ),
        (
            "the platform plugin decides",
            &pipeline,
            Case {
                choice: Some((SyncStrategy::QuickSync, "only the config changed")),
                ..Case::default()
            },
            SyncStrategy::QuickSync,
            "Quick sync, because only the config changed",
        ),
        (
            "the platform plugin may force the pipeline",
            &pipeline,
            Case {
                choice: Some((SyncStrategy::Pipeline, "the image changed")),
                ..Case::default()
            },
            SyncStrategy::Pipeline,
            "Pipeline sync, because the image changed",
        ),
        (
            "the plugin abstains",
            &pipeline,
            Case {
                choice: Some((SyncStrategy::Auto, "no idea")),
                ..Case::default()
            },
            SyncStrategy::Pipeline,
            "Pipeline sync, because a pipeline is configured and nothing asked for a quick sync",
        ),
        (
            "otherwise the pipeline",
            &pipeline,
            Case::default(),
            SyncStrategy::Pipeline,
            "Pipeline sync, because a pipeline is configured and nothing asked for a quick sync",
        ),
    ];
    for (name, app, case, strategy, summary) in cases {
        let plan = check(app, case).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(plan.strategy, strategy, "{name}");
        assert!(
            plan.summary.contains(summary),
            "{name}: summary {:?}",
            plan.summary
        );
        let quick = plan.stages.first().is_some_and(|s| s.name == "LAMBDA_SYNC");
        assert_eq!(
            quick,
            strategy == SyncStrategy::QuickSync,
            "{name}: {:?}",
            names(&plan)
        );
    }
}

/// No quick sync goes past the pipeline's approval stage unless an admin's skip is on the
/// trigger; with alwaysUsePipeline not even then.
#[test]
fn the_approval_gate_holds_for_every_quick_sync() {
    const GATED: &str = "  commitMatcher:\n    quickSync: \"(?i)hotfix\"\n  pipeline:\n    stages:\n      - name: LAMBDA_CANARY_ROLLOUT\n      - id: approve\n        name: WAIT_APPROVAL\n        with:\n          approvers: [alice]\n      - name: LAMBDA_PROMOTE\n        with:\n          percent: 100\n";
    let gated = app("LambdaApp", GATED);
    let always = app(
        "LambdaApp",
        &format!("  planner:\n    alwaysUsePipeline: true\n{GATED}"),
    );
    let skipped_on_prefix = app(
        "LambdaApp",
        &GATED.replace(
            "        name: WAIT_APPROVAL\n",
            "        name: WAIT_APPROVAL\n        skipOn:\n          commitMessagePrefixes: [\"[skip]\"]\n",
        ),
    );
    let admin_skip = || {
        Some(GateSkip {
            by: "root".into(),
            reason: "sev1: the canary is down".into(),
        })
    };
    let forced = || Case {
        kind: TriggerKind::OnCommand,
        strategy: SyncStrategy::QuickSync,
        commander: "dora",
        ..Case::default()
    };
    let gate_first = ["WAIT_APPROVAL", "LAMBDA_SYNC", "(LAMBDA_ROLLBACK)"];
    let cases: Vec<(&str, &AppConfig, Case, &[&str], &str)> = vec![
        ("a forced quick sync", &gated, forced(), &gate_first, "the pipeline's approval gate (approve) runs first: only an admin may skip it"),
        (
            "a forced quick sync an admin let skip the gate",
            &gated,
            Case { gate_skip: admin_skip(), ..forced() },
            &["LAMBDA_SYNC", "(LAMBDA_ROLLBACK)"],
            "Quick sync, because dora asked for a quick sync; root skipped the approval gate (approve): sev1: the canary is down",
        ),
        ("the first deployment", &gated, Case { first_deployment: true, ..Case::default() }, &gate_first, "this is the app's first deployment; the pipeline's approval gate (approve) runs first"),
        ("commitMatcher.quickSync", &gated, Case { message: "hotfix", ..Case::default() }, &gate_first, "commitMatcher.quickSync"),
        (
            "the platform plugin's choice",
            &gated,
            Case { choice: Some((SyncStrategy::QuickSync, "only the config changed")), ..Case::default() },
            &gate_first,
            "only the config changed; the pipeline's approval gate",
        ),
        (
            "alwaysUsePipeline: a forced quick sync runs the pipeline",
            &always,
            forced(),
            &["LAMBDA_CANARY_ROLLOUT", "WAIT_APPROVAL", "LAMBDA_PROMOTE", "(LAMBDA_ROLLBACK)"],
            "Pipeline sync, because dora asked for a quick sync, but planner.alwaysUsePipeline is set",
        ),
        (
            "alwaysUsePipeline: an admin's skip does not skip the pipeline",
            &always,
            Case { gate_skip: admin_skip(), ..forced() },
            &["LAMBDA_CANARY_ROLLOUT", "WAIT_APPROVAL", "LAMBDA_PROMOTE", "(LAMBDA_ROLLBACK)"],
            "planner.alwaysUsePipeline is set",
        ),
    ];
    for (what, cfg, case, want, summary) in cases {
        let plan = check(cfg, case).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(names(&plan), want.to_vec(), "{what}");
        assert!(plan.summary.contains(summary), "{what}: {}", plan.summary);
    }
    // The gate keeps its id, its approvers and the pipeline's skipOn rules.
    let plan = check(&gated, forced()).unwrap();
    assert_eq!(plan.stages[0].id.as_str(), "approve");
    assert_eq!(plan.stages[0].with["approvers"], json!(["alice"]));
    assert_eq!(plan.stages[0].status, StageStatus::NotStartedYet);
    let plan = check(
        &skipped_on_prefix,
        Case {
            message: "[skip] docs",
            ..forced()
        },
    )
    .unwrap();
    assert_eq!(plan.stages[0].status, StageStatus::Skipped);
}

#[test]
fn quick_sync_without_quick_sync_stages_runs_the_pipeline() {
    let generic = app(
        "Application",
        "  pipeline:\n    stages:\n      - name: WAIT\n",
    );
    let plan = check(
        &generic,
        Case {
            first_deployment: true,
            ..Case::default()
        },
    )
    .unwrap();
    assert_eq!(plan.strategy, SyncStrategy::Pipeline);
    assert_eq!(
        plan.summary,
        "Pipeline sync: a quick sync was chosen because this is the app's first deployment, but the app has no platform plugin, so the pipeline runs"
    );
    assert_eq!(names(&plan), ["WAIT"]);

    let ecs = app(
        "ECSApp",
        "  pipeline:\n    stages:\n      - name: ECS_SYNC\n",
    );
    let plan = check(
        &ecs,
        Case {
            first_deployment: true,
            ..Case::default()
        },
    )
    .unwrap();
    assert!(
        plan.summary
            .contains("the ecs plugin has no quick sync stages"),
        "{}",
        plan.summary
    );
}

#[test]
fn plan_errors() {
    let cases: Vec<(&str, AppConfig, Case, &str, bool)> = vec![
        ("pipeline forced without a pipeline", app("LambdaApp", ""), Case { kind: TriggerKind::OnCommand, strategy: SyncStrategy::Pipeline, ..Case::default() }, "spec.pipeline: a pipeline sync was requested, but the app has no pipeline", false),
        ("platform kind not compiled in", app("CloudRunApp", ""), Case::default(), "kind: the cloudrun platform is not supported yet (no cloudrun plugin is compiled in)", true),
        ("plugin not compiled in", app("Application", "  plugins:\n    kubernetes: {}\n"), Case::default(), "spec.plugins.kubernetes: the kubernetes platform is not supported yet", true),
        ("spec.plugin not compiled in", app("Application", "  plugin: terraform\n"), Case::default(), "spec.plugin: the terraform platform is not supported yet", true),
        ("nothing to run", app("ECSApp", ""), Case::default(), "spec: nothing to deploy: the app has no pipeline and the ecs plugin has no quick sync stages", false),
        ("nothing at all", app("Application", ""), Case::default(), "spec: nothing to deploy: the app has no pipeline and the app has no platform plugin", false),
        ("unknown stage", app("LambdaApp", "  pipeline:\n    stages:\n      - name: WAIT\n      - name: DEPLOY_EVERYTHING\n"), Case::default(), "spec.pipeline.stages[1].name: unknown stage \"DEPLOY_EVERYTHING\"", false),
        ("stage name typo", app("LambdaApp", "  pipeline:\n    stages:\n      - name: WAITT\n"), Case::default(), "spec.pipeline.stages[0].name: unknown stage \"WAITT\"; did you mean WAIT?", false),
        ("stage name in lower case", app("LambdaApp", "  pipeline:\n    stages:\n      - name: wait\n"), Case::default(), "spec.pipeline.stages[0].name: unknown stage \"wait\"; did you mean WAIT?", false),
        ("stage name typo of a PipeCD stage", app("LambdaApp", "  pipeline:\n    stages:\n      - name: LAMBDA_PROMTE\n"), Case::default(), "spec.pipeline.stages[0].name: unknown stage \"LAMBDA_PROMTE\"; did you mean LAMBDA_PROMOTE?", false),
        ("PipeCD stage without a plugin", app("LambdaApp", "  pipeline:\n    stages:\n      - name: ANALYSIS\n"), Case::default(), "spec.pipeline.stages[0].name: ANALYSIS is a PipeCD stage gannet does not support yet", true),
        ("invalid with", app("LambdaApp", "  pipeline:\n    stages:\n      - name: WAIT\n      - name: WAIT\n      - name: WAIT\n        with:\n          duration: forever\n"), Case::default(), "spec.pipeline.stages[2].with.duration: invalid duration \"forever\"", false),
        ("invalid percentage", app("LambdaApp", "  pipeline:\n    stages:\n      - name: LAMBDA_PROMOTE\n        with:\n          percent: 120%\n"), Case::default(), "spec.pipeline.stages[0].with.percent: invalid percentage \"120%\": must be between 0 and 100", false),
        ("duplicate ids", app("LambdaApp", "  pipeline:\n    stages:\n      - id: a\n        name: WAIT\n      - id: a\n        name: WAIT\n"), Case::default(), "spec.pipeline.stages[1].id: stage id \"a\" is used by more than one stage", false),
        ("manifest missing", app("LambdaApp", ""), Case { manifest: None, ..Case::default() }, "spec.input.functionManifestFile: function.yaml: does not exist", false),
        ("manifest field refused, pipeline or not", app("LambdaApp", PIPELINE), Case { manifest: Some("memory: 0"), ..Case::default() }, "spec.input.functionManifestFile: function.yaml: spec.memory: too small", false),
        ("manifest uses what gannet lacks", app("LambdaApp", ""), Case { manifest: Some("source: git"), ..Case::default() }, "spec.input.functionManifestFile: function.yaml: spec.source: not built", true),
        ("an id that clashes with a default id", app("LambdaApp", "  pipeline:\n    stages:\n      - name: WAIT\n      - id: stage-0\n        name: WAIT\n"), Case::default(), "spec.pipeline.stages[1].id: stage id \"stage-0\"", false),
    ];
    for (name, app, case, want, unsupported) in cases {
        let err = check(&app, case).expect_err(name);
        assert!(err.to_string().starts_with(want), "{name}: {err}");
        assert_eq!(err.is_unsupported(), unsupported, "{name}");
        assert_eq!(
            err.to_string(),
            format!("{}: {}", err.field(), err.message()),
            "{name}"
        );
    }
}

// ------------------------------------------------------------------ stages

#[test]
fn stage_ids_descriptions_and_timeouts() {
    let app = app(
        "LambdaApp",
        "  pipeline:\n    stages:\n      - id: hold\n        name: WAIT\n        desc: hold on\n        timeout: 5m\n      - name: WAIT\n        with:\n          duration: 30m\n",
    );
    let plan = check(&app, Case::default()).unwrap();
    let [first, second] = &plan.stages[..] else {
        panic!("{:?}", names(&plan))
    };
    assert_eq!(
        (first.id.as_str(), first.desc.as_str(), first.index),
        ("hold", "hold on", 0)
    );
    assert_eq!(first.timeout, GoDuration::from_secs(300));
    assert_eq!((second.id.as_str(), second.index), ("stage-1", 1));
    // No timeout configured: the plugin's default, computed from the validated `with`.
    assert_eq!(second.timeout, GoDuration::from_secs(30 * 60 + 3600));
    assert_eq!(second.with, json!({"duration": "30m"}));
    assert!(first.visible && !first.rollback && first.status == StageStatus::NotStartedYet);
}

#[test]
fn rollback_stages_follow_auto_rollback() {
    let script = "      - name: SCRIPT_RUN\n        with:\n          run: deploy\n          onRollback: undo\n";
    let on = app("LambdaApp", &format!("{PIPELINE}{script}"));
    let off = app(
        "LambdaApp",
        &format!("  planner:\n    autoRollback: false\n{PIPELINE}{script}"),
    );
    let only_wait = app(
        "LambdaApp",
        "  pipeline:\n    stages:\n      - name: WAIT\n",
    );
    let cases: Vec<(&str, &AppConfig, Case, Vec<&str>)> = vec![
        (
            "pipeline",
            &on,
            Case::default(),
            vec![
                "LAMBDA_CANARY_ROLLOUT",
                "LAMBDA_PROMOTE",
                "WAIT",
                "LAMBDA_PROMOTE",
                "SCRIPT_RUN",
                "(LAMBDA_ROLLBACK)",
                "(SCRIPT_RUN_ROLLBACK)",
            ],
        ),
        (
            "pipeline, autoRollback off",
            &off,
            Case::default(),
            vec![
                "LAMBDA_CANARY_ROLLOUT",
                "LAMBDA_PROMOTE",
                "WAIT",
                "LAMBDA_PROMOTE",
                "SCRIPT_RUN",
            ],
        ),
        (
            "quick sync",
            &on,
            Case {
                first_deployment: true,
                ..Case::default()
            },
            vec!["LAMBDA_SYNC", "(LAMBDA_ROLLBACK)"],
        ),
        (
            "quick sync, autoRollback off",
            &off,
            Case {
                first_deployment: true,
                ..Case::default()
            },
            vec!["LAMBDA_SYNC"],
        ),
        (
            "only plugins in the pipeline roll back",
            &only_wait,
            Case::default(),
            vec!["WAIT"],
        ),
    ];
    for (name, app, case, want) in cases {
        let plan = check(app, case).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(names(&plan), want, "{name}");
        assert!(
            plan.stages
                .iter()
                .filter(|s| s.rollback)
                .all(|s| !s.visible),
            "{name}"
        );
    }
}

#[test]
fn skip_on() {
    let app = app(
        "Application",
        "  pipeline:\n    stages:\n      - name: WAIT\n        with:\n          skipOn:\n            commitMessagePrefixes: [\"[quick]\", \"docs:\"]\n            paths: [\"docs/**\", \"*.md\"]\n      - name: WAIT\n",
    );
    // (case, commit message, changed files, first deployment?, skip reason)
    type Row<'a> = (&'a str, &'a str, &'a [&'a str], bool, Option<&'a str>);
    let cases: &[Row] = &[
        ("nothing applies", "feat: x", &["src/main.rs"], false, None),
        (
            "a prefix",
            "docs: typo",
            &["src/main.rs"],
            false,
            Some("skipOn.commitMessagePrefixes: the commit message starts with \"docs:\""),
        ),
        (
            "every changed file matches",
            "feat",
            &["docs/a/b.md", "README.md"],
            false,
            Some("skipOn.paths: all 2 changed files match"),
        ),
        (
            "one changed file does not match",
            "feat",
            &["docs/a.md", "src/x.rs"],
            false,
            None,
        ),
        // As PipeCD: nothing changed, so every changed file matches.
        (
            "no changed files",
            "feat",
            &[],
            false,
            Some("skipOn.paths: no files changed since the running commit"),
        ),
        ("first deployment: changes unknown", "feat", &[], true, None),
    ];
    for (name, message, changed, first_deployment, reason) in cases {
        let plan = check(
            &app,
            Case {
                message,
                changed,
                first_deployment: *first_deployment,
                kind: TriggerKind::OnCommand,
                strategy: SyncStrategy::Pipeline,
                ..Case::default()
            },
        )
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        let first = &plan.stages[0];
        match reason {
            Some(reason) => {
                assert_eq!(first.status, StageStatus::Skipped, "{name}");
                assert_eq!(first.status_reason, *reason, "{name}");
            }
            None => assert_eq!(
                first.status,
                StageStatus::NotStartedYet,
                "{name}: {}",
                first.status_reason
            ),
        }
        // skipOn is the planner's: the plugin never sees it, and the second stage has none.
        assert_eq!(first.with, json!({"duration": "1m"}), "{name}");
        assert_eq!(plan.stages[1].status, StageStatus::NotStartedYet, "{name}");
    }
}

// ------------------------------------------------------------------ snapshots

#[test]
fn snapshot_lambda_canary_pipeline() {
    let script = "      - id: smoke\n        name: SCRIPT_RUN\n        desc: smoke test\n        with:\n          run: ./smoke.sh\n          onRollback: ./undo.sh\n";
    let app = app("LambdaApp", &format!("{PIPELINE}{script}"));
    insta::assert_yaml_snapshot!(check(&app, Case::default()).unwrap());
}

#[test]
fn snapshot_lambda_first_deployment_quick_sync() {
    let app = app("LambdaApp", PIPELINE);
    insta::assert_yaml_snapshot!(check(
        &app,
        Case {
            first_deployment: true,
            ..Case::default()
        }
    )
    .unwrap());
}

#[test]
fn snapshot_generic_application_with_skipped_stage() {
    let app = app(
        "Application",
        "  pipeline:\n    stages:\n      - name: WAIT\n        with:\n          duration: 10s\n          skipOn:\n            commitMessagePrefixes: [\"[skip wait]\"]\n      - name: SCRIPT_RUN\n        timeout: 2m\n        with:\n          run: echo done\n",
    );
    let case = Case {
        message: "[skip wait] ship it",
        ..Case::default()
    };
    insta::assert_yaml_snapshot!(check(&app, case).unwrap());
}
