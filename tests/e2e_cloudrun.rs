//! End to end on Cloud Run: a real `gannet up` deploys `CloudRunApp`s to the fake Cloud Run
//! Admin API v2 (`gannet-cloudrun-fake`, a FAKE on loopback replaying the real API's shapes:
//! Google's API cannot run here), with a service account key file whose token URL is the
//! fake's, through the same client and endpoint override production uses.
//!
//! Shown here: a quick sync, then a canary (PROMOTE 10 → WAIT → PROMOTE 100) with the fake's
//! traffic checked after each stage; a SIGKILL of gannet mid-PROMOTE resumes without writing
//! again; a stage failing after PROMOTE 10 rolls all traffic back to the running revision; an
//! image and a traffic split changed by hand are drift naming the field; a write by Google's own
//! client (google-cloud-run, which sends enums as numbers) is no drift; PipeCD's Cloud Run
//! examples pass `config check` or name what is not supported.

mod support;

use std::time::Duration;

use gannet_cloudrun_fake::{run_google_client, FakeRun};
use serde_json::{json, Value};
use support::{stage_named, Gannet, Repo, UpOptions};

const LIMIT: Duration = Duration::from_secs(60);
const APP: &str = "apps/web";

/// The fake Cloud Run, an app repository and gannet's state.
struct Lab {
    fake: FakeRun,
    repo: Repo,
    state: tempfile::TempDir,
}

