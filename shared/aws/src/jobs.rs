//! The AWS job runner: each job is a CodeBuild build of one project the template creates,
//! running with that project's own IAM role (never the stage function's), or with the job's
//! own role when it names one ([`JobSpec::role`], a deploy target's `jobRoleArn`): StartBuild's
//! `serviceRoleOverride`, which the caller may pass only as the stack's `JobTargetRoleArns`
//! allow (`iam:PassRole` to `codebuild.amazonaws.com`).
//!
//! # What a job gets
//!
//! The stage function packs the job as a gzipped tarball (`work/`: the app's directory at the
//! commit; `script`; `env`: the job's environment, `NAME=value` separated by NUL; `in/`: the
//! files of earlier jobs it is given) and puts it at `s3://<bucket>/jobs/<key>/source.tar.gz`.
//! The build's role has no S3 rights at all: the build gets three URLs the stage function
//! presigned for this job alone (`GANNET_JOB_SOURCE_URL`, a GET of its tarball;
//! `GANNET_JOB_OUT_URL` and `GANNET_JOB_EXIT_URL`, PUTs of `jobs/<key>/out.tar` and
//! `jobs/<key>/exit`), fetches the tarball with curl, runs the script with `sh` in `work/` with
//! that environment added to CodeBuild's (the URLs taken out of it), then puts a tar of what
//! the script left in `GANNET_JOB_OUT`, then its exit code, so a job with an exit code has its
//! files in place. A URL names one object: a job cannot read another's tarball nor write
//! another's exit code. No GitHub credential and no gannet secret reaches the build; the
//! bucket's lifecycle rule expires `jobs/` after a week.
//!
//! A job's cache ([`JobSpec::cache`]) is not kept on this runtime yet: the build gets no
//! `GANNET_JOB_CACHE`, so the job does without (Terraform runs `init` from nothing, as
//! before; docs/terraform-init-cache.md has the design of a cache in the jobs bucket).
//!
//! # Once per key
//!
//! `jobs/<key>/build` holds the build's id once it started. A start that finds it does
//! nothing. Otherwise it looks among the project's latest builds for one whose environment
//! names the key (a start that crashed after StartBuild and before the record), whatever role
//! it runs as, and only then starts a build, with the key as StartBuild's idempotency token (which covers two starts at
//! the same moment: CodeBuild returns the same build for 5 minutes).
//!
//! # Output and end
//!
//! The build logs to CloudWatch Logs (`<log group>`, stream `<key>/<build uuid>`); a poll reads
//! the events after its cursor (`nextForwardToken`), leaving out CodeBuild's own
//! `[Container]` lines. The end comes from the build's status: SUCCEEDED or FAILED with the
//! exit code the job wrote; FAILED without one (the source could not be fetched, ...) is lost,
//! with the failed phase's message; STOPPED is cancelled; TIMED_OUT timed out; FAULT lost.
//! An end is reported only once a poll finds no newer log events, since CloudWatch may get the
//! last lines a moment after the build ends.

use std::io::Write as _;
use std::path::Path;

use async_trait::async_trait;
use aws_sdk_codebuild::error::ProvideErrorMetadata as _;
use aws_sdk_codebuild::types::{
    Build, CloudWatchLogsConfig, EnvironmentVariable, EnvironmentVariableType, LogsConfig,
    LogsConfigStatusType, SortOrderType, StatusType,
};
use aws_sdk_s3::presigning::PresigningConfig;
use aws_sdk_s3::primitives::ByteStream;
use gannet_domain::GoDuration;
use gannet_sdk::jobs::{
    self, JobEnd, JobError, JobInput, JobKey, JobPoll, JobRoleArn, JobRunner, JobSpec,
    MAX_OUTPUT_BYTES,
};

/// The environment variable that names a build's job.
pub const JOB_VARIABLE: &str = "GANNET_JOB";
/// The environment variables that hand the build its job's presigned URLs.
pub const SOURCE_URL_VARIABLE: &str = "GANNET_JOB_SOURCE_URL";
pub const OUT_URL_VARIABLE: &str = "GANNET_JOB_OUT_URL";
pub const EXIT_URL_VARIABLE: &str = "GANNET_JOB_EXIT_URL";
/// How long a build may wait in CodeBuild's queue (its default, which the template keeps).
const QUEUED_MINUTES: u64 = 480;
/// S3's bound on a presigned URL's life (SigV4).
const MAX_URL_LIFE: GoDuration = GoDuration::from_secs(7 * 24 * 3600);
/// How many of the project's latest builds a start looks through for its key.
const RECENT_BUILDS: usize = 100;
/// The most log events one poll reads.
const EVENTS_PER_POLL: i32 = 5_000;
/// CodeBuild's bounds on a build's timeout, in minutes.
const TIMEOUT_MINUTES: (u64, u64) = (5, 2_160);

