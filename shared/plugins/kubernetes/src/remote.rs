//! Charts and kustomize bases fetched from elsewhere: a chart from a Helm chart repository
//! (`helmChart: {repository, name, version}`, the repository configured in gannet.yaml, or an
//! `oci://` registry), a chart in another git repository (`helmChart: {gitRemote, ref, path}`)
//! and a kustomization with remote bases or resources. gannet never fetches them itself: a
//! stage renders them in a job ([`crate::fetch`]). This module reads the settings and checks
//! what an app asks for, with errors naming the field.
//!
//! gannet.yaml, under `plugins.kubernetes` (PipeCD's piped `chartRepositories`):
//!
//! ```yaml
//! chartRepositories:
//!   - name: internal                        # what helmChart.repository names
//!     address: https://charts.example.com   # https, or plain http to a loopback host only
//!     username: deploy                      # optional
//!     passwordEnv: CHARTS_PASSWORD          # or passwordFile: /run/secrets/charts
//!     insecure: false                       # skip TLS verification (helm's flag)
//! allowFileRemotes: false                   # file:// git remotes, for tests and local mirrors
//! ```
//!
//! A repository name is checked against these settings when any are configured; `config
//! check`, which reads no gannet.yaml, accepts any name, and a stage fails naming one that is
//! not configured.
//!
//! Git remotes (a chart's `gitRemote`, a kustomize base) are `https://` (no credentials in the
//! URL), plain `http://` to a loopback host, `ssh://` or `git@host:path`; `file://` only with
//! `allowFileRemotes` (it reads repositories on gannet's own machine).

use gannet_config::typed::FieldError;
use gannet_sdk::plugin::AppFileError;
use gannet_sdk::registry::PluginSettings;
use gannet_sdk::targets::{self, Named};
use gannet_sdk::tree::AppFiles;
use serde::Deserialize;

use crate::spec::KubernetesSpec;
use crate::DeployTarget;

/// The most of a password file read.
const MAX_SECRET_BYTES: u64 = 16 * 1024;

/// `plugins.kubernetes`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Settings {
    #[serde(default)]
    deploy_targets: Vec<DeployTarget>,
    #[serde(default)]
    chart_repositories: Vec<ChartRepository>,
    #[serde(default)]
    allow_file_remotes: bool,
}

/// A Helm chart repository charts are fetched from (`plugins.kubernetes.chartRepositories[i]`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChartRepository {
    pub name: String,
    pub address: String,
    /// PipeCD's `type`: only `HTTP` (an `oci://` registry is named in the app instead).
    #[serde(default, rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub username: String,
    /// PipeCD's inline password: refused, so a secret never sits in gannet.yaml.
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    pub password_env: Option<String>,
    #[serde(default)]
    pub password_file: Option<String>,
    #[serde(default)]
    pub insecure: bool,
}

impl Named for ChartRepository {
    fn name(&self) -> &str {
        &self.name
    }
}

impl ChartRepository {
    fn check(&self, at: &str) -> Result<(), FieldError> {
        let error = |field: &str, message: String| FieldError {
            path: format!("{at}.{field}"),
            message,
        };
        if self.name.is_empty() || self.name.contains(|c: char| c == '/' || c.is_whitespace()) {
            return Err(error(
                "name",
                "is required: a name without '/' or spaces, as helmChart.repository names it"
                    .into(),
            ));
        }
        if !self.kind.is_empty() && !self.kind.eq_ignore_ascii_case("HTTP") {
            return Err(error(
                "type",
                format!("{:?}: only HTTP chart repositories are configured here; name an OCI registry in the app (helmChart.repository: oci://host/path)", self.kind),
            ));
        }
        targets::credentialed_url(&self.address).map_err(|why| {
            error(
                "address",
                format!(
                    "{:?}: {why}",
                    gannet_domain::report::redact_urls(&self.address)
                ),
            )
        })?;
        if self.password.is_some() {
            return Err(error(
                "password",
                "a password is never written in gannet.yaml: give passwordEnv (a variable) or passwordFile (a file) holding it".into(),
            ));
        }
        if self.password_env.is_some() && self.password_file.is_some() {
            return Err(error(
                "passwordEnv",
                "give passwordEnv or passwordFile, not both".into(),
            ));
        }
        Ok(())
    }

