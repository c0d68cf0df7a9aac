//! The Kubernetes benchmark: K8S_SYNC of an app of 100 manifests against a real kube-apiserver
//! and etcd (or the fake API server, BENCH_SERVER=fake), with every API request counted, gannet's
//! CPU apart from the server's, and the drift check's requests; next to `kubectl apply
//! --server-side` of the same manifests against another server of the same kind, in the same run.
//!
//! - **The app**: 34 Deployments (with `pipecd.dev/variant: primary` in the selector and the
//!   pod template, as PipeCD asks), 33 Services and 33 ConfigMaps, in 34 files, with
//!   `quickSync.prune: true`: the quick sync is one K8S_SYNC stage.
//! - **The real server** (the default): kube-apiserver and etcd started by `scripts/kube.sh`
//!   through [`RealKube`], a fresh one per side and run, stopped by its PIDs through the script.
//!   No controller runs, so `RealKube` plays the Deployment controller (a list of every
//!   Deployment every 100 ms, rolled-out statuses written through the status subresource) on
//!   both sides' servers. Its threads run in this process; their CPU is left out of gannet's.
//!   Requests come from the audit log (ResponseComplete events), less the server's own and the
//!   stand-in's; kubectl's are told by their user agent. The server's CPU is the sum of its
//!   processes' (DIR/pids) threads' on-CPU time from /proc/<pid>/task/*/schedstat (ns), etcd's
//!   part shown apart.
//! - **The fake** (BENCH_SERVER=fake): `gannet-kube-fake` (the fake crate's binary, found next
//!   to this benchmark in the target directory, or at `$GANNET_KUBE_FAKE`), which plays the
//!   Deployment controller with no delay; its request log is read from `GET /fake/requests`.
//! - **gannet**: the plugin driven in this process, on a current-thread tokio runtime, through
//!   the core's planner and state machine (`gannet_sdk::test_run`), each step delivered once.
//!   A step that waits for the rollout answers `Continue`; the next step runs BENCH_POLL_MS
//!   (20) later, not the second production waits. Measured per deployment: (a) the first sync
//!   (creates everything) and (b) a sync of the same manifests at a new commit; then (c) the
//!   drift check, `live_state` once. Wall time runs from the first step's start to the last
//!   step's end; "in steps" leaves out the polls between steps. gannet's CPU is this process's
//!   CLOCK_PROCESS_CPUTIME_ID (user + system of all its threads, in ns) less the stand-in
//!   controller's threads.
//! - **kubectl**: `kubectl apply --server-side -f <dir>` of the same 100 manifests ($KUBECTL;
//!   default the real server's kubectl from `scripts/kube.sh path`, or `kubectl` for the fake),
//!   first with an empty discovery cache (creates everything), then again (no change, warm
//!   cache). Against the real TLS server it uses the script's kubeconfig and kubectl's default
//!   validation (the server's). Against the fake, which has no OpenAPI, it runs with
//!   `--validate=false`, and since kubectl sends no credentials to a plain HTTP server, through
//!   a loopback proxy in this process that adds the bearer token (its hop is measured: GET
//!   /version, direct vs through the proxy). kubectl does not wait for the rollout and does not
//!   prune: `--prune` is refused with `--server-side`, and `kubectl rollout status` (which the
//!   stand-in controller would let work on the real server) takes one Deployment per process,
//!   so it is left out. Its CPU is this process's RUSAGE_CHILDREN (10 ms ticks). Without
//!   kubectl (or if it fails), its rows say n/a and why.
//!
//! Settings (environment): BENCH_SERVER (real | fake), BENCH_RUNS (7), BENCH_POLL_MS (20),
//! KUBECTL, GANNET_KUBE_FAKE.

#[path = "../../../../cli/benches/common/stats.rs"]
mod stats;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use gannet_config::parse_app_config;
use gannet_domain::deployment::{Deployment, DeploymentStatus};
use gannet_domain::duration::Millis;
use gannet_domain::AppId;
use gannet_kube_fake::{tools_dir, FakeKube, RealKube, REQUESTS_PATH};
use gannet_plugin_kubernetes::{DeployTarget, KubernetesPlugin};
use gannet_sdk::plugin::{Faces, Live, LiveContext, LiveStates};
use gannet_sdk::test_run::{Commit, Commits, Delivery, Platform, Run, APP};
use serde_json::Value;
use stats::{env_number, median, shown};

const DEPLOYMENTS: usize = 34;
const SERVICES: usize = 33;
const CONFIG_MAPS: usize = 33;
const OBJECTS: usize = DEPLOYMENTS + SERVICES + CONFIG_MAPS;
/// The kinds the app uses, by their REST plural.
const KINDS: [&str; 3] = ["deployments", "services", "configmaps"];
/// The bound on every wait: the server's start, a kubectl run, a sync.
const LIMIT: Duration = Duration::from_secs(60);
/// How long the audit log is given for a request's last event to be written.
const AUDIT_SETTLE: Duration = Duration::from_millis(300);
/// How long the idle server is watched.
const IDLE: Duration = Duration::from_secs(1);
/// GET /version requests per side when the proxy's hop is measured.
const HOP_SAMPLES: usize = 200;

const APP_CONFIG: &str = "apiVersion: pipecd.dev/v1beta1
kind: KubernetesApp
spec:
  name: bench
  quickSync:
    prune: true
";

