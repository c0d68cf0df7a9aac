//! Slack messages: the events a person wants in a channel, one short line each, mentioning the
//! people and groups the app config names for the event (PipeCD's
//! `spec.notification.mentions`: `slack`/`slackusers` are user ids, `slackgroups` group ids,
//! `event: "*"` for every event).
//!
//! A channel gets a deployment's start and end, a rollback, a wait for approval, a failed
//! stage, and an app going out of sync (or back in); the other events (a stage starting or
//! succeeding, a deployment planned) go to CloudEvent receivers only.
//!
//! Every value a repository or a platform wrote (app name, stage id and name, commit,
//! reasons) is escaped as Slack's docs say (`&`, `<`, `>`), so a stage named `<!channel>` or
//! `<http://evil|click>` shows as that text and neither pings nor links; a mention id that is
//! not a Slack id (letters and digits) is left out rather than written into a `<@…>` tag.

use gannet_domain::deployment::NotificationMention;
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
    let stage = d
        .stage_name
        .as_deref()
        .map_or_else(|| "a stage".to_owned(), escape);
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
            let stage_id = escape(d.stage.as_deref().unwrap_or(""));
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
        let short: String = commit.chars().take(7).collect();
        line.push_str(&format!(" · commit `{}`", escape(&short)));
    }
    if let Some(id) = &d.deployment {
        line.push_str(&format!(" · deployment `{}`", escape(id.as_ref())));
    }
    let tags = mention_tags(kind, mentions);
    if !tags.is_empty() {
        line.push_str(&format!("\n{}", tags.join(" ")));
    }
    Some(json!({ "text": line }))
}

/// `<@U…>` for each user and `<!subteam^S…>` for each group the mentions name for `kind`,
/// each once, in the order written. An id that is not letters and digits (as Slack's ids are)
/// is left out: written into a tag, `U1> <!channel` would ping the whole channel.
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
            .filter(|u| slack_id(u))
            .map(|u| format!("<@{u}>"));
        let groups = m
            .slackgroups
            .iter()
            .filter(|g| slack_id(g))
            .map(|g| format!("<!subteam^{g}>"));
        for tag in users.chain(groups) {
            if !tags.contains(&tag) {
                tags.push(tag);
            }
        }
    }
    tags
}

/// True for a Slack user or group id (`U024BE7LH`, `SAZ94GDB8`): letters and digits only.
fn slack_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Slack's three control characters, escaped as its docs say ("Escaping text").
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A reason cut to [`MAX_REASON`] characters, then escaped (cutting after escaping could
/// split an entity such as `&amp;`).
fn cut(text: &str) -> String {
    escape(&gannet_domain::report::cut(text, MAX_REASON))
}

#[cfg(test)]
mod tests {
    use gannet_domain::deployment::{Deployment, DeploymentStatus, Stage, StageStatus};
    use gannet_domain::duration::Millis;

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

    /// The message's text for `kind` after `hostile` rewrote the event's data.
    fn text_with(kind: EventKind, hostile: impl Fn(&mut gannet_events::EventData)) -> String {
        let mut stage = Stage::test("stage-1", "WAIT_APPROVAL");
        stage.status = StageStatus::Running;
        let d = Deployment::test().with_stages(vec![stage]);
        let mut event = Event::deployment(kind, &d, Some("stage-1"), Millis(1));
        hostile(&mut event.data);
        message(kind, &event, &[]).expect("a message")["text"]
            .as_str()
            .expect("text")
            .to_owned()
    }

    #[test]
    fn every_value_from_a_repository_or_a_platform_shows_as_text() {
        type Rewrite = fn(&mut gannet_events::EventData);
        let cases: [(&str, EventKind, Rewrite, &str); 8] = [
            (
                "stage name",
                EventKind::StageFailed,
                |d| d.stage_name = Some("<!channel>".into()),
                "stage &lt;!channel&gt; failed",
            ),
            (
                "stage name with a link",
                EventKind::DeploymentWaitApproval,
                |d| d.stage_name = Some("<http://evil.example|click> & <!here>".into()),
                "&lt;http://evil.example|click&gt; &amp; &lt;!here&gt; waits for approval",
            ),
            (
                "stage id",
                EventKind::DeploymentWaitApproval,
                |d| d.stage = Some("s<!everyone>".into()),
                "--stage s&lt;!everyone&gt;`",
            ),
            (
                "app name",
                EventKind::DeploymentSucceeded,
                |d| d.app_name = "<@U0ADMIN> web".into(),
                "*&lt;@U0ADMIN&gt; web* deployed",
            ),
            (
                "reason",
                EventKind::DeploymentFailed,
                |d| d.reason = "exit 1: <!subteam^S1> see <https://evil.example|logs>".into(),
                "failed: exit 1: &lt;!subteam^S1&gt; see &lt;https://evil.example|logs&gt;",
            ),
            (
                "reason from a platform",
                EventKind::ApplicationOutOfSync,
                |d| d.reason = "live image a&b <x>".into(),
                "out of sync: live image a&amp;b &lt;x&gt;",
            ),
            (
                "commit",
                EventKind::DeploymentStarted,
                |d| d.commit = Some("<!chan>0123".into()),
                "commit `&lt;!chan&gt;`",
            ),
            (
                "a commit of several bytes per character is cut, not split",
                EventKind::DeploymentStarted,
                |d| d.commit = Some("ééééééééé".into()),
                "commit `ééééééé`",
            ),
        ];
        for (what, kind, hostile, expected) in cases {
            let text = text_with(kind, hostile);
            assert!(text.contains(expected), "{what}: {text}");
            for control in ["<!", "<http", "<@U0ADMIN"] {
                assert!(!text.contains(control), "{what}: {control} in {text}");
            }
        }
    }

    #[test]
    fn a_long_reason_is_cut_before_it_is_escaped() {
        let text = text_with(EventKind::DeploymentFailed, |d| {
            d.reason = format!("{}&&&", "x".repeat(MAX_REASON - 1));
        });
        assert!(text.contains("x&amp;…"), "{text}");
        assert!(!text.contains("x&…"), "{text}");
    }

    #[test]
    fn a_mention_id_that_is_not_a_slack_id_is_left_out() {
        let d = Deployment::test().with_status(DeploymentStatus::Failure);
        let event = Event::deployment(EventKind::DeploymentFailed, &d, None, Millis(1));
        let mentions = [
            mention("*", &["U1> <!channel", "U2", ""], &["S1|x", "S9"]),
            NotificationMention {
                event: "*".into(),
                slack: vec!["<!here>".into()],
                ..NotificationMention::default()
            },
        ];
        let text = message(EventKind::DeploymentFailed, &event, &mentions).unwrap()["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(text.ends_with("\n<@U2> <!subteam^S9>"), "{text}");
        assert!(
            !text.contains("channel") && !text.contains("here"),
            "{text}"
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
