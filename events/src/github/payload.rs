//! GitHub webhook deliveries: the `ping` and `push` payloads, read from JSON or from the
//! `application/x-www-form-urlencoded` body (`payload=<json>`) GitHub sends when a hook is set
//! up with that content type.

use gannet_domain::ids::{CommitSha, IdError};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Deserialize;

/// One delivery, by its `X-GitHub-Event` header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Sent once when the hook is created.
    Ping {
        zen: String,
        hook_id: u64,
    },
    Push(Push),
    PullRequest(PullRequest),
    /// An event gannet does not act on; the name is kept for the response.
    Unhandled {
        event: String,
    },
}

/// A push to a branch or a tag (also a ref created or deleted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Push {
    /// `owner/name`, as GitHub spells it.
    pub repo_full_name: String,
    /// `https://github.com/owner/name.git`.
    pub clone_url: String,
    /// `https://github.com/owner/name`.
    pub html_url: String,
    /// The full ref, `refs/heads/main` or `refs/tags/v1`.
    pub git_ref: String,
    /// The branch pushed to; `None` for a tag or any other ref.
    pub branch: Option<String>,
    /// The ref's commit before the push (all zeros when the push created it).
    pub before: CommitSha,
    /// The ref's commit after the push (all zeros when the push deleted it).
    pub after: CommitSha,
    pub created: bool,
    pub deleted: bool,
    pub forced: bool,
    /// The message of the commit at `after`; `None` when there is none (a deleted ref).
    pub head_commit_message: Option<String>,
    /// Who pushed (GitHub user name).
    pub pusher: String,
}

impl Push {
    /// Why this push must not trigger anything, or `None` when it is a push to a branch.
    pub fn ignored_reason(&self) -> Option<&'static str> {
        if self.git_ref.starts_with("refs/tags/") {
            Some("tag push")
        } else if self.branch.is_none() {
            Some("not a branch")
        } else if self.deleted {
            Some("branch deleted")
        } else {
            None
        }
    }
}

/// A `pull_request` delivery: a pull request opened, pushed to, reopened, closed, ...
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PullRequest {
    /// `opened`, `synchronize`, `reopened`, `closed`, `edited`, ...
    pub action: String,
    pub number: u64,
    /// The base repository (`owner/name`) and its clone URL: where the pull request would merge.
    pub repo_full_name: String,
    pub clone_url: String,
    /// The branch it would merge into.
    pub base_ref: String,
    /// The commit proposed.
    pub head: CommitSha,
    /// The head's repository (`owner/name`); `None` when that fork was deleted.
    pub head_repo: Option<String>,
    /// Who opened it (GitHub login).
    pub author: String,
    /// GitHub's `author_association` (`OWNER`, `MEMBER`, `CONTRIBUTOR`, ...): shown, never
    /// trusted for access.
    pub author_association: String,
    pub draft: bool,
}

impl PullRequest {
    /// The head lives in another repository than the base (a fork), or its repository is gone.
    pub fn from_fork(&self) -> bool {
        self.head_repo
            .as_deref()
            .is_none_or(|head| !head.eq_ignore_ascii_case(&self.repo_full_name))
    }

    /// Why this delivery asks for no preview, or `None` when it does (the head was opened,
    /// pushed to or reopened).
    pub fn ignored_reason(&self) -> Option<String> {
        match self.action.as_str() {
            "opened" | "synchronize" | "reopened" => None,
            other => Some(format!(
                "pull request action {other} asks for no plan preview"
            )),
        }
    }
}

/// A delivery body that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// The body is not the JSON the event should carry. `path` is where in the document, when
    /// known (`repository.full_name`); `source` is serde's message.
    #[error("malformed {event} payload{}: {source}", at(path.as_deref()))]
    Malformed {
        event: String,
        path: Option<String>,
        #[source]
        source: serde_json::Error,
    },
    /// A form-encoded body without a readable `payload` field.
    #[error("malformed form-encoded payload: {0}")]
    MalformedForm(&'static str),
    /// A commit field is not a commit hash.
    #[error("invalid {field} in {event} payload")]
    InvalidCommit {
        event: String,
        field: &'static str,
        #[source]
        source: IdError,
    },
}

#[derive(Deserialize)]
struct PingWire {
    zen: String,
    hook_id: u64,
}

#[derive(Deserialize)]
struct PushWire {
    #[serde(rename = "ref")]
    git_ref: String,
    before: String,
    after: String,
    created: bool,
    deleted: bool,
    forced: bool,
    head_commit: Option<HeadCommitWire>,
    repository: RepositoryWire,
    pusher: PusherWire,
}

#[derive(Deserialize)]
struct PullRequestWire {
    action: String,
    number: u64,
    pull_request: PullRequestBodyWire,
    repository: RepositoryWire,
}

#[derive(Deserialize)]
struct PullRequestBodyWire {
    head: PullRequestHeadWire,
    base: PullRequestBaseWire,
    user: UserWire,
    #[serde(default)]
    author_association: String,
    #[serde(default)]
    draft: bool,
}

