//! A plan preview: what merging a pull request (or a commit a CI system names) into a watched
//! branch would change, app by app, as each platform says it. The controller fills it in; the
//! check run on the pull request, the API and the console show it.

use serde::{Deserialize, Serialize};

use crate::duration::Millis;
use crate::ids::{AppId, CommitSha, PreviewId, RepoId};

/// The most bytes of one app's details kept in the record. A longer text is cut, and says
/// so. The controller shares a smaller budget among a preview's apps; a store with an item
/// limit (DynamoDB's 400 KB) cuts the details further when escaping makes the record larger.
pub const MAX_DETAILS_BYTES: usize = 48 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PreviewStatus {
    /// Received; not started (waiting for its turn under the rate limit).
    Queued,
    /// Its apps' previews are being built.
    Running,
    /// Every app's preview ended; `result` says what they found.
    Done,
    /// A newer head of the same pull request replaced it before it ended.
    Superseded,
    /// It could not be built at all (the head cannot be read, the pull request is closed).
    Failed,
}

impl PreviewStatus {
    pub const ALL: [PreviewStatus; 5] = [
        Self::Queued,
        Self::Running,
        Self::Done,
        Self::Superseded,
        Self::Failed,
    ];

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Done | Self::Superseded | Self::Failed)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "QUEUED",
            Self::Running => "RUNNING",
            Self::Done => "DONE",
            Self::Superseded => "SUPERSEDED",
            Self::Failed => "FAILED",
        }
    }
}

/// What one app's preview found (and, over every app, what the preview found:
/// [`Preview::result`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PreviewResult {
    /// Not known yet: its read is running.
    Pending,
    /// Merging changes nothing on the platform.
    NoChanges,
    /// Merging would change something.
    Changes,
    /// The app's preview could not be made (a config error, a failed read).
    Error,
}

impl PreviewResult {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::NoChanges => "NO_CHANGES",
            Self::Changes => "CHANGES",
            Self::Error => "ERROR",
        }
    }
}

/// One app's part of a preview.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppPreview {
    pub app: AppId,
    /// The app's name (`spec.name`), or its directory when its config cannot be read.
    pub name: String,
    /// Its platform (`KUBERNETES`, `TERRAFORM`, ...); empty when its config cannot be read.
    pub kind: String,
    pub result: PreviewResult,
    /// One line: "2 to add, 1 to change, 0 to destroy", "3 fields differ", or the error.
    pub summary: String,
    /// The pipeline the merge would run: `QUICK_SYNC`, or `PIPELINE: K8S_CANARY_ROLLOUT, ...`,
    /// with the planner's reason.
    pub pipeline: String,
    /// Why the app is in the preview (the trigger rule that selected it).
    pub why: String,
    /// The platform's own preview: a plan, a diff per field or object, or an error naming
    /// file, line and field. At most [`MAX_DETAILS_BYTES`].
    pub details: String,
    /// Whether the read ran with the deploy target's preview credentials (`false`: the
    /// preview compared files only, and `details` says why).
    pub credentials: bool,
    /// The job its read waits for while it is PENDING (a Terraform plan): a preview that ends
    /// before it (superseded) cancels it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
}

