//! The sandbox's rules: the carve-out of protected paths, and a real Landlock ruleset applied
//! to a thread of the test (Landlock confines the calling thread and what it execs).

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::*;

/// A tree like `gannet up`'s: a config dir with a tokens file, a state dir with the state file,
/// another job, and this job's directory; plus a directory jobs may use.
struct Tree {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Tree {
    fn new() -> Self {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = fs::canonicalize(tmp.path()).unwrap();
        for dir in [
            "etc/gannet",
            "state/jobs/other/work",
            "state/jobs/mine/work",
            "state/jobs/mine/out",
            "state/jobs/mine/in",
            "state/jobs/mine/tmp",
            "state/jobs/mine/home",
            "state/git/shop",
            "srv/tools",
            "scratch",
        ] {
            fs::create_dir_all(root.join(dir)).unwrap();
        }
        for (file, text) in [
            (
                "etc/gannet/tokens.yaml",
                "- {name: admin, role: admin, token: s3cret}\n",
            ),
            ("etc/gannet/gannet.yaml", "listen: 127.0.0.1:7070\n"),
            ("etc/hosts", "127.0.0.1 localhost\n"),
            ("state/gannet.db", "state"),
            ("state/jobs/other/work/plan", "another app's plan"),
            ("state/jobs/mine/work/main.tf", "resource {}"),
            ("state/jobs/mine/in/plan.bin", "the plan"),
            ("state/jobs/mine/script", "echo hi"),
            ("state/jobs/mine/output.log", ""),
            ("srv/tools/tool", "a tool"),
        ] {
            fs::write(root.join(file), text).unwrap();
        }
        Self { _tmp: tmp, root }
    }

