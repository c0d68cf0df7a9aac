//! App config parsing: defaults, every kind's fields, and located errors.

use gannet_config::{is_app_config_path, parse_app_config, AppConfig, AppKind};
use gannet_domain::GoDuration;
use serde_json::json;

fn parse(yaml: &str) -> AppConfig {
    parse_app_config("apps/demo/app.pipecd.yaml", yaml).unwrap_or_else(|e| panic!("{e}"))
}

/// Parses `yaml`, which must fail, and returns the error as displayed.
fn error_of(yaml: &str) -> String {
    match parse_app_config("app.pipecd.yaml", yaml) {
        Ok(cfg) => panic!("expected an error, parsed {cfg:?}"),
        Err(e) => e.to_string(),
    }
}

const HEAD: &str = "apiVersion: pipecd.dev/v1beta1\n";

#[test]
fn generic_defaults() {
    let cfg = parse("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: demo\n");
    assert_eq!(cfg.kind, AppKind::LambdaApp);
    assert_eq!(cfg.name(), "demo");
    assert!(cfg.labels().is_empty());
    assert!(!cfg.has_pipeline());
    assert!(cfg.planner().auto_rollback);
    assert!(!cfg.planner().always_use_pipeline);
    assert_eq!(cfg.timeout(), GoDuration::from_secs(6 * 3600));
    let t = cfg.trigger();
    assert!(!t.on_commit.disabled && !t.on_command.disabled);
    assert!(t.on_out_of_sync.disabled);
    assert_eq!(t.on_out_of_sync.min_window, GoDuration::from_secs(300));
    assert!(t.on_chain.disabled);
    assert_eq!(cfg.platform(), Some("lambda"));
    assert!(cfg.unsupported_features().is_empty());
}

