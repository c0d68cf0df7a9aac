//! Traffic between the primary and canary target groups: ECS_TRAFFIC_ROUTING's options, and the
//! rewrite of every listener rule (default rules included) whose forward action sends traffic
//! to exactly that pair. Other rules and actions are left as they are.

use aws_sdk_elasticloadbalancingv2::types::{
    Action, ActionTypeEnum, ForwardActionConfig, TargetGroupTuple,
};
use gannet_config::Percentage;
use gannet_sdk::plugin::StageConfigError;
use serde_json::{json, Value};

/// The primary and canary target groups.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pair<'a> {
    pub primary: &'a str,
    pub canary: &'a str,
}

/// Traffic weights, summing to 100.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Weights {
    pub primary: i32,
    pub canary: i32,
}

impl Weights {
    pub(crate) const ALL_PRIMARY: Weights = Weights {
        primary: 100,
        canary: 0,
    };

    pub(crate) fn to_metadata(self) -> String {
        format!("{}/{}", self.primary, self.canary)
    }
}

impl std::fmt::Display for Weights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "primary {}%, canary {}%", self.primary, self.canary)
    }
}

/// ECS_TRAFFIC_ROUTING's `with`: `primary` or `canary`, in percent; the other gets the rest.
/// Neither means all traffic to the primary (PipeCD's default). Unlike PipeCD, `primary: 0`
/// sends everything to the canary, as written (PipeCD reads a 0 as unset).
/// ECS_TRAFFIC_ROUTING's `with`: either weight, or both adding up to 100; neither is all
/// traffic to the primary.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RoutingOptions {
    #[serde(default)]
    primary: Option<Percentage>,
    #[serde(default)]
    canary: Option<Percentage>,
}

pub(crate) fn options(with: &Value) -> Result<Weights, StageConfigError> {
    let o: RoutingOptions = gannet_sdk::stage_options::parse(with)?;
    let percent = |p: Option<Percentage>| p.map(|p| i32::from(p.get()));
    match (percent(o.primary), percent(o.canary)) {
        (None, None) => Ok(Weights::ALL_PRIMARY),
        (Some(p), None) => Ok(Weights {
            primary: p,
            canary: 100 - p,
        }),
        (None, Some(c)) => Ok(Weights {
            primary: 100 - c,
            canary: c,
        }),
        (Some(p), Some(c)) if p + c == 100 => Ok(Weights {
            primary: p,
            canary: c,
        }),
        (Some(p), Some(c)) => Err(StageConfigError::new(
            "canary",
            format!("primary {p} and canary {c} do not add up to 100; give one of them"),
        )),
    }
}

/// The normalised stage options.
pub(crate) fn options_value(w: Weights) -> Value {
    json!({"primary": w.primary, "canary": w.canary})
}

/// True for a forward action whose target groups are exactly the pair.
fn forwards_to_pair(action: &Action, pair: Pair<'_>) -> bool {
    if action.r#type() != Some(&ActionTypeEnum::Forward) {
        return false;
    }
    let Some(config) = action.forward_config() else {
        return false;
    };
    let arns: Vec<&str> = config
        .target_groups()
        .iter()
        .filter_map(|t| t.target_group_arn())
        .collect();
    arns.len() == 2 && arns.contains(&pair.primary) && arns.contains(&pair.canary)
}

/// The pair's weights in the first action of `actions` that forwards to it.
pub(crate) fn weights_in(actions: &[Action], pair: Pair<'_>) -> Option<Weights> {
    let action = actions.iter().find(|a| forwards_to_pair(a, pair))?;
    let groups = action.forward_config()?.target_groups();
    let weight = |arn: &str| {
        groups
            .iter()
            .find(|t| t.target_group_arn() == Some(arn))
            .and_then(TargetGroupTuple::weight)
            .unwrap_or(1)
    };
    Some(Weights {
        primary: weight(pair.primary),
        canary: weight(pair.canary),
    })
}

/// What routing `weights` does to a rule's actions.
#[derive(Debug, PartialEq)]
pub(crate) enum Rewrite {
    /// No action forwards to the pair.
    Unrelated,
    /// Every action forwarding to the pair already has the weights.
    Already,
    /// The actions to set.
    Changed(Vec<Action>),
}

