//! [`LocalGit`]: a [`GitSource`] over repositories on this machine, driven through the git CLI.
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

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::PoisonError;

use async_trait::async_trait;
use gannet_domain::duration::Millis;
use gannet_domain::ids::{CommitSha, RepoId};
use gannet_domain::ports::{CommitInfo, GitError, GitSource, PullRequestCommits};
use tokio::sync::{Mutex, OnceCell};

use command::{CommandError, Git, Output, NETWORK_LIMIT};

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

/// A [`GitSource`] over local repositories and clones, using the `git` CLI.
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
    /// Commits already seen here, so that each is looked up with git once, not before every
    /// command (commits do not change). Bounded by [`KNOWN_COMMITS`].
    known: std::sync::Mutex<HashSet<CommitSha>>,
}

/// How many known commits a repository remembers; past that the set starts again. A trigger,
/// plan and stage use the branch head, the last triggered and the running commit.
const KNOWN_COMMITS: usize = 64;

enum Source {
    Path {
        path: PathBuf,
        git_dir: OnceCell<PathBuf>,
    },
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
                Location::Path(path) => Source::Path {
                    path,
                    git_dir: OnceCell::new(),
                },
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
                known: std::sync::Mutex::default(),
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
        let git_dir = repo.git_dir(&self.cache).await?;
        repo.fetch(&git_dir, branch).await?;
        if let Some(info) = repo.head_commit(&git_dir, branch).await {
            repo.remember(&info.sha);
            return Ok(info);
        }
        let sha = repo
            .resolve(&git_dir, &format!("refs/heads/{branch}^{{commit}}"))
            .await?
            .ok_or_else(|| repo.no_branch(branch))?;
        repo.remember(&sha);
        repo.commit_info(&git_dir, &sha).await
    }

    async fn commit(&self, repo: &RepoId, sha: &CommitSha) -> Result<CommitInfo, GitError> {
        let repo = self.repo(repo)?;
        let git_dir = repo.git_dir(&self.cache).await?;
        repo.require_commit(&git_dir, sha).await?;
        let info = repo.commit_info(&git_dir, sha).await;
        repo.recheck(&git_dir, &[sha], info).await
    }

    async fn changed_files(
        &self,
        repo: &RepoId,
        from: &CommitSha,
        to: &CommitSha,
    ) -> Result<Vec<String>, GitError> {
        let repo = self.repo(repo)?;
        let git_dir = repo.git_dir(&self.cache).await?;
        repo.require_commit(&git_dir, from).await?;
        repo.require_commit(&git_dir, to).await?;
        let out = Git::on(&git_dir)
            .args(["diff-tree", "-r", "-z", "--no-renames", "--name-only"])
            .args([from.as_str(), to.as_str()])
            .stdout()
            .await
            .map_err(|e| repo.failed("diff", e));
        let out = repo.recheck(&git_dir, &[from, to], out).await?;
        Ok(nul_separated(&out))
    }

    async fn list_files(&self, repo: &RepoId, commit: &CommitSha) -> Result<Vec<String>, GitError> {
        let repo = self.repo(repo)?;
        let git_dir = repo.git_dir(&self.cache).await?;
        repo.require_commit(&git_dir, commit).await?;
        let out = Git::on(&git_dir)
            .args(["ls-tree", "-r", "-z", "--full-tree", commit.as_str()])
            .stdout()
            .await
            .map_err(|e| repo.failed("list files", e));
        let out = repo.recheck(&git_dir, &[commit], out).await?;
        Ok(tree_entries(&out)
            .filter(|e| e.kind == "blob")
            .map(|e| e.path)
            .collect())
    }

    async fn read_file(
        &self,
        repo: &RepoId,
        commit: &CommitSha,
        path: &str,
    ) -> Result<Option<Vec<u8>>, GitError> {
        let repo = self.repo(repo)?;
        let git_dir = repo.git_dir(&self.cache).await?;
        if names::is_tree_path(path) {
            if let Some(content) = repo.blob_at(&git_dir, commit, path).await {
                return Ok(Some(content));
            }
        }
        repo.require_commit(&git_dir, commit).await?;
        if !names::is_tree_path(path) {
            return Ok(None);
        }
        let out = Git::on(&git_dir)
            .args(["ls-tree", "-z", "--full-tree", commit.as_str(), "--", path])
            .stdout()
            .await
            .map_err(|e| repo.failed("read file", e));
        let out = repo.recheck(&git_dir, &[commit], out).await?;
        let Some(blob) = tree_entries(&out).find(|e| e.kind == "blob" && e.path == path) else {
            return Ok(None);
        };
        let content = Git::on(&git_dir)
            .args(["cat-file", "blob", blob.object.as_str()])
            .stdout()
            .await
            .map_err(|e| repo.failed("read file", e))?;
        Ok(Some(content))
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
        let git_dir = repo.git_dir(&self.cache).await?;
        repo.require_commit(&git_dir, commit).await?;
        let tree = checkout::tree(&git_dir, &self.cache, &repo.dir_name, commit)
            .await
            .map_err(|e| repo.failed("checkout", e));
        let tree = repo.recheck(&git_dir, &[commit], tree).await?;
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
        let git_dir = repo.git_dir(&self.cache).await?;
        repo.require_commit(&git_dir, commit).await?;
        repo.require_commit(&git_dir, head).await?;
        let output = Git::on(&git_dir)
            .args([
                "merge-base",
                "--is-ancestor",
                commit.as_str(),
                head.as_str(),
            ])
            .run()
            .await
            .map_err(|e| repo.failed("merge-base", e))?;
        // 0: an ancestor (or the head itself); 1: not one; anything else is a failure, which
        // `recheck` turns into NoCommit when a known commit has since gone from the repository.
        let answer = match output.status.code() {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(repo.failed("merge-base", output.failure())),
        };
        repo.recheck(&git_dir, &[commit, head], answer).await
    }

    /// Fetches the branch, then the pull request's head unless it is here already (see
    /// [`Repo::fetch_pull`]), and finds where the two part with `git merge-base`.
    async fn pull_request(
        &self,
        repo: &RepoId,
        branch: &str,
        pr: Option<u64>,
        head: &CommitSha,
    ) -> Result<PullRequestCommits, GitError> {
        let base = self.head(repo, branch).await?.sha;
        let repo = self.repo(repo)?;
        let git_dir = repo.git_dir(&self.cache).await?;
        repo.fetch_pull(&git_dir, pr, head).await?;
        let info = repo.commit_info(&git_dir, head).await;
        let info = repo.recheck(&git_dir, &[head], info).await?;
        let merge_base = repo.merge_base(&git_dir, &base, head).await;
        let merge_base = repo.recheck(&git_dir, &[&base, head], merge_base).await?;
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
        let git_dir = repo.git_dir(&self.cache).await?;
        repo.require_commit(&git_dir, base).await?;
        repo.require_commit(&git_dir, head).await?;
        let range = format!("{base}..{head}");
        let counted = Git::on(&git_dir)
            .args(["rev-list", "--count", range.as_str()])
            .stdout()
            .await
            .map_err(|e| repo.failed("rev-list", e))
            .and_then(|out| {
                String::from_utf8_lossy(&out)
                    .trim()
                    .parse::<u64>()
                    .map_err(|e| {
                        let detail = e.to_string();
                        let args = "rev-list --count".to_owned();
                        repo.failed("rev-list", CommandError::Output { args, detail })
                    })
            });
        repo.recheck(&git_dir, &[base, head], counted).await
    }
}

