//! The AWS job runner: each job is a CodeBuild build of one project the template creates,
//! running with that project's own IAM role (never the stage function's).
//!
//! # What a job gets
//!
//! The stage function packs the job as a gzipped tarball (`work/`: the app's directory at the
//! commit; `script`; `env`: the job's environment, `NAME=value` separated by NUL) and puts it
//! at `s3://<bucket>/jobs/<key>/source.tar.gz`. The build, given only `GANNET_JOB=<key>` and
//! the bucket, downloads it with its role, runs the script with `sh` in `work/` with that
//! environment added to CodeBuild's, and puts the script's exit code at `jobs/<key>/exit`.
//! No GitHub credential and no gannet secret reaches the build; the bucket's lifecycle rule
//! expires `jobs/` after a week.
//!
//! Files: the files of earlier jobs a job is given are copied (in S3) to `jobs/<key>/in/`
//! before the build starts, and the build downloads them into the directory named by
//! `GANNET_JOB_IN`; what the script leaves in `GANNET_JOB_OUT` is uploaded to
//! `jobs/<key>/out/` before the exit code is written, so a job with an exit code has its
//! files in place.
//!
//! # Once per key
//!
//! `jobs/<key>/build` holds the build's id once it started. A start that finds it does
//! nothing. Otherwise it looks among the project's latest builds for one whose environment
//! names the key (a start that crashed after StartBuild and before the record), and only then
//! starts a build, with the key as StartBuild's idempotency token (which covers two starts at
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
use aws_sdk_codebuild::types::{
    Build, CloudWatchLogsConfig, EnvironmentVariable, EnvironmentVariableType, LogsConfig,
    LogsConfigStatusType, SortOrderType, StatusType,
};
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use gannet_core::jobs::{
    self, JobEnd, JobError, JobInput, JobKey, JobPoll, JobRunner, JobSpec, MAX_OUTPUT_BYTES,
};
use gannet_core::GoDuration;

/// The environment variable that names a build's job.
pub const JOB_VARIABLE: &str = "GANNET_JOB";
/// The environment variable that names the jobs bucket to the build.
pub const BUCKET_VARIABLE: &str = "GANNET_JOBS_BUCKET";
/// How many of the project's latest builds a start looks through for its key.
const RECENT_BUILDS: usize = 100;
/// The most log events one poll reads.
const EVENTS_PER_POLL: i32 = 5_000;
/// CodeBuild's bounds on a build's timeout, in minutes.
const TIMEOUT_MINUTES: (u64, u64) = (5, 2_160);

/// The build's commands: fetch the job, run its script with its environment, record the code.
/// Each phase line is one shell; all of it runs in `bash` so the NUL-separated `env` reads.
const BUILDSPEC: &str = r#"version: 0.2
env:
  shell: bash
phases:
  build:
    commands:
      - |
        set -u
        job="s3://$GANNET_JOBS_BUCKET/jobs/$GANNET_JOB"
        mkdir -p /tmp/gannet-job && cd /tmp/gannet-job
        aws s3 cp --only-show-errors "$job/source.tar.gz" - | tar -xzf - || { echo "gannet: cannot fetch the job from $job" >&2; exit 125; }
        mkdir -p in out
        aws s3 cp --only-show-errors --recursive "$job/in/" in/ || { echo "gannet: cannot fetch the job's files from $job/in/" >&2; exit 125; }
        while IFS= read -r -d '' kv; do export "$kv"; done < env
        export GANNET_JOB_IN=/tmp/gannet-job/in GANNET_JOB_OUT=/tmp/gannet-job/out
        cd work
        sh ../script </dev/null
        code=$?
        aws s3 cp --only-show-errors --recursive /tmp/gannet-job/out/ "$job/out/" || { echo "gannet: cannot keep the job's files at $job/out/" >&2; code=125; }
        echo "$code" | aws s3 cp --only-show-errors - "$job/exit"
        exit "$code"
"#;

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

    /// Copies each input (`jobs/<job>/out/<file>`) to `jobs/<key>/in/<file>`.
    async fn give_inputs(&self, key: &JobKey, inputs: &[JobInput<'_>]) -> Result<(), JobError> {
        for input in inputs {
            if !jobs::valid_file_name(input.file) {
                return Err(JobError::Refused(format!(
                    "{:?} is not a job file's name",
                    input.file
                )));
            }
            let from = Self::object(input.job, &format!("out/{}", input.file));
            let copied = self
                .s3
                .copy_object()
                .bucket(&self.config.bucket)
                .copy_source(format!("{}/{from}", self.config.bucket))
                .key(Self::object(key, &format!("in/{}", input.file)))
                .send()
                .await;
            match copied {
                Ok(_) => {}
                // CopyObject's model has no NoSuchKey: it comes as an unmodelled code.
                Err(err)
                    if err.as_service_error().and_then(ProvideErrorMetadata::code)
                        == Some("NoSuchKey") =>
                {
                    return Err(JobError::Refused(format!(
                        "job {} left no file {} (it failed before writing it, or the bucket's \
                         lifecycle rule expired it)",
                        input.job, input.file
                    )))
                }
                Err(err) => return Err(unavailable("giving the job its files")(err)),
            }
        }
        Ok(())
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

    async fn start_build(&self, key: &JobKey, timeout: GoDuration) -> Result<String, JobError> {
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
        let started = self
            .codebuild
            .start_build()
            .project_name(&self.config.project)
            .idempotency_token(key.as_str())
            .buildspec_override(BUILDSPEC)
            .environment_variables_override(variable(JOB_VARIABLE, key.as_str())?)
            .environment_variables_override(variable(BUCKET_VARIABLE, &self.config.bucket)?)
            .timeout_in_minutes_override(timeout_minutes(timeout))
            .logs_config_override(logs)
            .send()
            .await
            .map_err(unavailable("starting the job's build"))?;
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
        let (dir, script, env) = (
            spec.dir.to_owned(),
            spec.script.to_owned(),
            spec.env.to_vec(),
        );
        let source = tokio::task::spawn_blocking(move || pack(&dir, &script, &env))
            .await
            .map_err(unavailable("packing the job"))??;
        self.write(spec.key, "source.tar.gz", source).await?;
        self.give_inputs(spec.key, spec.inputs).await?;
        let id = match self.find_build(spec.key).await? {
            Some(id) => id,
            None => self.start_build(spec.key, spec.timeout).await?,
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
        self.get(
            key,
            &format!("out/{name}"),
            MAX_OUTPUT_BYTES,
            "reading a file the job left",
        )
        .await
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

/// A timeout as CodeBuild takes it: whole minutes, rounded up, within its bounds.
fn timeout_minutes(timeout: GoDuration) -> i32 {
    let minutes = timeout.as_millis().div_ceil(60_000);
    let minutes = minutes.clamp(TIMEOUT_MINUTES.0, TIMEOUT_MINUTES.1);
    i32::try_from(minutes).unwrap_or(i32::MAX)
}

/// The job as a gzipped tarball: `work/` (the directory), `script`, `env`.
fn pack(dir: &Path, script: &str, env: &[(String, String)]) -> Result<Vec<u8>, JobError> {
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
    for (name, body) in [("script", script.as_bytes()), ("env", &env_file)] {
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
