//! [`GithubStatuses`]: the [`CommitStatuses`] port as GitHub commit statuses
//! (`POST /repos/{o}/{r}/statuses/{sha}`), one per context, the latest report winning.

use async_trait::async_trait;
use gannet_domain::ids::{CommitSha, RepoId};
use gannet_domain::ports::{BoxError, CommitStatus, CommitStatuses};
use serde_json::json;

use super::client::{ApiError, GithubClient};
use super::{Repos, SetupError};

/// GitHub refuses a status description longer than this many characters.
pub const DESCRIPTION_LIMIT: usize = 140;

/// Reports deployment states as GitHub commit statuses.
pub struct GithubStatuses {
    client: GithubClient,
    repos: Repos,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum StatusError {
    #[error("repository {0} is not a configured GitHub repository")]
    UnknownRepo(RepoId),
    #[error("reporting the status of {commit} in {repo} failed")]
    Post {
        repo: RepoId,
        commit: CommitSha,
        #[source]
        source: ApiError,
    },
}

impl GithubStatuses {
    /// Reports on `repos`, given as `(id, "owner/name")`.
    pub fn new(client: GithubClient, repos: Vec<(RepoId, String)>) -> Result<Self, SetupError> {
        Ok(Self {
            client,
            repos: Repos::new(repos)?,
        })
    }
}

#[async_trait]
impl CommitStatuses for GithubStatuses {
    async fn report(&self, repo: &RepoId, status: &CommitStatus) -> Result<(), BoxError> {
        let name = self
            .repos
            .full_name(repo)
            .ok_or_else(|| StatusError::UnknownRepo(repo.clone()))?;
        let mut body = json!({
            "state": status.state.as_str(),
            "context": status.context,
            "description": cut(&status.description),
        });
        if let Some(url) = &status.target_url {
            body["target_url"] = json!(url);
        }
        let path = format!("/repos/{name}/statuses/{}", status.commit);
        self.client
            .post_json(&path, &body)
            .await
            .map_err(|source| StatusError::Post {
                repo: repo.clone(),
                commit: status.commit.clone(),
                source,
            })?;
        Ok(())
    }
}

/// `text` in at most [`DESCRIPTION_LIMIT`] characters: cut at a character boundary, with `…`
/// marking the cut.
fn cut(text: &str) -> String {
    if text.chars().count() <= DESCRIPTION_LIMIT {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(DESCRIPTION_LIMIT - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_fit() {
        let check = |text: &str, want: &str| assert_eq!(cut(text), want);
        check("SUCCESS · 5 stages in 2m10s", "SUCCESS · 5 stages in 2m10s");
        let exact = "é".repeat(140);
        check(&exact, &exact);
        let long = "é".repeat(141);
        let want = format!("{}…", "é".repeat(139));
        check(&long, &want);
        assert_eq!(cut(&"x".repeat(500)).chars().count(), DESCRIPTION_LIMIT);
    }
}
