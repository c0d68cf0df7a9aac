//! Identifiers. Each is parsed once at the edge, so code that takes one never checks it again.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {value:?}: {reason}")]
pub struct IdError {
    what: &'static str,
    value: String,
    reason: &'static str,
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

string_id!(
    /// A repository as named in the controller config (`repos[].id`).
    RepoId
);
string_id!(
    /// An application: its repository and the path of its config file in that repository,
    /// `demo:apps/web/app.pipecd.yaml`. Stable while the file stays where it is.
    AppId
);
string_id!(
    /// A deployment. Derived from what caused it, so a duplicate cause yields the same id.
    DeploymentId
);
string_id!(
    /// A deployment chain: named after the deployment whose success started it.
    ChainId
);
string_id!(
    /// A plan preview: what merging a pull request's head (or a commit a CI system names)
    /// would change. Derived from the repository, the pull request and the head.
    PreviewId
);
string_id!(
    /// A stage within one deployment: the config's `id`, or `stage-N` by index.
    StageId
);
string_id!(
    /// A git commit hash (40 or 64 lowercase hex digits).
    CommitSha
);

fn check_token(what: &'static str, value: &str) -> Result<(), IdError> {
    let err = |reason| IdError {
        what,
        value: value.to_owned(),
        reason,
    };
    if value.is_empty() {
        return Err(err("must not be empty"));
    }
    if value.len() > 256 {
        return Err(err("longer than 256 characters"));
    }
    if value.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(err("must not contain whitespace or control characters"));
    }
    Ok(())
}

impl RepoId {
    pub fn parse(value: &str) -> Result<Self, IdError> {
        check_token("repository id", value)?;
        if value.contains(':') {
            return Err(IdError {
                what: "repository id",
                value: value.to_owned(),
                reason: "must not contain ':'",
            });
        }
        Ok(Self(value.to_owned()))
    }
}

impl AppId {
    /// The app whose config lives at `config_path` (relative to the repository root).
    pub fn new(repo: &RepoId, config_path: &str) -> Self {
        Self(format!("{repo}:{config_path}"))
    }

    pub fn parse(value: &str) -> Result<Self, IdError> {
        check_token("application id", value)?;
        match value.split_once(':') {
            Some((repo, path)) if !repo.is_empty() && !path.is_empty() => Ok(Self(value.into())),
            _ => Err(IdError {
                what: "application id",
                value: value.to_owned(),
                reason: "expected REPO:PATH",
            }),
        }
    }

    pub fn repo(&self) -> RepoId {
        RepoId(self.0.split_once(':').map_or("", |(r, _)| r).to_owned())
    }

    /// The config file's path within the repository.
    pub fn config_path(&self) -> &str {
        self.0.split_once(':').map_or("", |(_, p)| p)
    }

    /// The directory that holds the config file; `""` for the repository root.
    pub fn dir(&self) -> &str {
        let path = self.config_path();
        path.rsplit_once('/').map_or("", |(d, _)| d)
    }

    /// A short name for the app that a platform's label value can hold (an app id, `repo:path`,
    /// cannot): its directory's last part, cut to 40 characters, with characters other than
    /// letters, digits, `-`, `_` (and `.` unless `strict`) as `-`, lowercased when `strict`,
    /// and 10 hex digits of the id's hash, so it stays unique. Kubernetes label values take the
    /// loose form; Google Cloud's labels the strict one.
    pub fn label_value(&self, strict: bool) -> String {
        let base = self.dir().rsplit('/').next().unwrap_or_default();
        let readable: String = base
            .chars()
            .map(|c| match c {
                c if c.is_ascii_alphanumeric() || matches!(c, '-' | '_') => c,
                '.' if !strict => c,
                _ => '-',
            })
            .map(|c| if strict { c.to_ascii_lowercase() } else { c })
            .take(40)
            .collect();
        let readable = readable.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        let hash = hex::encode(Sha256::digest(self.0.as_bytes()));
        match readable {
            "" => format!("app-{}", &hash[..10]),
            r => format!("{r}-{}", &hash[..10]),
        }
    }
}