/// A plan preview record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Preview {
    pub id: PreviewId,
    pub repo: RepoId,
    /// The pull request's number; `None` for a preview asked through the API or CLI.
    pub pr: Option<u64>,
    /// The commit previewed: the pull request's head.
    pub head: CommitSha,
    /// The branch it would merge into (the repository's watched branch).
    pub base_ref: String,
    /// That branch's head when the preview started, and where head and it part.
    pub base: Option<CommitSha>,
    pub merge_base: Option<CommitSha>,
    /// Who opened the pull request (GitHub login), or the API caller.
    pub author: String,
    /// The head is in another repository (a fork), or that repository is gone.
    pub fork: bool,
    /// Whether the apps' reads may use the deploy targets' preview credentials (a fork's
    /// pull request gets none unless the repository's settings allow its author).
    pub credentials: bool,
    pub status: PreviewStatus,
    /// Over every app: ERROR if any failed, else CHANGES if any would change, else NO_CHANGES;
    /// PENDING until the preview is done.
    pub result: PreviewResult,
    /// Why it is in its status (superseded by which head, failed on what, what was left out).
    pub reason: String,
    /// The check run on the head commit, once created (so a retry updates it, never creates
    /// a second).
    pub check_run: Option<u64>,
    pub apps: Vec<AppPreview>,
    pub created_at: Millis,
    /// When its apps' previews started (the rate limit counts from the latest start).
    pub started_at: Option<Millis>,
    pub updated_at: Millis,
    /// Bumped on every write (conditional writes expect it).
    pub version: u64,
}

impl Preview {
    /// The overall result of its apps' results.
    pub fn overall(apps: &[AppPreview]) -> PreviewResult {
        if apps.iter().any(|a| a.result == PreviewResult::Pending) {
            PreviewResult::Pending
        } else if apps.iter().any(|a| a.result == PreviewResult::Error) {
            PreviewResult::Error
        } else if apps.iter().any(|a| a.result == PreviewResult::Changes) {
            PreviewResult::Changes
        } else {
            PreviewResult::NoChanges
        }
    }
}

/// Cuts `text` to at most `max` bytes on a character boundary, saying how much was left out.
pub fn cut_details(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    // The note's length depends on the number in it: leave room for the longest.
    let room = format!("\n… cut: {0} of {0} bytes not shown", text.len()).len();
    let mut end = max.saturating_sub(room);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let note = format!(
        "\n… cut: {} of {} bytes not shown",
        text.len() - end,
        text.len()
    );
    format!("{}{note}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(result: PreviewResult) -> AppPreview {
        AppPreview {
            app: AppId::parse("r:a/app.pipecd.yaml").unwrap(),
            name: "a".into(),
            kind: "LAMBDA".into(),
            result,
            summary: String::new(),
            pipeline: String::new(),
            why: String::new(),
            details: String::new(),
            credentials: true,
            job: None,
        }
    }

    #[test]
    fn the_overall_result_is_the_worst_of_the_apps() {
        use PreviewResult::*;
        assert_eq!(Preview::overall(&[]), NoChanges);
        assert_eq!(Preview::overall(&[app(NoChanges), app(Changes)]), Changes);
        assert_eq!(Preview::overall(&[app(Error), app(Changes)]), Error);
        assert_eq!(Preview::overall(&[app(Error), app(Pending)]), Pending);
    }

    #[test]
    fn details_are_cut_on_a_character_boundary_and_say_so() {
        let text = "é".repeat(1000);
        let cut = cut_details(&text, 500);
        assert!(cut.len() <= 500, "{}", cut.len());
        assert!(cut.ends_with(" of 2000 bytes not shown"), "{cut}");
        let shown = cut.split("\n…").next().unwrap().len();
        assert!(
            cut.contains(&format!("cut: {} of 2000", 2000 - shown)),
            "{cut}"
        );
        assert_eq!(cut_details("short", 500), "short");
    }

    #[test]
    fn a_preview_id_is_derived_from_repository_request_and_head() {
        let repo = RepoId::parse("demo").unwrap();
        let head = CommitSha::parse(&"a".repeat(40)).unwrap();
        let id = PreviewId::derive(&repo, Some(7), &head);
        assert_eq!(id, PreviewId::derive(&repo, Some(7), &head));
        assert_ne!(id, PreviewId::derive(&repo, Some(8), &head));
        assert_ne!(id, PreviewId::derive(&repo, None, &head));
        assert!(id.as_str().starts_with("p-"), "{id:?}");
        assert_eq!(PreviewId::parse(id.as_str()).unwrap(), id);
    }
}
