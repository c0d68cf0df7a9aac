//! The job runner port: a command that outlives the step that starts it (a script, a
//! `terraform apply`).
//!
//! A step starts a job and returns `Continue`; later steps poll it, copying its new output to
//! the stage log, until it finishes. A job is named by a [`JobKey`] derived from the
//! deployment, the stage and the attempt, so starting the same key again (a redelivered
//! message, a step that crashed after starting) finds the job already started and never starts
//! a second copy. Adapters: child processes that survive a restart of `gannet up`
//! (`gannet-embedded`), and CodeBuild builds on AWS (`gannet-aws`).
//!
//! [`Follow`] is the part every stage that runs a job shares: the key and the output cursor in
//! stage metadata, the output copied to the stage log (capped), the end mapped to a result.

use std::fmt;
use std::path::Path;

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use crate::plugin::{StepError, StepIo};
use gannet_domain::duration::{GoDuration, Millis};
use gannet_domain::ids::{DeploymentId, StageId};
use gannet_domain::ports::{BoxError, Metadata};

/// A job's name: the same deployment, stage and attempt always give the same key.
///
/// Readable (`<deployment>-<stage>-<attempt>`, cut and reduced to `[A-Za-z0-9-]`) with a hash
/// of the exact parts at the end, so two stages whose ids differ only in dropped characters
/// still get different keys. At most 96 characters; safe as a file name and a tag value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobKey(String);

impl JobKey {
    pub fn new(deployment: &DeploymentId, stage: &StageId, attempt: u32) -> Self {
        Self::of(&[
            (deployment.as_str(), 40),
            (stage.as_str(), 24),
            (&attempt.to_string(), 10),
        ])
    }

    /// A key made of `parts`, each shown cut to its length (the whole key is at most 96
    /// characters when the lengths add up to at most 70), then a hash of all of them: for a
    /// job that belongs to no stage, such as a drift check.
    pub fn of(parts: &[(&str, usize)]) -> Self {
        let exact: Vec<&str> = parts.iter().map(|(p, _)| *p).collect();
        let digest = Sha256::digest(exact.join("\n"));
        let mut key = String::new();
        for (part, max) in parts {
            key.extend(
                part.chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                    .take(*max),
            );
            key.push('-');
        }
        key.push_str(&hex::encode(digest)[..12]);
        Self(key)
    }

