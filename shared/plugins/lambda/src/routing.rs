//! An alias's traffic routing: the version it points at, plus `RoutingConfig`'s
//! `AdditionalVersionWeights`, and how LAMBDA_PROMOTE splits traffic between two versions.
//!
//! Routing is saved in stage metadata as JSON (`{"version":"3","weights":{"2":0.9}}`), or `none`
//! when the alias did not exist, so rollback can put back exactly what was there.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Weights closer than this are the same weight (AWS stores doubles; we compute them exactly).
const WEIGHT_EPSILON: f64 = 1e-9;

/// Metadata text for "the alias did not exist".
const NO_ALIAS: &str = "none";

/// Where an alias sends traffic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AliasRouting {
    /// The alias's `FunctionVersion`; it gets `1 - sum(weights)` of the traffic.
    pub version: String,
    /// `RoutingConfig.AdditionalVersionWeights`: version → share in 0..=1.
    #[serde(default)]
    pub weights: BTreeMap<String, f64>,
}

/// Saved routing that did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("saved alias routing {text:?} is unreadable: {reason}")]
pub struct RoutingParseError {
    text: String,
    reason: String,
}

impl AliasRouting {
    /// All traffic to `version`.
    pub fn all_to(version: &str) -> Self {
        Self {
            version: version.to_owned(),
            weights: BTreeMap::new(),
        }
    }

    /// LAMBDA_PROMOTE's routing: `percent` to `new`, the rest to `previous`. At 100 (or when the
    /// two are the same version) all traffic goes to `new`; at 0 all of it stays on `previous`.
    pub fn promote(new: &str, previous: &str, percent: u8) -> Self {
        if percent >= 100 || new == previous {
            return Self::all_to(new);
        }
        if percent == 0 {
            return Self::all_to(previous);
        }
        // Integer hundredths, divided once: 10% gives exactly 0.9, not 1.0 - 0.1.
        let rest = f64::from(100 - percent) / 100.0;
        Self {
            version: new.to_owned(),
            weights: BTreeMap::from([(previous.to_owned(), rest)]),
        }
    }

    /// The same routing, up to float noise; a zero weight counts as absent.
    pub fn same_as(&self, other: &Self) -> bool {
        let live = |r: &Self| -> BTreeMap<String, f64> {
            r.weights
                .iter()
                .filter(|(_, w)| **w > WEIGHT_EPSILON)
                .map(|(v, w)| (v.clone(), *w))
                .collect()
        };
        let (a, b) = (live(self), live(other));
        self.version == other.version
            && a.len() == b.len()
            && a.iter()
                .zip(&b)
                .all(|((va, wa), (vb, wb))| va == vb && (wa - wb).abs() < WEIGHT_EPSILON)
    }

    /// The share of traffic `version` gets, 0..=1.
    pub fn share_of(&self, version: &str) -> f64 {
        let extra: f64 = self.weights.values().sum();
        let own = self.weights.get(version).copied().unwrap_or(0.0);
        if version == self.version {
            own + (1.0 - extra).max(0.0)
        } else {
            own
        }
    }

    /// The version that gets the most traffic; the alias's own version on a tie. After an
    /// interrupted canary (new version primary at 10%), this is still the old version.
    pub fn dominant_version(&self) -> &str {
        let mut best = (self.version.as_str(), self.share_of(&self.version));
        for version in self.weights.keys() {
            let share = self.share_of(version);
            if share > best.1 + WEIGHT_EPSILON {
                best = (version, share);
            }
        }
        best.0
    }

    /// Metadata text for a routing, or for no alias.
    pub fn to_metadata(routing: Option<&Self>) -> String {
        match routing {
            None => NO_ALIAS.to_owned(),
            Some(r) => serde_json::to_string(r).unwrap_or_else(|_| NO_ALIAS.to_owned()),
        }
    }

