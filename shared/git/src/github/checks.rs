//! [`GithubChecks`]: the [`CheckRuns`] port as GitHub check runs
//! (`POST /repos/{o}/{r}/check-runs`, `PATCH /repos/{o}/{r}/check-runs/{id}`). Check runs are
//! for GitHub Apps only: an installation with the `checks: write` permission.
//!
//! A token cannot write check runs (GitHub answers 403): with a token, a run is shown as a
//! commit status of the same name instead ([`GithubStatuses`]), its title the description and
//! its `details_url` the link, so a repository read with a token still sees each preview's
//! outcome on the pull request, and the whole preview in the console.
//!
//! GitHub refuses an `output.summary` or `output.text` longer than [`OUTPUT_LIMIT`]: each is
//! cut to fit, in characters and in bytes, and a cut one ends with a line saying so that
//! points to the run's `details_url`.

use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use gannet_domain::ids::RepoId;
use gannet_domain::ports::{
    BoxError, CheckConclusion, CheckRun, CheckRuns, CheckStatus, CommitState, CommitStatus,
    CommitStatuses,
};
use serde::Deserialize;
use serde_json::{json, Value};

use super::client::{ApiError, GithubClient, Write};
use super::wire::rfc3339;
use super::{GithubStatuses, Repos, SetupError};

/// GitHub refuses an `output.summary` or `output.text` longer than this many characters; a
/// cut one is kept to this many bytes as well (never more than characters).
pub const OUTPUT_LIMIT: usize = 65_535;

/// Room kept under [`OUTPUT_LIMIT`] for the line that says a text was cut.
const NOTE_MARGIN: usize = 1_000;

/// A check run's `output.title` is a line: longer ones are cut to this many characters.
pub const TITLE_LIMIT: usize = 255;

/// Shows plan previews as GitHub check runs (as commit statuses with a token).
pub struct GithubChecks {
    client: GithubClient,
    repos: Repos,
    /// Set when the client holds a token: runs are shown as commit statuses.
    statuses: Option<GithubStatuses>,
}

/// The id [`GithubChecks::create`] answers for a run shown as a commit status (a status has
/// none: the next report replaces it by its name).
pub const STATUS_RUN_ID: u64 = 0;

#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckError {
    #[error("repository {0} is not a configured GitHub repository")]
    UnknownRepo(RepoId),
    #[error("{action} in {repo} was refused ({error}): the GitHub App installation needs the checks: write permission")]
    NeedsPermission {
        action: String,
        repo: RepoId,
        error: Box<ApiError>,
    },
    #[error("GitHub refused {action} in {repo}: {error}")]
    Invalid {
        action: String,
        repo: RepoId,
        error: Box<ApiError>,
    },
    #[error("{action} in {repo} failed")]
    Failed {
        action: String,
        repo: RepoId,
        #[source]
        source: Box<ApiError>,
    },
}

#[derive(Deserialize)]
struct Created {
    id: u64,
}

impl GithubChecks {
    /// Shows check runs on `repos`, given as `(id, "owner/name")`.
    pub fn new(client: GithubClient, repos: Vec<(RepoId, String)>) -> Result<Self, SetupError> {
        let statuses = if client.is_token() {
            Some(GithubStatuses::new(client.clone(), repos.clone())?)
        } else {
            None
        };
        Ok(Self {
            client,
            repos: Repos::new(repos)?,
            statuses,
        })
    }

    fn full_name(&self, repo: &RepoId) -> Result<&str, CheckError> {
        self.repos
            .full_name(repo)
            .ok_or_else(|| CheckError::UnknownRepo(repo.clone()))
    }

    /// GitHub's refusal, named: a 403 says which permission is missing, a 422 what GitHub
    /// found wrong.
    fn refused(&self, action: String, repo: &RepoId, error: ApiError) -> CheckError {
        let repo = repo.clone();
        let status = error.status();
        let error = Box::new(error);
        match status {
            Some(403) => CheckError::NeedsPermission {
                action,
                repo,
                error,
            },
            Some(422) => CheckError::Invalid {
                action,
                repo,
                error,
            },
            _ => CheckError::Failed {
                action,
                repo,
                source: error,
            },
        }
    }
}

#[async_trait]
impl CheckRuns for GithubChecks {
    async fn create(&self, repo: &RepoId, run: &CheckRun) -> Result<u64, BoxError> {
        if let Some(statuses) = &self.statuses {
            statuses.report(repo, &as_status(run)).await?;
            return Ok(STATUS_RUN_ID);
        }
        let name = self.full_name(repo)?;
        let body = body(run, now_ms(), true);
        let path = format!("/repos/{name}/check-runs");
        let created: Created = self
            .client
            .send_json(Write::Post, &path, &body)
            .await
            .map_err(|e| {
                let action = format!("creating check run {:?} on {}", run.name, run.head_sha);
                self.refused(action, repo, e)
            })?;
        Ok(created.id)
    }