    /// A key as stored (stage metadata); `None` unless it has a key's shape.
    pub fn parse(stored: &str) -> Option<Self> {
        let ok = !stored.is_empty()
            && stored.len() <= 96
            && stored
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        ok.then(|| Self(stored.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The directory a job writes the files it leaves behind to, named by this environment
/// variable: what it writes there is kept with the job ([`JobRunner::output`]).
pub const OUT_ENV: &str = "GANNET_JOB_OUT";
/// The directory holding the files a job was given ([`JobSpec::inputs`]), by this variable.
pub const IN_ENV: &str = "GANNET_JOB_IN";
/// A file a job leaves is read back up to this size; a larger one is refused.
pub const MAX_OUTPUT_BYTES: u64 = 64 * 1024 * 1024;

/// A file an earlier job left ([`OUT_ENV`]), given to a new one in its [`IN_ENV`] directory
/// under the same name: how a plan made by one job reaches the job that applies it.
#[derive(Clone, Copy, Debug)]
pub struct JobInput<'a> {
    pub job: &'a JobKey,
    pub file: &'a str,
}

/// True when `name` may name a file a job leaves: one plain file name (letters, digits, `.`,
/// `_`, `-`; not starting with `.`; at most 100 characters).
pub fn valid_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// An IAM role a job runs as instead of its runner's own: `arn:<partition>:iam::<12 digits>:role/<name>`
/// (a name may have a path, `role/deploy/prod`), such as a Terraform deploy target's
/// `jobRoleArn`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct JobRoleArn(String);

impl JobRoleArn {
    pub fn parse(text: &str) -> Result<Self, JobRoleArnError> {
        let bad = || JobRoleArnError(text.to_owned());
        let rest = text.strip_prefix("arn:").ok_or_else(bad)?;
        let (partition, rest) = rest.split_once(":iam::").ok_or_else(bad)?;
        let (account, name) = rest.split_once(":role/").ok_or_else(bad)?;
        let partition_ok = partition == "aws"
            || partition.strip_prefix("aws-").is_some_and(|p| {
                !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c == '-')
            });
        let account_ok = account.len() == 12 && account.chars().all(|c| c.is_ascii_digit());
        // IAM's characters for a role's path and name.
        let name_ok = !name.is_empty()
            && !name.ends_with('/')
            && name.chars().all(|c| {
                c.is_ascii_alphanumeric()
                    || matches!(c, '+' | '=' | ',' | '.' | '@' | '_' | '-' | '/')
            });
        if partition_ok && account_ok && name_ok {
            Ok(Self(text.to_owned()))
        } else {
            Err(bad())
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for JobRoleArn {
    type Error = JobRoleArnError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        Self::parse(&text)
    }
}

impl fmt::Display for JobRoleArn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A text that is not an IAM role's ARN.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an IAM role ARN such as arn:aws:iam::123456789012:role/deployer")]
pub struct JobRoleArnError(String);

/// Whether a runtime's job runner can run a job as a role of its own ([`JobSpec::role`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JobRoles {
    /// Jobs run as the runner's own processes (`gannet up`): a setting that names a job role
    /// is refused.
    #[default]
    Refused,
    /// Each job may run as its own IAM role: a CodeBuild build's service role (the AWS runtime).
    PerJob,
}

/// Why a runtime whose jobs run as its own processes ([`JobRoles::Refused`]) refuses a job
/// role: for a setting's error and a runner's refusal.
pub const JOB_ROLE_IS_FOR_AWS: &str = "a job role is for the AWS runtime, whose jobs are \
     CodeBuild builds that each run as a role of their own; `gannet up` runs jobs as its own \
     processes, with its own credentials, so remove jobRoleArn there";

/// What a job runs.
#[derive(Clone, Copy, Debug)]
pub struct JobSpec<'a> {
    pub key: &'a JobKey,
    /// A shell script, run with `sh -c`.
    pub script: &'a str,
    /// Its working directory's contents: the app's directory at the commit. The adapter copies
    /// it (locally, or to the job's machine); the job never writes here.
    pub dir: &'a Path,
    /// The job's whole environment. Nothing of gannet's own environment is added.
    pub env: &'a [(String, String)],
    /// The job is killed this long after it starts.
    pub timeout: GoDuration,
    /// Files of earlier jobs this one gets; a missing one refuses the start.
    pub inputs: &'a [JobInput<'a>],
    /// The IAM role the job runs as, instead of the runner's own (a deploy target's
    /// `jobRoleArn`); a runner that cannot ([`JobRoles::Refused`]) refuses the job. Not part
    /// of the job's identity: a start repeated with the same key finds the job, as ever.
    pub role: Option<&'a JobRoleArn>,
    /// A directory kept between the jobs that name the same cache ([`valid_cache_name`]),
    /// given in [`CACHE_ENV`]: what `terraform init` made for one app and deploy target. Jobs
    /// of one cache may run at once, so a job locks what it changes there; a runner that keeps
    /// no caches (`None`, or the AWS runtime today) sets no [`CACHE_ENV`], and the job does
    /// without. Never a place for secrets: the name is the only thing that keeps jobs of other
    /// caches out, and anything written there outlives the job.
    pub cache: Option<&'a str>,
}

/// The directory of the job's cache ([`JobSpec::cache`]), by this variable; unset when the
/// runner keeps none.
pub const CACHE_ENV: &str = "GANNET_JOB_CACHE";

/// True when `name` may name a job cache: 1 to 96 letters, digits and `-` (a [`JobKey`] made
/// with [`JobKey::of`] is one).
pub fn valid_cache_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 96
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// How a job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobEnd {
    /// The script's exit code (a shell reports a signal `N` as `128 + N`).
    Exited(i32),
    /// Killed when its time was up.
    TimedOut { after: GoDuration },
    /// Stopped by [`JobRunner::cancel`].
    Cancelled,
    /// Gone without an exit code: killed outside gannet, its machine stopped, or it never
    /// started. `reason` says which, as far as the adapter can tell.
    Lost { reason: String },
}

