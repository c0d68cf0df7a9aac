//! Stage logs: a counter item per (deployment, stage) holds the last position, and each append
//! moves it from the value it read while putting the new lines, in one transaction. A
//! concurrent append makes the condition fail; the loser reads again and retries, so positions
//! never repeat and never skip.

use std::time::Duration;

use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem, Update};
use gannet_domain::duration::Millis;
use gannet_domain::ids::{DeploymentId, StageId};
use gannet_domain::ports::{LogLine, StoreError};

use super::keys::{self, Item, Key, AT, EXPIRES_AT, LAST, PK, SK, TEXT};
use super::{unavailable, unbuilt, DynamoStore};

/// Lines per transaction: DynamoDB's 100 items, less the counter.
const LINES_PER_APPEND: usize = 99;
/// Bytes of line text per transaction, well under DynamoDB's 4 MB per transaction.
const BYTES_PER_APPEND: usize = 2 * 1024 * 1024;
/// A longer line is cut to this many bytes, so every line fits in one item (400 KB).
pub(crate) const MAX_LINE_BYTES: usize = 64 * 1024;
/// Attempts of one append against concurrent appenders before giving up.
const APPEND_TRIES: u32 = 32;
const TRUNCATED: &str = " …[truncated]";

/// `text` cut at a character boundary to fit [`MAX_LINE_BYTES`], marked when cut.
fn fit(text: &str) -> String {
    if text.len() <= MAX_LINE_BYTES {
        return text.to_owned();
    }
    let mut end = MAX_LINE_BYTES - TRUNCATED.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{TRUNCATED}", &text[..end])
}

/// Splits lines into appends that each fit one transaction.
fn batches(lines: &[String]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut bytes = 0;
    for line in lines.iter().map(|l| fit(l)) {
        let full = out
            .last()
            .is_none_or(|b| b.len() >= LINES_PER_APPEND || bytes + line.len() > BYTES_PER_APPEND);
        if full {
            out.push(Vec::new());
            bytes = 0;
        }
        bytes += line.len();
        if let Some(batch) = out.last_mut() {
            batch.push(line);
        }
    }
    out
}

/// A short pause that differs between racing appenders.
fn backoff(attempt: u32) -> Duration {
    let spread = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()) % 20);
    Duration::from_millis(u64::from(attempt.min(10)) * 5 + spread)
}

enum Attempt {
    Appended,
    LostRace,
}

impl DynamoStore {
    pub(crate) async fn append_lines(
        &self,
        deployment: &DeploymentId,
        stage: &StageId,
        at: Millis,
        lines: &[String],
    ) -> Result<(), StoreError> {
        for batch in batches(lines) {
            let mut appended = false;
            for attempt in 0..APPEND_TRIES {
                if attempt > 0 {
                    tokio::time::sleep(backoff(attempt)).await;
                }
                let seen = self.last_position(deployment, stage).await?;
                match self.try_append(deployment, stage, at, &batch, seen).await? {
                    Attempt::Appended => {
                        appended = true;
                        break;
                    }
                    Attempt::LostRace => {}
                }
            }
            if !appended {
                return Err(StoreError::Unavailable {
                    operation: "append stage log",
                    source: format!(
                        "lost to concurrent appends {APPEND_TRIES} times on {deployment}/{stage}"
                    )
                    .into(),
                });
            }
        }
        Ok(())
    }

