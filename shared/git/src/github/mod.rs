//! [`GithubSource`]: a [`GitSource`] over GitHub's REST API through octocrab, and
//! [`GithubStatuses`]: deployment states reported as GitHub commit statuses, and
//! [`GithubChecks`]: plan previews shown as GitHub check runs.
//!
//! - `head`: `GET /repos/{o}/{r}/branches/{branch}` (the head commit with its message, author
//!   and committer time); `commit`: `GET /repos/{o}/{r}/git/commits/{sha}`.
//! - `changed_files`: the compare API, falling back to comparing the two trees when the compare
//!   answer may be incomplete (300 files or more, or head not ahead of base); see the `changes`
//!   module.
//! - `pull_request`: nothing to fetch (the API reads any commit of the repository, the heads of
//!   its forks' pull requests included); the branch head as `head` reads it, the pull request's
//!   head as `commit` does, and their merge base from `compare/{branch head}...{head}`
//!   (`merge_base_commit`; a 404 for two commits that both exist means no common ancestor).
//! - `list_files`, `read_file`, `checkout`: the tarball at the commit, unpacked once per sha
//!   under the cache directory (default `/tmp/gannet-github/<repo>/<sha>`); see the `tarball`
//!   module.
//!
//! A 404 on a branch is [`GitError::NoBranch`], on a commit [`GitError::NoCommit`] (after
//! checking that the repository itself is visible, so a wrong name or missing access is not
//! mistaken for a missing commit). Everything else, 5xx, timeouts and rate limits included
//! (the message says when the limit resets), is [`GitError::Failed`], which the handlers retry.

mod auth;
mod changes;
mod checks;
mod client;
mod statuses;
mod tarball;
mod wire;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use async_trait::async_trait;
use gannet_domain::ids::{CommitSha, RepoId};
use gannet_domain::ports::{CommitInfo, GitError, GitSource, PullRequestCommits};

pub use auth::{AuthError, GithubAuth, Secret};
pub use checks::{cut_output, GithubChecks, OUTPUT_LIMIT, TITLE_LIMIT};
pub use client::{GithubClient, DEFAULT_BASE_URI, DEFAULT_TIMEOUT};
pub use statuses::{GithubStatuses, DESCRIPTION_LIMIT};

use changes::{Pending, MAX_TREE_REQUESTS};
use client::ApiError;
use tarball::{Limits, TreeCache, TreeError};
use wire::{Branch, Compare, GitCommit, Tree};

/// Where unpacked trees are kept unless told otherwise.
pub const DEFAULT_CACHE_DIR: &str = "/tmp/gannet-github";

/// The GitHub set-up could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("GitHub base URI {uri:?} is not an absolute http(s) URI")]
    BaseUri { uri: String },
    #[error("GitHub token must be a non-empty string of visible ASCII characters")]
    Token,
    #[error("GitHub App private key is not a usable PEM-encoded RSA private key")]
    PrivateKey,
    #[error("cannot build the GitHub client")]
    Client(#[source] octocrab::Error),
    #[error("the GitHub client must be built inside a Tokio runtime")]
    NoRuntime,
    #[error("repository {repo}: {name:?} is not OWNER/NAME")]
    RepoName { repo: RepoId, name: String },
    #[error("repository {0} is listed twice")]
    DuplicateRepo(RepoId),
}

/// Repositories by id, each as `owner/name`, checked once.
pub(crate) struct Repos(HashMap<RepoId, String>);

impl Repos {
    pub(crate) fn new(repos: Vec<(RepoId, String)>) -> Result<Self, SetupError> {
        let mut by_id = HashMap::with_capacity(repos.len());
        for (id, name) in repos {
            if !is_full_name(&name) {
                return Err(SetupError::RepoName { repo: id, name });
            }
            if by_id.insert(id.clone(), name).is_some() {
                return Err(SetupError::DuplicateRepo(id));
            }
        }
        Ok(Self(by_id))
    }

    pub(crate) fn full_name(&self, id: &RepoId) -> Option<&str> {
        self.0.get(id).map(String::as_str)
    }
}

/// `owner/name` with GitHub's characters only (letters, digits, `-`, `_`, `.`).
fn is_full_name(name: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && p != "."
            && p != ".."
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    matches!(name.split_once('/'), Some((owner, repo)) if part(owner) && part(repo))
}

/// A [`GitSource`] over GitHub's API.
pub struct GithubSource {
    client: GithubClient,
    repos: Repos,
    trees: TreeCache,
}

