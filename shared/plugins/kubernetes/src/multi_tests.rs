//! The kubernetes_multicluster plugin against two fake API servers (`us` and `eu`), through
//! the core's planner and state machine one step at a time, every step delivered twice.

use std::sync::Arc;
use std::time::Duration;

use gannet_config::parse_app_config;
use gannet_domain::deployment::{Deployment, DeploymentStatus, StageStatus};
use gannet_domain::AppId;
use gannet_kube_fake::FakeKube;
use gannet_sdk::plugin::{Faces, Live, LiveStates, Plugin};
use gannet_sdk::test_run::{live_context, Commit, Commits, Delivery, Platform, Run, APP};
use serde_json::{json, Value};

use crate::{DeployTarget, MulticlusterPlugin};

/// Two clusters, `us` and `eu`, and the plugin reaching both.
#[derive(Clone)]
struct Clusters {
    us: FakeKube,
    eu: FakeKube,
    plugin: Arc<MulticlusterPlugin>,
    _dir: Arc<tempfile::TempDir>,
}

impl Clusters {
    fn new() -> Self {
        let (us, eu) = (FakeKube::start(), FakeKube::start());
        let dir = tempfile::tempdir().expect("temp dir");
        let target = |name: &str, fake: &FakeKube| {
            let sub = dir.path().join(name);
            std::fs::create_dir_all(&sub).expect("dir");
            DeployTarget::kubeconfig(name, fake.write_kubeconfig(&sub).to_string_lossy())
        };
        let targets = vec![target("us", &us), target("eu", &eu)];
        Self {
            plugin: Arc::new(MulticlusterPlugin::new(targets)),
            us,
            eu,
            _dir: Arc::new(dir),
        }
    }