impl fmt::Display for JobEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exited(0) => f.write_str("exited with code 0"),
            Self::Exited(code) if *code > 128 && *code < 128 + 65 => {
                write!(
                    f,
                    "exited with code {code} (killed by signal {})",
                    code - 128
                )
            }
            Self::Exited(code) => write!(f, "exited with code {code}"),
            Self::TimedOut { after } => write!(f, "timed out after {after}"),
            Self::Cancelled => f.write_str("was cancelled"),
            Self::Lost { reason } => write!(f, "was lost: {reason}"),
        }
    }
}

/// What one poll found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobPoll {
    /// Output lines written since the cursor given, in order, each without its newline.
    pub lines: Vec<String>,
    /// Where the next poll reads from.
    pub cursor: String,
    /// `None` while the job runs; once it is `Some`, `lines` holds all that was left.
    pub end: Option<JobEnd>,
}

#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The runner could not be reached or failed; retrying may help.
    #[error("job runner unavailable during {operation}")]
    Unavailable {
        operation: &'static str,
        #[source]
        source: BoxError,
    },
    /// The job cannot run as asked (its directory cannot be read, the runner is not set up);
    /// retrying will not help.
    #[error("{0}")]
    Refused(String),
    /// No job was started with this key.
    #[error("no job {0} was started")]
    Unknown(JobKey),
}

impl From<JobError> for StepError {
    fn from(err: JobError) -> Self {
        match err {
            JobError::Unavailable { .. } => StepError::transient("the job runner", err),
            other => StepError::permanent(other),
        }
    }
}

/// Runs jobs. Every method is safe to call again with the same arguments.
#[async_trait]
pub trait JobRunner: Send + Sync {
    /// Starts the job, or does nothing when a job with this key was started before (whatever
    /// its state now).
    async fn start(&self, spec: JobSpec<'_>) -> Result<(), JobError>;

    /// The job's state and its output after `cursor` (`""` for the start). Bounded: a poll
    /// returns within a few seconds however much output there is (the rest comes next time).
    async fn poll(&self, key: &JobKey, cursor: &str) -> Result<JobPoll, JobError>;

    /// Stops the job and everything it started; a job that has ended is left as it is.
    async fn cancel(&self, key: &JobKey) -> Result<(), JobError>;

    /// The file `name` the job left in its [`OUT_ENV`] directory; `None` when it left none by
    /// that name. A file over [`MAX_OUTPUT_BYTES`] is refused. Read it once the job ended.
    async fn output(&self, key: &JobKey, name: &str) -> Result<Option<Vec<u8>>, JobError>;

    /// How long to wait before polling a job that has run for `running_for`.
    fn poll_interval(&self, running_for: GoDuration) -> GoDuration;
}

/// Where a job a step starts once stands ([`start_once`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Once {
    /// It runs (or was just started): look again after this long.
    Running(GoDuration),
    /// It ended so.
    Ended(JobEnd),
    /// It could not be made (`make` said why); no job was started.
    Refused(String),
}

/// The job `key`: started with what `make` gives (a script and its environment, run in
/// `dir` for at most `timeout`) unless a job with that key was started before, and how it
/// stands. A step delivered twice finds the job the first one started.
pub async fn start_once(
    jobs: &dyn JobRunner,
    key: &JobKey,
    dir: &Path,
    timeout: GoDuration,
    make: impl FnOnce() -> Result<(String, Vec<(String, String)>), String>,
) -> Result<Once, StepError> {
    match jobs.poll(key, "").await {
        Ok(JobPoll { end: Some(end), .. }) => Ok(Once::Ended(end)),
        Ok(_) => Ok(Once::Running(jobs.poll_interval(GoDuration::default()))),
        Err(JobError::Unknown(_)) => {
            let (script, env) = match make() {
                Ok(made) => made,
                Err(why) => return Ok(Once::Refused(why)),
            };
            jobs.start(JobSpec {
                key,
                script: &script,
                dir,
                env: &env,
                timeout,
                inputs: &[],
                role: None,
                cache: None,
            })
            .await?;
            Ok(Once::Running(jobs.poll_interval(GoDuration::default())))
        }
        Err(e) => Err(e.into()),
    }
}

/// Why the job `key`, which ended so (not with code 0), failed: what it wrote to `file` (its
/// lines joined with `; `), or else how it ended.
pub async fn failure(jobs: &dyn JobRunner, key: &JobKey, end: &JobEnd, file: &str) -> String {
    let said = jobs.output(key, file).await.ok().flatten();
    let said = said.map(|t| String::from_utf8_lossy(&t).trim().to_owned());
    match said.filter(|s| !s.is_empty()) {
        Some(said) => said.lines().collect::<Vec<_>>().join("; "),
        None => format!("the job {end}"),
    }
}

