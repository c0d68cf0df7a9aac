//! A pull request's head made readable in a clone: `refs/pull/<pr>/head` fetched into
//! `refs/gannet/pull/<pr>` (or, without a pull request, the commit fetched by its id), and
//! where it parts from the branch (`git merge-base`).

use std::path::Path;

use gannet_domain::ids::CommitSha;
use gannet_domain::ports::GitError;

use super::command::Git;
use super::{Repo, Source};
use crate::PullRequestError;

/// Where a pull request's head is kept in a clone, so it stays there until the pull request
/// moves on (the next fetch of it replaces the ref).
pub(crate) fn local_ref(pr: u64) -> String {
    format!("refs/gannet/pull/{pr}")
}

impl Repo {
    fn pull_failed(&self, error: PullRequestError) -> GitError {
        GitError::PullRequest {
            repo: self.id.clone(),
            reason: error.to_string(),
        }
    }

    /// Makes `head` readable: nothing to do when it is here already; otherwise a clone fetches
    /// pull request `pr`'s head (which must still be `head`), or `head` itself when no pull
    /// request is named. A repository read in place is never fetched into.
    pub(crate) async fn fetch_pull(
        &self,
        git_dir: &Path,
        pr: Option<u64>,
        head: &CommitSha,
    ) -> Result<(), GitError> {
        let spec = format!("{head}^{{commit}}");
        if self.is_known(head) || self.resolve(git_dir, &spec).await?.is_some() {
            self.remember(head);
            return Ok(());
        }
        let Source::Url { url, sync, .. } = &self.source else {
            return Err(GitError::NoCommit {
                repo: self.id.clone(),
                commit: head.to_string(),
            });
        };
        let _held = sync.lock().await;
        let refspec = match pr {
            Some(pr) => format!("+refs/pull/{pr}/head:{}", local_ref(pr)),
            None => head.to_string(),
        };
        let output = super::fetch(url, git_dir, refspec)
            .run()
            .await
            .map_err(|e| self.failed("fetch pull request", e))?;
        if !output.status.success() {
            let stderr = &output.stderr;
            return Err(match pr {
                Some(pr) if stderr.contains("couldn't find remote ref") => {
                    self.pull_failed(PullRequestError::NotFound { pr })
                }
                None if stderr.contains("not our ref")
                    || stderr.contains("unadvertised object")
                    || stderr.contains("couldn't find remote ref") =>
                {
                    self.pull_failed(PullRequestError::Unfetchable { head: head.clone() })
                }
                _ => self.failed("fetch pull request", output.failure()),
            });
        }
        if let Some(pr) = pr {
            let fetched = self
                .resolve(git_dir, &format!("{}^{{commit}}", local_ref(pr)))
                .await?;
            match fetched {
                Some(now) if now == *head => {}
                Some(now) => {
                    return Err(self.pull_failed(PullRequestError::HeadMoved {
                        pr,
                        asked: head.clone(),
                        now,
                    }))
                }
                None => return Err(self.pull_failed(PullRequestError::NotFound { pr })),
            }
        }
        self.remember(head);
        Ok(())
    }

    /// The newest commit both `base` and `head` descend from.
    pub(crate) async fn merge_base(
        &self,
        git_dir: &Path,
        base: &CommitSha,
        head: &CommitSha,
    ) -> Result<CommitSha, GitError> {
        let output = Git::on(git_dir)
            .args(["merge-base", base.as_str(), head.as_str()])
            .run()
            .await
            .map_err(|e| self.failed("merge-base", e))?;
        // 1 with nothing printed: the two share no commit.
        if output.status.code() == Some(1) && output.stdout.is_empty() {
            return Err(self.pull_failed(PullRequestError::NoMergeBase {
                head: head.clone(),
                base: base.clone(),
            }));
        }
        if !output.status.success() {
            return Err(self.failed("merge-base", output.failure()));
        }
        let text = String::from_utf8_lossy(&output.stdout);
        CommitSha::parse(text.trim())
            .map_err(|e| self.failed("merge-base", output.unexpected(e.to_string())))
    }
}
