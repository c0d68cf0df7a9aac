//! The worker pool: drains the queues by calling the controller's handlers, one message at a
//! time per worker, keeping each message's lease alive while its handler runs.

use std::sync::Arc;
use std::time::Duration;

use gannet_controller::{settle, Controller, Disposition, Removal};
use gannet_domain::ports::{Queue, QueueName, Received};
use gannet_domain::GoDuration;
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
            // One look at every queue, in one transaction; a worker takes one message at a time.
            match self.runtime.receive_first(&order, self.visibility).await {
                Ok(Some(m)) => {
                    self.deliver(m).await;
                    continue;
                }
                Ok(None) => {}
                Err(err) => {
                    tracing::warn!(error = %gannet_controller::error_chain(&err), "receive failed");
                }
            }
            tokio::select! {
                _ = self.runtime.wait_for_message(&ORDER, IDLE_WAIT) => {}
                () = super::stopped(&mut stop) => {}
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
        // A message that could not be settled comes back when its lease lapses.
        settle(self.queue.as_ref(), &m, disposition, Removal::Ack).await;
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