fn main() {
    let runs = env_number("BENCH_RUNS", 7).max(1);
    let flavour = Flavour::from_env();
    let setup = Setup {
        flavour,
        fake_bin: (flavour == Flavour::Fake).then(fake_binary),
        runtime: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime"),
        poll: Duration::from_millis(env_number("BENCH_POLL_MS", 20) as u64),
    };
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| match flavour {
        Flavour::Real => tools_dir().join("kubectl").to_string_lossy().into_owned(),
        Flavour::Fake => "kubectl".into(),
    });
    let work = tempfile::tempdir().expect("a work directory");
    let files = manifests();
    let peer_dir = work.path().join("manifests");
    std::fs::create_dir_all(&peer_dir).expect("the kubectl manifests directory");
    for (name, text) in &files {
        std::fs::write(peer_dir.join(name), text).expect("a manifest");
    }
    let as_bytes: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_bytes()))
        .collect();
    let first = Commit::with_files('a', APP_CONFIG, &as_bytes);
    let again = Commit::with_files('b', APP_CONFIG, &as_bytes);

    let mut peer = Peer::check(&kubectl);
    eprintln!(
        "K8S_SYNC of {OBJECTS} manifests against {}; {runs} runs; kubectl: {}",
        setup.describe(),
        peer.describe()
    );
    let mut samples = Vec::new();
    for run in 0..runs {
        let dir = work.path().join(format!("run-{run}"));
        std::fs::create_dir_all(&dir).expect("a run directory");
        let machine_before = stats::machine_cpu_ms();
        let self_before = process_cpu_ns();
        let children_before = children_cpu_ms();
        let mut sample = Sample::default();
        // Alternate which side goes first, so a slow start of the machine is shared.
        let order = if run % 2 == 0 { [0, 1] } else { [1, 0] };
        for side in order {
            if side == 0 {
                gannet_run(&setup, &dir, &first, &again, &mut sample);
            } else {
                peer.run(&setup, &dir, &peer_dir, &mut sample);
            }
        }
        let machine = stats::machine_cpu_ms();
        let ours = (process_cpu_ns() - self_before) as f64 / 1e6
            + (children_cpu_ms() - children_before) as f64
            + sample.servers_ms;
        let (busy, total) = (machine.0 - machine_before.0, machine.1 - machine_before.1);
        sample.elsewhere_pct = 100.0 * (busy as f64 - ours).max(0.0) / total.max(1) as f64;
        eprintln!("run {}: {}", run + 1, sample.line());
        samples.push(sample);
    }
    report(&samples, runs, &setup, &peer);
}

/// The fake API server's binary: $GANNET_KUBE_FAKE, or next to this benchmark's directory.
fn fake_binary() -> PathBuf {
    if let Ok(path) = std::env::var("GANNET_KUBE_FAKE") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("this benchmark's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the target directory");
    let bin = profile_dir.join("gannet-kube-fake");
    assert!(
        bin.exists(),
        "no {}: build it first with `cargo build --profile bench -p gannet-kube-fake` \
         (`make bench-kubernetes` does), or set GANNET_KUBE_FAKE",
        bin.display()
    );
    bin
}

/// The app's files: component i has a Deployment (i < 34), a Service and a ConfigMap (i < 33).
fn manifests() -> Vec<(String, String)> {
    (0..DEPLOYMENTS.max(SERVICES).max(CONFIG_MAPS))
        .map(|i| {
            let mut docs = Vec::new();
            if i < DEPLOYMENTS {
                docs.push(deployment(i));
            }
            if i < SERVICES {
                docs.push(service(i));
            }
            if i < CONFIG_MAPS {
                docs.push(config_map(i));
            }
            (format!("web-{i:02}.yaml"), docs.join("---\n"))
        })
        .collect()
}

fn deployment(i: usize) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-{i}
  labels:
    app: web-{i}
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web-{i}
      pipecd.dev/variant: primary
  template:
    metadata:
      labels:
        app: web-{i}
        pipecd.dev/variant: primary
    spec:
      containers:
        - name: web
          image: registry.example.com/web-{i}:1.0.0
          ports:
            - containerPort: 8080
          env:
            - name: CONFIG
              value: web-{i}-config
"
    )
}

fn service(i: usize) -> String {
    format!(
        "apiVersion: v1
kind: Service
metadata:
  name: web-{i}
spec:
  selector:
    app: web-{i}
  ports:
    - port: 80
      targetPort: 8080
"
    )
}

fn config_map(i: usize) -> String {
    format!(
        "apiVersion: v1
kind: ConfigMap
metadata:
  name: web-{i}-config
data:
  greeting: hello from web-{i}
  level: info
  upstream: http://web-{}.default.svc:80
",
        (i + 1) % SERVICES
    )
}

// ---------------------------------------------------------------------------------------------
// CPU clocks

/// This process's CPU time (user + system, every thread), in ns.
fn process_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Fields of /proc/<pid>/stat after the command name (field 3 is index 0).
fn stat_fields(pid: &str) -> Vec<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    rest.split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect()
}

/// The children this process has waited for: cutime + cstime, in ms (10 ms ticks).
fn children_cpu_ms() -> u64 {
    let f = stat_fields("self");
    (f.get(13).copied().unwrap_or(0) + f.get(14).copied().unwrap_or(0)) * 10
}

/// Process `pid`'s CPU time in ns: its threads' on-CPU time from schedstat, or utime + stime.
fn process_cpu_ns_of(pid: u32) -> u64 {
    let mut total = 0;
    let mut found = false;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let text = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            if let Some(ns) = text
                .split_whitespace()
                .next()
                .and_then(|f| f.parse::<u64>().ok())
            {
                total += ns;
                found = true;
            }
        }
    }
    if found {
        return total;
    }
    let f = stat_fields(&pid.to_string());
    (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) * 10_000_000
}

// ---------------------------------------------------------------------------------------------
// The API server, as processes of its own

/// Which API server the benchmark runs against (BENCH_SERVER).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavour {
    /// kube-apiserver and etcd, started by `scripts/kube.sh` (the default).
    Real,
    /// `gannet-kube-fake` (BENCH_SERVER=fake).
    Fake,
}

impl Flavour {
    fn from_env() -> Flavour {
        match std::env::var("BENCH_SERVER").as_deref() {
            Ok("fake") => Flavour::Fake,
            Ok("real") | Ok("") | Err(_) => Flavour::Real,
            Ok(other) => panic!("BENCH_SERVER={other}: say `real` (the default) or `fake`"),
        }
    }
}

/// Whose requests a count is of: the server logs everyone's (the real one also its own and the
/// stand-in controller's).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Gannet,
    Kubectl,
}

/// One request the server logged, as the counts need it.
struct Logged {
    method: String,
    path: String,
    query: String,
    apply: bool,
    status: u64,
}

enum Backend {
    Fake {
        child: Child,
        /// Kept open: the fake serves until its stdin closes.
        _stdin: ChildStdin,
        url: String,
    },
    Real(RealKube),
}

/// A running API server, stopped by its PIDs when dropped (the real one through
/// `scripts/kube.sh stop`).
struct Server {
    backend: Backend,
    kubeconfig: PathBuf,
    /// The server's processes: ("kube-apiserver", pid), ("etcd", pid), or the fake's one.
    pids: Vec<(String, u32)>,
    cpu_at_start: u64,
}

