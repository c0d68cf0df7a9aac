//! Each platform's own fields of an app config are its plugin's: the core keeps them as
//! written ([`gannet_config::V0_KINDS`]) and each plugin reads them as its own spec. A
//! field that does not read is refused by `config check` and by the trigger's gate
//! ([`check::validate`]) with file, line and field, before anything deploys; and the specs
//! take PipeCD's names and defaults.

use gannet_config::{parse_app_config, AppConfig};
use gannet_plugin_cloudrun::spec::CloudRunSpec;
use gannet_plugin_ecs::spec::{AccessType, AssignPublicIp, EcsSpec, LaunchType};
use gannet_plugin_kubernetes::spec::{KubernetesSpec, TrafficRoutingMethod};
use gannet_plugin_terraform::spec::TerraformSpec;
use gannet_sdk::check;

const HEAD: &str = "apiVersion: pipecd.dev/v1beta1\n";

fn parse(yaml: &str) -> AppConfig {
    parse_app_config("apps/demo/app.pipecd.yaml", yaml).unwrap_or_else(|e| panic!("{e}"))
}

/// Every issue of `yaml` as `config check` reports it, and as the trigger's gate does.
fn issues(yaml: &str) -> (Vec<String>, Vec<String>) {
    let plugins = gannet_plugins::planning()
        .without_settings()
        .expect("plugins build");
    let shown = |i: &check::Issue| {
        let line = i.line.map(|l| format!("{l}:")).unwrap_or_default();
        format!("{}:{line} {}: {}", i.file, i.field, i.message)
    };
    let checked = check::check_app("app.pipecd.yaml", yaml, &plugins, &|_| None);
    let cfg = parse_app_config("app.pipecd.yaml", yaml).expect("the generic fields parse");
    let gate = check::validate("app.pipecd.yaml", yaml, &cfg, &plugins);
    (
        checked.errors.iter().map(shown).collect(),
        gate.iter().map(shown).collect(),
    )
}

/// `line:field` of each issue, for compact rows.
fn summary(issues: &[check::Issue]) -> Vec<String> {
    issues
        .iter()
        .map(|i| format!("{}:{}", i.line.unwrap_or(0), i.field))
        .collect()
}

#[test]
fn the_files_a_platforms_fields_name_are_read_by_config_check() {
    let app = |kind: &str, spec: &str| format!("{HEAD}kind: {kind}\nspec:\n  name: demo\n{spec}");
    // (case, config, files, errors, warnings)
    type Row<'a> = (
        &'a str,
        String,
        Vec<(&'a str, &'a str)>,
        Vec<&'a str>,
        Vec<&'a str>,
    );
    let cases: Vec<Row> = vec![
        ("a missing default manifest is a warning", app("LambdaApp", ""), vec![], vec![], vec!["3:spec.input.functionManifestFile"]),
        ("a written manifest missing is an error", app("LambdaApp", "  input:\n    functionManifestFile: fn.yaml\n"), vec![], vec!["6:spec.input.functionManifestFile"], vec![]),
        ("a manifest that does not parse", app("CloudRunApp", ""), vec![("service.yaml", "a: [b\n")], vec!["3:spec.input.serviceManifestFile"], vec![]),
        ("an empty manifest", app("CloudRunApp", ""), vec![("service.yaml", "# nothing\n")], vec!["3:spec.input.serviceManifestFile"], vec![]),
        (
            "ECS service and task definitions",
            app("ECSApp", "  input:\n    serviceDefinitionFile: ./svc.yaml\n    taskDefinitionFile: task.json\n"),
            vec![("svc.yaml", "cluster: c\n"), ("task.json", "{\"family\": ")],
            vec!["7:spec.input.taskDefinitionFile"],
            vec![],
        ),
        (
            "Kubernetes manifests, multi-document, and helm values",
            app("KubernetesApp", "  input:\n    manifests: [a.yaml, b.yaml]\n    helmOptions:\n      valueFiles: [values.yaml, https://x/values.yaml]\n"),
            vec![("a.yaml", "kind: A\n---\nkind: B\n"), ("values.yaml", "# all defaults\n")],
            vec!["6:spec.input.manifests[1]"],
            vec![],
        ),
        ("Terraform var files exist", app("TerraformApp", "  input:\n    varFiles: [dev.tfvars]\n"), vec![("dev.tfvars", "a = \"b\"\n")], vec![], vec![]),
        ("a Terraform var file is missing", app("TerraformApp", "  input:\n    varFiles: [dev.tfvars]\n"), vec![], vec!["6:spec.input.varFiles[0]"], vec![]),
    ];
    let plugins = gannet_plugins::planning()
        .without_settings()
        .expect("plugins build");
    for (case, yaml, files, errors, warnings) in cases {
        let files: std::collections::BTreeMap<String, String> = files
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let read = move |p: &str| files.get(p).cloned();
        let result = check::check_app("demo/app.pipecd.yaml", &yaml, &plugins, &read);
        assert_eq!(
            summary(&result.errors),
            errors,
            "{case}: {:#?}",
            result.errors
        );
        assert_eq!(
            summary(&result.warnings),
            warnings,
            "{case}: {:#?}",
            result.warnings
        );
        assert_eq!(result.ok, errors.is_empty(), "{case}");
    }
    let ecs = app("ECSApp", "  input:\n    taskDefinitionFile: task.json\n");
    let read = |p: &str| (p == "task.json").then(|| "{\"family\": ".to_owned());
    let result = check::check_app("demo/app.pipecd.yaml", &ecs, &plugins, &read);
    let task = result
        .errors
        .iter()
        .find(|i| i.field == "spec.input.taskDefinitionFile")
        .expect("the task definition's issue");
    assert_eq!(task.message, "task.json: line 1: EOF while parsing a value");
}

