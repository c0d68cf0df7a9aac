//! The handlers' error type, and the one place that decides what a failure means for the
//! message that caused it.

use gannet_domain::ports::{GitError, QueueError, StoreError};
use gannet_domain::GoDuration;
use gannet_events::DecodeError;
use gannet_sdk::plugin::StepError;

#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Queue(#[from] QueueError),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("cannot decode message")]
    Decode(#[from] DecodeError),
    /// The message names something this installation does not know; it can never succeed.
    #[error("{0}")]
    Unprocessable(String),
    /// A plugin step failed in a way worth retrying.
    #[error("step of {stage} failed, will retry")]
    Step {
        stage: String,
        #[source]
        source: StepError,
    },
    /// Reading an app's live state failed in a way worth retrying.
    #[error("live state of {app} could not be read, will retry")]
    Live {
        app: String,
        #[source]
        source: StepError,
    },
    #[error("commit status on {repo} could not be reported")]
    CommitStatus {
        repo: gannet_domain::RepoId,
        #[source]
        source: gannet_domain::ports::BoxError,
    },
    #[error("{what} could not be updated")]
    CheckRun {
        what: String,
        #[source]
        source: gannet_domain::ports::BoxError,
    },
    #[error("notification to {receiver} failed")]
    Notify {
        receiver: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("event to {bus} could not be published")]
    EventBus {
        bus: String,
        #[source]
        source: gannet_domain::ports::BoxError,
    },
}

/// What happens to a message after its handler ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Done (or a stale duplicate): delete it.
    Ack,
    /// Try again after this long; the failure counts as an attempt.
    Retry { after: GoDuration, reason: String },
    /// Not a failure (a write lost a race): send it again as a fresh message after this long.
    Requeue { after: GoDuration },
    /// It can never succeed: keep it in the dead-letter queue with the reason.
    DeadLetter { reason: String },
}

/// Retry delay for the n-th attempt: 1 s doubling, at most 5 min.
pub fn backoff(attempts: u32) -> GoDuration {
    let exp = attempts.saturating_sub(1).min(9);
    GoDuration::from_secs((1u64 << exp).min(300))
}

impl HandlerError {
    /// The single place that classifies failures as retryable or terminal.
    pub fn disposition(&self, attempts: u32) -> Disposition {
        match self {
            // Someone else wrote first: re-read and decide again, soon.
            Self::Store(StoreError::Conflict { .. }) => Disposition::Requeue {
                after: GoDuration::from_millis(20),
            },
            Self::Decode(_) | Self::Unprocessable(_) | Self::Store(StoreError::Corrupt { .. }) => {
                Disposition::DeadLetter {
                    reason: error_chain(self),
                }
            }
            Self::Git(GitError::UnknownRepo(_)) => Disposition::DeadLetter {
                reason: error_chain(self),
            },
            _ => Disposition::Retry {
                after: self.retry_after().unwrap_or_else(|| backoff(attempts)),
                reason: error_chain(self),
            },
        }
    }

    /// When the platform said to try again, if a step or live-state read failed with a hint.
    fn retry_after(&self) -> Option<GoDuration> {
        match self {
            Self::Step { source, .. } | Self::Live { source, .. } => match source {
                StepError::Transient { retry_after, .. } => *retry_after,
                StepError::Permanent(_) => None,
            },
            _ => None,
        }
    }
}

pub use gannet_domain::report::error_chain;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let conflict = HandlerError::Store(StoreError::Conflict { what: "x".into() });
        assert!(matches!(
            conflict.disposition(1),
            Disposition::Requeue { .. }
        ));
        let bad = HandlerError::Unprocessable("repository nope is not configured".into());
        assert_eq!(
            bad.disposition(1),
            Disposition::DeadLetter {
                reason: "repository nope is not configured".into()
            }
        );
        let throttled = HandlerError::Step {
            stage: "deploy".into(),
            source: StepError::transient("ECS UpdateService", "Throttling")
                .retry_after(GoDuration::from_secs(42)),
        };
        assert_eq!(
            throttled.disposition(1),
            Disposition::Retry {
                after: GoDuration::from_secs(42),
                reason: "step of deploy failed, will retry: ECS UpdateService failed, will retry: Throttling".into()
            },
            "the platform's hint wins over the backoff"
        );
        let plain = HandlerError::Step {
            stage: "deploy".into(),
            source: StepError::transient("ECS UpdateService", "HTTP 503"),
        };
        assert!(matches!(
            plain.disposition(3),
            Disposition::Retry { after, .. } if after == GoDuration::from_secs(4)
        ));
        assert_eq!(backoff(1), GoDuration::from_secs(1));
        assert_eq!(backoff(4), GoDuration::from_secs(8));
        assert_eq!(backoff(40), GoDuration::from_secs(300));
    }
}
