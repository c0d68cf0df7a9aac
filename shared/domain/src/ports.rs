//! The ports: small traits that the runtimes (embedded SQLite, AWS) implement.
//!
//! The store applies a [`Changes`] set atomically: every conditional write holds, or none is
//! made and the call returns [`StoreError::Conflict`]. The messages in the set are sent only if
//! the writes commit (in the same transaction on SQLite; right after on AWS, where the resume
//! sweep covers a crash in between).

use std::collections::BTreeMap;
use std::path::PathBuf;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::app::{App, RepoState};
use crate::chain::{Chain, ChainStatus};
use crate::deployment::{Deployment, DeploymentStatus};
use crate::duration::{GoDuration, Millis};
use crate::ids::{AppId, ChainId, CommitSha, DeploymentId, PreviewId, RepoId, StageId};
use crate::preview::{Preview, PreviewStatus};

/// Boxed error source, so adapters keep their own error types behind the port.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The condition a write puts on the item's stored version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// The item must not exist yet.
    Absent,
    /// The stored item's version (`App::version`, `RepoState::version`, `Deployment::seq`,
    /// `Chain::version`)
    /// must equal this.
    Version(u64),
    /// No condition.
    Any,
}

#[derive(Clone, Debug)]
pub enum Write {
    PutApp {
        app: Box<App>,
        expect: Expect,
    },
    PutRepo {
        repo: RepoState,
        expect: Expect,
    },
    PutDeployment {
        deployment: Box<Deployment>,
        expect: Expect,
    },
    PutChain {
        chain: Box<Chain>,
        expect: Expect,
    },
    PutPreview {
        preview: Box<Preview>,
        expect: Expect,
    },
    /// Records a webhook delivery id; conflicts if it was recorded before.
    RecordDelivery {
        id: String,
        at: Millis,
    },
}

/// An atomic set of conditional writes and the messages that go out if they commit.
#[derive(Clone, Debug, Default)]
pub struct Changes {
    pub writes: Vec<Write>,
    pub send: Vec<Outgoing>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.send.is_empty()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A condition did not hold: someone else wrote first. Nothing was written.
    #[error("conflicting write: {what}")]
    Conflict { what: String },
    /// The store could not be reached or failed; retrying may help.
    #[error("store unavailable during {operation}")]
    Unavailable {
        operation: &'static str,
        #[source]
        source: BoxError,
    },
    /// A stored item could not be decoded.
    #[error("corrupt item {key}")]
    Corrupt {
        key: String,
        #[source]
        source: BoxError,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeploymentFilter {
    pub app: Option<AppId>,
    /// Empty means every status.
    pub statuses: Vec<DeploymentStatus>,
    /// At most this many, newest first. `None` for all.
    pub limit: Option<usize>,
    /// Only those older than this one (a page's cursor): created before it, or at the same
    /// millisecond with a smaller id.
    pub before: Option<DeploymentCursor>,
}

/// A place in the deployments' order (newest first: `created_at`, then id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeploymentCursor {
    pub created_at: Millis,
    pub id: DeploymentId,
}

impl DeploymentCursor {
    pub fn of(d: &Deployment) -> Self {
        Self {
            created_at: d.created_at,
            id: d.id.clone(),
        }
    }
}

/// Which chains to list, newest (by `created_at`, then id) first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChainFilter {
    /// Empty means every status.
    pub statuses: Vec<ChainStatus>,
    /// At most this many. `None` for all.
    pub limit: Option<usize>,
}

/// Which plan previews to list, newest (by `created_at`, then id) first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreviewFilter {
    pub repo: Option<RepoId>,
    /// Only this pull request's previews (needs `repo`).
    pub pr: Option<u64>,
    /// Empty means every status.
    pub statuses: Vec<PreviewStatus>,
    /// At most this many. `None` for all.
    pub limit: Option<usize>,
}

/// One line of a stage's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    /// Position within the stage's log, from 1.
    pub seq: u64,
    pub at: Millis,
    pub text: String,
    /// The line came from a job's standard error. Stored as [`STDERR_MARK`] before the text
    /// (the job runners write it so); [`LogLine::marked`] turns that into this flag.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stderr: bool,
}

