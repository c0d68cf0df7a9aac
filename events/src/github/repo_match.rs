//! Whether a repository named in a webhook delivery is one the controller config lists.

/// Whether the pushed repository (`repo_full_name`, `clone_url` from the payload) is the one
/// configured as `configured_github` (`owner/name`) or `configured_url` (any clone URL).
///
/// Owner and name compare without regard to case, as GitHub treats them. URLs compare by host
/// and path, so `https://github.com/o/r.git`, `git@github.com:o/r.git`,
/// `ssh://git@github.com/o/r` and `https://github.com/o/r` are all the same repository.
/// A repository configured by neither matches nothing.
pub fn repo_matches(
    repo_full_name: &str,
    clone_url: &str,
    configured_github: Option<&str>,
    configured_url: Option<&str>,
) -> bool {
    let by_name = configured_github.is_some_and(|name| {
        let name = name.trim().trim_end_matches(".git");
        !name.is_empty() && name.eq_ignore_ascii_case(repo_full_name.trim())
    });
    let by_url = configured_url.is_some_and(|url| {
        let (configured, pushed) = (url_key(url), url_key(clone_url));
        configured.is_some() && configured == pushed
    });
    by_name || by_url
}

/// `host/path` in lower case, without scheme, user, port, trailing `/` or `.git`; `None` when
/// no path is left.
fn url_key(url: &str) -> Option<String> {
    let url = url.trim();
    let (host, path) = match url.split_once("://") {
        Some((_scheme, rest)) => {
            let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            let host = host.split_once(':').map_or(host, |(h, _port)| h);
            (host, path)
        }
        // scp-like `user@host:path`; a `/` before the `:` makes it a local path instead.
        None => match url.split_once(':') {
            Some((user_host, path)) if !user_host.contains('/') => {
                let host = user_host.rsplit_once('@').map_or(user_host, |(_, h)| h);
                (host, path)
            }
            _ => ("", url),
        },
    };
    let path = path.trim_matches('/');
    let path = path
        .strip_suffix(".git")
        .unwrap_or(path)
        .trim_end_matches('/');
    if path.is_empty() {
        return None;
    }
    Some(format!("{host}/{path}").to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: &str = "Codertocat/Hello-World";
    const CLONE: &str = "https://github.com/Codertocat/Hello-World.git";

    fn check(github: Option<&str>, url: Option<&str>, want: bool) {
        assert_eq!(
            repo_matches(NAME, CLONE, github, url),
            want,
            "github {github:?}, url {url:?}"
        );
    }

    #[test]
    fn by_owner_and_name() {
        check(Some("Codertocat/Hello-World"), None, true);
        check(Some("codertocat/hello-world"), None, true);
        check(Some(" codertocat/hello-world.git "), None, true);
        check(Some("codertocat/hello"), None, false);
        check(Some("other/Hello-World"), None, false);
        check(Some(""), None, false);
        check(None, None, false);
    }

    #[test]
    fn by_url_in_any_spelling() {
        for url in [
            "https://github.com/Codertocat/Hello-World.git",
            "https://github.com/codertocat/hello-world",
            "https://github.com/Codertocat/Hello-World/",
            "http://github.com/Codertocat/Hello-World",
            "git@github.com:Codertocat/Hello-World.git",
            "ssh://git@github.com/Codertocat/Hello-World.git",
            "ssh://git@github.com:22/Codertocat/Hello-World",
            "git://github.com/Codertocat/Hello-World.git",
            "https://token@github.com/Codertocat/Hello-World.git",
        ] {
            check(None, Some(url), true);
        }
        for url in [
            "https://github.com/Codertocat/Hello-World-2.git",
            "https://gitlab.com/Codertocat/Hello-World.git",
            "git@github.com:Codertocat/Other.git",
            "https://github.com/",
            "",
        ] {
            check(None, Some(url), false);
        }
    }

    #[test]
    fn either_configured_name_is_enough() {
        check(
            Some("other/repo"),
            Some("git@github.com:Codertocat/Hello-World"),
            true,
        );
        check(
            Some("Codertocat/Hello-World"),
            Some("https://example.com/x.git"),
            true,
        );
        check(Some("other/repo"), Some("https://example.com/x.git"), false);
    }

    #[test]
    fn local_paths_and_file_urls_agree() {
        assert_eq!(url_key("/srv/git/app.git"), url_key("file:///srv/git/app"));
        assert_eq!(url_key("github.com"), Some("/github.com".to_owned()));
        assert_eq!(url_key("https://github.com"), None);
    }
}