#[derive(Deserialize)]
struct PullRequestHeadWire {
    sha: String,
    repo: Option<FullNameWire>,
}

#[derive(Deserialize)]
struct PullRequestBaseWire {
    #[serde(rename = "ref")]
    git_ref: String,
}

#[derive(Deserialize)]
struct FullNameWire {
    full_name: String,
}

#[derive(Deserialize)]
struct UserWire {
    login: String,
}

#[derive(Deserialize)]
struct HeadCommitWire {
    message: String,
}

#[derive(Deserialize)]
struct RepositoryWire {
    full_name: String,
    clone_url: String,
    html_url: String,
}

#[derive(Deserialize)]
struct PusherWire {
    name: String,
}

/// Reads a delivery whose `X-GitHub-Event` header is `event_header`. The body of an event
/// gannet does not handle must still be well-formed JSON.
pub fn parse_event(event_header: &str, body: &[u8]) -> Result<Event, PayloadError> {
    let form;
    let json = match form_field(body) {
        Some(field) => {
            form = percent_decode(field)?;
            form.as_slice()
        }
        None => body,
    };
    match event_header {
        "ping" => {
            let ping: PingWire = decode(event_header, json)?;
            Ok(Event::Ping {
                zen: ping.zen,
                hook_id: ping.hook_id,
            })
        }
        "push" => push(decode(event_header, json)?).map(Event::Push),
        "pull_request" => pull_request(decode(event_header, json)?).map(Event::PullRequest),
        other => {
            decode::<IgnoredAny>(other, json)?;
            Ok(Event::Unhandled {
                event: other.to_owned(),
            })
        }
    }
}

fn push(wire: PushWire) -> Result<Push, PayloadError> {
    let commit = |field, value: &str| {
        CommitSha::parse(value).map_err(|source| PayloadError::InvalidCommit {
            event: "push".to_owned(),
            field,
            source,
        })
    };
    Ok(Push {
        branch: wire.git_ref.strip_prefix("refs/heads/").map(str::to_owned),
        before: commit("before", &wire.before)?,
        after: commit("after", &wire.after)?,
        repo_full_name: wire.repository.full_name,
        clone_url: wire.repository.clone_url,
        html_url: wire.repository.html_url,
        git_ref: wire.git_ref,
        created: wire.created,
        deleted: wire.deleted,
        forced: wire.forced,
        head_commit_message: wire.head_commit.map(|c| c.message),
        pusher: wire.pusher.name,
    })
}

fn pull_request(wire: PullRequestWire) -> Result<PullRequest, PayloadError> {
    let pr = wire.pull_request;
    let head = CommitSha::parse(&pr.head.sha).map_err(|source| PayloadError::InvalidCommit {
        event: "pull_request".to_owned(),
        field: "pull_request.head.sha",
        source,
    })?;
    Ok(PullRequest {
        action: wire.action,
        number: wire.number,
        repo_full_name: wire.repository.full_name,
        clone_url: wire.repository.clone_url,
        base_ref: pr.base.git_ref,
        head,
        head_repo: pr.head.repo.map(|r| r.full_name),
        author: pr.user.login,
        author_association: pr.author_association,
        draft: pr.draft,
    })
}

fn decode<T: DeserializeOwned>(event: &str, json: &[u8]) -> Result<T, PayloadError> {
    let malformed = |path: Option<String>, source| PayloadError::Malformed {
        event: event.to_owned(),
        path,
        source,
    };
    let mut de = serde_json::Deserializer::from_slice(json);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let known = path != "." && path != "?";
        malformed(known.then_some(path), e.into_inner())
    })?;
    de.end().map_err(|e| malformed(None, e))?;
    Ok(value)
}

fn at(path: Option<&str>) -> String {
    path.map(|p| format!(" at {p}")).unwrap_or_default()
}

/// The raw `payload` field when `body` is `application/x-www-form-urlencoded` rather than JSON.
fn form_field(body: &[u8]) -> Option<&[u8]> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace())?;
    if *first == b'{' || *first == b'[' {
        return None;
    }
    body.split(|b| *b == b'&')
        .find_map(|pair| pair.strip_prefix(b"payload="))
}

fn percent_decode(input: &[u8]) -> Result<Vec<u8>, PayloadError> {
    let mut out = Vec::with_capacity(input.len());
    let mut bytes = input.iter().copied();
    while let Some(b) = bytes.next() {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let digits = [bytes.next(), bytes.next()];
                let [Some(hi), Some(lo)] = digits else {
                    return Err(PayloadError::MalformedForm("truncated percent escape"));
                };
                let hex = [hi, lo];
                let mut byte = [0u8; 1];
                hex::decode_to_slice(hex, &mut byte)
                    .map_err(|_| PayloadError::MalformedForm("invalid percent escape"))?;
                out.push(byte[0]);
            }
            other => out.push(other),
        }
    }
    Ok(out)
}
