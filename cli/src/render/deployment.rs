//! One deployment as `deployments show` prints it: the commit (author, message, link), who
//! triggered it, when it ran, each stage with its start, duration and key option (who
//! approved), how to approve a stage that waits, then each stage's details.

use std::fmt::Write as _;
use std::time::SystemTime;

use gannet_controller::{DeploymentView, StageView};
use gannet_sdk::presentation::Detail;

use super::{elapsed, or_dash, shorten, stage_elapsed, table_text, Columns};

pub fn deployment(d: &DeploymentView, columns: Columns) -> String {
    let now = SystemTime::now();
    let mut out = String::new();
    let mut line = |text: String| {
        out.push_str(&text);
        out.push('\n');
    };
    let commit = d.commit.get(..12).unwrap_or(&d.commit);
    line(format!("Deployment {} of {} at {commit}", d.id, d.app));
    line(format!(
        "  status:   {} {}",
        d.status.as_str(),
        d.status_reason
    ));
    if !d.summary.is_empty() {
        line(format!("  summary:  {}", d.summary));
    }
    let author = match d.commit_author.as_str() {
        "" => String::new(),
        author => format!(" by {author}"),
    };
    let message = d.commit_message.lines().next().unwrap_or("");
    line(format!("  commit:   {commit}{author}: {message}"));
    if let Some(url) = &d.commit_url {
        line(format!("  link:     {url}"));
    }
    let by = match (d.commander.as_str(), d.pushed_by.as_str()) {
        ("", "") => String::new(),
        ("", pusher) => format!(", pushed by {pusher}"),
        (commander, _) => format!(" by {commander}"),
    };
    line(format!("  trigger:  {}{by}", d.trigger.as_str()));
    if let Some(of) = &d.rollback_of {
        line(format!("  rollback: to the commit of deployment {of}"));
    }
    if let Some(skip) = &d.gate_skip {
        line(format!(
            "  gate:     approval skipped by {}: {}",
            skip.by, skip.reason
        ));
    }
    if let Some(b) = &d.blocked_by {
        line(format!("  waiting:  for deployment {b}"));
    }
    line(format!("  created:  {}", d.created_at));
    let since = humantime::parse_rfc3339(&d.created_at).ok();
    match d.completed_at.as_deref() {
        Some(at) => {
            let took = humantime::parse_rfc3339(at)
                .ok()
                .zip(since)
                .and_then(|(end, start)| end.duration_since(start).ok())
                .map(|t| format!(", took {}", elapsed(t)))
                .unwrap_or_default();
            line(format!("  ended:    {at}{took}"));
        }
        None => {
            if let Some(t) = since.and_then(|start| now.duration_since(start).ok()) {
                line(format!("  running:  for {}", elapsed(t)));
            }
        }
    }
    let shown = |s: &&StageView| s.visible || columns == Columns::Wide;
    let rows: Vec<Vec<String>> = d
        .stages
        .iter()
        .filter(shown)
        .map(|s| {
            let mut row = vec![s.id.to_string(), s.name.clone()];
            if columns == Columns::Wide {
                row.push(s.desc.clone());
            }
            row.extend([
                s.status.as_str().to_owned(),
                or_dash(s.started_at.as_deref().unwrap_or("")),
                stage_elapsed(s, now).map(elapsed).unwrap_or_default(),
                key_option(s),
                columns.fit(&s.status_reason, 60),
            ]);
            row
        })
        .collect();
    if !rows.is_empty() {
        let header: &[&str] = match columns {
            Columns::Normal => &[
                "STAGE", "NAME", "STATUS", "STARTED", "TOOK", "SUMMARY", "REASON",
            ],
            Columns::Wide => &[
                "STAGE", "NAME", "DESC", "STATUS", "STARTED", "TOOK", "SUMMARY", "REASON",
            ],
        };
        out.push('\n');
        out.push_str(&table_text(header, &rows));
    }
    for s in d.stages.iter().filter(|s| s.presentation.approvable) {
        let option = match s.presentation.summary.as_str() {
            "" => String::new(),
            summary => format!(" ({summary})"),
        };
        let _ = writeln!(out, "\n{}{option}", approve_hint(d, s));
    }
    for s in d.stages.iter().filter(shown) {
        for detail in &s.presentation.details {
            out.push('\n');
            out.push_str(&detail_text(s.id.as_str(), detail));
        }
    }
    out
}

/// The stage's key option as its plugin summarises it, and who approved it.
fn key_option(s: &StageView) -> String {
    let p = &s.presentation;
    match (p.summary.as_str(), p.approved_by.as_slice()) {
        (summary, []) => summary.to_owned(),
        ("", by) => format!("approved by {}", by.join(", ")),
        (summary, by) => format!("{summary}; approved by {}", by.join(", ")),
    }
}

/// How to approve stage `s` of `d`, which waits for approval.
pub fn approve_hint(d: &DeploymentView, s: &StageView) -> String {
    format!(
        "waiting for approval: gannet approve {} --stage {}",
        d.id, s.id
    )
}

/// One of a stage's details as `deployments show` prints it: a table, or
/// resources one line each (`+` create, `~` update, `-` destroy, `-/+` replace) with a line per
/// changed attribute. Generic: whatever the stage's plugin, the same shapes print the same way.
pub fn detail_text(stage: &str, detail: &Detail) -> String {
    match detail {
        Detail::Table {
            title,
            columns,
            rows,
        } => {
            let header: Vec<&str> = columns.iter().map(String::as_str).collect();
            let rows: Vec<Vec<String>> = rows
                .iter()
                .map(|r| r.iter().map(|c| shorten(c, 60)).collect())
                .collect();
            format!("{title} of stage {stage}:\n{}", table_text(&header, &rows))
        }
        Detail::Resources {
            title,
            summary,
            items,
            omitted,
        } => {
            let mut out = format!("{title} of stage {stage}: {summary}\n");
            for c in items {
                out.push_str(&format!(
                    "  {} {} ({})\n",
                    c.sign(),
                    c.address,
                    c.actions.join(", ")
                ));
                for a in &c.attributes {
                    if a.before.is_empty() && a.after.is_empty() {
                        out.push_str(&format!("      {}\n", a.name));
                    } else {
                        out.push_str(&format!("      {}: {} -> {}\n", a.name, a.before, a.after));
                    }
                }
            }
            if *omitted > 0 {
                out.push_str(&format!("  … and {omitted} more (not kept)\n"));
            }
            out
        }
    }
}
