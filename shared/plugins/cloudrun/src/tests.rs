//! The plugin against the fake Cloud Run Admin API v2 (`gannet-cloudrun-fake`: a FAKE, on
//! loopback, replaying the shapes of the real API's responses; Google's API cannot run here).
//! The plugin reaches it through the same client, the same token flows and the same endpoint
//! override production uses, so the HTTP layer is real. Deployments run through the core's
//! planner and state machine one step at a time (`gannet_sdk::test_run`), most with every step
//! delivered twice; the fake's service and traffic are checked after each stage.

use std::sync::Arc;

use aws_credential_types::provider::SharedCredentialsProvider;
use gannet_cloudrun_fake::{FakeRun, Fault, Method, TokenKind};
use gannet_config::parse_app_config;
use gannet_domain::deployment::{DeploymentStatus, Stage, StageStatus};
use gannet_domain::{AppId, GoDuration};
use gannet_sdk::plugin::{Faces, Live, LiveStates, StepError, StepOutcome};
use gannet_sdk::test_run::{live_context, Commit, Commits, Delivery, Platform, Run, APP};
use serde_json::{json, Value};

use crate::{CloudRunPlugin, DeployTarget, WorkloadIdentity, LABEL_COMMIT, LABEL_MANAGED_BY};

/// The fake, and the plugin reaching it with a service account key file.
#[derive(Clone)]
struct Cloud {
    fake: FakeRun,
    plugin: Arc<CloudRunPlugin>,
    _dir: Arc<tempfile::TempDir>,
}

impl Cloud {
    fn new() -> Self {
        Self::with_target(FakeRun::start(), |_| {})
    }

    /// The plugin with a target on `fake` that `edit` changes (credentials, ...).
    fn with_target(fake: FakeRun, edit: impl FnOnce(&mut DeployTarget)) -> Self {
        fake.hold_operations(true);
        let dir = tempfile::tempdir().expect("temp dir");
        let key = dir.path().join("key.json");
        std::fs::write(&key, fake.service_account_key()).expect("write the key file");
        let mut target = DeployTarget::new("gcp", "gannet-test", "us-central1");
        target.credentials_file = key.to_string_lossy().into_owned();
        target.api_endpoint = fake.url();
        edit(&mut target);
        Self {
            fake,
            plugin: Arc::new(CloudRunPlugin::new(vec![target])),
            _dir: Arc::new(dir),
        }
    }

    fn service(&self) -> Value {
        self.fake.service("web").expect("the service exists")
    }

    fn traffic(&self) -> Vec<(String, i32)> {
        let mut t = self.fake.traffic("web");
        t.sort();
        t
    }

    fn writes(&self) -> usize {
        self.fake
            .requests()
            .iter()
            .filter(|r| r.method == "PATCH" || r.method == "POST")
            .filter(|r| r.path.starts_with("/v2/"))
            .count()
    }
}

impl Platform for Cloud {
    const KIND: &'static str = "CloudRunApp";
    /// What a repeated step must not change: what was written (generation, template, traffic
    /// asked for, labels) and the revisions that exist. Reconciliation moves on its own.
    type State = Value;

    fn plugins(this: &Arc<Self>) -> Vec<Faces> {
        vec![Faces::platform(this.plugin.clone())]
    }

    async fn state(&self, _: &gannet_domain::deployment::Deployment) -> Value {
        let Some(s) = self.fake.service("web") else {
            return Value::Null;
        };
        let revisions: Vec<Value> = self
            .fake
            .revisions("web")
            .iter()
            .map(|r| r["name"].clone())
            .collect();
        json!([
            s["generation"],
            s["labels"],
            s["template"],
            s["traffic"],
            revisions
        ])
    }

    /// Operations move on between steps only (never between a step and its repeat), as time
    /// passing would: a stage's first step sees its operation running, a later one sees it
    /// done.
    async fn after_step(&self) {
        self.fake.advance();
    }
}

const QUICK_SYNC: &str = "apiVersion: pipecd.dev/v1beta1
kind: CloudRunApp
spec:
  name: web
";

fn canary(stages: &str) -> String {
    format!("{QUICK_SYNC}  pipeline:\n    stages:\n{stages}")
}