#[test]
fn a_platform_field_that_does_not_read_is_refused_by_its_plugin_with_line_and_field() {
    let cases: &[(&str, &str)] = &[
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  trafficRouting:\n    method: istio\n", "app.pipecd.yaml:5: spec.trafficRouting: unknown field `trafficRouting` for kind LambdaApp"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: LambdaApp\nspec:\n  name: x\n  input:\n    functionManifest: f.yaml\n", "app.pipecd.yaml:6: spec.input.functionManifest: unknown field `functionManifest`; did you mean `functionManifestFile`?"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: ECSApp\nspec:\n  name: x\n  input:\n    accessType: ALB\n", "app.pipecd.yaml:6: spec.input.accessType: unknown variant `ALB`, expected `ELB` or `SERVICE_DISCOVERY`"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: ECSApp\nspec:\n  name: x\n  input:\n    targetGroups:\n      primary:\n        containerPort: http\n", "app.pipecd.yaml:8: spec.input.targetGroups.primary.containerPort: invalid type: string \"http\", expected u16"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: TerraformApp\nspec:\n  name: x\n  quickSync:\n    retries: 2\n", "app.pipecd.yaml:6: spec.quickSync.retries: retrying a failed apply is not supported: gannet applies a plan once"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: KubernetesApp\nspec:\n  name: x\n  input:\n    manifest: [a.yaml]\n", "app.pipecd.yaml:6: spec.input.manifest: unknown field `manifest`; did you mean `manifests`?"),
        ("apiVersion: pipecd.dev/v1beta1\nkind: CloudRunApp\nspec:\n  name: x\n  quickSync:\n    prune: true\n", "app.pipecd.yaml:6: spec.quickSync.prune: unknown field `prune`; there are no fields here"),
    ];
    for (yaml, want) in cases {
        let (checked, gate) = issues(yaml);
        assert_eq!(checked, [*want], "config check of {yaml}");
        assert_eq!(gate, [*want], "the trigger's gate for {yaml}");
    }
}

