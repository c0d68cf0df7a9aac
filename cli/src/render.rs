//! Human output: tables for lists (`-o wide` adds columns), an app's drift (each field with
//! its Git and live value) and live resources, progress lines, elapsed times and drawing over
//! the terminal. One deployment's view is in `deployment`.

mod deployment;

use std::io::Write as _;
use std::time::{Duration, SystemTime};

use gannet_controller::{AppView, DeploymentView, DiffView, StageView};
use gannet_domain::drift::Health;

pub use deployment::{approve_hint, deployment};

/// Rows as left-aligned columns under a header, a line each.
pub fn table_text(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(padded.join("  ").trim_end());
        out.push('\n');
    };
    line(&header.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>());
    for row in rows {
        line(row);
    }
    out
}

/// How many columns a table (or a view) shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Columns {
    Normal,
    /// `-o wide`: more columns, and reasons and messages whole (their first line).
    Wide,
}

impl Columns {
    /// `text`'s first line, cut to `max` characters unless wide.
    pub(crate) fn fit(self, text: &str, max: usize) -> String {
        match self {
            Self::Normal => shorten(text, max),
            Self::Wide => text.lines().next().unwrap_or("").to_owned(),
        }
    }
}

pub fn apps(apps: &[AppView], columns: Columns) -> String {
    let rows: Vec<Vec<String>> = apps
        .iter()
        .map(|a| {
            let mut row = vec![
                a.name.clone(),
                a.kind.clone(),
                a.sync_status.as_str().to_owned(),
                health_of(a),
                last_result(a),
                deploys(a),
                a.path.clone(),
            ];
            if columns == Columns::Wide {
                row.extend([
                    a.running_commit
                        .as_deref()
                        .map(short)
                        .unwrap_or("-")
                        .to_owned(),
                    a.active_deployment
                        .as_ref()
                        .map_or_else(|| "-".to_owned(), |d| d.to_string()),
                    a.repo.clone(),
                    labels(a),
                ]);
            }
            row.push(columns.fit(&a.sync_reason, 70));
            row
        })
        .collect();
    let header: &[&str] = match columns {
        Columns::Normal => &[
            "NAME", "KIND", "SYNC", "HEALTH", "LAST", "DEPLOYS", "PATH", "REASON",
        ],
        Columns::Wide => &[
            "NAME", "KIND", "SYNC", "HEALTH", "LAST", "DEPLOYS", "PATH", "RUNNING", "ACTIVE",
            "REPO", "LABELS", "REASON",
        ],
    };
    table_text(header, &rows)
}

/// The first 7 characters of a commit.
fn short(commit: &str) -> &str {
    commit.get(..7).unwrap_or(commit)
}

/// `key=value,key=value`, or `-`.
fn labels(a: &AppView) -> String {
    if a.labels.is_empty() {
        return "-".to_owned();
    }
    let each: Vec<String> = a.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    each.join(",")
}

/// The app's health, or `no live state` when it has none.
fn health_of(a: &AppView) -> String {
    match &a.no_live_state {
        Some(_) => "no live state".to_owned(),
        None => a.health.as_str().to_owned(),
    }
}

/// How the last deployment ended, or `-`.
fn last_result(a: &AppView) -> String {
    a.last_result
        .as_ref()
        .map_or_else(|| "-".to_owned(), |r| r.status.as_str().to_owned())
}

/// `auto`, `paused`, or `pinned at <commit>` for an app a rollback holds (and how far its
/// branch is ahead).
fn deploys(a: &AppView) -> String {
    let behind = a
        .ahead
        .map(|n| format!(", {}", ahead(n)))
        .unwrap_or_default();
    match &a.paused {
        None => "auto".to_owned(),
        Some(p) => match &p.commit {
            Some(c) => format!("pinned at {}{behind}", short(c)),
            None => format!("paused{behind}"),
        },
    }
}

/// `the branch is 3 commits ahead`.
fn ahead(n: u64) -> String {
    let commits = if n == 1 { "commit" } else { "commits" };
    format!("the branch is {n} {commits} ahead")
}