impl GithubSource {
    /// Serves `repos`, given as `(id, "owner/name")`, keeping unpacked trees under
    /// [`DEFAULT_CACHE_DIR`].
    pub fn new(client: GithubClient, repos: Vec<(RepoId, String)>) -> Result<Self, SetupError> {
        Ok(Self {
            client,
            repos: Repos::new(repos)?,
            trees: TreeCache::new(DEFAULT_CACHE_DIR.into(), Limits::default()),
        })
    }

    /// The same source keeping unpacked trees under `dir` (created on demand).
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.trees = TreeCache::new(dir.into(), Limits::default());
        self
    }

    fn repo<'a>(&'a self, id: &'a RepoId) -> Result<Repo<'a>, GitError> {
        let name = self
            .repos
            .full_name(id)
            .ok_or_else(|| GitError::UnknownRepo(id.clone()))?;
        Ok(Repo {
            id,
            name,
            client: &self.client,
        })
    }
}

/// One configured repository, for the duration of a call.
struct Repo<'a> {
    id: &'a RepoId,
    name: &'a str,
    client: &'a GithubClient,
}

impl Repo<'_> {
    /// `GET compare/{base}...{head}` without its files: how `head` stands to `base`. A
    /// commit GitHub does not know is named.
    async fn compare(&self, base: &CommitSha, head: &CommitSha) -> Result<Compare, GitError> {
        let compared = self
            .client
            .get_json::<Compare>(&self.api(&format!("compare/{base}...{head}?per_page=1")))
            .await;
        match compared {
            Ok(compare) => Ok(compare),
            Err(e) if e.status() == Some(404) || e.status() == Some(422) => {
                self.commit(base).await?;
                self.commit(head).await?;
                Err(self.failed("compare", e))
            }
            Err(e) => Err(self.failed("compare", e)),
        }
    }

    /// `compare/{base}...{head}`'s `merge_base_commit`. GitHub answers 404 both for a commit
    /// it does not know and for two commits with no common ancestor: the commits are read to
    /// tell which.
    async fn merge_base(&self, base: &CommitSha, head: &CommitSha) -> Result<CommitSha, GitError> {
        if base == head {
            return Ok(head.clone());
        }
        let compare = match self.compare(base, head).await {
            Ok(compare) => compare,
            Err(GitError::Failed { source, .. })
                if source
                    .downcast_ref::<ApiError>()
                    .is_some_and(|e| e.status() == Some(404)) =>
            {
                let no_history = crate::PullRequestError::NoMergeBase {
                    head: head.clone(),
                    base: base.clone(),
                };
                return Err(GitError::PullRequest {
                    repo: self.id.clone(),
                    reason: no_history.to_string(),
                });
            }
            Err(e) => return Err(e),
        };
        let sha = compare
            .merge_base_commit
            .ok_or_else(|| self.failed("compare", "the answer has no merge_base_commit"))?
            .sha;
        CommitSha::parse(&sha).map_err(|e| self.failed("compare", e))
    }

    fn failed(
        &self,
        operation: &'static str,
        source: impl Into<gannet_domain::ports::BoxError>,
    ) -> GitError {
        GitError::Failed {
            repo: self.id.clone(),
            operation,
            source: source.into(),
        }
    }

    fn api(&self, rest: &str) -> String {
        format!("/repos/{}/{rest}", self.name)
    }

    /// Turns a "not found" into `missing` when the repository itself is visible; otherwise it
    /// is a failure that names the repository.
    async fn not_found(
        &self,
        operation: &'static str,
        err: ApiError,
        missing: GitError,
    ) -> GitError {
        let gone = err.status() == Some(404) || err.status() == Some(422);
        if !gone {
            return self.failed(operation, err);
        }
        match self
            .client
            .get_json::<serde_json::Value>(&format!("/repos/{}", self.name))
            .await
        {
            Ok(_) => missing,
            Err(probe) => self.failed(operation, probe),
        }
    }

    fn no_commit(&self, sha: &CommitSha) -> GitError {
        GitError::NoCommit {
            repo: self.id.clone(),
            commit: sha.to_string(),
        }
    }

    async fn commit(&self, sha: &CommitSha) -> Result<CommitInfo, GitError> {
        match self
            .client
            .get_json::<GitCommit>(&self.api(&format!("git/commits/{sha}")))
            .await
        {
            Ok(commit) => commit_info(sha, commit).map_err(|e| self.failed("read commit", e)),
            Err(e) => Err(self.not_found("read commit", e, self.no_commit(sha)).await),
        }
    }

    async fn tree(&self, sha: &str, recursive: bool) -> Result<Tree, ApiError> {
        let query = if recursive { "?recursive=1" } else { "" };
        self.client
            .get_json(&self.api(&format!("git/trees/{sha}{query}")))
            .await
    }

    /// Changed paths from the two commits' trees (see the `changes` module).
    async fn tree_diff(
        &self,
        from: &CommitSha,
        to: &CommitSha,
    ) -> Result<BTreeSet<String>, GitError> {
        let op = "compare trees";
        let (a, b) = (self.tree(from.as_str(), true), self.tree(to.as_str(), true));
        let (a, b) = tokio::join!(a, b);
        let a = match a {
            Ok(a) => a,
            Err(e) => return Err(self.not_found(op, e, self.no_commit(from)).await),
        };
        let b = match b {
            Ok(b) => b,
            Err(e) => return Err(self.not_found(op, e, self.no_commit(to)).await),
        };
        if !a.truncated && !b.truncated {
            return Ok(changes::diff_listings(&a.tree, &b.tree));
        }
        tracing::debug!(repo = %self.id, "recursive tree truncated, comparing level by level");
        let mut changed = BTreeSet::new();
        let mut pending = vec![Pending {
            path: String::new(),
            from: Some(from.to_string()),
            to: Some(to.to_string()),
        }];
        let mut requests = 0;
        while let Some(next) = pending.pop() {
            requests += 2;
            if requests > MAX_TREE_REQUESTS {
                return Err(self.failed(op, format!("more than {MAX_TREE_REQUESTS} trees differ")));
            }
            let list = |sha: Option<String>| async move {
                match sha {
                    Some(sha) => self.tree(&sha, false).await.map(|t| t.tree),
                    None => Ok(Vec::new()),
                }
            };
            let (a, b) = tokio::join!(list(next.from), list(next.to));
            let (a, b) = (
                a.map_err(|e| self.failed(op, e))?,
                b.map_err(|e| self.failed(op, e))?,
            );
            pending.extend(changes::diff_level(&next.path, &a, &b, &mut changed));
        }
        Ok(changed)
    }

    async fn tree_dir(&self, trees: &TreeCache, sha: &CommitSha) -> Result<PathBuf, GitError> {
        let dir = dir_name(self.id);
        match trees.tree(self.client, &dir, self.name, sha).await {
            Ok(path) => Ok(path),
            Err(TreeError::Download(e)) => Err(self
                .not_found("download tarball", e, self.no_commit(sha))
                .await),
            Err(e) => Err(self.failed("unpack tarball", e)),
        }
    }
}