impl Server {
    fn start(flavour: Flavour, fake_bin: Option<&Path>, dir: &Path) -> Server {
        let mut server = match flavour {
            Flavour::Fake => Server::start_fake(fake_bin.expect("the fake's binary"), dir),
            Flavour::Real => {
                let real = RealKube::start();
                let pids = std::fs::read_to_string(real.dir().join("pids"))
                    .expect("scripts/kube.sh wrote DIR/pids")
                    .lines()
                    .filter_map(|l| l.split_once(' '))
                    .filter_map(|(name, pid)| Some((name.to_owned(), pid.trim().parse().ok()?)))
                    .collect();
                Server {
                    kubeconfig: real.write_kubeconfig(dir),
                    backend: Backend::Real(real),
                    pids,
                    cpu_at_start: 0,
                }
            }
        };
        server.cpu_at_start = server.cpu_ns();
        server
    }

    fn start_fake(bin: &Path, dir: &Path) -> Server {
        let kubeconfig = dir.join("kubeconfig");
        let mut child = Command::new(bin)
            .arg(&kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{} starts: {e}", bin.display()));
        let stdin = child.stdin.take().expect("the server's stdin");
        let stdout = child.stdout.take().expect("the server's stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let pid = child.id();
        let url = rx.recv_timeout(LIMIT).unwrap_or_default().trim().to_owned();
        assert!(
            url.starts_with("http://"),
            "the fake server (pid {pid}) printed no URL"
        );
        Server {
            backend: Backend::Fake {
                child,
                _stdin: stdin,
                url,
            },
            kubeconfig,
            pids: vec![("gannet-kube-fake".to_owned(), pid)],
            cpu_at_start: 0,
        }
    }

    /// The fake's URL (plain HTTP), for the proxy kubectl needs.
    fn fake_url(&self) -> Option<&str> {
        match &self.backend {
            Backend::Fake { url, .. } => Some(url),
            Backend::Real(_) => None,
        }
    }

    fn real(&self) -> Option<&RealKube> {
        match &self.backend {
            Backend::Real(real) => Some(real),
            Backend::Fake { .. } => None,
        }
    }

    fn pids(&self) -> Vec<u32> {
        self.pids.iter().map(|(_, pid)| *pid).collect()
    }

    /// All the server's processes' CPU time, in ns.
    fn cpu_ns(&self) -> u64 {
        self.pids
            .iter()
            .map(|(_, pid)| process_cpu_ns_of(*pid))
            .sum()
    }

    /// The CPU time of the store alone (etcd; 0 for the fake), in ns.
    fn store_cpu_ns(&self) -> u64 {
        self.pids
            .iter()
            .filter(|(name, _)| name == "etcd")
            .map(|(_, pid)| process_cpu_ns_of(*pid))
            .sum()
    }

    /// The requests of `side` the server has logged so far, oldest first. The fake's log is
    /// `GET /fake/requests`, one server per side. The real one's is its audit log
    /// (ResponseComplete events, after a moment for the last to be written): the server's own
    /// requests (user `system:apiserver`) and the stand-in controller's ([`by_stand_in`]) are
    /// left out, kubectl's are those whose user agent starts with `kubectl/`, gannet's the rest. The audit log has no content type, so a PATCH naming a field manager on an object
    /// (not its status) counts as an apply: the only patches either client sends here.
    fn requests(&self, side: Side) -> Vec<Logged> {
        match &self.backend {
            Backend::Fake { url, .. } => {
                let body = http_get(url, REQUESTS_PATH);
                let Ok(Value::Array(log)) = serde_json::from_str(&body) else {
                    panic!("the request log is not a JSON array: {body}");
                };
                log.iter()
                    .map(|r| Logged {
                        method: r["method"].as_str().unwrap_or_default().to_owned(),
                        path: r["path"].as_str().unwrap_or_default().to_owned(),
                        query: r["query"].as_str().unwrap_or_default().to_owned(),
                        apply: r["contentType"]
                            .as_str()
                            .unwrap_or_default()
                            .starts_with("application/apply-patch"),
                        status: r["status"].as_u64().unwrap_or(0),
                    })
                    .collect()
            }
            Backend::Real(real) => {
                std::thread::sleep(AUDIT_SETTLE);
                let text = std::fs::read_to_string(real.dir().join("audit.log"))
                    .expect("the server's audit log");
                text.lines()
                    .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                    .filter(|e| e["stage"] == "ResponseComplete")
                    .filter(|e| e["user"]["username"] != "system:apiserver")
                    .filter(|e| {
                        let agent = e["userAgent"].as_str().unwrap_or_default();
                        match side {
                            Side::Kubectl => agent.starts_with("kubectl/"),
                            Side::Gannet => !agent.starts_with("kubectl/") && !by_stand_in(e),
                        }
                    })
                    .map(|e| audited(&e))
                    .collect()
            }
        }
    }

    /// Stops the server by its PIDs; answers the CPU it used since it started, in ms.
    fn stop(mut self) -> f64 {
        let used = self.cpu_ns().saturating_sub(self.cpu_at_start) as f64 / 1e6;
        self.kill();
        used
    }

    fn kill(&mut self) {
        match &mut self.backend {
            Backend::Fake { child, .. } => {
                if matches!(child.try_wait(), Ok(None)) {
                    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
                        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
                    }
                    let _ = child.wait();
                }
            }
            // RealKube stops its server through the script when dropped.
            Backend::Real(real) => real.stop_playing_deployment_controller(),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether an audit event is the stand-in Deployment controller's: its list of every
/// Deployment (no query) or its status writes (field manager `kube-controller-manager`).
/// Neither client sends its user agent, so this is told by what it asks.
fn by_stand_in(event: &Value) -> bool {
    let uri = event["requestURI"].as_str().unwrap_or_default();
    uri == "/apis/apps/v1/deployments" || uri.contains("fieldManager=kube-controller-manager")
}

/// An audit event as a logged request.
fn audited(event: &Value) -> Logged {
    let uri = event["requestURI"].as_str().unwrap_or_default();
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    let verb = event["verb"].as_str().unwrap_or_default();
    let method = match verb {
        "create" => "POST",
        "update" => "PUT",
        "patch" => "PATCH",
        "delete" | "deletecollection" => "DELETE",
        _ => "GET",
    };
    Logged {
        method: method.to_owned(),
        path: path.to_owned(),
        query: query.to_owned(),
        apply: verb == "patch"
            && query.split('&').any(|kv| kv.starts_with("fieldManager="))
            && event["objectRef"]["subresource"].is_null(),
        status: event["responseStatus"]["code"].as_u64().unwrap_or(0),
    }
}

/// A GET of `path` with the fake's bearer token, on a connection of its own; the body.
fn http_get(url: &str, path: &str) -> String {
    let address = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).expect("the fake server answers");
    stream.set_read_timeout(Some(LIMIT)).ok();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        FakeKube::TOKEN
    );
    stream.write_all(request.as_bytes()).expect("a request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("an answer");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    assert!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
    body.to_owned()
}

// ---------------------------------------------------------------------------------------------
// The stand-in Deployment controller's CPU, left out of gannet's

/// This process's threads, by id.
fn own_threads() -> Vec<u32> {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|t| t.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// gannet's CPU clock: this process's CPU less the threads that are not gannet's (the stand-in
/// controller's, which runs in this process for the real server).
#[derive(Clone, Default)]
struct GannetClock {
    not_gannet: Arc<Vec<u32>>,
}

impl GannetClock {
    fn ns(&self) -> u64 {
        let others: u64 = self
            .not_gannet
            .iter()
            .map(|tid| {
                std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat"))
                    .ok()
                    .and_then(|s| s.split_whitespace().next()?.parse().ok())
                    .unwrap_or(0)
            })
            .sum();
        process_cpu_ns().saturating_sub(others)
    }
}

// ---------------------------------------------------------------------------------------------
// Requests, by kind

#[derive(Clone, Debug, Default)]
struct Counts {
    apply: usize,
    list: usize,
    get: usize,
    discovery: usize,
    delete: usize,
    other: usize,
    /// Answered 4xx or 5xx.
    failed: usize,
    /// Lists by REST plural.
    lists: BTreeMap<String, usize>,
    /// GETs of single objects by REST plural.
    gets: BTreeMap<String, usize>,
    /// Requests outside the ones named above, as "METHOD path".
    others: Vec<String>,
}

impl Counts {
    fn of(requests: &[Logged]) -> Counts {
        let mut c = Counts::default();
        for r in requests {
            let (method, path, query) = (r.method.as_str(), r.path.as_str(), r.query.as_str());
            if r.status >= 400 {
                c.failed += 1;
            }
            let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
            let rest: &[&str] = match segments.as_slice() {
                ["api", _, rest @ ..] | ["apis", _, _, rest @ ..] => rest,
                _ => &[],
            };
            // namespaces/<ns>/<plural>[/<name>[/<sub>]] or <plural>[/<name>[/<sub>]]
            let (plural, named) = match rest {
                ["namespaces", _, plural, tail @ ..] => (Some(*plural), !tail.is_empty()),
                [plural, tail @ ..] => (Some(*plural), !tail.is_empty()),
                [] => (None, false),
            };
            match (method, plural) {
                (_, None) if method == "GET" => c.discovery += 1,
                ("PATCH", Some(_)) if r.apply => {
                    c.apply += 1;
                }
                ("GET", Some(plural)) if !named && !query.contains("watch=true") => {
                    c.list += 1;
                    *c.lists.entry(plural.to_owned()).or_default() += 1;
                }
                ("GET", Some(plural)) if named => {
                    c.get += 1;
                    *c.gets.entry(plural.to_owned()).or_default() += 1;
                }
                ("DELETE", Some(_)) => c.delete += 1,
                _ => {
                    c.other += 1;
                    c.others.push(format!("{method} {path}"));
                }
            }
        }
        c
    }

    fn total(&self) -> usize {
        self.apply + self.list + self.get + self.discovery + self.delete + self.other
    }

    /// The lists by kind: "configmaps 1, deployments 1, …".
    fn lists_by_kind(&self) -> String {
        self.lists
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

// ---------------------------------------------------------------------------------------------
// gannet

/// The plugin reaching the server through its kubeconfig, and a record of each step's end.
#[derive(Clone)]
struct Bench {
    plugin: Arc<KubernetesPlugin>,
    clock: GannetClock,
    server_pids: Vec<u32>,
    store_pids: Vec<u32>,
    poll: Duration,
    steps: Arc<Mutex<Vec<StepEnd>>>,
}

#[derive(Clone, Copy)]
struct StepEnd {
    at: Instant,
    gannet_cpu_ns: u64,
    server_cpu_ns: u64,
    store_cpu_ns: u64,
    /// The poll slept after this step.
    slept: Duration,
}

impl Platform for Bench {
    const KIND: &'static str = "KubernetesApp";
    type State = ();

    fn plugins(this: &Arc<Self>) -> Vec<Faces> {
        vec![Faces::platform(this.plugin.clone())]
    }

    async fn state(&self, _: &Deployment) {}

    /// Notes the step's end, then waits one poll before the next step.
    async fn after_step(&self) {
        let mut end = StepEnd {
            at: Instant::now(),
            gannet_cpu_ns: self.clock.ns(),
            server_cpu_ns: self.server_pids.iter().map(|p| process_cpu_ns_of(*p)).sum(),
            store_cpu_ns: self.store_pids.iter().map(|p| process_cpu_ns_of(*p)).sum(),
            slept: Duration::ZERO,
        };
        tokio::time::sleep(self.poll).await;
        end.slept = end.at.elapsed();
        self.steps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(end);
    }
}

/// One measured phase: a sync, a drift check or a kubectl run.
#[derive(Clone, Debug, Default)]
struct Phase {
    wall_ms: f64,
    /// The wall time less the polls between steps.
    in_steps_ms: f64,
    steps: usize,
    client_cpu_ms: f64,
    /// All the server's processes (kube-apiserver and etcd, or the fake).
    server_cpu_ms: f64,
    /// etcd's part of it (0 for the fake).
    store_cpu_ms: f64,
    counts: Counts,
}

#[derive(Default)]
struct Sample {
    first: Phase,
    again: Phase,
    drift: Phase,
    /// `kubectl apply` with a cold discovery cache, then again with it warm; None when n/a.
    kubectl_first: Option<Phase>,
    kubectl_again: Option<Phase>,
    /// GET /version directly and through the proxy, median µs (the fake only).
    hop_us: Option<(f64, f64)>,
    /// The servers' CPU, start to stop, in ms (for the noise figure).
    servers_ms: f64,
    /// The server's CPU while idle but for the Deployment controller (the fake's own pass
    /// every 20 ms, or the stand-in's list every 100 ms), ms per s.
    server_idle_ms_per_s: f64,
    elsewhere_pct: f64,
}

impl Sample {
    fn line(&self) -> String {
        let k = |p: &Option<Phase>| {
            p.as_ref().map_or("n/a".to_owned(), |p| {
                format!("{:.0} ms, {} requests", p.wall_ms, p.counts.total())
            })
        };
        format!(
            "sync {:.0} ms ({} steps, {} requests), again {:.0} ms ({} requests), drift {:.1} ms ({} requests); kubectl {} / again {}; {:.0} % CPU elsewhere",
            self.first.wall_ms,
            self.first.steps,
            self.first.counts.total(),
            self.again.wall_ms,
            self.again.counts.total(),
            self.drift.wall_ms,
            self.drift.counts.total(),
            k(&self.kubectl_first),
            k(&self.kubectl_again),
            self.elsewhere_pct
        )
    }
}

/// What every run shares: where the servers come from, the runtime, the poll.
struct Setup {
    flavour: Flavour,
    fake_bin: Option<PathBuf>,
    runtime: tokio::runtime::Runtime,
    poll: Duration,
}

impl Setup {
    /// kubectl's validation: the server's (`fieldValidation=Strict`, kubectl's default) on the
    /// real server; none on the fake, which has no OpenAPI for kubectl to read.
    fn kubectl_validate(&self) -> &'static [&'static str] {
        match self.flavour {
            Flavour::Real => &[],
            Flavour::Fake => &["--validate=false"],
        }
    }

    /// A server for one side of one run; for the real one, the stand-in Deployment controller
    /// plays from the start (the fake plays its own). Answers the server and the threads the
    /// stand-in added to this process.
    fn describe(&self) -> String {
        match (self.flavour, &self.fake_bin) {
            (Flavour::Fake, Some(bin)) => format!(
                "{} in its own process (its Deployment controller with no delay)",
                bin.display()
            ),
            _ => format!(
                "kube-apiserver and etcd from {} (scripts/kube.sh; the Deployment controller played by RealKube, a list every 100 ms)",
                tools_dir().display()
            ),
        }
    }

    fn server(&self, dir: &Path) -> (Server, Vec<u32>) {
        let before = own_threads();
        let server = Server::start(self.flavour, self.fake_bin.as_deref(), dir);
        if let Some(real) = server.real() {
            real.play_deployment_controller(Duration::ZERO);
        }
        let added = own_threads()
            .into_iter()
            .filter(|t| !before.contains(t))
            .collect();
        (server, added)
    }
}

fn gannet_run(setup: &Setup, dir: &Path, first: &Commit, again: &Commit, sample: &mut Sample) {
    let dir = dir.join("gannet");
    std::fs::create_dir_all(&dir).expect("a directory");
    let (server, not_gannet) = setup.server(&dir);
    // The server idle but for its Deployment controller, for a second.
    let (idle_cpu, idle_start) = (server.cpu_ns(), Instant::now());
    std::thread::sleep(IDLE);
    sample.server_idle_ms_per_s =
        (server.cpu_ns() - idle_cpu) as f64 / 1e6 / idle_start.elapsed().as_secs_f64();
    let target = DeployTarget::kubeconfig("local", server.kubeconfig.to_string_lossy());
    let plugin = Arc::new(KubernetesPlugin::new(vec![target]));
    let clock = GannetClock {
        not_gannet: Arc::new(not_gannet),
    };
    sample.first = sync(setup, &plugin, &clock, &server, first, None);
    sample.again = sync(setup, &plugin, &clock, &server, again, Some(first));
    sample.drift = drift(&setup.runtime, &plugin, &clock, &server, again);
    sample.servers_ms += server.stop();
}

/// One deployment of `target` (with `running` live), run to its end; the sync stage measured.
fn sync(
    setup: &Setup,
    plugin: &Arc<KubernetesPlugin>,
    clock: &GannetClock,
    server: &Server,
    target: &Commit,
    running: Option<&Commit>,
) -> Phase {
    let store_pids = server
        .pids
        .iter()
        .filter(|(name, _)| name == "etcd")
        .map(|(_, pid)| *pid)
        .collect();
    let bench = Bench {
        plugin: plugin.clone(),
        clock: clock.clone(),
        server_pids: server.pids(),
        store_pids,
        poll: setup.poll,
        steps: Arc::default(),
    };
    let mut run = Run::plan(bench.clone(), target, running);
    let logged = server.requests(Side::Gannet).len();
    let (gannet_cpu, server_cpu, store_cpu) = (clock.ns(), server.cpu_ns(), server.store_cpu_ns());
    let start = Instant::now();
    let commits = Commits { target, running };
    let finished = setup.runtime.block_on(async {
        tokio::time::timeout(LIMIT, run.run_all(&commits, Delivery::Once)).await
    });
    assert!(finished.is_ok(), "the sync took longer than {LIMIT:?}");
    assert_eq!(
        run.deployment.status,
        DeploymentStatus::Success,
        "{:#?}",
        run.logs
    );
    let steps = bench
        .steps
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let last = *steps.last().expect("at least one step");
    let polls: Duration = steps[..steps.len() - 1].iter().map(|s| s.slept).sum();
    let wall = last.at - start;
    Phase {
        wall_ms: wall.as_secs_f64() * 1e3,
        in_steps_ms: wall.saturating_sub(polls).as_secs_f64() * 1e3,
        steps: steps.len(),
        client_cpu_ms: last.gannet_cpu_ns.saturating_sub(gannet_cpu) as f64 / 1e6,
        server_cpu_ms: last.server_cpu_ns.saturating_sub(server_cpu) as f64 / 1e6,
        store_cpu_ms: last.store_cpu_ns.saturating_sub(store_cpu) as f64 / 1e6,
        counts: Counts::of(&server.requests(Side::Gannet)[logged..]),
    }
}

/// The drift check of the app at `head`, once: it must find all 100 objects and no drift.
fn drift(
    runtime: &tokio::runtime::Runtime,
    plugin: &Arc<KubernetesPlugin>,
    clock: &GannetClock,
    server: &Server,
    head: &Commit,
) -> Phase {
    let app_dir = head.app_dir();
    let text = std::fs::read_to_string(app_dir.join("app.pipecd.yaml")).expect("the config");
    let app = parse_app_config("app/app.pipecd.yaml", &text).expect("a valid config");
    let app_id = AppId::parse(APP).expect("the app id");
    let logged = server.requests(Side::Gannet).len();
    let (gannet_cpu, server_cpu, store_cpu) = (clock.ns(), server.cpu_ns(), server.store_cpu_ns());
    let start = Instant::now();
    let live = runtime.block_on(plugin.live_state(LiveContext {
        app_id: &app_id,
        app: &app,
        app_dir: &app_dir,
        head: &head.sha,
        last_deployed: None,
        now: Millis(1),
        jobs: &gannet_sdk::jobs::NoJobs,
        preview: false,
    }));
    let wall = start.elapsed();
    let (gannet_cpu, server_cpu, store_cpu) = (
        clock.ns().saturating_sub(gannet_cpu),
        server.cpu_ns().saturating_sub(server_cpu),
        server.store_cpu_ns().saturating_sub(store_cpu),
    );
    let Ok(Live::Read(state)) = live else {
        panic!("the drift check read nothing: {live:?}");
    };
    assert_eq!(state.resources.len(), OBJECTS, "{:?}", state.resources);
    assert!(
        state.drift.is_empty(),
        "drift right after a sync: {:?}",
        state.drift
    );
    Phase {
        wall_ms: wall.as_secs_f64() * 1e3,
        in_steps_ms: wall.as_secs_f64() * 1e3,
        steps: 1,
        client_cpu_ms: gannet_cpu as f64 / 1e6,
        server_cpu_ms: server_cpu as f64 / 1e6,
        store_cpu_ms: store_cpu as f64 / 1e6,
        counts: Counts::of(&server.requests(Side::Gannet)[logged..]),
    }
}

// ---------------------------------------------------------------------------------------------
// kubectl, the peer

struct Peer {
    kubectl: String,
    /// Why kubectl is not compared, once it is known.
    unavailable: Option<String>,
    /// What `kubectl version` said against the fake (the dispatcher may pick another kubectl).
    version: Option<String>,
}

impl Peer {
    fn check(kubectl: &str) -> Peer {
        let unavailable = match Command::new(kubectl)
            .args(["version", "--client"])
            .stdin(Stdio::null())
            .output()
        {
            Ok(out) if out.status.success() => None,
            Ok(out) => Some(format!(
                "`{kubectl} version --client` failed: {}",
                first_line(&out.stderr)
            )),
            Err(e) => Some(format!("{kubectl} cannot be run: {e}")),
        };
        Peer {
            kubectl: kubectl.to_owned(),
            unavailable,
            version: None,
        }
    }

    fn describe(&self) -> String {
        match (&self.unavailable, &self.version) {
            (Some(why), _) => format!("n/a ({why})"),
            (None, Some(v)) => format!("{} ({v})", self.kubectl),
            (None, None) => self.kubectl.clone(),
        }
    }

    fn command(&self, kubeconfig: &Path, cache: &Path) -> Command {
        let mut cmd = Command::new(&self.kubectl);
        cmd.arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--cache-dir")
            .arg(cache)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn run(&mut self, setup: &Setup, dir: &Path, manifests: &Path, sample: &mut Sample) {
        if self.unavailable.is_some() {
            return;
        }
        let dir = dir.join("kubectl");
        std::fs::create_dir_all(&dir).expect("a directory");
        // The stand-in controller plays here too, so the server does the same work aside.
        let (server, _) = setup.server(&dir);
        // kubectl sends no credentials to the fake's plain HTTP: a proxy adds the token.
        let proxy = server.fake_url().map(auth_proxy);
        let kubeconfig = match &proxy {
            None => server.kubeconfig.clone(),
            Some(proxy) => {
                let kubeconfig = dir.join("kubeconfig-via-proxy");
                std::fs::write(
                    &kubeconfig,
                    format!(
                        "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {proxy}\n\
                         contexts:\n- name: fake\n  context:\n    cluster: fake\n    namespace: default\n\
                         current-context: fake\nusers: []\n"
                    ),
                )
                .expect("a kubeconfig");
                kubeconfig
            }
        };
        let cache = dir.join("cache");
        if self.version.is_none() {
            let out = stats::bounded(
                self.command(&kubeconfig, &cache).arg("version"),
                LIMIT,
                "kubectl version",
            );
            let text = String::from_utf8_lossy(&out.stdout);
            self.version = Some(
                text.lines()
                    .filter(|l| l.starts_with("Client Version") || l.starts_with("Server Version"))
                    .collect::<Vec<_>>()
                    .join(", "),
            );
            // A fresh cache for the measured runs.
            let _ = std::fs::remove_dir_all(&cache);
        }
        let apply = |what: &str| -> Result<Phase, String> {
            let logged = server.requests(Side::Kubectl).len();
            let (children, server_cpu, store_cpu) =
                (children_cpu_ms(), server.cpu_ns(), server.store_cpu_ns());
            let start = Instant::now();
            let out = stats::bounded(
                self.command(&kubeconfig, &cache)
                    .args(["apply", "--server-side"])
                    .args(setup.kubectl_validate())
                    .arg("-f")
                    .arg(manifests),
                LIMIT,
                what,
            );
            let wall = start.elapsed();
            let cpu = children_cpu_ms() - children;
            let server_cpu = server.cpu_ns().saturating_sub(server_cpu);
            let store_cpu = server.store_cpu_ns().saturating_sub(store_cpu);
            let applied = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|l| l.ends_with("serverside-applied"))
                .count();
            if !out.status.success() || applied != OBJECTS {
                return Err(format!(
                    "`kubectl apply --server-side` applied {applied} of {OBJECTS}: {}",
                    first_line(&out.stderr)
                ));
            }
            Ok(Phase {
                wall_ms: wall.as_secs_f64() * 1e3,
                in_steps_ms: wall.as_secs_f64() * 1e3,
                steps: 1,
                client_cpu_ms: cpu as f64,
                server_cpu_ms: server_cpu as f64 / 1e6,
                store_cpu_ms: store_cpu as f64 / 1e6,
                counts: Counts::of(&server.requests(Side::Kubectl)[logged..]),
            })
        };
        match apply("kubectl apply (cold cache)")
            .and_then(|first| apply("kubectl apply again (warm cache)").map(|again| (first, again)))
        {
            Ok((first, again)) => {
                sample.kubectl_first = Some(first);
                sample.kubectl_again = Some(again);
                sample.hop_us = proxy.map(|p| hop_cost(&setup.runtime, &server, &p));
            }
            Err(why) => {
                eprintln!("kubectl: n/a ({why})");
                self.unavailable = Some(why);
            }
        }
        sample.servers_ms += server.stop();
    }
}

fn first_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(nothing on stderr)")
        .to_owned()
}

/// A loopback proxy to `upstream` that adds the fake's bearer token to every request: kubectl
/// sends no credentials over plain HTTP. One thread per connection and direction; request
/// bodies must have a Content-Length (kubectl's do). Answers its URL.
fn auth_proxy(upstream: &str) -> String {
    let upstream = upstream.trim_start_matches("http://").to_owned();
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let upstream = upstream.clone();
            std::thread::spawn(move || {
                let _ = forward(client, &upstream);
            });
        }
    });
    url
}

fn forward(client: TcpStream, upstream: &str) -> std::io::Result<()> {
    let mut server = TcpStream::connect(upstream)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (mut from_server, mut to_client) = (server.try_clone()?, client.try_clone()?);
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_server, &mut to_client);
        let _ = to_client.shutdown(Shutdown::Both);
    });
    let mut reader = BufReader::new(client);
    let auth = format!("Authorization: Bearer {}\r\n", FakeKube::TOKEN);
    loop {
        let mut head = Vec::new();
        let mut length = 0u64;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                let _ = server.shutdown(Shutdown::Both);
                return Ok(());
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            if lower.starts_with("transfer-encoding:") {
                return Err(std::io::Error::other(
                    "chunked request bodies are not proxied",
                ));
            }
            if line == "\r\n" {
                head.extend_from_slice(auth.as_bytes());
                head.extend_from_slice(line.as_bytes());
                break;
            }
            if !lower.starts_with("authorization:") {
                head.extend_from_slice(line.as_bytes());
            }
        }
        // Head and body in one write, as the client sent them.
        (&mut reader).take(length).read_to_end(&mut head)?;
        server.write_all(&head)?;
    }
}

