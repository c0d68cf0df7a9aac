//! How errors read in logs, stage logs and dead-letter reasons: one line, the error and its
//! causes.

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
}