    /// The password, read now (a rotated secret is picked up); the error names the field the
    /// config wrote, never a value.
    pub(crate) fn password(&self) -> Result<Option<String>, String> {
        let value = match (&self.password_env, &self.password_file) {
            (Some(var), _) => std::env::var(var).map_err(|_| {
                format!(
                    "chart repository {}: passwordEnv: environment variable {var} is not set",
                    self.name
                )
            })?,
            (None, Some(file)) => {
                gannet_config::bounded::read_file(std::path::Path::new(file), MAX_SECRET_BYTES)
                    .map_err(|e| {
                        format!("chart repository {}: passwordFile: {file} {e}", self.name)
                    })?
            }
            (None, None) => return Ok(None),
        };
        Ok(Some(value.trim().to_owned()))
    }
}

/// Where charts and bases may be fetched from.
#[derive(Clone, Debug, Default)]
pub struct Remotes {
    pub chart_repositories: Vec<ChartRepository>,
    /// `file://` git remotes are allowed (tests, local mirrors).
    pub file_remotes: FileRemotes,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FileRemotes {
    #[default]
    Refused,
    Allowed,
}

/// Reads `plugins.kubernetes`: its deploy targets and where charts come from.
pub(crate) fn from_settings(
    settings: &PluginSettings<'_>,
) -> Result<(Vec<DeployTarget>, Remotes), FieldError> {
    let written: Settings = settings.parse()?;
    let at = format!("{}.deployTargets", settings.at());
    targets::check_names(&written.deploy_targets, &at)?;
    for (i, t) in written.deploy_targets.iter().enumerate() {
        t.check(&format!("{at}[{i}]"))?;
    }
    let at = format!("{}.chartRepositories", settings.at());
    targets::check_names(&written.chart_repositories, &at)?;
    for (i, r) in written.chart_repositories.iter().enumerate() {
        r.check(&format!("{at}[{i}]"))?;
    }
    let remotes = Remotes {
        chart_repositories: written.chart_repositories,
        file_remotes: if written.allow_file_remotes {
            FileRemotes::Allowed
        } else {
            FileRemotes::Refused
        },
    };
    Ok((written.deploy_targets, remotes))
}

/// Where a chart comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ChartSource {
    /// A configured chart repository.
    Repository(ChartRepository),
    /// An OCI registry (`oci://host/path`), the chart at `<path>/<name>`.
    Oci(String),
    /// A repository name, checked by no settings: gannet.yaml configures no chart repository,
    /// or `config check` runs without it. A stage fails saying it is not configured.
    Unchecked(String),
}

/// What a job fetches and renders.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    Chart {
        from: ChartSource,
        name: String,
        version: String,
    },
    GitChart {
        remote: String,
        git_ref: String,
        path: String,
    },
    /// The app's kustomization, some of whose bases or resources are remote.
    Kustomize { remotes: Vec<String> },
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Chart {
                from: ChartSource::Repository(r),
                name,
                version,
            } => write!(
                f,
                "chart {name} {version} from chart repository {} ({})",
                r.name,
                gannet_domain::report::redact_urls(&r.address)
            ),
            Self::Chart {
                from: ChartSource::Oci(registry),
                name,
                version,
            } => write!(f, "chart {name} {version} from {registry}"),
            Self::Chart {
                from: ChartSource::Unchecked(repo),
                name,
                version,
            } => write!(f, "chart {name} {version} from chart repository {repo}"),
            Self::GitChart {
                remote,
                git_ref,
                path,
            } => write!(f, "chart {path} from {remote} at {git_ref:?}"),
            Self::Kustomize { remotes } => {
                write!(f, "kustomization with remote bases {}", remotes.join(", "))
            }
        }
    }
}

fn in_config(field: &str, message: impl Into<String>) -> AppFileError {
    AppFileError::in_config(field, message.into())
}

