//! Why a pull request's head could not be made readable ([`GitSource::pull_request`]). It is
//! the source of a [`GitError::Failed`]; callers that act on the reason (a head that moved on
//! is superseded, not retried) find it with `downcast_ref`.
//!
//! [`GitSource::pull_request`]: gannet_domain::ports::GitSource::pull_request
//! [`GitError::Failed`]: gannet_domain::ports::GitError::Failed

use gannet_domain::ids::CommitSha;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PullRequestError {
    /// The remote publishes no `refs/pull/<pr>/head`: no such pull request, or a remote that
    /// is not a GitHub-like host.
    #[error("pull request #{pr} not found: the remote has no refs/pull/{pr}/head")]
    NotFound { pr: u64 },
    /// The pull request was pushed to again since `asked` was named.
    #[error(
        "the pull request's head moved to {now}: {asked} is no longer pull request #{pr}'s head"
    )]
    HeadMoved {
        pr: u64,
        asked: CommitSha,
        now: CommitSha,
    },
    /// A commit named without a pull request, which the remote would not send.
    #[error("commit {head} could not be fetched by its id: the remote does not have it, or does not serve unadvertised commits (set uploadpack.allowReachableSHA1InWant or uploadpack.allowAnySHA1InWant on it, or name its pull request)")]
    Unfetchable { head: CommitSha },
    /// The head and the branch share no commit.
    #[error("{head} and the branch head {base} have no merge base (unrelated histories)")]
    NoMergeBase { head: CommitSha, base: CommitSha },
}