/// One application: its status, pause, drift and live resources (and with `wide`, where it
/// comes from and its labels).
pub fn app(a: &AppView, columns: Columns) -> String {
    let mut out = format!("Application {} ({})\n", a.name, a.id);
    let mut line = |text: String| {
        out.push_str(&text);
        out.push('\n');
    };
    line(format!("  kind:     {}", a.kind));
    line(format!(
        "  sync:     {} {}",
        a.sync_status.as_str(),
        a.sync_reason
    ));
    match &a.no_live_state {
        Some(why) => line(format!("  health:   no live state ({why})")),
        None => line(format!("  health:   {}", a.health.as_str())),
    }
    if let Some(r) = &a.last_result {
        line(format!(
            "  last:     {} {} at {} ({})",
            r.deployment,
            r.status.as_str(),
            short(&r.commit),
            r.at
        ));
    }
    let behind = a
        .ahead
        .map(|n| format!(" ({})", ahead(n)))
        .unwrap_or_default();
    line(format!(
        "  running:  {}{behind}",
        a.running_commit.as_deref().unwrap_or("-")
    ));
    line(format!(
        "  active:   {}",
        a.active_deployment.as_ref().map_or("-", |d| d.as_str())
    ));
    if columns == Columns::Wide {
        line(format!("  repo:     {} ({})", a.repo, a.path));
        line(format!(
            "  checked:  {}",
            a.checked_commit.as_deref().unwrap_or("-")
        ));
        line(format!("  labels:   {}", labels(a)));
    }
    if let Some(p) = &a.paused {
        line(format!("  paused:   by {} at {}: {}", p.by, p.at, p.reason));
        line(format!(
            "            (no automatic deployments; `gannet apps resume {}` turns them on)",
            a.name
        ));
    }
    if let Some(at) = &a.drift_changed_at {
        line(format!("  drift:    last changed {at}"));
    }
    if !a.drift.is_empty() {
        let rows: Vec<Vec<String>> = a
            .drift
            .iter()
            .map(|f| vec![f.field.clone(), f.git.clone(), f.live.clone()])
            .collect();
        out.push('\n');
        out.push_str(&table_text(&["DRIFTED FIELD", "GIT", "LIVE"], &rows));
    }
    if !a.live.is_empty() {
        let rows: Vec<Vec<String>> = a
            .live
            .iter()
            .map(|r| {
                vec![
                    r.kind.clone(),
                    r.id.clone(),
                    health(r.health).to_owned(),
                    r.summary.clone(),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&table_text(
            &["LIVE RESOURCE", "ID", "HEALTH", "SUMMARY"],
            &rows,
        ));
    }
    out
}

fn health(h: Health) -> &'static str {
    match h {
        Health::Healthy => "HEALTHY",
        Health::Unhealthy => "UNHEALTHY",
        Health::Unknown => "UNKNOWN",
    }
}

pub fn deployments(list: &[DeploymentView], columns: Columns) -> String {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|d| {
            let mut row = vec![
                d.id.to_string(),
                d.app.clone(),
                short(&d.commit).to_owned(),
                d.status.as_str().to_owned(),
                trigger(d),
            ];
            if columns == Columns::Wide {
                row.extend([by(d), strategy(d)]);
            }
            row.push(d.created_at.clone());
            if columns == Columns::Wide {
                row.extend([
                    took(d),
                    or_dash(&d.commit_author),
                    columns.fit(&d.commit_message, 60),
                ]);
            }
            row.push(columns.fit(&d.status_reason, 60));
            row
        })
        .collect();
    let header: &[&str] = match columns {
        Columns::Normal => &[
            "ID", "APP", "COMMIT", "STATUS", "TRIGGER", "CREATED", "REASON",
        ],
        Columns::Wide => &[
            "ID", "APP", "COMMIT", "STATUS", "TRIGGER", "BY", "STRATEGY", "CREATED", "TOOK",
            "AUTHOR", "MESSAGE", "REASON",
        ],
    };
    table_text(header, &rows)
}

/// An app's deployments, newest first.
pub fn history(app: &AppView, list: &[DeploymentView], columns: Columns) -> String {
    let paused = app
        .paused
        .as_ref()
        .map(|p| format!(" (paused: {})", p.reason))
        .unwrap_or_default();
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|d| {
            let mut row = vec![
                d.id.to_string(),
                short(&d.commit).to_owned(),
                d.status.as_str().to_owned(),
                trigger(d),
                by(d),
            ];
            if columns == Columns::Wide {
                row.push(strategy(d));
            }
            row.extend([d.created_at.clone(), took(d)]);
            if columns == Columns::Wide {
                row.push(or_dash(&d.commit_author));
            }
            row.push(columns.fit(&d.commit_message, 40));
            if columns == Columns::Wide {
                row.push(columns.fit(&d.status_reason, 60));
            }
            row
        })
        .collect();
    let header: &[&str] = match columns {
        Columns::Normal => &[
            "ID", "COMMIT", "STATUS", "TRIGGER", "BY", "CREATED", "TOOK", "MESSAGE",
        ],
        Columns::Wide => &[
            "ID", "COMMIT", "STATUS", "TRIGGER", "BY", "STRATEGY", "CREATED", "TOOK", "AUTHOR",
            "MESSAGE", "REASON",
        ],
    };
    format!(
        "History of {}{paused}\n{}",
        app.name,
        table_text(header, &rows)
    )
}

/// How it was triggered: the kind, or `ROLLBACK to <deployment>`.
fn trigger(d: &DeploymentView) -> String {
    match &d.rollback_of {
        Some(of) => format!("ROLLBACK to {of}"),
        None => d.trigger.as_str().to_owned(),
    }
}

/// Who triggered it (who asked, or who pushed), or `-`.
fn by(d: &DeploymentView) -> String {
    match (d.commander.as_str(), d.pushed_by.as_str()) {
        ("", pusher) => or_dash(pusher),
        (commander, _) => commander.to_owned(),
    }
}