/// The build's commands: fetch the job through its URLs, run its script with its environment
/// (each line it writes to stderr marked with [`gannet_domain::ports::STDERR_MARK`], `\036`,
/// as the embedded runner marks them), keep its files and record the code. The phase's one command is one shell; it runs in `bash`
/// so the NUL-separated `env` reads. The URLs are kept in shell variables and taken out of
/// the environment before the job's own is read, so neither the job's environment nor its
/// script sees (or replaces) them; curl never prints a URL.
pub(crate) const BUILDSPEC: &str = r#"version: 0.2
env:
  shell: bash
phases:
  build:
    commands:
      - |
        set -u
        source_url=$GANNET_JOB_SOURCE_URL out_url=$GANNET_JOB_OUT_URL exit_url=$GANNET_JOB_EXIT_URL
        unset GANNET_JOB_SOURCE_URL GANNET_JOB_OUT_URL GANNET_JOB_EXIT_URL
        get() { curl --fail --silent --show-error --retry 3 --output "$2" "$1"; }
        put() { curl --fail --silent --show-error --retry 3 --upload-file "$2" --output /dev/null "$1"; }
        job=$(mktemp -d) && cd "$job" || exit 125
        { get "$source_url" source.tar.gz && tar -xzf source.tar.gz && rm source.tar.gz; } || { echo "gannet: cannot fetch job $GANNET_JOB" >&2; exit 125; }
        mkdir -p in out
        while IFS= read -r -d '' kv; do export "$kv"; done < env
        export GANNET_JOB_IN="$job/in" GANNET_JOB_OUT="$job/out"
        (cd work && sh ../script </dev/null) 2> >(trap '' TERM; while IFS= read -r l || [ -n "$l" ]; do printf '\036%s\n' "$l"; done >&2)
        code=$?
        [ -z "${!-}" ] || wait "$!" 2>/dev/null
        { tar -cf out.tar -C out . && put "$out_url" out.tar; } || { echo "gannet: cannot keep job $GANNET_JOB's files" >&2; code=125; }
        printf '%s\n' "$code" >exit-code
        put "$exit_url" exit-code || echo "gannet: cannot record job $GANNET_JOB's exit code" >&2
        exit "$code"
"#;

/// The buildspec every job's build runs (CodeBuild's `buildspecOverride`): tests that play a
/// build run its one command block with bash.
pub fn buildspec() -> &'static str {
    BUILDSPEC
}

/// Where the jobs run: the template's CodeBuild project, bucket and log group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobsConfig {
    pub project: String,
    pub bucket: String,
    pub log_group: String,
}

/// The [`JobRunner`] on CodeBuild, S3 and CloudWatch Logs.
#[derive(Clone, Debug)]
pub struct CodeBuildJobs {
    codebuild: aws_sdk_codebuild::Client,
    s3: aws_sdk_s3::Client,
    logs: aws_sdk_cloudwatchlogs::Client,
    config: JobsConfig,
}