    fn at(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn policy(&self) -> Policy {
        let sandbox = Sandbox {
            launcher: PathBuf::from("/nonexistent/gannet"),
            landlock: Landlock::On,
            run_as: None,
            protect: vec![self.at("etc/gannet"), self.at("state")],
            home: None,
            allow_read: Vec::new(),
            allow_write: vec![self.at("scratch")],
        };
        let mut policy = sandbox.policy(&self.at("state/jobs/mine"), &[]);
        // Only the test's tree (which is under /tmp, a shared scratch directory).
        policy.read = vec![self.root.clone()];
        policy.write = vec![self.at("scratch")];
        policy
    }
}

#[test]
fn a_protected_path_is_cut_out_of_the_directory_that_holds_it() {
    let t = Tree::new();
    let paths = carve(
        std::slice::from_ref(&t.root),
        &[t.at("etc/gannet"), t.at("state")],
    );
    let names: Vec<String> = paths
        .iter()
        .map(|p| p.strip_prefix(&t.root).unwrap().display().to_string())
        .collect();
    assert_eq!(names, ["etc/hosts", "scratch", "srv"], "{paths:?}");

    // A protected root is dropped whole; a root beside every protected path is kept whole.
    assert!(carve(&[t.at("state/jobs")], &[t.at("state")]).is_empty());
    assert_eq!(carve(&[t.at("srv")], &[t.at("state")]), vec![t.at("srv")]);
    // Paths are compared as they resolve: a link to a protected path protects nothing more.
    std::os::unix::fs::symlink(t.at("state"), t.at("srv/state-link")).unwrap();
    assert_eq!(
        carve(&[t.at("srv")], &[t.at("srv/state-link")]),
        vec![t.at("srv")]
    );
    assert!(carve(&[t.at("srv/state-link")], &[t.at("state")]).is_empty());
}

#[test]
fn the_policy_names_the_jobs_own_paths_and_keeps_path_dirs_out_of_gannets() {
    let t = Tree::new();
    let sandbox = Sandbox {
        launcher: PathBuf::from("/usr/bin/gannet"),
        landlock: Landlock::On,
        run_as: Some(RunAs {
            uid: 65534,
            gid: 65534,
        }),
        protect: vec![t.at("etc/gannet"), t.at("state")],
        home: Some(t.at("home")),
        allow_read: vec![t.at("srv/tools")],
        allow_write: Vec::new(),
    };
    let path = format!(
        "{}:{}:relative:/usr/bin",
        t.at("srv/tools").display(),
        t.at("etc/gannet").display()
    );
    let policy = sandbox.policy(&t.at("state/jobs/mine"), &[("PATH".into(), path)]);
    assert!(policy.own_read.contains(&t.at("srv/tools")), "{policy:?}");
    assert!(
        !policy.own_read.iter().any(|p| p.starts_with(t.at("etc"))),
        "a PATH entry inside the config dir is not allowed: {policy:?}"
    );
    assert!(policy.own_write.contains(&t.at("state/jobs/mine/work")));
    assert!(policy
        .own_write
        .contains(&t.at("state/jobs/mine/output.log")));
    assert!(policy.own_read.contains(&t.at("state/jobs/mine/in")));
    assert!(policy.protect.contains(&t.at("home")));
    assert!(policy.protect.contains(&PathBuf::from("/dev")));
    assert_eq!(
        sandbox.launcher_args(Path::new("/j")),
        ["/usr/bin/gannet", LAUNCHER_COMMAND, "/j"]
    );
}

/// What a thread confined to `policy` can do to each path: `r` read, `w` write.
fn probe_in_thread(policy: Policy, paths: Vec<PathBuf>) -> (Confined, Vec<(PathBuf, String)>) {
    std::thread::spawn(move || {
        let confined = confine(&policy).expect("confine");
        let seen = paths
            .into_iter()
            .map(|p| {
                let read = if p.is_dir() {
                    fs::read_dir(&p).map(|_| ())
                } else {
                    fs::read(&p).map(|_| ())
                };
                let write = if p.is_dir() {
                    fs::write(p.join("written-by-job"), "x")
                } else {
                    fs::OpenOptions::new().append(true).open(&p).map(|_| ())
                };
                let mark = |r: std::io::Result<()>, yes: &str| match r {
                    Ok(()) => yes.to_owned(),
                    Err(e) if e.kind() == ErrorKind::PermissionDenied => "-".to_owned(),
                    Err(e) => format!("?{e}"),
                };
                (p, mark(read, "r") + &mark(write, "w"))
            })
            .collect();
        (confined, seen)
    })
    .join()
    .expect("the confined thread")
}

#[test]
fn a_confined_job_reaches_its_own_files_and_none_of_gannets() {
    let t = Tree::new();
    let rel = [
        ("etc/gannet/tokens.yaml", "--"),
        ("etc/gannet", "--"),
        ("state/gannet.db", "--"),
        ("state/git/shop", "--"),
        ("state/jobs/other/work/plan", "--"),
        ("state/jobs/mine/work", "rw"),
        ("state/jobs/mine/work/main.tf", "rw"),
        ("state/jobs/mine/output.log", "rw"),
        ("state/jobs/mine/in/plan.bin", "r-"),
        ("state/jobs/mine/script", "r-"),
        ("state/jobs/mine/tmp", "rw"),
        ("etc/hosts", "r-"),
        ("srv/tools/tool", "r-"),
        ("scratch", "rw"),
    ];
    let (confined, seen) = probe_in_thread(t.policy(), rel.iter().map(|(p, _)| t.at(p)).collect());
    assert_eq!(
        confined,
        Confined::Fully,
        "this machine's kernel enforces Landlock"
    );
    let got: Vec<(&str, &str)> = rel
        .iter()
        .zip(&seen)
        .map(|((p, _), (_, s))| (*p, s.as_str()))
        .collect();
    let want: Vec<(&str, &str)> = rel.to_vec();
    assert_eq!(got, want);
    // Nothing of gannet's changed.
    assert_eq!(
        fs::read_to_string(t.at("state/gannet.db")).unwrap(),
        "state"
    );
    assert!(!t.at("etc/gannet/written-by-job").exists());
}

#[test]
fn turned_off_confines_nothing_and_says_so() {
    let t = Tree::new();
    let mut policy = t.policy();
    policy.landlock = Landlock::Off;
    let (confined, seen) = probe_in_thread(policy, vec![t.at("etc/gannet/tokens.yaml")]);
    assert!(matches!(&confined, Confined::Not(why) if why.contains("jobs.sandbox.landlock")));
    assert_eq!(seen[0].1, "rw");
    let warning = not_sandboxed("Landlock is turned off", None);
    assert!(warning.starts_with("jobs are not sandboxed: "), "{warning}");
    assert!(not_sandboxed("old kernel", Some(RunAs { uid: 7, gid: 8 })).contains("uid 7 gid 8"));
}