    /// Reads [`Self::to_metadata`]'s text back.
    pub fn from_metadata(text: &str) -> Result<Option<Self>, RoutingParseError> {
        if text == NO_ALIAS {
            return Ok(None);
        }
        serde_json::from_str(text)
            .map(Some)
            .map_err(|e| RoutingParseError {
                text: text.to_owned(),
                reason: e.to_string(),
            })
    }
}

impl fmt::Display for AliasRouting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut versions = vec![self.version.clone()];
        versions.extend(self.weights.keys().filter(|v| **v != self.version).cloned());
        let parts: Vec<String> = versions
            .iter()
            .map(|v| format!("version {v} {}%", percent(self.share_of(v))))
            .collect();
        f.write_str(&parts.join(", "))
    }
}

/// A share as a percentage without float noise: 0.9 → `90`, 0.125 → `12.5`.
fn percent(share: f64) -> String {
    let tenths = (share * 1000.0).round() / 10.0;
    if tenths.fract() == 0.0 {
        format!("{tenths:.0}")
    } else {
        format!("{tenths:.1}")
    }
}

/// Text for the routing of an alias that may not exist.
pub fn describe(routing: Option<&AliasRouting>) -> String {
    routing.map_or_else(|| "no alias".to_owned(), ToString::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routing(version: &str, weights: &[(&str, f64)]) -> AliasRouting {
        AliasRouting {
            version: version.into(),
            weights: weights.iter().map(|(v, w)| ((*v).into(), *w)).collect(),
        }
    }

    #[test]
    fn promote_splits_exactly() {
        let cases = [
            (10, routing("2", &[("1", 0.9)])),
            (50, routing("2", &[("1", 0.5)])),
            (99, routing("2", &[("1", 0.01)])),
            (100, routing("2", &[])),
            (0, routing("1", &[])),
        ];
        for (percent, want) in cases {
            let got = AliasRouting::promote("2", "1", percent);
            assert_eq!(got, want, "{percent}%");
        }
        assert_eq!(AliasRouting::promote("3", "3", 10), routing("3", &[]));
        assert_eq!(AliasRouting::promote("2", "1", 10).weights["1"], 0.9);
    }

    #[test]
    fn sameness_ignores_noise_and_zero_weights() {
        let a = routing("2", &[("1", 0.9)]);
        assert!(a.same_as(&routing("2", &[("1", 0.900_000_000_000_1)])));
        assert!(!a.same_as(&routing("2", &[("1", 0.8)])));
        assert!(!a.same_as(&routing("1", &[("2", 0.9)])));
        assert!(routing("1", &[]).same_as(&routing("1", &[("2", 0.0)])));
        assert!(!routing("1", &[]).same_as(&a));
    }

    #[test]
    fn dominant_version_is_where_most_traffic_goes() {
        let cases = [
            (routing("1", &[]), "1"),
            (routing("2", &[("1", 0.9)]), "1"),
            (routing("2", &[("1", 0.1)]), "2"),
            (routing("2", &[("1", 0.5)]), "2"),
        ];
        for (r, want) in cases {
            assert_eq!(r.dominant_version(), want, "{r:?}");
        }
    }

    #[test]
    fn metadata_round_trips() {
        for r in [
            None,
            Some(routing("7", &[])),
            Some(routing("2", &[("1", 0.9)])),
        ] {
            let text = AliasRouting::to_metadata(r.as_ref());
            assert_eq!(AliasRouting::from_metadata(&text).unwrap(), r, "{text}");
        }
        assert_eq!(AliasRouting::to_metadata(None), "none");
        assert!(AliasRouting::from_metadata("{").is_err());
    }

    #[test]
    fn display_reads_as_percentages() {
        assert_eq!(
            routing("2", &[("1", 0.9)]).to_string(),
            "version 2 10%, version 1 90%"
        );
        assert_eq!(routing("3", &[]).to_string(), "version 3 100%");
        assert_eq!(describe(None), "no alias");
    }
}
