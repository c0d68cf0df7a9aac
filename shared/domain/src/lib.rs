//! gannet's domain: the ids, a deployment and its stages, the state machine that moves a
//! deployment on a step's outcome, apps and their drift, and the port traits the runtimes
//! implement. It parses no config, knows no plugin and does no IO.

pub mod app;
pub mod callers;
pub mod chain;
pub mod deployment;
pub mod drift;
pub mod duration;
#[cfg(any(test, feature = "test-util"))]
pub mod fixture;
pub mod ids;
pub mod machine;
pub mod ports;
pub mod preview;
pub mod report;

pub use duration::GoDuration;
pub use ids::{AppId, ChainId, CommitSha, DeploymentId, PreviewId, RepoId, StageId};
