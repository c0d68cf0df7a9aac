//! `Queue` on Lambda's asynchronous invocation: a message is the payload of an `Invoke`
//! (`InvocationType=Event`) of the function that consumes its queue. Nothing polls, so an idle
//! installation makes no requests for its messages at all.
//!
//! - **Delivery.** Lambda keeps an accepted asynchronous invocation in its own queue and runs
//!   it at least once. A function that fails or times out is run again by Lambda (twice, as
//!   the template's `MaximumRetryAttempts` says), and after that the event goes to the
//!   functions' **on-failure destination**: the one dead-letter queue. The handlers are
//!   idempotent, so a duplicate run finds its step taken and is dropped.
//! - **Delays.** A message delayed by less than [`DIRECT_BELOW`] goes to its consumer, which
//!   sleeps the rest ([`InvokeQueue::wait_until_due`]). A longer one goes to the `later`
//!   function with its due time ([`Envelope::due_at`]); `later` sleeps until then and hands it
//!   on when it falls due within [`LATER_SLEEP_MAX`] ([`InvokeQueue::relay`]), and otherwise
//!   makes a one-time EventBridge Scheduler schedule that invokes `later` again shortly before
//!   the message falls due ([`Schedules`]). Scheduler invokes a schedule some time within its
//!   minute, so the schedule is set a minute before the minute the message falls due in, and
//!   `later` sleeps what is left (under two minutes). Messages are handed on on time, to the
//!   second, and the only function that sleeps is `later`, the smallest.
//! - **Attempts.** The envelope counts the retries the handlers asked for ([`Queue::retry_later`]
//!   sends the message again with one more attempt and the delay); a message received with
//!   more than [`InvokeOptions::max_attempts`] is dead-lettered by its consumer. Lambda's own
//!   re-runs of a failed invocation are not counted there; they end in the destination.
//! - **Receipts** carry the queue, the attempt, the invocation's request id and the body.
//!   `ack` and `extend` have nothing to do (an invocation ends when its handler returns);
//!   `receive` is refused: messages arrive as invocations.
//! - **Dead letters** go to one SQS queue for every handler, each with its queue, reason,
//!   attempts and time as attributes. `dead_letters(queue)` reads up to 100 of them and leaves
//!   them in place. It also reads the letters services put there: Lambda's destination records
//!   (the failed invocation's payload, its condition and error) and Scheduler's undelivered
//!   inputs (its error in attributes).
//! - **Dedupe keys** are ignored, as on SQS standard queues.

pub mod envelope;
mod letters;
mod schedule;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use gannet_domain::duration::GoDuration;
use gannet_domain::ports::{
    Clock, DeadLetter, Outgoing, Queue, QueueError, QueueName, Receipt, Received,
};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::sqs::dead::send_letter;
use crate::sqs::receipt::Parts;
pub use envelope::Envelope;
pub use schedule::Schedules;

/// A message delayed by less than this goes straight to its consumer, which sleeps the rest.
pub const DIRECT_BELOW: GoDuration = GoDuration::from_millis(1_000);
/// The longest the `later` function sleeps for a message; one due later is scheduled.
/// Scheduler invokes `later` up to two minutes before the message falls due (see
/// [`Schedules`]), so this is over two minutes.
pub const LATER_SLEEP_MAX: GoDuration = GoDuration::from_secs(150);
/// What a sleeping invocation keeps of its time for handing a message on.
const MARGIN: Duration = Duration::from_secs(5);
/// Invocations in flight at once while sending a batch.
const CONCURRENT_SENDS: usize = 16;

/// Where the messages go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvokeTargets {
    /// The function (name or ARN) that consumes each queue.
    pub consumers: BTreeMap<QueueName, String>,
    /// The function that holds delayed messages until they fall due.
    pub later: String,
    /// The URL of the one dead-letter queue.
    pub dead_letters: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvokeOptions {
    /// A message received with more attempts than this is dead-lettered.
    pub max_attempts: u32,
}

impl Default for InvokeOptions {
    fn default() -> Self {
        Self { max_attempts: 5 }
    }
}

