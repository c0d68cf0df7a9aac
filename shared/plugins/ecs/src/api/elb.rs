//! The ELBv2 calls: which listeners serve a target group, their rules (the default rule
//! included), and rewriting a rule's actions.

use aws_sdk_elasticloadbalancingv2::types::Action;

use super::EcsApi;
use crate::errors::{classify, ApiError};

/// At most this many pages of listeners or rules are read.
const MAX_PAGES: usize = 50;

/// A listener rule; the listener's default actions are its default rule.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ListenerRule {
    pub listener_arn: String,
    pub rule_arn: String,
    pub is_default: bool,
    pub actions: Vec<Action>,
}

impl ListenerRule {
    /// How the rule is named in logs.
    pub(crate) fn describe(&self) -> String {
        if self.is_default {
            format!("default rule of listener {}", self.listener_arn)
        } else {
            format!("rule {}", self.rule_arn)
        }
    }
}

impl EcsApi {
    /// The load balancers that forward to target group `arn`.
    pub(crate) async fn load_balancers_of(&self, arn: &str) -> Result<Vec<String>, ApiError> {
        let out = self
            .elb
            .describe_target_groups()
            .target_group_arns(arn)
            .send()
            .await
            .map_err(|e| classify("ELB DescribeTargetGroups", e))?;
        Ok(out
            .target_groups()
            .iter()
            .flat_map(|t| t.load_balancer_arns().iter().cloned())
            .collect())
    }

    /// The listeners of load balancer `arn`.
    pub(crate) async fn listeners(&self, arn: &str) -> Result<Vec<String>, ApiError> {
        let mut marker: Option<String> = None;
        let mut out = Vec::new();
        for _ in 0..MAX_PAGES {
            let page = self
                .elb
                .describe_listeners()
                .load_balancer_arn(arn)
                .set_marker(marker.take())
                .send()
                .await
                .map_err(|e| classify("ELB DescribeListeners", e))?;
            out.extend(
                page.listeners()
                    .iter()
                    .filter_map(|l| l.listener_arn())
                    .map(str::to_owned),
            );
            match page.next_marker() {
                Some(next) if !next.is_empty() => marker = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok(out)
    }

    /// The rules of listener `arn`, its default rule included.
    pub(crate) async fn rules(&self, arn: &str) -> Result<Vec<ListenerRule>, ApiError> {
        let mut marker: Option<String> = None;
        let mut out = Vec::new();
        for _ in 0..MAX_PAGES {
            let page = self
                .elb
                .describe_rules()
                .listener_arn(arn)
                .set_marker(marker.take())
                .send()
                .await
                .map_err(|e| classify("ELB DescribeRules", e))?;
            out.extend(page.rules().iter().map(|r| ListenerRule {
                listener_arn: arn.to_owned(),
                rule_arn: r.rule_arn().unwrap_or_default().to_owned(),
                is_default: r.is_default().unwrap_or(false),
                actions: r.actions().to_vec(),
            }));
            match page.next_marker() {
                Some(next) if !next.is_empty() => marker = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok(out)
    }

    /// Replaces the rule's actions (a default rule's through ModifyListener, as ELB requires).
    pub(crate) async fn set_actions(
        &self,
        rule: &ListenerRule,
        actions: Vec<Action>,
    ) -> Result<(), ApiError> {
        if rule.is_default {
            self.elb
                .modify_listener()
                .listener_arn(&rule.listener_arn)
                .set_default_actions(Some(actions))
                .send()
                .await
                .map_err(|e| classify("ELB ModifyListener", e))?;
        } else {
            self.elb
                .modify_rule()
                .rule_arn(&rule.rule_arn)
                .set_actions(Some(actions))
                .send()
                .await
                .map_err(|e| classify("ELB ModifyRule", e))?;
        }
        Ok(())
    }
}
