//! Deploy targets, for every platform: each plugin lists its own (`plugins.<plugin>.deployTargets`
//! in the controller config, read through [`crate::registry::PluginSettings::deploy_targets`]),
//! and an app deploys to the one its config names (`spec.deployTargets` of an `Application`)
//! or to the only one there is ([`pick`]). What a target holds beyond its name (an AWS region,
//! a kubeconfig, a GCP project) and how that is checked belong to the platform's plugin.

use crate::plugin::StepError;
use gannet_config::typed::FieldError;
use gannet_config::AppConfig;

/// Whether a job may fetch from the git remote `url`, and why not: `https://` (no credentials
/// in the URL), plain `http://` to a loopback host, `ssh://` (no password), `git@host:path`,
/// the `github.com/org/repo` shorthand, or `file:///abs/path` when `file_remotes` names the
/// setting that allowed it (`None`: refused, naming `setting`, which allows them).
pub fn git_remote(url: &str, file_remotes: FileRemotes<'_>) -> Result<(), String> {
    if url.is_empty() || url.starts_with('-') || url.contains(char::is_whitespace) {
        return Err("is not a git remote".into());
    }
    if url.contains(|c: char| c.is_control() || c == '\\') {
        return Err("holds a control character or a backslash; write the URL plainly".into());
    }
    if let Some(rest) = url.strip_prefix("file://") {
        return match file_remotes {
            FileRemotes::Allowed if rest.starts_with('/') => Ok(()),
            FileRemotes::Allowed => Err("a file:// remote names an absolute path".into()),
            FileRemotes::Refused { setting } => Err(format!(
                "is a file:// remote, which reads repositories on gannet's own machine: allowed only with {setting} (for tests and local mirrors)"
            )),
        };
    }
    if url.starts_with("https://") || url.starts_with("http://") {
        return credentialed_url(url)
            .map(|_| ())
            .map_err(|why| why.to_string());
    }
    if let Some(rest) = url.strip_prefix("ssh://") {
        let authority = rest.split('/').next().unwrap_or_default();
        let user = authority.rsplit_once('@').map_or("", |(u, _)| u);
        if user.contains(':') {
            return Err("has a password in it; git over ssh authenticates with a key".into());
        }
        return Ok(());
    }
    // scp-like `git@host:path`, and kustomize's `github.com/org/repo` (fetched by https).
    let scp = url
        .split_once('@')
        .is_some_and(|(user, rest)| !user.contains([':', '/']) && rest.contains(':'));
    let shorthand = ["github.com/", "gitlab.com/", "bitbucket.org/"]
        .iter()
        .any(|p| url.starts_with(p));
    if scp || shorthand {
        return Ok(());
    }
    Err(
        "must be an https:// URL, ssh:// or git@host:path (plain http:// only to a loopback host)"
            .into(),
    )
}

/// Whether `file://` git remotes are allowed ([`git_remote`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileRemotes<'a> {
    Allowed,
    /// Refused; `setting` is the one that would allow them.
    Refused {
        setting: &'a str,
    },
}

/// Why gannet may not send credentials to a URL.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UnsafeUrl {
    #[error("is not a URL ({0})")]
    NotAUrl(String),
    #[error("holds a backslash, a space or a control character; write the URL plainly")]
    Ambiguous,
    #[error("has a user name or password in it (`user@host`); give credentials in their own setting, never in the URL")]
    Userinfo,
    #[error("has a #fragment; leave it out")]
    Fragment,
    #[error("must be an https:// URL (plain http:// only to a loopback host: 127.0.0.1, [::1] or localhost), so no credential crosses a network unencrypted")]
    Unencrypted,
}

/// The URL `text`, when gannet may send credentials to it: `https://`, or plain `http://` to a
/// loopback host only (127.0.0.0/8, `[::1]`, `localhost`), so no secret crosses a network
/// unencrypted. It is parsed as the HTTP clients parse it (the `url` crate), so what is
/// checked is the host they connect to: `http://localhost:x@evil.example/` is a user name on
/// `evil.example`, refused like any user name or password in the URL.
pub fn credentialed_url(text: &str) -> Result<url::Url, UnsafeUrl> {
    // Where URL parsers disagree (`\` is `/` to some, part of the user name to others), or
    // where a URL was pasted with more than itself.
    if text.contains(|c: char| c == '\\' || c.is_whitespace() || c.is_control()) {
        return Err(UnsafeUrl::Ambiguous);
    }
    let url = url::Url::parse(text).map_err(|e| UnsafeUrl::NotAUrl(e.to_string()))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UnsafeUrl::Userinfo);
    }
    if url.fragment().is_some() {
        return Err(UnsafeUrl::Fragment);
    }
    match url.scheme() {
        "https" if url.host().is_some() => Ok(url),
        "http" if loopback_host(&url) => Ok(url),
        _ => Err(UnsafeUrl::Unencrypted),
    }
}

