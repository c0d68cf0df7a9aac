//! [`LocalGit`]: a [`GitSource`] over repositories on this machine.
//!
//! Every read (a branch head, a commit, changed and listed files, a file, a checkout, ancestry,
//! merge bases, counts) is done in this process through gix ([`read`]), so a deployment starts
//! no git process. The git CLI is kept for the network only: creating a clone's bare
//! repository and fetching into it. A fetch must authenticate as the user's own git does
//! (credential helpers, `~/.ssh/config` and its agent, `GIT_ASKPASS`, proxies, `insteadOf`
//! rewrites), which only git itself does faithfully; and a fetch is rare (a poll or a pull
//! request) next to the reads, so its process costs little. After each fetch the in-process
//! handle is opened again, so it sees the new refs and packs.
//!
//! Memory: each repository keeps one open handle (its configuration, and its packs' index
//! files mapped from disk), with no object cache and no pack delta cache (gix is built without
//! its pack-cache features, and each call's handle has its object cache off): a deployment
//! reads a few objects once each. Where the answers could differ from git's, they are held to
//! git's by `tests/git_conformance.rs`. One known difference: a checkout writes files as
//! stored, without `.gitattributes` filters (line endings, `ident`, LFS smudging), which
//! `git checkout-index` would apply from the repository's configuration.
//!
//! A repository given by path is the user's own: it is only read, through its git directory,
//! and its index and work tree are never touched. A repository given by URL is fetched into a
//! bare repository under the cache directory (`<cache>/repos/<id>.git`): `head` fetches the
//! branch first, and a commit that is not there yet makes one fetch of the configured branch.
//! `pull_request` fetches a pull request's head (`refs/pull/<pr>/head`) into
//! `refs/gannet/pull/<pr>`, or a commit by its id when no pull request is named.
//! Checked-out trees live in `<cache>/trees/<id>/<sha>`.

mod checkout;
mod command;
mod credentials;
mod names;
mod pull;
mod read;

/// Runs git in `dir` for a test, with a fixed identity and no user or system configuration;
/// its output, trimmed.
#[cfg(test)]
pub(crate) fn test_git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Ada")
        .env("GIT_AUTHOR_EMAIL", "ada@example.com")
        .env("GIT_COMMITTER_NAME", "Ada")
        .env("GIT_COMMITTER_EMAIL", "ada@example.com")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use async_trait::async_trait;
use gannet_domain::ids::{CommitSha, RepoId};
use gannet_domain::ports::{CommitInfo, GitError, GitSource, PullRequestCommits};
use tokio::sync::Mutex;

use command::{CommandError, Git, NETWORK_LIMIT};
use read::ReadError;

/// Where a repository is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A repository on this machine (work tree or bare), read in place.
    Path(PathBuf),
    /// A URL git can fetch from (`https://`, `ssh://`, `file://`, or a local path).
    Url(String),
}

/// One repository as the controller config names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoSpec {
    pub id: RepoId,
    pub location: Location,
    /// The branch deployments follow.
    pub branch: String,
}

/// The repository list could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("repository {0} is listed twice")]
    DuplicateRepo(RepoId),
    #[error("repository {repo}: {branch:?} is not a valid branch name")]
    InvalidBranch { repo: RepoId, branch: String },
    #[error("repository {repo}: {url:?} is not a usable git URL")]
    InvalidUrl { repo: RepoId, url: String },
}

/// A [`GitSource`] over local repositories and clones: reads in process, fetches with `git`.
pub struct LocalGit {
    cache: PathBuf,
    repos: HashMap<RepoId, Repo>,
}

struct Repo {
    id: RepoId,
    branch: String,
    /// This repository's directory name under the cache.
    dir_name: String,
    source: Source,
    /// The open repository, shared by every read; `None` until the first read and again after
    /// each fetch. It holds no object or pack cache (see [`read::local`]): memory stays at the
    /// repository's configuration and the index files of its packs, mapped from disk.
    handle: std::sync::Mutex<Option<Open>>,
}

/// A repository as opened, and the state of its pack directory then.
struct Open {
    repo: gix::ThreadSafeRepository,
    packs: PathBuf,
    /// The pack directory's modification time when opened. gix keeps reading a pack it has
    /// mapped even once a gc has deleted it, so a repository whose packs changed since (a gc
    /// or a repack, by the user or a push) is opened again: a commit the gc removed is then
    /// gone here as well.
    packs_changed: Option<std::time::SystemTime>,
}