/// A word for a POSIX shell, single-quoted.
pub fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The runner of a runtime that runs no jobs: every start is refused, saying so.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoJobs;

#[async_trait]
impl JobRunner for NoJobs {
    async fn start(&self, _spec: JobSpec<'_>) -> Result<(), JobError> {
        Err(JobError::Refused(
            "this runtime has no job runner configured, so it cannot run commands".into(),
        ))
    }

    async fn poll(&self, key: &JobKey, _cursor: &str) -> Result<JobPoll, JobError> {
        Err(JobError::Unknown(key.clone()))
    }

    async fn cancel(&self, _key: &JobKey) -> Result<(), JobError> {
        Ok(())
    }

    async fn output(&self, key: &JobKey, _name: &str) -> Result<Option<Vec<u8>>, JobError> {
        Err(JobError::Unknown(key.clone()))
    }

    fn poll_interval(&self, _running_for: GoDuration) -> GoDuration {
        GoDuration::from_secs(1)
    }
}

/// What every job gets of gannet's environment: what a shell needs to find programs and speak
/// the locale, never a credential.
pub const BASE_ENV: [&str; 10] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "TMPDIR",
];

/// True when `name` can name an environment variable (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `AWS_*` variables that configure a client without holding or locating a credential: a job
/// may be given these.
const AWS_SETTINGS: [&str; 10] = [
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_EC2_METADATA_DISABLED",
    "AWS_MAX_ATTEMPTS",
    "AWS_RETRY_MODE",
    "AWS_CA_BUNDLE",
    "AWS_USE_FIPS_ENDPOINT",
    "AWS_USE_DUALSTACK_ENDPOINT",
    "AWS_STS_REGIONAL_ENDPOINTS",
    "AWS_SDK_LOAD_CONFIG",
];

/// Credentials gannet itself (or a provider it calls) reads from its environment, by name.
const PROVIDER_SECRETS: [(&str, &str); 12] = [
    ("GITHUB_TOKEN", "gannet's GitHub credential"),
    ("GH_TOKEN", "a GitHub credential"),
    ("GH_ENTERPRISE_TOKEN", "a GitHub credential"),
    ("GITHUB_ENTERPRISE_TOKEN", "a GitHub credential"),
    (
        "GOOGLE_APPLICATION_CREDENTIALS",
        "a Google Cloud credential",
    ),
    ("GOOGLE_OAUTH_ACCESS_TOKEN", "a Google Cloud credential"),
    ("CLOUDSDK_AUTH_ACCESS_TOKEN", "a Google Cloud credential"),
    ("DD_API_KEY", "a Datadog key (analysis providers)"),
    ("DD_APP_KEY", "a Datadog key (analysis providers)"),
    ("DD_APPLICATION_KEY", "a Datadog key (analysis providers)"),
    ("DATADOG_API_KEY", "a Datadog key (analysis providers)"),
    ("DATADOG_APP_KEY", "a Datadog key (analysis providers)"),
];

/// Why the variable `name` of gannet's environment is never given to a job, when it holds (or
/// locates) one of gannet's own credentials by its name alone: `AWS_*` credentials (keys,
/// session token, profile, credentials and config files, container and web-identity
/// credentials; region and endpoint settings are fine), GitHub tokens, Google Cloud and Datadog
/// credentials, and every `GANNET_*` variable.
pub fn gannet_credential(name: &str) -> Option<&'static str> {
    if let Some((_, what)) = PROVIDER_SECRETS.iter().find(|(n, _)| *n == name) {
        return Some(what);
    }
    if name.starts_with("GANNET_") {
        return Some("gannet's own settings and secrets (tokens, the webhook secret)");
    }
    let aws_setting = AWS_SETTINGS.contains(&name) || name.starts_with("AWS_ENDPOINT_URL");
    (name.starts_with("AWS_") && !aws_setting)
        .then_some("gannet's own AWS credentials (or where they are found)")
}