/// What went wrong inside the adapter, as the source of a `QueueError`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InvokeError {
    #[error("no function is configured for the {0} queue")]
    NoConsumer(&'static str),
    #[error(
        "a message for the {queue} queue is {bytes} bytes with its envelope; an asynchronous \
         invocation takes at most {max}",
        max = envelope::MAX_PAYLOAD_BYTES
    )]
    TooLarge { queue: &'static str, bytes: usize },
    #[error("messages arrive as invocations; nothing receives them")]
    NothingToReceive,
    #[error(
        "a message for the {0} queue falls due later than this function may sleep, and it \
         has no schedules to hand it to"
    )]
    NoSchedules(&'static str),
    #[error("a sending task failed: {0}")]
    Task(String),
    #[error("building the {0} request")]
    Build(&'static str, #[source] aws_sdk_scheduler::error::BuildError),
}

fn failed(operation: &'static str, error: InvokeError) -> QueueError {
    QueueError::Unavailable {
        operation,
        source: Box::new(error),
    }
}

/// The `Queue` port on Lambda's asynchronous invocation (see the module's documentation).
#[derive(Clone)]
pub struct InvokeQueue {
    lambda: aws_sdk_lambda::Client,
    sqs: aws_sdk_sqs::Client,
    targets: Arc<InvokeTargets>,
    schedules: Option<Arc<Schedules>>,
    clock: Arc<dyn Clock>,
    options: InvokeOptions,
}

impl std::fmt::Debug for InvokeQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InvokeQueue")
            .field("targets", &self.targets)
            .field("schedules", &self.schedules.is_some())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// How [`InvokeQueue::relay`] handed a message on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Relayed {
    /// It fell due and went to its consumer.
    Delivered,
    /// It falls due later: a schedule of this name invokes `later` again before then.
    Scheduled { name: String, at: String },
}

impl InvokeQueue {
    pub fn new(
        lambda: aws_sdk_lambda::Client,
        sqs: aws_sdk_sqs::Client,
        targets: InvokeTargets,
        clock: Arc<dyn Clock>,
        options: InvokeOptions,
    ) -> Self {
        Self {
            lambda,
            sqs,
            targets: Arc::new(targets),
            schedules: None,
            clock,
            options,
        }
    }

    /// The adapter of the `later` function, which makes schedules for messages due later
    /// than it sleeps.
    pub fn with_schedules(mut self, schedules: Schedules) -> Self {
        self.schedules = Some(Arc::new(schedules));
        self
    }

    pub fn options(&self) -> InvokeOptions {
        self.options
    }

    /// The message in `envelope`, received by the invocation `request_id`.
    pub fn received(&self, envelope: &Envelope, request_id: &str) -> Received {
        let parts = Parts {
            queue: envelope.queue,
            attempts: envelope.attempt,
            handle: if request_id.is_empty() {
                "invocation".to_owned()
            } else {
                request_id.to_owned()
            },
            body: envelope.body.clone(),
        };
        Received {
            receipt: parts.receipt(),
            queue: envelope.queue,
            body: envelope.body.clone(),
            attempts: envelope.attempt,
        }
    }

    /// A consumer's wait for a message sent with a short delay: sleeps until it falls due and
    /// returns `true` (handle it now), or, when the invocation cannot wait that long (its
    /// `deadline`), sends it on to be delivered when due and returns `false`.
    pub async fn wait_until_due(
        &self,
        envelope: &Envelope,
        deadline: Option<Instant>,
    ) -> Result<bool, QueueError> {
        let Some(left) = self.left(envelope) else {
            return Ok(true);
        };
        if fits(left, deadline) {
            tokio::time::sleep(left).await;
            return Ok(true);
        }
        self.dispatch(envelope.clone()).await?;
        Ok(false)
    }

    /// The `later` function's work: sleeps until `envelope` falls due and hands it to its
    /// consumer, or schedules it when it falls due later than [`LATER_SLEEP_MAX`] (or than
    /// the invocation's `deadline` allows).
    pub async fn relay(
        &self,
        envelope: &Envelope,
        deadline: Option<Instant>,
    ) -> Result<Relayed, QueueError> {
        let left = self.left(envelope).unwrap_or_default();
        if left <= LATER_SLEEP_MAX.get() && fits(left, deadline) {
            tokio::time::sleep(left).await;
            self.invoke(self.consumer(envelope.queue)?, envelope)
                .await?;
            return Ok(Relayed::Delivered);
        }
        let Some(schedules) = &self.schedules else {
            return Err(failed(
                "schedule",
                InvokeError::NoSchedules(envelope.queue.as_str()),
            ));
        };
        let due = envelope.due().unwrap_or_else(|| self.clock.now());
        schedules.schedule(envelope, due).await
    }

    /// How long until `envelope` falls due; `None` when it is due.
    fn left(&self, envelope: &Envelope) -> Option<Duration> {
        let left = envelope.due()?.since(self.clock.now());
        (left > GoDuration::default()).then(|| left.get())
    }

    fn consumer(&self, queue: QueueName) -> Result<&str, QueueError> {
        self.targets
            .consumers
            .get(&queue)
            .map(String::as_str)
            .ok_or_else(|| failed("send", InvokeError::NoConsumer(queue.as_str())))
    }