#[test]
fn generic_fields() {
    let cfg = parse(
        r#"apiVersion: pipecd.dev/v1beta1
kind: KubernetesApp
spec:
  name: web
  labels:
    env: prod
  description: the web app
  planner:
    alwaysUsePipeline: true
    autoRollback: false
  commitMatcher:
    quickSync: "^hotfix:"
    pipeline: "(?i)^canary"
  timeout: 1h30m
  trigger:
    onCommit:
      disabled: true
      paths: [shared/*]
      ignores:
        - docs/**
    onCommand:
      disabled: true
    onOutOfSync:
      disabled: false
      minWindow: 10m
    onChain:
      disabled: false
  pipeline:
    stages:
      - id: canary
        name: K8S_CANARY_ROLLOUT
        desc: roll out a canary
        timeout: 10m
        with:
          replicas: 10%
      - name: WAIT
        with:
          duration: 30s
          skipOn:
            commitMessagePrefixes: ["[skip wait]"]
            paths: ["docs/**"]
      - name: SCRIPT_RUN
        skipOn:
          paths: [README.md]
        with:
          run: echo hi
  postSync:
    chain:
      applications:
        - name: api
          kind: KUBERNETES
  encryption:
    encryptedSecrets:
      password: abc
    decryptionTargets: [secret.yaml]
  attachment:
    sources:
      config: config.yaml
    targets: [deployment.yaml]
  notification:
    mentions:
      - event: DEPLOYMENT_SUCCEEDED
        slack: [U1]
        slackusers: [U2]
        slackgroups: [G1]
  eventWatcher:
    - matcher:
        name: image-update
        labels: {env: prod}
      handler:
        type: GIT_UPDATE
        config:
          commitMessage: bump
          makePullRequest: true
          replacements:
            - file: deployment.yaml
              yamlField: $.spec.template.spec.containers[0].image
  driftDetection:
    ignoreFields: ["apps/v1:Deployment:default:web#spec.replicas"]
"#,
    );
    let spec = cfg.spec();
    assert_eq!(spec.labels["env"], "prod");
    assert_eq!(spec.description, "the web app");
    assert!(spec.planner.always_use_pipeline && !spec.planner.auto_rollback);
    assert!(spec
        .commit_matcher
        .quick_sync
        .as_ref()
        .unwrap()
        .is_match("hotfix: x"));
    assert!(spec
        .commit_matcher
        .pipeline
        .as_ref()
        .unwrap()
        .is_match("CANARY please"));
    assert_eq!(cfg.timeout(), GoDuration::from_secs(5400));
    let t = cfg.trigger();
    assert!(t.on_commit.disabled && t.on_command.disabled);
    assert_eq!(t.on_commit.paths[0].as_str(), "shared/*");
    assert_eq!(t.on_commit.ignores[0].as_str(), "docs/**");
    assert!(!t.on_out_of_sync.disabled);
    assert_eq!(t.on_out_of_sync.min_window, GoDuration::from_secs(600));
    assert!(!t.on_chain.disabled);

    let stages = cfg.stages();
    assert_eq!(stages.len(), 3);
    assert_eq!(stages[0].id.as_ref().unwrap().as_str(), "canary");
    assert_eq!(stages[0].desc, "roll out a canary");
    assert_eq!(stages[0].timeout, Some(GoDuration::from_secs(600)));
    assert_eq!(stages[0].with, json!({"replicas": "10%"}));
    // skipOn leaves `with`, so the plugin sees only its own options.
    assert_eq!(stages[1].with, json!({"duration": "30s"}));
    assert_eq!(stages[1].skip_on.commit_message_prefixes, ["[skip wait]"]);
    assert_eq!(stages[1].skip_on.paths[0].as_str(), "docs/**");
    assert_eq!(stages[2].skip_on.paths[0].as_str(), "README.md");
    assert_eq!(stages[2].id, None);

    let chain = spec.post_sync.as_ref().unwrap().chain.as_ref().unwrap();
    assert_eq!(chain.applications[0].kind, "KUBERNETES");
    assert_eq!(
        spec.encryption.as_ref().unwrap().decryption_targets,
        ["secret.yaml"]
    );
    assert_eq!(
        spec.attachment.as_ref().unwrap().sources["config"],
        "config.yaml"
    );
    let mention = &spec.notification.as_ref().unwrap().mentions[0];
    assert_eq!(
        (
            mention.slack.len(),
            mention.slackusers.len(),
            mention.slackgroups.len()
        ),
        (1, 1, 1)
    );
    let watcher = &spec.event_watcher[0];
    assert_eq!(watcher.handler.handler_type, "GIT_UPDATE");
    assert!(watcher.handler.config.make_pull_request);
    assert_eq!(
        spec.drift_detection.as_ref().unwrap().ignore_fields.len(),
        1
    );

    let unsupported: Vec<String> = cfg
        .unsupported_features()
        .into_iter()
        .map(|u| u.field)
        .collect();
    assert_eq!(
        unsupported,
        ["spec.eventWatcher"],
        "driftDetection.ignoreFields depends on the platform (its plugin says), and Slack receivers honour notification.mentions"
    );
}

#[test]
fn the_deprecated_input_auto_rollback_is_honoured() {
    let cfg = parse(&format!(
        "{HEAD}kind: LambdaApp\nspec:\n  name: fn\n  input:\n    functionManifestFile: lambda/function.yaml\n    autoRollback: false\n  quickSync: {{}}\n"
    ));
    // The kind's own fields are its plugin's (gannet-plugin-lambda's spec tests); the
    // deprecated input.autoRollback is honoured when the planner does not say.
    assert!(!cfg.planner().auto_rollback);
}

#[test]
fn planner_auto_rollback_wins_over_the_deprecated_input_field() {
    let cfg = parse(&format!(
        "{HEAD}kind: LambdaApp\nspec:\n  name: fn\n  planner:\n    autoRollback: true\n  input:\n    autoRollback: false\n"
    ));
    assert!(cfg.planner().auto_rollback);
}

#[test]
fn plugin_era_application() {
    let cases: &[(&str, Option<&str>)] = &[
        // spec.plugin names the platform.
        ("  plugin: ecs\n  deployTarget: dev\n  plugins:\n    ecs:\n      input:\n        taskDefinitionFile: taskdef.yaml\n", Some("ecs")),
        // The one platform plugin configured.
        ("  plugins:\n    kubernetes:\n      input: {}\n    wait: {}\n", Some("kubernetes")),
        // Only generic stages.
        ("  plugins:\n    wait:\n  pipeline:\n    stages:\n      - name: WAIT\n", None),
        ("  pipeline:\n    stages:\n      - name: SCRIPT_RUN\n", None),
    ];
    for (spec, platform) in cases {
        let cfg = parse(&format!(
            "{HEAD}kind: Application\nspec:\n  name: app\n{spec}"
        ));
        assert_eq!(cfg.platform(), *platform, "{spec}");
        assert_eq!(cfg.kind, AppKind::Application);
    }
    let cfg = parse(&format!(
        "{HEAD}kind: Application\nspec:\n  name: app\n  deployTarget: a\n  deployTargets: [b, c]\n  plugins:\n    ecs:\n      input:\n        any: thing\n"
    ));
    assert_eq!(cfg.deploy_targets(), ["a", "b", "c"]);
    assert_eq!(
        cfg.plugin_config("ecs"),
        Some(&json!({"input": {"any": "thing"}}))
    );
    // A platform kind that configures spec.plugins is deployed by that plugin (piped v1).
    let cfg = parse(&format!(
        "{HEAD}kind: KubernetesApp\nspec:\n  name: app\n  plugins:\n    kubernetes_multicluster:\n      input: {{}}\n"
    ));
    assert_eq!(cfg.platform(), Some("kubernetes_multicluster"));
}

#[test]
fn errors_name_file_line_and_field() {
    let cases: &[(&str, &str)] = &[
        ("", "app.pipecd.yaml:1: the file is empty"),
        ("kind: LambdaApp\nspec:\n  name: x\n", "app.pipecd.yaml:1: apiVersion: missing; use pipecd.dev/v1beta1"),
        ("apiVersion: v2\nkind: LambdaApp\nspec: {name: x}\n", "app.pipecd.yaml:1: apiVersion: unsupported apiVersion \"v2\"; use pipecd.dev/v1beta1"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: Piped\nspec: {}\n", "app.pipecd.yaml:2: kind: \"Piped\" is not an application kind; use one of LambdaApp, ECSApp, CloudRunApp, TerraformApp, KubernetesApp, Application"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\n", "app.pipecd.yaml:1: spec: missing"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspek: {}\n", "app.pipecd.yaml:3: spek: unknown field `spek`; did you mean `spec`?"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  labels: {a: b}\n", "app.pipecd.yaml:3: spec.name: missing; every app needs a name"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  triger: {}\n", "app.pipecd.yaml:5: spec.triger: unknown field `triger`; did you mean `trigger`?"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  trigger:\n    onOutOfSync:\n      disabled: false\n      minWindow: 5 minutes\n", "app.pipecd.yaml:8: spec.trigger.onOutOfSync.minWindow: invalid duration \"5 minutes\": unknown unit (use Go syntax such as 90s, 1m30s or 6h)"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  pipeline:\n    stages:\n      - name: WAIT\n      - desc: no name\n", "app.pipecd.yaml:8: spec.pipeline.stages[1]: missing field `name`"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  pipeline:\n    stages:\n      - name: WAIT\n        timeout: soon\n", "app.pipecd.yaml:8: spec.pipeline.stages[0].timeout: invalid duration \"soon\": expected a number (use Go syntax such as 90s, 1m30s or 6h)"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  pipeline:\n    stages:\n      - name: WAIT\n      - name: WAIT\n        with:\n          skipOn:\n            path: [a]\n", "app.pipecd.yaml:11: spec.pipeline.stages[1].with.skipOn.path: unknown field `path`; did you mean `paths`?"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  pipeline:\n    stages:\n      - name: WAIT\n        skipOn: {paths: [a]}\n        with:\n          skipOn: {paths: [b]}\n", "app.pipecd.yaml:8: spec.pipeline.stages[0].skipOn: skipOn is set both here and under with; keep one"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  pipeline:\n    stages:\n      - name: WAIT\n        id: has space\n", "app.pipecd.yaml:8: spec.pipeline.stages[0].id: invalid stage id \"has space\": must not contain whitespace or control characters"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  trigger:\n    onCommit:\n      paths:\n        - ok/*\n        - \"[z-a]\"\n", "app.pipecd.yaml:9: spec.trigger.onCommit.paths[1]: invalid path pattern \"[z-a]\": invalid character class range, the start must be <= the end"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  commitMatcher:\n    pipeline: \"(unclosed\"\n", "app.pipecd.yaml:6: spec.commitMatcher.pipeline: invalid regular expression \"(unclosed\": unclosed group"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  notification:\n    mentions:\n      - event: DEPLOYED\n", "app.pipecd.yaml:7: spec.notification.mentions[0].event: unknown event \"DEPLOYED\"; use \"*\" or one such as DEPLOYMENT_SUCCEEDED"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  postSync:\n    chain:\n      applications:\n        - kind: LAMBDA\n        - name: y\n          kind: Lambda\n", "app.pipecd.yaml:10: spec.postSync.chain.applications[1].kind: unknown application kind \"Lambda\"; one of KUBERNETES, TERRAFORM, LAMBDA, CLOUDRUN, ECS"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  postSync:\n    chain:\n      applications:\n        - labels: {}\n", "app.pipecd.yaml:8: spec.postSync.chain.applications[0]: set at least one of name, kind or labels"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  encryption:\n    encryptedSecrets: {a: b}\n", "app.pipecd.yaml:5: spec.encryption.decryptionTargets: must not be empty"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: x\n  plugins:\n    ecs: {}\n    lambda: {}\n", "app.pipecd.yaml:5: spec.plugins: several platform plugins are configured (ecs, lambda); name the one that deploys the app in spec.plugin"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: x\n  input: {}\n", "app.pipecd.yaml:5: spec.input: unknown field `input` for kind Application"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  plugin: lambda\n", "app.pipecd.yaml:5: spec.plugin: unknown field `plugin` for kind LambdaApp"),
        // YAML syntax errors carry the parser's own position.
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n    bad: indent\n", "app.pipecd.yaml:5: mapping values are not allowed in this context"),
        // An unclosed flow collection: the line of its opening bracket.
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: [x\n", "app.pipecd.yaml:4: unclosed bracket '['"),
    ];
    for (yaml, want) in cases {
        assert_eq!(error_of(yaml), *want, "{yaml}");
    }
}

#[test]
fn error_fields_are_structured() {
    let err = parse_app_config(
        "x/app.pipecd.yaml",
        "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  timeout: 2 days\n",
    )
    .unwrap_err();
    assert_eq!(err.path, "x/app.pipecd.yaml");
    assert_eq!(err.line, 5);
    assert_eq!(err.field, "spec.timeout");
    assert!(err.message.contains("invalid duration"), "{}", err.message);
}

#[test]
fn app_config_paths() {
    let cases = [
        ("app.pipecd.yaml", true),
        ("apps/web/app.pipecd.yaml", true),
        ("apps/web/service.pipecd.yaml", true),
        (".pipe.yaml", true),
        ("apps/old/.pipe.yaml", true),
        ("apps/web/deployment.yaml", false),
        ("app.pipecd.yml", false),
        (".pipe/analysis-template.yaml", false),
    ];
    for (path, want) in cases {
        assert_eq!(is_app_config_path(path), want, "{path}");
    }
}

#[test]
fn ignore_fields_are_a_feature_only_some_platforms_support() {
    let text = "apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: f\n  driftDetection:\n    ignoreFields: [\"x#y\"]\n";
    let cfg = parse_app_config("app.pipecd.yaml", text).expect("valid");
    let fields = |found: Vec<gannet_config::Unsupported>| -> Vec<String> {
        found.into_iter().map(|u| u.field).collect()
    };
    assert!(cfg.unsupported_features().is_empty());
    assert_eq!(
        fields(cfg.platform_features()),
        ["spec.driftDetection.ignoreFields"]
    );
}