/// What the job runners put before each line a job wrote to its standard error (ASCII's
/// record separator, which no text a person writes holds).
pub const STDERR_MARK: char = '\u{1e}';

impl LogLine {
    /// The line as shown: a stored [`STDERR_MARK`] taken off its text and kept as `stderr`.
    #[must_use]
    pub fn marked(mut self) -> Self {
        if let Some(text) = self.text.strip_prefix(STDERR_MARK) {
            self.text = text.to_owned();
            self.stderr = true;
        }
        self
    }
}

#[cfg(test)]
mod log_line_tests {
    use super::*;

    #[test]
    fn a_marked_line_is_shown_without_its_mark_and_flagged() {
        let line = |text: &str| LogLine {
            seq: 1,
            at: Millis(0),
            text: text.to_owned(),
            stderr: false,
        };
        let err = line("\u{1e}no such file").marked();
        assert_eq!((err.text.as_str(), err.stderr), ("no such file", true));
        let out = line("plan: 1 to add").marked();
        assert_eq!((out.text.as_str(), out.stderr), ("plan: 1 to add", false));
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            serde_json::json!({"seq": 1, "at": 0, "text": "plan: 1 to add"})
        );
        assert_eq!(serde_json::to_value(&err).unwrap()["stderr"], true);
    }
}

#[async_trait]
pub trait Store: Send + Sync {
    /// Applies every write if every condition holds, then sends the messages.
    async fn apply(&self, changes: Changes) -> Result<(), StoreError>;

    async fn app(&self, id: &AppId) -> Result<Option<App>, StoreError>;
    /// All apps, ordered by id.
    async fn apps(&self) -> Result<Vec<App>, StoreError>;
    async fn repo(&self, id: &RepoId) -> Result<Option<RepoState>, StoreError>;

    async fn deployment(&self, id: &DeploymentId) -> Result<Option<Deployment>, StoreError>;
    /// Deployments matching the filter, newest (by `created_at`, then id) first.
    async fn deployments(&self, filter: &DeploymentFilter) -> Result<Vec<Deployment>, StoreError>;

    async fn chain(&self, id: &ChainId) -> Result<Option<Chain>, StoreError>;
    /// Chains matching the filter, newest (by `created_at`, then id) first.
    async fn chains(&self, filter: &ChainFilter) -> Result<Vec<Chain>, StoreError>;

    async fn preview(&self, id: &PreviewId) -> Result<Option<Preview>, StoreError>;
    /// Plan previews matching the filter, newest (by `created_at`, then id) first.
    async fn previews(&self, filter: &PreviewFilter) -> Result<Vec<Preview>, StoreError>;

    /// Appends lines to a stage's log, numbering them after the lines already there.
    async fn append_log(
        &self,
        deployment: &DeploymentId,
        stage: &StageId,
        at: Millis,
        lines: &[String],
    ) -> Result<(), StoreError>;
    /// At most `limit` log lines of a stage with `seq > after`, in order.
    async fn logs(
        &self,
        deployment: &DeploymentId,
        stage: &StageId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LogLine>, StoreError>;
}

/// The queues, one per consuming handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueName {
    Trigger,
    Plan,
    Stage,
    Notify,
    /// Drift checks, one message per app.
    Drift,
}

impl QueueName {
    pub const ALL: [QueueName; 5] = [
        Self::Trigger,
        Self::Plan,
        Self::Stage,
        Self::Notify,
        Self::Drift,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trigger => "trigger",
            Self::Plan => "plan",
            Self::Stage => "stage",
            Self::Notify => "notify",
            Self::Drift => "drift",
        }
    }
}

/// A message to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outgoing {
    pub queue: QueueName,
    /// The encoded message (JSON, see the `gannet-events` crate).
    pub body: String,
    /// Not delivered before this much time has passed.
    pub delay: GoDuration,
    /// While a message with the same key waits undelivered in the same queue, this one is
    /// dropped. Adapters without dedupe (SQS standard) may ignore it.
    pub dedupe_key: Option<String>,
}