    /// The counter's last position; `None` before the first append.
    async fn last_position(
        &self,
        deployment: &DeploymentId,
        stage: &StageId,
    ) -> Result<Option<u64>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .set_key(Some(Key::log_counter(deployment, stage).item()))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable("get stage log counter", e))?;
        Ok(out.item().and_then(|item| keys::number(item, LAST)))
    }

    async fn try_append(
        &self,
        deployment: &DeploymentId,
        stage: &StageId,
        at: Millis,
        lines: &[String],
        seen: Option<u64>,
    ) -> Result<Attempt, StoreError> {
        let first = seen.unwrap_or(0) + 1;
        let expires_at = keys::n(keys::expiry(at, self.options.log_days));
        let counter = Update::builder()
            .table_name(&self.table)
            .set_key(Some(Key::log_counter(deployment, stage).item()))
            .update_expression("SET #last = :last, #expires_at = :expires_at")
            .expression_attribute_names("#last", LAST)
            .expression_attribute_names("#expires_at", EXPIRES_AT)
            .expression_attribute_values(":last", keys::n(first + lines.len() as u64 - 1))
            .expression_attribute_values(":expires_at", expires_at.clone());
        let counter = match seen {
            None => counter
                .condition_expression("attribute_not_exists(#pk)")
                .expression_attribute_names("#pk", PK),
            Some(seen) => counter
                .condition_expression("#last = :seen")
                .expression_attribute_values(":seen", keys::n(seen)),
        };
        let counter = counter
            .build()
            .map_err(|e| unbuilt("build a log counter update", e))?;
        let mut items = vec![TransactWriteItem::builder().update(counter).build()];
        for (seq, text) in (first..).zip(lines) {
            let mut item: Item = Key::log_line(deployment, stage, seq).item();
            item.insert(AT.to_owned(), keys::n(at.0));
            item.insert(TEXT.to_owned(), keys::s(text.clone()));
            item.insert(EXPIRES_AT.to_owned(), expires_at.clone());
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(item))
                .build()
                .map_err(|e| unbuilt("build a log line put", e))?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        let result = self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await;
        let Err(e) = result else {
            return Ok(Attempt::Appended);
        };
        if let Some(TransactWriteItemsError::TransactionCanceledException(cancel)) =
            e.as_service_error()
        {
            let raced = cancel.cancellation_reasons().iter().any(|r| {
                matches!(
                    r.code(),
                    Some("ConditionalCheckFailed" | "TransactionConflict")
                )
            });
            if raced {
                return Ok(Attempt::LostRace);
            }
        }
        Err(unavailable("append stage log", e))
    }

    pub(crate) async fn read_lines(
        &self,
        deployment: &DeploymentId,
        stage: &StageId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<LogLine>, StoreError> {
        let Some(from) = after.checked_add(1) else {
            return Ok(Vec::new());
        };
        let mut lines = Vec::new();
        let mut start: Option<Item> = None;
        // Each page holds up to 1 MB (and at most the lines still wanted).
        for _ in 0..100_000 {
            let wanted = limit.saturating_sub(lines.len());
            if wanted == 0 {
                break;
            }
            let out = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("#pk = :pk AND #sk BETWEEN :from AND :to")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_names("#sk", SK)
                .expression_attribute_values(":pk", keys::s(keys::deployment_partition(deployment)))
                .expression_attribute_values(":from", keys::s(keys::log_sort_key(stage, from)))
                .expression_attribute_values(":to", keys::s(keys::log_sort_key(stage, u64::MAX)))
                .consistent_read(true)
                .limit(i32::try_from(wanted).unwrap_or(i32::MAX))
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|e| unavailable("query stage log", e))?;
            for item in out.items() {
                lines.push(keys::log_line(item)?);
            }
            match out.last_evaluated_key() {
                Some(last) => start = Some(last.clone()),
                None => break,
            }
        }
        Ok(lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_are_cut_and_batches_fit_a_transaction() {
        let long = "é".repeat(MAX_LINE_BYTES);
        let cut = fit(&long);
        assert!(
            cut.len() <= MAX_LINE_BYTES && cut.ends_with(TRUNCATED),
            "{}",
            cut.len()
        );
        assert_eq!(fit("short"), "short");

        let check = |lines: Vec<String>, want: &[usize]| {
            let sizes: Vec<usize> = batches(&lines).iter().map(Vec::len).collect();
            assert_eq!(sizes, want);
        };
        check(Vec::new(), &[]);
        check(vec!["a".to_owned(); 99], &[99]);
        check(vec!["a".to_owned(); 250], &[99, 99, 52]);
        // 2 MB of text per transaction at most: 32 lines of 64 KB.
        check(vec!["x".repeat(MAX_LINE_BYTES); 40], &[32, 8]);
    }

    /// An append that read the counter before another append committed loses, writes nothing,
    /// and succeeds once it has read the counter again. (Run one request at a time: moto rolls
    /// a failed transaction back by restoring a copy of the whole table, which would undo a
    /// concurrent transaction's writes; DynamoDB has no such problem.)
    #[tokio::test]
    async fn an_append_from_a_stale_read_loses_and_writes_nothing() {
        let store = crate::test_moto::fresh_store().await;
        let d = DeploymentId::parse("d-1").expect("id");
        let stage = StageId::parse("run").expect("id");
        let lines = |texts: &[&str]| texts.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>();
        let check = |seen: Option<u64>, texts: &[&str], appended: bool| {
            let (store, d, stage, texts) = (store.clone(), d.clone(), stage.clone(), lines(texts));
            async move {
                let got = store
                    .try_append(&d, &stage, Millis(1), &texts, seen)
                    .await
                    .expect("append");
                assert_eq!(matches!(got, Attempt::Appended), appended, "seen {seen:?}");
            }
        };
        check(None, &["a", "b"], true).await;
        check(None, &["lost"], false).await;
        check(Some(1), &["lost"], false).await;
        check(Some(3), &["lost"], false).await;
        check(Some(2), &["c"], true).await;
        check(Some(2), &["lost"], false).await;
        let got: Vec<(u64, String)> = store
            .read_lines(&d, &stage, 0, usize::MAX)
            .await
            .expect("logs")
            .into_iter()
            .map(|l| (l.seq, l.text))
            .collect();
        let want = [(1, "a"), (2, "b"), (3, "c")].map(|(n, t)| (n, t.to_owned()));
        assert_eq!(got, want);
        assert_eq!(
            store.last_position(&d, &stage).await.expect("counter"),
            Some(3)
        );
    }
}
