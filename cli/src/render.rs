//! Human output: tables for lists, a stage table for one deployment, an app's drift (each
//! field with its Git and live value) and live resources, and progress lines.

use gannet_controller::{AppView, DeploymentView, DiffView};
use gannet_domain::drift::Health;
use gannet_sdk::presentation::Detail;

/// Prints rows as left-aligned columns under a header.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    print!("{}", table_text(header, rows));
}

/// Rows as left-aligned columns under a header, a line each.
fn table_text(header: &[&str], rows: &[Vec<String>]) -> String {
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

pub fn apps(apps: &[AppView]) {
    let rows: Vec<Vec<String>> = apps
        .iter()
        .map(|a| {
            vec![
                a.name.clone(),
                a.kind.clone(),
                a.sync_status.as_str().to_owned(),
                health_of(a),
                last_result(a),
                deploys(a),
                a.path.clone(),
                shorten(&a.sync_reason, 70),
            ]
        })
        .collect();
    table(
        &[
            "NAME", "KIND", "SYNC", "HEALTH", "LAST", "DEPLOYS", "PATH", "REASON",
        ],
        &rows,
    );
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

/// `auto`, `paused`, or `pinned at <commit>` for an app a rollback holds.
fn deploys(a: &AppView) -> String {
    match &a.paused {
        None => "auto".to_owned(),
        Some(p) => match &p.commit {
            Some(c) => format!("pinned at {}", &c[..7.min(c.len())]),
            None => "paused".to_owned(),
        },
    }
}

pub fn app(a: &AppView) {
    println!("Application {} ({})", a.name, a.id);
    println!("  kind:     {}", a.kind);
    println!("  sync:     {} {}", a.sync_status.as_str(), a.sync_reason);
    match &a.no_live_state {
        Some(why) => println!("  health:   no live state ({why})"),
        None => println!("  health:   {}", a.health.as_str()),
    }
    if let Some(r) = &a.last_result {
        println!(
            "  last:     {} {} at {} ({})",
            r.deployment,
            r.status.as_str(),
            &r.commit[..7.min(r.commit.len())],
            r.at
        );
    }
    println!("  running:  {}", a.running_commit.as_deref().unwrap_or("-"));
    println!(
        "  active:   {}",
        a.active_deployment.as_ref().map_or("-", |d| d.as_str())
    );
    if let Some(p) = &a.paused {
        println!("  paused:   by {} at {}: {}", p.by, p.at, p.reason);
        println!(
            "            (no automatic deployments; `gannet apps resume {}` turns them on)",
            a.name
        );
    }
    if let Some(at) = &a.drift_changed_at {
        println!("  drift:    last changed {at}");
    }
    if !a.drift.is_empty() {
        println!();
        let rows: Vec<Vec<String>> = a
            .drift
            .iter()
            .map(|f| vec![f.field.clone(), f.git.clone(), f.live.clone()])
            .collect();
        table(&["DRIFTED FIELD", "GIT", "LIVE"], &rows);
    }
    if !a.live.is_empty() {
        println!();
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
        table(&["LIVE RESOURCE", "ID", "HEALTH", "SUMMARY"], &rows);
    }
}

fn health(h: Health) -> &'static str {
    match h {
        Health::Healthy => "HEALTHY",
        Health::Unhealthy => "UNHEALTHY",
        Health::Unknown => "UNKNOWN",
    }
}

pub fn deployments(list: &[DeploymentView]) {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|d| {
            vec![
                d.id.to_string(),
                d.app.clone(),
                d.commit.chars().take(7).collect(),
                d.status.as_str().to_owned(),
                d.trigger.as_str().to_owned(),
                d.created_at.clone(),
                shorten(&d.status_reason, 60),
            ]
        })
        .collect();
    table(
        &[
            "ID", "APP", "COMMIT", "STATUS", "TRIGGER", "CREATED", "REASON",
        ],
        &rows,
    );
}

/// An app's deployments, newest first.
pub fn history(app: &AppView, list: &[DeploymentView]) {
    let paused = app
        .paused
        .as_ref()
        .map(|p| format!(" (paused: {})", p.reason))
        .unwrap_or_default();
    println!("History of {}{paused}", app.name);
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|d| {
            let took = match (
                humantime::parse_rfc3339(&d.created_at),
                d.completed_at.as_deref().map(humantime::parse_rfc3339),
            ) {
                (Ok(from), Some(Ok(to))) => to
                    .duration_since(from)
                    .map(|t| format!("{}s", t.as_secs()))
                    .unwrap_or_default(),
                _ => String::new(),
            };
            let trigger = match &d.rollback_of {
                Some(of) => format!("ROLLBACK to {of}"),
                None => d.trigger.as_str().to_owned(),
            };
            vec![
                d.id.to_string(),
                d.commit.chars().take(7).collect(),
                d.status.as_str().to_owned(),
                trigger,
                d.commander.clone(),
                d.created_at.clone(),
                took,
                shorten(&d.commit_message, 40),
            ]
        })
        .collect();
    table(
        &[
            "ID", "COMMIT", "STATUS", "TRIGGER", "BY", "CREATED", "TOOK", "MESSAGE",
        ],
        &rows,
    );
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
    table(
        &["FIELD THAT WOULD CHANGE", "LIVE NOW", "AT THE COMMIT"],
        &rows,
    );
}

pub fn deployment(d: &DeploymentView) {
    println!(
        "Deployment {} of {} at {}",
        d.id,
        d.app,
        &d.commit[..d.commit.len().min(12)]
    );
    println!("  status:   {} {}", d.status.as_str(), d.status_reason);
    if !d.summary.is_empty() {
        println!("  summary:  {}", d.summary);
    }
    println!("  trigger:  {} {}", d.trigger.as_str(), d.commander);
    if let Some(of) = &d.rollback_of {
        println!("  rollback: to the commit of deployment {of}");
    }
    if let Some(skip) = &d.gate_skip {
        println!(
            "  gate:     approval skipped by {}: {}",
            skip.by, skip.reason
        );
    }
    if let Some(b) = &d.blocked_by {
        println!("  waiting:  for deployment {b}");
    }
    let rows: Vec<Vec<String>> = d
        .stages
        .iter()
        .filter(|s| s.visible)
        .map(|s| {
            vec![
                s.id.to_string(),
                s.name.clone(),
                s.status.as_str().to_owned(),
                shorten(&s.status_reason, 60),
            ]
        })
        .collect();
    if !rows.is_empty() {
        println!();
        table(&["STAGE", "NAME", "STATUS", "REASON"], &rows);
    }
    for s in d.stages.iter().filter(|s| s.visible) {
        for detail in &s.presentation.details {
            println!();
            print!("{}", detail_text(s.id.as_str(), detail));
        }
    }
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

fn shorten(text: &str, max: usize) -> String {
    let first_line = text.lines().next().unwrap_or("");
    if first_line.chars().count() <= max {
        first_line.to_owned()
    } else {
        let cut: String = first_line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}
