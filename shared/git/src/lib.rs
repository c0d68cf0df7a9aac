//! Git sources (local repository read in process through gix, fetched with the git CLI; GitHub API), GitHub commit statuses and check runs. GitHub webhooks (signatures, payloads) are pure and live in `gannet_events::github`.

pub mod github;
mod local;
mod prune;
mod pull;

pub use local::{LocalGit, Location, RepoSpec, SetupError};
pub use pull::PullRequestError;
