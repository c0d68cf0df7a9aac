//! A remote's credentials, kept out of git's command line. Any user of the machine can read
//! every process's arguments (`/proc/<pid>/cmdline`), so a URL such as
//! `https://x-access-token:…@github.com/o/r.git` given to `git fetch` shows its token to all of
//! them on every fetch. gannet gives git the URL without its user part, and the user name and
//! password through the environment only (readable by the same user alone): a credential
//! helper, set through `GIT_CONFIG_*` variables, prints them from two variables. The helper's
//! own text (which is a shell's argument) names the variables, never their values.

use super::command::Git;

/// The helper git runs for `get` (and also for `store` and `erase`, which it ignores): a shell
/// function that prints the user name and password from the environment.
const HELPER: &str = "!f() { test \"$1\" = get || return 0; printf 'username=%s\\npassword=%s\\n' \"$GANNET_GIT_USERNAME\" \"$GANNET_GIT_PASSWORD\"; }; f";

/// A remote URL as git is given it, and the credentials taken out of it.
pub(crate) struct Remote {
    url: String,
    credentials: Option<Credentials>,
}

struct Credentials {
    username: String,
    password: String,
}

impl Remote {
    /// Takes the user part out of an `http://` or `https://` URL (`user:password@`, or a token
    /// alone as the user); other URLs (ssh, file, a path) are kept whole.
    pub(crate) fn parse(url: &str) -> Self {
        let whole = || Self {
            url: url.to_owned(),
            credentials: None,
        };
        let Some((scheme, rest)) = url.split_once("://") else {
            return whole();
        };
        if !(scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https")) {
            return whole();
        }
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(authority_end);
        let Some((userinfo, host)) = authority.rsplit_once('@') else {
            return whole();
        };
        let (username, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
        Self {
            url: format!("{scheme}://{host}{path}"),
            credentials: Some(Credentials {
                username: percent_decoded(username),
                password: percent_decoded(password),
            }),
        }
    }

    /// The URL to give git: no credentials in it.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// `git` with the credentials in its environment, for the helper to hand over: helpers
    /// configured elsewhere are cleared first (so none is asked, and none stores ours).
    pub(crate) fn authenticate(&self, git: Git) -> Git {
        let Some(c) = &self.credentials else {
            return git;
        };
        git.env("GIT_CONFIG_COUNT", "2")
            .env("GIT_CONFIG_KEY_0", "credential.helper")
            .env("GIT_CONFIG_VALUE_0", "")
            .env("GIT_CONFIG_KEY_1", "credential.helper")
            .env("GIT_CONFIG_VALUE_1", HELPER)
            .env("GANNET_GIT_USERNAME", c.username.as_str())
            .env("GANNET_GIT_PASSWORD", c.password.as_str())
    }
}

/// `%XX` escapes decoded, as git decodes a URL's user part; a broken escape is kept as written.
fn percent_decoded(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests;