/// Checks a list of gannet's environment variables an operator lets jobs have (written at
/// `at`, such as `plugins.script-run.allowEnv`): each a variable name, none of them holding
/// one of gannet's own secrets (`secret_env`, and [`gannet_credential`]'s names). A refusal
/// says why, and `own_credentials` how the jobs get credentials of their own instead.
pub fn check_allowed_env(
    at: &str,
    names: &[String],
    secret_env: &[String],
    own_credentials: &str,
) -> Result<(), gannet_config::typed::FieldError> {
    for (i, name) in names.iter().enumerate() {
        let error = |message: String| gannet_config::typed::FieldError {
            path: format!("{at}[{i}]"),
            message,
        };
        if !valid_env_name(name) {
            return Err(error(format!("{name:?} is not a variable name")));
        }
        if secret_env.contains(name) {
            return Err(error(format!(
                "{name} holds one of gannet's own secrets; jobs never get it"
            )));
        }
        if let Some(what) = gannet_credential(name) {
            return Err(error(format!(
                "{name} holds {what}, which jobs never get: whoever can push a commit would hold \
                 them; {own_credentials}"
            )));
        }
    }
    Ok(())
}

/// The part of gannet's environment a job gets: [`BASE_ENV`] and the variables in `allowed`
/// that are set.
pub fn inherited_env(allowed: &[String]) -> Vec<(String, String)> {
    BASE_ENV
        .iter()
        .copied()
        .chain(allowed.iter().map(String::as_str))
        .filter_map(|name| Some((name.to_owned(), std::env::var(name).ok()?)))
        .collect()
}

/// Stage metadata keys of the job a stage runs.
pub const META_JOB: &str = "job";
pub(crate) const META_JOB_STARTED: &str = "jobStartedAt";
pub(crate) const META_CURSOR: &str = "jobCursor";
pub(crate) const META_LINES: &str = "jobLines";

/// A longer output line is cut to this many bytes.
pub const MAX_LINE_BYTES: usize = 4096;
/// The stage log keeps this many lines of a job's output; the rest are counted, not kept.
pub const MAX_LOG_LINES: u64 = 10_000;

/// Cuts `line` to [`MAX_LINE_BYTES`] on a character boundary, saying so.
pub(crate) fn cut_line(mut line: String) -> String {
    if line.len() > MAX_LINE_BYTES {
        let end = (0..=MAX_LINE_BYTES)
            .rev()
            .find(|&i| line.is_char_boundary(i))
            .unwrap_or(0);
        line.truncate(end);
        line.push_str(&format!(" [line cut at {MAX_LINE_BYTES} bytes]"));
    }
    line
}

/// One stage's job, as its metadata records it: the shared steps of every stage that runs
/// a job (start once, copy output to the log, end).
pub struct Follow<'a> {
    pub jobs: &'a dyn JobRunner,
    pub io: &'a dyn StepIo,
    pub metadata: &'a Metadata,
}

/// What a step of a job-running stage does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress {
    /// The job runs: poll again after this long.
    Running {
        after: GoDuration,
    },
    Ended(JobEnd),
}

impl<'a> Follow<'a> {
    /// The job of the stage a step runs.
    pub fn of_step(ctx: &crate::plugin::StepContext<'a>) -> Self {
        Self {
            jobs: ctx.jobs,
            io: ctx.io,
            metadata: &ctx.stage.metadata,
        }
    }

    /// The job of a stage being stopped ([`crate::plugin::Steps::stop`]).
    pub fn of_stop(ctx: &crate::plugin::StopContext<'a>) -> Self {
        Self {
            jobs: ctx.jobs,
            io: ctx.io,
            metadata: &ctx.stage.metadata,
        }
    }

    /// The job this stage started, if it started one.
    pub fn key(&self) -> Option<JobKey> {
        self.metadata.get(META_JOB).and_then(|k| JobKey::parse(k))
    }

    /// When the job was started (as the stage recorded it).
    pub fn started_at(&self) -> Option<Millis> {
        self.metadata
            .get(META_JOB_STARTED)
            .and_then(|s| s.parse().ok())
            .map(Millis)
    }

