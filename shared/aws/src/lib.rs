//! gannet's AWS adapters: [`DynamoStore`] (the `Store` port on one DynamoDB table) and
//! [`SqsQueue`] (the `Queue` port on SQS standard queues, one per consuming handler, each with
//! a dead-letter queue), plus [`provision`] to create both on an endpoint.
//!
//! # The table
//!
//! One table with string keys `pk` (partition) and `sk` (sort). Every item keeps the core type
//! as a JSON blob in `body`, next to the attributes its keys and indexes need. `version` holds
//! the number that [`Expect::Version`](gannet_domain::ports::Expect) compares: `App::version`,
//! `RepoState::version`, `Deployment::seq`.
//!
//! | item | `pk` | `sk` | other attributes |
//! |---|---|---|---|
//! | app | `APPS` | the app id | `version`, `body` |
//! | repository state | `REPO#{repo}` | `REPO` | `version`, `body` |
//! | deployment | `DEPLOYMENT#{id}` | `DEPLOYMENT` | `version`, `body`, `app_key`, `status_key`, `created_key`, `deployment_status` |
//! | stage log counter | `DEPLOYMENT#{id}` | `LOG#{stage} COUNT` | `last`, `expires_at` |
//! | stage log line | `DEPLOYMENT#{id}` | `LOG#{stage} {seq:020}` | `at`, `text`, `expires_at` |
//! | webhook delivery | `DELIVERY#{id}` | `DELIVERY` | `at`, `expires_at` |
//!
//! Ids cannot hold whitespace, so the space in the log keys cannot be confused with an id.
//! `app_key` is `APP#{app}`, `status_key` is `STATUS#{status}` and `created_key` is
//! `{created_at:020}#{id}`, which sorts like the port's order (newest `created_at`, then id).
//!
//! Two global secondary indexes, both keyed on `created_key` for their sort key:
//! - `by-app` (`app_key`): projects `deployment_status` as well, so a status filter on an
//!   app's deployments runs inside the index;
//! - `by-status` (`status_key`): keys only.
//!
//! Both project little, so a deployment update that keeps its status (most step writes) does
//! not write to either index.
//!
//! `expires_at` (epoch seconds) is the table's TTL attribute: a delivery lives 7 days after it
//! arrived, a log line and its counter 30 days after their last append (see [`StoreOptions`]).
//!
//! # Access patterns
//!
//! | port call | request |
//! |---|---|
//! | `app(id)` | GetItem `APPS`/id, consistent |
//! | `apps()` | Query `pk = APPS`, consistent, ordered by `sk` (the id) |
//! | `repo(id)`, `deployment(id)` | GetItem, consistent |
//! | `deployments{app}` | Query `by-app` newest first (status filter in the index), then BatchGetItem |
//! | `deployments{statuses}` | Query `by-status` once per status, merge newest first, then BatchGetItem |
//! | `deployments{}` | as with statuses, over every status |
//! | `append_log` | GetItem the counter, then TransactWriteItems: the counter moves from the value read (a condition) and the lines are put; on a lost race read and try again |
//! | `logs(after)` | Query `pk = DEPLOYMENT#{id}`, `sk BETWEEN LOG#{stage} {after+1:020} AND LOG#{stage} {MAX}`, consistent |
//! | `apply` | one write: PutItem with its condition; several: one TransactWriteItems |
//! | `RecordDelivery` | Put with `attribute_not_exists(pk) OR expires_at < :now` |
//!
//! Index reads are eventually consistent. The items found through an index are fetched with
//! consistent reads and checked against the filter again, so a listing never shows an item
//! that no longer matches; one that started matching a moment ago can be missing from it.
//!
//! # Atomicity and messages
//!
//! `apply` writes every item of a change set in one TransactWriteItems, each with the
//! condition from its `Expect` (`Absent`: `attribute_not_exists(pk)`; `Version(n)`:
//! `version = n`; `Any`: none). A failed condition cancels the whole transaction and is
//! reported as `StoreError::Conflict` naming the item. DynamoDB takes at most 100 items in a
//! transaction; a larger change set is refused, never split, since a split would not be
//! atomic.
//!
//! The messages of a change set are sent through the [`SqsQueue`] *after* the transaction
//! commits. DynamoDB and SQS share no transaction, so a crash between the two leaves
//! committed state without its message. The resume sweep finds every non-terminal deployment
//! without progress past its lease and sends its message again, which closes the gap within
//! one interval. A send that fails after the commit returns `StoreError::Unavailable` naming
//! that step: the writes stay committed.
//!
//! # Stage logs
//!
//! Positions come from the counter item of each (deployment, stage). An append reads the
//! counter, then in one transaction moves it from the value read (a condition) and puts the
//! lines; a concurrent append makes the condition fail, and the loser reads again and retries
//! (bounded). Positions never repeat or skip, and an append's lines appear together. Lines
//! longer than 64 KiB are cut (an item holds at most 400 KB).
//!
//! # The queues
//!
//! See [`SqsQueue`]: one SQS standard queue per handler with a DLQ, delays beyond SQS's 15
//! minutes as re-delay hops, receipts, dead letters with their reason, and why dedupe keys
//! are ignored.
//!
//! # Testing on moto
//!
//! The conformance suites run on moto with two capabilities declared lacking (see
//! `tests/conformance.rs`). moto also rolls a failed transaction back by restoring a copy of
//! the whole table taken when it began, which undoes any transaction that committed on the
//! same table in between. DynamoDB isolates transactions; tests that race transactions on one
//! table against moto would see lost writes, so the race of two log appends is tested one
//! request at a time.

mod callers;
mod client;
mod clock;
mod dynamo;
mod invoke;
mod jobs;
mod provision;
mod sqs;
#[cfg(test)]
mod test_moto;

pub use callers::{CallerEntry, IamCallers};
pub use client::{sdk_config, ClientOptions};
pub use clock::SystemClock;
pub use dynamo::{ChangeSetError, DynamoStore, StoreOptions};
pub use invoke::{
    envelope, Envelope, InvokeOptions, InvokeQueue, InvokeTargets, Relayed, Schedules,
};
pub use jobs::{
    buildspec, CodeBuildJobs, JobsConfig, EXIT_URL_VARIABLE, JOB_VARIABLE, OUT_URL_VARIABLE,
    SOURCE_URL_VARIABLE,
};
pub use provision::{provision, provision_jobs, ProvisionError, ProvisionOptions, Provisioned};
pub use sqs::{QueueUrls, SqsOptions, SqsQueue, DUE_AT};