impl Outgoing {
    pub fn now(queue: QueueName, body: String) -> Self {
        Self {
            queue,
            body,
            delay: GoDuration::default(),
            dedupe_key: None,
        }
    }
}

/// A handle to acknowledge, extend or give back one received message.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Receipt(pub String);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    pub receipt: Receipt,
    pub queue: QueueName,
    pub body: String,
    /// How many times this message has been received, this time included.
    pub attempts: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadLetter {
    pub queue: QueueName,
    pub body: String,
    pub reason: String,
    pub attempts: u32,
    pub at: Millis,
}

#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("queue unavailable during {operation}")]
    Unavailable {
        operation: &'static str,
        #[source]
        source: BoxError,
    },
    /// The receipt is unknown or its lease expired (the message may be redelivered).
    #[error("receipt {0} is no longer valid")]
    StaleReceipt(String),
}

#[async_trait]
pub trait Queue: Send + Sync {
    async fn send(&self, messages: Vec<Outgoing>) -> Result<(), QueueError>;
    /// Up to `max` visible messages; each stays hidden for `visibility` unless acked.
    async fn receive(
        &self,
        queue: QueueName,
        max: usize,
        visibility: GoDuration,
    ) -> Result<Vec<Received>, QueueError>;
    /// Keeps a message hidden for `visibility` more, counted from now.
    async fn extend(&self, receipt: &Receipt, visibility: GoDuration) -> Result<(), QueueError>;
    /// Done with it: the message is deleted.
    async fn ack(&self, receipt: &Receipt) -> Result<(), QueueError>;
    /// Gives it back, visible again after `delay`.
    async fn retry_later(&self, receipt: &Receipt, delay: GoDuration) -> Result<(), QueueError>;
    /// Moves it to the queue's dead-letter queue, keeping `reason`.
    async fn dead_letter(&self, receipt: &Receipt, reason: &str) -> Result<(), QueueError>;
    async fn dead_letters(&self, queue: QueueName) -> Result<Vec<DeadLetter>, QueueError>;
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitInfo {
    pub sha: CommitSha,
    pub message: String,
    pub author: String,
    /// Committer time.
    pub at: Millis,
}

/// A pull request's head as [`GitSource::pull_request`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequestCommits {
    pub head: CommitInfo,
    /// The watched branch's head.
    pub base: CommitSha,
    /// The newest commit both `head` and `base` descend from.
    pub merge_base: CommitSha,
}

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("unknown repository {0}")]
    UnknownRepo(RepoId),
    #[error("branch {branch} not found in {repo}")]
    NoBranch { repo: RepoId, branch: String },
    #[error("commit {commit} not found in {repo}")]
    NoCommit { repo: RepoId, commit: String },
    /// A pull request's head that cannot be read as asked: it moved on, the pull request is
    /// unknown, or it shares no history with the branch. Retrying the same request cannot help.
    #[error("{reason}")]
    PullRequest { repo: RepoId, reason: String },
    #[error("git {operation} failed for {repo}")]
    Failed {
        repo: RepoId,
        operation: &'static str,
        #[source]
        source: BoxError,
    },
}

