//! gannet on AWS Lambda: one thin binary per handler (`src/bin/<name>.rs`), each calling
//! [`start_with`] with its [`Function`] and the [`Extras`] it alone links: its plugins (whole in
//! `stage` and `drift`, their planning faces in `trigger`, `plan` and `api`, none elsewhere),
//! the job runner (`stage`, `drift`), the event bus (`notify`).
//!
//! | function | invoked by | calls |
//! |---|---|---|
//! | `webhook` | Function URL (lambda_http) | [`http::webhook`] → `Controller::webhook` |
//! | `trigger`, `plan`, `stage`, `notify` | SQS event source mapping with `ReportBatchItemFailures` | [`sqs::handle_batch`] → `Controller::handle` per record |
//! | `poll`, `resume` | EventBridge Scheduler (Input JSON as-is) | [`schedule::poll`], [`schedule::resume`] |
//! | `api` | HTTP API with IAM auth (lambda_http) | [`http::api`]: the axum router of `gannet up`; `apps diff` asks `drift` ([`diff`]) |
//! | `drift` | EventBridge Scheduler (the sweep), the SQS `drift` queue (one check per app, and plan previews of pull requests), and the `api` function (a diff) | [`schedule::drift`] → `Controller::drift_sweep`; [`sqs::handle_batch`] → the check, or `Controller::preview`; `answer_diff` |
//!
//! Each function, on a cold start:
//! - reads its configuration from the environment once ([`FunctionConfig::from_env`]; the
//!   variables are listed in [`config`]); a bad value stops it, naming the variable;
//! - builds its clients, store, queues, git sources and plugins once ([`Runtime::start`]),
//!   reading a secret (from Secrets Manager or SSM Parameter Store, as its ARN says) only if
//!   it needs it: the webhook secret in `webhook`; the GitHub credentials in the functions
//!   that read repositories, report commit statuses or write plan previews' check runs
//!   (`trigger`, `plan`, `stage`, `notify`, `api`, `drift`), when a repository is on GitHub;
//!   the plugins built with the deploy targets' `planPreview` credentials, and the check
//!   runs, in `drift` alone; the private key for sealed secrets
//!   (`GANNET_SEALING_KEY_ARN`) in `stage`, `drift` and `api`, when it is set;
//! - logs JSON through tracing (filter `RUST_LOG`, default `info`) to stdout, which Lambda
//!   sends to CloudWatch Logs;
//! - registers for Lambda's shutdown signal (an internal no-op extension, so SIGTERM arrives),
//!   and on SIGTERM logs that it stops and flushes its output.
//!
//! Every handler is callable in-process with real-shaped events (`SqsEvent`,
//! `lambda_http::Request`, the Scheduler's `serde_json::Value`), which is how the end-to-end
//! tests drive them against moto.
//!
//! # The webhook's body limit
//!
//! A Lambda Function URL accepts request bodies up to 6 MB; GitHub sends push payloads up to
//! 25 MB. A larger push never reaches the `webhook` function (the Function URL refuses it and
//! GitHub records a failed delivery, which it never retries). The `poll` function's backstop
//! queues a trigger for every repository each poll interval, and the trigger handler reads the
//! branch head itself, so such a push is deployed within one poll interval all the same.
//!
//! # Repositories
//!
//! A repository given by `"github"` is read through GitHub's API (`gannet_git::github`, trees
//! unpacked under `/tmp/gannet-github`), and `notify` reports each deployment on its commit as
//! a commit status. One given by `"url"` is read with the git CLI, caching under
//! `/tmp/gannet-git` (Lambda can write only under `/tmp`); the Lambda images have no git, so
//! `"url"` is for tests and local runs.

pub mod config;
pub mod diff;
pub mod eventbridge;
pub mod http;
mod runtime;
pub mod schedule;
mod sources;
pub mod sqs;
mod start;

use gannet_domain::ports::QueueName;

pub use config::{ConfigError, FunctionConfig};
pub use diff::lambda_diff;
pub use eventbridge::eventbridge_bus;
pub use runtime::{
    codebuild_jobs, BusFactory, Clients, DiffFactory, Extras, JobClients, JobsFactory, Runtime,
    StartError,
};
pub use start::{init_tracing, start, start_with};

/// The Lambda functions, one binary each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Function {
    Webhook,
    Trigger,
    Plan,
    Stage,
    Notify,
    Poll,
    Resume,
    Api,
    Drift,
}

impl Function {
    pub const ALL: [Function; 9] = [
        Self::Webhook,
        Self::Trigger,
        Self::Plan,
        Self::Stage,
        Self::Notify,
        Self::Poll,
        Self::Resume,
        Self::Api,
        Self::Drift,
    ];

    /// The binary's name (= the SAM template's `BuildProperties.Binary`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Webhook => "webhook",
            Self::Trigger => "trigger",
            Self::Plan => "plan",
            Self::Stage => "stage",
            Self::Notify => "notify",
            Self::Poll => "poll",
            Self::Resume => "resume",
            Self::Api => "api",
            Self::Drift => "drift",
        }
    }

    /// Whether it reads repositories or reports commit statuses, and so needs GitHub's API
    /// (and its secret) for GitHub repositories.
    pub(crate) fn reads_github(self) -> bool {
        matches!(
            self,
            Self::Trigger | Self::Plan | Self::Stage | Self::Notify | Self::Api | Self::Drift
        )
    }

    /// Whether it needs gannet's private key for sealed secrets (`GANNET_SEALING_KEY_ARN`):
    /// the stage function opens them at steps, the drift function at drift checks, and the
    /// api function serves the public key.
    pub fn reads_sealing_key(self) -> bool {
        matches!(self, Self::Stage | Self::Drift | Self::Api)
    }

    /// What invokes the function. Inlined, so that [`start_with`] decides it at compile time.
    #[inline]
    pub(crate) fn invoked_by(self) -> InvokedBy {
        match self {
            Self::Webhook => InvokedBy::FunctionUrl,
            Self::Api => InvokedBy::HttpApi,
            Self::Trigger => InvokedBy::Queue(QueueName::Trigger),
            Self::Plan => InvokedBy::Queue(QueueName::Plan),
            Self::Stage => InvokedBy::Queue(QueueName::Stage),
            Self::Notify => InvokedBy::Queue(QueueName::Notify),
            Self::Poll => InvokedBy::Schedule(Job::Poll),
            Self::Resume => InvokedBy::Schedule(Job::Resume),
            Self::Drift => InvokedBy::ScheduleOrQueue(Job::Drift, QueueName::Drift),
        }
    }

    /// The queue an SQS consumer reads; `None` for the others.
    pub fn queue(self) -> Option<QueueName> {
        match self.invoked_by() {
            InvokedBy::Queue(queue) | InvokedBy::ScheduleOrQueue(_, queue) => Some(queue),
            _ => None,
        }
    }
}

/// What invokes a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InvokedBy {
    FunctionUrl,
    HttpApi,
    Queue(QueueName),
    Schedule(Job),
    /// The timer's input, or an SQS event (told apart by its `Records`).
    ScheduleOrQueue(Job, QueueName),
}

/// The timer jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Job {
    Poll,
    Resume,
    Drift,
}

impl std::fmt::Display for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
