//! `Queue` on SQLite: a `messages` table with per-delivery receipts and leases, a
//! `dead_letters` table, and a signal that lets idle workers sleep until something is sent.

use std::time::Duration;

use async_trait::async_trait;
use gannet_domain::duration::{GoDuration, Millis};
use gannet_domain::ports::{DeadLetter, Outgoing, Queue, QueueError, QueueName, Receipt, Received};
use rusqlite::{params, OptionalExtension, Transaction};

use crate::error::DbError;
use crate::runtime::SqliteRuntime;
use crate::schema::{int, uint};

/// Inserts messages, dropping any whose dedupe key is held by a never-received message of
/// the same queue. Runs inside the caller's transaction, so sends commit with its writes.
pub(crate) fn enqueue(
    tx: &Transaction<'_>,
    now: Millis,
    messages: &[Outgoing],
) -> Result<(), DbError> {
    let mut insert = tx.prepare_cached(
        "INSERT INTO messages (queue, body, visible_at, attempts, dedupe_key, sent_at)
         VALUES (?1, ?2, ?3, 0, ?4, ?5) ON CONFLICT DO NOTHING",
    )?;
    for m in messages {
        let visible_at = now.plus(m.delay);
        insert.execute(params![
            m.queue.as_str(),
            m.body,
            int(visible_at.0),
            m.dedupe_key,
            int(now.0)
        ])?;
    }
    Ok(())
}

/// A receipt names one delivery: the message and the attempt it was handed out on.
fn new_receipt(id: i64, attempts: u32) -> String {
    format!("{id}.{attempts}")
}

/// The message id in a receipt, or a stale-receipt error for anything not made by
/// [`new_receipt`].
fn receipt_message(receipt: &Receipt) -> Result<i64, DbError> {
    receipt
        .0
        .split_once('.')
        .and_then(|(id, _)| id.parse().ok())
        .ok_or_else(|| DbError::StaleReceipt(receipt.0.clone()))
}

fn attempts_of(stored: i64) -> u32 {
    u32::try_from(stored).unwrap_or(u32::MAX)
}