impl Remotes {
    /// What the app renders from elsewhere, checked against these settings; `None` when its
    /// manifests are all in the repository. Without `files` (planning without a checkout) a
    /// kustomization's bases are not looked at.
    pub(crate) fn source(
        &self,
        files: Option<&AppFiles>,
        spec: &KubernetesSpec,
    ) -> Result<Option<Source>, AppFileError> {
        if let Some(chart) = &spec.input.helm_chart {
            let from_repo = !chart.repository.is_empty() || !chart.name.is_empty();
            if !chart.git_remote.is_empty() {
                if from_repo {
                    return Err(in_config(
                        "spec.input.helmChart.gitRemote",
                        "give a gitRemote (with ref and path) or a repository (with name and version), not both",
                    ));
                }
                self.git_remote(&chart.git_remote)
                    .map_err(|m| in_config("spec.input.helmChart.gitRemote", m))?;
                let path = chart.path.trim_start_matches("./");
                let climbs = path.split('/').any(|p| p == "..");
                if path.is_empty() || path.starts_with('/') || climbs {
                    return Err(in_config(
                        "spec.input.helmChart.path",
                        "names the chart's directory inside the git remote, relative to its root",
                    ));
                }
                if chart.git_ref.starts_with('-') {
                    return Err(in_config(
                        "spec.input.helmChart.ref",
                        "a branch, tag or commit, not an option",
                    ));
                }
                return Ok(Some(Source::GitChart {
                    remote: chart.git_remote.clone(),
                    git_ref: chart.git_ref.clone(),
                    path: path.to_owned(),
                }));
            }
            if from_repo {
                return self.chart(chart).map(Some);
            }
            return Ok(None);
        }
        let Some(files) = files else {
            return Ok(None);
        };
        let Some(remotes) = crate::render::kustomize_remotes(files)? else {
            return Ok(None);
        };
        if remotes.is_empty() {
            return Ok(None);
        }
        for (file, entry) in &remotes {
            self.git_remote(entry).map_err(|m| {
                in_config(
                    "spec.input.kustomizeVersion",
                    format!("{file}: the remote base {entry} {m}"),
                )
            })?;
        }
        Ok(Some(Source::Kustomize {
            remotes: remotes.into_iter().map(|(_, e)| e).collect(),
        }))
    }

    fn chart(&self, chart: &crate::spec::HelmChart) -> Result<Source, AppFileError> {
        let field = "spec.input.helmChart.repository";
        if chart.name.is_empty() || chart.name.starts_with('-') || chart.name.contains("..") {
            return Err(in_config(
                "spec.input.helmChart.name",
                "names the chart in its repository",
            ));
        }
        let version_ok = !chart.version.is_empty()
            && chart
                .version
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'));
        if !version_ok {
            return Err(in_config(
                "spec.input.helmChart.version",
                "is required: the chart's version (such as 1.2.3), so every stage renders the same chart",
            ));
        }
        let from = if let Some(rest) = chart.repository.strip_prefix("oci://") {
            targets::credentialed_url(&format!("https://{rest}"))
                .map_err(|why| in_config(field, format!("{:?}: {why}", chart.repository)))?;
            ChartSource::Oci(chart.repository.trim_end_matches('/').to_owned())
        } else if chart.repository.is_empty() {
            return Err(in_config(
                field,
                "names a chart repository configured in gannet.yaml (plugins.kubernetes.chartRepositories), or an oci:// registry",
            ));
        } else {
            let found = self
                .chart_repositories
                .iter()
                .find(|r| r.name == chart.repository);
            let Some(found) = found else {
                if self.chart_repositories.is_empty() {
                    return Ok(Source::Chart {
                        from: ChartSource::Unchecked(chart.repository.clone()),
                        name: chart.name.clone(),
                        version: chart.version.clone(),
                    });
                }
                let known: Vec<&str> = self
                    .chart_repositories
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect();
                return Err(in_config(
                    field,
                    format!(
                        "chart repository {:?} is not configured: add it to gannet.yaml under plugins.kubernetes.chartRepositories (configured: {})",
                        chart.repository,
                        if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                    ),
                ));
            };
            ChartSource::Repository(found.clone())
        };
        Ok(Source::Chart {
            from,
            name: chart.name.clone(),
            version: chart.version.clone(),
        })
    }

