//! Analysis by logs: how many log lines match a query over an interval, from CloudWatch Logs
//! Insights (`StartQuery`, then `GetQueryResults` until the query is complete, never past the
//! check's timeout: a query still running then is stopped with `StopQuery`).
//!
//! **The count** of an answer ([`count`]):
//! - rows of log events (they carry `@ptr`, as `fields` and `filter` queries return them): the
//!   number of rows, or AWS's `recordsMatched` when it is more (a `limit`, or the 10,000 rows
//!   an answer holds at most, cut the rows short);
//! - aggregated rows (`stats`): the sum over the rows of each row's `count(*)` field, or of its
//!   only numeric field (`stats count(*) as errors by bin(1m)`);
//! - no rows: 0 when the query scanned log events, and *no data* when it scanned none (nothing
//!   was logged in the interval: the check's `skipOnNoData` decides).

use std::time::Duration;

use aws_sdk_cloudwatchlogs::types::QueryStatus;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use gannet_domain::report::cut;
use gannet_domain::GoDuration;
use tokio::time::Instant;

use crate::providers::{QueryError, Range};

/// The first pause between two `GetQueryResults`; each next one doubles, up to [`POLL_MAX`].
const POLL_FIRST: Duration = Duration::from_millis(250);
const POLL_MAX: Duration = Duration::from_secs(2);
/// A bound on the polls besides the deadline (a timeout of 10 minutes polls about 300 times).
const MAX_POLLS: usize = 1000;
/// How long `StopQuery` may take once the deadline has passed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// One row of an answer: its fields, in order.
pub(crate) type Row = Vec<(String, String)>;

/// What a complete query gave: its rows and AWS's statistics (moto gives none).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Answer {
    pub(crate) rows: Vec<Row>,
    pub(crate) records_matched: Option<f64>,
    pub(crate) records_scanned: Option<f64>,
}

/// The number of matching lines in `answer` (see the module's documentation).
pub(crate) fn count(answer: &Answer) -> Result<u64, QueryError> {
    if answer.rows.is_empty() {
        return match answer.records_scanned {
            Some(scanned) if scanned > 0.0 => Ok(0),
            _ => Err(QueryError::NoData(
                "no log events in the log groups over the interval".into(),
            )),
        };
    }
    let events = answer
        .rows
        .iter()
        .any(|row| row.iter().any(|(field, _)| field == "@ptr"));
    if events {
        let rows = answer.rows.len() as u64;
        let matched = answer
            .records_matched
            .filter(|m| m.is_finite() && *m > 0.0)
            .map_or(0, |m| m.round() as u64);
        return Ok(rows.max(matched));
    }
    let mut total: f64 = 0.0;
    for (i, row) in answer.rows.iter().enumerate() {
        total += row_count(row).map_err(|why| {
            QueryError::Failed(format!(
                "row {} of the answer: {why}; a counting query ends in `stats count(*)` (by any groups: their counts are summed)",
                i + 1
            ))
        })?;
    }
    Ok(total.round() as u64)
}

/// The count an aggregated row holds: its `count(*)`, or its only numeric field.
fn row_count(row: &Row) -> Result<f64, String> {
    let number = |field: &str, value: &str| -> Result<f64, String> {
        match value.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            _ => Err(format!("{field} is {:?}, not a count", cut(value, 40))),
        }
    };
    if let Some((field, value)) = row.iter().find(|(field, _)| field == "count(*)") {
        return number(field, value);
    }
    let numeric: Vec<&(String, String)> = row
        .iter()
        .filter(|(_, value)| value.trim().parse::<f64>().is_ok())
        .collect();
    match numeric.as_slice() {
        [(field, value)] => number(field, value),
        [] => Err(format!(
            "no numeric field (it has: {})",
            names(row.iter().map(|(f, _)| f.as_str()))
        )),
        more => Err(format!(
            "more than one numeric field ({}): name the count `count(*)`",
            names(more.iter().map(|(f, _)| f.as_str()))
        )),
    }
}

fn names<'a>(fields: impl Iterator<Item = &'a str>) -> String {
    fields.collect::<Vec<_>>().join(", ")
}

/// `operation: Code: message` for an AWS error, or the whole error chain when it has no code
/// (a connection that failed, a timeout).
fn aws_error<E>(operation: &str, err: &E) -> QueryError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let said = match (err.code(), err.message()) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.to_owned(),
        _ => DisplayErrorContext(err).to_string(),
    };
    QueryError::Failed(format!("{operation}: {}", cut(&said, 400)))
}

