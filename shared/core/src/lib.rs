//! gannet's core: the domain types, the decisions (trigger, plan, step outcome) and the port
//! traits the runtimes implement. Nothing here does IO.

pub mod app;
pub mod bounded;
pub mod callers;
pub mod check;
pub mod config;
pub mod deployment;
pub mod drift;
pub mod duration;
#[cfg(any(test, feature = "test-util"))]
pub mod fixture;
pub mod glob;
pub mod ids;
pub mod jobs;
pub mod lifecycle;
pub mod machine;
pub mod planner;
pub mod plugin;
pub mod ports;
pub mod presentation;
pub mod registry;
pub mod report;
pub mod stage_meta;
pub mod stage_options;
pub mod targets;
#[cfg(feature = "test-util")]
pub mod test_run;
pub mod tree;
pub mod trigger;
pub mod typed;
pub mod yaml;

pub use duration::GoDuration;
pub use ids::{AppId, CommitSha, DeploymentId, RepoId, StageId};