    /// Starts the job `spec` describes and records it in the stage's metadata. Safe to repeat:
    /// a start that crashed before the record was saved finds its job by key.
    pub async fn start(&self, spec: JobSpec<'_>, now: Millis) -> Result<Progress, StepError> {
        self.jobs.start(spec).await?;
        self.io
            .save_metadata(Metadata::from([
                (META_JOB.to_owned(), spec.key.to_string()),
                (META_JOB_STARTED.to_owned(), now.0.to_string()),
                (META_CURSOR.to_owned(), String::new()),
                (META_LINES.to_owned(), "0".to_owned()),
            ]))
            .await?;
        Ok(Progress::Running {
            after: self.jobs.poll_interval(GoDuration::default()),
        })
    }

    /// Polls the job `key`: its new output goes to the stage log (then the cursor is saved, so
    /// a crash in between repeats lines rather than losing them).
    pub async fn poll(&self, key: &JobKey, now: Millis) -> Result<Progress, StepError> {
        let cursor = self.metadata.get(META_CURSOR).map_or("", String::as_str);
        let poll = self.jobs.poll(key, cursor).await?;
        let mut logged: u64 = self
            .metadata
            .get(META_LINES)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        for line in poll.lines {
            logged += 1;
            if logged <= MAX_LOG_LINES {
                self.io.log(&cut_line(line)).await;
            }
        }
        if poll.end.is_some() && logged > MAX_LOG_LINES {
            self.io
                .log(&format!(
                    "[{} more lines of output not shown: the log keeps the first {MAX_LOG_LINES}]",
                    logged - MAX_LOG_LINES
                ))
                .await;
        }
        let lines_before = self.metadata.get(META_LINES).map(String::as_str);
        if poll.cursor != cursor || lines_before != Some(logged.to_string().as_str()) {
            self.io
                .save_metadata(Metadata::from([
                    (META_CURSOR.to_owned(), poll.cursor),
                    (META_LINES.to_owned(), logged.to_string()),
                ]))
                .await?;
        }
        Ok(match poll.end {
            Some(end) => Progress::Ended(end),
            None => Progress::Running {
                after: self
                    .jobs
                    .poll_interval(now.since(self.started_at().unwrap_or(now))),
            },
        })
    }