fn commit_info(sha: &CommitSha, commit: GitCommit) -> Result<CommitInfo, String> {
    let committer = commit.committer.ok_or("commit has no committer")?;
    let at = wire::parse_rfc3339(&committer.date)
        .ok_or_else(|| format!("committer date {:?} is not RFC 3339", committer.date))?;
    let author = commit.author.map(|a| a.name).unwrap_or(committer.name);
    Ok(CommitInfo {
        sha: sha.clone(),
        message: commit.message.trim_end_matches('\n').to_owned(),
        author,
        at,
    })
}

/// A branch name goes into the URL path: each `/`-separated part percent-encoded.
fn branch_path(branch: &str) -> Option<String> {
    if branch.is_empty()
        || branch
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..")
    {
        return None;
    }
    let mut out = String::new();
    for b in branch.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Some(out)
}

/// A directory name for `repo` that cannot leave its parent: letters, digits, `-`, `_` and
/// (not first) `.` are kept, everything else is written `%XX`.
fn dir_name(repo: &RepoId) -> String {
    let mut name = String::new();
    for (i, b) in repo.as_str().bytes().enumerate() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0) {
            name.push(char::from(b));
        } else {
            name.push_str(&format!("%{b:02X}"));
        }
    }
    name
}

#[async_trait]
impl GitSource for GithubSource {
    async fn head(&self, repo: &RepoId, branch: &str) -> Result<CommitInfo, GitError> {
        let repo = self.repo(repo)?;
        let no_branch = GitError::NoBranch {
            repo: repo.id.clone(),
            branch: branch.to_owned(),
        };
        let Some(path) = branch_path(branch) else {
            return Err(no_branch);
        };
        let found = repo
            .client
            .get_json::<Branch>(&repo.api(&format!("branches/{path}")))
            .await;
        let branch = match found {
            Ok(branch) => branch,
            Err(e) => return Err(repo.not_found("read branch", e, no_branch).await),
        };
        let sha =
            CommitSha::parse(&branch.commit.sha).map_err(|e| repo.failed("read branch", e))?;
        commit_info(&sha, branch.commit.commit).map_err(|e| repo.failed("read branch", e))
    }

    async fn commit(&self, repo: &RepoId, sha: &CommitSha) -> Result<CommitInfo, GitError> {
        self.repo(repo)?.commit(sha).await
    }

