//! SQLite Store and Queue for the embedded runtime, its API tokens ([`ApiTokens`]), and the
//! port conformance suites.
//!
//! [`SqliteRuntime`] keeps apps, repositories, deployments, stage logs, webhook deliveries and
//! the queues in one SQLite file (WAL). A [`Changes`](gannet_domain::ports::Changes) set and the
//! messages it sends commit in one transaction, so a message exists only if its state does.

mod clock;
mod error;
mod jobs;
mod queue;
mod runtime;
mod schema;
mod store;
mod tokens;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use clock::SystemClock;
pub use error::OpenError;
pub use jobs::{
    sandbox, Landlock, ProcessJobs, RunAs, Sandbox, LAUNCH_GRACE, MARKER as JOB_MARKER, OUTPUT_CAP,
};
pub use runtime::{RuntimeOptions, SqliteRuntime};
pub use tokens::{ApiTokens, MIN_TOKEN_LEN};