    /// Whether a job may fetch from the git remote `url`; why not.
    pub(crate) fn git_remote(&self, url: &str) -> Result<(), String> {
        let file_remotes = match self.file_remotes {
            FileRemotes::Allowed => targets::FileRemotes::Allowed,
            FileRemotes::Refused => targets::FileRemotes::Refused {
                setting: "plugins.kubernetes.allowFileRemotes",
            },
        };
        targets::git_remote(url, file_remotes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remotes(file_remotes: FileRemotes) -> Remotes {
        Remotes {
            chart_repositories: Vec::new(),
            file_remotes,
        }
    }

    #[test]
    fn git_remotes_are_https_ssh_or_loopback_http_and_file_only_when_allowed() {
        let refused = remotes(FileRemotes::Refused);
        for ok in [
            "https://github.com/org/repo.git",
            "git@github.com:pipe-cd/manifests.git",
            "ssh://git@example.com/org/repo.git",
            "http://127.0.0.1:9418/repo.git",
            "github.com/org/repo/base?ref=v1",
        ] {
            assert_eq!(refused.git_remote(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("http://example.com/repo.git", "loopback"),
            (
                "https://user:token@example.com/repo.git",
                "user name or password",
            ),
            ("ssh://git:pw@example.com/repo.git", "password"),
            ("file:///srv/repo.git", "allowFileRemotes"),
            ("--upload-pack=evil", "not a git remote"),
            ("/srv/repo.git", "must be an https://"),
        ] {
            let e = refused.git_remote(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        assert_eq!(
            remotes(FileRemotes::Allowed).git_remote("file:///srv/repo.git"),
            Ok(())
        );
    }

    fn settings(yaml: &str) -> Result<(Vec<DeployTarget>, Remotes), String> {
        let value: serde_json::Value = gannet_config::yaml::from_str(yaml).unwrap();
        let runtime = gannet_sdk::registry::RuntimeInfo::default();
        from_settings(&PluginSettings::new("plugins.kubernetes", &value, &runtime))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn chart_repositories_are_read_with_errors_naming_the_field() {
        let (_, r) = settings(
            "chartRepositories: [{name: internal, address: 'https://charts.example.com', username: u, passwordEnv: P}]",
        )
        .unwrap();
        assert_eq!(r.chart_repositories[0].name, "internal");
        for (yaml, want) in [
            ("chartRepositories: [{name: a, address: 'http://charts.example.com'}]", "plugins.kubernetes.chartRepositories[0].address:"),
            ("chartRepositories: [{name: a, address: 'https://x.example', password: hunter2}]", "plugins.kubernetes.chartRepositories[0].password: a password is never written"),
            ("chartRepositories: [{name: a, address: 'https://x.example'}, {name: a, address: 'https://y.example'}]", "plugins.kubernetes.chartRepositories"),
            ("chartRepositories: [{name: a, address: 'https://x.example', type: OCI}]", "chartRepositories[0].type"),
            ("chartRepositories: [{name: a, adress: 'https://x.example'}]", "adress"),
        ] {
            let e = settings(yaml).unwrap_err();
            assert!(e.contains(want), "{yaml}: {e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn a_chart_names_a_configured_repository_or_an_oci_registry_and_a_version() {
        let (_, r) =
            settings("chartRepositories: [{name: internal, address: 'http://127.0.0.1:1'}]")
                .unwrap();
        let spec = |chart: &str| -> KubernetesSpec {
            gannet_config::yaml::from_str(&format!("input:\n  helmChart: {chart}\n")).unwrap()
        };
        let got = r
            .source(
                None,
                &spec("{repository: internal, name: web, version: 0.1.0}"),
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            got.to_string(),
            "chart web 0.1.0 from chart repository internal (http://127.0.0.1:1)"
        );
        let oci = r
            .source(None, &spec("{repository: 'oci://ghcr.io/pipe-cd', name: chart/helloworld, version: v0.30.0}"))
            .unwrap();
        assert!(matches!(
            oci,
            Some(Source::Chart {
                from: ChartSource::Oci(_),
                ..
            })
        ));
        for (chart, field, why) in [
            (
                "{repository: other, name: web, version: 1.0.0}",
                "spec.input.helmChart.repository",
                "\"other\" is not configured",
            ),
            (
                "{repository: internal, name: web}",
                "spec.input.helmChart.version",
                "is required",
            ),
            (
                "{gitRemote: 'git@github.com:o/r.git', path: ../x}",
                "spec.input.helmChart.path",
                "inside the git remote",
            ),
            (
                "{gitRemote: 'https://u:p@example.com/r.git', path: c}",
                "spec.input.helmChart.gitRemote",
                "user name or password",
            ),
        ] {
            let e = r.source(None, &spec(chart)).unwrap_err();
            assert_eq!(e.named_by, field, "{chart}: {e}");
            assert!(e.to_string().contains(why), "{chart}: {e}");
        }
    }
}
