//! The plugin against an API server on loopback, reached through a kubeconfig and kube-rs
//! exactly as a cluster is: the fake (`gannet-kube-fake`), and for the tests that matter most
//! (prune, canary with Istio routing, rollback from the middle, fields of other managers) a
//! real kube-apiserver too (`RealKube`, built by `scripts/kube.sh`). Deployments run through
//! the core's planner and state machine one step at a time (`gannet_sdk::test_run`), most with
//! every step delivered twice; the API server's objects are checked after each stage. Only the
//! fake can inject faults (5xx, throttling) and record content types.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gannet_config::parse_app_config;
use gannet_domain::deployment::{DeploymentStatus, Stage, StageStatus};
use gannet_domain::{AppId, GoDuration};
use gannet_kube_fake::{FakeKube, Fault, RealKube, Request};
use gannet_sdk::plugin::{Faces, Live, LiveStates, StepError};
use gannet_sdk::test_run::{live_context, Commit, Commits, Delivery, Platform, Run, APP};
use serde_json::{json, Value};

use crate::{DeployTarget, KubernetesPlugin};

/// The API server a test runs against.
#[derive(Clone)]
enum Server {
    Fake(FakeKube),
    /// A real kube-apiserver. Its client blocks, so each call runs on a thread of its own,
    /// off the test's runtime.
    Real(Arc<RealKube>),
}

/// Runs `f` (a blocking call to the real server) on a thread of its own.
fn blocking<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(f).join().expect("the call's thread"))
}

impl Server {
    fn get(&self, api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> Option<Value> {
        match self {
            Self::Fake(f) => f.get(api_version, kind, ns, name),
            Self::Real(r) => blocking(|| r.get(api_version, kind, ns, name)),
        }
    }

    fn list(&self, api_version: &str, kind: &str) -> Vec<Value> {
        match self {
            Self::Fake(f) => f.list(api_version, kind),
            Self::Real(r) => blocking(|| r.list(api_version, kind)),
        }
    }

    fn apply_as(&self, manager: &str, object: Value, force: bool) -> Result<Value, Value> {
        match self {
            Self::Fake(f) => f.apply_as(manager, object, force),
            Self::Real(r) => blocking(|| r.apply_as(manager, object, force)),
        }
    }

    fn merge_patch_as(
        &self,
        manager: &str,
        (api_version, kind, name): (&str, &str, &str),
        patch: Value,
    ) -> Result<Value, Value> {
        let ns = Some("default");
        match self {
            Self::Fake(f) => f.merge_patch_as(manager, api_version, kind, ns, name, patch),
            Self::Real(r) => {
                blocking(|| r.merge_patch_as(manager, api_version, kind, ns, name, patch))
            }
        }
    }

    fn requests(&self) -> Vec<Request> {
        match self {
            Self::Fake(f) => f.requests(),
            Self::Real(r) => blocking(|| r.requests()),
        }
    }

    /// The Deployment controller acts once: every rollout in progress finishes.
    async fn finish_rollouts(&self) {
        match self {
            Self::Fake(f) => {
                f.play_deployment_controller(Duration::ZERO);
                tokio::time::sleep(Duration::from_millis(60)).await;
                f.stop_playing_deployment_controller();
            }
            Self::Real(r) => {
                blocking(|| r.play_deployment_controller(Duration::ZERO));
                tokio::time::sleep(Duration::from_millis(400)).await;
                blocking(|| r.stop_playing_deployment_controller());
            }
        }
    }
}

/// The API server, and the plugin reaching it through a kubeconfig.
#[derive(Clone)]
struct Kube {
    server: Server,
    plugin: Arc<KubernetesPlugin>,
    /// Applies counted before [`Kube::applies`] counts from here.
    applies_before: Arc<AtomicUsize>,
    _dir: Arc<tempfile::TempDir>,
}

impl Kube {
    /// On the fake.
    fn new() -> Self {
        let fake = FakeKube::start();
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = fake.write_kubeconfig(dir.path());
        Self::on(Server::Fake(fake), kubeconfig, dir)
    }

    /// On a real kube-apiserver, with Istio's CRDs installed.
    fn real() -> Self {
        let (real, dir) = blocking(|| {
            let real = RealKube::start();
            real.install_istio_crds();
            (real, tempfile::tempdir().expect("temp dir"))
        });
        let kubeconfig = real.write_kubeconfig(dir.path());
        Self::on(Server::Real(Arc::new(real)), kubeconfig, dir)
    }

    fn on(server: Server, kubeconfig: std::path::PathBuf, dir: tempfile::TempDir) -> Self {
        let target = DeployTarget::kubeconfig("local", kubeconfig.to_string_lossy());
        Self {
            server,
            plugin: Arc::new(KubernetesPlugin::new(vec![target])),
            applies_before: Arc::new(AtomicUsize::new(0)),
            _dir: Arc::new(dir),
        }
    }

    /// The fake, for what only it does (faults, content types).
    fn fake(&self) -> &FakeKube {
        match &self.server {
            Server::Fake(f) => f,
            Server::Real(_) => panic!("this test needs the fake"),
        }
    }