impl DeploymentId {
    /// The id of the deployment that `cause` (an app, a commit, and what triggered it) yields.
    /// The same cause always gives the same id, so a duplicated trigger creates nothing new.
    pub fn derive(app: &AppId, commit: &CommitSha, cause: &str) -> Self {
        let mut h = Sha256::new();
        for part in [app.as_str(), commit.as_str(), cause] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        Self(format!("d-{}", &hex::encode(h.finalize())[..Self::LEN - 2]))
    }

    /// The length of every id [`DeploymentId::derive`] makes: `d-` and 20 hex digits. No
    /// such id is a prefix of another.
    pub const LEN: usize = 22;

    pub fn parse(value: &str) -> Result<Self, IdError> {
        check_token("deployment id", value)?;
        Ok(Self(value.to_owned()))
    }
}

impl ChainId {
    /// The chain that deployment `first` starts when it succeeds (at most one per deployment).
    pub fn of(first: &DeploymentId) -> Self {
        let id = first.as_str();
        Self(format!("c-{}", id.strip_prefix("d-").unwrap_or(id)))
    }

    pub fn parse(value: &str) -> Result<Self, IdError> {
        check_token("chain id", value)?;
        Ok(Self(value.to_owned()))
    }
}

impl PreviewId {
    /// The preview of `head` proposed to `repo`'s watched branch by pull request `pr`, or by
    /// a caller of the API (`pr` `None`): the same request always gives the same id, so a
    /// duplicated webhook or a repeated `gannet plan-preview` finds the preview it started.
    pub fn derive(repo: &RepoId, pr: Option<u64>, head: &CommitSha) -> Self {
        let mut h = Sha256::new();
        let pr = pr.map_or_else(|| "api".to_owned(), |n| n.to_string());
        for part in [repo.as_str(), pr.as_str(), head.as_str()] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        Self(format!("p-{}", &hex::encode(h.finalize())[..20]))
    }

    pub fn parse(value: &str) -> Result<Self, IdError> {
        check_token("preview id", value)?;
        Ok(Self(value.to_owned()))
    }
}

impl StageId {
    pub fn parse(value: &str) -> Result<Self, IdError> {
        check_token("stage id", value)?;
        Ok(Self(value.to_owned()))
    }

    /// The id of a stage with no `id` in its config.
    pub fn by_index(index: usize) -> Self {
        Self(format!("stage-{index}"))
    }

    /// The id of the hidden rollback stage for `of`.
    pub fn rollback(of: &str) -> Self {
        Self(format!("rollback-{of}"))
    }
}

impl CommitSha {
    pub fn parse(value: &str) -> Result<Self, IdError> {
        let ok_len = value.len() == 40 || value.len() == 64;
        if !ok_len || !value.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(IdError {
                what: "commit",
                value: value.to_owned(),
                reason: "expected 40 or 64 hex digits",
            });
        }
        Ok(Self(value.to_ascii_lowercase()))
    }

    /// The first 7 digits, for display.
    pub fn short(&self) -> &str {
        &self.0[..7]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_id_parts() {
        let app = AppId::new(&RepoId::parse("demo").unwrap(), "apps/web/app.pipecd.yaml");
        assert_eq!(app.as_str(), "demo:apps/web/app.pipecd.yaml");
        assert_eq!(app.repo().as_str(), "demo");
        assert_eq!(app.dir(), "apps/web");
        let root = AppId::parse("demo:app.pipecd.yaml").unwrap();
        assert_eq!(root.dir(), "");
        assert!(AppId::parse("nocolon").is_err());
    }

    #[test]
    fn deployment_ids_are_deterministic() {
        let app = AppId::parse("demo:a/app.pipecd.yaml").unwrap();
        let c = CommitSha::parse(&"a".repeat(40)).unwrap();
        assert_eq!(
            DeploymentId::derive(&app, &c, "ON_COMMIT"),
            DeploymentId::derive(&app, &c, "ON_COMMIT")
        );
        assert_ne!(
            DeploymentId::derive(&app, &c, "ON_COMMIT"),
            DeploymentId::derive(&app, &c, "ON_COMMAND:x")
        );
    }

    #[test]
    fn commit_sha_is_checked() {
        assert!(CommitSha::parse("abc").is_err());
        assert!(CommitSha::parse(&"g".repeat(40)).is_err());
        assert_eq!(
            CommitSha::parse(&"A".repeat(40)).unwrap().short(),
            "aaaaaaa"
        );
    }
}
