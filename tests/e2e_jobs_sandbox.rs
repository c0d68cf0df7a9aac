//! Jobs cannot reach gannet's keys: a SCRIPT_RUN, pushed by whoever can push, tries to read
//! the tokens file, write the state file and list gannet's directories under a real
//! `gannet up`; every try is refused (Landlock, or another uid when gannet runs as root), no
//! token reaches the stage log, the state is untouched, and gannet goes on deploying.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::*;

const LIMIT: Duration = Duration::from_secs(30);

/// A config dir holding gannet.yaml and a tokens file (mode 600), with the state under it, as
/// an operator lays it out.
struct Layout {
    dir: tempfile::TempDir,
}

impl Layout {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn tokens(&self) -> PathBuf {
        self.path().join("tokens.yaml")
    }

    fn db(&self) -> PathBuf {
        self.path().join("state/gannet.db")
    }

    /// Writes gannet.yaml (with `jobs`) and the tokens file, then starts `gannet up`.
    fn start(&self, repo: &Repo, jobs: &str) -> Gannet {
        use std::os::unix::fs::PermissionsExt as _;
        let tokens: String = TOKENS
            .iter()
            .map(|(name, role, token)| {
                format!("- {{name: {name}, role: {role}, token: {token}}}\n")
            })
            .collect();
        std::fs::write(self.tokens(), tokens).expect("tokens file");
        std::fs::set_permissions(self.tokens(), std::fs::Permissions::from_mode(0o600)).unwrap();
        Gannet::start_raw(
            self.path(),
            |port| {
                format!(
                    "listen: 127.0.0.1:{port}\nstate: state/gannet.db\nwebhook:\n  secretEnv: GANNET_E2E_SECRET\napi:\n  tokens: {{file: tokens.yaml}}\nrepos:\n  - id: shop\n    path: {}\n    branch: main\n    onFirstSight: deploy\n    github: {GITHUB}\nintervals: {{poll: 1m, resume: 1s}}\n{jobs}",
                    repo.path().display()
                )
            },
            &[],
        )
    }

    /// A script that tries each of gannet's files and says what it got.
    fn prying_script(&self) -> String {
        let (config, tokens, db) = (self.path(), self.tokens(), self.db());
        let state = db.parent().unwrap();
        format!(
            r#"      - name: SCRIPT_RUN
        with:
          run: |
            echo "uid $(id -u)"
            cat {tokens} && echo "READ THE TOKENS"
            printf 'job-was-here' >> {db} && echo "WROTE THE STATE"
            ls {config} && echo "LISTED THE CONFIG DIR"
            ls {state}/jobs && echo "LISTED THE JOBS"
            ls {state}/git && echo "LISTED THE TREES"
            echo kept > own-file && cat own-file
            echo "to stderr" >> /dev/stderr
            mktemp >/dev/null && echo "own tmp"
            echo "pried and done"
"#,
            tokens = tokens.display(),
            db = db.display(),
            config = config.display(),
            state = state.display(),
        )
    }
}

fn repo_with(stages: &str) -> (Repo, String) {
    let repo = Repo::new();
    let head = repo.commit(
        &[("apps/web/app.pipecd.yaml", &app_config("web", stages))],
        "add web",
    );
    (repo, head)
}

/// Deploys `head`, waits for its end; returns the deployment and its SCRIPT_RUN stage's log.
fn deployed(g: &Gannet, head: &str) -> (serde_json::Value, String) {
    let id = g.deployment_of(head, LIMIT);
    let d = g.wait_terminal(&id, LIMIT);
    let stage = d["stages"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "SCRIPT_RUN"))
        .unwrap_or_else(|| panic!("no SCRIPT_RUN in {d}"))["id"]
        .as_str()
        .expect("stage id")
        .to_owned();
    let log = g.stage_log(&id, &stage).join("\n");
    (d, log)
}

/// What every sandboxed run must show: each try refused, nothing of gannet's read or changed,
/// the job's own files usable, and gannet still deploying.
fn assert_refused(layout: &Layout, repo: &Repo, g: &Gannet, d: &serde_json::Value, log: &str) {
    assert_no_secrets("the stage log", log);
    assert_eq!(d["status"], "SUCCESS", "{d}\n{log}");
    for never in [
        "READ THE TOKENS",
        "WROTE THE STATE",
        "LISTED THE CONFIG DIR",
        "LISTED THE JOBS",
        "LISTED THE TREES",
    ] {
        assert!(!log.lines().any(|l| l == never), "{never}:\n{log}");
    }
    for refused in [
        format!("{}: Permission denied", layout.tokens().display()),
        format!("{}: Permission denied", layout.db().display()),
    ] {
        assert!(log.contains(&refused), "{refused}:\n{log}");
    }
    for works in ["kept", "to stderr", "own tmp", "pried and done"] {
        assert!(log.lines().any(|l| l == works), "{works}:\n{log}");
    }
    let db = std::fs::read(layout.db()).expect("state file");
    assert!(
        !db.windows(12).any(|w| w == b"job-was-here"),
        "the state file was written"
    );
    // gannet goes on: the state reads, and the next commit deploys a plain script.
    assert!(g.count("deployments") >= 1);
    let next = repo.commit(
        &[(
            "apps/web/app.pipecd.yaml",
            &app_config(
                "web",
                "      - name: SCRIPT_RUN\n        with: {run: echo next}\n",
            ),
        )],
        "next",
    );
    g.push(&next, "next-delivery");
    let (d, log) = deployed(g, &next);
    assert_eq!(d["status"], "SUCCESS", "{d}\n{log}");
    assert!(log.lines().any(|l| l == "next"), "{log}");
}

fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[test]
fn landlock_keeps_a_script_from_the_tokens_file_and_the_state() {
    let layout = Layout::new();
    let (repo, head) = repo_with(&layout.prying_script());
    let g = layout.start(&repo, "");
    let (d, log) = deployed(&g, &head);
    assert_refused(&layout, &repo, &g, &d, &log);
    assert!(!log.contains("not sandboxed"), "{log}");
    let started = g.log();
    assert!(
        started.contains("jobs are sandboxed with Landlock"),
        "{started}"
    );
    if running_as_root() {
        // Landlock holds even for root, but root with no runAs is warned about.
        assert!(log.lines().any(|l| l == "uid 0"), "{log}");
        assert!(
            started.contains("gannet runs as root and jobs.runAs is not set"),
            "{started}"
        );
    }
}

#[test]
fn run_as_keeps_a_script_from_gannets_files_without_landlock() {
    if !running_as_root() {
        // Only root can run a job as another uid (a non-root start with runAs is refused).
        return;
    }
    use std::os::unix::fs::PermissionsExt as _;
    let layout = Layout::new();
    // An operator's config directory lets the jobs' user through (it is 0700 as a tempdir).
    std::fs::set_permissions(layout.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let (repo, head) = repo_with(&layout.prying_script());
    let g = layout.start(
        &repo,
        "jobs: {runAs: '65534:65534', sandbox: {landlock: false}}\n",
    );
    let (d, log) = deployed(&g, &head);
    assert!(log.lines().any(|l| l == "uid 65534"), "{log}");
    assert!(
        log.contains("jobs are not sandboxed by Landlock: Landlock is turned off"),
        "{log}"
    );
    assert_refused(&layout, &repo, &g, &d, &log);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&layout.path().join("state")), 0o711);
    assert_eq!(mode(&layout.path().join("state/git")), 0o700);
    assert_eq!(mode(&layout.db()), 0o600);
}

#[test]
fn without_landlock_or_run_as_every_job_log_and_the_start_say_so() {
    let layout = Layout::new();
    let (repo, head) =
        repo_with("      - name: SCRIPT_RUN\n        with: {run: echo unconfined}\n");
    let g = layout.start(&repo, "jobs: {sandbox: {landlock: false}}\n");
    let (d, log) = deployed(&g, &head);
    assert_eq!(d["status"], "SUCCESS", "{d}\n{log}");
    let warning = "jobs are not sandboxed: Landlock is turned off (jobs.sandbox.landlock: false)";
    assert!(log.contains(warning), "{log}");
    assert!(g.log().contains(warning), "{}", g.log());
}

#[test]
fn bad_jobs_settings_stop_start_up_naming_the_field() {
    let layout = Layout::new();
    let repo = Repo::new();
    for (jobs, says) in [
        ("jobs: {runAs: root}\n", "jobs.runAs: root is root"),
        (
            "jobs: {sandbox: {allowRead: [STATE]}}\n",
            "jobs.sandbox.allowRead[0]: ",
        ),
        (
            "plugins: {script-run: {allowEnv: [AWS_SECRET_ACCESS_KEY]}}\n",
            "plugins.script-run.allowEnv[0]: AWS_SECRET_ACCESS_KEY holds gannet's own AWS credentials",
        ),
    ] {
        let jobs = jobs.replace("STATE", &layout.path().join("state").display().to_string());
        std::fs::write(
            layout.path().join("gannet.yaml"),
            format!(
                "listen: 127.0.0.1:{}\nstate: state/gannet.db\nrepos:\n  - id: shop\n    path: {}\n    branch: main\n    onFirstSight: deploy\n{jobs}",
                free_port(),
                repo.path().display()
            ),
        )
        .unwrap();
        let config = layout.path().join("gannet.yaml");
        let run = run_gannet(&["up", "--config", &config.display().to_string()], &[]);
        assert_eq!(run.code, 1, "{jobs}: {run:?}");
        assert!(run.stderr.contains(says), "{jobs}: {run:?}");
        assert!(!layout.db().exists(), "{jobs}: a state file was created");
    }
}