#[async_trait]
pub trait GitSource: Send + Sync {
    /// The head of `branch`, after fetching it where the repository is remote.
    async fn head(&self, repo: &RepoId, branch: &str) -> Result<CommitInfo, GitError>;
    async fn commit(&self, repo: &RepoId, sha: &CommitSha) -> Result<CommitInfo, GitError>;
    /// Paths (from the repository root) that differ between two commits, renames as both paths.
    async fn changed_files(
        &self,
        repo: &RepoId,
        from: &CommitSha,
        to: &CommitSha,
    ) -> Result<Vec<String>, GitError>;
    /// Every file path in the tree at `commit`.
    async fn list_files(&self, repo: &RepoId, commit: &CommitSha) -> Result<Vec<String>, GitError>;
    /// One file at `commit`; `None` when absent.
    async fn read_file(
        &self,
        repo: &RepoId,
        commit: &CommitSha,
        path: &str,
    ) -> Result<Option<Vec<u8>>, GitError>;
    /// A read-only directory holding the tree at `commit` (cached; do not modify it).
    async fn checkout(&self, repo: &RepoId, commit: &CommitSha) -> Result<PathBuf, GitError>;
    /// True when `commit` is `head` or one of its ancestors (on the branch whose head is
    /// `head`). Reads commits only: no tree is checked out.
    async fn is_ancestor(
        &self,
        repo: &RepoId,
        commit: &CommitSha,
        head: &CommitSha,
    ) -> Result<bool, GitError>;
    /// Makes `head`, proposed to the repository by pull request `pr`, readable by the other
    /// methods (a local clone fetches `refs/pull/<pr>/head`; GitHub's API reads any commit of
    /// the repository and its forks' pull requests already), and returns it with the commit
    /// where it and `branch`'s head part (their merge base) and that head.
    async fn pull_request(
        &self,
        repo: &RepoId,
        branch: &str,
        pr: Option<u64>,
        head: &CommitSha,
    ) -> Result<PullRequestCommits, GitError>;
    /// How many commits `head` has that `base` has not (`git rev-list --count base..head`;
    /// GitHub's compare `ahead_by`): how far a branch has moved on from a deployed commit.
    async fn commits_ahead(
        &self,
        repo: &RepoId,
        base: &CommitSha,
        head: &CommitSha,
    ) -> Result<u64, GitError>;
}

/// The state of a commit status, as GitHub names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommitState {
    Pending,
    Success,
    Failure,
    Error,
}

impl CommitState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Success => "success",
            Self::Failure => "failure",
            Self::Error => "error",
        }
    }
}

/// One report of a deployment's state on the commit it deploys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitStatus {
    pub commit: CommitSha,
    /// Names the reporter, so each app keeps its own status on a commit: `gannet/<app name>`.
    pub context: String,
    pub state: CommitState,
    /// A one-line summary of the stages; adapters cut it to what their host accepts.
    pub description: String,
    pub target_url: Option<String>,
}

/// Where a deployment's state is reported on its commit (GitHub commit status).
#[async_trait]
pub trait CommitStatuses: Send + Sync {
    /// Sets the status of `status.context` on `status.commit`; a later report replaces it.
    async fn report(&self, repo: &RepoId, status: &CommitStatus) -> Result<(), BoxError>;
}

/// The state of a check run, as GitHub names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    Queued,
    InProgress,
    Completed,
}

/// How a completed check run ended, as GitHub names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckConclusion {
    Success,
    Failure,
    Neutral,
    Cancelled,
    Skipped,
}

/// One check run on a commit: gannet's plan preview of a pull request's head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckRun {
    /// `gannet/plan-preview`.
    pub name: String,
    pub head_sha: CommitSha,
    pub status: CheckStatus,
    /// Set when `status` is completed.
    pub conclusion: Option<CheckConclusion>,
    /// The preview's id, so the run names what made it.
    pub external_id: String,
    /// The console's page of the whole preview.
    pub details_url: Option<String>,
    pub title: String,
    /// Markdown. Adapters cut it (and `text`) to what their host accepts.
    pub summary: String,
    pub text: String,
}

/// Where a plan preview is shown on its pull request (GitHub's check runs).
#[async_trait]
pub trait CheckRuns: Send + Sync {
    /// Creates a check run on `run.head_sha`; returns its id.
    async fn create(&self, repo: &RepoId, run: &CheckRun) -> Result<u64, BoxError>;
    /// Replaces check run `id` with `run` (its head is not changed).
    async fn update(&self, repo: &RepoId, id: u64, run: &CheckRun) -> Result<(), BoxError>;
}

pub trait Clock: Send + Sync {
    fn now(&self) -> Millis;
}

/// Stage metadata, as plugins record it.
pub type Metadata = BTreeMap<String, String>;