/// When `packs` (a pack directory) last changed, or `None` when it cannot be read.
///
/// Asked before every read, so it is one `stat` on the calling thread, not a hop to the
/// blocking pool (which costs more than the call).
fn changed_at(packs: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(packs).and_then(|m| m.modified()).ok()
}

enum Source {
    Path(PathBuf),
    Url {
        url: String,
        git_dir: PathBuf,
        /// Held while the clone is created or fetched into.
        sync: Mutex<()>,
    },
}

impl LocalGit {
    /// Serves `repos`, keeping clones and checked-out trees under `cache` (created on demand).
    pub fn new(cache: impl Into<PathBuf>, repos: Vec<RepoSpec>) -> Result<Self, SetupError> {
        let cache = cache.into();
        let mut by_id = HashMap::with_capacity(repos.len());
        for spec in repos {
            if !names::is_branch_name(&spec.branch) {
                return Err(SetupError::InvalidBranch {
                    repo: spec.id,
                    branch: spec.branch,
                });
            }
            let dir_name = names::dir_name(&spec.id);
            let source = match spec.location {
                Location::Path(path) => Source::Path(path),
                Location::Url(url) if url.is_empty() || url.starts_with('-') => {
                    return Err(SetupError::InvalidUrl {
                        repo: spec.id,
                        url: gannet_domain::report::redact_urls(&url),
                    });
                }
                Location::Url(url) => Source::Url {
                    url,
                    git_dir: cache.join("repos").join(format!("{dir_name}.git")),
                    sync: Mutex::new(()),
                },
            };
            let repo = Repo {
                id: spec.id.clone(),
                branch: spec.branch,
                dir_name,
                source,
                handle: std::sync::Mutex::default(),
            };
            if by_id.insert(spec.id.clone(), repo).is_some() {
                return Err(SetupError::DuplicateRepo(spec.id));
            }
        }
        Ok(Self {
            cache,
            repos: by_id,
        })
    }

    fn repo(&self, id: &RepoId) -> Result<&Repo, GitError> {
        self.repos
            .get(id)
            .ok_or_else(|| GitError::UnknownRepo(id.clone()))
    }

    /// Removes checked-out trees not used for `idle`, keeping the `keep` most recently used
    /// of each repository whatever their age; returns how many went. A tree's last use is
    /// the time of its last [`GitSource::checkout`], so `idle` must be longer than any step
    /// that reads a tree may take (a stage's timeout).
    pub async fn prune_trees(
        &self,
        idle: std::time::Duration,
        keep: usize,
    ) -> std::io::Result<usize> {
        let trees = self.cache.join("trees");
        tokio::task::spawn_blocking(move || crate::prune::trees(&trees, idle, keep))
            .await
            .map_err(std::io::Error::other)?
    }
}

/// `git fetch` of `refspec` from `url` into `git_dir`: its credentials through git's
/// environment, never its arguments, within the network time limit.
fn fetch(url: &str, git_dir: &Path, refspec: String) -> Git {
    let remote = credentials::Remote::parse(url);
    remote
        .authenticate(Git::on(git_dir))
        .limit(NETWORK_LIMIT)
        .args([
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--",
        ])
        .arg(remote.url())
        .arg(refspec)
}

#[async_trait]
impl GitSource for LocalGit {
    async fn head(&self, repo: &RepoId, branch: &str) -> Result<CommitInfo, GitError> {
        let repo = self.repo(repo)?;
        if !names::is_branch_name(branch) {
            return Err(repo.no_branch(branch));
        }
        repo.fetch(&self.cache, branch).await?;
        let name = branch.to_owned();
        repo.read(&self.cache, "read branch", move |r| {
            read::branch_head(r, &name)
        })
        .await?
        .ok_or_else(|| repo.no_branch(branch))
    }

    async fn commit(&self, repo: &RepoId, sha: &CommitSha) -> Result<CommitInfo, GitError> {
        let repo = self.repo(repo)?;
        let sha = sha.clone();
        repo.read_commits(&self.cache, "read commit", move |r| {
            read::commit_info(r, &sha)
        })
        .await
    }

    async fn changed_files(
        &self,
        repo: &RepoId,
        from: &CommitSha,
        to: &CommitSha,
    ) -> Result<Vec<String>, GitError> {
        let repo = self.repo(repo)?;
        let (from, to) = (from.clone(), to.clone());
        repo.read_commits(&self.cache, "diff", move |r| {
            read::changed_files(r, &from, &to)
        })
        .await
    }

