//! The worker pool: drains the queues by calling the controller's handlers, one message at a
//! time per worker, keeping each message's lease alive while its handler runs.

use std::sync::Arc;
use std::time::Duration;

use gannet_controller::{Controller, Disposition};
use gannet_core::ports::{Outgoing, Queue, QueueName, Received};
use gannet_core::GoDuration;
use gannet_embedded::SqliteRuntime;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::settings::Delivery;

/// Queues in the order an idle worker looks at them: finishing work before starting more;
/// drift checks last, as they only look.
const ORDER: [QueueName; 5] = [
    QueueName::Stage,
    QueueName::Plan,
    QueueName::Trigger,
    QueueName::Notify,
    QueueName::Drift,
];

/// The longest an idle worker sleeps before it looks again (a send or a due message wakes it
/// sooner).
const IDLE_WAIT: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct Pool {
    pub controller: Controller,
    pub queue: Arc<dyn Queue>,
    pub runtime: SqliteRuntime,
    pub visibility: GoDuration,
    pub delivery: Delivery,
}

impl Pool {
    pub fn spawn(&self, workers: usize, stop: &watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
        (0..workers)
            .map(|n| {
                let pool = self.clone();
                let stop = stop.clone();
                tokio::spawn(async move { pool.work(n, stop).await })
            })
            .collect()
    }

    async fn work(self, n: usize, mut stop: watch::Receiver<bool>) {
        // Spread workers across queues so no queue starves behind a long step.
        let mut order = ORDER;
        order.rotate_left(n % ORDER.len());
        while !*stop.borrow() {
            let mut worked = false;
            for queue in order {
                match self.queue.receive(queue, 1, self.visibility).await {
                    Ok(messages) => {
                        for m in messages {
                            worked = true;
                            self.deliver(m).await;
                        }
                    }
                    Err(err) => {
                        tracing::warn!(queue = queue.as_str(), error = %gannet_controller::error_chain(&err), "receive failed");
                    }
                }
            }
            if !worked {
                tokio::select! {
                    _ = self.runtime.wait_for_message(&ORDER, IDLE_WAIT) => {}
                    () = super::stopped(&mut stop) => {}
                }
            }
        }
    }

    async fn deliver(&self, m: Received) {
        let heartbeat = self.keep_leased(&m);
        let mut disposition = self.controller.handle(&m).await;
        if self.delivery == Delivery::Twice {
            // The second delivery must change nothing the first did not.
            let again = self.controller.handle(&m).await;
            if matches!(disposition, Disposition::Ack) {
                disposition = again;
            }
        }
        heartbeat.abort();
        let result = match disposition {
            Disposition::Ack => self.queue.ack(&m.receipt).await,
            Disposition::Retry { after, reason } => {
                tracing::debug!(queue = m.queue.as_str(), attempts = m.attempts, %reason, "retrying later");
                self.queue.retry_later(&m.receipt, after).await
            }
            Disposition::Requeue { after } => {
                let again = Outgoing {
                    queue: m.queue,
                    body: m.body.clone(),
                    delay: after,
                    dedupe_key: None,
                };
                match self.queue.send(vec![again]).await {
                    Ok(()) => self.queue.ack(&m.receipt).await,
                    Err(e) => Err(e),
                }
            }
            Disposition::DeadLetter { reason } => self.queue.dead_letter(&m.receipt, &reason).await,
        };
        if let Err(err) = result {
            // The lease lapses and the message is delivered again; handlers are idempotent.
            tracing::warn!(queue = m.queue.as_str(), error = %gannet_controller::error_chain(&err), "could not settle message");
        }
    }

    /// Extends the message's lease every third of the visibility timeout until aborted.
    fn keep_leased(&self, m: &Received) -> JoinHandle<()> {
        let queue = self.queue.clone();
        let receipt = m.receipt.clone();
        let visibility = self.visibility;
        tokio::spawn(async move {
            let every = (visibility.get() / 3).max(Duration::from_millis(100));
            loop {
                tokio::time::sleep(every).await;
                if let Err(err) = queue.extend(&receipt, visibility).await {
                    tracing::warn!(error = %gannet_controller::error_chain(&err), "lease extension failed");
                    return;
                }
            }
        })
    }
}
