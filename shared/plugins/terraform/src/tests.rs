//! The terraform plugin's steps against a real terraform (the pinned one `make test` puts on
//! PATH) through the embedded job runner, with a local state file: every step delivered twice
//! runs each command once, an apply applies the plan its PLAN stage saved, and drift is a plan
//! job that later checks read. The S3 backend, approvals, rollback and a SIGKILL of gannet are
//! in the end-to-end tests (tests/e2e_terraform.rs).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gannet_domain::deployment::{Deployment, Stage, StageStatus};
use gannet_domain::duration::Millis;
use gannet_domain::{AppId, GoDuration};
use gannet_embedded::ProcessJobs;
use gannet_sdk::fixture::RecordingIo;
use gannet_sdk::jobs::{JobRoleArn, JobRoles};
use gannet_sdk::plugin::{
    Live, LiveContext, LiveStates, Plugin, StageResult, StepContext, StepError, StepOutcome, Steps,
};
use serde_json::{json, Value};

use super::*;

mod init_cache;

const NOW: u64 = 1_700_000_000_000;
const LIMIT: Duration = Duration::from_secs(60);

struct Lab {
    tmp: tempfile::TempDir,
    jobs: ProcessJobs,
    plugin: TerraformPlugin,
}

impl Lab {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let jobs = ProcessJobs::new(tmp.path().join("jobs")).expect("jobs");
        std::fs::write(tmp.path().join("terraformrc"), "").expect("rc");
        let mut target = DeployTarget::new("local");
        target.env.insert(
            "TF_CLI_CONFIG_FILE".into(),
            tmp.path().join("terraformrc").display().to_string(),
        );
        Self {
            tmp,
            jobs,
            plugin: TerraformPlugin::new(vec![target]),
        }
    }

    /// An app directory (`name`) at `image`, whose state is a local file outside it, and whose
    /// apply leaves a line in `applies`.
    fn app(&self, name: &str, image: &str) -> PathBuf {
        let dir = self.tmp.path().join(name);
        std::fs::create_dir_all(&dir).expect("app dir");
        std::fs::write(
            dir.join("app.pipecd.yaml"),
            format!("apiVersion: pipecd.dev/v1beta1\nkind: TerraformApp\nspec:\n  name: infra\n  input:\n    vars: [\"image={image}\"]\n"),
        )
        .expect("config");
        std::fs::write(
            dir.join("main.tf"),
            format!(
                r#"terraform {{
  backend "local" {{ path = "{state}" }}
}}
variable "image" {{ type = string }}
resource "terraform_data" "app" {{
  input = var.image
  provisioner "local-exec" {{ command = "echo applied >> {applies}" }}
}}
"#,
                state = self.state().display(),
                applies = self.applies().display(),
            ),
        )
        .expect("main.tf");
        dir
    }

    fn state(&self) -> PathBuf {
        self.tmp.path().join("terraform.tfstate")
    }

    fn applies(&self) -> PathBuf {
        self.tmp.path().join("applies")
    }

    fn applied(&self) -> usize {
        std::fs::read_to_string(self.applies()).map_or(0, |t| t.lines().count())
    }

    fn serial(&self) -> u64 {
        let text = std::fs::read_to_string(self.state()).unwrap_or_default();
        serde_json::from_str::<Value>(&text).map_or(0, |s| s["serial"].as_u64().unwrap_or(0))
    }

    /// One step of `d.stages[index]` (with what it saved so far) at `now`.
    async fn step(
        &self,
        d: &Deployment,
        index: usize,
        io: &RecordingIo,
        dir: &Path,
    ) -> Result<StepOutcome, StepError> {
        self.step_with(&self.plugin, d, index, io, dir).await
    }

    /// [`Lab::step`] with another plugin (other deploy targets) on this lab's jobs.
    async fn step_with(
        &self,
        plugin: &TerraformPlugin,
        d: &Deployment,
        index: usize,
        io: &RecordingIo,
        dir: &Path,
    ) -> Result<StepOutcome, StepError> {
        let mut stage = d.stages[index].clone();
        stage.metadata.extend(io.saved());
        plugin
            .execute_step(StepContext {
                deployment: d,
                stage: &stage,
                app_dir: dir,
                running_app_dir: None,
                now: Millis(NOW),
                io,
                jobs: &self.jobs,
            })
            .await
    }

    /// Runs stage `index` to its end, every step delivered twice.
    async fn run_twice_each(
        &self,
        d: &Deployment,
        index: usize,
        dir: &Path,
    ) -> (StageResult, RecordingIo) {
        let io = RecordingIo::default();
        let deadline = Instant::now() + LIMIT;
        loop {
            let first = self.step(d, index, &io, dir).await.expect("step");
            let again = self
                .step(d, index, &io, dir)
                .await
                .expect("the same step again");
            match (first, again) {
                (StepOutcome::Done(a), StepOutcome::Done(b)) => {
                    assert_eq!(a, b, "a redelivered last step decides the same");
                    return (a, io);
                }
                (StepOutcome::Done(a), StepOutcome::Continue { .. }) => {
                    panic!("a step ended the stage ({a:?}) and its redelivery did not")
                }
                _ => {}
            }
            assert!(
                Instant::now() < deadline,
                "stage did not end: {:#?}",
                io.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn stage(id: &str, name: &str, with: Value) -> Stage {
    let mut s = Stage::test(id, name).running_since(NOW);
    s.with = TerraformPlugin::default()
        .validate_stage(name, &with)
        .expect("valid with");
    s.timeout = GoDuration::from_secs(600);
    s
}

fn deployment(stages: Vec<Stage>) -> Deployment {
    let mut d = Deployment::test().with_stages(stages);
    d.app = AppId::parse("demo:infra/app.pipecd.yaml").expect("app id");
    d
}

#[tokio::test]
async fn a_sync_with_every_step_delivered_twice_applies_once() {
    let lab = Lab::new();
    let dir = lab.app("v1", "nginx:1");
    let d = deployment(vec![stage("sync", STAGE_SYNC, json!({}))]);
    let (result, io) = lab.run_twice_each(&d, 0, &dir).await;
    assert_eq!(result, StageResult::Success, "{:#?}", io.logs());
    assert_eq!(lab.applied(), 1);
    assert_eq!(lab.serial(), 1);
    let logs = io.logs();
    assert!(
        logs.iter()
            .any(|l| l == "Plan: 1 to add, 0 to change, 0 to destroy."),
        "{logs:#?}"
    );
    assert!(logs.iter().any(|l| l == "Applied the plan"), "{logs:#?}");
    assert_eq!(io.saved()[META_HAS_CHANGES], "true");
}

#[tokio::test]
async fn an_apply_delivered_twice_applies_the_saved_plan_once_and_a_second_plan_has_no_changes() {
    let lab = Lab::new();
    let dir = lab.app("v1", "nginx:1");
    let mut d = deployment(vec![
        stage("plan", STAGE_PLAN, json!({"exitOnNoChanges": true})),
        stage("apply", STAGE_APPLY, json!({})),
    ]);
    let (planned, io) = lab.run_twice_each(&d, 0, &dir).await;
    assert_eq!(planned, StageResult::Success, "{:#?}", io.logs());
    assert_eq!(lab.applied(), 0, "a plan applies nothing");
    d.stages[0].status = StageStatus::Success;
    d.stages[0].metadata.extend(io.saved());
    let view: Plan = serde_json::from_str(&io.saved()[META_PLAN]).expect("kept plan");
    assert_eq!(view.add, 1);

    // The configuration moves on after the plan: the apply still applies the saved plan.
    let moved = lab.app("v2", "nginx:2");
    let (applied, io) = lab.run_twice_each(&d, 1, &moved).await;
    assert_eq!(applied, StageResult::Success, "{:#?}", io.logs());
    assert_eq!(lab.applied(), 1);
    let state = std::fs::read_to_string(lab.state()).expect("state");
    assert!(
        state.contains("nginx:1") && !state.contains("nginx:2"),
        "{state}"
    );

    // A new deployment's plan of the applied configuration has no changes: it exits.
    let d2 = deployment(vec![
        stage("plan", STAGE_PLAN, json!({"exitOnNoChanges": true})),
        stage("apply", STAGE_APPLY, json!({})),
    ]);
    let mut d2 = d2;
    d2.id = gannet_domain::DeploymentId::parse("d-second-0001").expect("id");
    let (result, io) = lab.run_twice_each(&d2, 0, &dir).await;
    assert!(
        matches!(result, StageResult::Exited { .. }),
        "{result:?} {:#?}",
        io.logs()
    );
    assert_eq!(io.saved()[META_HAS_CHANGES], "false");
}

#[tokio::test]
async fn an_apply_without_a_plan_before_it_fails_saying_so() {
    let lab = Lab::new();
    let dir = lab.app("v1", "nginx:1");
    let d = deployment(vec![stage("apply", STAGE_APPLY, json!({}))]);
    let err = lab
        .step(&d, 0, &RecordingIo::default(), &dir)
        .await
        .expect_err("no plan");
    assert!(
        err.reason().contains("TERRAFORM_PLAN stage before it"),
        "{}",
        err.reason()
    );
    assert_eq!(lab.applied(), 0);
}

#[tokio::test]
async fn drift_is_a_plan_job_that_later_checks_read() {
    let lab = Lab::new();
    let dir = lab.app("v1", "nginx:1");
    let d = deployment(vec![stage("sync", STAGE_SYNC, json!({}))]);
    lab.run_twice_each(&d, 0, &dir).await;
    // Git now says nginx:2: live (nginx:1) differs.
    let head = lab.app("head", "nginx:2");
    let text = std::fs::read_to_string(head.join("app.pipecd.yaml")).expect("config");
    let app = gannet_config::parse_app_config("infra/app.pipecd.yaml", &text).expect("config");
    let app_id = AppId::parse("demo:infra/app.pipecd.yaml").expect("app id");
    let sha = gannet_domain::fixture::sha();
    let check_at = |now: u64| {
        lab.plugin.live_state(LiveContext {
            app_id: &app_id,
            app: &app,
            app_dir: &head,
            head: &sha,
            last_deployed: Some(Millis(NOW)),
            now: Millis(now),
            jobs: &lab.jobs,
            preview: false,
        })
    };
    let check = || check_at(NOW + 1000);
    assert!(matches!(
        check().await.expect("check"),
        Live::Pending { .. }
    ));
    let deadline = Instant::now() + LIMIT;
    let live = loop {
        match check().await.expect("check") {
            Live::Read(live) => break live,
            Live::Pending { .. } => {}
            Live::NotRead => panic!("the terraform plugin reads live state"),
        }
        assert!(Instant::now() < deadline, "the drift plan did not end");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let fields: Vec<&str> = live.drift.iter().map(|f| f.field.as_str()).collect();
    assert_eq!(fields, ["terraform_data.app.input"], "{live:#?}");
    assert_eq!(live.drift[0].live, "\"nginx:1\"");
    assert_eq!(live.resources[0].id, "terraform_data.app");
    assert_eq!(lab.applied(), 1, "a drift check applies nothing");
    // Read again in the same interval: the same job's result, no new plan.
    let again = check().await.expect("check");
    assert_eq!(again, Live::Read(live.clone()));
    // The next interval starts a new plan, and until it ends the last one is the answer: a
    // plan slower than the interval is still read.
    let next = NOW + 1000 + target::DEFAULT_DRIFT_INTERVAL.as_millis();
    assert_eq!(check_at(next).await.expect("check"), Live::Read(live));
}

#[test]
fn stage_options_and_targets_are_checked_with_the_field_named() {
    let p = TerraformPlugin::default();
    assert_eq!(
        p.validate_stage(STAGE_PLAN, &json!({})).expect("plan"),
        json!({"exitOnNoChanges": false})
    );
    assert!(p
        .validate_stage(STAGE_PLAN, &json!({"exitOnNoChange": true}))
        .is_err());
    let retries = p
        .validate_stage(STAGE_APPLY, &json!({"retries": 2}))
        .unwrap_err();
    assert_eq!(retries.field, "retries");
    assert!(p.validate_stage(STAGE_ROLLBACK, &json!({})).is_err());

    let runtime = gannet_sdk::registry::RuntimeInfo {
        secret_env: vec!["GANNET_WEBHOOK_SECRET".into()],
        job_roles: JobRoles::PerJob,
        ..gannet_sdk::registry::RuntimeInfo::default()
    };
    let build = |value: Value| {
        (SPEC.build)(&gannet_sdk::registry::PluginSettings::new(
            "plugins.terraform",
            &value,
            &runtime,
        ))
        .map(|_| ())
        .map_err(|e| e.to_string())
    };
    assert_eq!(build(json!({"deployTargets": [{"name": "local"}]})), Ok(()));
    for (bad, field) in [
        (
            json!({"name": "a", "vars": ["novalue"]}),
            "plugins.terraform.deployTargets[0].vars[0]",
        ),
        (
            json!({"name": "a", "allowEnv": ["GANNET_WEBHOOK_SECRET"]}),
            "plugins.terraform.deployTargets[0].allowEnv[0]",
        ),
        (
            json!({"name": "a", "allowEnv": ["AWS_REGION", "AWS_SECRET_ACCESS_KEY"]}),
            "plugins.terraform.deployTargets[0].allowEnv[1]",
        ),
        (
            json!({"name": "a", "allowEnv": ["GITHUB_TOKEN"]}),
            "plugins.terraform.deployTargets[0].allowEnv[0]",
        ),
        (
            json!({"name": "a", "env": {"A B": "x"}}),
            "plugins.terraform.deployTargets[0].env",
        ),
        (
            json!({"name": "a", "driftInterval": "0s"}),
            "plugins.terraform.deployTargets[0].driftInterval",
        ),
        (
            json!({"name": "a", "terraform": ""}),
            "plugins.terraform.deployTargets[0].terraform",
        ),
        (
            json!({"name": "a", "jobRoleArn": "gannet-terraform"}),
            "plugins.terraform.deployTargets[0].jobRoleArn",
        ),
    ] {
        let err = build(json!({"deployTargets": [bad]})).unwrap_err();
        assert!(err.starts_with(&format!("{field}:")), "{err}");
    }
    // Refusing gannet's AWS keys says how terraform gets keys of its own.
    let err = build(json!({"deployTargets": [{"name": "a", "allowEnv": ["AWS_ACCESS_KEY_ID"]}]}))
        .unwrap_err();
    assert!(
        err.contains("gannet's own AWS credentials")
            && err.contains("assume_role")
            && err.contains("TF_VAR_"),
        "{err}"
    );
}

/// The targets as each runtime's settings read them: `plugins.terraform` with `runtime`.
fn targets_for(runtime: JobRoles, value: Value) -> Result<Vec<DeployTarget>, String> {
    let runtime = gannet_sdk::registry::RuntimeInfo {
        job_roles: runtime,
        ..Default::default()
    };
    let settings = gannet_sdk::registry::PluginSettings::new("plugins.terraform", &value, &runtime);
    settings
        .deploy_targets(|at, t: &DeployTarget| t.check(at, &runtime))
        .map_err(|e| e.to_string())
}

#[test]
fn a_targets_job_role_is_an_iam_role_arn_and_only_the_aws_runtime_takes_one() {
    let prod = "arn:aws:iam::123456789012:role/gannet-terraform-prod";
    let value =
        json!({"deployTargets": [{"name": "staging"}, {"name": "prod", "jobRoleArn": prod}]});
    let targets = targets_for(JobRoles::PerJob, value.clone()).expect("the AWS runtime's targets");
    assert_eq!(targets[0].job_role_arn, None);
    assert_eq!(
        targets[1].job_role_arn.as_ref().map(JobRoleArn::as_str),
        Some(prod)
    );

    // An ARN that is not a role's is refused, naming the field, on every runtime.
    for bad in [
        "gannet-terraform",
        "arn:aws:iam::12345678901:role/tf",
        "arn:aws:iam::123456789012:user/tf",
        "arn:aws:iam::123456789012:role/",
    ] {
        for runtime in [JobRoles::PerJob, JobRoles::Refused] {
            let err = targets_for(
                runtime,
                json!({"deployTargets": [{"name": "prod", "jobRoleArn": bad}]}),
            )
            .unwrap_err();
            assert_eq!(
                err,
                format!(
                    "plugins.terraform.deployTargets[0].jobRoleArn: {bad:?} is not an IAM role ARN such as arn:aws:iam::123456789012:role/deployer"
                ),
                "{runtime:?}"
            );
        }
    }

    // `gannet up` runs jobs as its own processes: a role is refused where it is written.
    let err = targets_for(JobRoles::Refused, value).unwrap_err();
    assert!(
        err.starts_with(
            "plugins.terraform.deployTargets[1].jobRoleArn: a job role is for the AWS runtime"
        ) && err.contains("remove jobRoleArn"),
        "{err}"
    );
    assert_eq!(
        targets_for(
            JobRoles::Refused,
            json!({"deployTargets": [{"name": "local"}]})
        )
        .map(|t| t.len()),
        Ok(1)
    );
}

/// A job runner that records what each start asked for, and starts nothing.
#[derive(Default)]
struct Starts(std::sync::Mutex<Vec<(String, Option<String>)>>);

#[async_trait::async_trait]
impl JobRunner for Starts {
    async fn start(&self, spec: JobSpec<'_>) -> Result<(), jobs::JobError> {
        self.0.lock().unwrap().push((
            spec.key.to_string(),
            spec.role.map(|r| r.as_str().to_owned()),
        ));
        Ok(())
    }
    async fn poll(&self, key: &JobKey, _cursor: &str) -> Result<jobs::JobPoll, jobs::JobError> {
        Err(jobs::JobError::Unknown(key.clone()))
    }
    async fn cancel(&self, _key: &JobKey) -> Result<(), jobs::JobError> {
        Ok(())
    }
    async fn output(&self, key: &JobKey, _name: &str) -> Result<Option<Vec<u8>>, jobs::JobError> {
        Err(jobs::JobError::Unknown(key.clone()))
    }
    fn poll_interval(&self, _running_for: GoDuration) -> GoDuration {
        GoDuration::from_secs(1)
    }
}

#[tokio::test]
async fn every_job_of_a_target_runs_as_its_job_role() {
    let lab = Lab::new();
    let role = "arn:aws:iam::123456789012:role/gannet-terraform-local";
    let mut target = DeployTarget::new("local");
    target.job_role_arn = Some(JobRoleArn::parse(role).unwrap());
    let plugin = TerraformPlugin::new(vec![target]);
    let dir = lab.app("v1", "nginx:1");
    let starts = Starts::default();

    // A stage's plan.
    let d = deployment(vec![stage("plan", STAGE_PLAN, json!({}))]);
    let outcome = plugin
        .execute_step(StepContext {
            deployment: &d,
            stage: &d.stages[0],
            app_dir: &dir,
            running_app_dir: None,
            now: Millis(NOW),
            io: &RecordingIo::default(),
            jobs: &starts,
        })
        .await
        .expect("step");
    assert!(
        matches!(outcome, StepOutcome::Continue { .. }),
        "{outcome:?}"
    );

    // A drift check's plan.
    let text = std::fs::read_to_string(dir.join("app.pipecd.yaml")).expect("config");
    let app = gannet_config::parse_app_config("infra/app.pipecd.yaml", &text).expect("config");
    let live = plugin
        .live_state(LiveContext {
            app_id: &d.app,
            app: &app,
            app_dir: &dir,
            head: &gannet_domain::fixture::sha(),
            last_deployed: None,
            now: Millis(NOW),
            jobs: &starts,
            preview: false,
        })
        .await
        .expect("live");
    assert!(matches!(live, Live::Pending { .. }), "{live:?}");

    let roles: Vec<Option<String>> = starts
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(_, r)| r.clone())
        .collect();
    assert_eq!(roles, [Some(role.to_owned()), Some(role.to_owned())]);
}

#[test]
fn scripts_quote_every_value_from_git() {
    let input = crate::spec::TerraformInput {
        vars: vec!["image=x'; rm -rf / #".into()],
        workspace: "prod".into(),
        ..Default::default()
    };
    let commands = script::Commands {
        terraform: "terraform",
        input: &input,
        target_vars: &[],
        init_key: Some("k'; rm -rf / #".into()),
    };
    let plan = commands.plan_script();
    assert!(plan.contains(r#"want='k'\''; rm -rf / #'"#), "{plan}");
    assert!(plan.contains(r#"-var 'image=x'\''; rm -rf / #'"#), "{plan}");
    assert!(
        plan.contains("workspace select -or-create -no-color 'prod'"),
        "{plan}"
    );
    assert_eq!(
        check_input(&crate::spec::TerraformInput {
            workspace: "a b".into(),
            ..Default::default()
        })
        .unwrap_err()
        .0,
        "spec.input.workspace"
    );
    for escape in ["../other/secret.tfvars", "/etc/passwd", "a/../../b"] {
        let err = check_input(&crate::spec::TerraformInput {
            var_files: vec!["ok.tfvars".into(), escape.into()],
            ..Default::default()
        })
        .unwrap_err();
        assert_eq!(err.0, "spec.input.varFiles[1]", "{escape}");
    }
}

#[test]
fn terraforms_error_paragraph_is_the_reason() {
    let stderr = "\nError: Saved plan is stale\n\nThe given plan file can no longer be applied because the state was changed by\nanother operation after the plan was created.\n\nError: second\n";
    assert_eq!(
        script::error_summary(stderr).as_deref(),
        Some("Error: Saved plan is stale The given plan file can no longer be applied because the state was changed by another operation after the plan was created.")
    );
    assert_eq!(
        script::error_summary("a\nb\nc\nd\n").as_deref(),
        Some("b c d")
    );
    assert_eq!(script::error_summary(""), None);
}

#[test]
fn pipecds_retries_is_reported_as_unsupported_by_name_not_as_invalid() {
    let plugins = gannet_sdk::plugin::Plugins::new(vec![gannet_sdk::plugin::Faces::platform(
        std::sync::Arc::new(TerraformPlugin::default()),
    )]);
    let text = "apiVersion: pipecd.dev/v1beta1\nkind: TerraformApp\nspec:\n  name: infra\n  quickSync:\n    retries: 3\n  pipeline:\n    stages:\n      - name: TERRAFORM_PLAN\n      - name: TERRAFORM_APPLY\n        with:\n          retries: 2\n";
    let checked = gannet_sdk::check::check_app("infra/app.pipecd.yaml", text, &plugins, &|_| None);
    let found: Vec<(&str, bool, Option<usize>)> = checked
        .errors
        .iter()
        .map(|i| (i.field.as_str(), i.unsupported, i.line))
        .collect();
    assert_eq!(
        found,
        [
            ("spec.quickSync.retries", true, Some(6)),
            ("spec.pipeline.stages[1].with.retries", true, Some(12)),
        ],
        "{:#?}",
        checked.errors
    );
}
