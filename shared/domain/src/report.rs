//! How errors read in logs, stage logs and dead-letter reasons: one line, the error and its
//! causes, with the credentials of any URL in them hidden.

/// `err` and all its sources, `: `-joined. A source whose text the line already ends with
/// (an error that repeats its cause) is not written twice.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// `text` cut to `max` characters, with `…` marking the cut: for quoting untrusted or long text
/// (a provider's answer, a request's field) in a message.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// The longest quoted value an error message keeps.
const MAX_QUOTE: usize = 60;

/// `message` with every quoted value (`"…"`, as serde quotes what it could not read) cut at
/// its first line break and to [`MAX_QUOTE`] characters, so an error about a file never
/// carries the file: a private key read as one long string shows its first line at most.
pub fn bound_quotes(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(1024));
    let mut chars = message.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c != '"' {
            continue;
        }
        // Inside a quoted value, up to the closing quote (escapes are two characters).
        let mut kept = 0;
        let mut cut = false;
        while let Some(c) = chars.next() {
            if c == '"' {
                if cut {
                    out.push('…');
                }
                out.push('"');
                break;
            }
            let escaped = (c == '\\').then(|| chars.next()).flatten();
            let line_break = matches!(escaped, Some('n' | 'r')) || c == '\n';
            if line_break || kept >= MAX_QUOTE {
                cut = true;
            }
            if !cut {
                out.push(c);
                if let Some(e) = escaped {
                    out.push(e);
                }
                kept += 1;
            }
        }
    }
    out
}

/// `text` with the credentials of every URL in it hidden: the user and password before `@`
/// (`https://x-access-token:ghp_…@github.com/o/r` → `https://***@github.com/o/r`) and the
/// query string (`?token=…` → `?***`). For URLs that may end up in logs, errors or answers.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        // The URL runs to the next space or quote.
        let end = after
            .find(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | '`' | '>' | ')'))
            .unwrap_or(after.len());
        let (url, tail) = after.split_at(end);
        let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
        let (authority, path) = url.split_at(authority_end);
        match authority.rfind('@') {
            Some(userinfo) => {
                out.push_str("***");
                out.push_str(&authority[userinfo..]);
            }
            None => out.push_str(authority),
        }
        match path.find('?') {
            Some(query) => {
                out.push_str(&path[..=query]);
                out.push_str("***");
            }
            None => out.push_str(path),
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct E {
        text: &'static str,
        #[source]
        source: Option<Box<E>>,
    }

    fn e(text: &'static str, source: Option<E>) -> E {
        E {
            text,
            source: source.map(Box::new),
        }
    }

    #[test]
    fn chains_causes_once() {
        let err = e(
            "saving deployment d-1",
            Some(e("store unavailable", Some(e("disk full", None)))),
        );
        assert_eq!(
            error_chain(&err),
            "saving deployment d-1: store unavailable: disk full"
        );
        let repeats = e("store unavailable: disk full", Some(e("disk full", None)));
        assert_eq!(error_chain(&repeats), "store unavailable: disk full");
    }

    #[test]
    fn urls_lose_their_credentials() {
        let cases = [
            (
                "`git fetch --quiet -- https://x-access-token:ghp_secret@github.com/o/r.git` exited with 128: fatal: unable to access 'https://x-access-token:ghp_secret@github.com/o/r.git/': 403",
                "`git fetch --quiet -- https://***@github.com/o/r.git` exited with 128: fatal: unable to access 'https://***@github.com/o/r.git/': 403",
            ),
            (
                "error sending request for url (https://hooks.example.com/x?token=abc&b=1)",
                "error sending request for url (https://hooks.example.com/x?***)",
            ),
            ("ssh://git@example.com:22/r", "ssh://***@example.com:22/r"),
            ("no url here", "no url here"),
            ("http://127.0.0.1:7070/api", "http://127.0.0.1:7070/api"),
            ("a@b.c https://x.y/p", "a@b.c https://x.y/p"),
        ];
        for (text, want) in cases {
            assert_eq!(redact_urls(text), want);
        }
    }

    #[test]
    fn quoted_values_are_cut_at_a_line_break_and_a_width() {
        let key = format!(
            "invalid type: string {:?}, expected struct Document",
            format!("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA{}\n-----END OPENSSH PRIVATE KEY-----", "A".repeat(400))
        );
        assert_eq!(
            bound_quotes(&key),
            "invalid type: string \"-----BEGIN OPENSSH PRIVATE KEY-----…\", expected struct Document"
        );
        let long = format!("unknown variant \"{}\"", "x".repeat(100));
        assert_eq!(
            bound_quotes(&long),
            format!("unknown variant \"{}…\"", "x".repeat(60))
        );
        assert_eq!(bound_quotes("no quotes"), "no quotes");
        assert_eq!(bound_quotes("a \"b\\\"c\" d"), "a \"b\\\"c\" d");
    }
}
