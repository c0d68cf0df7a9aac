//! The one check of the settings both runtimes take (repositories, intervals, receivers'
//! URLs): `gannet up` runs it on gannet.yaml, the functions on their environment, so a value
//! one refuses the other refuses too. The check names a refused value by its place in the
//! shared settings ([`SettingsField`]); the runtime says where its user wrote that place
//! (`repos[1].github` in gannet.yaml, `GANNET_REPOS: [1].github` on AWS).

use gannet_domain::report::redact_urls;
use gannet_domain::{GoDuration, RepoId};
use gannet_sdk::targets::{credentialed_url, UnsafeUrl};

use super::{Intervals, ReceiverFormat, RepoSettings};

/// The shortest interval a timer runs at: a sweep every few milliseconds is a typo, and a
/// zero interval would stop the timer (tokio's panics).
pub const MIN_INTERVAL: GoDuration = GoDuration::from_millis(100);

/// One of the timers' [`Intervals`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntervalName {
    Poll,
    Resume,
    Drift,
}

/// A setting both runtimes take, by its place in the shared settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingsField {
    /// The repository entry at this index (named by a message about another entry).
    Repo(usize),
    RepoId(usize),
    RepoGithub(usize),
    /// `planPreview.forks.authors` of the repository at this index.
    RepoForkAuthors(usize),
    Interval(IntervalName),
    /// The URL of the receiver at this index, where its format takes it from (a CloudEvents
    /// endpoint's URL, a Slack incoming webhook's).
    ReceiverUrl(usize, ReceiverFormat),
}

/// A receiver's URL as the runtime has it when it loads its settings.
#[derive(Clone, Copy, Debug)]
pub struct ReceiverUrl<'a> {
    /// The receiver's index in the runtime's list.
    pub index: usize,
    pub format: ReceiverFormat,
    pub url: &'a str,
}

/// A refused setting: where its user wrote it (as the runtime names the place), and why.
#[derive(Debug, thiserror::Error)]
#[error("{at}: {problem}")]
pub struct SettingsError {
    at: String,
    problem: SettingsProblem,
}

/// What is wrong with a refused setting.
#[derive(Debug, thiserror::Error)]
pub enum SettingsProblem {
    #[error("{0} is too short (at least {MIN_INTERVAL})")]
    IntervalTooShort(GoDuration),
    #[error("{0} is listed twice")]
    RepoListedTwice(RepoId),
    #[error("forks.credentials is on but no author is listed: list the GitHub logins whose forks' previews may read with credentials")]
    NoForkAuthors,
    #[error("{0:?} is not a GitHub login")]
    NotALogin(String),
    #[error("{0:?} is not owner/name")]
    NotOwnerName(String),
    /// `earlier` is the other entry, as the runtime names it.
    #[error("{github} is listed twice (also {earlier}); one GitHub repository is one entry")]
    GithubListedTwice { github: String, earlier: String },
    /// `shown` is the URL with its credentials redacted, or nothing for a URL that is a key
    /// itself (a Slack incoming webhook's).
    #[error("{shown}{why}; for example https://hooks.example.com/gannet")]
    UnsafeReceiverUrl { shown: String, why: UnsafeUrl },
}