impl Repo {
    fn failed(&self, operation: &'static str, error: CommandError) -> GitError {
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

    /// The git directory to run commands against; a clone is created on first use.
    async fn git_dir(&self, cache: &Path) -> Result<PathBuf, GitError> {
        match &self.source {
            Source::Path { path, git_dir } => git_dir
                .get_or_try_init(|| find_git_dir(path))
                .await
                .cloned()
                .map_err(|e| self.failed("open repository", e)),
            Source::Url { git_dir, sync, .. } => {
                if tokio::fs::metadata(git_dir).await.is_ok_and(|m| m.is_dir()) {
                    return Ok(git_dir.clone());
                }
                let _held = sync.lock().await;
                let label = format!("clone-{}", self.dir_name);
                checkout::bare_repo(cache, git_dir, &label)
                    .await
                    .map_err(|e| self.failed("clone", e))?;
                Ok(git_dir.clone())
            }
        }
    }

    /// Brings `branch` up to date from the remote. Nothing to do for a repository read in place.
    async fn fetch(&self, git_dir: &Path, branch: &str) -> Result<(), GitError> {
        let Source::Url { url, sync, .. } = &self.source else {
            return Ok(());
        };
        let _held = sync.lock().await;
        let output = fetch(
            url,
            git_dir,
            format!("+refs/heads/{branch}:refs/heads/{branch}"),
        )
        .run()
        .await
        .map_err(|e| self.failed("fetch", e))?;
        if output.status.success() {
            Ok(())
        } else if output.stderr.contains("couldn't find remote ref") {
            Err(self.no_branch(branch))
        } else {
            Err(self.failed("fetch", output.failure()))
        }
    }

    /// The commit `spec` names, or `None` when it names nothing.
    async fn resolve(&self, git_dir: &Path, spec: &str) -> Result<Option<CommitSha>, GitError> {
        let output = Git::on(git_dir)
            .args(["rev-parse", "--verify", "--quiet", spec])
            .run()
            .await
            .map_err(|e| self.failed("resolve", e))?;
        if !output.status.success() {
            // `--quiet` makes a missing object exit 1 silently; anything else is a failure.
            return if output.status.code() == Some(1) && output.stderr.trim().is_empty() {
                Ok(None)
            } else {
                Err(self.failed("resolve", output.failure()))
            };
        }
        let text = String::from_utf8_lossy(&output.stdout);
        CommitSha::parse(text.trim())
            .map(Some)
            .map_err(|e| self.failed("resolve", output.unexpected(e.to_string())))
    }

    /// Fails with [`GitError::NoCommit`] unless `sha` is a commit here. A clone fetches its
    /// configured branch once before giving up, in case the commit is newer than the clone.
    /// A commit seen before is taken as present without asking git.
    async fn require_commit(&self, git_dir: &Path, sha: &CommitSha) -> Result<(), GitError> {
        if self.is_known(sha) {
            return Ok(());
        }
        let found = self.find_commit(git_dir, sha).await;
        if found.is_ok() {
            self.remember(sha);
        }
        found
    }

    fn is_known(&self, sha: &CommitSha) -> bool {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(sha)
    }

    fn remember(&self, sha: &CommitSha) {
        let mut known = self.known.lock().unwrap_or_else(PoisonError::into_inner);
        if known.len() >= KNOWN_COMMITS {
            known.clear();
        }
        known.insert(sha.clone());
    }

    /// The `result` of a command on `commits`. When the command failed, each commit is looked
    /// up with git again, so that one that has gone since it was seen (a force push, then a gc)
    /// gives [`GitError::NoCommit`] as it would have without the known-commits set.
    async fn recheck<T>(
        &self,
        git_dir: &Path,
        commits: &[&CommitSha],
        result: Result<T, GitError>,
    ) -> Result<T, GitError> {
        let Err(err @ GitError::Failed { .. }) = result else {
            return result;
        };
        for sha in commits {
            self.known
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(*sha);
            self.require_commit(git_dir, sha).await?;
        }
        Err(err)
    }

    /// Looks `sha` up with git; see [`Repo::require_commit`].
    async fn find_commit(&self, git_dir: &Path, sha: &CommitSha) -> Result<(), GitError> {
        let spec = format!("{sha}^{{commit}}");
        if self.resolve(git_dir, &spec).await?.is_some() {
            return Ok(());
        }
        if matches!(self.source, Source::Url { .. }) {
            match self.fetch(git_dir, &self.branch).await {
                Ok(()) | Err(GitError::NoBranch { .. }) => {}
                Err(e) => return Err(e),
            }
            if self.resolve(git_dir, &spec).await?.is_some() {
                return Ok(());
            }
        }
        Err(GitError::NoCommit {
            repo: self.id.clone(),
            commit: sha.to_string(),
        })
    }

    /// The branch head and its commit in one git run, or `None` when that run fails; the
    /// caller then looks the branch up step by step to name what is wrong.
    async fn head_commit(&self, git_dir: &Path, branch: &str) -> Option<CommitInfo> {
        let output = Git::on(git_dir)
            .args(["log", "-1", "--no-show-signature"])
            .arg(format!("--format=%H%x00{COMMIT_FORMAT}"))
            .arg(format!("refs/heads/{branch}"))
            .arg("--")
            .run()
            .await
            .ok()?;
        if !output.status.success() {
            return None;
        }
        let nul = output.stdout.iter().position(|b| *b == 0)?;
        let sha = CommitSha::parse(std::str::from_utf8(&output.stdout[..nul]).ok()?).ok()?;
        parse_commit(&sha, &output.stdout[nul + 1..], &output).ok()
    }

    /// The content of the blob at `path` in `commit` in one git run, or `None` when that run
    /// fails (no such commit or file, not a blob); the caller then finds out which.
    async fn blob_at(&self, git_dir: &Path, commit: &CommitSha, path: &str) -> Option<Vec<u8>> {
        let output = Git::on(git_dir)
            .args(["cat-file", "blob"])
            .arg(format!("{commit}^{{commit}}:{path}"))
            .run()
            .await
            .ok()?;
        output.status.success().then_some(output.stdout)
    }

    async fn commit_info(&self, git_dir: &Path, sha: &CommitSha) -> Result<CommitInfo, GitError> {
        let output = Git::on(git_dir)
            .args([
                "log",
                "-1",
                "--no-show-signature",
                &format!("--format={COMMIT_FORMAT}"),
            ])
            .args([sha.as_str(), "--"])
            .run()
            .await
            .map_err(|e| self.failed("read commit", e))?;
        if !output.status.success() {
            return Err(self.failed("read commit", output.failure()));
        }
        parse_commit(sha, &output.stdout, &output).map_err(|e| self.failed("read commit", e))
    }
}

/// The `git log --format` of a commit's author, time and message, NUL-separated.
const COMMIT_FORMAT: &str = "%an%x00%ct%x00%B";

/// Parses [`COMMIT_FORMAT`] output (`text`, part of `output`'s stdout).
fn parse_commit(sha: &CommitSha, text: &[u8], output: &Output) -> Result<CommitInfo, CommandError> {
    let text = String::from_utf8_lossy(text);
    let mut fields = text.splitn(3, '\0');
    let (Some(author), Some(time), Some(message)) = (fields.next(), fields.next(), fields.next())
    else {
        return Err(output.unexpected("expected author, time and message"));
    };
    let seconds: u64 = time
        .parse()
        .map_err(|_| output.unexpected(format!("commit time {time:?} is not a number")))?;
    Ok(CommitInfo {
        sha: sha.clone(),
        message: message.trim_end_matches('\n').to_owned(),
        author: author.to_owned(),
        at: Millis(seconds.saturating_mul(1000)),
    })
}

/// The git directory of the repository at `path`, which must be the repository itself (git
/// is not allowed to look in parent directories).
async fn find_git_dir(path: &Path) -> Result<PathBuf, CommandError> {
    let path = tokio::fs::canonicalize(path)
        .await
        .map_err(|e| CommandError::io("open repository", path, e))?;
    let mut git = Git::in_dir(&path);
    if let Some(parent) = path.parent() {
        git = git.env("GIT_CEILING_DIRECTORIES", parent.as_os_str());
    }
    let out = git
        .args(["rev-parse", "--absolute-git-dir"])
        .stdout()
        .await?;
    let text = String::from_utf8_lossy(&out);
    Ok(PathBuf::from(text.trim_end_matches('\n')))
}

fn nul_separated(out: &[u8]) -> Vec<String> {
    out.split(|b| *b == 0)
        .filter(|part| !part.is_empty())
        .map(|part| String::from_utf8_lossy(part).into_owned())
        .collect()
}

struct TreeEntry {
    kind: String,
    object: String,
    path: String,
}

/// Parses `ls-tree -z` output: `<mode> SP <type> SP <object> TAB <path> NUL` per entry.
fn tree_entries(out: &[u8]) -> impl Iterator<Item = TreeEntry> + '_ {
    out.split(|b| *b == 0).filter_map(|entry| {
        let tab = entry.iter().position(|b| *b == b'\t')?;
        let (meta, path) = (&entry[..tab], &entry[tab + 1..]);
        let meta = std::str::from_utf8(meta).ok()?;
        let mut parts = meta.split(' ');
        let (_mode, kind, object) = (parts.next()?, parts.next()?, parts.next()?);
        Some(TreeEntry {
            kind: kind.to_owned(),
            object: object.to_owned(),
            path: String::from_utf8_lossy(path).into_owned(),
        })
    })
}