fn unavailable<E>(operation: &'static str) -> impl FnOnce(E) -> JobError
where
    E: std::error::Error + Send + Sync + 'static,
{
    move |source| JobError::Unavailable {
        operation,
        source: source.into(),
    }
}

impl CodeBuildJobs {
    pub fn new(
        codebuild: aws_sdk_codebuild::Client,
        s3: aws_sdk_s3::Client,
        logs: aws_sdk_cloudwatchlogs::Client,
        config: JobsConfig,
    ) -> Self {
        Self {
            codebuild,
            s3,
            logs,
            config,
        }
    }

    fn object(key: &JobKey, name: &str) -> String {
        format!("jobs/{key}/{name}")
    }

    /// The text of `jobs/<key>/<name>`, `None` when it does not exist.
    async fn read(&self, key: &JobKey, name: &str) -> Result<Option<String>, JobError> {
        let bytes = self
            .get(
                key,
                name,
                MAX_OUTPUT_BYTES,
                "reading the job's record from S3",
            )
            .await?;
        Ok(bytes.map(|b| String::from_utf8_lossy(&b).trim().to_owned()))
    }

    /// The bytes of `jobs/<key>/<name>`, `None` when it does not exist; an object over `max`
    /// bytes is refused before it is read.
    async fn get(
        &self,
        key: &JobKey,
        name: &str,
        max: u64,
        operation: &'static str,
    ) -> Result<Option<Vec<u8>>, JobError> {
        let got = self
            .s3
            .get_object()
            .bucket(&self.config.bucket)
            .key(Self::object(key, name))
            .send()
            .await;
        let object = match got {
            Ok(object) => object,
            Err(err) if err.as_service_error().is_some_and(|e| e.is_no_such_key()) => {
                return Ok(None)
            }
            Err(err) => return Err(unavailable(operation)(err)),
        };
        let size = u64::try_from(object.content_length.unwrap_or(0)).unwrap_or(0);
        if size > max {
            return Err(JobError::Refused(format!(
                "the job's {name} has {size} bytes, over the {max} read back"
            )));
        }
        let bytes = object
            .body
            .collect()
            .await
            .map_err(unavailable(operation))?
            .into_bytes();
        Ok(Some(bytes.to_vec()))
    }

    async fn write(&self, key: &JobKey, name: &str, body: Vec<u8>) -> Result<(), JobError> {
        self.s3
            .put_object()
            .bucket(&self.config.bucket)
            .key(Self::object(key, name))
            .body(ByteStream::from(body))
            .send()
            .await
            .map_err(unavailable("writing the job to S3"))?;
        Ok(())
    }

    /// Each input's name and bytes, read from the files its job left (`jobs/<job>/out.tar`).
    async fn read_inputs(
        &self,
        inputs: &[JobInput<'_>],
    ) -> Result<Vec<(String, Vec<u8>)>, JobError> {
        let mut files = Vec::with_capacity(inputs.len());
        for input in inputs {
            let Some(bytes) = self.output(input.job, input.file).await? else {
                return Err(JobError::Refused(format!(
                    "job {} left no file {} (it failed before writing it, or the bucket's \
                     lifecycle rule expired it)",
                    input.job, input.file
                )));
            };
            files.push((input.file.to_owned(), bytes));
        }
        Ok(files)
    }

    /// A URL that lets its holder `method` (GET or PUT) `jobs/<key>/<name>` and nothing else,
    /// for `life`.
    async fn presign(
        &self,
        method: UrlMethod,
        key: &JobKey,
        name: &str,
        life: GoDuration,
    ) -> Result<String, JobError> {
        let config = PresigningConfig::expires_in(life.get())
            .map_err(|e| JobError::Refused(format!("a job URL's life of {life}: {e}")))?;
        let object = Self::object(key, name);
        let presigned = match method {
            UrlMethod::Get => self
                .s3
                .get_object()
                .bucket(&self.config.bucket)
                .key(object)
                .presigned(config)
                .await
                .map_err(unavailable("presigning the job's URLs"))?,
            UrlMethod::Put => self
                .s3
                .put_object()
                .bucket(&self.config.bucket)
                .key(object)
                .presigned(config)
                .await
                .map_err(unavailable("presigning the job's URLs"))?,
        };
        Ok(presigned.uri().to_owned())
    }

    /// A build of the project whose environment names `key`, among the latest ones.
    async fn find_build(&self, key: &JobKey) -> Result<Option<String>, JobError> {
        let ids = self
            .codebuild
            .list_builds_for_project()
            .project_name(&self.config.project)
            .sort_order(SortOrderType::Descending)
            .send()
            .await
            .map_err(unavailable("listing the project's builds"))?
            .ids
            .unwrap_or_default();
        for chunk in ids[..ids.len().min(RECENT_BUILDS)].chunks(100) {
            let builds = self.builds(chunk.to_vec()).await?;
            if let Some(build) = builds.iter().find(|b| job_of(b) == Some(key.as_str())) {
                return Ok(build.id.clone());
            }
        }
        Ok(None)
    }

    async fn builds(&self, ids: Vec<String>) -> Result<Vec<Build>, JobError> {
        Ok(self
            .codebuild
            .batch_get_builds()
            .set_ids(Some(ids))
            .send()
            .await
            .map_err(unavailable("reading builds"))?
            .builds
            .unwrap_or_default())
    }

    async fn start_build(
        &self,
        key: &JobKey,
        timeout: GoDuration,
        role: Option<&JobRoleArn>,
    ) -> Result<String, JobError> {
        let life = url_life(timeout);
        let urls = [
            (
                SOURCE_URL_VARIABLE,
                self.presign(UrlMethod::Get, key, "source.tar.gz", life)
                    .await?,
            ),
            (
                OUT_URL_VARIABLE,
                self.presign(UrlMethod::Put, key, "out.tar", life).await?,
            ),
            (
                EXIT_URL_VARIABLE,
                self.presign(UrlMethod::Put, key, "exit", life).await?,
            ),
        ];
        let variable = |name: &str, value: &str| {
            EnvironmentVariable::builder()
                .name(name)
                .value(value)
                .r#type(EnvironmentVariableType::Plaintext)
                .build()
                .map_err(|e| JobError::Refused(format!("environment variable {name}: {e}")))
        };
        let logs = LogsConfig::builder()
            .cloud_watch_logs(
                CloudWatchLogsConfig::builder()
                    .status(LogsConfigStatusType::Enabled)
                    .group_name(&self.config.log_group)
                    .stream_name(key.as_str())
                    .build()
                    .map_err(|e| JobError::Refused(format!("logs configuration: {e}")))?,
            )
            .build();
        let mut start = self
            .codebuild
            .start_build()
            .project_name(&self.config.project)
            .idempotency_token(key.as_str())
            .buildspec_override(BUILDSPEC)
            .environment_variables_override(variable(JOB_VARIABLE, key.as_str())?);
        for (name, url) in &urls {
            start = start.environment_variables_override(variable(name, url)?);
        }
        let started = start
            .timeout_in_minutes_override(timeout_minutes(timeout))
            .logs_config_override(logs)
            .set_service_role_override(role.map(|r| r.as_str().to_owned()))
            .send()
            .await;
        let started = match (started, role) {
            // Not passed to CodeBuild: the stack's JobTargetRoleArns lacks it. Retrying will
            // not help.
            (Err(err), Some(role))
                if err
                    .as_service_error()
                    .and_then(|e| e.code())
                    .is_some_and(|code| code.starts_with("AccessDenied")) =>
            {
                let said = err
                    .as_service_error()
                    .and_then(|e| e.message())
                    .unwrap_or("");
                return Err(JobError::Refused(format!(
                    "CodeBuild refused to start job {key} as role {role} ({said}): list the \
                     role in the stack's JobTargetRoleArns (the CDK construct takes it from \
                     the deploy target's jobRoleArn), which lets the stage and drift functions \
                     pass it to CodeBuild"
                )));
            }
            (started, _) => started.map_err(unavailable("starting the job's build"))?,
        };
        started
            .build_value
            .and_then(|b| b.id)
            .ok_or_else(|| JobError::Unavailable {
                operation: "starting the job's build",
                source: "CodeBuild returned no build id".into(),
            })
    }

    /// Log lines after `cursor`, the next cursor, and whether any event was read.
    async fn read_logs(
        &self,
        build: &Build,
        key: &JobKey,
        cursor: &str,
    ) -> Result<(Vec<String>, String, bool), JobError> {
        let (group, stream) = log_stream(build, key, &self.config.log_group);
        let mut request = self
            .logs
            .get_log_events()
            .log_group_name(group)
            .log_stream_name(stream)
            .start_from_head(true)
            .limit(EVENTS_PER_POLL);
        if !cursor.is_empty() {
            request = request.next_token(cursor);
        }
        let page = match request.send().await {
            Ok(page) => page,
            // The build has not written its first line yet.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_resource_not_found_exception()) =>
            {
                return Ok((Vec::new(), cursor.to_owned(), false))
            }
            Err(err) => return Err(unavailable("reading the job's log")(err)),
        };
        let events = page.events.unwrap_or_default();
        let read = !events.is_empty();
        let lines = events
            .into_iter()
            .filter_map(|e| e.message)
            .flat_map(|m| {
                m.trim_end_matches(['\n', '\r'])
                    .split('\n')
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .filter(|l| !l.starts_with("[Container] "))
            .collect();
        let next = page.next_forward_token.unwrap_or_else(|| cursor.to_owned());
        Ok((lines, next, read))
    }

    /// The end of a finished build, `None` while it runs.
    async fn end_of(&self, build: &Build, key: &JobKey) -> Result<Option<JobEnd>, JobError> {
        let timeout = GoDuration::from_secs(
            u64::try_from(build.timeout_in_minutes.unwrap_or_default()).unwrap_or(0) * 60,
        );
        Ok(
            match build.build_status.clone().unwrap_or(StatusType::InProgress) {
                StatusType::InProgress => None,
                StatusType::Stopped => Some(JobEnd::Cancelled),
                StatusType::TimedOut => Some(JobEnd::TimedOut { after: timeout }),
                StatusType::Succeeded | StatusType::Failed => {
                    let code = self.read(key, "exit").await?;
                    Some(match code.and_then(|c| c.parse().ok()) {
                        Some(code) => JobEnd::Exited(code),
                        None if build.build_status == Some(StatusType::Succeeded) => {
                            JobEnd::Exited(0)
                        }
                        None => JobEnd::Lost {
                            reason: failed_phase(build),
                        },
                    })
                }
                other => Some(JobEnd::Lost {
                    reason: format!(
                        "its build ended {}: {}",
                        other.as_str(),
                        failed_phase(build)
                    ),
                }),
            },
        )
    }
}

#[async_trait]
impl JobRunner for CodeBuildJobs {
    async fn start(&self, spec: JobSpec<'_>) -> Result<(), JobError> {
        if self.read(spec.key, "build").await?.is_some() {
            return Ok(());
        }
        let inputs = self.read_inputs(spec.inputs).await?;
        let (dir, script, env) = (
            spec.dir.to_owned(),
            spec.script.to_owned(),
            spec.env.to_vec(),
        );
        let source = tokio::task::spawn_blocking(move || pack(&dir, &script, &env, &inputs))
            .await
            .map_err(unavailable("packing the job"))??;
        self.write(spec.key, "source.tar.gz", source).await?;
        let id = match self.find_build(spec.key).await? {
            Some(id) => id,
            None => self.start_build(spec.key, spec.timeout, spec.role).await?,
        };
        self.write(spec.key, "build", id.into_bytes()).await
    }

    async fn poll(&self, key: &JobKey, cursor: &str) -> Result<JobPoll, JobError> {
        let id = self
            .read(key, "build")
            .await?
            .ok_or_else(|| JobError::Unknown(key.clone()))?;
        let Some(build) = self.builds(vec![id.clone()]).await?.into_iter().next() else {
            return Ok(JobPoll {
                lines: Vec::new(),
                cursor: cursor.to_owned(),
                end: Some(JobEnd::Lost {
                    reason: format!("CodeBuild no longer knows its build {id}"),
                }),
            });
        };
        let (lines, cursor, read) = self.read_logs(&build, key, cursor).await?;
        let end = match self.end_of(&build, key).await? {
            // CloudWatch may get the last lines after the build ends: end once none come.
            Some(_) if read => None,
            end => end,
        };
        Ok(JobPoll { lines, cursor, end })
    }

    async fn cancel(&self, key: &JobKey) -> Result<(), JobError> {
        let Some(id) = self.read(key, "build").await? else {
            return Ok(());
        };
        match self.codebuild.stop_build().id(id).send().await {
            Ok(_) => Ok(()),
            // It has ended already.
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_invalid_input_exception()) =>
            {
                Ok(())
            }
            Err(err) => Err(unavailable("stopping the job's build")(err)),
        }
    }

    async fn output(&self, key: &JobKey, name: &str) -> Result<Option<Vec<u8>>, JobError> {
        if !jobs::valid_file_name(name) {
            return Err(JobError::Refused(format!(
                "{name:?} is not a job file's name"
            )));
        }
        let Some(tar) = self
            .get(
                key,
                "out.tar",
                MAX_OUTPUT_BYTES,
                "reading the files the job left",
            )
            .await?
        else {
            return Ok(None);
        };
        file_in_tar(&tar, name).map_err(|e| {
            JobError::Refused(format!(
                "the files job {key} left are not a tar archive: {e}"
            ))
        })
    }

    /// A build takes half a minute to start; polls come every 5 s, then every 15 s.
    fn poll_interval(&self, running_for: GoDuration) -> GoDuration {
        if running_for < GoDuration::from_secs(120) {
            GoDuration::from_secs(5)
        } else {
            GoDuration::from_secs(15)
        }
    }
}

/// The job key a build's environment names.
fn job_of(build: &Build) -> Option<&str> {
    build
        .environment
        .as_ref()?
        .environment_variables
        .as_deref()?
        .iter()
        .find(|v| v.name == JOB_VARIABLE)
        .map(|v| v.value.as_str())
}

/// The log group and stream of a build: as CodeBuild reports them, else as it names them
/// (`<stream prefix>/<build uuid>`).
fn log_stream(build: &Build, key: &JobKey, default_group: &str) -> (String, String) {
    let logs = build.logs.as_ref();
    let group = logs
        .and_then(|l| l.group_name.clone())
        .unwrap_or_else(|| default_group.to_owned());
    let stream = logs.and_then(|l| l.stream_name.clone()).unwrap_or_else(|| {
        let uuid = build
            .id
            .as_deref()
            .and_then(|id| id.rsplit_once(':'))
            .map_or("", |(_, uuid)| uuid);
        format!("{key}/{uuid}")
    });
    (group, stream)
}

/// What the failed phase says, for a lost job's reason.
fn failed_phase(build: &Build) -> String {
    let failed = build
        .phases
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|p| {
            matches!(
                p.phase_status,
                Some(StatusType::Failed | StatusType::Fault | StatusType::TimedOut)
            )
        });
    let Some(phase) = failed else {
        return "its build failed without recording an exit code".into();
    };
    let kind = phase.phase_type.as_ref().map_or("?", |t| t.as_str());
    let context = phase
        .contexts
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            format!(
                "{}: {}",
                c.status_code.as_deref().unwrap_or_default(),
                c.message.as_deref().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    format!("its build failed in phase {kind}: {context}")
}

/// How a job's URL lets its holder at its object.
#[derive(Clone, Copy, Debug)]
enum UrlMethod {
    Get,
    Put,
}

/// How long a job's URLs work: while the build may wait in the queue and run, and ten minutes
/// more, within S3's bound. (S3 also ends a URL when the credentials that signed it expire.)
fn url_life(timeout: GoDuration) -> GoDuration {
    let minutes = QUEUED_MINUTES + u64::try_from(timeout_minutes(timeout)).unwrap_or(0) + 10;
    GoDuration::from_secs(minutes * 60).min(MAX_URL_LIFE)
}

/// The regular file `name` at the top of the tar `archive` (`name` or `./name`).
fn file_in_tar(archive: &[u8], name: &str) -> std::io::Result<Option<Vec<u8>>> {
    let mut archive = tar::Archive::new(archive);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let path = path.strip_prefix(".").unwrap_or(&path);
        if entry.header().entry_type().is_file() && path == Path::new(name) {
            let mut body = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut body)?;
            return Ok(Some(body));
        }
    }
    Ok(None)
}

/// A timeout as CodeBuild takes it: whole minutes, rounded up, within its bounds.
fn timeout_minutes(timeout: GoDuration) -> i32 {
    let minutes = timeout.as_millis().div_ceil(60_000);
    let minutes = minutes.clamp(TIMEOUT_MINUTES.0, TIMEOUT_MINUTES.1);
    i32::try_from(minutes).unwrap_or(i32::MAX)
}

/// The job as a gzipped tarball: `work/` (the directory), `script`, `env`, `in/<file>`.
fn pack(
    dir: &Path,
    script: &str,
    env: &[(String, String)],
    inputs: &[(String, Vec<u8>)],
) -> Result<Vec<u8>, JobError> {
    let refused = |e: std::io::Error| {
        JobError::Refused(format!("cannot pack {} for the job: {e}", dir.display()))
    };
    if !dir.is_dir() {
        return Err(refused(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "not a directory",
        )));
    }
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.follow_symlinks(false);
    tar.append_dir_all("work", dir).map_err(refused)?;
    let mut env_file = Vec::new();
    for (name, value) in env {
        env_file.extend_from_slice(name.as_bytes());
        env_file.push(b'=');
        env_file.extend_from_slice(value.as_bytes());
        env_file.push(0);
    }
    let files = [
        ("script".to_owned(), script.as_bytes()),
        ("env".to_owned(), &env_file[..]),
    ]
    .into_iter()
    .chain(
        inputs
            .iter()
            .map(|(name, body)| (format!("in/{name}"), &body[..])),
    );
    for (name, body) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(body.len() as u64);
        header.set_mode(0o600);
        header.set_cksum();
        tar.append_data(&mut header, name, body).map_err(refused)?;
    }
    let mut gz = tar.into_inner().map_err(refused)?;
    gz.flush().map_err(refused)?;
    gz.finish().map_err(refused)
}

#[cfg(test)]
mod iam_tests;
#[cfg(test)]
mod tests;