#[test]
fn ecs_input() {
    let cfg = parse(
        r#"apiVersion: pipecd.dev/v1beta1
kind: ECSApp
spec:
  name: api
  input:
    clusterArn: arn:aws:ecs:eu-west-1:1:cluster/main
    launchType: EC2
    serviceDefinitionFile: servicedef.yaml
    taskDefinitionFile: taskdef.yaml
    accessType: SERVICE_DISCOVERY
    runStandaloneTask: false
    awsvpcConfiguration:
      subnets: [subnet-1, subnet-2]
      securityGroups: [sg-1]
      assignPublicIp: ENABLED
    targetGroups:
      primary:
        targetGroupArn: arn:tg/primary
        containerName: web
        containerPort: 80
        loadBalancerName: lb
      canary:
        targetGroupArn: arn:tg/canary
        containerName: web
        containerPort: 8080
  quickSync:
    recreate: true
"#,
    );
    let ecs: EcsSpec = cfg.platform_spec().unwrap();
    let input = &ecs.input;
    assert_eq!(input.cluster_arn, "arn:aws:ecs:eu-west-1:1:cluster/main");
    assert_eq!(input.launch_type, LaunchType::Ec2);
    assert_eq!(input.access_type, AccessType::ServiceDiscovery);
    assert!(!input.run_standalone_task);
    assert!(!input.is_standalone_task());
    assert_eq!(input.awsvpc_configuration.subnets, ["subnet-1", "subnet-2"]);
    assert_eq!(
        input.awsvpc_configuration.assign_public_ip,
        Some(AssignPublicIp::Enabled)
    );
    let primary = input.target_groups.primary.as_ref().unwrap();
    assert_eq!(
        (primary.container_port, primary.load_balancer_name.as_str()),
        (80, "lb")
    );
    assert_eq!(
        input.target_groups.canary.as_ref().unwrap().container_port,
        8080
    );
    assert!(ecs.quick_sync.recreate);
    assert_eq!(cfg.platform(), Some("ecs"));
}

#[test]
fn ecs_defaults() {
    let cfg = parse(&format!("{HEAD}kind: ECSApp\nspec:\n  name: task\n"));
    let input = cfg.platform_spec::<EcsSpec>().unwrap().input;
    assert_eq!(input.task_definition_file, "taskdef.json");
    assert!(input.is_standalone_task());
    assert!(input.run_standalone_task);
    assert_eq!(input.launch_type, LaunchType::Fargate);
    assert_eq!(input.access_type, AccessType::Elb);
}

#[test]
fn other_platform_kinds() {
    let cloudrun = parse(&format!(
        "{HEAD}kind: CloudRunApp\nspec:\n  name: run\n  input:\n    serviceManifestFile: svc.yaml\n"
    ));
    assert_eq!(
        cloudrun
            .platform_spec::<CloudRunSpec>()
            .unwrap()
            .input
            .service_manifest_file,
        "svc.yaml"
    );
    assert_eq!(cloudrun.platform(), Some("cloudrun"));

    let tf = parse(&format!(
        "{HEAD}kind: TerraformApp\nspec:\n  name: infra\n  input:\n    workspace: dev\n    terraformVersion: 1.5.0\n    vars: [a=1]\n    varFiles: [dev.tfvars]\n    commandFlags:\n      plan: [-refresh=false]\n    commandEnvs:\n      shared: [TF_LOG=DEBUG]\n"
    ));
    let input = tf.platform_spec::<TerraformSpec>().unwrap().input;
    assert_eq!(
        (input.workspace.as_str(), input.terraform_version.as_str()),
        ("dev", "1.5.0")
    );
    assert_eq!(input.command_flags.plan, ["-refresh=false"]);
    assert_eq!(input.command_envs.shared, ["TF_LOG=DEBUG"]);

    let k8s = parse(
        r#"apiVersion: pipecd.dev/v1beta1
kind: KubernetesApp
spec:
  name: web
  input:
    manifests: [deployment.yaml]
    kubectlVersion: 1.32.2
    namespace: web
    helmChart:
      repository: oci://ghcr.io/x
      name: chart
      version: v1
      ref: main
    helmOptions:
      releaseName: web
      valueFiles: [values.yaml]
  quickSync:
    prune: true
  service:
    name: web
  workloads:
    - kind: Deployment
      name: web
  trafficRouting:
    method: istio
    istio:
      host: web.default.svc
  variantLabel:
    key: app/variant
  resourceRoutes:
    - provider:
        name: cluster-2
      match:
        kind: Ingress
"#,
    );
    let spec: KubernetesSpec = k8s.platform_spec().unwrap();
    assert_eq!(spec.input.manifests, ["deployment.yaml"]);
    assert_eq!(spec.input.helm_chart.as_ref().unwrap().git_ref, "main");
    assert_eq!(
        spec.input.helm_options.as_ref().unwrap().value_files,
        ["values.yaml"]
    );
    assert!(spec.quick_sync.prune);
    assert_eq!(spec.workloads[0].kind, "Deployment");
    assert_eq!(
        spec.traffic_routing.as_ref().unwrap().method,
        TrafficRoutingMethod::Istio
    );
    assert_eq!(spec.variant_label.key, "app/variant");
    assert_eq!(spec.variant_label.canary_value, "canary");
    assert_eq!(spec.resource_routes[0].provider.name, "cluster-2");
}

