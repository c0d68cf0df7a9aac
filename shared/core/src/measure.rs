//! The measurements a stage's metadata holds, as the API and the CLI show them: an ANALYSIS
//! stage's checks (`check.<id>`) and a lifecycle phase's evaluations' checks
//! (`item.<evaluation>.check.<id>`, shown as `<evaluation>/<id>`). The ANALYSIS plugin writes
//! each check's record as JSON under its key; this module only reads the measurements kept
//! there, so every reader (the API, the CLI, the web console) agrees on them.

use serde::{Deserialize, Serialize};

use crate::ports::Metadata;
use crate::presentation::Detail;

/// The prefix of a check's metadata key.
pub const CHECK_PREFIX: &str = "check.";

/// The prefix of a lifecycle item's metadata keys (`item.<name>.<key>`).
pub const ITEM_PREFIX: &str = "item.";

/// One measurement, as a person reads it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measurement {
    /// `metrics[0]`, `https[1]`, or `smoke/metrics[0]` for an evaluation's check.
    pub check: String,
    /// The n-th interval of the analysis.
    pub slot: u64,
    pub value: String,
    pub expected: String,
    /// `pass`, `fail` or `skip`.
    pub verdict: String,
    #[serde(default)]
    pub detail: String,
}

/// The part of a check's record read here: its latest measurements, oldest first.
#[derive(Deserialize)]
struct Kept {
    #[serde(default)]
    last: Vec<Taken>,
}

#[derive(Deserialize)]
struct Taken {
    slot: u64,
    value: String,
    expected: String,
    verdict: String,
    #[serde(default)]
    detail: String,
}

/// The measurements kept in `metadata`, by check and then in the order they were taken. A
/// record that does not read is left out.
pub fn measurements(metadata: &Metadata) -> Vec<Measurement> {
    metadata
        .iter()
        .filter_map(|(key, text)| {
            let check = match key.strip_prefix(CHECK_PREFIX) {
                Some(id) => id.to_owned(),
                None => {
                    let (item, id) = key
                        .strip_prefix(ITEM_PREFIX)?
                        .split_once(&format!(".{CHECK_PREFIX}"))?;
                    format!("{item}/{id}")
                }
            };
            let kept: Kept = serde_json::from_str(text).ok()?;
            Some((check, kept))
        })
        .flat_map(|(check, kept)| {
            kept.last.into_iter().map(move |m| Measurement {
                check: check.clone(),
                slot: m.slot,
                value: m.value,
                expected: m.expected,
                verdict: m.verdict,
                detail: m.detail,
            })
        })
        .collect()
}

/// `list` as a table of measurements ([`Detail::Table`]), or `None` when it is empty.
pub fn table(list: &[Measurement]) -> Option<Detail> {
    (!list.is_empty()).then(|| Detail::Table {
        title: "Measurements".into(),
        columns: ["CHECK", "#", "VALUE", "EXPECTED", "VERDICT", "DETAIL"]
            .map(str::to_owned)
            .to_vec(),
        rows: list
            .iter()
            .map(|m| {
                vec![
                    m.check.clone(),
                    format!("#{}", m.slot),
                    m.value.clone(),
                    m.expected.clone(),
                    m.verdict.to_ascii_uppercase(),
                    m.detail.clone(),
                ]
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_stages_checks_and_its_evaluations_checks_and_skips_the_rest() {
        let record = |value: &str| {
            format!(
                r#"{{"slot":2,"taken":2,"failures":0,"missed":0,"last":[{{"slot":1,"at":1,"value":"0.1","expected":"x < 1","verdict":"pass"}},{{"slot":2,"at":2,"value":"{value}","expected":"x < 1","verdict":"fail","detail":"too high"}}]}}"#
            )
        };
        let metadata: Metadata = [
            ("check.metrics[0]".to_owned(), record("1.5")),
            ("item.smoke.check.https[0]".to_owned(), record("HTTP 500")),
            ("item.smoke".to_owned(), "{}".to_owned()),
            ("check.broken".to_owned(), "not json".to_owned()),
            ("startedAt".to_owned(), "12".to_owned()),
        ]
        .into_iter()
        .collect();
        let got = measurements(&metadata);
        let summary: Vec<(String, u64, String, String)> = got
            .iter()
            .map(|m| (m.check.clone(), m.slot, m.value.clone(), m.verdict.clone()))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("metrics[0]".into(), 1, "0.1".into(), "pass".into()),
                ("metrics[0]".into(), 2, "1.5".into(), "fail".into()),
                ("smoke/https[0]".into(), 1, "0.1".into(), "pass".into()),
                ("smoke/https[0]".into(), 2, "HTTP 500".into(), "fail".into()),
            ]
        );
        assert_eq!(got[1].detail, "too high");
    }
}
