//! `Queue` on SQS standard queues: one queue per [`QueueName`], each with a dead-letter queue.

pub(crate) mod dead;
mod hop;
pub(crate) mod receipt;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use aws_sdk_sqs::error::SdkError;
use aws_sdk_sqs::types::{
    Message, MessageAttributeValue, MessageSystemAttributeName, SendMessageBatchRequestEntry,
};
use aws_sdk_sqs::Client;
use gannet_domain::duration::GoDuration;
use gannet_domain::ports::{
    Clock, DeadLetter, Outgoing, Queue, QueueError, QueueName, Receipt, Received,
};

pub use hop::DUE_AT;
use receipt::{Leases, Parts};

/// SQS's longest `DelaySeconds`.
pub(crate) const SQS_MAX_DELAY_SECONDS: u32 = 900;
/// SQS's longest total visibility of one message.
const SQS_MAX_VISIBILITY_SECONDS: u32 = 12 * 3600;
/// SQS's limits on one SendMessageBatch: entries, and bytes (kept well below its 256 KiB).
const BATCH_ENTRIES: usize = 10;
const BATCH_BYTES: usize = 200 * 1024;
/// SQS's most messages per ReceiveMessage.
const RECEIVE_MAX: usize = 10;

/// The URLs of one handler's queue and of its dead-letter queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueUrls {
    pub queue: String,
    pub dead_letter: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqsOptions {
    /// The redrive policy's `maxReceiveCount` (what [`provision`](crate::provision) sets).
    pub max_receive_count: u32,
    /// The longest delay one send carries; longer delays hop. At most SQS's 900 s.
    pub max_hop_seconds: u32,
}

impl Default for SqsOptions {
    fn default() -> Self {
        Self {
            max_receive_count: 5,
            max_hop_seconds: SQS_MAX_DELAY_SECONDS,
        }
    }
}