fn insert_dead_letter(
    tx: &Transaction<'_>,
    queue: &str,
    body: &str,
    reason: &str,
    attempts: u32,
    at: Millis,
) -> Result<(), DbError> {
    tx.prepare_cached(
        "INSERT INTO dead_letters (queue, body, reason, attempts, at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![queue, body, reason, attempts, int(at.0)])?;
    Ok(())
}

struct Candidate {
    id: i64,
    body: String,
    attempts: u32,
}

/// When a receive happens and what it may deliver: its time, how long a delivery stays
/// hidden, and the attempts after which a message goes to the dead letters instead.
struct Lease {
    now: Millis,
    hidden_until: i64,
    max_attempts: u32,
}

/// Leases up to `max` due messages of `queue`, oldest first, and dead-letters any due message
/// already received `max_attempts` times. Runs inside the caller's transaction.
fn take_due(
    tx: &Transaction<'_>,
    lease: &Lease,
    queue: QueueName,
    max: usize,
) -> Result<Vec<Received>, DbError> {
    let (mut deliver, mut exhausted) = (Vec::new(), Vec::new());
    {
        let mut due = tx.prepare_cached(
            "SELECT id, body, attempts FROM messages
             WHERE queue = ?1 AND visible_at <= ?2 ORDER BY visible_at, id",
        )?;
        let mut rows = due.query(params![queue.as_str(), int(lease.now.0)])?;
        while deliver.len() < max {
            let Some(row) = rows.next()? else { break };
            let candidate = Candidate {
                id: row.get(0)?,
                body: row.get(1)?,
                attempts: attempts_of(row.get(2)?),
            };
            if candidate.attempts >= lease.max_attempts {
                exhausted.push(candidate);
            } else {
                deliver.push(candidate);
            }
        }
    }
    for m in exhausted {
        let reason = format!("received {} times without being acknowledged", m.attempts);
        insert_dead_letter(tx, queue.as_str(), &m.body, &reason, m.attempts, lease.now)?;
        tx.prepare_cached("DELETE FROM messages WHERE id = ?1")?
            .execute([m.id])?;
        tracing::warn!(
            queue = queue.as_str(),
            message = m.id,
            attempts = m.attempts,
            "message dead-lettered"
        );
    }
    let mut update = tx.prepare_cached(
        "UPDATE messages SET attempts = ?2, receipt = ?3, visible_at = ?4 WHERE id = ?1",
    )?;
    let mut received = Vec::with_capacity(deliver.len());
    for m in deliver {
        let attempts = m.attempts.saturating_add(1);
        let receipt = new_receipt(m.id, attempts);
        update.execute(params![m.id, attempts, receipt, lease.hidden_until])?;
        received.push(Received {
            receipt: Receipt(receipt),
            queue,
            body: m.body,
            attempts,
        });
    }
    Ok(received)
}

#[async_trait]
impl Queue for SqliteRuntime {
    async fn send(&self, messages: Vec<Outgoing>) -> Result<(), QueueError> {
        let messages = self.kept(messages);
        if messages.is_empty() {
            return Ok(());
        }
        let now = self.now();
        let messages_sent = messages.len();
        self.write(move |tx| enqueue(tx, now, &messages))
            .await
            .map_err(|e| e.into_queue("send"))?;
        self.signal_sent(messages_sent);
        Ok(())
    }

    async fn receive(
        &self,
        queue: QueueName,
        max: usize,
        visibility: GoDuration,
    ) -> Result<Vec<Received>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let lease = self.lease(visibility);
        self.write(move |tx| take_due(tx, &lease, queue, max))
            .await
            .map_err(|e| e.into_queue("receive"))
    }

    async fn extend(&self, receipt: &Receipt, visibility: GoDuration) -> Result<(), QueueError> {
        let hidden_until = int(self.now().plus(visibility).0);
        let receipt = receipt.clone();
        self.write(move |tx| {
            let id = receipt_message(&receipt)?;
            let changed = tx
                .prepare_cached(
                    "UPDATE messages SET visible_at = ?3 WHERE id = ?1 AND receipt = ?2",
                )?
                .execute(params![id, receipt.0, hidden_until])?;
            if changed == 0 {
                return Err(DbError::StaleReceipt(receipt.0));
            }
            Ok(())
        })
        .await
        .map_err(|e| e.into_queue("extend visibility"))
    }

    async fn ack(&self, receipt: &Receipt) -> Result<(), QueueError> {
        let receipt = receipt.clone();
        self.write(move |tx| {
            let id = receipt_message(&receipt)?;
            let deleted = tx
                .prepare_cached("DELETE FROM messages WHERE id = ?1 AND receipt = ?2")?
                .execute(params![id, receipt.0])?;
            if deleted == 0 {
                return Err(DbError::StaleReceipt(receipt.0));
            }
            Ok(())
        })
        .await
        .map_err(|e| e.into_queue("ack"))
    }

    async fn retry_later(&self, receipt: &Receipt, delay: GoDuration) -> Result<(), QueueError> {
        let visible_at = int(self.now().plus(delay).0);
        let receipt = receipt.clone();
        self.write(move |tx| {
            let id = receipt_message(&receipt)?;
            let changed = tx
                .prepare_cached(
                    "UPDATE messages SET visible_at = ?3, receipt = NULL WHERE id = ?1 AND receipt = ?2",
                )?
                .execute(params![id, receipt.0, visible_at])?;
            if changed == 0 {
                return Err(DbError::StaleReceipt(receipt.0));
            }
            Ok(())
        })
        .await
        .map_err(|e| e.into_queue("retry later"))?;
        self.signal_sent(1);
        Ok(())
    }

    async fn dead_letter(&self, receipt: &Receipt, reason: &str) -> Result<(), QueueError> {
        let now = self.now();
        let (receipt, reason) = (receipt.clone(), reason.to_owned());
        self.write(move |tx| {
            let id = receipt_message(&receipt)?;
            let held: Option<(String, String, i64)> = tx
                .prepare_cached(
                    "SELECT queue, body, attempts FROM messages WHERE id = ?1 AND receipt = ?2",
                )?
                .query_row(params![id, receipt.0], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })
                .optional()?;
            let Some((queue, body, attempts)) = held else {
                return Err(DbError::StaleReceipt(receipt.0));
            };
            insert_dead_letter(tx, &queue, &body, &reason, attempts_of(attempts), now)?;
            tx.prepare_cached("DELETE FROM messages WHERE id = ?1")?
                .execute([id])?;
            Ok(())
        })
        .await
        .map_err(|e| e.into_queue("dead-letter"))
    }

    async fn dead_letters(&self, queue: QueueName) -> Result<Vec<DeadLetter>, QueueError> {
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT body, reason, attempts, at FROM dead_letters WHERE queue = ?1 ORDER BY id",
            )?;
            let letters = stmt
                .query_map([queue.as_str()], |row| {
                    Ok(DeadLetter {
                        queue,
                        body: row.get(0)?,
                        reason: row.get(1)?,
                        attempts: attempts_of(row.get(2)?),
                        at: Millis(uint(row.get(3)?)),
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(letters)
        })
        .await
        .map_err(|e| e.into_queue("list dead letters"))
    }
}

