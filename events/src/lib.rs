//! Versioned wire types: the messages handlers pass through the queues, and the events gannet
//! emits (CloudEvents 1.0, structured JSON).
//!
//! Every message carries `"v": 1`. A message of another version, or one that does not decode,
//! is a [`DecodeError`] and goes to the dead-letter queue with that reason.

pub mod github;

use gannet_domain::app::App;
use gannet_domain::deployment::{Deployment, DeploymentStatus, GateSkip};
use gannet_domain::duration::{GoDuration, Millis};
use gannet_domain::ports::{Outgoing, QueueName};
use gannet_domain::{AppId, ChainId, CommitSha, DeploymentId, PreviewId, RepoId};
use serde::{Deserialize, Serialize};
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::{OffsetDateTime, PrimitiveDateTime};

pub const VERSION: u32 = 1;

/// Why a trigger message was sent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TriggerCause {
    /// A GitHub push webhook; `after` is the pushed head (the handler still reads the branch),
    /// and `pusher` who pushed it (GitHub's user name; empty in older messages).
    Push {
        delivery: String,
        after: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        pusher: String,
    },
    /// The poll backstop.
    Poll,
}

/// A message on one of the queues.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// Look at a repository's branch head: discover apps, run the determiner.
    Trigger { repo: RepoId, cause: TriggerCause },
    /// Reconcile an app's lock: release it if its holder finished, plan the next PENDING one.
    Plan { app: AppId },
    /// Run one step of a deployment, if its sequence number still matches.
    Step { deployment: DeploymentId, seq: u64 },
    /// Deliver an event to the notification receivers.
    Notify { event: Box<Event> },
    /// Compare an app's live state with its desired state at the branch head. The sweep
    /// reads each repository's head once and names it here, so a check does not ask the git
    /// host again (GitHub's rate limit); without it the check reads the head itself.
    DriftCheck {
        app: AppId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        head: Option<CommitSha>,
    },
    /// Move a deployment chain on: start its next block, or end it. Rides the plan queue (its
    /// handler needs what the plan handler's does: the store, git and the plan queue).
    Chain { chain: ChainId },
    /// Build, or look again at, a plan preview. Rides the drift queue: its handler reads live
    /// state through the plugins and starts jobs, as the drift check does, and a preview
    /// never waits behind a deployment's steps.
    Preview { preview: PreviewId },
}

#[derive(Serialize, Deserialize)]
struct Envelope<T> {
    v: u32,
    #[serde(flatten)]
    message: T,
}

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("message is not JSON with a version: {0}")]
    NotAMessage(#[source] serde_json::Error),
    #[error("message version {0} is not supported (this gannet reads version {VERSION})")]
    Version(u32),
    #[error("message of version {VERSION} does not decode: {0}")]
    Shape(#[source] serde_json::Error),
}

impl Message {
    pub fn queue(&self) -> QueueName {
        match self {
            Self::Trigger { .. } => QueueName::Trigger,
            Self::Plan { .. } | Self::Chain { .. } => QueueName::Plan,
            Self::Step { .. } => QueueName::Stage,
            Self::Notify { .. } => QueueName::Notify,
            Self::DriftCheck { .. } | Self::Preview { .. } => QueueName::Drift,
        }
    }

    pub fn encode(&self) -> String {
        // Serialising these plain data types cannot fail.
        serde_json::to_string(&Envelope {
            v: VERSION,
            message: self,
        })
        .unwrap_or_default()
    }

    pub fn decode(body: &str) -> Result<Self, DecodeError> {
        #[derive(Deserialize)]
        struct Version {
            v: u32,
        }
        let version: Version = serde_json::from_str(body).map_err(DecodeError::NotAMessage)?;
        if version.v != VERSION {
            return Err(DecodeError::Version(version.v));
        }
        let envelope: Envelope<Message> = serde_json::from_str(body).map_err(DecodeError::Shape)?;
        Ok(envelope.message)
    }

    /// The key under which an undelivered duplicate of this message collapses.
    fn dedupe_key(&self) -> Option<String> {
        match self {
            Self::Trigger { repo, .. } => Some(format!("trigger:{repo}")),
            Self::Plan { app } => Some(format!("plan:{app}")),
            Self::Step { deployment, seq } => Some(format!("step:{deployment}:{seq}")),
            Self::Notify { .. } => None,
            Self::DriftCheck { app, .. } => Some(format!("drift:{app}")),
            Self::Chain { chain } => Some(format!("chain:{chain}")),
            Self::Preview { preview } => Some(format!("preview:{preview}")),
        }
    }

    /// The message, ready to send now.
    pub fn outgoing(&self) -> Outgoing {
        self.outgoing_after(GoDuration::default())
    }

    pub fn outgoing_after(&self, delay: GoDuration) -> Outgoing {
        Outgoing {
            queue: self.queue(),
            body: self.encode(),
            delay,
            dedupe_key: self.dedupe_key(),
        }
    }
}

/// The kinds of event gannet emits, named as PipeCD names its notification events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum EventKind {
    DeploymentTriggered,
    DeploymentPlanned,
    DeploymentStarted,
    DeploymentRollingBack,
    DeploymentSucceeded,
    DeploymentFailed,
    DeploymentCancelled,
    DeploymentWaitApproval,
    StageStarted,
    StageSucceeded,
    StageFailed,
    ApplicationSynced,
    ApplicationOutOfSync,
}