    fn names(fake: &FakeKube) -> Vec<String> {
        fake.list("apps/v1", "Deployment")
            .iter()
            .map(|o| {
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }

    fn image(fake: &FakeKube, name: &str) -> String {
        let d = fake
            .get("apps/v1", "Deployment", Some("default"), name)
            .unwrap_or_else(|| panic!("no Deployment {name}"));
        d["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

impl Platform for Clusters {
    const KIND: &'static str = "KubernetesApp";
    type State = Vec<Value>;

    fn plugins(this: &Arc<Self>) -> Vec<Faces> {
        vec![Faces::platform(this.plugin.clone())]
    }

    /// Each cluster's Deployments and Services: what a repeated step must not change.
    async fn state(&self, _: &Deployment) -> Vec<Value> {
        let mut out = Vec::new();
        for (cluster, fake) in [("us", &self.us), ("eu", &self.eu)] {
            for kind in ["Deployment", "Service"] {
                let api = if kind == "Service" { "v1" } else { "apps/v1" };
                for o in fake.list(api, kind) {
                    let m = &o["metadata"];
                    out.push(json!([
                        cluster,
                        kind,
                        m["name"],
                        m["generation"],
                        m["labels"],
                        o["spec"]
                    ]));
                }
            }
        }
        out
    }

    async fn after_step(&self) {
        for fake in [&self.us, &self.eu] {
            fake.play_deployment_controller(Duration::ZERO);
        }
        tokio::time::sleep(Duration::from_millis(60)).await;
        for fake in [&self.us, &self.eu] {
            fake.stop_playing_deployment_controller();
        }
    }
}

fn deployment(image: &str, tier: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web{tier}
      pipecd.dev/variant: primary
  template:
    metadata:
      labels:
        app: web{tier}
        pipecd.dev/variant: primary
    spec:
      containers:
        - name: web
          image: {image}
"
    )
}

/// An app config: each cluster with its own manifest, and `stages` (none: a quick sync).
fn app(stages: &str) -> String {
    let pipeline = if stages.is_empty() {
        String::new()
    } else {
        format!("  pipeline:\n    stages:\n{stages}")
    };
    format!(
        "apiVersion: pipecd.dev/v1beta1
kind: Application
spec:
  name: web
  plugins:
    kubernetes_multicluster:
      quickSync: {{prune: true}}
      input:
        multiTargets:
          - target: {{name: us}}
            manifests: [us.yaml]
          - target: {{name: eu}}
            manifests: [eu.yaml]
{pipeline}"
    )
}

fn commit(digit: char, stages: &str, us: &str, eu: &str) -> Commit {
    let app = app(stages);
    Commit::with_files(
        digit,
        &app,
        &[("us.yaml", us.as_bytes()), ("eu.yaml", eu.as_bytes())],
    )
}

async fn deployed(c: &Clusters) -> Commit {
    let a = commit(
        'a',
        "",
        &deployment("web:1", ""),
        &deployment("web:1-eu", ""),
    );
    let mut run = Run::plan(c.clone(), &a, None);
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
    a
}

const CANARY_ON_US: &str = "      - name: K8S_MULTI_CANARY_ROLLOUT
        with: {replicas: 1, multiTargets: [us]}
      - name: K8S_MULTI_PRIMARY_ROLLOUT
      - name: K8S_MULTI_CANARY_CLEAN
";

#[tokio::test]
async fn a_quick_sync_applies_each_clusters_own_manifests_and_every_step_is_safe_twice() {
    let c = Clusters::new();
    deployed(&c).await;
    assert_eq!(Clusters::image(&c.us, "web"), "web:1");
    assert_eq!(Clusters::image(&c.eu, "web"), "web:1-eu");

    // Drift names the cluster: a change by hand on eu only.
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:hand"}]}}}});
    c.eu.merge_patch_as(
        "kubectl-edit",
        "apps/v1",
        "Deployment",
        Some("default"),
        "web",
        patch,
    )
    .expect("patch");
    let head = commit(
        'a',
        "",
        &deployment("web:1", ""),
        &deployment("web:1-eu", ""),
    );
    let config = parse_app_config("app.pipecd.yaml", &app("")).unwrap();
    let id = AppId::parse(APP).unwrap();
    let dir = head.app_dir();
    let ctx = live_context(&id, &config, &dir, &head.sha);
    let Live::Read(state) = c.plugin.live_state(ctx).await.expect("live") else {
        panic!("not read")
    };
    let fields: Vec<&str> = state.drift.iter().map(|f| f.field.as_str()).collect();
    assert!(
        !fields.is_empty() && fields.iter().all(|f| f.starts_with("eu: ")),
        "{fields:?}"
    );
    assert!(state.resources.iter().any(|r| r.id.starts_with("us: ")));
}

#[tokio::test]
async fn a_stage_limited_to_one_cluster_touches_only_it_and_the_primary_goes_everywhere() {
    let c = Clusters::new();
    let a = deployed(&c).await;
    let b = commit(
        'b',
        CANARY_ON_US,
        &deployment("web:2", ""),
        &deployment("web:2-eu", ""),
    );
    let commits = Commits {
        target: &b,
        running: Some(&a),
    };
    let mut run = Run::plan(c.clone(), &b, Some(&a));

    run.run_stage(&commits, Delivery::Twice).await;
    assert_eq!(Clusters::names(&c.us), ["web", "web-canary"]);
    assert_eq!(
        Clusters::names(&c.eu),
        ["web"],
        "the canary runs on us only"
    );
    assert_eq!(Clusters::image(&c.us, "web-canary"), "web:2");

    run.run_all(&commits, Delivery::Twice).await;
    assert_eq!(
        run.deployment.status,
        DeploymentStatus::Success,
        "{:#?}",
        run.logs
    );
    assert_eq!(Clusters::names(&c.us), ["web"]);
    assert_eq!(Clusters::image(&c.us, "web"), "web:2");
    assert_eq!(Clusters::image(&c.eu, "web"), "web:2-eu");
    let logs: String = run.logs.values().flatten().cloned().collect();
    assert!(logs.contains("On us:") && logs.contains("On eu:"), "{logs}");
}

#[tokio::test]
async fn a_failure_on_one_cluster_fails_the_stage_naming_it_and_rolls_back_every_cluster() {
    let c = Clusters::new();
    let a = deployed(&c).await;
    // eu's new manifest changes the Deployment's selector, which the API server refuses.
    let stages = "      - name: K8S_MULTI_CANARY_ROLLOUT
      - name: K8S_MULTI_PRIMARY_ROLLOUT
      - name: K8S_MULTI_CANARY_CLEAN
";
    let b = commit(
        'b',
        stages,
        &deployment("web:2", ""),
        &deployment("web:2-eu", "-front"),
    );
    let commits = Commits {
        target: &b,
        running: Some(&a),
    };
    let mut run = Run::plan(c.clone(), &b, Some(&a));
    run.run_stage(&commits, Delivery::Twice).await;
    assert_eq!(Clusters::names(&c.us), ["web", "web-canary"]);
    assert_eq!(Clusters::names(&c.eu), ["web", "web-canary"]);

    run.run_all(&commits, Delivery::Twice).await;
    assert_eq!(
        run.deployment.status,
        DeploymentStatus::Failure,
        "{:#?}",
        run.logs
    );
    let primary = run
        .deployment
        .stages
        .iter()
        .find(|s| s.name == "K8S_MULTI_PRIMARY_ROLLOUT")
        .unwrap();
    assert_eq!(primary.status, StageStatus::Failure);
    assert!(
        primary.status_reason.contains("eu: "),
        "{}",
        primary.status_reason
    );
    assert!(
        !primary.status_reason.contains("us: "),
        "{}",
        primary.status_reason
    );
    let rollback = run
        .deployment
        .stages
        .iter()
        .find(|s| s.name == "K8S_MULTI_ROLLBACK")
        .unwrap();
    assert_eq!(rollback.status, StageStatus::Success, "{:#?}", run.logs);
    for (fake, image) in [(&c.us, "web:1"), (&c.eu, "web:1-eu")] {
        assert_eq!(Clusters::names(fake), ["web"], "no canary left");
        assert_eq!(Clusters::image(fake, "web"), image);
    }
}

#[test]
fn the_clusters_an_app_goes_to_and_each_stages_targets_are_checked_before_it_deploys() {
    let plugin = MulticlusterPlugin::new(vec![
        DeployTarget::kubeconfig("us", "/nowhere"),
        DeployTarget::kubeconfig("eu", "/nowhere"),
    ]);
    // multiTargets in a stage's `with` is kept; a name that is not a list is refused.
    let with = plugin
        .validate_stage(
            "K8S_MULTI_CANARY_ROLLOUT",
            &json!({"replicas": "20%", "multiTargets": ["us"]}),
        )
        .expect("valid");
    assert_eq!(with["multiTargets"], json!(["us"]));
    let e = plugin
        .validate_stage("K8S_MULTI_SYNC", &json!({"multiTargets": "us"}))
        .unwrap_err();
    assert_eq!(e.field, "multiTargets");
    let e = plugin
        .validate_stage("K8S_MULTI_SYNC", &json!({"prnue": true}))
        .unwrap_err();
    assert!(e.message.contains("prune"), "{e:?}");

    // The app's clusters: spec.deployTargets, else input.multiTargets, else all.
    let spec = |extra: &str| {
        parse_app_config(
            "app.pipecd.yaml",
            &format!("apiVersion: pipecd.dev/v1beta1\nkind: Application\nspec:\n  name: web\n{extra}  plugins:\n    kubernetes_multicluster:\n      input: {{}}\n"),
        )
        .unwrap()
    };
    let names = |app: &gannet_config::AppConfig| {
        plugin
            .clusters(app)
            .map(|v| {
                v.iter()
                    .map(|(t, _)| t.config.name.clone())
                    .collect::<Vec<_>>()
            })
            .map_err(|e| e.to_string())
    };
    assert_eq!(names(&spec("")), Ok(vec!["us".to_owned(), "eu".to_owned()]));
    assert_eq!(
        names(&spec("  deployTargets: [eu]\n")),
        Ok(vec!["eu".to_owned()])
    );
    let e = names(&spec("  deployTargets: [ap]\n")).unwrap_err();
    assert!(e.contains("\"ap\"") && e.contains("us, eu"), "{e}");
    let single = crate::KubernetesPlugin::new(Vec::new());
    let in_single = parse_app_config(
        "app.pipecd.yaml",
        "apiVersion: pipecd.dev/v1beta1\nkind: KubernetesApp\nspec:\n  name: web\n  input:\n    multiTargets: [{target: {name: us}}]\n",
    )
    .unwrap();
    let e = single.app_files(&in_single).unwrap_err();
    assert!(e.to_string().contains("kubernetes_multicluster"), "{e}");
}
