//! The stages' `with`, with PipeCD's names and defaults.

use gannet_sdk::plugin::StageConfigError;
use gannet_sdk::stage_options;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::objects::Variant;

/// A variant's replica count: a number, or a percentage of the primary's (`"20%"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replicas {
    Count(u64),
    Percent(u64),
}

impl Replicas {
    /// The count for a primary of `primary` replicas: a percentage rounds up, and is at
    /// least 1.
    pub fn of(self, primary: u64) -> u64 {
        match self {
            Self::Count(n) => n,
            Self::Percent(p) => (primary * p).div_ceil(100).max(1),
        }
    }
}

impl Default for Replicas {
    fn default() -> Self {
        Self::Count(1)
    }
}

impl<'de> Deserialize<'de> for Replicas {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match Value::deserialize(d)? {
            Value::Number(n) => n.as_u64().map(Self::Count).ok_or_else(|| {
                D::Error::custom("replicas must be a whole number or a percentage such as \"20%\"")
            }),
            Value::String(s) => {
                let t = s.trim();
                let (digits, percent) = match t.strip_suffix('%') {
                    Some(d) => (d.trim(), true),
                    None => (t, false),
                };
                let n: u64 = digits.parse().map_err(|_| {
                    D::Error::custom(format!(
                        "{s:?}: replicas must be a whole number or a percentage such as \"20%\""
                    ))
                })?;
                if percent && n > 100 {
                    return Err(D::Error::custom(format!(
                        "{s:?}: a percentage is at most 100%"
                    )));
                }
                Ok(if percent {
                    Self::Percent(n)
                } else {
                    Self::Count(n)
                })
            }
            other => Err(D::Error::custom(format!(
                "replicas must be a whole number or a percentage such as \"20%\", not {}",
                stage_options::json_kind(&other)
            ))),
        }
    }
}

impl Serialize for Replicas {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Count(n) => s.serialize_u64(*n),
            Self::Percent(p) => s.serialize_str(&format!("{p}%")),
        }
    }
}

/// K8S_CANARY_ROLLOUT's and K8S_BASELINE_ROLLOUT's `with`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutOptions {
    #[serde(default)]
    pub replicas: Replicas,
    /// The name suffix of the copies; the variant's name when empty.
    #[serde(default)]
    pub suffix: String,
    #[serde(default)]
    pub create_service: bool,
    /// PipeCD's manifest patches (K8S_CANARY_ROLLOUT only): changes to the canary's copies
    /// ([`crate::patch`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<crate::patch::ManifestPatch>,
}

/// K8S_PRIMARY_ROLLOUT's `with`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PrimaryOptions {
    #[serde(default)]
    pub suffix: String,
    #[serde(default)]
    pub create_service: bool,
    #[serde(default)]
    pub add_variant_label_to_selector: bool,
    #[serde(default)]
    pub prune: bool,
}

/// K8S_SYNC's `with` (the quick sync takes `spec.quickSync`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SyncOptions {
    #[serde(default)]
    pub add_variant_label_to_selector: bool,
    #[serde(default)]
    pub prune: bool,
}

/// K8S_TRAFFIC_ROUTING's `with`: `all: canary`, or percentages that add up to 100.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RoutingOptions {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub all: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<gannet_config::Percentage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary: Option<gannet_config::Percentage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<gannet_config::Percentage>,
}

/// The traffic each variant gets, in percent; they add up to 100.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Split {
    pub primary: u8,
    pub canary: u8,
    pub baseline: u8,
}

impl Split {
    pub const ALL_PRIMARY: Self = Self {
        primary: 100,
        canary: 0,
        baseline: 0,
    };

    /// The one variant with all the traffic, if there is one.
    pub fn only(self) -> Option<Variant> {
        match (self.primary, self.canary, self.baseline) {
            (100, _, _) => Some(Variant::Primary),
            (_, 100, _) => Some(Variant::Canary),
            (_, _, 100) => Some(Variant::Baseline),
            _ => None,
        }
    }
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "primary {}%, canary {}%, baseline {}%",
            self.primary, self.canary, self.baseline
        )
    }
}