    async fn list_files(&self, repo: &RepoId, commit: &CommitSha) -> Result<Vec<String>, GitError> {
        let repo = self.repo(repo)?;
        let commit = commit.clone();
        repo.read_commits(&self.cache, "list files", move |r| {
            read::list_files(r, &commit)
        })
        .await
    }

    async fn read_file(
        &self,
        repo: &RepoId,
        commit: &CommitSha,
        path: &str,
    ) -> Result<Option<Vec<u8>>, GitError> {
        let repo = self.repo(repo)?;
        let commit = commit.clone();
        let path = names::is_tree_path(path).then(|| path.to_owned());
        repo.read_commits(&self.cache, "read file", move |r| match &path {
            Some(path) => read::read_file(r, &commit, path),
            // Not a path in a tree: no file, once the commit is known to be there.
            None => read::require(r, std::slice::from_ref(&commit)).map(|()| None),
        })
        .await
    }

    async fn checkout(&self, repo: &RepoId, commit: &CommitSha) -> Result<PathBuf, GitError> {
        let repo = self.repo(repo)?;
        let target = self
            .cache
            .join("trees")
            .join(&repo.dir_name)
            .join(commit.as_str());
        if tokio::fs::metadata(&target).await.is_ok_and(|m| m.is_dir()) {
            crate::prune::touch(&target);
            return Ok(target);
        }
        let wanted = [commit.clone()];
        repo.read_commits(&self.cache, "checkout", move |r| read::require(r, &wanted))
            .await?;
        let handle = repo.handle(&self.cache).await?;
        let tree = checkout::tree(&handle, &self.cache, &repo.dir_name, commit)
            .await
            .map_err(|e| repo.failed("checkout", e))?;
        crate::prune::touch(&tree);
        Ok(tree)
    }

    async fn is_ancestor(
        &self,
        repo: &RepoId,
        commit: &CommitSha,
        head: &CommitSha,
    ) -> Result<bool, GitError> {
        let repo = self.repo(repo)?;
        let (commit, head) = (commit.clone(), head.clone());
        repo.read_commits(&self.cache, "merge-base", move |r| {
            read::is_ancestor(r, &commit, &head)
        })
        .await
    }

    /// Fetches the branch, then the pull request's head unless it is here already (see
    /// [`Repo::fetch_pull`]), and finds where the two part.
    async fn pull_request(
        &self,
        repo: &RepoId,
        branch: &str,
        pr: Option<u64>,
        head: &CommitSha,
    ) -> Result<PullRequestCommits, GitError> {
        let base = self.head(repo, branch).await?.sha;
        let repo = self.repo(repo)?;
        repo.fetch_pull(&self.cache, pr, head).await?;
        let (asked, branch_head) = (head.clone(), base.clone());
        let (info, merge_base) = repo
            .read(&self.cache, "merge-base", move |r| {
                let info = read::commit_info(r, &asked)?;
                Ok((info, read::merge_base(r, &branch_head, &asked)?))
            })
            .await?;
        let merge_base = merge_base.ok_or_else(|| {
            repo.pull_failed(crate::PullRequestError::NoMergeBase {
                head: head.clone(),
                base: base.clone(),
            })
        })?;
        Ok(PullRequestCommits {
            head: info,
            base,
            merge_base,
        })
    }

    async fn commits_ahead(
        &self,
        repo: &RepoId,
        base: &CommitSha,
        head: &CommitSha,
    ) -> Result<u64, GitError> {
        let repo = self.repo(repo)?;
        let (base, head) = (base.clone(), head.clone());
        repo.read_commits(&self.cache, "rev-list", move |r| {
            read::commits_ahead(r, &base, &head)
        })
        .await
    }
}

impl Repo {
    fn failed(
        &self,
        operation: &'static str,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> GitError {
        GitError::Failed {
            repo: self.id.clone(),
            operation,
            source: Box::new(error),
        }
    }

    fn no_branch(&self, branch: &str) -> GitError {
        GitError::NoBranch {
            repo: self.id.clone(),
            branch: branch.to_owned(),
        }
    }

    fn read_failed(&self, operation: &'static str, error: ReadError) -> GitError {
        match error {
            ReadError::NoCommit(sha) => GitError::NoCommit {
                repo: self.id.clone(),
                commit: sha.to_string(),
            },
            other => self.failed(operation, other),
        }
    }

