//! A function whose code is a directory of another git repository (PipeCD's `spec.source`),
//! fetched by real jobs (the embedded job runner, real git) from a bare repository on this
//! machine and deployed to moto: a step delivered again starts no second job and changes
//! nothing, two deployments of the same tree upload identical zips, and a missing ref fails
//! the stage naming it with nothing deployed.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use gannet_domain::deployment::DeploymentStatus;
use gannet_domain::GoDuration;
use gannet_embedded::ProcessJobs;
use gannet_sdk::jobs::{JobError, JobKey, JobPoll, JobRunner, JobSpec};

use super::harness::*;
use crate::gitzip::GitSettings;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A bare repository holding `fn/` (a handler and an executable) tagged `v1`; its URL.
fn code_repo(root: &Path) -> String {
    let work = root.join("work");
    std::fs::create_dir_all(work.join("fn")).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("fn/app.py"), "def handler(e, c):\n    return 1\n").unwrap();
    std::fs::write(work.join("fn/run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::write(work.join("README.md"), "not deployed\n").unwrap();
    git(&work, &["update-index", "--add", "--chmod=+x", "fn/run.sh"]);
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "code"]);
    git(&work, &["tag", "v1"]);
    let bare = root.join("code.git");
    git(
        root,
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    format!("file://{}", bare.display())
}

/// The embedded job runner, whose polls wait (at most 60 s) for the job to end, so a step
/// after the one that started it finds it ended. Counts the jobs started.
struct Waiting {
    jobs: ProcessJobs,
    started: std::sync::atomic::AtomicUsize,
}

#[async_trait]
impl JobRunner for Waiting {
    async fn start(&self, spec: JobSpec<'_>) -> Result<(), JobError> {
        if matches!(
            self.jobs.poll(spec.key, "").await,
            Err(JobError::Unknown(_))
        ) {
            self.started
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.jobs.start(spec).await
    }
    async fn poll(&self, key: &JobKey, cursor: &str) -> Result<JobPoll, JobError> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let poll = self.jobs.poll(key, cursor).await?;
            if poll.end.is_some() || Instant::now() > deadline {
                return Ok(poll);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    async fn cancel(&self, key: &JobKey) -> Result<(), JobError> {
        self.jobs.cancel(key).await
    }
    async fn output(&self, key: &JobKey, name: &str) -> Result<Option<Vec<u8>>, JobError> {
        self.jobs.output(key, name).await
    }
    fn poll_interval(&self, running_for: GoDuration) -> GoDuration {
        self.jobs.poll_interval(running_for)
    }
}

fn source_manifest(name: &str, remote: &str, git_ref: &str, memory: u32) -> String {
    function_yaml(
        name,
        ROLE,
        &format!("source: {{git: '{remote}', ref: {git_ref}, path: fn}}"),
    )
    .replace("  zipFile: fn.zip\n", "")
    .replace("memory: 128", &format!("memory: {memory}"))
}

fn target() -> crate::DeployTarget {
    crate::DeployTarget {
        git: GitSettings {
            allow_env: Vec::new(),
            allow_file_remotes: true,
        },
        ..moto_target("Service")
    }
}

#[tokio::test]
async fn a_git_source_deploys_twice_with_identical_zips_and_a_missing_ref_fails_naming_it() {
    ensure_role().await;
    let root = tempfile::tempdir().unwrap();
    let remote = code_repo(root.path());
    let jobs = Arc::new(Waiting {
        jobs: ProcessJobs::new(root.path().join("jobs")).unwrap(),
        started: Default::default(),
    });
    let name = unique("git");
    let lambda = lambda_client().await;
    let mut shas = Vec::new();
    for (digit, memory) in [('a', 128), ('b', 256)] {
        let commit = Commit::with_files(
            digit,
            &app_config(""),
            &[(
                "function.yaml",
                source_manifest(&name, &remote, "v1", memory).as_bytes(),
            )],
        );
        let mut run = Run::plan(plugin(target()), &commit, None).with_jobs(jobs.clone());
        let commits = Commits {
            target: &commit,
            running: None,
        };
        // Once: the first step only starts the job, so its repeat (which finds the job
        // ended) would rightly do more; the repeat after the stage ended is checked below.
        run.run_all(&commits, Delivery::Once).await;
        assert_eq!(
            run.deployment.status,
            DeploymentStatus::Success,
            "{:#?}",
            run.logs
        );
        let versions = |name: String| {
            let lambda = lambda.clone();
            async move {
                let out = lambda
                    .list_versions_by_function()
                    .function_name(name)
                    .send();
                out.await.expect("versions").versions().len()
            }
        };
        let before = versions(name.clone()).await;
        let again = run
            .try_step(0, &commit.app_dir())
            .await
            .expect("the step again");
        assert_eq!(
            again,
            gannet_sdk::plugin::StepOutcome::Done(gannet_sdk::plugin::StageResult::Success)
        );
        assert_eq!(
            versions(name.clone()).await,
            before,
            "nothing published again"
        );
        let f = lambda
            .get_function()
            .function_name(&name)
            .send()
            .await
            .unwrap();
        let config = f.configuration().unwrap();
        assert_eq!(config.memory_size(), Some(memory as i32));
        shas.push(config.code_sha256().unwrap().to_owned());
        let logs = run
            .logs
            .values()
            .flatten()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n");
        assert!(logs.contains(&format!("{remote}//fn v1 sha256:")), "{logs}");
    }
    assert_eq!(shas[0], shas[1], "the same tree zips to the same bytes");
    assert_eq!(
        jobs.started.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "one fetch per deployment, though a step came again"
    );

    // A ref the remote lacks: the stage fails naming it, and nothing is deployed.
    let missing = unique("gitmissing");
    let commit = Commit::with_files(
        'c',
        &app_config(""),
        &[(
            "function.yaml",
            source_manifest(&missing, &remote, "v9", 128).as_bytes(),
        )],
    );
    let mut run = Run::plan(plugin(target()), &commit, None).with_jobs(jobs.clone());
    run.run_all(
        &Commits {
            target: &commit,
            running: None,
        },
        Delivery::Once,
    )
    .await;
    assert_eq!(run.deployment.status, DeploymentStatus::Failure);
    let sync = &run.deployment.stages[0];
    assert_eq!(sync.status, gannet_domain::deployment::StageStatus::Failure);
    let reason = &sync.status_reason;
    assert!(reason.contains("cannot fetch ref v9 from"), "{reason}");
    assert!(lambda
        .get_function()
        .function_name(&missing)
        .send()
        .await
        .is_err());
}