    async fn update(&self, repo: &RepoId, id: u64, run: &CheckRun) -> Result<(), BoxError> {
        if let Some(statuses) = &self.statuses {
            return statuses.report(repo, &as_status(run)).await;
        }
        let name = self.full_name(repo)?;
        let body = body(run, now_ms(), false);
        let path = format!("/repos/{name}/check-runs/{id}");
        self.client
            .send_json::<Value>(Write::Patch, &path, &body)
            .await
            .map_err(|e| self.refused(format!("updating check run {id}"), repo, e))?;
        Ok(())
    }
}

/// `run` as a commit status of its name: pending while it runs; success for changes and for
/// none (the title says which), failure for a failed preview, error for one superseded or
/// skipped.
fn as_status(run: &CheckRun) -> CommitStatus {
    let state = match (run.status, run.conclusion) {
        (CheckStatus::Completed, Some(CheckConclusion::Success | CheckConclusion::Neutral)) => {
            CommitState::Success
        }
        (CheckStatus::Completed, Some(CheckConclusion::Failure)) => CommitState::Failure,
        (CheckStatus::Completed, _) => CommitState::Error,
        _ => CommitState::Pending,
    };
    CommitStatus {
        commit: run.head_sha.clone(),
        context: run.name.clone(),
        state,
        description: run.title.clone(),
        target_url: run.details_url.clone(),
    }
}

fn now_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH);
    u64::try_from(since.unwrap_or_default().as_millis()).unwrap_or(u64::MAX)
}

/// The JSON GitHub is sent for `run` at `now` (ms since the epoch): on create with its head and
/// the time it started (unless it is only queued); the conclusion and the time it ended once it
/// is completed.
fn body(run: &CheckRun, now: u64, create: bool) -> Value {
    let title = if run.title.trim().is_empty() {
        &run.name
    } else {
        &run.title
    };
    let url = run.details_url.as_deref();
    let mut output = json!({
        "title": cut_title(title),
        "summary": cut_output(&run.summary, url),
    });
    if !run.text.is_empty() {
        output["text"] = json!(cut_output(&run.text, url));
    }
    let mut body = json!({
        "name": run.name,
        "status": run.status,
        "external_id": run.external_id,
        "output": output,
    });
    if let Some(url) = url {
        body["details_url"] = json!(url);
    }
    if create {
        body["head_sha"] = json!(run.head_sha);
        if run.status != CheckStatus::Queued {
            body["started_at"] = json!(rfc3339(now));
        }
    }
    if run.status == CheckStatus::Completed {
        let conclusion = run.conclusion.unwrap_or_else(|| {
            tracing::warn!(check = %run.name, head = %run.head_sha, "a completed check run without a conclusion is shown as neutral");
            gannet_domain::ports::CheckConclusion::Neutral
        });
        body["conclusion"] = json!(conclusion);
        body["completed_at"] = json!(rfc3339(now));
    }
    body
}

/// `title` in at most [`TITLE_LIMIT`] characters, `…` marking a cut.
fn cut_title(title: &str) -> String {
    if title.chars().count() <= TITLE_LIMIT {
        return title.to_owned();
    }
    let mut cut: String = title.chars().take(TITLE_LIMIT - 1).collect();
    cut.push('…');
    cut
}