impl RoutingOptions {
    pub fn split(&self) -> Result<Split, StageConfigError> {
        if !self.all.is_empty() {
            if self.primary.is_some() || self.canary.is_some() || self.baseline.is_some() {
                return Err(StageConfigError::new(
                    "all",
                    "give either all or percentages, not both",
                ));
            }
            let mut split = Split {
                primary: 0,
                canary: 0,
                baseline: 0,
            };
            match self.all.as_str() {
                "primary" => split.primary = 100,
                "canary" => split.canary = 100,
                "baseline" => split.baseline = 100,
                other => {
                    return Err(StageConfigError::new(
                        "all",
                        format!("{other:?}: expected primary, canary or baseline"),
                    ));
                }
            }
            return Ok(split);
        }
        let get = |p: Option<gannet_config::Percentage>| p.map_or(0, |p| p.get());
        let split = Split {
            primary: get(self.primary),
            canary: get(self.canary),
            baseline: get(self.baseline),
        };
        let total = u16::from(split.primary) + u16::from(split.canary) + u16::from(split.baseline);
        if total != 100 {
            return Err(StageConfigError::new(
                "primary",
                format!("the percentages add up to {total}, not 100 ({split})"),
            ));
        }
        Ok(split)
    }
}

pub fn rollout(with: &Value, canary: bool) -> Result<RolloutOptions, StageConfigError> {
    let options: RolloutOptions = stage_options::parse(with)?;
    if !options.patches.is_empty() && !canary {
        return Err(StageConfigError::new(
            "patches",
            "is an option of K8S_CANARY_ROLLOUT only",
        ));
    }
    crate::patch::check(&options.patches)?;
    if matches!(options.replicas, Replicas::Count(0) | Replicas::Percent(0)) {
        return Err(StageConfigError::new(
            "replicas",
            "a variant needs at least one replica",
        ));
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn replicas_are_a_count_or_a_rounded_up_share_of_the_primary() {
        let r = |v: Value| rollout(&json!({"replicas": v}), true).map(|o| o.replicas);
        assert_eq!(r(json!(3)).unwrap().of(10), 3);
        assert_eq!(r(json!("20%")).unwrap().of(10), 2);
        assert_eq!(r(json!("10%")).unwrap().of(3), 1);
        assert_eq!(r(json!("50%")).unwrap().of(3), 2);
        assert!(r(json!("120%"))
            .unwrap_err()
            .message
            .contains("at most 100%"));
        assert!(r(json!(0)).unwrap_err().message.contains("at least one"));
        assert!(r(json!(true)).is_err());
        // Patches: K8S_CANARY_ROLLOUT's only, each written in full.
        let e = rollout(&json!({"patches": [{}]}), true).unwrap_err();
        assert!(!e.unsupported && e.field.starts_with("patches"), "{e:?}");
        let one = json!({"patches": [{"target": {"kind": "ConfigMap", "name": "c"},
            "ops": [{"path": "$.data.a", "value": "1"}]}]});
        assert_eq!(
            rollout(&one, true).unwrap().patches[0].ops[0].op,
            "yaml-replace"
        );
        assert_eq!(rollout(&one, false).unwrap_err().field, "patches");
    }

    #[test]
    fn routing_takes_all_or_percentages_that_add_up_to_100() {
        let s = |v: Value| serde_json::from_value::<RoutingOptions>(v).unwrap().split();
        assert_eq!(
            s(json!({"all": "canary"})).unwrap().only(),
            Some(Variant::Canary)
        );
        let split = s(json!({"primary": 80, "canary": "20%"})).unwrap();
        assert_eq!((split.primary, split.canary, split.only()), (80, 20, None));
        assert!(s(json!({"primary": 80}))
            .unwrap_err()
            .message
            .contains("add up to 80"));
        assert!(s(json!({"all": "blue"})).is_err());
        assert!(s(json!({"all": "canary", "primary": 10})).is_err());
    }
}