/// The rule's actions with every forward to the pair given `weights`; stickiness and order are
/// kept.
pub(crate) fn rewrite(actions: &[Action], pair: Pair<'_>, weights: Weights) -> Rewrite {
    let mut related = false;
    let mut changed = false;
    let out = actions
        .iter()
        .map(|a| {
            if !forwards_to_pair(a, pair) {
                return a.clone();
            }
            related = true;
            if weights_in(std::slice::from_ref(a), pair) == Some(weights) {
                return a.clone();
            }
            changed = true;
            let stickiness = a
                .forward_config()
                .and_then(|c| c.target_group_stickiness_config())
                .cloned();
            let tuple = |arn: &str, weight: i32| {
                TargetGroupTuple::builder()
                    .target_group_arn(arn)
                    .weight(weight)
                    .build()
            };
            Action::builder()
                .r#type(ActionTypeEnum::Forward)
                .set_order(a.order())
                .forward_config(
                    ForwardActionConfig::builder()
                        .target_groups(tuple(pair.primary, weights.primary))
                        .target_groups(tuple(pair.canary, weights.canary))
                        .set_target_group_stickiness_config(stickiness)
                        .build(),
                )
                .build()
        })
        .collect();
    match (related, changed) {
        (false, _) => Rewrite::Unrelated,
        (true, false) => Rewrite::Already,
        (true, true) => Rewrite::Changed(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(with: Value, expected: Result<(i32, i32), &str>) {
        let got = options(&with)
            .map(|w| (w.primary, w.canary))
            .map_err(|e| e.field);
        assert_eq!(got, expected.map_err(str::to_owned), "{with}");
    }

    #[test]
    fn traffic_options() {
        check(Value::Null, Ok((100, 0)));
        check(json!({}), Ok((100, 0)));
        check(json!({"canary": 20}), Ok((80, 20)));
        check(json!({"canary": "20%"}), Ok((80, 20)));
        check(json!({"primary": 100}), Ok((100, 0)));
        check(json!({"primary": 0}), Ok((0, 100)));
        check(json!({"primary": 70, "canary": 30}), Ok((70, 30)));
        check(json!({"primary": 70, "canary": 20}), Err("canary"));
        check(json!({"canary": 120}), Err("canary"));
        check(json!({"weight": 1}), Err("weight"));
        check(json!([1]), Err("with"));
    }

    fn forward(groups: &[(&str, i32)]) -> Action {
        let mut config = ForwardActionConfig::builder();
        for (arn, w) in groups {
            config = config.target_groups(
                TargetGroupTuple::builder()
                    .target_group_arn(*arn)
                    .weight(*w)
                    .build(),
            );
        }
        Action::builder()
            .r#type(ActionTypeEnum::Forward)
            .order(1)
            .forward_config(config.build())
            .build()
    }

    const PAIR: Pair<'static> = Pair {
        primary: "p",
        canary: "c",
    };

    #[test]
    fn only_forwards_to_the_pair_are_rewritten() {
        let to = |p, c| Weights {
            primary: p,
            canary: c,
        };
        let fixed = Action::builder()
            .r#type(ActionTypeEnum::FixedResponse)
            .build();
        let cases = [
            (
                vec![forward(&[("p", 100), ("c", 0)])],
                to(80, 20),
                Rewrite::Changed(vec![forward(&[("p", 80), ("c", 20)])]),
            ),
            (
                vec![forward(&[("c", 0), ("p", 100)])],
                to(100, 0),
                Rewrite::Already,
            ),
            (vec![forward(&[("p", 1)])], to(80, 20), Rewrite::Unrelated),
            (
                vec![forward(&[("p", 50), ("x", 50)])],
                to(80, 20),
                Rewrite::Unrelated,
            ),
            (vec![fixed.clone()], to(80, 20), Rewrite::Unrelated),
            (
                vec![fixed.clone(), forward(&[("p", 80), ("c", 20)])],
                to(0, 100),
                Rewrite::Changed(vec![fixed, forward(&[("p", 0), ("c", 100)])]),
            ),
        ];
        for (actions, weights, expected) in cases {
            assert_eq!(
                rewrite(&actions, PAIR, weights),
                expected,
                "{actions:?} {weights}"
            );
        }
        assert_eq!(
            weights_in(&[forward(&[("c", 20), ("p", 80)])], PAIR),
            Some(to(80, 20))
        );
    }
}