impl Lab {
    /// Each rollout takes `rollout` (gannet polls every 2 s), however often it is polled.
    fn new(rollout: Duration) -> Self {
        let fake = FakeRun::start();
        fake.set_polls_until_done(u32::MAX);
        fake.set_rollout_time(rollout);
        Self {
            fake,
            repo: Repo::new(),
            state: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn start(&self, intervals: &str) -> Gannet {
        let key = self.state.path().join("gcp-key.json");
        std::fs::write(&key, self.fake.service_account_key()).expect("key file");
        let opts = UpOptions {
            extra_config: format!(
                "intervals: {intervals}\nqueue: {{visibility: 3s}}\nplugins:\n  cloudrun:\n    deployTargets:\n      - name: gcp\n        project: gannet-test\n        region: us-central1\n        credentialsFile: {}\n        apiEndpoint: {}\n",
                key.display(),
                self.fake.url()
            ),
            ..UpOptions::default()
        };
        Gannet::start(&self.repo, self.state.path(), &opts)
    }

    /// Commits the app: its config (lines under `spec:`) and its service manifest.
    fn commit(&self, spec: &str, image: &str, message: &str) -> String {
        self.commit_with(spec, "", image, message)
    }

    /// Commits the app, with `annotations` (lines) on its service.
    fn commit_with(&self, spec: &str, annotations: &str, image: &str, message: &str) -> String {
        let config = format!(
            "apiVersion: pipecd.dev/v1beta1\nkind: CloudRunApp\nspec:\n  name: web\n{spec}"
        );
        let annotations = match annotations {
            "" => String::new(),
            lines => format!("  annotations:\n{lines}"),
        };
        let service = format!(
            "apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: web
{annotations}spec:
  template:
    metadata:
      annotations:
        autoscaling.knative.dev/maxScale: '2'
    spec:
      containerConcurrency: 80
      containers:
      - image: {image}
        ports:
        - containerPort: 9085
        resources:
          limits:
            cpu: 1000m
            memory: 128Mi
"
        );
        self.repo.commit(
            &[
                (&format!("{APP}/app.pipecd.yaml"), &config),
                (&format!("{APP}/service.yaml"), &service),
            ],
            message,
        )
    }

    fn traffic(&self) -> Vec<(String, i32)> {
        let mut t = self.fake.traffic("web");
        t.sort();
        t
    }

    /// Writes (creates and updates) of the service so far.
    fn writes(&self) -> usize {
        self.fake
            .requests()
            .iter()
            .filter(|r| r.path.starts_with("/v2/") && (r.method == "PATCH" || r.method == "POST"))
            .filter(|r| r.status < 300)
            .count()
    }
}

/// `web-<tag>-<commit7>`.
fn revision(tag: &str, commit: &str) -> String {
    format!("web-{tag}-{}", &commit[..7])
}

fn deploy(g: &Gannet, commit: &str, delivery: &str) -> (String, Value) {
    let (status, body) = g.push(commit, delivery);
    assert_eq!(status, 202, "{body}");
    let id = g.deployment_of(commit, LIMIT);
    (id.clone(), g.wait_terminal(&id, LIMIT))
}

const CANARY: &str = "  pipeline:
    stages:
      - name: CLOUDRUN_PROMOTE
        with:
          percent: 10
      - name: WAIT
        with:
          duration: 5s
      - name: CLOUDRUN_PROMOTE
        with:
          percent: 100
";

#[test]
fn a_canary_promotes_10_then_100_and_a_sigkill_mid_promote_resumes_without_writing_again() {
    // Long enough for gannet to be killed while the last PROMOTE's rollout runs.
    let lab = Lab::new(Duration::from_secs(6));
    let first = lab.commit("", "gcr.io/demo/web:v1", "add web");
    let mut g = lab.start("{poll: 1m, resume: 1s}");
    let (_, d) = deploy(&g, &first, "run-1");
    assert_eq!(d["status"], "SUCCESS", "{d}");
    let v1 = revision("v1", &first);
    assert_eq!(lab.traffic(), [(v1.clone(), 100)]);

    let second = lab.commit(CANARY, "gcr.io/demo/web:v2", "web 2 by canary");
    let v2 = revision("v2", &second);
    let (status, body) = g.push(&second, "run-2");
    assert_eq!(status, 202, "{body}");
    let id = g.deployment_of(&second, LIMIT);
    // PROMOTE 10: the traffic is on 90/10 once the stage succeeds, while WAIT runs.
    g.wait_stage(&id, "WAIT", "RUNNING", LIMIT);
    assert_eq!(lab.traffic(), [(v1.clone(), 90), (v2.clone(), 10)]);
    let writes = lab.writes();

    // The last PROMOTE writes its split, and gannet is killed while the operation runs.
    g.wait_until(LIMIT, "the last PROMOTE has written the split", || {
        let log = g.stage_log(&id, "stage-2");
        log.iter()
            .any(|l| l.starts_with("Routing service web"))
            .then_some(())
    });
    g.kill();
    let g = g.restart();
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    assert_eq!(lab.traffic(), [(v2.clone(), 100)]);
    assert_eq!(
        lab.writes(),
        writes + 1,
        "one write for the last PROMOTE, through the kill"
    );
    let log = g.stage_log(&id, "stage-2");
    assert!(
        log.iter()
            .any(|l| l.starts_with(&format!("Service web serves 100% {v2}"))),
        "{log:#?}"
    );
}

#[test]
fn a_stage_failing_after_promote_10_rolls_all_traffic_back_to_the_running_revision() {
    let lab = Lab::new(Duration::from_secs(1));
    let first = lab.commit("", "gcr.io/demo/web:v1", "add web");
    let g = lab.start("{poll: 1m, resume: 1s}");
    assert_eq!(deploy(&g, &first, "run-1").1["status"], "SUCCESS");

    // The script after PROMOTE 10 fails (a smoke test of the canary, say).
    let spec = "  pipeline:
    stages:
      - name: CLOUDRUN_PROMOTE
        with:
          percent: 10
      - name: SCRIPT_RUN
        with:
          run: exit 3
      - name: CLOUDRUN_PROMOTE
        with:
          percent: 100
";
    let second = lab.commit(spec, "gcr.io/demo/web:v2", "web 2");
    let (_, d) = deploy(&g, &second, "run-2");
    assert_eq!(d["status"], "FAILURE", "{d}");
    assert_eq!(stage_named(&d, "SCRIPT_RUN")["status"], "FAILURE");
    assert_eq!(
        stage_named(&d, "CLOUDRUN_ROLLBACK")["status"],
        "SUCCESS",
        "{d}"
    );
    let v1 = revision("v1", &first);
    assert_eq!(lab.traffic(), [(v1.clone(), 100)]);
    let service = lab.fake.service("web").expect("service");
    assert_eq!(service["template"]["revision"], v1.as_str());
    assert_eq!(service["labels"]["pipecd-dev-commit-hash"], first.as_str());
}

#[test]
fn an_image_or_a_traffic_split_changed_by_hand_is_out_of_sync_naming_the_field() {
    let lab = Lab::new(Duration::from_secs(1));
    let first = lab.commit("", "gcr.io/demo/web:v1", "add web");
    let g = lab.start("{poll: 1m, resume: 1s, drift: 1s}");
    assert_eq!(deploy(&g, &first, "run-1").1["status"], "SUCCESS");
    g.wait_until(LIMIT, "a drift check finds the app in sync", || {
        let app = g.app_view("web");
        (app["sync_status"] == "SYNCED" && app["live"].as_array().is_some_and(|l| l.len() == 1))
            .then_some(())
    });

    // By hand: `gcloud run services update-traffic` sends half to a revision made by hand.
    lab.fake
        .patch_by_hand("web", |s| {
            s["template"]["containers"][0]["image"] = json!("gcr.io/demo/web:hotfix");
            s["template"]["revision"] = json!("web-hotfix");
            s["traffic"] = json!([
                {"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION", "revision": revision("v1", &first), "percent": 50},
                {"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION", "revision": "web-hotfix", "percent": 50},
            ]);
        })
        .expect("an edit by hand");
    let app = g.wait_until(LIMIT, "a drift check finds the change", || {
        let app = g.app_view("web");
        (app["sync_status"] == "OUT_OF_SYNC").then_some(app)
    });
    let drift = app["drift"].as_array().expect("drift");
    let field = |name: &str| drift.iter().find(|f| f["field"] == name).cloned();
    let image = field("template.containers[0].image").unwrap_or_else(|| panic!("{app}"));
    // Values are JSON values; a description for a person is text, and says so.
    assert_eq!(image["git"], "gcr.io/demo/web:v1");
    assert_eq!(image["live"], "gcr.io/demo/web:hotfix");
    assert_eq!(image.get("text"), None, "{image}");
    let traffic = field("traffic").unwrap_or_else(|| panic!("{app}"));
    assert_eq!(traffic["git"], "100% web-hotfix");
    assert_eq!(traffic["text"], json!(["git", "live"]), "{traffic}");
    assert!(
        traffic["live"]
            .as_str()
            .unwrap_or_default()
            .contains("50% web-hotfix"),
        "{app}"
    );

    // A sync (`gannet sync web`) puts Git's revision back with all the traffic.
    let (status, body) = g.post("/apps/web/sync", json!({}));
    assert_eq!(status, 200, "{body}");
    let d = g.wait_terminal(body["deployment"]["id"].as_str().expect("id"), LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    g.wait_until(LIMIT, "a drift check agrees", || {
        let app = g.app_view("web");
        (app["sync_status"] == "SYNCED").then_some(())
    });
    assert_eq!(lab.traffic(), [(revision("v1", &first), 100)]);
}

#[test]
fn a_write_by_googles_own_client_with_enums_as_numbers_is_no_drift() {
    let lab = Lab::new(Duration::from_secs(1));
    let ingress = "    run.googleapis.com/ingress: internal\n";
    let first = lab.commit_with("", ingress, "gcr.io/demo/web:v1", "add web");
    let g = lab.start("{poll: 1m, resume: 1s, drift: 1s}");
    assert_eq!(deploy(&g, &first, "run-1").1["status"], "SUCCESS");
    g.wait_until(LIMIT, "a drift check finds the app in sync", || {
        let app = g.app_view("web");
        (app["sync_status"] == "SYNCED").then_some(())
    });

    // Another team's tool writes the service back with Google's Python client, recording
    // itself in `client`: every enum goes as a number (`"ingress": 2`).
    let key = lab.state.path().join("gcp-key.json");
    let name = "projects/gannet-test/locations/us-central1/services/web";
    let touched = run_google_client(
        &["touch", &lab.fake.url(), name],
        &[("KEY_FILE", key.to_string_lossy().into_owned())],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(touched["client"], "google-cloud-run-python");
    let requests = lab.fake.requests();
    let written = requests
        .iter()
        .rposition(|r| r.method == "PATCH")
        .expect("the client's write");
    assert_eq!(
        requests[written]
            .body
            .as_ref()
            .map(|b| b["ingress"].clone()),
        Some(json!(2)),
        "Google's client sends the enum as a number"
    );
    assert_eq!(
        lab.fake.service("web").expect("web")["ingress"],
        "INGRESS_TRAFFIC_INTERNAL_ONLY"
    );

    // Two drift checks later (one GET of the service each), the app is still in sync.
    g.wait_until(LIMIT, "two drift checks after the write", || {
        let requests = lab.fake.requests();
        let reads = requests[written + 1..]
            .iter()
            .filter(|r| r.method == "GET" && r.path.ends_with("/services/web"))
            .count();
        (reads >= 2).then_some(())
    });
    let app = g.app_view("web");
    assert_eq!(app["sync_status"], "SYNCED", "{app}");
    let drift = app["drift"].as_array().cloned().unwrap_or_default();
    assert!(drift.is_empty(), "{app}");
}

#[test]
fn pipecds_cloud_run_examples_pass_config_check_or_name_what_is_unsupported() {
    let Some(dir) = gannet_config::fixture::pipecd_examples() else {
        return;
    };
    let dir = dir.join("v0/cloudrun");
    let run = support::run_gannet(&["config", "check", "--json", &dir.to_string_lossy()], &[]);
    let report: Value = serde_json::from_str(&run.stdout).expect("json report");
    let apps = report["apps"].as_array().expect("apps");
    assert_eq!(apps.len(), 5, "{report}");
    // Sealed secrets included: every example is accepted.
    let mut ok = Vec::new();
    for app in apps {
        assert_eq!(app["ok"], true, "{app}");
        let path = app["path"].as_str().unwrap_or_default();
        ok.push(path.rsplit('/').nth(1).unwrap_or_default().to_owned());
    }
    for example in ["simple", "canary", "analysis", "secret-management"] {
        assert!(
            ok.iter().any(|o| o == example),
            "{example} is not ok: {ok:?}"
        );
    }
}

/// PipeCD's sealed secrets on a CloudRunApp: a value sealed for gannet's key is filled into
/// the service manifest's container environment when the stage runs, reaches the service on
/// (the fake) Cloud Run, and is in no deployment, app, stage log, server log or stored row.
#[test]
fn a_sealed_secret_reaches_the_service_environment_and_nowhere_else() {
    let lab = Lab::new(Duration::from_millis(100));
    let key = support::private_key();
    let public = gannet_sdk::sealed::SealingKey::from_pem(&key)
        .expect("a key")
        .public_pem();
    let plain = "api-t0ken-only-in-the-service-env";
    let sealed = gannet_sdk::sealed::seal(&public, plain).expect("seal");
    let config = format!(
        "apiVersion: pipecd.dev/v1beta1\nkind: CloudRunApp\nspec:\n  name: web\n  encryption:\n    encryptedSecrets:\n      token: {sealed}\n    decryptionTargets:\n      - service.yaml\n"
    );
    let service = "apiVersion: serving.knative.dev/v1
kind: Service
metadata:
  name: web
spec:
  template:
    spec:
      containers:
      - image: gcr.io/demo/web:v1
        env:
        - name: API_TOKEN
          value: \"{{ .encryptedSecrets.token }}\"
";
    let head = lab.repo.commit(
        &[
            (&format!("{APP}/app.pipecd.yaml"), &config),
            (&format!("{APP}/service.yaml"), service),
        ],
        "a service with a sealed token",
    );
    let gcp_key = lab.state.path().join("gcp-key.json");
    std::fs::write(&gcp_key, lab.fake.service_account_key()).expect("key file");
    let opts = UpOptions {
        extra_config: format!(
            "intervals: {{poll: 1m, resume: 1s}}\nqueue: {{visibility: 3s}}\nplugins:\n  cloudrun:\n    deployTargets:\n      - name: gcp\n        project: gannet-test\n        region: us-central1\n        credentialsFile: {}\n        apiEndpoint: {}\n",
            gcp_key.display(),
            lab.fake.url()
        ),
        ..UpOptions::default()
    }
    .with_sealing_key(key);
    let g = Gannet::start(&lab.repo, lab.state.path(), &opts);
    let id = g.deployment_of(&head, LIMIT);
    let d = g.wait_terminal(&id, LIMIT);
    assert_eq!(d["status"], "SUCCESS", "{d}");
    let on_run = lab.fake.service("web").expect("the service");
    let env = &on_run["template"]["containers"][0]["env"][0];
    assert_eq!(
        (&env["name"], &env["value"]),
        (&json!("API_TOKEN"), &json!(plain)),
        "{on_run}"
    );

    g.assert_nowhere(plain, &id, "web");
}