/// GET /version through kube-rs, directly (with the token) and through the proxy: the median
/// time of one request each way, in µs.
fn hop_cost(runtime: &tokio::runtime::Runtime, server: &Server, proxy: &str) -> (f64, f64) {
    runtime.block_on(async {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&server.kubeconfig).expect("the kubeconfig");
        let direct = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("a config");
        let proxied = kube::Config::new(proxy.parse().expect("the proxy's URL"));
        let mut medians = Vec::new();
        for config in [direct, proxied] {
            let client = kube::Client::try_from(config).expect("a client");
            let mut times = Vec::with_capacity(HOP_SAMPLES);
            for i in 0..HOP_SAMPLES + 10 {
                let start = Instant::now();
                client.apiserver_version().await.expect("GET /version");
                if i >= 10 {
                    times.push(start.elapsed().as_secs_f64() * 1e6);
                }
            }
            medians.push(median(times));
        }
        (medians[0], medians[1])
    })
}

// ---------------------------------------------------------------------------------------------
// The report

fn col(samples: &[Sample], f: impl Fn(&Sample) -> f64) -> Vec<f64> {
    samples.iter().map(f).collect()
}

/// Medians of a phase over the runs, as a table row after its label.
/// `stepped`: a stage run in steps (its steps and the time in them are shown).
fn phase_row(label: &str, phases: &[&Phase], per_object: bool, stepped: bool) -> String {
    let v = |f: &dyn Fn(&Phase) -> f64| phases.iter().map(|p| f(p)).collect::<Vec<f64>>();
    // A count the same in every run is shown alone.
    let counted = |values: Vec<f64>| {
        if values.windows(2).all(|w| w[0] == w[1]) {
            format!("{}", values.first().copied().unwrap_or(0.0))
        } else {
            shown(&values, 0, "")
        }
    };
    let n = |f: &dyn Fn(&Counts) -> usize| counted(v(&|p| f(&p.counts) as f64));
    let (in_steps, steps) = if stepped {
        (
            shown(&v(&|p| p.in_steps_ms), 1, " ms"),
            counted(v(&|p| p.steps as f64)),
        )
    } else {
        ("–".to_owned(), "–".to_owned())
    };
    let cpu = v(&|p| p.client_cpu_ms);
    let per_object_cpu = if per_object {
        shown(
            &cpu.iter()
                .map(|c| c * 1e3 / OBJECTS as f64)
                .collect::<Vec<_>>(),
            0,
            " µs",
        )
    } else {
        "–".to_owned()
    };
    format!(
        "| {label} | {} | {in_steps} | {steps} | {} | {per_object_cpu} | {} | {} | {} | {} | {} | {} | {} | {} |",
        shown(&v(&|p| p.wall_ms), 1, " ms"),
        shown(&cpu, 1, " ms"),
        shown(&v(&|p| p.server_cpu_ms), 1, " ms"),
        shown(&v(&|p| p.store_cpu_ms), 1, " ms"),
        n(&|c| c.apply),
        n(&|c| c.list),
        n(&|c| c.get),
        n(&|c| c.discovery),
        n(&|c| c.delete + c.other),
        n(&Counts::total),
    )
}

