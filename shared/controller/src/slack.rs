//! Slack messages: the events a person wants in a channel, one short line each, mentioning the
//! people and groups the app config names for the event (PipeCD's
//! `spec.notification.mentions`: `slack`/`slackusers` are user ids, `slackgroups` group ids,
//! `event: "*"` for every event).
//!
//! A channel gets a deployment's start and end, a rollback, a wait for approval, a failed
//! stage, and an app going out of sync (or back in); the other events (a stage starting or
//! succeeding, a deployment planned) go to CloudEvent receivers only.

use gannet_core::config::NotificationMention;
use gannet_events::{Event, EventKind};
use serde_json::{json, Value};

/// The longest reason a message quotes.
const MAX_REASON: usize = 300;

/// The message for `event` (of `kind`), or `None` when a channel does not get this kind (the
/// kinds `match`ed below are the ones sent).
pub(crate) fn message(
    kind: EventKind,
    event: &Event,
    mentions: &[NotificationMention],
) -> Option<Value> {
    let d = &event.data;
    let reason = cut(d.reason.lines().next().unwrap_or("").trim());
    let with_reason = |what: &str| match reason.is_empty() {
        true => what.to_owned(),
        false => format!("{what}: {reason}"),
    };
    let stage = d.stage_name.as_deref().unwrap_or("a stage");
    let (icon, what) = match kind {
        EventKind::DeploymentTriggered => (":arrow_forward:", "deployment triggered".to_owned()),
        EventKind::DeploymentStarted => (":rocket:", "deployment started".to_owned()),
        EventKind::DeploymentRollingBack => (":rewind:", with_reason("rolling back")),
        EventKind::DeploymentSucceeded => (":white_check_mark:", "deployed".to_owned()),
        EventKind::DeploymentFailed => (":x:", with_reason("deployment failed")),
        EventKind::DeploymentCancelled => (":no_entry_sign:", with_reason("deployment cancelled")),
        EventKind::DeploymentWaitApproval => {
            let id = d
                .deployment
                .as_ref()
                .map(|d| d.to_string())
                .unwrap_or_default();
            let stage_id = d.stage.as_deref().unwrap_or("");
            (
                ":raised_hand:",
                format!("{stage} waits for approval: `gannet approve {id} --stage {stage_id}`"),
            )
        }
        EventKind::StageFailed => (":warning:", with_reason(&format!("stage {stage} failed"))),
        EventKind::ApplicationSynced => (":large_green_circle:", "in sync".to_owned()),
        EventKind::ApplicationOutOfSync => (":large_orange_circle:", with_reason("out of sync")),
        _ => return None,
    };
    let mut line = format!("{icon} *{}* {what}", escape(&d.app_name));
    if let Some(commit) = d.commit.as_deref() {
        line.push_str(&format!(" · commit `{}`", &commit[..commit.len().min(7)]));
    }
    if let Some(id) = &d.deployment {
        line.push_str(&format!(" · deployment `{id}`"));
    }
    let tags = mention_tags(kind, mentions);
    if !tags.is_empty() {
        line.push_str(&format!("\n{}", tags.join(" ")));
    }
    Some(json!({ "text": line }))
}

/// `<@U…>` for each user and `<!subteam^S…>` for each group the mentions name for `kind`,
/// each once, in the order written.
fn mention_tags(kind: EventKind, mentions: &[NotificationMention]) -> Vec<String> {
    let name = serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let mut tags: Vec<String> = Vec::new();
    for m in mentions
        .iter()
        .filter(|m| m.event == "*" || m.event == name)
    {
        let users = m
            .slack
            .iter()
            .chain(&m.slackusers)
            .map(|u| format!("<@{u}>"));
        let groups = m.slackgroups.iter().map(|g| format!("<!subteam^{g}>"));
        for tag in users.chain(groups) {
            if !tags.contains(&tag) {
                tags.push(tag);
            }
        }
    }
    tags
}

/// Slack's three control characters, escaped as its docs say.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn cut(text: &str) -> String {
    gannet_core::report::cut(&escape(text), MAX_REASON)
}

#[cfg(test)]
mod tests {
    use gannet_core::deployment::{Deployment, DeploymentStatus, Stage, StageStatus};
    use gannet_core::duration::Millis;

    use super::*;

    fn mention(event: &str, users: &[&str], groups: &[&str]) -> NotificationMention {
        NotificationMention {
            event: event.into(),
            slackusers: users.iter().map(|u| (*u).to_owned()).collect(),
            slackgroups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..NotificationMention::default()
        }
    }

    #[test]
    fn a_failed_deployment_reads_as_one_line_with_its_reason_and_mentions() {
        let mut d = Deployment::test().with_status(DeploymentStatus::Failure);
        d.app_name = "web<prod>".into();
        d.status_reason =
            "stage stage-2 failed: metrics[0]: 2 of 2 measurements failed\nmore".into();
        let event = Event::deployment(EventKind::DeploymentFailed, &d, None, Millis(1));
        let mentions = [
            mention("DEPLOYMENT_FAILED", &["U1", "U2"], &["S9"]),
            mention("*", &["U2", "U3"], &[]),
            mention("DEPLOYMENT_SUCCEEDED", &["U4"], &[]),
        ];
        let text = message(EventKind::DeploymentFailed, &event, &mentions).unwrap()["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            text,
            format!(
                ":x: *web&lt;prod&gt;* deployment failed: stage stage-2 failed: metrics[0]: 2 of 2 measurements failed · commit `ccccccc` · deployment `{}`\n<@U1> <@U2> <!subteam^S9> <@U3>",
                d.id
            )
        );
    }

    #[test]
    fn a_channel_gets_the_events_worth_a_message() {
        let mut stage = Stage::test("stage-1", "WAIT_APPROVAL");
        stage.status = StageStatus::Running;
        let d = Deployment::test().with_stages(vec![stage]);
        let wait = Event::deployment(
            EventKind::DeploymentWaitApproval,
            &d,
            Some("stage-1"),
            Millis(1),
        );
        let text = message(EventKind::DeploymentWaitApproval, &wait, &[]).unwrap();
        assert!(
            text["text"]
                .as_str()
                .unwrap()
                .starts_with(&format!(":raised_hand: *app* WAIT_APPROVAL waits for approval: `gannet approve {} --stage stage-1`", d.id)),
            "{text}"
        );
        let started = Event::deployment(EventKind::StageStarted, &d, Some("stage-1"), Millis(1));
        assert_eq!(message(EventKind::StageStarted, &started, &[]), None);
        let planned = Event::deployment(EventKind::DeploymentPlanned, &d, None, Millis(1));
        assert_eq!(message(EventKind::DeploymentPlanned, &planned, &[]), None);
    }
}
