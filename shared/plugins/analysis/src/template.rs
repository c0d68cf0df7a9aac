//! The placeholders of a metric query, as PipeCD documents them (Go template syntax, values
//! only): `{{ .Variant.Name }}` (`canary`, `baseline` or `primary`), `{{ .VariantCustomArgs.x }}`
//! (from the metric's `canaryArgs`, `baselineArgs` or `primaryArgs`, as the variant is) and
//! `{{ .App.Name }}`. Anything else between `{{` and `}}` is an error naming it, found when
//! the config is checked, not when the query runs.

use std::collections::BTreeMap;

/// The variant a query is rendered for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    Canary,
    Baseline,
    Primary,
}

impl Variant {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Canary => "canary",
            Self::Baseline => "baseline",
            Self::Primary => "primary",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TemplateError {
    #[error("a {{{{ is not closed by }}}}")]
    Unclosed,
    #[error("{{{{ {0} }}}} is not a placeholder gannet fills (it fills .Variant.Name, .VariantCustomArgs.<name> and .App.Name)")]
    Unknown(String),
    #[error("{{{{ .VariantCustomArgs.{0} }}}} has no value: add {0} to the variant's args")]
    MissingArg(String),
}

/// `query` with its placeholders filled for `variant`, its `args` and the app `app_name`.
pub(crate) fn render(
    query: &str,
    variant: Variant,
    args: &BTreeMap<String, String>,
    app_name: &str,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(query.len());
    let mut rest = query;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or(TemplateError::Unclosed)?;
        let inner = after[..end].trim_matches(|c: char| c.is_whitespace() || c == '-');
        let value = match inner {
            ".Variant.Name" => variant.name(),
            ".App.Name" => app_name,
            _ => match inner.strip_prefix(".VariantCustomArgs.") {
                Some(name) => args
                    .get(name)
                    .map(String::as_str)
                    .ok_or_else(|| TemplateError::MissingArg(name.to_owned()))?,
                None => return Err(TemplateError::Unknown(inner.to_owned())),
            },
        };
        out.push_str(value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn fills_the_placeholders_pipecd_documents() {
        let q = r#"rate(http_requests_total{job="foo-{{ .Variant.Name }}", app="{{.App.Name}}", x="{{ .VariantCustomArgs.job }}"}[5m])"#;
        assert_eq!(
            render(q, Variant::Canary, &args(&[("job", "baz")]), "web").unwrap(),
            r#"rate(http_requests_total{job="foo-canary", app="web", x="baz"}[5m])"#
        );
        assert_eq!(
            render("up", Variant::Baseline, &args(&[]), "web").unwrap(),
            "up"
        );
    }

    #[test]
    fn refuses_what_it_cannot_fill() {
        let none = args(&[]);
        assert_eq!(
            render("a{{ .K8s.Namespace }}", Variant::Primary, &none, "w"),
            Err(TemplateError::Unknown(".K8s.Namespace".into()))
        );
        assert_eq!(
            render("a{{ .Variant.Name ", Variant::Primary, &none, "w"),
            Err(TemplateError::Unclosed)
        );
        assert_eq!(
            render("{{ .VariantCustomArgs.job }}", Variant::Canary, &none, "w"),
            Err(TemplateError::MissingArg("job".into()))
        );
    }
}
