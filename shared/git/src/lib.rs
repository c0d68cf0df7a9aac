//! Git sources (local repository via the git CLI) and GitHub webhook signature checks and payloads.