/// What went wrong inside the adapter, as the source of a `QueueError`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SqsError {
    #[error("no queue URL is configured for the {0} queue")]
    NoUrl(&'static str),
    #[error("SQS refused {failed} message(s) of a batch to the {queue} queue: {first}")]
    BatchRefused {
        queue: &'static str,
        failed: usize,
        first: String,
    },
    #[error("building the {0} request")]
    Build(&'static str, #[source] aws_sdk_sqs::error::BuildError),
}

/// The `Queue` port on SQS standard queues, one per [`QueueName`], each with a dead-letter
/// queue.
///
/// - **Delays.** A message's delay goes in `DelaySeconds`, rounded up to whole seconds. SQS
///   takes at most 900 s ([`SqsOptions::max_hop_seconds`]); a longer delay is sent in *hops*:
///   the message goes out with the longest delay SQS allows and a [`DUE_AT`] attribute (epoch
///   ms). Received before that time, it is sent again with the remaining delay (at most one
///   hop) and the early copy is deleted, so a hop never counts as a receive. A consumer fed by
///   an SQS event source instead of [`Queue::receive`] calls [`SqsQueue::forward_if_early`].
/// - **Dedupe keys** are ignored: SQS standard queues do not deduplicate (FIFO queues do, but
///   only for five minutes and at a lower rate). The handlers are idempotent, and a duplicate
///   step message finds its step already taken and is dropped.
/// - **Order** is SQS's best effort, not strict. Receives use short polling, which on SQS may
///   come back empty while a few messages wait; the next receive finds them.
/// - **Receive** asks for each message's `ApproximateReceiveCount`, which becomes `attempts`;
///   the lease is the receive's `VisibilityTimeout`, rounded up to seconds.
/// - **Receipts** carry the queue, the attempt, the receipt handle and the body, so they work
///   in any process ([`SqsQueue::receipt_of`] makes one for a message from an SQS event). SQS
///   accepts a superseded or used handle silently, so the adapter remembers the leases it
///   handed out: a receipt whose lease ended here (acked, given back, dead-lettered) or ran
///   out by the clock is refused as stale. One this process never saw is left to SQS to judge.
/// - `ack` is DeleteMessage; `extend` and `retry_later` are ChangeMessageVisibility. SQS caps
///   a message's total visibility at 12 hours, so `retry_later` waits at most that long.
/// - **Dead letters.** `dead_letter` sends the body to the queue's DLQ with `reason`,
///   `attempts` and `dead_lettered_at` attributes, then deletes the message (a crash in
///   between leaves it in both: at-least-once). SQS's redrive policy moves a message received
///   `max_receive_count` times without an ack; such a letter has no reason attribute, so
///   `dead_letters` reports the redrive as its reason, `max_receive_count` as its attempts and
///   its first send as its time. `dead_letters` reads up to 100 letters and leaves them in the
///   DLQ.
#[derive(Clone)]
pub struct SqsQueue {
    client: Client,
    urls: Arc<BTreeMap<QueueName, QueueUrls>>,
    clock: Arc<dyn Clock>,
    options: SqsOptions,
    leases: Arc<Mutex<Leases>>,
}

impl std::fmt::Debug for SqsQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqsQueue")
            .field("urls", &self.urls)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

pub(crate) fn unavailable<E, R>(operation: &'static str, error: SdkError<E, R>) -> QueueError
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    QueueError::Unavailable {
        operation,
        source: Box::new(error),
    }
}

fn failed(operation: &'static str, error: SqsError) -> QueueError {
    QueueError::Unavailable {
        operation,
        source: Box::new(error),
    }
}

/// Whole seconds, rounded up so nothing comes early, capped at `max`.
pub(crate) fn seconds(d: GoDuration, max: u32) -> i32 {
    let secs = d.as_millis().div_ceil(1000).min(u64::from(max));
    i32::try_from(secs).unwrap_or(i32::MAX)
}

pub(crate) fn number_attribute(value: u64) -> Result<MessageAttributeValue, SqsError> {
    MessageAttributeValue::builder()
        .data_type("Number")
        .string_value(value.to_string())
        .build()
        .map_err(|e| SqsError::Build("message attribute", e))
}

pub(crate) fn number_of(message: &Message, name: &str) -> Option<u64> {
    message
        .message_attributes()?
        .get(name)?
        .string_value()?
        .parse()
        .ok()
}

impl SqsQueue {
    /// The adapter over `urls` (one entry per queue it sends to or receives from).
    pub fn new(
        client: Client,
        urls: BTreeMap<QueueName, QueueUrls>,
        clock: Arc<dyn Clock>,
        options: SqsOptions,
    ) -> Self {
        Self {
            client,
            urls: Arc::new(urls),
            clock,
            options: SqsOptions {
                max_hop_seconds: options.max_hop_seconds.clamp(1, SQS_MAX_DELAY_SECONDS),
                ..options
            },
            leases: Arc::new(Mutex::new(Leases::default())),
        }
    }

    /// The receipt of a message delivered by an SQS event source rather than
    /// [`Queue::receive`], so `ack`, `extend`, `retry_later` and `dead_letter` work on it.
    pub fn receipt_of(
        queue: QueueName,
        receipt_handle: &str,
        body: &str,
        attempts: u32,
    ) -> Receipt {
        Parts {
            queue,
            attempts,
            handle: receipt_handle.to_owned(),
            body: body.to_owned(),
        }
        .receipt()
    }

    pub(crate) fn urls(&self, queue: QueueName) -> Result<&QueueUrls, SqsError> {
        self.urls.get(&queue).ok_or(SqsError::NoUrl(queue.as_str()))
    }

    fn leases(&self) -> MutexGuard<'_, Leases> {
        // The map stays consistent even if a holder panicked.
        self.leases.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The parts of a receipt that may still act, or why not.
    pub(crate) fn held(&self, receipt: &Receipt) -> Result<Parts, QueueError> {
        let stale = || QueueError::StaleReceipt(short(receipt));
        let parts = Parts::parse(receipt).ok_or_else(stale)?;
        if self.leases().usable(&parts.handle, self.clock.now()) {
            Ok(parts)
        } else {
            Err(stale())
        }
    }

    pub(crate) fn end_lease(&self, handle: &str) {
        let now = self.clock.now();
        self.leases().end(handle, now);
    }

    async fn send_batch(
        &self,
        queue: QueueName,
        entries: Vec<SendMessageBatchRequestEntry>,
    ) -> Result<(), QueueError> {
        let url = &self.urls(queue).map_err(|e| failed("send", e))?.queue;
        let out = self
            .client
            .send_message_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| unavailable("send", e))?;
        if let Some(first) = out.failed().first() {
            return Err(failed(
                "send",
                SqsError::BatchRefused {
                    queue: queue.as_str(),
                    failed: out.failed().len(),
                    first: format!("{}: {}", first.code(), first.message().unwrap_or("")),
                },
            ));
        }
        Ok(())
    }

    async fn change_visibility(
        &self,
        parts: &Parts,
        visibility: GoDuration,
        operation: &'static str,
    ) -> Result<(), QueueError> {
        let url = &self
            .urls(parts.queue)
            .map_err(|e| failed(operation, e))?
            .queue;
        let result = self
            .client
            .change_message_visibility()
            .queue_url(url)
            .receipt_handle(&parts.handle)
            .visibility_timeout(seconds(visibility, SQS_MAX_VISIBILITY_SECONDS))
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) => match e.as_service_error() {
                Some(s) if s.is_receipt_handle_is_invalid() || s.is_message_not_inflight() => {
                    Err(QueueError::StaleReceipt(parts.handle.clone()))
                }
                _ => Err(unavailable(operation, e)),
            },
        }
    }

    pub(crate) async fn delete(
        &self,
        parts: &Parts,
        operation: &'static str,
    ) -> Result<(), QueueError> {
        let url = &self
            .urls(parts.queue)
            .map_err(|e| failed(operation, e))?
            .queue;
        let result = self
            .client
            .delete_message()
            .queue_url(url)
            .receipt_handle(&parts.handle)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(e) => match e.as_service_error() {
                Some(s) if s.is_receipt_handle_is_invalid() => {
                    Err(QueueError::StaleReceipt(parts.handle.clone()))
                }
                _ => Err(unavailable(operation, e)),
            },
        }
    }
}

