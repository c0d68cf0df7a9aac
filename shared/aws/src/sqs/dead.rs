//! Dead letters: moving a message to its queue's DLQ with the reason, and reading the DLQ
//! without consuming it.

use std::collections::HashSet;

use aws_sdk_sqs::types::{
    ChangeMessageVisibilityBatchRequestEntry, Message, MessageAttributeValue,
    MessageSystemAttributeName,
};
use aws_sdk_sqs::Client;
use gannet_domain::duration::Millis;
use gannet_domain::ports::{DeadLetter, QueueError, QueueName};

use super::receipt::Parts;
use super::{failed, number_attribute, number_of, unavailable, SqsError, SqsQueue};

const QUEUE: &str = "queue";
pub(crate) const REASON: &str = "reason";
const ATTEMPTS: &str = "attempts";
const DEAD_LETTERED_AT: &str = "dead_lettered_at";
/// A reason is cut to this many bytes (SQS caps a whole message at 256 KiB).
const MAX_REASON_BYTES: usize = 16 * 1024;
/// Rounds of ten when reading a DLQ: at most 100 letters.
const PEEK_ROUNDS: usize = 10;
/// How long read letters stay hidden while the rest are read; they are made visible again
/// right after.
const PEEK_VISIBILITY_SECONDS: i32 = 30;

fn cut(reason: &str) -> &str {
    if reason.len() <= MAX_REASON_BYTES {
        return reason;
    }
    let mut end = MAX_REASON_BYTES;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    &reason[..end]
}

fn text_attribute(value: &str) -> Result<MessageAttributeValue, SqsError> {
    MessageAttributeValue::builder()
        .data_type("String")
        .string_value(value)
        .build()
        .map_err(|e| SqsError::Build("message attribute", e))
}

impl SqsQueue {
    pub(crate) async fn move_to_dead_letters(
        &self,
        parts: &Parts,
        reason: &str,
    ) -> Result<(), QueueError> {
        let url = &self
            .urls(parts.queue)
            .map_err(|e| failed("dead-letter", e))?
            .dead_letter;
        let letter = DeadLetter {
            queue: parts.queue,
            body: parts.body.clone(),
            reason: reason.to_owned(),
            attempts: parts.attempts,
            at: self.clock.now(),
        };
        send_letter(&self.client, url, &letter).await?;
        self.delete(parts, "delete the dead-lettered message")
            .await?;
        self.end_lease(&parts.handle);
        Ok(())
    }

    /// Up to 100 letters of `queue`'s DLQ, oldest first, left in the DLQ.
    pub(crate) async fn peek_dead_letters(
        &self,
        queue: QueueName,
    ) -> Result<Vec<DeadLetter>, QueueError> {
        let url = &self
            .urls(queue)
            .map_err(|e| failed("read dead letters", e))?
            .dead_letter;
        let mut letters: Vec<DeadLetter> = peek(&self.client, url)
            .await?
            .iter()
            .map(|m| self.letter(queue, m))
            .collect();
        letters.sort_by_key(|l| l.at);
        Ok(letters)
    }

    fn letter(&self, queue: QueueName, m: &Message) -> DeadLetter {
        kept(m, queue).unwrap_or_else(|| DeadLetter {
            queue,
            body: m.body().unwrap_or_default().to_owned(),
            reason: format!(
                "received {} times without being acknowledged (SQS redrive policy)",
                self.options.max_receive_count
            ),
            attempts: self.options.max_receive_count,
            at: Millis(sent_at(m)),
        })
    }
}

/// Sends `letter` to the dead-letter queue at `url`, its reason, attempts, time and queue as
/// message attributes.
pub(crate) async fn send_letter(
    client: &Client,
    url: &str,
    letter: &DeadLetter,
) -> Result<(), QueueError> {
    let attributes = [
        (QUEUE, text_attribute(letter.queue.as_str())),
        (REASON, text_attribute(cut(&letter.reason))),
        (ATTEMPTS, number_attribute(u64::from(letter.attempts))),
        (DEAD_LETTERED_AT, number_attribute(letter.at.0)),
    ];
    let mut send = client
        .send_message()
        .queue_url(url)
        .message_body(&letter.body);
    for (name, value) in attributes {
        send = send.message_attributes(name, value.map_err(|e| failed("dead-letter", e))?);
    }
    send.send()
        .await
        .map_err(|e| unavailable("send to the dead-letter queue", e))?;
    Ok(())
}

/// A letter [`send_letter`] kept for `queue`: `None` when `m` has no reason attribute (SQS
/// moved it there, or a service did), or when it names another queue.
pub(crate) fn kept(m: &Message, queue: QueueName) -> Option<DeadLetter> {
    let reason = text_of(m, REASON)?;
    if text_of(m, QUEUE).is_some_and(|q| q != queue.as_str()) {
        return None;
    }
    Some(DeadLetter {
        queue,
        body: m.body().unwrap_or_default().to_owned(),
        reason,
        attempts: number_of(m, ATTEMPTS)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(1),
        at: Millis(number_of(m, DEAD_LETTERED_AT).unwrap_or_else(|| sent_at(m))),
    })
}

/// A text attribute of `m`.
pub(crate) fn text_of(m: &Message, name: &str) -> Option<String> {
    m.message_attributes()?
        .get(name)?
        .string_value()
        .map(str::to_owned)
}

/// When SQS took `m` in (epoch ms), 0 if unknown.
pub(crate) fn sent_at(m: &Message) -> u64 {
    m.attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::SentTimestamp))
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
}

/// Up to 100 messages of the dead-letter queue at `url`, with their attributes, left in it
/// (read with a short visibility, then made visible again).
pub(crate) async fn peek(client: &Client, url: &str) -> Result<Vec<Message>, QueueError> {
    let mut seen = HashSet::new();
    let mut letters = Vec::new();
    let mut handles = Vec::new();
    for _ in 0..PEEK_ROUNDS {
        let out = client
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(PEEK_VISIBILITY_SECONDS)
            .wait_time_seconds(0)
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| unavailable("read dead letters", e))?;
        let mut new = 0;
        for m in out.messages() {
            if seen.insert(m.message_id().unwrap_or_default().to_owned()) {
                new += 1;
                handles.extend(m.receipt_handle().map(str::to_owned));
                letters.push(m.clone());
            }
        }
        if new == 0 {
            break;
        }
    }
    show_again(client, url, handles).await?;
    Ok(letters)
}

/// Makes letters read by [`peek`] visible again at once.
async fn show_again(client: &Client, url: &str, handles: Vec<String>) -> Result<(), QueueError> {
    for chunk in handles.chunks(10) {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(i, handle)| {
                ChangeMessageVisibilityBatchRequestEntry::builder()
                    .id(i.to_string())
                    .receipt_handle(handle)
                    .visibility_timeout(0)
                    .build()
                    .map_err(|e| {
                        failed("read dead letters", SqsError::Build("visibility entry", e))
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        client
            .change_message_visibility_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| unavailable("show dead letters again", e))?;
    }
    Ok(())
}
