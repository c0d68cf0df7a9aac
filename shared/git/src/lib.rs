//! Git sources (local repository via the git CLI, GitHub API), GitHub commit statuses, and GitHub webhook signature checks and payloads.

pub mod github;
mod local;
pub mod webhook;

pub use local::{LocalGit, Location, RepoSpec, SetupError};
