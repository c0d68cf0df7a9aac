//! Remote charts and bases rendered by real jobs (the embedded job runner) with the real helm,
//! kustomize and git, fetched from loopback servers and local repositories the tests make,
//! and applied to the fake API server: every step delivered twice starts one job; a fetch
//! that fails or an output past the YAML limits fails the stage with nothing applied.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use gannet_domain::deployment::{Deployment, Stage};
use gannet_domain::duration::Millis;
use gannet_domain::{AppId, GoDuration};
use gannet_embedded::ProcessJobs;
use gannet_kube_fake::{Chart, ChartServer, FakeKube};
use gannet_sdk::fixture::RecordingIo;
use gannet_sdk::plugin::{Plugin, StageResult, StepContext, StepOutcome, Steps};
use serde_json::json;

use crate::remote::{ChartRepository, FileRemotes, Remotes};
use crate::{DeployTarget, KubernetesPlugin, STAGE_SYNC};

const NOW: u64 = 1_700_000_000_000;

fn tool(name: &str) -> PathBuf {
    let var = format!("GANNET_{}", name.to_uppercase());
    std::env::var_os(&var)
        .map(PathBuf::from)
        .unwrap_or_else(|| gannet_kube_fake::tools_dir().join(name))
}

/// The renderer finds the pinned tools as gannet does, by GANNET_HELM and GANNET_KUSTOMIZE.
fn tools() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for name in ["helm", "kustomize"] {
            let var = format!("GANNET_{}", name.to_uppercase());
            if std::env::var_os(&var).is_none() {
                std::env::set_var(&var, tool(name));
            }
        }
    });
}

fn sh(dir: &Path, program: &Path, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HELM_CACHE_HOME", dir.join(".helm"))
        .env("HELM_CONFIG_HOME", dir.join(".helm"))
        .env("HELM_DATA_HOME", dir.join(".helm"))
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{program:?} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn git(dir: &Path, args: &[&str]) {
    sh(dir, Path::new("git"), args);
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const TEMPLATE: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n        - name: web\n          image: {{ .Values.image }}\n";

/// The test's chart repository: `web` (one Deployment) and `deep` (output nested deeper than
/// gannet's YAML limit), both 0.1.0.
fn chart_server() -> ChartServer {
    let deep = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: deep}}\ndata: {}{}\n",
        "{a: ".repeat(80),
        "x".to_owned() + &"}".repeat(80)
    );
    ChartServer::start(&[
        Chart {
            name: "web",
            version: "0.1.0",
            template: TEMPLATE,
        },
        Chart {
            name: "deep",
            version: "0.1.0",
            template: &deep,
        },
    ])
}

/// A bare git repository at `<tmp>/<name>.git` holding `files`, tagged `v1`.
fn bare_repo(tmp: &Path, name: &str, files: &[(&str, &str)]) -> String {
    let work = tmp.join(format!("{name}-work"));
    std::fs::create_dir_all(&work).unwrap();
    for (rel, text) in files {
        write(&work, rel, text);
    }
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["add", "."]);
    git(
        &work,
        &[
            "-c",
            "user.email=t@example.com",
            "-c",
            "user.name=t",
            "commit",
            "-qm",
            "one",
        ],
    );
    git(&work, &["tag", "v1"]);
    let bare = tmp.join(format!("{name}.git"));
    git(
        tmp,
        &[
            "clone",
            "-q",
            "--bare",
            &work.to_string_lossy(),
            &bare.to_string_lossy(),
        ],
    );
    format!("file://{}", bare.display())
}

struct Lab {
    tmp: tempfile::TempDir,
    jobs: ProcessJobs,
    kube: FakeKube,
    plugin: KubernetesPlugin,
}

impl Lab {
    fn new(remotes: Remotes) -> Self {
        tools();
        let tmp = tempfile::tempdir().unwrap();
        let jobs = ProcessJobs::new(tmp.path().join("jobs")).unwrap();
        let kube = FakeKube::start();
        kube.play_deployment_controller(Duration::ZERO);
        let kubeconfig = kube.write_kubeconfig(tmp.path());
        let target = DeployTarget::kubeconfig("local", kubeconfig.to_string_lossy());
        Self {
            tmp,
            jobs,
            kube,
            plugin: KubernetesPlugin::new(vec![target]).with_remotes(remotes),
        }
    }

    /// The app `web/` of a checkout holding `files` (paths under the app's directory).
    fn app(&self, files: &[(&str, &str)]) -> PathBuf {
        let dir = self.tmp.path().join("repo/web");
        for (rel, text) in files {
            write(&dir, rel, text);
        }
        dir
    }