    fn get(&self, api_version: &str, kind: &str, name: &str) -> Option<Value> {
        self.server.get(api_version, kind, Some("default"), name)
    }

    fn deployment(&self, name: &str) -> Value {
        self.get("apps/v1", "Deployment", name)
            .unwrap_or_else(|| panic!("no Deployment {name}"))
    }

    fn image(&self, name: &str) -> String {
        self.deployment(name)["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The names of the objects of a kind in `default`, but the API server's own (the
    /// `kubernetes` Service a real one keeps there).
    fn names(&self, api_version: &str, kind: &str) -> Vec<String> {
        self.server
            .list(api_version, kind)
            .iter()
            .filter(|o| o["metadata"]["namespace"] == "default")
            .filter(|o| o["metadata"]["labels"]["component"] != "apiserver")
            .map(|o| {
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }

    /// Server-side applies by the app since the last [`Kube::count_applies_from_now`]. (The
    /// real server's audit log has no content types: an apply is a PATCH by the app's field
    /// manager, which applies only.)
    fn applies(&self) -> usize {
        self.all_applies() - self.applies_before.load(Ordering::Relaxed)
    }

    fn count_applies_from_now(&self) {
        self.applies_before
            .store(self.all_applies(), Ordering::Relaxed);
    }

    fn all_applies(&self) -> usize {
        let manager = own_manager();
        self.server
            .requests()
            .iter()
            .filter(|r| r.method == "PATCH" && r.field_manager.as_deref() == Some(&manager))
            .filter(|r| {
                r.content_type.is_none()
                    || r.content_type.as_deref() == Some("application/apply-patch+yaml")
            })
            .count()
    }
}

/// A test case run twice: on the fake, and on a real kube-apiserver.
macro_rules! on_both {
    ($case:ident) => {
        mod $case {
            #[tokio::test]
            async fn on_the_fake() {
                super::$case(super::Kube::new()).await
            }

            #[tokio::test]
            async fn on_kube_apiserver() {
                super::$case(super::Kube::real()).await
            }
        }
    };
}

impl Platform for Kube {
    const KIND: &'static str = "KubernetesApp";
    /// What a repeated step must not change: each object's generation, labels, annotations,
    /// spec and data (status and resourceVersion move with the controller).
    type State = Vec<Value>;

    fn plugins(this: &Arc<Self>) -> Vec<Faces> {
        vec![Faces::platform(this.plugin.clone())]
    }

    async fn state(&self, _: &gannet_domain::deployment::Deployment) -> Vec<Value> {
        let mut out = Vec::new();
        for (api_version, kind) in KINDS {
            for o in self.server.list(api_version, kind) {
                let m = &o["metadata"];
                out.push(json!([
                    kind,
                    m["name"],
                    m["generation"],
                    m["labels"],
                    m["annotations"],
                    o["spec"],
                    o["data"]
                ]));
            }
        }
        out
    }

    /// The Deployment controller acts between steps only (never between a step and its
    /// repeat): a stage's first step sees its rollout in progress, a later one sees it done.
    async fn after_step(&self) {
        self.server.finish_rollouts().await;
    }
}

const KINDS: [(&str, &str); 4] = [
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("networking.istio.io/v1beta1", "VirtualService"),
];

fn deployment(image: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: web
      pipecd.dev/variant: primary
  template:
    metadata:
      labels:
        app: web
        pipecd.dev/variant: primary
    spec:
      containers:
        - name: web
          image: {image}
          ports:
            - containerPort: 8080
"
    )
}

const SERVICE: &str = "apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector:
    app: web
  ports:
    - port: 80
      targetPort: 8080
";

const CONFIG: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  greeting: hello
";

const VIRTUAL_SERVICE: &str = "apiVersion: networking.istio.io/v1beta1
kind: VirtualService
metadata:
  name: web
spec:
  hosts: [web]
  http:
    - name: main
      route:
        - destination:
            host: web
            subset: primary
          weight: 100
";

const QUICK_SYNC: &str = "apiVersion: pipecd.dev/v1beta1
kind: KubernetesApp
spec:
  name: web
  quickSync:
    prune: true
";

fn pipeline(routing: &str, stages: &str) -> String {
    format!(
        "apiVersion: pipecd.dev/v1beta1
kind: KubernetesApp
spec:
  name: web
  trafficRouting:
{routing}
  pipeline:
    stages:
{stages}"
    )
}

const CANARY_STAGES_ISTIO: &str = "      - name: K8S_CANARY_ROLLOUT
        with:
          replicas: 50%
      - name: K8S_TRAFFIC_ROUTING
        with:
          primary: 80
          canary: 20
      - name: K8S_PRIMARY_ROLLOUT
      - name: K8S_TRAFFIC_ROUTING
        with:
          primary: 100
      - name: K8S_CANARY_CLEAN
";

const ISTIO: &str = "    method: istio
    istio:
      host: web
";

fn commit(digit: char, app: &str, files: &[(&str, &str)]) -> Commit {
    let files: Vec<(&str, &[u8])> = files.iter().map(|(n, t)| (*n, t.as_bytes())).collect();
    Commit::with_files(digit, app, &files)
}

async fn deploy(
    kube: &Kube,
    target: &Commit,
    running: Option<&Commit>,
    delivery: Delivery,
) -> Run<Kube> {
    let mut run = Run::plan(kube.clone(), target, running);
    run.run_all(&Commits { target, running }, delivery).await;
    run
}

/// A commit of the app `app` with the Deployment at `image` and its Service.
fn web(digit: char, app: &str, image: &str, replicas: u32) -> Commit {
    commit(
        digit,
        app,
        &[
            ("deployment.yaml", &deployment(image, replicas)),
            ("service.yaml", SERVICE),
        ],
    )
}

/// The first deployment: `web:1` with two replicas and its Service, by quick sync.
async fn deployed(kube: &Kube) -> Commit {
    let a = web('a', QUICK_SYNC, "web:1", 2);
    let run = deploy(kube, &a, None, Delivery::Once).await;
    assert_status(&run, DeploymentStatus::Success);
    a
}

/// The planned stage named `name`.
fn stage<'r>(run: &'r Run<Kube>, name: &str) -> &'r Stage {
    run.deployment
        .stages
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no stage {name}"))
}

/// The deployment ended `status` (its stage logs shown when it did not).
fn assert_status(run: &Run<Kube>, status: DeploymentStatus) {
    assert_eq!(run.deployment.status, status, "{:#?}", run.logs);
}

fn weights(kube: &Kube) -> Vec<(String, u64)> {
    let vs = kube
        .get("networking.istio.io/v1beta1", "VirtualService", "web")
        .expect("VirtualService");
    vs["spec"]["http"][0]["route"]
        .as_array()
        .expect("routes")
        .iter()
        .map(|r| {
            (
                r["destination"]["subset"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                r["weight"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

on_both!(quick_sync_applies_with_pipecds_labels_waits_for_the_rollout_and_prunes_only_its_own);
async fn quick_sync_applies_with_pipecds_labels_waits_for_the_rollout_and_prunes_only_its_own(
    kube: Kube,
) {
    // Not gannet's: applied by another tool, and never to be touched.
    kube.server
        .apply_as(
            "someone-else",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "not-ours", "namespace": "default"}, "data": {"a": "1"}}),
            false,
        )
        .expect("apply");
    let a = commit(
        'a',
        QUICK_SYNC,
        &[
            ("deployment.yaml", &deployment("web:1", 2)),
            ("service.yaml", SERVICE),
            ("config.yaml", CONFIG),
        ],
    );
    let run = deploy(&kube, &a, None, Delivery::Twice).await;
    assert_status(&run, DeploymentStatus::Success);
    let log = run.stage_log("k8s-sync");
    assert!(log.contains("Applied Deployment/default/web"), "{log}");
    assert!(
        log.contains("Waiting for the rollout: Deployment/default/web"),
        "{log}"
    );
    let d = kube.deployment("web");
    let meta = &d["metadata"];
    assert_eq!(meta["labels"]["pipecd.dev/managed-by"], "piped");
    assert_eq!(
        meta["labels"]["pipecd.dev/application"],
        crate::app_label(&AppId::parse(APP).unwrap())
    );
    assert_eq!(
        meta["annotations"]["pipecd.dev/commit-hash"],
        a.sha.as_str()
    );
    assert_eq!(meta["annotations"]["pipecd.dev/application"], APP);
    assert_eq!(
        meta["annotations"]["pipecd.dev/resource-key"],
        "apps/v1:Deployment:default:web"
    );
    assert_eq!(
        meta["generation"], 1,
        "a step delivered twice applies once: no new generation"
    );
    assert!(meta["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["manager"] == own_manager() && m["operation"] == "Apply"));

    // The next commit drops the ConfigMap: it is pruned; the one gannet never applied stays.
    kube.count_applies_from_now();
    let b = web('b', QUICK_SYNC, "web:2", 2);
    let run = deploy(&kube, &b, Some(&a), Delivery::Twice).await;
    assert_status(&run, DeploymentStatus::Success);
    assert_eq!(kube.names("v1", "ConfigMap"), ["not-ours"]);
    assert!(run
        .stage_log("k8s-sync")
        .contains("Pruned ConfigMap/default/web-config"));
    assert_eq!(kube.image("web"), "web:2");
    assert_eq!(kube.deployment("web")["metadata"]["generation"], 2);
    assert_eq!(
        kube.applies(),
        2,
        "one apply per object, each step delivered twice: {:#?}",
        kube.server.requests()
    );

    // The same manifests at a new commit: only the commit annotation changes, which a
    // Deployment counts as a new generation (its controller copies annotations to its
    // ReplicaSets); its spec stays as it was.
    let c = web('c', QUICK_SYNC, "web:2", 2);
    let before = kube.deployment("web");
    let run = deploy(&kube, &c, Some(&b), Delivery::Once).await;
    assert_eq!(run.deployment.status, DeploymentStatus::Success);
    let after = kube.deployment("web");
    assert_eq!(after["spec"], before["spec"]);
    assert_eq!(after["metadata"]["generation"], 3);
}

on_both!(canary_istio_routing_primary_and_clean_each_leave_the_cluster_as_they_should);
async fn canary_istio_routing_primary_and_clean_each_leave_the_cluster_as_they_should(kube: Kube) {
    let files = |image: &str| {
        vec![
            ("deployment.yaml", deployment(image, 4)),
            ("service.yaml", SERVICE.to_owned()),
            ("vs.yaml", VIRTUAL_SERVICE.to_owned()),
        ]
    };
    let app = pipeline(ISTIO, CANARY_STAGES_ISTIO);
    let a_files = files("web:1");
    let a = commit(
        'a',
        QUICK_SYNC,
        &a_files
            .iter()
            .map(|(n, t)| (*n, t.as_str()))
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        deploy(&kube, &a, None, Delivery::Once)
            .await
            .deployment
            .status,
        DeploymentStatus::Success
    );

    let b_files = files("web:2");
    let b = commit(
        'b',
        &app,
        &b_files
            .iter()
            .map(|(n, t)| (*n, t.as_str()))
            .collect::<Vec<_>>(),
    );
    let commits = Commits {
        target: &b,
        running: Some(&a),
    };
    let mut run = Run::plan(kube.clone(), &b, Some(&a));
    assert_eq!(
        run.stage_names(),
        [
            "K8S_CANARY_ROLLOUT",
            "K8S_TRAFFIC_ROUTING",
            "K8S_PRIMARY_ROLLOUT",
            "K8S_TRAFFIC_ROUTING",
            "K8S_CANARY_CLEAN",
            "K8S_ROLLBACK"
        ]
    );

    run.run_stage(&commits, Delivery::Twice).await;
    let canary = kube.deployment("web-canary");
    assert_eq!(canary["spec"]["replicas"], 2, "50% of 4");
    assert_eq!(
        canary["spec"]["selector"]["matchLabels"]["pipecd.dev/variant"],
        "canary"
    );
    assert_eq!(
        canary["spec"]["template"]["metadata"]["labels"]["pipecd.dev/variant"],
        "canary"
    );
    assert_eq!(kube.image("web-canary"), "web:2");
    assert_eq!(kube.image("web"), "web:1", "the primary is untouched");
    assert_eq!(weights(&kube), [("primary".to_owned(), 100)]);

    run.run_stage(&commits, Delivery::Twice).await;
    assert_eq!(
        weights(&kube),
        [("primary".to_owned(), 80), ("canary".to_owned(), 20)]
    );

    run.run_stage(&commits, Delivery::Twice).await;
    assert_eq!(kube.image("web"), "web:2");
    assert_eq!(
        weights(&kube),
        [("primary".to_owned(), 80), ("canary".to_owned(), 20)],
        "the primary rollout leaves routing to the routing stages"
    );

    run.run_stage(&commits, Delivery::Twice).await;
    assert_eq!(weights(&kube), [("primary".to_owned(), 100)]);

    run.run_stage(&commits, Delivery::Twice).await;
    assert_eq!(kube.names("apps/v1", "Deployment"), ["web"]);
    run.run_all(&commits, Delivery::Once).await;
    assert_status(&run, DeploymentStatus::Success);
    let rollback = stage(&run, "K8S_ROLLBACK");
    assert_eq!(rollback.status, StageStatus::NotStartedYet);
}

/// `web` (2 replicas, its environment from the ConfigMap `web-config`) deployed by a quick
/// sync: the commit, and the Deployment's manifest.
async fn deployed_with_config(kube: &Kube) -> (Commit, String) {
    let with_config = deployment("web:1", 2).replace(
        "          ports:\n",
        "          envFrom:\n            - configMapRef:\n                name: web-config\n          ports:\n",
    );
    assert!(with_config.contains("configMapRef"));
    let a = commit(
        'a',
        QUICK_SYNC,
        &[("deployment.yaml", &with_config), ("config.yaml", CONFIG)],
    );
    assert_eq!(
        deploy(kube, &a, None, Delivery::Once)
            .await
            .deployment
            .status,
        DeploymentStatus::Success
    );
    (a, with_config)
}

#[tokio::test]
async fn a_canary_runs_with_its_own_copy_of_the_config_it_uses_and_clean_removes_it() {
    let kube = Kube::new();
    let (a, with_config) = deployed_with_config(&kube).await;

    // Only the config changes (PipeCD's canary-by-config-change).
    let stages = "      - name: K8S_CANARY_ROLLOUT\n      - name: K8S_PRIMARY_ROLLOUT\n      - name: K8S_CANARY_CLEAN\n";
    let app = pipeline("    method: podselector\n", stages);
    let b = commit(
        'b',
        &app,
        &[
            ("deployment.yaml", &with_config),
            ("config.yaml", &CONFIG.replace("hello", "hola")),
        ],
    );
    let commits = Commits {
        target: &b,
        running: Some(&a),
    };
    let mut run = Run::plan(kube.clone(), &b, Some(&a));
    let greeting = |name: &str| {
        kube.get("v1", "ConfigMap", name).map(|c| {
            c["data"]["greeting"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
    };

    run.run_stage(&commits, Delivery::Twice).await;
    assert_eq!(greeting("web-config-canary").as_deref(), Some("hola"));
    assert_eq!(
        greeting("web-config").as_deref(),
        Some("hello"),
        "the primary's config is untouched"
    );
    let canary = kube.deployment("web-canary");
    assert_eq!(
        canary["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["configMapRef"]["name"],
        "web-config-canary"
    );
    assert_eq!(
        kube.deployment("web")["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]
            ["configMapRef"]["name"],
        "web-config"
    );

    run.run_stage(&commits, Delivery::Twice).await;
    assert_eq!(greeting("web-config").as_deref(), Some("hola"));
    run.run_all(&commits, Delivery::Twice).await;
    assert_status(&run, DeploymentStatus::Success);
    assert_eq!(
        kube.names("v1", "ConfigMap"),
        ["web-config"],
        "the canary's config is cleaned with it"
    );
    assert_eq!(kube.names("apps/v1", "Deployment"), ["web"]);
}

/// PipeCD's canary `patches`: the canary's copy of the ConfigMap gets the patched value and its
/// copy of the Deployment the patched image; the primary keeps Git's. Each step twice.
#[tokio::test]
async fn a_canarys_patches_change_its_copies_only() {
    let kube = Kube::new();
    let (a, with_config) = deployed_with_config(&kube).await;
    let stages = "      - name: K8S_CANARY_ROLLOUT\n        with:\n          patches:\n            - target: {kind: ConfigMap, name: web-config}\n              ops:\n                - op: yaml-replace\n                  path: $.data.greeting\n                  value: bonjour\n            - target: {kind: Deployment, name: web}\n              ops:\n                - {path: '$.spec.template.spec.containers[0].image', value: 'web:2-canary'}\n      - name: K8S_PRIMARY_ROLLOUT\n      - name: K8S_CANARY_CLEAN\n";
    let app = pipeline("    method: podselector\n", stages);
    let changed = with_config.replace("web:1", "web:2");
    let b = commit(
        'b',
        &app,
        &[("deployment.yaml", &changed), ("config.yaml", CONFIG)],
    );
    let commits = Commits {
        target: &b,
        running: Some(&a),
    };
    let mut run = Run::plan(kube.clone(), &b, Some(&a));
    run.run_stage(&commits, Delivery::Twice).await;
    let greeting = |name: &str| {
        kube.get("v1", "ConfigMap", name)
            .and_then(|c| c["data"]["greeting"].as_str().map(str::to_owned))
    };
    assert_eq!(greeting("web-config-canary").as_deref(), Some("bonjour"));
    assert_eq!(greeting("web-config").as_deref(), Some("hello"));
    let image = |name: &str| {
        kube.deployment(name)["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(image("web-canary"), "web:2-canary");
    assert_eq!(image("web"), "web:1");
    run.run_all(&commits, Delivery::Twice).await;
    assert_status(&run, DeploymentStatus::Success);
    assert_eq!(image("web"), "web:2", "the primary rolls out Git's image");
    assert_eq!(greeting("web-config").as_deref(), Some("hello"));
}

on_both!(
    a_failure_after_the_canary_rolls_back_to_the_running_commit_with_all_traffic_on_the_primary
);
async fn a_failure_after_the_canary_rolls_back_to_the_running_commit_with_all_traffic_on_the_primary(
    kube: Kube,
) {
    let a = deployed(&kube).await;

    // podselector: the Service selects the canary's pods, then the primary rollout fails (the
    // new commit changes the Deployment's selector, which the API server refuses: 422).
    let stages = "      - name: K8S_CANARY_ROLLOUT
        with:
          createService: true
      - name: K8S_TRAFFIC_ROUTING
        with:
          all: canary
      - name: K8S_PRIMARY_ROLLOUT
      - name: K8S_TRAFFIC_ROUTING
        with:
          all: primary
      - name: K8S_CANARY_CLEAN
";
    let app = pipeline("    method: podselector\n", stages);
    let changed = deployment("web:2", 2)
        .replace(
            "      app: web\n      pipecd.dev/variant: primary\n  template",
            "      app: web\n      tier: front\n      pipecd.dev/variant: primary\n  template",
        )
        .replace(
            "        app: web\n        pipecd.dev/variant: primary\n    spec",
            "        app: web\n        tier: front\n        pipecd.dev/variant: primary\n    spec",
        );
    assert!(changed.contains("tier: front"));
    let b = commit(
        'b',
        &app,
        &[("deployment.yaml", &changed), ("service.yaml", SERVICE)],
    );
    let commits = Commits {
        target: &b,
        running: Some(&a),
    };
    let mut run = Run::plan(kube.clone(), &b, Some(&a));

    run.run_stage(&commits, Delivery::Twice).await;
    assert_eq!(kube.names("apps/v1", "Deployment"), ["web", "web-canary"]);
    assert_eq!(kube.names("v1", "Service"), ["web", "web-canary"]);
    let canary_service = kube.get("v1", "Service", "web-canary").unwrap();
    assert_eq!(
        canary_service["spec"]["selector"]["pipecd.dev/variant"],
        "canary"
    );
    run.run_stage(&commits, Delivery::Twice).await;
    let service = kube.get("v1", "Service", "web").unwrap();
    assert_eq!(service["spec"]["selector"]["pipecd.dev/variant"], "canary");

    run.run_all(&commits, Delivery::Twice).await;
    assert_status(&run, DeploymentStatus::Failure);
    let primary = stage(&run, "K8S_PRIMARY_ROLLOUT");
    assert_eq!(primary.status, StageStatus::Failure);
    assert!(
        primary.status_reason.contains("field is immutable"),
        "{:?}",
        primary
    );
    let rollback = stage(&run, "K8S_ROLLBACK");
    assert_eq!(rollback.status, StageStatus::Success, "{:#?}", run.logs);
    assert_eq!(
        kube.names("apps/v1", "Deployment"),
        ["web"],
        "no canary left"
    );
    assert_eq!(kube.names("v1", "Service"), ["web"]);
    assert_eq!(kube.image("web"), "web:1");
    assert_eq!(
        kube.deployment("web")["metadata"]["annotations"]["pipecd.dev/commit-hash"],
        a.sha.as_str()
    );
    let service = kube.get("v1", "Service", "web").unwrap();
    assert_eq!(
        service["spec"]["selector"]["pipecd.dev/variant"], "primary",
        "all traffic on the primary"
    );
}

on_both!(a_field_another_manager_owns_fails_the_sync_by_name_and_a_change_by_hand_is_taken_back);
async fn a_field_another_manager_owns_fails_the_sync_by_name_and_a_change_by_hand_is_taken_back(
    kube: Kube,
) {
    let a = deployed(&kube).await;

    // By hand: `kubectl edit` sets another image. The next sync takes it back, and says so.
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:hand"}]}}}});
    kube.server
        .merge_patch_as("kubectl-edit", ("apps/v1", "Deployment", "web"), patch)
        .expect("patch");
    let b = web('b', QUICK_SYNC, "web:1", 2);
    let run = deploy(&kube, &b, Some(&a), Delivery::Once).await;
    assert_status(&run, DeploymentStatus::Success);
    assert_eq!(kube.image("web"), "web:1");
    assert!(
        run.stage_log("k8s-sync")
            .contains("Took back from a change by hand on Deployment/default/web"),
        "{}",
        run.stage_log("k8s-sync")
    );

    // A controller (an HPA) owns the replicas: a commit that sets them fails, naming the field
    // and the manager, and changes nothing.
    kube.server
        .merge_patch_as(
            "kube-controller-manager",
            ("apps/v1", "Deployment", "web"),
            json!({"spec": {"replicas": 5}}),
        )
        .expect("patch");
    let c = web('c', QUICK_SYNC, "web:2", 3);
    let run = deploy(&kube, &c, Some(&b), Delivery::Once).await;
    assert_eq!(run.deployment.status, DeploymentStatus::Failure);
    let reason = run.deployment.stages[0].status_reason.clone();
    assert!(
        reason.contains(".spec.replicas") && reason.contains("kube-controller-manager"),
        "{reason}"
    );
    assert_eq!(kube.deployment("web")["spec"]["replicas"], 5);
}

/// The field manager of [`APP`]'s objects.
fn own_manager() -> String {
    crate::field_manager(&crate::app_label(&AppId::parse(APP).expect("app id")))
}

/// Another app of the same repository, deploying to the same cluster.
const OTHER_APP: &str = "demo:shop/app.pipecd.yaml";

const SHARED_CONFIG: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: shared
data:
  owner: web
";

#[tokio::test]
async fn a_second_app_applying_the_first_apps_object_is_refused_naming_it_and_nothing_changes() {
    let kube = Kube::new();
    let a = commit('a', QUICK_SYNC, &[("config.yaml", SHARED_CONFIG)]);
    assert_status(
        &deploy(&kube, &a, None, Delivery::Once).await,
        DeploymentStatus::Success,
    );
    let before = kube.get("v1", "ConfigMap", "shared").expect("applied");

    // The other app's manifests hold a ConfigMap of the same name: with the same data too,
    // it is not the other app's to take.
    for data in ["shop", "web"] {
        let theirs = SHARED_CONFIG.replace("owner: web", &format!("owner: {data}"));
        let b = commit('b', QUICK_SYNC, &[("config.yaml", &theirs)]);
        let mut run = Run::plan(kube.clone(), &b, None);
        run.deployment.app = AppId::parse(OTHER_APP).expect("app id");
        run.run_all(
            &Commits {
                target: &b,
                running: None,
            },
            Delivery::Twice,
        )
        .await;
        assert_eq!(run.deployment.status, DeploymentStatus::Failure, "{data}");
        let reason = run.deployment.stages[0].status_reason.clone();
        assert!(
            reason.contains("apply ConfigMap/default/shared: the object belongs to another app, demo:app/app.pipecd.yaml"),
            "{data}: {reason}"
        );
        assert_eq!(
            kube.get("v1", "ConfigMap", "shared").as_ref(),
            Some(&before),
            "{data}: nothing changed"
        );
    }
}

#[tokio::test]
async fn objects_an_older_gannet_applied_under_one_manager_are_taken_over_by_their_app() {
    let kube = Kube::new();
    // What an older gannet left: the app's ConfigMap with gannet's labels, applied as `gannet`,
    // with a key Git has since dropped.
    let label = crate::app_label(&AppId::parse(APP).expect("app id"));
    kube.fake()
        .apply_as(
            crate::LEGACY_FIELD_MANAGER,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "web-config", "namespace": "default",
                    "labels": {"pipecd.dev/managed-by": "piped", "pipecd.dev/application": label},
                    "annotations": {"pipecd.dev/application": APP}},
                "data": {"greeting": "hi", "dropped": "yes"}}),
            false,
        )
        .expect("apply");
    let a = commit('a', QUICK_SYNC, &[("config.yaml", CONFIG)]);
    let run = deploy(&kube, &a, None, Delivery::Twice).await;
    assert_status(&run, DeploymentStatus::Success);
    let live = kube.get("v1", "ConfigMap", "web-config").expect("config");
    assert_eq!(live["data"], json!({"greeting": "hello"}), "{live}");
    let managers: Vec<&str> = live["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert_eq!(managers, [own_manager().as_str()], "{live}");
}

#[tokio::test]
async fn drift_names_the_object_and_field_and_ignores_other_managers_and_defaults_in_one_list_per_kind(
) {
    let kube = Kube::new();
    let app_yaml = format!("{QUICK_SYNC}  driftDetection:\n    ignoreFields:\n      - v1:Service:default:web#spec.ports\n");
    let a = commit(
        'a',
        &app_yaml,
        &[
            ("deployment.yaml", &deployment("web:1", 2)),
            ("service.yaml", SERVICE),
            ("config.yaml", CONFIG),
        ],
    );
    assert_eq!(
        deploy(&kube, &a, None, Delivery::Once)
            .await
            .deployment
            .status,
        DeploymentStatus::Success
    );
    let app_id = AppId::parse(APP).unwrap();
    let check = |c: &Commit| {
        let text = std::fs::read_to_string(c.app_dir().join("app.pipecd.yaml")).unwrap();
        parse_app_config("app/app.pipecd.yaml", &text).unwrap()
    };
    let config = check(&a);
    let dir = a.app_dir();
    kube.fake().clear_requests();
    let live = kube
        .plugin
        .live_state(live_context(&app_id, &config, &dir, &a.sha))
        .await
        .unwrap();
    let Live::Read(state) = live else {
        panic!("{live:?}")
    };
    assert!(state.drift.is_empty(), "{:?}", state.drift);
    assert_eq!(state.resources.len(), 3);
    // One list per kind: the app's three, and Secrets (listed for every app, to see one
    // that Git dropped).
    assert_eq!(
        kube.fake().requests().len(),
        4,
        "one list per kind: {:#?}",
        kube.fake().requests()
    );

    // An HPA's replicas are the HPA's; an image set by hand, a port changed by hand in an
    // ignored field, a ConfigMap deleted by hand are drift or not as they should be.
    kube.fake()
        .merge_patch_as(
            "kube-controller-manager",
            "apps/v1",
            "Deployment",
            Some("default"),
            "web",
            json!({"spec": {"replicas": 7}}),
        )
        .unwrap();
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:hand", "ports": [{"containerPort": 8080}]}]}}}});
    kube.fake()
        .merge_patch_as(
            "kubectl-edit",
            "apps/v1",
            "Deployment",
            Some("default"),
            "web",
            patch,
        )
        .unwrap();
    kube.fake()
        .merge_patch_as(
            "kubectl-edit",
            "v1",
            "Service",
            Some("default"),
            "web",
            json!({"spec": {"ports": [{"port": 81, "targetPort": 8080}]}}),
        )
        .unwrap();
    let live = kube
        .plugin
        .live_state(live_context(&app_id, &config, &dir, &a.sha))
        .await
        .unwrap();
    let drift = live.read().unwrap().drift;
    let fields: Vec<&str> = drift.iter().map(|d| d.field.as_str()).collect();
    assert_eq!(
        fields,
        ["Deployment/default/web: spec.template.spec.containers[name=web].image"],
        "{drift:?}"
    );
    assert_eq!(
        (drift[0].git.as_str(), drift[0].live.as_str()),
        ("\"web:1\"", "\"web:hand\"")
    );

    // Git drops the ConfigMap; a Deployment in Git is missing live.
    let b = web('b', &app_yaml, "web:1", 2);
    let (config, dir) = (check(&b), b.app_dir());
    kube.fake().merge_patch_as("kubectl-edit", "apps/v1", "Deployment", Some("default"), "web", json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web:1", "ports": [{"containerPort": 8080}]}]}}}})).unwrap();
    let live = kube
        .plugin
        .live_state(live_context(&app_id, &config, &dir, &b.sha))
        .await
        .unwrap();
    let drift = live.read().unwrap().drift;
    assert_eq!(drift.len(), 1, "{drift:?}");
    assert_eq!(drift[0].field, "ConfigMap/default/web-config");
    assert_eq!(drift[0].live, "applied by gannet, no longer in Git");
}

#[tokio::test]
async fn a_secrets_drift_names_the_field_and_never_shows_a_value() {
    let kube = Kube::new();
    let secret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  password: hunter2\n";
    let a = commit('a', QUICK_SYNC, &[("secret.yaml", secret)]);
    assert_eq!(
        deploy(&kube, &a, None, Delivery::Once)
            .await
            .deployment
            .status,
        DeploymentStatus::Success
    );
    let app_id = AppId::parse(APP).unwrap();
    let text = std::fs::read_to_string(a.app_dir().join("app.pipecd.yaml")).unwrap();
    let config = parse_app_config("app/app.pipecd.yaml", &text).unwrap();
    let dir = a.app_dir();
    let read = || {
        kube.plugin
            .live_state(live_context(&app_id, &config, &dir, &a.sha))
    };
    let drift = read().await.unwrap().read().unwrap().drift;
    assert!(
        drift.is_empty(),
        "stringData compares as the data it is stored as: {drift:?}"
    );

    kube.fake()
        .merge_patch_as(
            "kubectl-edit",
            "v1",
            "Secret",
            Some("default"),
            "creds",
            json!({"data": {"password": "b3RoZXI="}}),
        )
        .unwrap();
    let drift = read().await.unwrap().read().unwrap().drift;
    assert_eq!(drift.len(), 1, "{drift:?}");
    assert_eq!(drift[0].field, "Secret/default/creds: data.password");
    let shown = format!("{drift:?}");
    for value in ["hunter2", "aHVudGVyMg==", "b3RoZXI=", "other"] {
        assert!(!shown.contains(value), "a secret's value is shown: {shown}");
    }
}

/// One step of a K8S_SYNC at `c`, straight through the plugin.
async fn sync_step(kube: &Kube, c: &Commit) -> Result<gannet_sdk::plugin::StepOutcome, StepError> {
    let run = Run::plan(kube.clone(), c, None);
    run.try_step(0, &c.app_dir()).await
}

#[tokio::test]
async fn throttling_is_retried_after_the_time_the_api_server_asks_for() {
    let kube = Kube::new();
    kube.fake().inject(Fault {
        method: Some("PATCH".into()),
        path_contains: "/deployments/".into(),
        status: 429,
        retry_after_secs: Some(3),
        times: 1,
    });
    let a = commit(
        'a',
        QUICK_SYNC,
        &[("deployment.yaml", &deployment("web:1", 1))],
    );
    match sync_step(&kube, &a).await {
        Err(StepError::Transient { retry_after, .. }) => {
            assert_eq!(retry_after, Some(GoDuration::from_secs(3)))
        }
        other => panic!("{other:?}"),
    }
    // The retry applies.
    assert!(sync_step(&kube, &a).await.is_ok());
    assert!(kube.get("apps/v1", "Deployment", "web").is_some());
}

#[tokio::test]
async fn a_namespace_that_does_not_exist_fails_clearly_unless_auto_created() {
    let kube = Kube::new();
    let app = format!("{QUICK_SYNC}  input:\n    namespace: shop\n");
    let a = commit('a', &app, &[("deployment.yaml", &deployment("web:1", 1))]);
    let e = sync_step(&kube, &a).await.unwrap_err();
    assert!(
        e.reason().contains("namespaces \"shop\" not found"),
        "{}",
        e.reason()
    );

    let app = format!("{QUICK_SYNC}  input:\n    namespace: shop\n    autoCreateNamespace: true\n");
    let a = commit('a', &app, &[("deployment.yaml", &deployment("web:1", 1))]);
    let run = deploy(&kube, &a, None, Delivery::Twice).await;
    assert_status(&run, DeploymentStatus::Success);
    assert!(kube
        .fake()
        .get("apps/v1", "Deployment", Some("shop"), "web")
        .is_some());
    assert!(kube.fake().get("v1", "Namespace", None, "shop").is_some());
}

#[test]
fn a_stage_row_shows_its_replicas_or_its_traffic_split() {
    use gannet_sdk::plugin::{Plugin, Presenter};
    let summary = |name: &str, with: Value| {
        let mut stage = Stage::test("s", name);
        stage.with = KubernetesPlugin::default()
            .validate_stage(name, &with)
            .expect("valid with");
        KubernetesPlugin::default().summary(&stage)
    };
    assert_eq!(
        summary("K8S_CANARY_ROLLOUT", json!({"replicas": "20%"})),
        "20% of replicas"
    );
    assert_eq!(
        summary("K8S_BASELINE_ROLLOUT", json!({"replicas": 2})),
        "2 replicas"
    );
    assert_eq!(
        summary("K8S_TRAFFIC_ROUTING", json!({"primary": 80, "canary": 20})),
        "primary 80% / canary 20%"
    );
    assert_eq!(
        summary("K8S_TRAFFIC_ROUTING", json!({"all": "canary"})),
        "canary 100%"
    );
    assert_eq!(summary("K8S_SYNC", Value::Null), "");
}