/// Whether `counts` holds exactly `applies` applies and one list of each of the app's kinds;
/// otherwise what is beyond that.
fn beyond(counts: &Counts, applies: usize) -> Vec<String> {
    let mut extra = Vec::new();
    if counts.apply != applies {
        extra.push(format!("{} applies (not {applies})", counts.apply));
    }
    for kind in KINDS {
        let lists = counts.lists.get(kind).copied().unwrap_or(0);
        if lists != 1 {
            extra.push(format!("{lists} lists of {kind}"));
        }
    }
    for (kind, n) in &counts.lists {
        if !KINDS.contains(&kind.as_str()) {
            extra.push(format!("{n} list of {kind} (a kind the app does not use)"));
        }
    }
    if counts.get > 0 {
        let by_kind: Vec<String> = counts
            .gets
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        extra.push(format!(
            "{} GETs of single objects ({})",
            counts.get,
            by_kind.join(", ")
        ));
    }
    if counts.discovery > 0 {
        extra.push(format!("{} discovery requests", counts.discovery));
    }
    if counts.delete > 0 {
        extra.push(format!("{} deletes", counts.delete));
    }
    if counts.other > 0 {
        extra.push(format!(
            "{} others ({})",
            counts.other,
            counts.others.join(", ")
        ));
    }
    extra
}

