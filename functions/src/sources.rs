//! The git source of each configured repository: the GitHub API for `"github"` entries, the
//! local git CLI for `"url"` entries (tests and local runs; Lambda images have no git).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use gannet_controller::RepoSettings;
use gannet_domain::ports::{CommitInfo, GitError, GitSource, PullRequestCommits};
use gannet_domain::{CommitSha, RepoId};
use gannet_git::github::{GithubClient, GithubSource};
use gannet_git::{LocalGit, Location, RepoSpec};

use crate::StartError;

/// A [`GitSource`] that hands each call to its repository's own source.
pub(crate) struct RepoSources {
    by_repo: HashMap<RepoId, Arc<dyn GitSource>>,
}

impl RepoSources {
    /// The sources for `repos`: local clones and trees go under `git_cache`; GitHub
    /// repositories are read through `github` (`None` for a function that reads no git, whose
    /// GitHub repositories are then unknown to it).
    pub(crate) fn new(
        repos: &[RepoSettings],
        git_cache: &Path,
        github: Option<GithubClient>,
    ) -> Result<Self, StartError> {
        let mut local = Vec::new();
        let mut on_github = Vec::new();
        for repo in repos {
            match (&repo.github, &repo.url) {
                (_, Some(url)) => local.push(RepoSpec {
                    id: repo.id.clone(),
                    location: location(url),
                    branch: repo.branch.clone(),
                }),
                (Some(name), None) => on_github.push((repo.id.clone(), name.clone())),
                (None, None) => {
                    return Err(StartError::NoRepoSource {
                        repo: repo.id.clone(),
                    })
                }
            }
        }
        let mut by_repo: HashMap<RepoId, Arc<dyn GitSource>> = HashMap::new();
        if !local.is_empty() {
            let ids: Vec<RepoId> = local.iter().map(|r| r.id.clone()).collect();
            let git: Arc<dyn GitSource> = Arc::new(LocalGit::new(git_cache.to_path_buf(), local)?);
            by_repo.extend(ids.into_iter().map(|id| (id, git.clone())));
        }
        if let Some(client) = github.filter(|_| !on_github.is_empty()) {
            let ids: Vec<RepoId> = on_github.iter().map(|(id, _)| id.clone()).collect();
            let git: Arc<dyn GitSource> =
                Arc::new(GithubSource::new(client, on_github).map_err(StartError::Github)?);
            by_repo.extend(ids.into_iter().map(|id| (id, git.clone())));
        }
        Ok(Self { by_repo })
    }

    fn source(&self, repo: &RepoId) -> Result<&Arc<dyn GitSource>, GitError> {
        self.by_repo
            .get(repo)
            .ok_or_else(|| GitError::UnknownRepo(repo.clone()))
    }
}

/// An absolute path is a repository on this machine, read in place; anything else is cloned.
fn location(url: &str) -> Location {
    if url.starts_with('/') {
        Location::Path(PathBuf::from(url))
    } else {
        Location::Url(url.to_owned())
    }
}

#[async_trait]
impl GitSource for RepoSources {
    async fn head(&self, repo: &RepoId, branch: &str) -> Result<CommitInfo, GitError> {
        self.source(repo)?.head(repo, branch).await
    }

    async fn commit(&self, repo: &RepoId, sha: &CommitSha) -> Result<CommitInfo, GitError> {
        self.source(repo)?.commit(repo, sha).await
    }

    async fn changed_files(
        &self,
        repo: &RepoId,
        from: &CommitSha,
        to: &CommitSha,
    ) -> Result<Vec<String>, GitError> {
        self.source(repo)?.changed_files(repo, from, to).await
    }

    async fn list_files(&self, repo: &RepoId, commit: &CommitSha) -> Result<Vec<String>, GitError> {
        self.source(repo)?.list_files(repo, commit).await
    }

    async fn read_file(
        &self,
        repo: &RepoId,
        commit: &CommitSha,
        path: &str,
    ) -> Result<Option<Vec<u8>>, GitError> {
        self.source(repo)?.read_file(repo, commit, path).await
    }

    async fn checkout(&self, repo: &RepoId, commit: &CommitSha) -> Result<PathBuf, GitError> {
        self.source(repo)?.checkout(repo, commit).await
    }

    async fn is_ancestor(
        &self,
        repo: &RepoId,
        commit: &CommitSha,
        head: &CommitSha,
    ) -> Result<bool, GitError> {
        self.source(repo)?.is_ancestor(repo, commit, head).await
    }

    async fn pull_request(
        &self,
        repo: &RepoId,
        branch: &str,
        pr: Option<u64>,
        head: &CommitSha,
    ) -> Result<PullRequestCommits, GitError> {
        self.source(repo)?
            .pull_request(repo, branch, pr, head)
            .await
    }

    async fn commits_ahead(
        &self,
        repo: &RepoId,
        base: &CommitSha,
        head: &CommitSha,
    ) -> Result<u64, GitError> {
        self.source(repo)?.commits_ahead(repo, base, head).await
    }
}