    /// Stops the stage's job, if it started one (a cancel, a timeout); returns its key.
    pub async fn cancel(&self) -> Result<Option<JobKey>, StepError> {
        let Some(key) = self.key() else {
            return Ok(None);
        };
        self.jobs.cancel(&key).await?;
        Ok(Some(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_safe_and_distinct() {
        let d = DeploymentId::parse("web-5f2c1a-0a1b2c3d").unwrap();
        let a = JobKey::new(&d, &StageId::parse("run/script").unwrap(), 1);
        assert_eq!(
            a,
            JobKey::new(&d, &StageId::parse("run/script").unwrap(), 1)
        );
        assert_ne!(
            a,
            JobKey::new(&d, &StageId::parse("run-script").unwrap(), 1)
        );
        assert_ne!(
            a,
            JobKey::new(&d, &StageId::parse("run/script").unwrap(), 2)
        );
        assert!(
            a.as_str().starts_with("web-5f2c1a-0a1b2c3d-run-script-1-"),
            "{a}"
        );
        assert_eq!(JobKey::parse(a.as_str()), Some(a.clone()));
        let long = StageId::parse(&"s/".repeat(100)).unwrap();
        let key = JobKey::new(&d, &long, u32::MAX);
        assert!(key.as_str().len() <= 96, "{key}");
        assert!(JobKey::parse(key.as_str()).is_some());
        for bad in ["", "../x", "a b", &"a".repeat(97)] {
            assert_eq!(JobKey::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn ends_read_as_a_reason() {
        assert_eq!(JobEnd::Exited(3).to_string(), "exited with code 3");
        assert_eq!(
            JobEnd::Exited(137).to_string(),
            "exited with code 137 (killed by signal 9)"
        );
        assert_eq!(
            JobEnd::TimedOut {
                after: GoDuration::from_secs(90)
            }
            .to_string(),
            "timed out after 1m30s"
        );
    }

    #[test]
    fn gannets_own_credentials_are_refused_by_name_with_the_reason_and_the_fix() {
        let check = |name: &str| {
            check_allowed_env(
                "plugins.script-run.allowEnv",
                &["KUBECONFIG".to_owned(), name.to_owned()],
                &["MY_WEBHOOK_SECRET".to_owned()],
                "give the job credentials of its own",
            )
            .map_err(|e| e.to_string())
        };
        let refused = [
            ("AWS_ACCESS_KEY_ID", "gannet's own AWS credentials"),
            ("AWS_SECRET_ACCESS_KEY", "gannet's own AWS credentials"),
            ("AWS_SESSION_TOKEN", "gannet's own AWS credentials"),
            ("AWS_SECURITY_TOKEN", "gannet's own AWS credentials"),
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "gannet's own AWS credentials",
            ),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                "gannet's own AWS credentials",
            ),
            (
                "AWS_WEB_IDENTITY_TOKEN_FILE",
                "gannet's own AWS credentials",
            ),
            ("AWS_ROLE_ARN", "gannet's own AWS credentials"),
            ("AWS_PROFILE", "gannet's own AWS credentials"),
            (
                "AWS_SHARED_CREDENTIALS_FILE",
                "gannet's own AWS credentials",
            ),
            ("AWS_CONFIG_FILE", "gannet's own AWS credentials"),
            ("GITHUB_TOKEN", "gannet's GitHub credential"),
            ("GH_TOKEN", "a GitHub credential"),
            ("GANNET_TOKENS", "gannet's own settings and secrets"),
            ("GANNET_WEBHOOK_SECRET", "gannet's own settings and secrets"),
            (
                "GOOGLE_APPLICATION_CREDENTIALS",
                "a Google Cloud credential",
            ),
            ("DD_API_KEY", "a Datadog key"),
            ("DD_APPLICATION_KEY", "a Datadog key"),
        ];
        for (name, what) in refused {
            let err = check(name).expect_err(name);
            assert!(
                err.starts_with(&format!(
                    "plugins.script-run.allowEnv[1]: {name} holds {what}"
                )),
                "{err}"
            );
            assert!(err.contains("jobs never get"), "{err}");
            assert!(
                err.ends_with("give the job credentials of its own"),
                "{err}"
            );
        }
        // The names gannet.yaml gives its secrets keep their own message.
        assert_eq!(
            check("MY_WEBHOOK_SECRET").unwrap_err(),
            "plugins.script-run.allowEnv[1]: MY_WEBHOOK_SECRET holds one of gannet's own secrets; jobs never get it"
        );
        for allowed in [
            "AWS_REGION",
            "AWS_DEFAULT_REGION",
            "AWS_ENDPOINT_URL",
            "AWS_ENDPOINT_URL_S3",
            "AWS_EC2_METADATA_DISABLED",
            "TF_VAR_deploy_key",
            "DEPLOY_AWS_ACCESS_KEY_ID",
            "MARKER_DIR",
        ] {
            assert_eq!(check(allowed), Ok(()), "{allowed}");
        }
    }

    #[test]
    fn a_job_role_is_an_iam_roles_arn() {
        for good in [
            "arn:aws:iam::123456789012:role/gannet-terraform-prod",
            "arn:aws:iam::123456789012:role/deploy/prod/tf+job@x=1,2.y_z",
            "arn:aws-cn:iam::123456789012:role/r",
            "arn:aws-us-gov:iam::123456789012:role/r",
        ] {
            assert_eq!(
                JobRoleArn::parse(good).map(|r| r.to_string()),
                Ok(good.to_owned())
            );
        }
        for bad in [
            "",
            "gannet-terraform",
            "arn:aws:iam::123456789012:user/ana",
            "arn:aws:iam::12345678901:role/r",
            "arn:aws:iam::1234567890123:role/r",
            "arn:aws:iam::12345678901x:role/r",
            "arn:aws:sts::123456789012:assumed-role/r/s",
            "arn:aws:iam::123456789012:role/",
            "arn:aws:iam::123456789012:role/a b",
            "arn:aws:iam::123456789012:role/path/",
            "arn:gcp:iam::123456789012:role/r",
            "arn:aws:iam:us-east-1:123456789012:role/r",
        ] {
            let err = JobRoleArn::parse(bad).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("{bad:?} is not an IAM role ARN such as arn:aws:iam::123456789012:role/deployer")
            );
        }
    }

    #[test]
    fn long_lines_are_cut_on_a_character_boundary() {
        let line = "é".repeat(MAX_LINE_BYTES);
        let cut = cut_line(line);
        assert!(cut.ends_with(" [line cut at 4096 bytes]"));
        assert!(cut.len() <= MAX_LINE_BYTES + 30);
        assert_eq!(cut_line("short".into()), "short");
    }
}