/// True when `url`'s host is this machine: 127.0.0.0/8, `[::1]` (or an IPv4-mapped loopback
/// address), or `localhost` exactly.
pub fn loopback_host(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// A deploy target has a name, unique among its plugin's targets.
pub trait Named {
    fn name(&self) -> &str;
}

/// Every target of the list at `at` has a name, and no name is given twice.
pub fn check_names<T: Named>(targets: &[T], at: &str) -> Result<(), FieldError> {
    for (i, t) in targets.iter().enumerate() {
        let name = t.name();
        let error = |message: String| FieldError {
            path: format!("{at}[{i}].name"),
            message,
        };
        if name.trim().is_empty() {
            return Err(error("must not be empty".into()));
        }
        if targets[..i].iter().any(|other| other.name() == name) {
            return Err(error(format!("{name} is listed twice")));
        }
    }
    Ok(())
}

/// How a platform names itself in the messages: `("ECS", "ecs", "ECSApp")`.
#[derive(Clone, Copy, Debug)]
pub struct Platform {
    /// As people write it: `ECS`, `Lambda`.
    pub title: &'static str,
    /// The key under `plugins:` in gannet.yaml: `ecs`, `lambda`.
    pub key: &'static str,
    /// The app kind that cannot name a target: `ECSApp`, `LambdaApp`.
    pub kind: &'static str,
}

/// The target of `targets` that `app` uses; a permanent step error saying how to fix the
/// config when there is none, or more than one to choose from.
pub fn pick<'a, T: Named>(
    platform: Platform,
    targets: &'a [T],
    app: &AppConfig,
) -> Result<&'a T, StepError> {
    let Platform { title, key, kind } = platform;
    let names: Vec<&str> = targets.iter().map(Named::name).collect();
    let fail = |m: String| Err(StepError::permanent(m));
    if let Some(wanted) = app.deploy_targets().first() {
        return match targets.iter().find(|t| t.name() == *wanted) {
            Some(t) => Ok(t),
            None => fail(format!(
                "spec.deployTargets: no {title} deploy target named {wanted:?} in the controller config (it has: {})",
                names.join(", ")
            )),
        };
    }
    match targets {
        [one] => Ok(one),
        [] => fail(format!(
            "no {title} deploy target is configured: add one under plugins.{key}.deployTargets in gannet.yaml"
        )),
        _ => fail(format!(
            "the controller config has {} {title} deploy targets ({}); a{} {kind} cannot name one, so keep one, or use kind: Application with spec.deployTargets",
            names.len(),
            names.join(", "),
            if kind.starts_with(['A', 'E', 'I', 'O', 'U']) { "n" } else { "" },
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_go_over_https_or_to_loopback_only() {
        let accepted = [
            "https://example.com/",
            "https://run.googleapis.com",
            "HTTPS://Example.COM/v1",
            "http://127.0.0.1:9090/",
            "http://127.1.2.3/",
            "http://localhost:8080/api",
            "http://LOCALHOST/",
            "HTTP://127.0.0.1/",
            "http://[::1]:80/",
            "http://[::1]/",
            "http://127.1/",
        ];
        for url in accepted {
            assert_eq!(credentialed_url(url).map(|_| ()), Ok(()), "{url}");
        }
        let refused = [
            ("http://localhost:x@evil.example/", UnsafeUrl::Userinfo),
            ("HTTP://localhost:x@evil.example/", UnsafeUrl::Userinfo),
            ("http://127.0.0.1@evil.example/", UnsafeUrl::Userinfo),
            ("https://user:pw@example.com/", UnsafeUrl::Userinfo),
            ("http://@evil.example:80@localhost/", UnsafeUrl::Userinfo),
            ("http://localhost.evil.example/", UnsafeUrl::Unencrypted),
            ("http://localhost./", UnsafeUrl::Unencrypted),
            ("http://127.0.0.1.nip.io/", UnsafeUrl::Unencrypted),
            ("http://evil.example#@localhost/", UnsafeUrl::Fragment),
            ("http://evil.example/#@localhost", UnsafeUrl::Fragment),
            ("http://evil.example\\@localhost", UnsafeUrl::Ambiguous),
            ("http://localhost\\@evil.example/", UnsafeUrl::Ambiguous),
            ("http://localhost /", UnsafeUrl::Ambiguous),
            ("http://localhost\t.evil.example/", UnsafeUrl::Ambiguous),
            ("http://evil.example/", UnsafeUrl::Unencrypted),
            ("HTTP://evil.example/", UnsafeUrl::Unencrypted),
            ("http://10.0.0.1:6443/", UnsafeUrl::Unencrypted),
            ("http://0.0.0.0/", UnsafeUrl::Unencrypted),
            ("http://[::ffff:8.8.8.8]/", UnsafeUrl::Unencrypted),
            ("http://[::2]/", UnsafeUrl::Unencrypted),
            ("http://evil.example?localhost", UnsafeUrl::Unencrypted),
            ("http://evil.example:80/localhost", UnsafeUrl::Unencrypted),
            ("ftp://127.0.0.1/", UnsafeUrl::Unencrypted),
            ("file:///etc/passwd", UnsafeUrl::Unencrypted),
        ];
        for (url, why) in refused {
            assert_eq!(credentialed_url(url).map(|_| ()), Err(why), "{url}");
        }
        for url in ["127.0.0.1:9090", "localhost", "", "http://"] {
            assert!(
                matches!(credentialed_url(url), Err(UnsafeUrl::NotAUrl(_))),
                "{url}"
            );
        }
        let checked = credentialed_url("http://127.1:9090/x").expect("loopback");
        assert_eq!(
            checked.host_str(),
            Some("127.0.0.1"),
            "the host the client connects to"
        );
    }
}
