//! Delays longer than one SQS send can carry: the first hop's send entry, and re-sending an
//! early copy toward its due time.

use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
use gannet_domain::duration::{GoDuration, Millis};
use gannet_domain::ports::{Outgoing, QueueError, QueueName};

use super::{failed, number_attribute, seconds, unavailable, SqsError, SqsQueue};

/// The message attribute that holds a long-delayed message's due time (epoch ms).
pub const DUE_AT: &str = "due_at";

impl SqsQueue {
    /// The SQS entry for one message: its delay, or a first hop toward it.
    pub(crate) fn entry(
        &self,
        id: usize,
        m: &Outgoing,
        now: Millis,
    ) -> Result<SendMessageBatchRequestEntry, SqsError> {
        let hop = self.options.max_hop_seconds;
        let mut entry = SendMessageBatchRequestEntry::builder()
            .id(id.to_string())
            .message_body(&m.body)
            .delay_seconds(seconds(m.delay, hop));
        if m.delay > GoDuration::from_secs(u64::from(hop)) {
            entry = entry.message_attributes(DUE_AT, number_attribute(now.plus(m.delay).0)?);
        }
        entry
            .build()
            .map_err(|e| SqsError::Build("send batch entry", e))
    }

    /// For a message delivered by an SQS event source rather than [`Queue::receive`]
    /// (`due_at` is its [`DUE_AT`] attribute's string value): when it is an early copy of a
    /// long delay, sends it on toward its due time, deletes this copy and returns `true`; the
    /// consumer then skips it. Returns `false` for a message that is due.
    ///
    /// [`Queue::receive`]: gannet_domain::ports::Queue::receive
    pub async fn forward_if_early(
        &self,
        queue: QueueName,
        receipt_handle: &str,
        body: &str,
        due_at: Option<&str>,
    ) -> Result<bool, QueueError> {
        let now = self.clock.now();
        let Some(due) = due_at
            .and_then(|d| d.parse::<u64>().ok())
            .filter(|d| *d > now.0)
        else {
            return Ok(false);
        };
        let url = &self.urls(queue).map_err(|e| failed("re-delay", e))?.queue;
        self.hop(url, body, receipt_handle, due, now).await?;
        Ok(true)
    }

    /// Sends an early copy of a long-delayed message on toward its due time, then deletes it.
    pub(crate) async fn hop(
        &self,
        url: &str,
        body: &str,
        receipt_handle: &str,
        due: u64,
        now: Millis,
    ) -> Result<(), QueueError> {
        let remaining = GoDuration::from_millis(due.saturating_sub(now.0));
        let due_at = number_attribute(due).map_err(|e| failed("re-delay", e))?;
        self.client
            .send_message()
            .queue_url(url)
            .message_body(body)
            .delay_seconds(seconds(remaining, self.options.max_hop_seconds))
            .message_attributes(DUE_AT, due_at)
            .send()
            .await
            .map_err(|e| unavailable("re-delay", e))?;
        self.client
            .delete_message()
            .queue_url(url)
            .receipt_handle(receipt_handle)
            .send()
            .await
            .map_err(|e| unavailable("delete the re-delayed copy", e))?;
        Ok(())
    }
}