    fn jobs_started(&self) -> usize {
        std::fs::read_dir(self.tmp.path().join("jobs"))
            .unwrap()
            .flatten()
            .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
            .count()
    }

    /// K8S_SYNC of the app in `dir`, every step delivered twice, to its end.
    async fn sync(&self, dir: &Path) -> (StageResult, RecordingIo) {
        self.sync_at(dir, 'a').await
    }

    /// [`Lab::sync`] of the commit whose sha is `digit` 40 times.
    async fn sync_at(&self, dir: &Path, digit: char) -> (StageResult, RecordingIo) {
        let mut stage = Stage::test("k8s-sync", STAGE_SYNC).running_since(NOW);
        stage.with = self
            .plugin
            .validate_stage(STAGE_SYNC, &json!({}))
            .expect("with");
        stage.timeout = GoDuration::from_secs(600);
        let mut d = Deployment::test().with_stages(vec![stage]);
        d.app = AppId::parse("demo:web/app.pipecd.yaml").unwrap();
        d.commit.sha = gannet_domain::CommitSha::parse(&digit.to_string().repeat(40)).unwrap();
        d.id = gannet_domain::ids::DeploymentId::parse(&format!("web-{digit}")).unwrap();
        self.run(&d, 0, dir, None).await
    }

    /// Stage `stage_index` of `d`, every step delivered twice, to its end.
    async fn run(
        &self,
        d: &Deployment,
        stage_index: usize,
        dir: &Path,
        running_dir: Option<&Path>,
    ) -> (StageResult, RecordingIo) {
        let io = RecordingIo::default();
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let mut outcomes = Vec::new();
            for _ in 0..2 {
                let mut stage = d.stages[stage_index].clone();
                stage.metadata.extend(io.saved());
                let ctx = StepContext {
                    deployment: d,
                    stage: &stage,
                    app_dir: dir,
                    running_app_dir: running_dir,
                    now: Millis(NOW),
                    io: &io,
                    jobs: &self.jobs,
                };
                outcomes.push(self.plugin.execute_step(ctx).await.expect("step"));
            }
            if let StepOutcome::Done(result) = &outcomes[0] {
                assert_eq!(
                    outcomes[1],
                    StepOutcome::Done(result.clone()),
                    "the repeated step decides the same"
                );
                return (result.clone(), io);
            }
            assert!(Instant::now() < deadline, "{:#?}", io.logs());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn image(&self, name: &str) -> Option<String> {
        let d = self
            .kube
            .get("apps/v1", "Deployment", Some("default"), name)?;
        d["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .map(str::to_owned)
    }
}

fn repository(server: &ChartServer) -> Remotes {
    Remotes {
        chart_repositories: vec![serde_json::from_value::<ChartRepository>(json!({
            "name": "local",
            "address": server.url,
        }))
        .unwrap()],
        file_remotes: FileRemotes::Refused,
    }
}

fn app_yaml(input: &str) -> String {
    format!("apiVersion: pipecd.dev/v1beta1\nkind: KubernetesApp\nspec:\n  name: web\n  input:\n{input}")
}

#[tokio::test]
async fn a_chart_from_a_chart_repository_renders_in_one_job_with_the_apps_values() {
    let server = chart_server();
    let lab = Lab::new(repository(&server));
    let dir = lab.app(&[
        (
            "app.pipecd.yaml",
            &app_yaml("    helmChart: {repository: local, name: web, version: 0.1.0}\n    helmOptions: {releaseName: shop, valueFiles: [values.yaml]}\n"),
        ),
        ("values.yaml", "image: web:2\n"),
    ]);
    let (result, io) = lab.sync(&dir).await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    assert_eq!(lab.image("shop").as_deref(), Some("web:2"));
    assert_eq!(lab.jobs_started(), 1, "each step was delivered twice");
    let logs = io.logs().join("\n");
    assert!(
        logs.contains("Rendered this commit's chart web 0.1.0 from chart repository local"),
        "{logs}"
    );
}

#[tokio::test]
async fn a_chart_version_the_repository_lacks_fails_naming_it_and_applies_nothing() {
    let server = chart_server();
    let lab = Lab::new(repository(&server));
    let dir = lab.app(&[(
        "app.pipecd.yaml",
        &app_yaml("    helmChart: {repository: local, name: web, version: 0.9.0}\n"),
    )]);
    let (result, io) = lab.sync(&dir).await;
    let StageResult::Failure { reason } = result else {
        panic!("{result:?}: {:#?}", io.logs());
    };
    assert!(reason.contains("chart web version 0.9.0"), "{reason}");
    assert!(reason.contains("nothing was applied"), "{reason}");
    assert!(lab.kube.list("apps/v1", "Deployment").is_empty());
    assert_eq!(lab.jobs_started(), 1);
}

#[tokio::test]
async fn a_rendered_chart_past_the_yaml_limits_is_refused() {
    let server = chart_server();
    let lab = Lab::new(repository(&server));
    let dir = lab.app(&[(
        "app.pipecd.yaml",
        &app_yaml("    helmChart: {repository: local, name: deep, version: 0.1.0}\n"),
    )]);
    let (result, io) = lab.sync(&dir).await;
    let StageResult::Failure { reason } = result else {
        panic!("{result:?}: {:#?}", io.logs());
    };
    assert!(reason.contains("deep"), "{reason}");
    assert!(reason.contains("nest"), "{reason}");
    assert!(lab.kube.list("v1", "ConfigMap").is_empty());
}

#[tokio::test]
async fn a_chart_from_a_git_remote_renders_at_its_ref() {
    let lab = Lab::new(Remotes {
        chart_repositories: Vec::new(),
        file_remotes: FileRemotes::Allowed,
    });
    let remote = bare_repo(
        lab.tmp.path(),
        "charts",
        &[
            (
                "charts/web/Chart.yaml",
                "apiVersion: v2\nname: web\nversion: 0.1.0\n",
            ),
            ("charts/web/values.yaml", "image: web:git\n"),
            ("charts/web/templates/main.yaml", TEMPLATE),
        ],
    );
    let dir = lab.app(&[(
        "app.pipecd.yaml",
        &app_yaml(&format!(
            "    helmChart: {{gitRemote: '{remote}', ref: v1, path: charts/web}}\n    helmOptions: {{releaseName: gitweb}}\n"
        )),
    )]);
    let (result, io) = lab.sync(&dir).await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    assert_eq!(lab.image("gitweb").as_deref(), Some("web:git"));
    assert_eq!(lab.jobs_started(), 1);
}

#[tokio::test]
async fn a_kustomization_on_a_remote_git_base_builds_in_a_job() {
    let lab = Lab::new(Remotes {
        chart_repositories: Vec::new(),
        file_remotes: FileRemotes::Allowed,
    });
    let deployment = TEMPLATE
        .replace("{{ .Release.Name }}", "web")
        .replace("{{ .Values.image }}", "web:1");
    let remote = bare_repo(
        lab.tmp.path(),
        "bases",
        &[
            ("base/kustomization.yaml", "resources: [deployment.yaml]\n"),
            ("base/deployment.yaml", &deployment),
        ],
    );
    let dir = lab.app(&[
        ("app.pipecd.yaml", &app_yaml("    kustomizeVersion: 5.8.2\n")),
        (
            "kustomization.yaml",
            &format!("resources: ['{remote}//base?ref=v1']\nnamePrefix: prod-\nimages:\n  - {{name: web, newTag: '2'}}\n"),
        ),
    ]);
    let (result, io) = lab.sync(&dir).await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    assert_eq!(lab.image("prod-web").as_deref(), Some("web:2"));
    assert_eq!(lab.jobs_started(), 1);

    // Without allowFileRemotes, the same base is refused before any job runs.
    let refused = KubernetesPlugin::new(Vec::new());
    let spec = crate::manifest::spec_of(
        &gannet_config::parse_app_config(
            "app.pipecd.yaml",
            &app_yaml("    kustomizeVersion: 5.8.2\n"),
        )
        .unwrap(),
    )
    .unwrap();
    let files = gannet_sdk::tree::AppFiles::at(&dir, "web");
    let e = refused.remotes.source(Some(&files), &spec).unwrap_err();
    assert!(e.to_string().contains("allowFileRemotes"), "{e}");
}

#[tokio::test]
async fn a_chart_repository_gannet_yaml_does_not_configure_fails_the_stage_naming_it() {
    // With no chart repository configured (as `config check` runs), the name is accepted
    // while planning; the stage says what to configure, and no job runs.
    let lab = Lab::new(Remotes::default());
    let dir = lab.app(&[(
        "app.pipecd.yaml",
        &app_yaml("    helmChart: {repository: nowhere, name: web, version: 0.1.0}\n"),
    )]);
    let (result, io) = lab.sync(&dir).await;
    let StageResult::Failure { reason } = result else {
        panic!("{result:?}: {:#?}", io.logs());
    };
    assert!(
        reason.contains("chart repository \"nowhere\" is not configured"),
        "{reason}"
    );
    assert!(
        reason.contains("plugins.kubernetes.chartRepositories"),
        "{reason}"
    );
    assert_eq!(lab.jobs_started(), 0);
}

#[tokio::test]
async fn live_state_is_pending_while_its_render_job_runs_then_compares_the_rendered_objects() {
    use gannet_sdk::plugin::{Live, LiveContext, LiveStates};

    let server = chart_server();
    let lab = Lab::new(repository(&server));
    let dir = lab.app(&[(
        "app.pipecd.yaml",
        &app_yaml("    helmChart: {repository: local, name: web, version: 0.1.0}\n    helmOptions: {releaseName: shop}\n"),
    )]);
    let (result, io) = lab.sync(&dir).await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    let jobs_of_the_sync = lab.jobs_started();

    let app_id = AppId::parse("demo:web/app.pipecd.yaml").unwrap();
    let text = std::fs::read_to_string(dir.join("app.pipecd.yaml")).unwrap();
    let app = gannet_config::parse_app_config("web/app.pipecd.yaml", &text).unwrap();
    let head = gannet_domain::CommitSha::parse(&"a".repeat(40)).unwrap();
    let check = || LiveContext {
        app_id: &app_id,
        app: &app,
        app_dir: &dir,
        head: &head,
        last_deployed: None,
        now: Millis(NOW),
        jobs: &lab.jobs,
        preview: false,
    };
    let first = lab.plugin.live_state(check()).await.expect("live state");
    assert!(matches!(first, Live::Pending { .. }), "{first:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let state = loop {
        match lab.plugin.live_state(check()).await.expect("live state") {
            Live::Read(state) => break state,
            Live::Pending { .. } => {}
            other => panic!("{other:?}"),
        }
        assert!(Instant::now() < deadline, "the render job did not end");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(state.drift.is_empty(), "{:?}", state.drift);
    assert_eq!(state.resources.len(), 1, "{:?}", state.resources);
    assert_eq!(
        lab.jobs_started(),
        jobs_of_the_sync + 1,
        "one render job per check window"
    );
}

#[tokio::test]
async fn a_rollback_renders_the_running_commits_chart_in_its_own_job() {
    let server = chart_server();
    let lab = Lab::new(repository(&server));
    let chart = "    helmChart: {repository: local, name: web, version: 0.1.0}\n    helmOptions: {releaseName: shop, valueFiles: [values.yaml]}\n";
    let running = lab.app(&[
        ("app.pipecd.yaml", &app_yaml(chart)),
        ("values.yaml", "image: web:1\n"),
    ]);
    let (result, io) = lab.sync(&running).await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    // This commit's chart takes web:2 (a sync that then failed); the rollback goes back.
    let this = lab.tmp.path().join("next/web");
    for (rel, text) in [
        ("app.pipecd.yaml", app_yaml(chart)),
        ("values.yaml", "image: web:2\n".into()),
    ] {
        write(&this, rel, &text);
    }
    let (result, io) = lab.sync_at(&this, 'c').await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    assert_eq!(lab.image("shop").as_deref(), Some("web:2"));
    let jobs_before = lab.jobs_started();

    let mut sync = Stage::test("k8s-sync-2", STAGE_SYNC).running_since(NOW);
    sync.with = json!({});
    let mut rollback = Stage::test("k8s-rollback", crate::STAGE_ROLLBACK).running_since(NOW);
    rollback.timeout = GoDuration::from_secs(600);
    let mut d = Deployment::test().with_stages(vec![sync, rollback]);
    d.app = AppId::parse("demo:web/app.pipecd.yaml").unwrap();
    d.id = gannet_domain::ids::DeploymentId::parse("web-c").unwrap();
    d.commit.sha = gannet_domain::CommitSha::parse(&"c".repeat(40)).unwrap();
    d.running_commit = Some(gannet_domain::CommitSha::parse(&"a".repeat(40)).unwrap());
    let (result, io) = lab.run(&d, 1, &this, Some(&running)).await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    assert_eq!(lab.image("shop").as_deref(), Some("web:1"));
    assert_eq!(
        lab.jobs_started(),
        jobs_before + 1,
        "the running commit's render only"
    );
    let logs = io.logs().join("\n");
    assert!(
        logs.contains("Rendered the running commit's chart web 0.1.0"),
        "{logs}"
    );
}
