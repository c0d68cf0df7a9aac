//! The embedded job runner against real processes: `/bin/sh`, setsid, `/proc`.

use std::fs;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gannet_domain::ids::{DeploymentId, StageId};
use gannet_domain::GoDuration;
use gannet_sdk::jobs::{JobEnd, JobError, JobInput, JobKey, JobRunner, JobSpec};

use super::{ProcessJobs, LAUNCH_GRACE};

/// Every wait for a job is bounded by this.
const LIMIT: Duration = Duration::from_secs(20);

struct Fixture {
    _tmp: tempfile::TempDir,
    jobs: ProcessJobs,
    /// The app directory the jobs start from.
    app: PathBuf,
    /// A directory for the scripts' side effects.
    out: PathBuf,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().expect("tempdir");
    let app = tmp.path().join("app");
    fs::create_dir_all(app.join("sub")).unwrap();
    fs::write(app.join("sub/input.txt"), "from the app\n").unwrap();
    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    let jobs = ProcessJobs::new(tmp.path().join("jobs")).expect("runner");
    Fixture {
        _tmp: tmp,
        jobs,
        app,
        out,
    }
}

fn key(stage: &str) -> JobKey {
    JobKey::new(
        &DeploymentId::parse("web-0123abcd").unwrap(),
        &StageId::parse(stage).unwrap(),
        1,
    )
}

fn env(f: &Fixture) -> Vec<(String, String)> {
    vec![
        ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
        ("OUT".into(), f.out.display().to_string()),
    ]
}

impl Fixture {
    async fn start(&self, key: &JobKey, script: &str, timeout: GoDuration) {
        self.start_with(key, script, timeout, None)
            .await
            .expect("start");
    }

    async fn start_with(
        &self,
        key: &JobKey,
        script: &str,
        timeout: GoDuration,
        cache: Option<&str>,
    ) -> Result<(), JobError> {
        let env = env(self);
        self.jobs
            .start(JobSpec {
                key,
                script,
                dir: &self.app,
                env: &env,
                timeout,
                inputs: &[],
                role: None,
                cache,
            })
            .await
    }

