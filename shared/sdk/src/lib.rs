//! gannet's plugin SDK, and what drives the plugins: the plugin faces and the registry, typed
//! stage options, deploy targets, the job port, reads of an app's files that stay inside the
//! checkout, how a stage is presented, the planner (which asks the plugins for stages) and
//! `config check`. Below it: `gannet-domain` (deployments and the machine) and
//! `gannet-config` (PipeCD's config).

pub mod check;
#[cfg(any(test, feature = "test-util"))]
pub mod fixture;
pub mod jobs;
pub mod lifecycle;
pub mod planner;
pub mod plugin;
pub mod presentation;
pub mod previews;
pub mod registry;
pub mod sealed;
pub mod stage_meta;
pub mod stage_options;
pub mod targets;
#[cfg(feature = "test-util")]
pub mod test_run;
pub mod tree;
