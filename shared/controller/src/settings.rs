//! What the handlers need to know about the installation: repositories, the webhook secret,
//! intervals and notification receivers. Built once by the runtime from its config, and
//! checked by the one check both runtimes run ([`check_settings`]).

use std::fmt;

use gannet_domain::{CommitSha, GoDuration, RepoId};

mod check;

pub use check::{
    check_settings, IntervalName, ReceiverUrl, SettingsError, SettingsField, SettingsProblem,
    MIN_INTERVAL,
};

/// A secret value. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Self(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// One watched repository branch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepoSettings {
    pub id: RepoId,
    pub branch: String,
    /// `owner/name` that webhooks for this repository carry in `repository.full_name`.
    pub github: Option<String>,
    /// The clone URL, for repositories gannet clones.
    pub url: Option<String>,
    /// A newer commit cancels the app's older PENDING deployments.
    pub supersede: Supersede,
    /// What the first scan of the repository does with the apps it finds.
    pub on_first_sight: FirstSight,
    /// Plan previews of pull requests to the watched branch (`repos[].planPreview`).
    pub plan_preview: PreviewSettings,
}

/// `repos[].planPreview` (gannet.yaml; the same map in `GANNET_REPOS`): whether pull requests
/// get plan previews, how often, and whether a fork's may read with credentials.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreviewSettings {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The least time between two previews of one pull request: a push within it waits, and
    /// only the newest head of a burst is previewed.
    #[serde(default = "default_min_interval")]
    pub min_interval: GoDuration,
    /// The most previews one pull request gets in a day; past it a head gets a neutral check
    /// run saying so.
    #[serde(default = "default_max_per_day")]
    pub max_per_day: u32,
    #[serde(default)]
    pub forks: ForkPreviews,
}

/// `planPreview.forks`: a pull request from a fork runs someone else's code. By default its
/// preview reads nothing with credentials; `credentials: true` lets the `authors` listed
/// (GitHub logins) have them.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkPreviews {
    #[serde(default)]
    pub credentials: bool,
    #[serde(default)]
    pub authors: Vec<String>,
}

impl Default for PreviewSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            min_interval: default_min_interval(),
            max_per_day: default_max_per_day(),
            forks: ForkPreviews::default(),
        }
    }
}

impl PreviewSettings {
    /// Whether a preview of a pull request by `author` (from a fork or not) reads with the
    /// deploy targets' preview credentials; `Err` says why not.
    pub fn credentials_for(&self, fork: bool, author: &str) -> Result<(), String> {
        if !fork {
            return Ok(());
        }
        if !self.forks.credentials {
            return Err(
                "the pull request comes from a fork, and planPreview.forks.credentials is off"
                    .into(),
            );
        }
        if self
            .forks
            .authors
            .iter()
            .any(|a| a.eq_ignore_ascii_case(author))
        {
            Ok(())
        } else {
            Err(format!(
                "the pull request comes from a fork, and its author {author} is not in planPreview.forks.authors"
            ))
        }
    }
}

fn yes() -> bool {
    true
}

fn default_min_interval() -> GoDuration {
    GoDuration::from_secs(10)
}

fn default_max_per_day() -> u32 {
    100
}

/// What the first scan of a repository (nothing stored for it yet) does with each app it
/// finds: `repos[].onFirstSight` in `gannet.yaml`, `onFirstSight` in `GANNET_REPOS`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FirstSight {
    /// Take each app as it runs now: its config is read, its branch head is marked checked,
    /// and nothing is deployed; the next commit that changes it deploys it. The default: a
    /// first start on a real repository deploys nothing nobody asked for.
    #[default]
    Adopt,
    /// Deploy every app at the branch head, as a first push would (PipeCD's behaviour).
    Deploy,
}

impl FirstSight {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Adopt => "adopt",
            Self::Deploy => "deploy",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Supersede {
    /// Every PENDING deployment runs, oldest first (PipeCD's behaviour).
    #[default]
    Never,
    /// Only the newest PENDING deployment runs; older ones end CANCELLED as superseded.
    OlderPending,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Intervals {
    pub poll: GoDuration,
    pub resume: GoDuration,
    pub drift: GoDuration,
}

impl Default for Intervals {
    fn default() -> Self {
        Self {
            poll: GoDuration::from_secs(60),
            resume: GoDuration::from_secs(30),
            drift: GoDuration::from_secs(60),
        }
    }
}

/// An HTTP endpoint that receives events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receiver {
    pub name: String,
    /// A secret: a receiver's URL often carries its credential (a Slack incoming webhook's
    /// path, a token in the query).
    pub url: Secret,
    pub format: ReceiverFormat,
}

/// What a receiver gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReceiverFormat {
    /// Every event, as a CloudEvent in structured JSON.
    CloudEvents,
    /// A Slack incoming webhook: a message a person reads, for the events worth one (see
    /// [`crate::slack`]), mentioning who the app config names for the event.
    Slack,
}

#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub repos: Vec<RepoSettings>,
    /// `None`: webhooks are refused (no secret configured).
    pub webhook_secret: Option<Secret>,
    pub intervals: Intervals,
    pub receivers: Vec<Receiver>,
}

impl Settings {
    pub fn repo(&self, id: &RepoId) -> Option<&RepoSettings> {
        self.repos.iter().find(|r| &r.id == id)
    }

    /// Where a person reads `sha` of repository `repo`: its page on GitHub, for a repository
    /// there (`repos[].github`); `None` for one gannet only clones or reads locally.
    pub fn commit_url(&self, repo: &RepoId, sha: &CommitSha) -> Option<String> {
        let github = self.repo(repo)?.github.as_deref()?;
        Some(format!("https://github.com/{github}/commit/{sha}"))
    }
}
