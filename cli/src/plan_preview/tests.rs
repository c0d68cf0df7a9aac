use clap::Parser;
use gannet_domain::preview::AppPreview;
use gannet_domain::{AppId, CommitSha, PreviewId, RepoId};

use super::*;
use crate::render::Columns;
use crate::Cli;

const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";

fn preview(status: PreviewStatus, result: PreviewResult, apps: Vec<AppPreview>) -> Preview {
    Preview {
        id: PreviewId::parse("p-0123").unwrap(),
        repo: RepoId::parse("shop").unwrap(),
        pr: Some(42),
        head: CommitSha::parse(HEAD).unwrap(),
        base_ref: "main".into(),
        base: Some(CommitSha::parse(&"b".repeat(40)).unwrap()),
        merge_base: Some(CommitSha::parse(&"c".repeat(40)).unwrap()),
        author: "alice".into(),
        fork: false,
        credentials: true,
        status,
        result,
        reason: String::new(),
        check_run: None,
        apps,
        created_at: Millis(1_000_000),
        started_at: None,
        updated_at: Millis(1_000_000),
        version: 1,
    }
}

fn app(name: &str, result: PreviewResult, details: &str) -> AppPreview {
    AppPreview {
        app: AppId::parse(&format!("shop:apps/{name}/app.pipecd.yaml")).unwrap(),
        name: name.into(),
        kind: "TERRAFORM".into(),
        result,
        summary: "1 to add, 0 to change, 0 to destroy".into(),
        pipeline: "QUICK_SYNC: no pipeline".into(),
        why: "apps/web/main.tf changed".into(),
        details: details.into(),
        credentials: false,
        job: None,
    }
}

#[test]
fn a_preview_that_ended_exits_as_apps_diff_exit_code_does() {
    use PreviewResult::*;
    use PreviewStatus::*;
    let cases = [
        (Done, NoChanges, Exit::Success, 0),
        (Done, Changes, Exit::Error, 1),
        (Done, Error, Exit::NotCompared, 2),
        (Failed, Error, Exit::NotCompared, 2),
        // A newer head replaced it: no answer about this one.
        (Superseded, NoChanges, Exit::NotCompared, 2),
    ];
    for (status, result, exit, code) in cases {
        let got = exit_for(&preview(status, result, vec![]));
        assert_eq!(got, exit, "{status:?} {result:?}");
        assert_eq!(
            format!("{:?}", got.code()),
            format!("{:?}", std::process::ExitCode::from(code)),
            "{status:?} {result:?}"
        );
    }
}

#[test]
fn a_preview_shows_its_apps_as_a_table_then_each_apps_details() {
    let p = preview(
        PreviewStatus::Done,
        PreviewResult::Changes,
        vec![
            app("web", PreviewResult::Changes, "+ resource \"x\"\n- old"),
            app("api", PreviewResult::NoChanges, ""),
        ],
    );
    let text = show_text(&p, Columns::Normal, Millis(1_065_000));
    for expected in [
        "Plan preview: p-0123",
        "Repository:   shop, pull request #42 by alice",
        &format!("Head:         {HEAD} into main (at bbbbbbb, merge base ccccccc)"),
        "Status:       DONE, result CHANGES",
        "Created:      1970-01-01T00:16:40Z (1m05s ago)",
        "== web (TERRAFORM): CHANGES",
        "Why:          apps/web/main.tf changed",
        "Credentials:  not read from the platform: the app's files are compared",
        "    + resource \"x\"\n    - old\n",
        "== api (TERRAFORM): NO_CHANGES",
    ] {
        assert!(text.contains(expected), "no {expected:?} in:\n{text}");
    }
    let header = text
        .lines()
        .find(|l| l.starts_with("APP"))
        .expect("a table");
    for column in ["KIND", "RESULT", "SUMMARY", "PIPELINE"] {
        assert!(header.contains(column), "{header}");
    }
    let row = text
        .lines()
        .find(|l| l.starts_with("web "))
        .expect("web's row");
    assert!(
        row.contains("CHANGES") && row.contains("1 to add") && row.contains("QUICK_SYNC"),
        "{row}"
    );

    let queued = show_text(
        &preview(PreviewStatus::Queued, PreviewResult::Pending, vec![]),
        Columns::Normal,
        Millis(1_000_000),
    );
    assert!(queued.contains("has not started"), "{queued}");
}

#[test]
fn the_list_has_a_row_a_preview() {
    let mut api = preview(PreviewStatus::Running, PreviewResult::Pending, vec![]);
    api.pr = None;
    api.reason = "first line\nsecond".into();
    let done = preview(PreviewStatus::Done, PreviewResult::NoChanges, vec![]);
    let text = list_text(&[api, done], Columns::Normal, Millis(1_003_000));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("RESULT"),
        "{text}"
    );
    let words = |line: &str| line.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        words(lines[1]),
        "p-0123 shop - 0123456 RUNNING PENDING 3.0s first line"
    );
    assert_eq!(
        words(lines[2]),
        "p-0123 shop #42 0123456 DONE NO_CHANGES 3.0s -"
    );
    assert!(!text.contains("second"), "{text}");
}

#[test]
fn the_progress_line_counts_the_apps_read() {
    let mut p = preview(
        PreviewStatus::Running,
        PreviewResult::Pending,
        vec![
            app("web", PreviewResult::Changes, ""),
            app("api", PreviewResult::Pending, ""),
        ],
    );
    assert_eq!(
        progress(&p),
        "plan preview p-0123 · shop at 0123456 · RUNNING · 1/2 apps read"
    );
    p.status = PreviewStatus::Queued;
    assert_eq!(
        progress(&p),
        "plan preview p-0123 · shop at 0123456 · QUEUED"
    );
}

#[test]
fn the_command_line_takes_a_head_or_a_subcommand() {
    let parses = |line: &str| {
        Cli::try_parse_from(line.split_whitespace())
            .map(|_| ())
            .map_err(|e| e.kind())
    };
    use clap::error::ErrorKind::*;
    for (line, expected) in [
        (format!("gannet plan-preview --head {HEAD}"), Ok(())),
        (
            format!("gannet plan-preview --head {HEAD} --repo shop --base main --wait --timeout 10m -o json --out p.json"),
            Ok(()),
        ),
        ("gannet plan-preview show p-1".into(), Ok(())),
        ("gannet plan-preview list --repo shop --pr 7 -o wide".into(), Ok(())),
        ("gannet plan-preview".into(), Err(MissingRequiredArgument)),
        (
            format!("gannet plan-preview --head {HEAD} --timeout 5m"),
            Err(MissingRequiredArgument),
        ),
        ("gannet plan-preview list --pr 7".into(), Err(MissingRequiredArgument)),
        (
            format!("gannet plan-preview --head {HEAD} show p-1"),
            Err(ArgumentConflict),
        ),
    ] {
        assert_eq!(parses(&line), expected, "{line}");
    }
}