impl EventKind {
    pub const ALL: [EventKind; 13] = [
        Self::DeploymentTriggered,
        Self::DeploymentPlanned,
        Self::DeploymentStarted,
        Self::DeploymentRollingBack,
        Self::DeploymentSucceeded,
        Self::DeploymentFailed,
        Self::DeploymentCancelled,
        Self::DeploymentWaitApproval,
        Self::StageStarted,
        Self::StageSucceeded,
        Self::StageFailed,
        Self::ApplicationSynced,
        Self::ApplicationOutOfSync,
    ];

    /// The kind whose CloudEvents `type` is `cloud_type`.
    pub fn from_cloud_type(cloud_type: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.cloud_type() == cloud_type)
    }

    /// The CloudEvents `type`: `dev.gannet.deployment.succeeded`.
    pub fn cloud_type(self) -> String {
        let name = serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
            .to_ascii_lowercase();
        match name.split_once('_') {
            Some((area, what)) => format!("dev.gannet.{area}.{}", what.replace('_', "-")),
            None => format!("dev.gannet.{name}"),
        }
    }

    /// The event a deployment's new status raises.
    pub fn for_status(status: DeploymentStatus) -> Option<Self> {
        Some(match status {
            DeploymentStatus::Pending => Self::DeploymentTriggered,
            DeploymentStatus::Planned => Self::DeploymentPlanned,
            DeploymentStatus::Running => Self::DeploymentStarted,
            DeploymentStatus::RollingBack => Self::DeploymentRollingBack,
            DeploymentStatus::Success => Self::DeploymentSucceeded,
            DeploymentStatus::Failure => Self::DeploymentFailed,
            DeploymentStatus::Cancelled => Self::DeploymentCancelled,
        })
    }
}

/// What an event is about.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventData {
    pub app: AppId,
    pub app_name: String,
    pub deployment: Option<DeploymentId>,
    pub commit: Option<String>,
    pub status: String,
    /// The stage's id, for stage events.
    pub stage: Option<String>,
    /// The stage's name (`ANALYSIS`, `LAMBDA_PROMOTE`), for stage events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_name: Option<String>,
    /// Which phase of the deployment a stage belongs to: `deployment`, or `rollback` for the
    /// hidden stages that undo it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// What the event says happened: the stage's status for stage events, the deployment's
    /// otherwise (`SUCCESS`, `FAILURE`, `RUNNING`, ...).
    #[serde(default)]
    pub result: String,
    pub reason: String,
    /// For a deployment an admin let skip the app's approval gate: who, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_skip: Option<GateSkip>,
}

/// A CloudEvents 1.0 event in structured JSON mode.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub specversion: String,
    pub id: String,
    pub source: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub subject: String,
    /// RFC 3339.
    pub time: String,
    pub datacontenttype: String,
    pub data: EventData,
}