    async fn changed_files(
        &self,
        repo: &RepoId,
        from: &CommitSha,
        to: &CommitSha,
    ) -> Result<Vec<String>, GitError> {
        let repo = self.repo(repo)?;
        if from == to {
            return Ok(Vec::new());
        }
        let compared = repo
            .client
            .get_json::<Compare>(&repo.api(&format!("compare/{from}...{to}?per_page=1")))
            .await;
        let compare = match compared {
            Ok(compare) => compare,
            Err(e) if e.status() == Some(404) || e.status() == Some(422) => {
                // Name the commit that is missing.
                repo.commit(from).await?;
                repo.commit(to).await?;
                return Err(repo.failed("compare", e));
            }
            Err(e) => return Err(repo.failed("compare", e)),
        };
        let paths = if changes::compare_is_complete(&compare.status, compare.files.len()) {
            let files = compare.files.iter();
            changes::compare_paths(
                files.map(|f| (f.filename.as_str(), f.previous_filename.as_deref())),
            )
        } else {
            repo.tree_diff(from, to).await?
        };
        Ok(paths.into_iter().collect())
    }

    async fn list_files(&self, repo: &RepoId, commit: &CommitSha) -> Result<Vec<String>, GitError> {
        let repo = self.repo(repo)?;
        let dir = repo.tree_dir(&self.trees, commit).await?;
        tokio::task::spawn_blocking(move || tarball::list_files(&dir))
            .await
            .map_err(|e| repo.failed("list files", std::io::Error::other(e)))?
            .map_err(|e| repo.failed("list files", e))
    }

    async fn read_file(
        &self,
        repo: &RepoId,
        commit: &CommitSha,
        path: &str,
    ) -> Result<Option<Vec<u8>>, GitError> {
        let repo = self.repo(repo)?;
        let dir = repo.tree_dir(&self.trees, commit).await?;
        let path = path.to_owned();
        tokio::task::spawn_blocking(move || tarball::read_file(&dir, &path))
            .await
            .map_err(|e| repo.failed("read file", std::io::Error::other(e)))?
            .map_err(|e| repo.failed("read file", e))
    }

    async fn checkout(&self, repo: &RepoId, commit: &CommitSha) -> Result<PathBuf, GitError> {
        let repo = self.repo(repo)?;
        repo.tree_dir(&self.trees, commit).await
    }

    /// From the compare API: `{head}...{commit}` says how `commit` stands to `head`.
    async fn is_ancestor(
        &self,
        repo: &RepoId,
        commit: &CommitSha,
        head: &CommitSha,
    ) -> Result<bool, GitError> {
        let repo = self.repo(repo)?;
        if commit == head {
            return Ok(true);
        }
        let compare = repo.compare(head, commit).await?;
        Ok(changes::is_behind_or_identical(&compare.status))
    }

    async fn pull_request(
        &self,
        repo: &RepoId,
        branch: &str,
        _pr: Option<u64>,
        head: &CommitSha,
    ) -> Result<PullRequestCommits, GitError> {
        let (base, info) = tokio::join!(self.head(repo, branch), self.commit(repo, head));
        let (base, info) = (base?.sha, info?);
        let repo = self.repo(repo)?;
        let merge_base = repo.merge_base(&base, head).await?;
        Ok(PullRequestCommits {
            head: info,
            base,
            merge_base,
        })
    }

    /// From the compare API: `{base}...{head}`'s `ahead_by`.
    async fn commits_ahead(
        &self,
        repo: &RepoId,
        base: &CommitSha,
        head: &CommitSha,
    ) -> Result<u64, GitError> {
        let repo = self.repo(repo)?;
        if base == head {
            return Ok(0);
        }
        Ok(repo.compare(base, head).await?.ahead_by)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for good in ["acme/shop", "a-b/c_d.e", "A1/.github"] {
            assert!(is_full_name(good), "{good}");
        }
        for bad in ["acme", "acme/", "/shop", "a/b/c", "a/..", "a b/c", "a/c?x"] {
            assert!(!is_full_name(bad), "{bad}");
        }
        let check = |branch: &str, want: Option<&str>| {
            assert_eq!(branch_path(branch).as_deref(), want, "{branch}");
        };
        check("main", Some("main"));
        check("release/1.2", Some("release/1.2"));
        check("a b#c?", Some("a%20b%23c%3F"));
        check("a/../b", None);
        check("", None);
        assert_eq!(dir_name(&RepoId::parse("..").unwrap()), "%2E.");
        assert_eq!(dir_name(&RepoId::parse("shop").unwrap()), "shop");
    }
}
