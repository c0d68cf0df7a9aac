//! What `gannet plan-preview` prints of a preview: the list's table, and one preview as its
//! facts, its apps' table, then each app's section with the platform's own preview.

use std::time::{Duration, UNIX_EPOCH};

use gannet_domain::duration::Millis;
use gannet_domain::preview::{AppPreview, Preview, PreviewStatus};

use crate::render::{elapsed, table_text, Columns};

/// `2026-11-28T13:05:00Z`.
fn at(t: Millis) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(t.0)).to_string()
}

/// How long ago `t` was, as `3m05s`.
fn age(t: Millis, now: Millis) -> String {
    elapsed(Duration::from_millis(now.0.saturating_sub(t.0)))
}

fn or_dash(text: &str) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        text.to_owned()
    }
}

pub(crate) fn list_text(previews: &[Preview], columns: Columns, now: Millis) -> String {
    let rows: Vec<Vec<String>> = previews
        .iter()
        .map(|p| {
            vec![
                p.id.to_string(),
                p.repo.to_string(),
                p.pr.map_or_else(|| "-".to_owned(), |n| format!("#{n}")),
                p.head.short().to_owned(),
                p.status.as_str().to_owned(),
                p.result.as_str().to_owned(),
                age(p.created_at, now),
                or_dash(&columns.fit(&p.reason, 60)),
            ]
        })
        .collect();
    table_text(
        &[
            "ID", "REPO", "PR", "HEAD", "STATUS", "RESULT", "AGE", "REASON",
        ],
        &rows,
    )
}

/// Where the reads came from: the preview credentials, or the files alone.
fn credentials(with: bool) -> &'static str {
    if with {
        "read with the deploy target's planPreview credentials"
    } else {
        "not read from the platform: the app's files are compared"
    }
}

pub(crate) fn show_text(p: &Preview, columns: Columns, now: Millis) -> String {
    let by = match p.pr {
        Some(n) if p.fork => format!("pull request #{n} by {}, from a fork", p.author),
        Some(n) => format!("pull request #{n} by {}", p.author),
        None => format!("asked by {} (no pull request)", p.author),
    };
    let mut out = format!(
        "Plan preview: {}\nRepository:   {}, {by}\nHead:         {} into {}",
        p.id, p.repo, p.head, p.base_ref
    );
    if let (Some(base), Some(merge_base)) = (&p.base, &p.merge_base) {
        out.push_str(&format!(
            " (at {}, merge base {})",
            base.short(),
            merge_base.short()
        ));
    }
    out.push_str(&format!(
        "\nStatus:       {}, result {}\n",
        p.status.as_str(),
        p.result.as_str()
    ));
    if !p.reason.is_empty() {
        out.push_str(&format!("Reason:       {}\n", p.reason));
    }
    out.push_str(&format!(
        "Credentials:  {}\nCreated:      {} ({} ago)\n",
        if p.credentials {
            "the deploy targets' planPreview credentials"
        } else {
            "none: every app's files are compared, the platform is not read"
        },
        at(p.created_at),
        age(p.created_at, now)
    ));
    if p.apps.is_empty() {
        out.push_str(match p.status {
            PreviewStatus::Queued => "\nNo app selected yet: the preview has not started.\n",
            _ => "\nNo app is touched by the changes.\n",
        });
        return out;
    }
    let rows: Vec<Vec<String>> = p
        .apps
        .iter()
        .map(|a| {
            vec![
                a.name.clone(),
                or_dash(&a.kind),
                a.result.as_str().to_owned(),
                or_dash(&columns.fit(&a.summary, 50)),
                or_dash(&columns.fit(&a.pipeline, 40)),
            ]
        })
        .collect();
    out.push('\n');
    out.push_str(&table_text(
        &["APP", "KIND", "RESULT", "SUMMARY", "PIPELINE"],
        &rows,
    ));
    for a in &p.apps {
        out.push_str(&app_details(a));
    }
    out
}

/// One app's section: what it is, why it is previewed, and the platform's own preview.
fn app_details(a: &AppPreview) -> String {
    let kind = if a.kind.is_empty() {
        String::new()
    } else {
        format!(" ({})", a.kind)
    };
    let mut out = format!(
        "\n== {}{kind}: {}\nApp:          {}\nSummary:      {}\nPipeline:     {}\nWhy:          {}\nCredentials:  {}\n",
        a.name,
        a.result.as_str(),
        a.app,
        or_dash(&a.summary),
        or_dash(&a.pipeline),
        or_dash(&a.why),
        credentials(a.credentials),
    );
    if !a.details.trim().is_empty() {
        out.push('\n');
        for line in a.details.trim_end().lines() {
            match line.trim_end() {
                "" => out.push('\n'),
                text => out.push_str(&format!("    {text}\n")),
            }
        }
    }
    out
}