#[test]
fn drift_ignore_fields_are_unsupported_unless_the_platform_honours_them() {
    let ignoring = "  driftDetection:\n    ignoreFields: [\"v1:Service:default:web#spec.ports\"]\n";
    let app = |kind: &str| format!("{HEAD}kind: {kind}\nspec:\n  name: demo\n{ignoring}");
    let plugins = gannet_plugins::planning()
        .without_settings()
        .expect("plugins build");
    let unsupported = |kind: &str| -> Vec<String> {
        let checked = check::check_app("app.pipecd.yaml", &app(kind), &plugins, &|_| None);
        checked
            .errors
            .iter()
            .filter(|i| i.unsupported)
            .map(|i| format!("{}: {}", i.field, i.message))
            .collect()
    };
    assert_eq!(unsupported("KubernetesApp"), Vec::<String>::new());
    for kind in ["LambdaApp", "ECSApp", "CloudRunApp", "TerraformApp"] {
        assert_eq!(
            unsupported(kind),
            ["spec.driftDetection.ignoreFields: ignoring fields in drift detection is not supported yet"],
            "{kind}"
        );
    }
}

/// PipeCD's first-deployment rule is the planner's, but a platform's own rule comes first:
/// a Terraform app with a pipeline runs it on its first commit too (its plan is shown before
/// anything is applied), where a Kubernetes app's first deployment is a quick sync.
#[test]
fn a_terraform_apps_first_deployment_runs_its_pipeline() {
    use gannet_domain::deployment::{SyncStrategy, Trigger, TriggerKind};
    use gannet_sdk::planner::{plan, PlanInput};
    let plugins = gannet_plugins::planning()
        .without_settings()
        .expect("plugins build");
    let first = |kind: &str, spec: &str| {
        let app = parse(&format!(
            "{HEAD}kind: {kind}\nspec:\n  name: demo\n{spec}  pipeline:\n    stages:\n      - name: WAIT\n        with: {{duration: 1s}}\n"
        ));
        let planned = plan(&PlanInput {
            app: &app,
            trigger: &Trigger {
                kind: TriggerKind::OnCommit,
                commander: String::new(),
                pushed_by: String::new(),
                strategy: SyncStrategy::Auto,
                gate_skip: None,
            },
            commit_message: "first",
            changed_files: &[],
            running_commit: None,
            plugins: &plugins,
            // Every file reads as an empty mapping, except that the app is no kustomization.
            read: &|rel| {
                (!rel.to_ascii_lowercase().starts_with("kustomization")).then(|| "{}".to_owned())
            },
            lifecycle: None,
            app_dir: None,
            running_app_dir: None,
            config_path: None,
        })
        .unwrap_or_else(|e| panic!("{kind}: {e}"));
        (planned.strategy, planned.summary)
    };
    let (strategy, summary) = first("TerraformApp", "");
    assert_eq!(strategy, SyncStrategy::Pipeline, "{summary}");
    assert!(summary.contains("its first too"), "{summary}");
    let (strategy, summary) = first("KubernetesApp", "");
    assert_eq!(strategy, SyncStrategy::QuickSync, "{summary}");
    assert!(summary.contains("first deployment"), "{summary}");
}