/// Runs `query` over `range` on `log_groups` and reads its answer, within `timeout`.
pub(crate) async fn run(
    client: &aws_sdk_cloudwatchlogs::Client,
    log_groups: &[String],
    query: &str,
    range: Range,
    timeout: GoDuration,
) -> Result<Answer, QueryError> {
    let deadline = Instant::now() + timeout.get();
    let late = || {
        QueryError::Failed(format!(
            "the query did not complete within its timeout {timeout}"
        ))
    };
    // Logs Insights takes epoch seconds; the interval's end is included.
    let started = tokio::time::timeout_at(
        deadline,
        client
            .start_query()
            .set_log_group_names(Some(log_groups.to_vec()))
            .start_time((range.from.0 / 1000) as i64)
            .end_time((range.to.0 / 1000) as i64)
            .query_string(query)
            .send(),
    )
    .await
    .map_err(|_| late())?
    .map_err(|e| aws_error("StartQuery", &e))?;
    let id = started
        .query_id()
        .filter(|id| !id.is_empty())
        .ok_or_else(|| QueryError::Failed("StartQuery: the answer had no queryId".into()))?
        .to_owned();
    let mut pause = POLL_FIRST;
    for _ in 0..MAX_POLLS {
        let wake = (Instant::now() + pause).min(deadline);
        tokio::time::sleep_until(wake).await;
        if Instant::now() >= deadline {
            break;
        }
        pause = (pause * 2).min(POLL_MAX);
        let polled =
            tokio::time::timeout_at(deadline, client.get_query_results().query_id(&id).send())
                .await;
        let out = match polled {
            Err(_) => break,
            Ok(result) => result.map_err(|e| aws_error("GetQueryResults", &e))?,
        };
        match out.status() {
            Some(QueryStatus::Complete) => {
                let rows = out
                    .results()
                    .iter()
                    .map(|row| {
                        row.iter()
                            .map(|f| {
                                (
                                    f.field().unwrap_or_default().to_owned(),
                                    f.value().unwrap_or_default().to_owned(),
                                )
                            })
                            .collect()
                    })
                    .collect();
                let stats = out.statistics();
                return Ok(Answer {
                    rows,
                    records_matched: stats.map(|s| s.records_matched()),
                    records_scanned: stats.map(|s| s.records_scanned()),
                });
            }
            Some(QueryStatus::Running | QueryStatus::Scheduled) => {}
            Some(other) => {
                return Err(QueryError::Failed(format!(
                    "query {id} ended {}",
                    other.as_str()
                )))
            }
            None => {
                return Err(QueryError::Failed(
                    "GetQueryResults: the answer had no status".into(),
                ))
            }
        }
    }
    // Past the deadline: the query is stopped, not left to run (it would hold one of the
    // account's concurrent queries); whether that works changes nothing here.
    let _ = tokio::time::timeout(STOP_TIMEOUT, client.stop_query().query_id(&id).send()).await;
    Err(late())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(fields: &[(&str, &str)]) -> Row {
        fields
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect()
    }

    fn answer(rows: Vec<Row>, matched: Option<f64>, scanned: Option<f64>) -> Answer {
        Answer {
            rows,
            records_matched: matched,
            records_scanned: scanned,
        }
    }

    #[test]
    fn counts_are_read_from_every_shape_of_answer() {
        // `stats count(*)`, as Logs Insights answers it.
        let stats = answer(vec![row(&[("count(*)", "17")])], Some(17.0), Some(900.0));
        assert_eq!(count(&stats), Ok(17));
        // Grouped: the groups' counts add up; the bins are not numbers.
        let binned = answer(
            vec![
                row(&[("bin(1m)", "2026-11-28 09:00:00.000"), ("errors", "2")]),
                row(&[("bin(1m)", "2026-11-28 09:01:00.000"), ("errors", "3")]),
            ],
            Some(5.0),
            Some(100.0),
        );
        assert_eq!(count(&binned), Ok(5));
        let by_status = answer(
            vec![row(&[("status", "500"), ("count(*)", "4")])],
            None,
            Some(10.0),
        );
        assert_eq!(count(&by_status), Ok(4));
        // Log events: the rows, or recordsMatched when a limit cut them short.
        let events = answer(
            vec![
                row(&[("@timestamp", "2026-11-28 09:00:01.000"), ("@ptr", "a")]),
                row(&[("@timestamp", "2026-11-28 09:00:02.000"), ("@ptr", "b")]),
            ],
            None,
            None,
        );
        assert_eq!(count(&events), Ok(2));
        let limited = answer(vec![row(&[("@ptr", "a")])], Some(250.0), Some(4000.0));
        assert_eq!(count(&limited), Ok(250));
        // Nothing matched in logs that were written: 0. Nothing written at all: no data.
        assert_eq!(count(&answer(vec![], Some(0.0), Some(31.0))), Ok(0));
        assert!(matches!(
            count(&answer(vec![], Some(0.0), Some(0.0))),
            Err(QueryError::NoData(_))
        ));
        assert!(matches!(
            count(&answer(vec![], None, None)),
            Err(QueryError::NoData(_))
        ));
    }

    #[test]
    fn an_answer_that_is_not_a_count_says_why() {
        let two = answer(
            vec![row(&[("status", "500"), ("errors", "4")])],
            None,
            Some(1.0),
        );
        let why = count(&two).unwrap_err().to_string();
        assert!(
            why.contains("row 1 of the answer: more than one numeric field (status, errors)"),
            "{why}"
        );
        let words = answer(vec![row(&[("level", "ERROR")])], None, Some(1.0));
        let why = count(&words).unwrap_err().to_string();
        assert!(why.contains("no numeric field (it has: level)"), "{why}");
        assert!(why.contains("stats count(*)"), "{why}");
        let negative = answer(vec![row(&[("count(*)", "-1")])], None, Some(1.0));
        let why = count(&negative).unwrap_err().to_string();
        assert!(why.contains("count(*) is \"-1\", not a count"), "{why}");
    }
}
