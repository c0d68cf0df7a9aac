//! Git sources (local repository via the git CLI) and GitHub webhook signature checks and payloads.

mod local;
pub mod webhook;

pub use local::{LocalGit, Location, RepoSpec, SetupError};