/// A service manifest as PipeCD's examples write it.
fn service(image: &str) -> String {
    format!(
        "apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: web
spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/maxScale: '2'
    spec:
      containerConcurrency: 80
      containers:
      - args:
        - server
        image: {image}
        env:
        - name: MODE
          value: prod
        ports:
        - containerPort: 9085
        resources:
          limits:
            cpu: 1000m
            memory: 128Mi
"
    )
}

fn commit(digit: char, app: &str, image: &str) -> Commit {
    Commit::with_files(digit, app, &[("service.yaml", service(image).as_bytes())])
}

fn revision(digit: char, tag: &str) -> String {
    format!("web-{tag}-{}", digit.to_string().repeat(7))
}

/// v1 deployed by a quick sync (commit `a`), and commit `b` deploying v2 by a CLOUDRUN_PROMOTE
/// to each of `percents` in turn.
async fn v1_then_promotes(cloud: &Cloud, percents: &[u8]) -> (Commit, Commit) {
    let a = commit('a', QUICK_SYNC, "gcr.io/demo/web:v1");
    deploy(cloud, &a, None).await;
    let stages: String = percents
        .iter()
        .map(|p| format!("      - name: CLOUDRUN_PROMOTE\n        with:\n          percent: {p}\n"))
        .collect();
    (a, commit('b', &canary(&stages), "gcr.io/demo/web:v2"))
}

async fn deploy(cloud: &Cloud, target: &Commit, running: Option<&Commit>) -> Run<Cloud> {
    let mut run = Run::plan(cloud.clone(), target, running);
    run.run_all(&Commits { target, running }, Delivery::Twice)
        .await;
    run
}

fn stage<'r>(run: &'r Run<Cloud>, name: &str) -> &'r Stage {
    run.deployment
        .stages
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no stage {name}"))
}

fn assert_status(run: &Run<Cloud>, status: DeploymentStatus) {
    assert_eq!(run.deployment.status, status, "{:#?}", run.logs);
}

#[tokio::test]
async fn quick_sync_creates_then_updates_the_service_each_step_delivered_twice() {
    let cloud = Cloud::new();
    let a = commit('a', QUICK_SYNC, "gcr.io/demo/web:v1.0");
    let run = deploy(&cloud, &a, None).await;
    assert_status(&run, DeploymentStatus::Success);
    assert_eq!(run.stage_names(), ["CLOUDRUN_SYNC", "CLOUDRUN_ROLLBACK"]);
    let s = cloud.service();
    assert_eq!(s["template"]["revision"], revision('a', "v10"));
    assert_eq!(s["labels"][LABEL_MANAGED_BY], "piped");
    assert_eq!(s["labels"][LABEL_COMMIT], a.sha.as_str());
    assert_eq!(
        s["template"]["labels"]["pipecd-dev-revision-name"],
        revision('a', "v10")
    );
    assert_eq!(s["template"]["scaling"]["maxInstanceCount"], 2);
    assert_eq!(cloud.traffic(), [(revision('a', "v10"), 100)]);
    assert_eq!(cloud.writes(), 1, "one create, whatever the repeats");

    let b = commit('b', QUICK_SYNC, "gcr.io/demo/web:v2.0");
    let run = deploy(&cloud, &b, Some(&a)).await;
    assert_status(&run, DeploymentStatus::Success);
    assert_eq!(cloud.traffic(), [(revision('b', "v20"), 100)]);
    assert_eq!(cloud.fake.revisions("web").len(), 2);
    assert_eq!(
        cloud.writes(),
        3,
        "the new revision (traffic pinned), then the traffic: one write each"
    );
    let log = run.stage_log("cloudrun-sync");
    assert!(log.contains("traffic stays: 100% web-v10-aaaaaaa"), "{log}");
    assert!(
        log.contains("Routing service web: 100% web-v20-bbbbbbb"),
        "{log}"
    );

    // The same commit again changes nothing.
    let run = deploy(&cloud, &b, Some(&b)).await;
    assert_status(&run, DeploymentStatus::Success);
    assert_eq!(cloud.writes(), 3, "a sync already in place writes nothing");
    assert_eq!(
        cloud.fake.token_requests(TokenKind::KeyFile),
        1,
        "one token for everything: {:?}",
        cloud.fake.requests().len()
    );
}