    /// Sends `envelope` to its consumer, or to `later` when it falls due later than
    /// [`DIRECT_BELOW`] from now.
    async fn dispatch(&self, envelope: Envelope) -> Result<(), QueueError> {
        let soon = self
            .left(&envelope)
            .is_none_or(|left| left < DIRECT_BELOW.get());
        let function = if soon {
            self.consumer(envelope.queue)?
        } else {
            &self.targets.later
        };
        self.invoke(function, &envelope).await
    }

    async fn invoke(&self, function: &str, envelope: &Envelope) -> Result<(), QueueError> {
        let payload = envelope.payload();
        if payload.len() > envelope::MAX_PAYLOAD_BYTES {
            return Err(failed(
                "send",
                InvokeError::TooLarge {
                    queue: envelope.queue.as_str(),
                    bytes: payload.len(),
                },
            ));
        }
        self.lambda
            .invoke()
            .function_name(function)
            .invocation_type(InvocationType::Event)
            .payload(Blob::new(payload))
            .send()
            .await
            .map_err(|e| QueueError::Unavailable {
                operation: "invoke",
                source: Box::new(e),
            })?;
        Ok(())
    }
}

/// Whether an invocation with `deadline` can sleep `left` and still hand the message on.
fn fits(left: Duration, deadline: Option<Instant>) -> bool {
    deadline.is_none_or(|at| Instant::now() + left + MARGIN <= at)
}

#[async_trait]
impl Queue for InvokeQueue {
    async fn send(&self, messages: Vec<Outgoing>) -> Result<(), QueueError> {
        let now = self.clock.now();
        let envelopes = messages.into_iter().map(|m| Envelope {
            queue: m.queue,
            body: m.body,
            attempt: 1,
            due_at: (m.delay > GoDuration::default()).then(|| now.plus(m.delay).0),
        });
        let mut sending = JoinSet::new();
        let mut result = Ok(());
        for envelope in envelopes {
            if sending.len() == CONCURRENT_SENDS {
                result = result.and(joined(sending.join_next().await));
            }
            let queue = self.clone();
            sending.spawn(async move { queue.dispatch(envelope).await });
        }
        while let Some(done) = sending.join_next().await {
            result = result.and(joined(Some(done)));
        }
        result
    }

    async fn receive(
        &self,
        _queue: QueueName,
        _max: usize,
        _visibility: GoDuration,
    ) -> Result<Vec<Received>, QueueError> {
        Err(failed("receive", InvokeError::NothingToReceive))
    }

    async fn extend(&self, _receipt: &Receipt, _visibility: GoDuration) -> Result<(), QueueError> {
        Ok(())
    }

    async fn ack(&self, _receipt: &Receipt) -> Result<(), QueueError> {
        Ok(())
    }

    async fn retry_later(&self, receipt: &Receipt, delay: GoDuration) -> Result<(), QueueError> {
        let parts = parts(receipt)?;
        let envelope = Envelope {
            queue: parts.queue,
            body: parts.body,
            attempt: parts.attempts.saturating_add(1),
            due_at: Some(self.clock.now().plus(delay).0),
        };
        self.dispatch(envelope).await
    }

    async fn dead_letter(&self, receipt: &Receipt, reason: &str) -> Result<(), QueueError> {
        let parts = parts(receipt)?;
        let letter = DeadLetter {
            queue: parts.queue,
            body: parts.body,
            reason: reason.to_owned(),
            attempts: parts.attempts,
            at: self.clock.now(),
        };
        send_letter(&self.sqs, &self.targets.dead_letters, &letter).await
    }

    async fn dead_letters(&self, queue: QueueName) -> Result<Vec<DeadLetter>, QueueError> {
        letters::read(&self.sqs, &self.targets.dead_letters, queue).await
    }
}

fn parts(receipt: &Receipt) -> Result<Parts, QueueError> {
    Parts::parse(receipt).ok_or_else(|| {
        QueueError::StaleReceipt(receipt.0.split('\n').next().unwrap_or_default().to_owned())
    })
}

/// The first failure of a batch's sends is the batch's; every send is still awaited.
fn joined(
    done: Option<Result<Result<(), QueueError>, tokio::task::JoinError>>,
) -> Result<(), QueueError> {
    match done {
        None | Some(Ok(Ok(()))) => Ok(()),
        Some(Ok(Err(e))) => Err(e),
        Some(Err(e)) => Err(failed("send", InvokeError::Task(e.to_string()))),
    }
}

#[cfg(test)]
mod tests;