/// Checks the settings both runtimes take. `name` says where the runtime's user wrote each
/// place; an error begins with it.
pub fn check_settings(
    repos: &[RepoSettings],
    intervals: &Intervals,
    receivers: &[ReceiverUrl<'_>],
    name: &dyn Fn(SettingsField) -> String,
) -> Result<(), SettingsError> {
    let refuse = |field, problem| {
        Err(SettingsError {
            at: name(field),
            problem,
        })
    };
    for (i, repo) in repos.iter().enumerate() {
        if repos[..i].iter().any(|r| r.id == repo.id) {
            return refuse(
                SettingsField::RepoId(i),
                SettingsProblem::RepoListedTwice(repo.id.clone()),
            );
        }
        let forks = &repo.plan_preview.forks;
        if forks.credentials && forks.authors.is_empty() {
            return refuse(
                SettingsField::RepoForkAuthors(i),
                SettingsProblem::NoForkAuthors,
            );
        }
        if let Some(bad) = forks.authors.iter().find(|a| !is_login(a)) {
            return refuse(
                SettingsField::RepoForkAuthors(i),
                SettingsProblem::NotALogin(bad.clone()),
            );
        }
        let Some(github) = &repo.github else {
            continue;
        };
        if !is_owner_name(github) {
            return refuse(
                SettingsField::RepoGithub(i),
                SettingsProblem::NotOwnerName(github.clone()),
            );
        }
        // GitHub's names ignore case, and so does a webhook's match.
        let earlier = repos[..i].iter().position(|r| {
            r.github
                .as_deref()
                .is_some_and(|g| g.eq_ignore_ascii_case(github))
        });
        if let Some(j) = earlier {
            return refuse(
                SettingsField::RepoGithub(i),
                SettingsProblem::GithubListedTwice {
                    github: github.clone(),
                    earlier: name(SettingsField::Repo(j)),
                },
            );
        }
    }
    for (which, value) in [
        (IntervalName::Poll, intervals.poll),
        (IntervalName::Resume, intervals.resume),
        (IntervalName::Drift, intervals.drift),
    ] {
        if value < MIN_INTERVAL {
            return refuse(
                SettingsField::Interval(which),
                SettingsProblem::IntervalTooShort(value),
            );
        }
    }
    for r in receivers {
        // The URL is a secret itself (a Slack webhook's path is its key; a receiver's may
        // hold a token), so it goes over https, or plain http only to loopback.
        if let Err(why) = credentialed_url(r.url) {
            let shown = match r.format {
                // Not even redacted: its path is the key.
                ReceiverFormat::Slack => String::new(),
                ReceiverFormat::CloudEvents => format!("{:?} ", redact_urls(r.url)),
            };
            return refuse(
                SettingsField::ReceiverUrl(r.index, r.format),
                SettingsProblem::UnsafeReceiverUrl { shown, why },
            );
        }
    }
    Ok(())
}

/// A GitHub login: at most 39 letters, digits and single hyphens, not at either end.
fn is_login(login: &str) -> bool {
    (1..=39).contains(&login.len())
        && login
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !login.starts_with('-')
        && !login.ends_with('-')
        && !login.contains("--")
}

/// `owner/name`, as GitHub's `repository.full_name`.
fn is_owner_name(github: &str) -> bool {
    github
        .split_once('/')
        .is_some_and(|(owner, name)| !owner.is_empty() && !name.is_empty() && !name.contains('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Supersede;

    fn repo(id: &str, github: Option<&str>) -> RepoSettings {
        RepoSettings {
            id: RepoId::parse(id).expect("repository id"),
            branch: "main".into(),
            github: github.map(str::to_owned),
            url: None,
            supersede: Supersede::Never,
            on_first_sight: crate::FirstSight::default(),
            plan_preview: Default::default(),
        }
    }

    /// A runtime's names for the places: gannet.yaml's paths, as `gannet up` names them.
    fn yaml(field: SettingsField) -> String {
        match field {
            SettingsField::Repo(i) => format!("repos[{i}]"),
            SettingsField::RepoId(i) => format!("repos[{i}].id"),
            SettingsField::RepoGithub(i) => format!("repos[{i}].github"),
            SettingsField::RepoForkAuthors(i) => format!("repos[{i}].planPreview.forks.authors"),
            SettingsField::Interval(which) => format!("intervals.{which:?}").to_lowercase(),
            SettingsField::ReceiverUrl(i, format) => format!("receivers[{i}].{format:?}"),
        }
    }

    /// The check's verdict on `repos`, `intervals` and `receivers`.
    fn check(
        repos: &[RepoSettings],
        intervals: Intervals,
        receivers: &[(ReceiverFormat, &str)],
    ) -> Result<(), String> {
        let receivers: Vec<ReceiverUrl> = receivers
            .iter()
            .enumerate()
            .map(|(index, (format, url))| ReceiverUrl {
                index,
                format: *format,
                url,
            })
            .collect();
        check_settings(repos, &intervals, &receivers, &yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn each_rule_refuses_naming_the_place_the_runtime_gives() {
        let ms = GoDuration::from_millis;
        let short = |drift| Intervals {
            drift,
            ..Intervals::default()
        };
        type Case<'a> = (
            &'a [RepoSettings],
            Intervals,
            &'a [(ReceiverFormat, &'a str)],
            &'a str,
        );
        let cases: &[Case] = &[
            (
                &[repo("a", None), repo("a", None)],
                short(ms(60_000)),
                &[],
                "repos[1].id: a is listed twice",
            ),
            (
                &[repo("a", Some("acme"))],
                short(ms(60_000)),
                &[],
                "repos[0].github: \"acme\" is not owner/name",
            ),
            (
                &[repo("a", Some("acme/shop/x"))],
                short(ms(60_000)),
                &[],
                "repos[0].github: \"acme/shop/x\" is not owner/name",
            ),
            (
                &[repo("a", Some("Acme/Shop")), repo("b", Some("acme/shop"))],
                short(ms(60_000)),
                &[],
                "repos[1].github: acme/shop is listed twice (also repos[0]); one GitHub repository is one entry",
            ),
            (
                &[],
                short(ms(99)),
                &[],
                "intervals.drift: 99ms is too short (at least 100ms)",
            ),
            (
                &[],
                short(ms(0)),
                &[],
                "intervals.drift: 0s is too short (at least 100ms)",
            ),
            (
                &[],
                Intervals::default(),
                &[(ReceiverFormat::CloudEvents, "http://u:pw@hooks.example.com/x")],
                "receivers[0].CloudEvents: \"http://***@hooks.example.com/x\" has a user name or password in it",
            ),
            (
                &[],
                Intervals::default(),
                &[
                    (ReceiverFormat::CloudEvents, "https://hooks.example.com/x"),
                    (ReceiverFormat::Slack, "http://hooks.slack.example/services/key"),
                ],
                "receivers[1].Slack: must be an https:// URL",
            ),
        ];
        for (repos, intervals, receivers, want) in cases {
            let err = check(repos, intervals.clone(), receivers).unwrap_err();
            assert!(err.starts_with(want), "{want}: {err}");
            assert!(!err.contains("pw") && !err.contains("key"), "{err}");
        }
    }

    #[test]
    fn fork_credentials_need_listed_logins() {
        let with_forks = |credentials, authors: &[&str]| {
            let mut r = repo("shop", Some("acme/shop"));
            r.plan_preview.forks = crate::ForkPreviews {
                credentials,
                authors: authors.iter().map(|a| a.to_string()).collect(),
            };
            check(&[r], Intervals::default(), &[])
        };
        assert_eq!(
            with_forks(true, &[]).unwrap_err(),
            "repos[0].planPreview.forks.authors: forks.credentials is on but no author is listed: list the GitHub logins whose forks' previews may read with credentials"
        );
        assert_eq!(
            with_forks(true, &["octo", "bad login"]).unwrap_err(),
            "repos[0].planPreview.forks.authors: \"bad login\" is not a GitHub login"
        );
        assert_eq!(
            with_forks(false, &["-dash"]).unwrap_err(),
            "repos[0].planPreview.forks.authors: \"-dash\" is not a GitHub login"
        );
        assert!(with_forks(true, &["octo-forker", "Octo2"]).is_ok());
        assert!(with_forks(false, &[]).is_ok());
    }

    #[test]
    fn what_the_rules_allow_passes() {
        let repos = [
            repo("shop", Some("acme/shop")),
            repo("infra", Some("acme/infra")),
            repo("local", None),
        ];
        let intervals = Intervals {
            poll: MIN_INTERVAL,
            resume: MIN_INTERVAL,
            drift: MIN_INTERVAL,
        };
        let receivers = [
            (ReceiverFormat::CloudEvents, "https://hooks.example.com/x"),
            (ReceiverFormat::CloudEvents, "http://127.0.0.1:9000/events"),
            (
                ReceiverFormat::Slack,
                "https://hooks.slack.com/services/T0/B0/key",
            ),
        ];
        assert_eq!(check(&repos, intervals, &receivers), Ok(()));
    }
}