#[tokio::test]
async fn a_canary_promotes_step_by_step_and_the_traffic_is_checked_after_each_stage() {
    let cloud = Cloud::new();
    let (a, b) = v1_then_promotes(&cloud, &[10, 50, 100]).await;
    let commits = Commits {
        target: &b,
        running: Some(&a),
    };
    let mut run = Run::plan(cloud.clone(), &b, Some(&a));
    assert_eq!(
        run.stage_names(),
        [
            "CLOUDRUN_PROMOTE",
            "CLOUDRUN_PROMOTE",
            "CLOUDRUN_PROMOTE",
            "CLOUDRUN_ROLLBACK"
        ]
    );
    let (old, new) = (revision('a', "v1"), revision('b', "v2"));
    for want in [
        vec![(old.clone(), 90), (new.clone(), 10)],
        vec![(old.clone(), 50), (new.clone(), 50)],
        vec![(new.clone(), 100)],
    ] {
        run.run_stage(&commits, Delivery::Twice).await;
        assert_eq!(cloud.traffic(), want, "{:#?}", run.logs);
    }
    run.run_all(&commits, Delivery::Twice).await;
    assert_status(&run, DeploymentStatus::Success);
    assert_eq!(
        stage(&run, "CLOUDRUN_ROLLBACK").status,
        StageStatus::NotStartedYet
    );
}

#[tokio::test]
async fn a_failure_after_promote_rolls_back_all_traffic_to_the_running_revision_with_googles_message(
) {
    let cloud = Cloud::new();
    let (a, b) = v1_then_promotes(&cloud, &[10, 100]).await;
    let commits = Commits {
        target: &b,
        running: Some(&a),
    };
    let mut run = Run::plan(cloud.clone(), &b, Some(&a));
    run.run_stage(&commits, Delivery::Twice).await;
    assert_eq!(
        cloud.traffic(),
        [(revision('a', "v1"), 90), (revision('b', "v2"), 10)]
    );

    // The second PROMOTE is refused (its step and the step's repeat): the deployer lost its
    // permission for a moment.
    cloud.fake.inject(Fault {
        method: Some(Method::PATCH),
        path_contains: "/services/web".into(),
        status: 403,
        retry_after_secs: None,
        times: 2,
    });
    run.run_all(&commits, Delivery::Twice).await;
    assert_status(&run, DeploymentStatus::Failure);
    let promote = &run.deployment.stages[1];
    assert_eq!(promote.status, StageStatus::Failure);
    assert!(
        promote
            .status_reason
            .contains("403 PERMISSION_DENIED: Permission 'run.services.update' denied on resource"),
        "{}",
        promote.status_reason
    );
    assert_eq!(
        stage(&run, "CLOUDRUN_ROLLBACK").status,
        StageStatus::Success,
        "{:#?}",
        run.logs
    );
    assert_eq!(cloud.traffic(), [(revision('a', "v1"), 100)]);
    assert_eq!(cloud.service()["template"]["revision"], revision('a', "v1"));
    assert_eq!(
        cloud.fake.revisions("web").len(),
        2,
        "the running revision was reused"
    );
}

#[tokio::test]
async fn a_revision_that_never_gets_ready_fails_the_stage_with_cloud_runs_message_and_keeps_the_traffic(
) {
    let cloud = Cloud::new();
    let a = commit('a', QUICK_SYNC, "gcr.io/demo/web:v1");
    deploy(&cloud, &a, None).await;
    let b = commit('b', QUICK_SYNC, "gcr.io/demo/web:crash");
    let run = deploy(&cloud, &b, Some(&a)).await;
    assert_status(&run, DeploymentStatus::Failure);
    let sync = stage(&run, "CLOUDRUN_SYNC");
    assert!(
        sync.status_reason
            .contains("failed to start and listen on the port"),
        "{}",
        sync.status_reason
    );
    assert_eq!(
        cloud.traffic(),
        [(revision('a', "v1"), 100)],
        "traffic never moved"
    );
    assert_eq!(
        stage(&run, "CLOUDRUN_ROLLBACK").status,
        StageStatus::Success
    );
    assert_eq!(cloud.service()["template"]["revision"], revision('a', "v1"));
}

