//! A pull request's head made readable in a clone: `refs/pull/<pr>/head` fetched into
//! `refs/gannet/pull/<pr>` (or, without a pull request, the commit fetched by its id).

use std::path::Path;

use gannet_domain::ids::CommitSha;
use gannet_domain::ports::GitError;

use super::{read, Repo, Source};
use crate::PullRequestError;

/// Where a pull request's head is kept in a clone, so it stays there until the pull request
/// moves on (the next fetch of it replaces the ref).
pub(crate) fn local_ref(pr: u64) -> String {
    format!("refs/gannet/pull/{pr}")
}

impl Repo {
    pub(crate) fn pull_failed(&self, error: PullRequestError) -> GitError {
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
        cache: &Path,
        pr: Option<u64>,
        head: &CommitSha,
    ) -> Result<(), GitError> {
        let wanted = [head.clone()];
        let present = self
            .read(cache, "read commit", move |r| read::require(r, &wanted))
            .await;
        let (Err(GitError::NoCommit { .. }), Source::Url { url, sync, git_dir }) =
            (&present, &self.source)
        else {
            return present;
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
        self.reopen();
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
        let Some(pr) = pr else {
            return Ok(());
        };
        let fetched = self
            .read(cache, "resolve", move |r| {
                read::commit_at_ref(r, &local_ref(pr))
            })
            .await?;
        match fetched {
            Some(now) if now == *head => Ok(()),
            Some(now) => Err(self.pull_failed(PullRequestError::HeadMoved {
                pr,
                asked: head.clone(),
                now,
            })),
            None => Err(self.pull_failed(PullRequestError::NotFound { pr })),
        }
    }
}