impl SqliteRuntime {
    fn lease(&self, visibility: GoDuration) -> Lease {
        let now = self.now();
        Lease {
            now,
            hidden_until: int(now.plus(visibility).0),
            max_attempts: self.max_attempts(),
        }
    }

    /// Leases the first due message of the first of `queues` (in that order) that has one, in
    /// one transaction: what a worker does when it looks for work, instead of one receive per
    /// queue.
    pub async fn receive_first(
        &self,
        queues: &[QueueName],
        visibility: GoDuration,
    ) -> Result<Option<Received>, QueueError> {
        let lease = self.lease(visibility);
        let queues = queues.to_vec();
        self.write(move |tx| {
            for queue in queues {
                if let Some(m) = take_due(tx, &lease, queue, 1)?.pop() {
                    return Ok(Some(m));
                }
            }
            Ok(None)
        })
        .await
        .map_err(|e| e.into_queue("receive"))
    }

    /// Makes every message leased by a receiver visible again now, and returns how many.
    ///
    /// For a process that owns the file exclusively and is starting: the leases it finds were
    /// taken by a previous process that stopped or died, and nobody will ack them. Their
    /// attempt counts stand, so a message that keeps killing the process still ends in the
    /// dead letters.
    pub async fn release_leases(&self) -> Result<usize, QueueError> {
        let now = int(self.now().0);
        self.write(move |tx| {
            Ok(tx
                .prepare_cached(
                    "UPDATE messages SET visible_at = ?1, receipt = NULL
                     WHERE receipt IS NOT NULL AND visible_at > ?1",
                )?
                .execute(params![now])?)
        })
        .await
        .map_err(|e| e.into_queue("release leases"))
    }

    /// Sleeps until one of `queues` may have a message to receive, or `timeout` passes; never
    /// busy-polls. Returns `true` when woken because a message is due or was sent (or given
    /// back), `false` on timeout. A send wakes one waiter per message (see
    /// [`SqliteRuntime::signal_sent`]). Wakes early when the earliest message already waiting
    /// in those queues (delayed, or held under a lease) becomes due; a lease taken after the
    /// call began is only noticed at `timeout`, so keep it to a few seconds.
    pub async fn wait_for_message(
        &self,
        queues: &[QueueName],
        timeout: Duration,
    ) -> Result<bool, QueueError> {
        // Count in and register before looking, so a send that commits after the look still
        // wakes us; one that committed before it is seen by the look. A wake-up this waiter
        // takes and then drops unused (it returns early below) passes on to another waiter.
        let (signal, _waiting) = self.sent_signal();
        let sent = signal.notified();
        tokio::pin!(sent);
        sent.as_mut().enable();
        let now = self.now();
        let names: Vec<&'static str> = queues.iter().map(|q| q.as_str()).collect();
        let next_due = self
            .read(move |conn| {
                let mut stmt =
                    conn.prepare_cached("SELECT MIN(visible_at) FROM messages WHERE queue = ?1")?;
                let mut earliest: Option<i64> = None;
                for name in names {
                    let at: Option<i64> = stmt.query_row([name], |row| row.get(0))?;
                    earliest = earliest.into_iter().chain(at).min();
                }
                Ok(earliest.map(|at| Millis(uint(at))))
            })
            .await
            .map_err(|e| e.into_queue("wait for message"))?;
        let until_due = next_due.map(|at| Duration::from_millis(at.0.saturating_sub(now.0)));
        if until_due == Some(Duration::ZERO) {
            return Ok(true);
        }
        let sleep_for = until_due.map_or(timeout, |d| d.min(timeout));
        tokio::select! {
            () = sent => Ok(true),
            () = tokio::time::sleep(sleep_for) => Ok(until_due.is_some_and(|d| d <= timeout)),
        }
    }
}