async fn sync_step(cloud: &Cloud, c: &Commit) -> Result<StepOutcome, StepError> {
    sync_step_in(cloud, c, c).await
}

/// A CLOUDRUN_SYNC step of a deployment planned from `planned` that finds `found` in its
/// checkout (a manifest the planner would refuse).
async fn sync_step_in(
    cloud: &Cloud,
    planned: &Commit,
    found: &Commit,
) -> Result<StepOutcome, StepError> {
    let run = Run::plan(cloud.clone(), planned, None);
    run.try_step(0, &found.app_dir()).await
}

#[tokio::test]
async fn throttling_is_retried_after_the_time_the_api_asks_for() {
    let cloud = Cloud::new();
    cloud.fake.inject(Fault {
        method: Some(Method::POST),
        path_contains: "/services".into(),
        status: 429,
        retry_after_secs: Some(7),
        times: 1,
    });
    let a = commit('a', QUICK_SYNC, "gcr.io/demo/web:v1");
    match sync_step(&cloud, &a).await {
        Err(StepError::Transient {
            retry_after,
            source,
            ..
        }) => {
            assert_eq!(retry_after, Some(GoDuration::from_secs(7)));
            assert!(
                source.to_string().contains("RESOURCE_EXHAUSTED"),
                "{source}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(cloud.fake.service("web").is_none());
    assert!(matches!(
        sync_step(&cloud, &a).await,
        Ok(StepOutcome::Continue { .. })
    ));
    assert!(cloud.fake.service("web").is_some(), "the retry creates it");
}

#[tokio::test]
async fn a_write_refused_for_a_concurrent_change_is_retried_and_one_refused_by_permission_fails() {
    let cloud = Cloud::new();
    let a = commit('a', QUICK_SYNC, "gcr.io/demo/web:v1");
    deploy(&cloud, &a, None).await;
    let b = commit('b', QUICK_SYNC, "gcr.io/demo/web:v2");
    // 409 ABORTED: the etag gannet sent is stale (someone wrote in between).
    cloud.fake.inject(Fault {
        method: Some(Method::PATCH),
        path_contains: "/services/web".into(),
        status: 409,
        retry_after_secs: None,
        times: 1,
    });
    match sync_step(&cloud, &b).await {
        Err(StepError::Transient { source, .. }) => {
            assert!(source.to_string().contains("409 ABORTED"), "{source}")
        }
        other => panic!("{other:?}"),
    }
    cloud.fake.inject(Fault {
        method: Some(Method::PATCH),
        path_contains: "/services/web".into(),
        status: 403,
        retry_after_secs: None,
        times: 1,
    });
    match sync_step(&cloud, &b).await {
        Err(e @ StepError::Permanent(_)) => assert!(
            e.reason().contains("update service web: 403 PERMISSION_DENIED: Permission 'run.services.update' denied"),
            "{}",
            e.reason()
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        cloud.traffic(),
        [(revision('a', "v1"), 100)],
        "nothing changed"
    );
}

async fn drift(cloud: &Cloud, head: &Commit) -> Vec<(String, String, String)> {
    let app_id = AppId::parse(APP).unwrap();
    let config = parse_app_config("app/app.pipecd.yaml", QUICK_SYNC).unwrap();
    let dir = head.app_dir();
    let live = cloud
        .plugin
        .live_state(live_context(&app_id, &config, &dir, &head.sha))
        .await
        .unwrap();
    let Live::Read(state) = live else {
        panic!("{live:?}")
    };
    state
        .drift
        .into_iter()
        .map(|f| (f.field, f.git, f.live))
        .collect()
}

#[tokio::test]
async fn drift_names_an_image_or_a_traffic_split_changed_by_hand_and_ignores_the_platforms_defaults(
) {
    let cloud = Cloud::new();
    let a = commit('a', QUICK_SYNC, "gcr.io/demo/web:v1");
    deploy(&cloud, &a, None).await;
    cloud.fake.clear_requests();
    assert_eq!(
        drift(&cloud, &a).await,
        [],
        "in sync: the platform's defaults are no drift"
    );
    assert_eq!(cloud.fake.requests().len(), 1, "one GET per app");

    // By hand: `gcloud run deploy --image ...:hotfix` (a new revision, not gannet's).
    let _ = cloud.fake.patch_by_hand("web", |s| {
        s["template"]["containers"][0]["image"] = json!("gcr.io/demo/web:hotfix");
        s["template"]["revision"] = Value::Null;
        s["template"]["labels"] = json!({});
        s["traffic"] = json!([{"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "percent": 100}]);
    });
    let fields = drift(&cloud, &a).await;
    assert_eq!(
        fields[0],
        (
            "template.containers[0].image".to_owned(),
            "\"gcr.io/demo/web:v1\"".to_owned(),
            "\"gcr.io/demo/web:hotfix\"".to_owned()
        ),
        "{fields:#?}"
    );
    assert!(
        fields
            .iter()
            .any(|f| f.0 == "template.revision" && f.2.contains("written by another client")),
        "{fields:#?}"
    );

    // A sync takes it back; then by hand: half the traffic to the hotfix revision.
    let b = commit('b', QUICK_SYNC, "gcr.io/demo/web:v1");
    deploy(&cloud, &b, Some(&a)).await;
    assert_eq!(drift(&cloud, &b).await, []);
    let hotfix = cloud
        .fake
        .revisions("web")
        .iter()
        .map(|r| {
            r["name"]
                .as_str()
                .unwrap()
                .rsplit('/')
                .next()
                .unwrap()
                .to_owned()
        })
        .find(|n| !n.contains("aaaaaaa") && !n.contains("bbbbbbb"))
        .unwrap();
    let _ = cloud.fake.patch_by_hand("web", |s| {
        s["traffic"] = json!([
            {"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION", "revision": revision('b', "v1"), "percent": 50},
            {"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION", "revision": hotfix, "percent": 50},
        ]);
    });
    let fields = drift(&cloud, &b).await;
    assert_eq!(fields.len(), 1, "{fields:#?}");
    assert_eq!(fields[0].0, "traffic");
    assert_eq!(fields[0].1, format!("100% {}", revision('b', "v1")));
    assert!(
        fields[0].2.contains("50% ") && fields[0].2.contains(&hotfix),
        "{fields:#?}"
    );

    // A sync takes it back; then by hand: a variable changed and one added, each named by its
    // name as on every platform.
    let c = commit('c', QUICK_SYNC, "gcr.io/demo/web:v1");
    deploy(&cloud, &c, Some(&b)).await;
    assert_eq!(drift(&cloud, &c).await, []);
    let _ = cloud.fake.patch_by_hand("web", |s| {
        s["template"]["containers"][0]["env"] = json!([
            {"name": "DEBUG", "value": "1"},
            {"name": "MODE", "value": "debug"},
        ]);
    });
    let fields = drift(&cloud, &c).await;
    // The console makes a new revision for the change, so the traffic moved off gannet's too.
    let named: Vec<&str> = fields.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(
        named,
        [
            "template.containers[0].env[name=MODE].value",
            "template.containers[0].env[name=DEBUG]",
            "traffic",
        ],
        "{fields:#?}"
    );
}

#[tokio::test]
async fn an_enum_another_client_wrote_as_a_number_is_read_by_name_and_is_no_drift() {
    // Google's client libraries send enums as numbers; Cloud Run stores and answers them by
    // name (the fake does too, tests/google_client.rs holds it to Google's client), so an
    // ingress another client wrote is compared by its name with Git's.
    let cloud = Cloud::new();
    let internal = service("gcr.io/demo/web:v1").replacen(
        "  name: web\n",
        "  name: web\n  annotations:\n    run.googleapis.com/ingress: internal\n",
        1,
    );
    let a = Commit::with_files('a', QUICK_SYNC, &[("service.yaml", internal.as_bytes())]);
    deploy(&cloud, &a, None).await;
    assert_eq!(drift(&cloud, &a).await, []);

    // INGRESS_TRAFFIC_INTERNAL_ONLY is 2: the same value, as Google's Python client sends it.
    let same = cloud.fake.patch_by_hand("web", |s| s["ingress"] = json!(2));
    assert!(same.is_ok(), "{same:?}");
    assert_eq!(cloud.service()["ingress"], "INGRESS_TRAFFIC_INTERNAL_ONLY");
    assert_eq!(drift(&cloud, &a).await, [], "the same ingress is no drift");

    let all = cloud.fake.patch_by_hand("web", |s| s["ingress"] = json!(1));
    assert!(all.is_ok(), "{all:?}");
    assert_eq!(
        drift(&cloud, &a).await,
        [(
            "ingress".to_owned(),
            "\"INGRESS_TRAFFIC_INTERNAL_ONLY\"".to_owned(),
            "\"INGRESS_TRAFFIC_ALL\"".to_owned()
        )]
    );
}

#[tokio::test]
async fn cpu_is_throttled_unless_the_manifest_says_not_and_either_way_is_in_sync() {
    // Knative's default, which PipeCD's manifests (and `gcloud run services replace`) rely
    // on, is CPU only during requests. In the v2 API a container that sets its resources has
    // that only with `cpuIdle: true`, and Google's JSON leaves out a `false`.
    let cloud = Cloud::new();
    let a = commit('a', QUICK_SYNC, "gcr.io/demo/web:v1");
    deploy(&cloud, &a, None).await;
    let resources = &cloud.service()["template"]["containers"][0]["resources"];
    assert_eq!(resources["cpuIdle"], true, "{resources}");
    assert_eq!(drift(&cloud, &a).await, []);

    let always = service("gcr.io/demo/web:v1").replacen(
        "autoscaling.knative.dev/maxScale: '2'\n",
        "autoscaling.knative.dev/maxScale: '2'\n        run.googleapis.com/cpu-throttling: 'false'\n        autoscaling.knative.dev/minScale: '0'\n",
        1,
    );
    let b = Commit::with_files('b', QUICK_SYNC, &[("service.yaml", always.as_bytes())]);
    let run = deploy(&cloud, &b, Some(&a)).await;
    assert_status(&run, DeploymentStatus::Success);
    let resources = &cloud.service()["template"]["containers"][0]["resources"];
    assert_eq!(
        resources.get("cpuIdle"),
        None,
        "CPU always allocated: {resources}"
    );
    assert_eq!(
        drift(&cloud, &b).await,
        [],
        "a false or a 0 Google leaves out"
    );
}

#[tokio::test]
async fn workload_identity_federation_from_aws_deploys_as_the_impersonated_service_account() {
    let fake = FakeRun::start();
    fake.hold_operations(true);
    let mut target = DeployTarget::new("gcp", "gannet-test", "us-central1");
    target.api_endpoint = fake.url();
    target.workload_identity = Some(WorkloadIdentity {
        audience: fake.wif_audience(),
        service_account: fake.impersonated_email(),
        aws_region: "eu-west-1".into(),
        token_url: format!("{}/v1/token", fake.url()),
        iam_credentials_endpoint: fake.url(),
    });
    let aws = SharedCredentialsProvider::new(aws_credential_types::Credentials::new(
        "AKIDGANNETSTAGE",
        "not-a-real-secret",
        Some("session-token".into()),
        None,
        "test",
    ));
    let cloud = Cloud {
        fake: fake.clone(),
        plugin: Arc::new(CloudRunPlugin::with_aws_credentials(
            vec![target],
            Some(aws),
        )),
        _dir: Arc::new(tempfile::tempdir().unwrap()),
    };
    let a = commit('a', QUICK_SYNC, "gcr.io/demo/web:v1");
    let run = deploy(&cloud, &a, None).await;
    assert_status(&run, DeploymentStatus::Success);
    assert_eq!(fake.aws_access_key_ids(), ["AKIDGANNETSTAGE"]);
    assert_eq!(cloud.service()["creator"], fake.impersonated_email());
    let log = run.stage_log("cloudrun-sync");
    let secrets = [
        "session-token".to_owned(),
        "not-a-real-secret".to_owned(),
        fake.token(TokenKind::Federated),
        fake.token(TokenKind::Impersonated),
    ];
    for secret in secrets {
        assert!(!log.contains(&secret), "a secret in the stage log: {log}");
    }
}

#[tokio::test]
async fn a_deploy_target_without_credentials_uses_the_metadata_server() {
    let fake = FakeRun::start();
    let host = fake.url().trim_start_matches("http://").to_owned();
    // The only test that reads GCE_METADATA_HOST.
    std::env::set_var("GCE_METADATA_HOST", host);
    let cloud = Cloud::with_target(fake.clone(), |t| t.credentials_file.clear());
    let a = commit('a', QUICK_SYNC, "gcr.io/demo/web:v1");
    let run = deploy(&cloud, &a, None).await;
    assert_status(&run, DeploymentStatus::Success);
    assert_eq!(
        fake.token_requests(TokenKind::Metadata),
        1,
        "the metadata server's token"
    );
    assert_eq!(fake.token_requests(TokenKind::KeyFile), 0);
}

#[tokio::test]
async fn a_hostile_or_broken_service_manifest_fails_the_step_naming_it_and_changes_nothing() {
    let cloud = Cloud::new();
    let good = commit('a', QUICK_SYNC, "gcr.io/demo/web:v1");
    let linked = Commit::with_files('a', QUICK_SYNC, &[]);
    std::os::unix::fs::symlink("/etc/passwd", linked.app_dir().join("service.yaml")).unwrap();
    let huge = format!(
        "{}# {}\n",
        service("gcr.io/demo/web:v1"),
        "x".repeat(20 * 1024 * 1024)
    );
    let unknown = service("gcr.io/demo/web:v1").replace(
        "      containerConcurrency: 80\n",
        "      containerConcurrency: 80\n      runtimeClassName: gvisor\n",
    );
    for (commit, want) in [
        (linked, "service.yaml: goes through the symbolic link service.yaml, which leads outside the repository"),
        (Commit::with_files('b', QUICK_SYNC, &[("service.yaml", huge.as_bytes())]), "service.yaml: is 20972002 bytes, larger than the 1048576 bytes gannet reads"),
        (Commit::with_files('c', QUICK_SYNC, &[("service.yaml", unknown.as_bytes())]), "service.yaml:12: spec.template.spec.runtimeClassName: unknown field `runtimeClassName`"),
    ] {
        match sync_step_in(&cloud, &good, &commit).await {
            Err(StepError::Permanent(e)) => assert!(e.to_string().starts_with(want), "{e}"),
            other => panic!("{want}: {other:?}"),
        }
    }
    assert!(
        cloud.fake.requests().is_empty(),
        "nothing reached the API: {:?}",
        cloud.fake.requests()
    );
}

#[tokio::test]
async fn a_rollback_makes_the_running_revision_again_when_it_was_deleted() {
    let cloud = Cloud::new();
    let (a, b) = v1_then_promotes(&cloud, &[100, 50]).await;
    let commits = Commits {
        target: &b,
        running: Some(&a),
    };
    let mut run = Run::plan(cloud.clone(), &b, Some(&a));
    run.run_stage(&commits, Delivery::Twice).await;
    assert_eq!(cloud.traffic(), [(revision('b', "v2"), 100)]);
    // Someone tidies up the revision that no longer serves; the next split needs it, and
    // Cloud Run refuses a split onto a revision that does not exist.
    cloud
        .fake
        .delete_revision("web", &revision('a', "v1"))
        .expect("a revision serving nothing can be deleted");
    run.run_all(&commits, Delivery::Twice).await;
    assert_status(&run, DeploymentStatus::Failure);
    assert_eq!(
        stage(&run, "CLOUDRUN_ROLLBACK").status,
        StageStatus::Success,
        "{:#?}",
        run.logs
    );
    assert_eq!(cloud.traffic(), [(revision('a', "v1"), 100)]);
    let names: Vec<String> = cloud
        .fake
        .revisions("web")
        .iter()
        .map(|r| {
            r["name"]
                .as_str()
                .unwrap_or_default()
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        names,
        [revision('a', "v1"), revision('b', "v2")],
        "made again, newest first"
    );
}