/// `text` as GitHub accepts it: at most [`OUTPUT_LIMIT`] characters and bytes. A longer one
/// is cut on a character boundary (a code block left open is closed) and ends with a line
/// saying how much is not shown, and where all of it is when `details_url` is given.
pub fn cut_output(text: &str, details_url: Option<&str>) -> String {
    // Bytes are never fewer than characters: within the byte limit is within both.
    if text.len() <= OUTPUT_LIMIT {
        return text.to_owned();
    }
    let mut end = OUTPUT_LIMIT - NOTE_MARGIN;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let (kept, left) = text.split_at(end);
    let left = left.chars().count();
    let mut note = format!("\n\n… cut here: GitHub shows at most {OUTPUT_LIMIT} characters; {left} more are not shown.");
    if let Some(url) = details_url {
        let with_url = format!("{note} The whole preview: {url}");
        if with_url.len() < NOTE_MARGIN - 10 {
            note = with_url;
        }
    }
    let fence = if kept.matches("```").count() % 2 == 1 {
        "\n```"
    } else {
        ""
    };
    format!("{kept}{fence}{note}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use gannet_domain::ids::CommitSha;
    use gannet_domain::ports::CheckConclusion;

    fn fits(text: &str) -> bool {
        text.len() <= OUTPUT_LIMIT && text.chars().count() <= OUTPUT_LIMIT
    }

    #[test]
    fn output_within_the_limit_is_kept_whole() {
        for text in [
            String::new(),
            "plan: 1 to add".to_owned(),
            "x".repeat(OUTPUT_LIMIT),
            // 65,535 bytes of two-byte characters, one byte short of them
            format!("{}x", "é".repeat(OUTPUT_LIMIT / 2)),
        ] {
            assert_eq!(cut_output(&text, Some("https://g.example/p/1")), text);
        }
    }

    #[test]
    fn output_over_the_limit_is_cut_and_says_where_the_rest_is() {
        let url = "https://gannet.example/previews/p-1";
        let one_over = "x".repeat(OUTPUT_LIMIT + 1);
        // Characters within the limit, bytes over it: 65,535 characters of 2, 3 and 4 bytes.
        let cases = [
            one_over,
            "é".repeat(OUTPUT_LIMIT),
            "€".repeat(OUTPUT_LIMIT),
            "🦆".repeat(OUTPUT_LIMIT),
            format!("a{}", "🦆".repeat(40_000)),
        ];
        for text in cases {
            let cut = cut_output(&text, Some(url));
            assert!(fits(&cut), "{} bytes", cut.len());
            assert!(cut.len() > OUTPUT_LIMIT - NOTE_MARGIN - 4, "{}", cut.len());
            let (kept, note) = cut.split_once("\n\n… cut here:").unwrap();
            assert!(text.starts_with(kept));
            let left = text.chars().count() - kept.chars().count();
            assert!(
                note.ends_with(&format!(
                    "{left} more are not shown. The whole preview: {url}"
                )),
                "{note}"
            );
        }
        let cut = cut_output(&"x".repeat(70_000), None);
        assert!(
            cut.ends_with("more are not shown."),
            "{}",
            &cut[cut.len() - 80..]
        );
        // A URL too long for the margin is left out, the cut still fits.
        let long_url = format!("https://g.example/{}", "p".repeat(2_000));
        let cut = cut_output(&"x".repeat(70_000), Some(&long_url));
        assert!(fits(&cut) && !cut.contains("g.example"));
    }

    #[test]
    fn a_code_block_cut_open_is_closed() {
        let text = format!("## web\n```diff\n{}", "+ line\n".repeat(20_000));
        let cut = cut_output(&text, None);
        assert!(fits(&cut));
        assert_eq!(cut.matches("```").count(), 2, "{}", &cut[cut.len() - 200..]);
    }

    #[test]
    fn titles_are_a_line() {
        assert_eq!(cut_title("2 apps change"), "2 apps change");
        let exact = "é".repeat(TITLE_LIMIT);
        assert_eq!(cut_title(&exact), exact);
        let cut = cut_title(&"é".repeat(TITLE_LIMIT + 1));
        assert_eq!(cut.chars().count(), TITLE_LIMIT);
        assert!(cut.ends_with("é…"));
    }

    fn run(status: CheckStatus, conclusion: Option<CheckConclusion>) -> CheckRun {
        CheckRun {
            name: "gannet/plan-preview".into(),
            head_sha: CommitSha::parse(&"a".repeat(40)).unwrap(),
            status,
            conclusion,
            external_id: "p-1".into(),
            details_url: Some("https://g.example/p-1".into()),
            title: "1 app changes".into(),
            summary: "web: 1 to change".into(),
            text: String::new(),
        }
    }

    #[test]
    fn bodies_carry_head_and_times_as_github_wants_them() {
        let now = 1_700_000_000_000;
        let created = body(&run(CheckStatus::InProgress, None), now, true);
        assert_eq!(
            created,
            json!({
                "name": "gannet/plan-preview",
                "head_sha": "a".repeat(40),
                "status": "in_progress",
                "started_at": "2023-11-14T22:13:20Z",
                "external_id": "p-1",
                "details_url": "https://g.example/p-1",
                "output": {"title": "1 app changes", "summary": "web: 1 to change"},
            })
        );
        let queued = body(&run(CheckStatus::Queued, None), now, true);
        assert!(queued.get("started_at").is_none());
        let done = body(
            &run(CheckStatus::Completed, Some(CheckConclusion::Success)),
            now,
            false,
        );
        assert_eq!(done["conclusion"], "success");
        assert_eq!(done["completed_at"], "2023-11-14T22:13:20Z");
        assert!(done.get("head_sha").is_none() && done.get("started_at").is_none());
        // A conclusion is sent only with a completed status.
        let running = body(
            &run(CheckStatus::InProgress, Some(CheckConclusion::Failure)),
            now,
            false,
        );
        assert!(running.get("conclusion").is_none());
    }
}
