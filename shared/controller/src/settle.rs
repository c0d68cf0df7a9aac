//! Carrying out a handler's [`Disposition`] on the queue its message came from: the one way
//! both runtimes settle a message (`gannet up`'s workers, the functions' SQS batches).

use gannet_domain::ports::{Outgoing, Queue, Received};

use crate::{error_chain, Disposition};

/// Who removes a message its handler is done with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// [`settle`] acknowledges it on the queue (`gannet up`'s queue).
    Ack,
    /// The caller reports it done and the platform removes it (Lambda deletes every record a
    /// batch response does not list as failed).
    Reported,
}

/// What became of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// Done with: removed, or for the caller to report done ([`Removal::Reported`]).
    Done,
    /// It stays in its queue and comes back: after the delay of a retry, or after its lease
    /// lapses when settling failed (the handlers are idempotent).
    Again,
}

/// Carries out `disposition` for `message` on `queue`. A queue that fails is logged here and
/// leaves the message to come back.
pub async fn settle(
    queue: &dyn Queue,
    message: &Received,
    disposition: Disposition,
    removal: Removal,
) -> Settled {
    let name = message.queue.as_str();
    let failed = |what: &str, err: &gannet_domain::ports::QueueError| {
        tracing::warn!(queue = name, error = %error_chain(err), "could not {what}; it comes back");
        Settled::Again
    };
    let remove = || async {
        match removal {
            Removal::Ack => queue.ack(&message.receipt).await,
            Removal::Reported => Ok(()),
        }
    };
    match disposition {
        Disposition::Ack => match remove().await {
            Ok(()) => Settled::Done,
            Err(err) => failed("acknowledge", &err),
        },
        Disposition::Retry { after, reason } => {
            tracing::debug!(queue = name, attempts = message.attempts, %reason, "retrying later");
            if let Err(err) = queue.retry_later(&message.receipt, after).await {
                failed("delay the retry", &err);
            }
            Settled::Again
        }
        Disposition::Requeue { after } => {
            let copy = Outgoing {
                queue: message.queue,
                body: message.body.clone(),
                delay: after,
                dedupe_key: None,
            };
            if let Err(err) = queue.send(vec![copy]).await {
                return failed("requeue", &err);
            }
            match remove().await {
                Ok(()) => Settled::Done,
                Err(err) => failed("acknowledge the requeued message", &err),
            }
        }
        Disposition::DeadLetter { reason } => {
            match queue.dead_letter(&message.receipt, &reason).await {
                Ok(()) => Settled::Done,
                Err(err) => failed("dead-letter", &err),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;

    use gannet_domain::ports::QueueName;
    use gannet_domain::GoDuration;
    use gannet_embedded::{RuntimeOptions, SqliteRuntime};

    use super::*;
    use crate::test_support::TestClock;

    /// A queue holding one message, received (leased for a minute).
    struct Subject {
        queue: SqliteRuntime,
        clock: Arc<TestClock>,
        message: Received,
    }

    const VISIBILITY: GoDuration = GoDuration::from_secs(60);
    /// Past a lease of [`VISIBILITY`].
    const PAST_THE_LEASE: GoDuration = GoDuration::from_secs(61);

    async fn received() -> Subject {
        let clock = Arc::new(TestClock(AtomicU64::new(1_000_000)));
        let queue = SqliteRuntime::open_in_memory(clock.clone(), RuntimeOptions::default())
            .expect("sqlite");
        let sent = Outgoing {
            queue: QueueName::Stage,
            body: r#"{"hello":1}"#.into(),
            delay: GoDuration::from_secs(0),
            dedupe_key: None,
        };
        queue.send(vec![sent]).await.expect("send");
        let message = queue
            .receive(QueueName::Stage, 1, VISIBILITY)
            .await
            .expect("receive")
            .pop()
            .expect("a message");
        Subject {
            queue,
            clock,
            message,
        }
    }

    impl Subject {
        async fn settle(&self, disposition: Disposition, removal: Removal) -> Settled {
            settle(&self.queue, &self.message, disposition, removal).await
        }

        /// The bodies of the messages visible `after` from now (time moved on that far).
        async fn visible_after(&self, after: GoDuration) -> Vec<String> {
            self.clock.0.fetch_add(after.as_millis(), Ordering::SeqCst);
            let got = self
                .queue
                .receive(QueueName::Stage, 10, VISIBILITY)
                .await
                .expect("receive");
            got.into_iter().map(|m| m.body).collect()
        }

        async fn dead_letters(&self) -> Vec<String> {
            let dead = self.queue.dead_letters(QueueName::Stage).await;
            dead.expect("dead letters")
                .into_iter()
                .map(|d| d.reason)
                .collect()
        }
    }

    fn secs(n: u64) -> GoDuration {
        GoDuration::from_secs(n)
    }

    #[tokio::test]
    async fn each_disposition_ends_the_message_as_its_name_says() {
        let body = r#"{"hello":1}"#.to_owned();
        // Ack: gone (`gannet up` acks; on Lambda the caller reports it, so it stays leased here).
        let s = received().await;
        assert_eq!(
            s.settle(Disposition::Ack, Removal::Ack).await,
            Settled::Done
        );
        assert!(s.visible_after(PAST_THE_LEASE).await.is_empty());
        let s = received().await;
        assert_eq!(
            s.settle(Disposition::Ack, Removal::Reported).await,
            Settled::Done
        );
        assert_eq!(s.visible_after(PAST_THE_LEASE).await, [body.as_str()]);

        // Retry: it comes back after the delay, not before.
        let s = received().await;
        let retry = Disposition::Retry {
            after: secs(5),
            reason: "busy".into(),
        };
        assert_eq!(s.settle(retry, Removal::Ack).await, Settled::Again);
        assert!(s.visible_after(secs(4)).await.is_empty());
        assert_eq!(s.visible_after(secs(1)).await, [body.as_str()]);

        // Requeue: a fresh copy after the delay, the message itself done with.
        for (removal, left) in [(Removal::Ack, 1), (Removal::Reported, 2)] {
            let s = received().await;
            let requeue = Disposition::Requeue { after: secs(5) };
            assert_eq!(s.settle(requeue, removal).await, Settled::Done);
            assert!(s.visible_after(secs(4)).await.is_empty(), "{removal:?}");
            let later = s.visible_after(PAST_THE_LEASE).await;
            assert_eq!(later, vec![body.clone(); left], "{removal:?}");
        }

        // DeadLetter: kept with its reason, never delivered again.
        for removal in [Removal::Ack, Removal::Reported] {
            let s = received().await;
            let dead = Disposition::DeadLetter {
                reason: "cannot decode".into(),
            };
            assert_eq!(s.settle(dead, removal).await, Settled::Done);
            assert_eq!(s.dead_letters().await, ["cannot decode"]);
            assert!(s.visible_after(PAST_THE_LEASE).await.is_empty());
        }
    }

    #[tokio::test]
    async fn a_queue_that_refuses_leaves_the_message_to_come_back() {
        // The lease lapsed and another worker acked it: every receipt call is refused.
        let s = received().await;
        s.queue.ack(&s.message.receipt).await.expect("ack");
        let retry = Disposition::Retry {
            after: secs(1),
            reason: "busy".into(),
        };
        let dead = Disposition::DeadLetter { reason: "x".into() };
        for disposition in [Disposition::Ack, retry, dead] {
            assert_eq!(
                s.settle(disposition.clone(), Removal::Ack).await,
                Settled::Again,
                "{disposition:?}"
            );
        }
        assert!(s.dead_letters().await.is_empty());
    }
}