fn strategy(d: &DeploymentView) -> String {
    d.strategy.map_or("-", |s| s.as_str()).to_owned()
}

fn or_dash(text: &str) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        text.to_owned()
    }
}

/// How long the deployment took, or nothing while it runs.
fn took(d: &DeploymentView) -> String {
    match (
        humantime::parse_rfc3339(&d.created_at),
        d.completed_at.as_deref().map(humantime::parse_rfc3339),
    ) {
        (Ok(from), Some(Ok(to))) => to
            .duration_since(from)
            .map(|t| format!("{}s", t.as_secs()))
            .unwrap_or_default(),
        _ => String::new(),
    }
}

/// What a deployment of a commit would change.
pub fn diff(d: &DiffView) {
    println!(
        "{} at {}: {} {}",
        d.app,
        &d.commit[..d.commit.len().min(12)],
        d.status.as_str(),
        d.reason
    );
    if let Some(age) = d.age_seconds {
        println!(
            "from the last drift check, {} ago: this app's live read runs its code, which a viewer's diff never does",
            gannet_domain::GoDuration::from_secs(age)
        );
    }
    if d.drift.is_empty() {
        println!("nothing would change");
        return;
    }
    println!();
    let rows: Vec<Vec<String>> = d
        .drift
        .iter()
        .map(|f| vec![f.field.clone(), f.live.clone(), f.git.clone()])
        .collect();
    print!(
        "{}",
        table_text(
            &["FIELD THAT WOULD CHANGE", "LIVE NOW", "AT THE COMMIT"],
            &rows,
        )
    );
}

/// Writes what changed between two views of a deployment to `out`, one line per change.
pub fn print_changes(
    out: &mut dyn std::io::Write,
    before: Option<&DeploymentView>,
    now: &DeploymentView,
) -> std::io::Result<()> {
    if before.map(|b| b.status) != Some(now.status) {
        let reason = if now.status_reason.is_empty() {
            String::new()
        } else {
            format!(" ({})", now.status_reason)
        };
        writeln!(out, "deployment {} {}{reason}", now.id, now.status.as_str())?;
    }
    for s in now.stages.iter().filter(|s| s.visible) {
        let old = before
            .and_then(|b| b.stages.iter().find(|o| o.id == s.id))
            .map(|o| o.status);
        if old != Some(s.status)
            && (old.is_some() || s.status != gannet_domain::deployment::StageStatus::NotStartedYet)
        {
            let reason = if s.status_reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", s.status_reason)
            };
            writeln!(
                out,
                "  stage {:<20} {:<22} {}{reason}",
                s.id.as_str(),
                s.name,
                s.status.as_str()
            )?;
        }
    }
    Ok(())
}

/// How long stage `s` ran (or has been running, until `now`).
pub fn stage_elapsed(s: &StageView, now: SystemTime) -> Option<Duration> {
    let start = humantime::parse_rfc3339(s.started_at.as_deref()?).ok()?;
    let end = match s.completed_at.as_deref() {
        Some(at) => humantime::parse_rfc3339(at).ok()?,
        None => now,
    };
    end.duration_since(start).ok()
}

/// `0.4s`, `12s`, `3m05s`, `1h02m`.
pub fn elapsed(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..10 => format!("{:.1}s", d.as_secs_f64()),
        10..60 => format!("{secs}s"),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60),
    }
}

/// Draws `lines` on the terminal over the `drawn` lines drawn last, each cut to the
/// terminal's width; returns how many it drew.
pub fn redraw(drawn: usize, lines: &[String]) -> usize {
    let width = terminal_width();
    let mut out = std::io::stdout().lock();
    if drawn > 0 {
        // Up to the first line drawn, then clear to the end of the screen.
        let _ = write!(out, "\x1b[{drawn}A\r\x1b[J");
    }
    for line in lines {
        let cut: String = line.chars().take(width.saturating_sub(1)).collect();
        let _ = writeln!(out, "{cut}");
    }
    let _ = out.flush();
    lines.len()
}

/// The terminal's width in columns (100 when it cannot be read).
fn terminal_width() -> usize {
    rustix::termios::tcgetwinsize(std::io::stdout())
        .map(|w| usize::from(w.ws_col))
        .ok()
        .filter(|c| *c >= 20)
        .unwrap_or(100)
}

fn shorten(text: &str, max: usize) -> String {
    let first_line = text.lines().next().unwrap_or("");
    if first_line.chars().count() <= max {
        first_line.to_owned()
    } else {
        let cut: String = first_line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_reads_at_each_scale() {
        assert_eq!(elapsed(Duration::from_millis(400)), "0.4s");
        assert_eq!(elapsed(Duration::from_secs(12)), "12s");
        assert_eq!(elapsed(Duration::from_secs(185)), "3m05s");
        assert_eq!(elapsed(Duration::from_secs(3720)), "1h02m");
    }
}