/// The verdict on a target over all runs: met in every run, or what the worst run did beyond.
fn verdict(phases: &[&Phase], applies: usize) -> (String, &'static str) {
    let worst = phases
        .iter()
        .max_by_key(|p| p.counts.total())
        .expect("a run");
    let extra = beyond(&worst.counts, applies);
    let got = format!(
        "{} applies; lists: {}; {} GETs; {} requests in all (in the run with the most requests)",
        worst.counts.apply,
        worst.counts.lists_by_kind(),
        worst.counts.get,
        worst.counts.total()
    );
    if extra.is_empty() {
        (got, "yes")
    } else {
        (
            format!("{got}. Beyond the target: {}", extra.join("; ")),
            "**no**",
        )
    }
}

fn report(samples: &[Sample], runs: usize, setup: &Setup, peer: &Peer) {
    let first: Vec<&Phase> = samples.iter().map(|s| &s.first).collect();
    let again: Vec<&Phase> = samples.iter().map(|s| &s.again).collect();
    let drift: Vec<&Phase> = samples.iter().map(|s| &s.drift).collect();
    let k_first: Vec<&Phase> = samples
        .iter()
        .filter_map(|s| s.kubectl_first.as_ref())
        .collect();
    let k_again: Vec<&Phase> = samples
        .iter()
        .filter_map(|s| s.kubectl_again.as_ref())
        .collect();
    let kubectl_ok = peer.unavailable.is_none() && k_first.len() == samples.len();

    println!(
        "\nK8S_SYNC of {OBJECTS} manifests ({DEPLOYMENTS} Deployments, {SERVICES} Services, {CONFIG_MAPS} ConfigMaps; quickSync.prune) against {}, steps {} ms apart; kubectl: {}; medians of {runs} runs (min–max), {} cores\n",
        setup.describe(),
        setup.poll.as_millis(),
        peer.describe(),
        std::thread::available_parallelism().map_or(0, usize::from)
    );
    println!("| phase | wall time | in steps (no polls) | steps | client CPU | client CPU per object | server CPU | of which etcd | applies | lists | GETs | discovery | deletes + other | requests |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "{}",
        phase_row(
            "**gannet** K8S_SYNC, first (creates all)",
            &first,
            true,
            true
        )
    );
    println!(
        "{}",
        phase_row(
            "**gannet** K8S_SYNC at a new commit, same manifests",
            &again,
            true,
            true
        )
    );
    println!(
        "{}",
        phase_row(
            "**gannet** drift check (`live_state`, once)",
            &drift,
            false,
            false
        )
    );
    if kubectl_ok {
        println!(
            "{}",
            phase_row(
                "kubectl apply --server-side, first (creates all; cold discovery cache)",
                &k_first,
                true,
                false
            )
        );
        println!(
            "{}",
            phase_row(
                "kubectl apply --server-side again, same manifests (warm cache)",
                &k_again,
                true,
                false
            )
        );
    } else {
        println!(
            "| kubectl apply --server-side | n/a ({}) | | | | | | | | | | | | |",
            peer.unavailable.as_deref().unwrap_or("no runs")
        );
    }

    println!(
        "\n| ratio, gannet ÷ kubectl (median of the per-run ratios) | wall time | client CPU |"
    );
    println!("|---|---|---|");
    if kubectl_ok {
        let ratio = |g: &[&Phase], k: &[&Phase], f: &dyn Fn(&Phase) -> f64| {
            let r: Vec<f64> = g.iter().zip(k).map(|(g, k)| f(g) / f(k)).collect();
            shown(&r, 2, "x")
        };
        println!(
            "| first K8S_SYNC (apply, wait for the rollout, prune) ÷ first `kubectl apply --server-side` (apply only) | {} | {} |",
            ratio(&first, &k_first, &|p| p.wall_ms),
            ratio(&first, &k_first, &|p| p.client_cpu_ms)
        );
        println!(
            "| K8S_SYNC at a new commit ÷ `kubectl apply --server-side` again | {} | {} |",
            ratio(&again, &k_again, &|p| p.wall_ms),
            ratio(&again, &k_again, &|p| p.client_cpu_ms)
        );
        let hops: Vec<(f64, f64)> = samples.iter().filter_map(|s| s.hop_us).collect();
        if !hops.is_empty() {
            println!(
            "\nkubectl reaches the fake through this benchmark's token-adding proxy: GET /version takes {} directly and {} through it (kube-rs, keep-alive), so the proxy adds about {} to each of kubectl's requests.",
            shown(&hops.iter().map(|h| h.0).collect::<Vec<_>>(), 0, " µs"),
            shown(&hops.iter().map(|h| h.1).collect::<Vec<_>>(), 0, " µs"),
            shown(&hops.iter().map(|h| h.1 - h.0).collect::<Vec<_>>(), 0, " µs"),
        );
        }
    } else {
        println!(
            "| K8S_SYNC ÷ kubectl apply | n/a ({}) | n/a |",
            peer.unavailable.as_deref().unwrap_or("no runs")
        );
    }

    println!("\n| target | result | met? |");
    println!("|---|---|---|");
    let (got, met) = verdict(&first, OBJECTS);
    println!("| first K8S_SYNC: one apply per object ({OBJECTS}) plus one list per kind for prune ({}), nothing more | {got} | {met} |", KINDS.len());
    let (got, met) = verdict(&again, OBJECTS);
    println!("| K8S_SYNC at a new commit: the same | {got} | {met} |");
    let (got, met) = verdict(&drift, 0);
    println!("| drift check: one list per kind the app uses ({}), not one GET per object | {got} | {met} |", KINDS.len());
    println!(
        "| gannet CPU per object (no number set) | first sync {}, again {} | – |",
        shown(
            &first
                .iter()
                .map(|p| p.client_cpu_ms * 1e3 / OBJECTS as f64)
                .collect::<Vec<_>>(),
            0,
            " µs"
        ),
        shown(
            &again
                .iter()
                .map(|p| p.client_cpu_ms * 1e3 / OBJECTS as f64)
                .collect::<Vec<_>>(),
            0,
            " µs"
        ),
    );
    println!(
        "\nThe server idle but for the Deployment controller (the fake's pass every 20 ms, or the stand-in's list every 100 ms) used {} of CPU a second; machine CPU used by other work during the runs: {} of the 2 cores.",
        shown(&col(samples, |s| s.server_idle_ms_per_s), 1, " ms"),
        shown(&col(samples, |s| s.elsewhere_pct), 0, " %"),
    );
}