impl Event {
    /// An event about a deployment. The id is unique per deployment, kind and seq, so a
    /// receiver can drop duplicates of an at-least-once delivery.
    pub fn deployment(kind: EventKind, d: &Deployment, stage: Option<&str>, at: Millis) -> Self {
        let id = format!(
            "{}:{}:{}:{}",
            d.id,
            d.seq,
            kind.cloud_type(),
            stage.unwrap_or("")
        );
        let found = stage.and_then(|id| d.stages.iter().find(|s| s.id.as_str() == id));
        let (result, reason) = match found {
            Some(s) => (s.status.as_str(), s.status_reason.clone()),
            None => (d.status.as_str(), d.status_reason.clone()),
        };
        Self {
            specversion: "1.0".into(),
            id,
            source: format!("gannet/apps/{}", d.app),
            kind: kind.cloud_type(),
            subject: d.id.to_string(),
            time: rfc3339(at),
            datacontenttype: "application/json".into(),
            data: EventData {
                app: d.app.clone(),
                app_name: d.app_name.clone(),
                deployment: Some(d.id.clone()),
                commit: Some(d.commit.sha.to_string()),
                status: d.status.as_str().into(),
                stage: stage.map(str::to_owned),
                stage_name: found.map(|s| s.name.clone()),
                phase: found.map(|s| if s.rollback { "rollback" } else { "deployment" }.to_owned()),
                result: result.to_owned(),
                reason,
                gate_skip: d.trigger.gate_skip.clone(),
            },
        }
    }

    /// An event about an app's sync status (`ApplicationSynced`, `ApplicationOutOfSync`). The
    /// id is unique per app version, so a repeated drift check raises no second event.
    pub fn application(kind: EventKind, app: &App, at: Millis) -> Self {
        Self {
            specversion: "1.0".into(),
            id: format!("{}:{}:{}", app.id, app.version, kind.cloud_type()),
            source: format!("gannet/apps/{}", app.id),
            kind: kind.cloud_type(),
            subject: app.id.to_string(),
            time: rfc3339(at),
            datacontenttype: "application/json".into(),
            data: EventData {
                app: app.id.clone(),
                app_name: app.name.clone(),
                deployment: None,
                commit: app.running_commit.as_ref().map(ToString::to_string),
                status: app.sync_status.as_str().into(),
                stage: None,
                stage_name: None,
                phase: None,
                result: app.sync_status.as_str().into(),
                reason: app.sync_reason.clone(),
                gate_skip: None,
            },
        }
    }
}

/// Formats a timestamp as RFC 3339 UTC with milliseconds (the year 9999 at most).
pub fn rfc3339(at: Millis) -> String {
    const FORMAT: &[BorrowedFormatItem<'_>] =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(at.0) * 1_000_000)
        .unwrap_or(PrimitiveDateTime::MAX.assume_utc())
        .format(FORMAT)
        .expect("a UTC date and time has every component of the format")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_with_a_version() {
        let msgs = [
            Message::Trigger {
                repo: RepoId::parse("demo").unwrap(),
                cause: TriggerCause::Push {
                    delivery: "d-1".into(),
                    after: "a".repeat(40),
                    pusher: "octocat".into(),
                },
            },
            Message::Plan {
                app: AppId::parse("demo:app.pipecd.yaml").unwrap(),
            },
            Message::Step {
                deployment: DeploymentId::parse("d-x").unwrap(),
                seq: 3,
            },
            Message::DriftCheck {
                app: AppId::parse("demo:app.pipecd.yaml").unwrap(),
                head: None,
            },
            Message::DriftCheck {
                app: AppId::parse("demo:app.pipecd.yaml").unwrap(),
                head: Some(CommitSha::parse(&"b".repeat(40)).unwrap()),
            },
        ];
        for m in msgs {
            let body = m.encode();
            assert!(body.contains("\"v\":1"), "{body}");
            assert_eq!(Message::decode(&body).unwrap(), m);
        }
    }

    #[test]
    fn bad_messages_say_why() {
        let cases = [
            ("not json", "not JSON"),
            (
                r#"{"v":2,"type":"plan","app":"a:b"}"#,
                "version 2 is not supported",
            ),
            (r#"{"v":1,"type":"nope"}"#, "does not decode"),
            (
                r#"{"v":1,"type":"step","deployment":"d"}"#,
                "does not decode",
            ),
        ];
        for (body, expected) in cases {
            let err = Message::decode(body).unwrap_err().to_string();
            assert!(err.contains(expected), "{body}: {err}");
        }
    }

    #[test]
    fn cloud_event_types_and_times() {
        assert_eq!(
            EventKind::DeploymentSucceeded.cloud_type(),
            "dev.gannet.deployment.succeeded"
        );
        assert_eq!(
            EventKind::DeploymentWaitApproval.cloud_type(),
            "dev.gannet.deployment.wait-approval"
        );
        assert_eq!(rfc3339(Millis(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(Millis(1_795_000_000_123)),
            "2026-11-18T11:06:40.123Z"
        );
    }
}