/// A receipt's head (queue, attempt, handle) for errors, without the body.
fn short(receipt: &Receipt) -> String {
    receipt.0.split('\n').next().unwrap_or_default().to_owned()
}

#[async_trait]
impl Queue for SqsQueue {
    async fn send(&self, messages: Vec<Outgoing>) -> Result<(), QueueError> {
        let now = self.clock.now();
        let mut by_queue: BTreeMap<QueueName, Vec<&Outgoing>> = BTreeMap::new();
        for m in &messages {
            by_queue.entry(m.queue).or_default().push(m);
        }
        for (queue, messages) in by_queue {
            let mut batch = Vec::new();
            let mut bytes = 0;
            for m in messages {
                if batch.len() == BATCH_ENTRIES
                    || (bytes + m.body.len() > BATCH_BYTES && !batch.is_empty())
                {
                    self.send_batch(queue, std::mem::take(&mut batch)).await?;
                    bytes = 0;
                }
                bytes += m.body.len();
                batch.push(
                    self.entry(batch.len(), m, now)
                        .map_err(|e| failed("send", e))?,
                );
            }
            if !batch.is_empty() {
                self.send_batch(queue, batch).await?;
            }
        }
        Ok(())
    }

    async fn receive(
        &self,
        queue: QueueName,
        max: usize,
        visibility: GoDuration,
    ) -> Result<Vec<Received>, QueueError> {
        let url = self
            .urls(queue)
            .map_err(|e| failed("receive", e))?
            .queue
            .clone();
        let visibility_seconds = seconds(visibility, SQS_MAX_VISIBILITY_SECONDS);
        let mut got = Vec::new();
        // Each round takes up to ten; hops take a round without giving a message.
        for _ in 0..max.div_ceil(RECEIVE_MAX) + 2 {
            let want = (max - got.len()).min(RECEIVE_MAX);
            if want == 0 {
                break;
            }
            let out = self
                .client
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(i32::try_from(want).unwrap_or(10))
                .visibility_timeout(visibility_seconds)
                .wait_time_seconds(0)
                .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
                .message_attribute_names(DUE_AT)
                .send()
                .await
                .map_err(|e| unavailable("receive", e))?;
            let messages = out.messages();
            if messages.is_empty() {
                break;
            }
            let now = self.clock.now();
            for m in messages {
                let early = number_of(m, DUE_AT).filter(|due| *due > now.0);
                if let Some(due) = early {
                    let handle = m.receipt_handle().unwrap_or_default();
                    self.hop(&url, m.body().unwrap_or_default(), handle, due, now)
                        .await?;
                    continue;
                }
                let attempts = m
                    .attributes()
                    .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(1);
                let parts = Parts {
                    queue,
                    attempts,
                    handle: m.receipt_handle().unwrap_or_default().to_owned(),
                    body: m.body().unwrap_or_default().to_owned(),
                };
                self.leases().hold(&parts.handle, now.plus(visibility), now);
                got.push(Received {
                    receipt: parts.receipt(),
                    queue,
                    body: parts.body,
                    attempts,
                });
            }
        }
        Ok(got)
    }

    async fn extend(&self, receipt: &Receipt, visibility: GoDuration) -> Result<(), QueueError> {
        let parts = self.held(receipt)?;
        self.change_visibility(&parts, visibility, "extend").await?;
        let now = self.clock.now();
        self.leases().hold(&parts.handle, now.plus(visibility), now);
        Ok(())
    }

    async fn ack(&self, receipt: &Receipt) -> Result<(), QueueError> {
        let parts = self.held(receipt)?;
        self.delete(&parts, "ack").await?;
        self.end_lease(&parts.handle);
        Ok(())
    }

    async fn retry_later(&self, receipt: &Receipt, delay: GoDuration) -> Result<(), QueueError> {
        let parts = self.held(receipt)?;
        self.change_visibility(&parts, delay, "retry later").await?;
        self.end_lease(&parts.handle);
        Ok(())
    }

    async fn dead_letter(&self, receipt: &Receipt, reason: &str) -> Result<(), QueueError> {
        let parts = self.held(receipt)?;
        self.move_to_dead_letters(&parts, reason).await
    }

    async fn dead_letters(&self, queue: QueueName) -> Result<Vec<DeadLetter>, QueueError> {
        self.peek_dead_letters(queue).await
    }
}