    /// The open repository: a clone is created and the repository opened on first use, and
    /// opened again after a fetch or when its packs have changed (see [`Open`]).
    async fn handle(&self, cache: &Path) -> Result<gix::ThreadSafeRepository, GitError> {
        let current = self
            .handle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|open| (open.repo.clone(), open.packs.clone(), open.packs_changed));
        if let Some((repo, packs, changed)) = current {
            if changed_at(&packs) == changed {
                return Ok(repo);
            }
        }
        let path = match &self.source {
            Source::Path(path) => tokio::fs::canonicalize(path).await.map_err(|e| {
                self.failed(
                    "open repository",
                    CommandError::io("open repository", path, e),
                )
            })?,
            Source::Url { git_dir, sync, .. } => {
                if !tokio::fs::metadata(git_dir).await.is_ok_and(|m| m.is_dir()) {
                    let _held = sync.lock().await;
                    let label = format!("clone-{}", self.dir_name);
                    checkout::bare_repo(cache, git_dir, &label)
                        .await
                        .map_err(|e| self.failed("clone", e))?;
                }
                git_dir.clone()
            }
        };
        let (opened, packs) = tokio::task::spawn_blocking(move || {
            let opened = read::open(&path)?;
            let packs = opened
                .to_thread_local()
                .objects
                .store_ref()
                .path()
                .join("pack");
            Ok::<_, ReadError>((opened, packs))
        })
        .await
        .map_err(|e| self.failed("open repository", std::io::Error::other(e)))?
        .map_err(|e| self.failed("open repository", e))?;
        let open = Open {
            repo: opened.clone(),
            packs_changed: changed_at(&packs),
            packs,
        };
        *self.handle.lock().unwrap_or_else(PoisonError::into_inner) = Some(open);
        Ok(opened)
    }

    /// Drops the open repository, so the next read opens it again and sees what a fetch
    /// brought (gix keeps the packs and packed refs it has read).
    fn reopen(&self) {
        *self.handle.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// Runs `read` on the repository off the async runtime.
    async fn read<T: Send + 'static>(
        &self,
        cache: &Path,
        operation: &'static str,
        read: impl FnOnce(&gix::Repository) -> Result<T, ReadError> + Send + 'static,
    ) -> Result<T, GitError> {
        let handle = self.handle(cache).await?;
        tokio::task::spawn_blocking(move || read(&read::local(&handle)))
            .await
            .map_err(|e| self.failed(operation, std::io::Error::other(e)))?
            .map_err(|e| self.read_failed(operation, e))
    }

    /// Runs `read`, which names the commits it needs; when one is missing from a clone, the
    /// configured branch is fetched once (the commit may be newer than the clone) and `read`
    /// runs again. Gives [`GitError::NoCommit`] for a commit still missing.
    async fn read_commits<T: Send + 'static>(
        &self,
        cache: &Path,
        operation: &'static str,
        read: impl Fn(&gix::Repository) -> Result<T, ReadError> + Send + Sync + 'static,
    ) -> Result<T, GitError> {
        let read = Arc::new(read);
        let again = Arc::clone(&read);
        match self.read(cache, operation, move |r| read(r)).await {
            Err(GitError::NoCommit { .. }) if matches!(self.source, Source::Url { .. }) => {
                match self.fetch(cache, &self.branch).await {
                    Ok(()) | Err(GitError::NoBranch { .. }) => {}
                    Err(e) => return Err(e),
                }
                self.read(cache, operation, move |r| again(r)).await
            }
            result => result,
        }
    }

    /// Brings `branch` up to date from the remote. Nothing to do for a repository read in place.
    async fn fetch(&self, cache: &Path, branch: &str) -> Result<(), GitError> {
        let Source::Url { url, sync, git_dir } = &self.source else {
            return Ok(());
        };
        self.handle(cache).await?;
        let _held = sync.lock().await;
        let output = fetch(
            url,
            git_dir,
            format!("+refs/heads/{branch}:refs/heads/{branch}"),
        )
        .run()
        .await
        .map_err(|e| self.failed("fetch", e))?;
        self.reopen();
        if output.status.success() {
            Ok(())
        } else if output.stderr.contains("couldn't find remote ref") {
            Err(self.no_branch(branch))
        } else {
            Err(self.failed("fetch", output.failure()))
        }
    }
}