    /// Polls until the job ends; returns every line and the end.
    async fn finish(&self, key: &JobKey) -> (Vec<String>, JobEnd) {
        let (mut lines, mut cursor) = (Vec::new(), String::new());
        let deadline = Instant::now() + LIMIT;
        loop {
            let poll = self.jobs.poll(key, &cursor).await.expect("poll");
            lines.extend(poll.lines);
            cursor = poll.cursor;
            if let Some(end) = poll.end {
                return (lines, end);
            }
            assert!(
                Instant::now() < deadline,
                "job {key} did not end: {lines:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the file `name` in the output directory exists.
    async fn wait_for(&self, name: &str) -> String {
        let path = self.out.join(name);
        let deadline = Instant::now() + LIMIT;
        while !path.exists() {
            assert!(Instant::now() < deadline, "{name} never appeared");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        fs::read_to_string(path).unwrap()
    }

    fn job_dir(&self, key: &JobKey) -> PathBuf {
        self.jobs.dir(key)
    }
}

const LONG: GoDuration = GoDuration::from_secs(60);

fn alive(pid: u32) -> bool {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
        .unwrap_or("X");
    !stat.is_empty() && state != "Z" && state != "X"
}

fn lines_of(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_its_script_in_a_copy_of_the_app_with_only_its_environment() {
    let f = fixture();
    let k = key("run");
    std::env::set_var("GANNET_TEST_SECRET_OF_THE_RUNNER", "never-in-a-job");
    let script = "cat sub/input.txt\necho made > made.txt\necho to-stderr >&2\n\
                  env | sort | sed -n 's/^\\([A-Z_]*\\)=.*/\\1/p' | tr '\\n' ' '; echo\nexit 3";
    f.start(&k, script, LONG).await;
    let (lines, end) = f.finish(&k).await;
    assert_eq!(end, JobEnd::Exited(3));
    let (stderr, stdout) = streams(&lines);
    assert_eq!(stdout[0], "from the app");
    assert_eq!(stderr, ["to-stderr"]);
    let names: Vec<&str> = stdout[1].split_whitespace().collect();
    for name in ["GANNET_JOB", "OUT", "PATH"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert!(
        !names.contains(&"GANNET_TEST_SECRET_OF_THE_RUNNER") && !names.contains(&"HOME"),
        "the job got the runner's environment: {names:?}"
    );
    assert!(
        !f.app.join("made.txt").exists(),
        "the job wrote into the app's directory, not its copy"
    );
    assert!(f.job_dir(&k).join("work/made.txt").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starting_the_same_key_again_or_at_once_runs_the_script_once() {
    let f = fixture();
    let k = key("once");
    let script = "echo ran >> \"$OUT/runs\"; sleep 0.3";
    // Four starts at once, as four deliveries of one message on four workers would.
    let starts: Vec<_> = (0..4)
        .map(|_| {
            let (jobs, k, app, env) = (f.jobs.clone(), k.clone(), f.app.clone(), env(&f));
            tokio::spawn(async move {
                let spec = JobSpec {
                    key: &k,
                    script,
                    dir: &app,
                    env: &env,
                    timeout: LONG,
                    inputs: &[],
                    role: None,
                    cache: None,
                };
                jobs.start(spec).await
            })
        })
        .collect();
    for started in starts {
        started.await.expect("task").expect("start");
    }
    let (_, end) = f.finish(&k).await;
    assert_eq!(end, JobEnd::Exited(0));
    // Started again after it ended: still the one run.
    f.start(&k, script, LONG).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(lines_of(&f.out.join("runs")), ["ran"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_kills_the_script_and_what_it_started() {
    let f = fixture();
    let k = key("cancel");
    let script = "sleep 60 & echo $! > \"$OUT/child\"; echo $$ > \"$OUT/shell\"; wait";
    f.start(&k, script, LONG).await;
    let child: u32 = f.wait_for("child").await.trim().parse().unwrap();
    let shell: u32 = f.wait_for("shell").await.trim().parse().unwrap();
    assert!(alive(child) && alive(shell));
    f.jobs.cancel(&k).await.expect("cancel");
    assert!(
        !alive(child),
        "the script's background child survived the cancel"
    );
    assert!(!alive(shell), "the script survived the cancel");
    let (_, end) = f.finish(&k).await;
    assert_eq!(end, JobEnd::Cancelled);
    // Cancelling again, or a job that ended, changes nothing.
    f.jobs.cancel(&k).await.expect("cancel again");
    assert_eq!(f.finish(&k).await.1, JobEnd::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_lets_the_job_stop_gracefully_then_kills_what_ignores_it() {
    let f = fixture();
    // A job that cleans up on SIGTERM (as terraform releases its state lock).
    let graceful = key("graceful");
    let script = "trap 'echo cleaned > \"$OUT/cleanup\"; exit 130' TERM; echo $$ > \"$OUT/g\"; while :; do sleep 0.1; done";
    f.start(&graceful, script, LONG).await;
    f.wait_for("g").await;
    f.jobs.cancel(&graceful).await.expect("cancel");
    assert_eq!(
        lines_of(&f.out.join("cleanup")),
        ["cleaned"],
        "its TERM handler ran"
    );
    assert_eq!(f.finish(&graceful).await.1, JobEnd::Cancelled);

    // One that ignores SIGTERM is killed after the grace.
    let stubborn = key("stubborn");
    let script = "trap '' TERM; echo $$ > \"$OUT/s\"; while :; do sleep 0.1; done";
    f.start(&stubborn, script, LONG).await;
    let shell: u32 = f.wait_for("s").await.trim().parse().unwrap();
    let began = Instant::now();
    f.jobs.cancel(&stubborn).await.expect("cancel");
    assert!(!alive(shell), "a job that ignores SIGTERM is killed");
    assert!(
        began.elapsed() >= super::STOP_GRACE,
        "{:?}",
        began.elapsed()
    );
    assert_eq!(f.finish(&stubborn).await.1, JobEnd::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_past_its_timeout_is_killed() {
    let f = fixture();
    let k = key("slow");
    f.start(
        &k,
        "echo $$ > \"$OUT/shell\"; sleep 30",
        GoDuration::from_millis(700),
    )
    .await;
    let shell: u32 = f.wait_for("shell").await.trim().parse().unwrap();
    let (_, end) = f.finish(&k).await;
    assert_eq!(
        end,
        JobEnd::TimedOut {
            after: GoDuration::from_millis(700)
        }
    );
    assert!(!alive(shell));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_killed_outside_gannet_is_lost() {
    let f = fixture();
    let k = key("lost");
    f.start(&k, "echo $$ > \"$OUT/shell\"; sleep 30", LONG)
        .await;
    f.wait_for("shell").await;
    let pgid: i32 = fs::read_to_string(f.job_dir(&k).join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    rustix::process::kill_process_group(
        rustix::process::Pid::from_raw(pgid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let (_, end) = f.finish(&k).await;
    assert!(
        matches!(&end, JobEnd::Lost { reason } if reason.contains("no exit code")),
        "{end:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_process_id_is_neither_waited_for_nor_killed() {
    let f = fixture();
    let k = key("reused");
    f.start(&k, "echo done", LONG).await;
    assert_eq!(f.finish(&k).await.1, JobEnd::Exited(0));
    // The job's record now names a live process group that is not the job's: a process in
    // a group of its own, as a reused id would be.
    let mut other = std::process::Command::new("sleep")
        .arg("30")
        .process_group(0)
        .spawn()
        .unwrap();
    let dir = f.job_dir(&k);
    fs::write(dir.join("pid"), other.id().to_string()).unwrap();
    fs::remove_file(dir.join("exit")).unwrap();
    let (_, end) = f.finish(&k).await;
    assert!(matches!(end, JobEnd::Lost { .. }), "{end:?}");
    f.jobs.cancel(&k).await.unwrap();
    assert!(alive(other.id()), "an unrelated process was killed");
    other.kill().unwrap();
    other.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_never_started_is_lost_and_can_never_start_late() {
    let f = fixture();
    let k = key("never");
    f.start(&k, "echo ran >> \"$OUT/runs\"", LONG).await;
    f.finish(&k).await;
    // A job whose process never claimed it, started longer ago than the grace.
    let dir = f.job_dir(&k);
    for file in ["claim", "pid", "exit"] {
        fs::remove_file(dir.join(file)).unwrap();
    }
    let old = super::Record {
        started_at: gannet_domain::duration::Millis(
            super::now_ms().0 - LAUNCH_GRACE.as_millis() as u64 - 1000,
        ),
        timeout: LONG,
    };
    fs::write(dir.join("job.json"), serde_json::to_vec(&old).unwrap()).unwrap();
    let (_, end) = f.finish(&k).await;
    assert!(
        matches!(&end, JobEnd::Lost { reason } if reason.contains("never started")),
        "{end:?}"
    );
    // A late process finds the run claimed and does nothing.
    let env = env(&f);
    let job = super::Launch {
        dir: &dir,
        key: &k,
        env: &env,
        cache: None,
    };
    super::launch(&job, None).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(lines_of(&f.out.join("runs")), ["ran"]);
}

/// The lines a job wrote to stderr (their mark taken off), and those it wrote to stdout.
fn streams(lines: &[String]) -> (Vec<&str>, Vec<&str>) {
    let mark = gannet_domain::ports::STDERR_MARK;
    let stderr = lines.iter().filter_map(|l| l.strip_prefix(mark)).collect();
    let stdout = lines
        .iter()
        .filter(|l| !l.starts_with(mark))
        .map(String::as_str)
        .collect();
    (stderr, stdout)
}

/// Each line the script writes to stderr is marked, in its order, a last one without its
/// newline included; the exit code is the script's. Something the script leaves in the
/// background holding stderr open delays the end by the grace only, and goes with the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_lines_are_marked_and_a_background_holder_does_not_keep_the_job() {
    let f = fixture();
    let k = key("streams");
    let script = "echo out-1\nprintf '%s\\n' 'err 1  with  spaces \\n' >&2\necho out-2\n\
                  echo err-2 >&2\nprintf 'err-3 no newline' >&2\nexit 4";
    f.start(&k, script, LONG).await;
    let (lines, end) = f.finish(&k).await;
    assert_eq!(end, JobEnd::Exited(4));
    let (stderr, stdout) = streams(&lines);
    assert_eq!(stdout, ["out-1", "out-2"]);
    assert_eq!(
        stderr,
        ["err 1  with  spaces \\n", "err-2", "err-3 no newline"]
    );

    let k = key("holder");
    let script =
        "echo $$ > \"$OUT/holder.pid\"\nsleep 60 &\necho $! > \"$OUT/sleep.pid\"\necho done >&2";
    let started = Instant::now();
    f.start(&k, script, LONG).await;
    let (lines, end) = f.finish(&k).await;
    assert_eq!(end, JobEnd::Exited(0));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the job ended {:?} after it started",
        started.elapsed()
    );
    assert_eq!(streams(&lines).0, ["done"]);
    let sleep: u32 = fs::read_to_string(f.out.join("sleep.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + LIMIT;
    while alive(sleep) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !alive(sleep),
        "what the script left running went with the job"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_comes_in_order_across_polls_with_partial_lines_held_back() {
    let f = fixture();
    let k = key("output");
    let script = "i=0; while [ $i -lt 3000 ]; do echo \"line $i\"; i=$((i+1)); done\n\
                  printf 'no newline at the end'";
    f.start(&k, script, LONG).await;
    let (lines, end) = f.finish(&k).await;
    assert_eq!(end, JobEnd::Exited(0));
    assert_eq!(lines.len(), 3001);
    assert_eq!(lines[2999], "line 2999");
    assert_eq!(lines[3000], "no newline at the end");
    // The same cursor gives the same lines: a repeated poll repeats, never skips.
    let poll = f.jobs.poll(&k, "0").await.unwrap();
    assert_eq!(poll.lines[0], "line 0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_of_an_unknown_job_says_so() {
    let f = fixture();
    let err = f.jobs.poll(&key("nothing"), "").await.unwrap_err();
    assert!(err.to_string().contains("no job"), "{err}");
    f.jobs
        .cancel(&key("nothing"))
        .await
        .expect("cancel of nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_removes_old_ended_jobs_and_keeps_running_ones() {
    let f = fixture();
    let (done, running) = (key("done"), key("running"));
    f.start(&done, "true", LONG).await;
    f.finish(&done).await;
    f.start(&running, "echo $$ > \"$OUT/shell\"; sleep 30", LONG)
        .await;
    f.wait_for("shell").await;
    assert_eq!(f.jobs.prune(Duration::ZERO).unwrap(), 1);
    assert!(!f.job_dir(&done).exists());
    assert!(f.job_dir(&running).exists());
    f.jobs.cancel(&running).await.unwrap();
    assert_eq!(f.jobs.prune(Duration::from_secs(3600)).unwrap(), 0);
}

#[tokio::test]
async fn a_job_leaves_files_that_a_later_job_is_given() {
    let f = fixture();
    let (plan, apply) = (key("plan"), key("apply"));
    f.start(
        &plan,
        "printf 'the plan' > \"$GANNET_JOB_OUT/plan.bin\"; ln -s /etc/passwd \"$GANNET_JOB_OUT/link\"",
        LONG,
    )
    .await;
    assert_eq!(f.finish(&plan).await.1, JobEnd::Exited(0));
    assert_eq!(
        f.jobs.output(&plan, "plan.bin").await.expect("read"),
        Some(b"the plan".to_vec())
    );
    assert_eq!(f.jobs.output(&plan, "absent").await.expect("read"), None);
    // What a job writes is the job's: a link is not followed out of its directory.
    let link = f.jobs.output(&plan, "link").await.unwrap_err();
    assert!(link.to_string().contains("not a plain file"), "{link}");
    for bad in ["../job.json", ".hidden", "a/b", ""] {
        let err = f.jobs.output(&plan, bad).await.unwrap_err();
        assert!(matches!(err, JobError::Refused(_)), "{bad:?}: {err}");
    }

    let env = env(&f);
    let inputs = [JobInput {
        job: &plan,
        file: "plan.bin",
    }];
    f.jobs
        .start(JobSpec {
            key: &apply,
            script: "cat \"$GANNET_JOB_IN/plan.bin\"",
            dir: &f.app,
            env: &env,
            timeout: LONG,
            inputs: &inputs,
            role: None,
            cache: None,
        })
        .await
        .expect("start");
    let (lines, end) = f.finish(&apply).await;
    assert_eq!(
        (lines, end),
        (vec!["the plan".to_owned()], JobEnd::Exited(0))
    );

    // A file the earlier job did not leave refuses the start, and nothing runs.
    let missing = [JobInput {
        job: &plan,
        file: "other.bin",
    }];
    let third = key("third");
    let err = f
        .jobs
        .start(JobSpec {
            key: &third,
            script: "echo ran > \"$OUT/third\"",
            dir: &f.app,
            env: &env,
            timeout: LONG,
            inputs: &missing,
            role: None,
            cache: None,
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("left no file other.bin"), "{err}");
    assert!(!f.job_dir(&third).exists());
    assert!(matches!(
        f.jobs.poll(&third, "").await,
        Err(JobError::Unknown(_))
    ));
}

#[tokio::test]
async fn a_job_with_a_role_of_its_own_is_refused_saying_roles_are_for_aws() {
    let f = fixture();
    let k = key("with-role");
    let role = gannet_sdk::jobs::JobRoleArn::parse("arn:aws:iam::123456789012:role/tf-prod")
        .expect("a role");
    let env = env(&f);
    let err = f
        .jobs
        .start(JobSpec {
            key: &k,
            script: "echo ran > \"$OUT/with-role\"",
            dir: &f.app,
            env: &env,
            timeout: LONG,
            inputs: &[],
            role: Some(&role),
            cache: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, JobError::Refused(_)), "{err}");
    let said = err.to_string();
    assert!(
        said.starts_with(&format!(
            "job {k} is to run as IAM role arn:aws:iam::123456789012:role/tf-prod (a deploy target's jobRoleArn): a job role is for the AWS runtime"
        )) && said.contains("remove jobRoleArn"),
        "{said}"
    );
    assert!(!f.job_dir(&k).exists(), "nothing was prepared");
    assert!(!f.out.join("with-role").exists(), "nothing ran");
}

impl Fixture {
    async fn start_cached(&self, key: &JobKey, script: &str, cache: &str) -> Result<(), JobError> {
        self.start_with(key, script, LONG, Some(cache)).await
    }
}

#[tokio::test]
async fn jobs_naming_one_cache_share_its_directory_and_no_other_name_sees_it() {
    let f = fixture();
    let write = r#"echo "$GANNET_JOB_CACHE" && echo kept >"$GANNET_JOB_CACHE/file""#;
    f.start_cached(&key("first"), write, "terraform-app-one")
        .await
        .expect("start");
    let (lines, end) = f.finish(&key("first")).await;
    assert_eq!(end, JobEnd::Exited(0), "{lines:?}");
    assert_eq!(
        lines,
        [f.jobs.cache_dir("terraform-app-one").display().to_string()]
    );

    let read = r#"cat "$GANNET_JOB_CACHE/file" 2>/dev/null || echo none"#;
    f.start_cached(&key("second"), read, "terraform-app-one")
        .await
        .expect("start");
    assert_eq!(f.finish(&key("second")).await.0, ["kept"]);
    f.start_cached(&key("other"), read, "terraform-app-two")
        .await
        .expect("start");
    assert_eq!(f.finish(&key("other")).await.0, ["none"]);

    // A job naming no cache gets none; a name that could leave the directory is refused.
    f.start(&key("none"), r#"echo "${GANNET_JOB_CACHE:-unset}""#, LONG)
        .await;
    assert_eq!(f.finish(&key("none")).await.0, ["unset"]);
    let refused = f.start_cached(&key("bad"), "true", "../escape").await;
    assert!(matches!(refused, Err(JobError::Refused(_))), "{refused:?}");
    // The caches are no job: pruning passes them by.
    f.jobs.prune(Duration::ZERO).expect("prune");
    assert!(f.jobs.cache_dir("terraform-app-one").join("file").is_file());
}
