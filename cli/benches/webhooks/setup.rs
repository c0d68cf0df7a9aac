//! The benchmark's fixtures: one git repository per app with its commits made up front, the
//! `gannet.yaml` naming them all, and the `gannet up` process with what /proc says about it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::support;

/// One app's repository and its commits (on side refs), in push order.
pub(crate) struct AppRepo {
    pub(crate) name: String,
    pub(crate) dir: PathBuf,
    pub(crate) commits: Vec<String>,
    pub(crate) config_path: String,
}

/// Builds the repository of app `i` with `git fast-import`: `main` at a commit without the
/// app, then `commits` commits on `refs/bench/cNN`: the first adds the app, the others change it.
pub(crate) fn build_repo(root: &Path, i: usize, commits: usize) -> AppRepo {
    let name = format!("app-{i:03}");
    let dir = root.join("repos").join(&name);
    std::fs::create_dir_all(&dir).expect("repo dir");
    support::git(&dir, &["init", "-q", "-b", "main"]);
    let config_path = format!("apps/{name}/app.pipecd.yaml");
    let stages = "      - name: WAIT\n        with: {duration: 0s}\n".repeat(2);
    let config = support::app_config(&name, &stages);
    let mut stream = Vec::new();
    let data = |s: &mut Vec<u8>, text: &str| {
        write!(s, "data {}\n{text}\n", text.len()).expect("write");
    };
    let who = |s: &mut Vec<u8>, k: usize| {
        writeln!(
            s,
            "committer bench <bench@gannet.invalid> {} +0000",
            1_700_000_000 + k
        )
        .expect("write");
    };
    writeln!(stream, "commit refs/heads/main\nmark :1").expect("write");
    who(&mut stream, 0);
    data(&mut stream, "base");
    writeln!(stream, "M 644 inline README.md").expect("write");
    data(&mut stream, "benchmark repository\n");
    for k in 1..=commits {
        writeln!(stream, "commit refs/bench/c{k:02}\nmark :{}", k + 1).expect("write");
        who(&mut stream, k);
        data(&mut stream, &format!("change {k} of {name}"));
        writeln!(stream, "from :{k}").expect("write");
        if k == 1 {
            writeln!(stream, "M 644 inline {config_path}").expect("write");
            data(&mut stream, &config);
        }
        writeln!(stream, "M 644 inline apps/{name}/version.txt").expect("write");
        data(&mut stream, &format!("{k}\n"));
    }
    let mut child = Command::new("git")
        .args(["fast-import", "--quiet"])
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .spawn()
        .expect("git fast-import runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&stream)
        .expect("feed fast-import");
    assert!(
        child.wait().expect("fast-import").success(),
        "fast-import failed"
    );
    let refs: Vec<String> = (1..=commits)
        .map(|k| format!("refs/bench/c{k:02}"))
        .collect();
    let mut args = vec!["rev-parse"];
    args.extend(refs.iter().map(String::as_str));
    let commits = support::git(&dir, &args)
        .lines()
        .map(str::to_owned)
        .collect();
    AppRepo {
        name,
        dir,
        commits,
        config_path,
    }
}

/// Moves the repository's `main` to `sha` as `git update-ref` would for a loose ref: the new
/// value written beside it, then renamed over it. A `git` process per push would cost this
/// driver about as much CPU as gannet spends on the whole deployment, on the same two cores.
pub(crate) fn move_main(repo: &AppRepo, sha: &str) {
    let refs = repo.dir.join(".git/refs/heads");
    let staged = refs.join("main.bench-new");
    std::fs::write(&staged, format!("{sha}\n")).expect("write the new ref");
    std::fs::rename(&staged, refs.join("main")).expect("move main");
}

pub(crate) fn write_config(root: &Path, port: u16, repos: &[AppRepo]) -> PathBuf {
    let mut text = format!(
        "listen: 127.0.0.1:{port}\nstate: state/gannet.db\nwebhook:\n  secretEnv: GANNET_BENCH_SECRET\napi:\n  tokens: {{env: GANNET_BENCH_TOKENS}}\nintervals: {{poll: 10m, resume: 30s}}\nrepos:\n"
    );
    for r in repos {
        text.push_str(&format!(
            "  - id: {0}\n    path: {1}\n    branch: main\n    onFirstSight: deploy\n    github: bench/{0}\n",
            r.name,
            r.dir.display()
        ));
    }
    let path = root.join("gannet.yaml");
    std::fs::write(&path, text).expect("write gannet.yaml");
    path
}

/// The API token the benchmark reads deployments with.
pub(crate) const BENCH_TOKEN: &str = "bench-viewer-token-000000000000";

/// A running `gannet up`, killed by its PID when dropped (a panic included).
pub(crate) struct Up {
    child: Child,
    log: PathBuf,
}

impl Up {
    /// Starts `gannet` (this build's binary, or a baseline's) on `config`.
    pub(crate) fn start(gannet: &Path, root: &Path, config: &Path) -> Self {
        let log = root.join("gannet.log");
        let child = Command::new(gannet)
            .args(["up", "--config"])
            .arg(config)
            .env("GANNET_BENCH_SECRET", support::SECRET)
            .env(
                "GANNET_BENCH_TOKENS",
                format!("- {{name: bench, role: viewer, token: {BENCH_TOKEN}}}"),
            )
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("gannet up starts");
        Self { child, log }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// A /proc/<pid>/status field in kB (VmRSS, VmHWM).
    pub(crate) fn status_kb(&self, field: &str) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("gannet up is running");
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {field} in /proc/{}/status", self.pid()))
    }

    /// CPU time so far (clock ticks of 10 ms): the process's own, and that of its finished
    /// child processes (git).
    pub(crate) fn cpu_ticks(&self) -> (u64, u64) {
        cpu_ticks(&format!("/proc/{}/stat", self.pid()))
    }
}

/// (own, children) user + system CPU ticks from a /proc stat file.
pub(crate) fn cpu_ticks(path: &str) -> (u64, u64) {
    let stat = std::fs::read_to_string(path).expect("process is running");
    // The fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime, stime, cutime, cstime are fields 14 to 17 of stat.
    (tick(11) + tick(12), tick(13) + tick(14))
}

/// The machine's (busy, total) CPU ticks so far, from /proc/stat.
pub(crate) fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|v| v.parse().ok())
        .collect();
    let at = |i: usize| fields.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    (busy, busy + at(3) + at(4))
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
