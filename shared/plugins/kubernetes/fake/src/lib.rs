//! **A fake Kubernetes API server, for tests only.** It listens on 127.0.0.1, speaks the real
//! kube-apiserver's JSON over HTTP (so a kube-rs client reaches it through an ordinary
//! kubeconfig), and models just enough of the real server to test a GitOps deployer:
//!
//! - bearer-token auth (401 `Status` without it); discovery: `/version`, `/api`, `/api/v1`,
//!   `/apis`, `/apis/{group}/{version}` for a fixed table of kinds (core, apps, autoscaling,
//!   networking, batch, policy, rbac, and the Istio VirtualService/DestinationRule CRDs);
//! - GET, LIST (`<Kind>List`, label selectors, field selectors on `metadata.name` and
//!   `metadata.namespace`, other fields refused with 400), POST, PUT (resourceVersion checked
//!   when given, unconditional without), PATCH as a JSON merge patch, a strategic merge patch
//!   (built-in kinds; lists merged by the keys below, `$patch`, `$setElementOrder`,
//!   `$deleteFromPrimitiveList`), a JSON patch (RFC 6902) or **server-side apply** (field
//!   managers, conflicts and `force`, removal of fields a manager stops applying,
//!   `managedFields` in FieldsV1), DELETE with owner-reference propagation (`default`,
//!   `kube-system` and `kube-public` refused with 403), `dryRun=All`, and the `/status`
//!   subresource;
//! - decoding against the built-in kinds' schemas (a compact copy of the real server's OpenAPI
//!   v3, `src/schema.json`): a value of the wrong type (a number in a ConfigMap's `data`) is a
//!   400, an unknown field is dropped, or a 400 with `fieldValidation=Strict`; a server-side
//!   apply with either is a 500, as on the real server;
//! - uid, creationTimestamp, a global resourceVersion, `metadata.generation` bumped on spec
//!   changes, writes that change nothing storing nothing (a re-apply is a no-op);
//! - a few real defaults (Deployment strategy and limits, pod spec and container fields,
//!   Service type, cluster IP and ports) and a few real validations (422 `Invalid`, among
//!   them a Service's `clusterIP` changed);
//! - test helpers: direct reads, applies and merge patches as any manager, a request log,
//!   injected faults (429 with `Retry-After`, 500, 503, ...), and a stand-in Deployment
//!   controller that marks Deployments rolled out;
//! - for a test or benchmark that runs the fake as a process of its own (the
//!   `gannet-kube-fake` binary), the request log over HTTP: `GET /fake/requests` (with the
//!   token) answers it as JSON (see [`REQUESTS_PATH`]). This endpoint is the fake's own, for
//!   tests only: no real API server has it.
//!
//! ```no_run
//! use gannet_kube_fake::FakeKube;
//! use serde_json::json;
//!
//! let fake = FakeKube::start();
//! let kubeconfig = fake.write_kubeconfig(std::path::Path::new("/tmp/test"));
//! // ... point the code under test at `kubeconfig`, then look at what it did:
//! let web = fake.get("apps/v1", "Deployment", Some("default"), "web");
//! // ... or play another manager, e.g. an HPA scaling the Deployment:
//! let scale = json!({"spec": {"replicas": 5}});
//! fake.merge_patch_as("hpa", "apps/v1", "Deployment", Some("default"), "web", scale).ok();
//! ```
//!
//! Lists merge by key in server-side apply as in the real schemas: `containers`,
//! `initContainers`, `ephemeralContainers`, `env`, `volumes` and `imagePullSecrets` by `name`,
//! `volumeMounts` by `mountPath`, container `ports` by `containerPort` and `protocol`, Service
//! `spec.ports` by `port` and `protocol`, `ownerReferences` by `uid`. Every other list, and
//! every list of the Istio custom resources, is atomic; label selectors are atomic maps.
//!
//! It does **not** model: admission (webhooks, quotas, limit ranges), real controllers (no
//! ReplicaSets or Pods are created, rollouts only as [`FakeKube::play_deployment_controller`]
//! fakes them, no garbage collector beyond the delete propagation, no finalizers: Foreground
//! deletes at once like Background; a namespace is removed at once, never Terminating), most
//! defaulting, watches, aggregated discovery, OpenAPI documents, protobuf, Table output,
//! `/scale`, TLS (so kubectl 1.36, which sends no bearer token over plain HTTP, cannot reach
//! it), the `Warning` header for dropped unknown fields, duplicate-field detection, schemas of
//! custom resources (Istio objects take any field), the per-kind field selectors beyond
//! `metadata.name` and `metadata.namespace`, `generateName`, `deletecollection`, pagination,
//! conversion between versions (the Istio versions share one storage as-is), validation
//! beyond the checks in this crate, and managedFields sent by clients (ignored). Unlike a real
//! server, it wants the token on `/version` and discovery too.
//!
//! `tests/agrees_with_kube_apiserver.rs` runs the same calls against the fake and a real
//! kube-apiserver ([`RealKube`]) and checks they have the same outcome.

mod charts;
mod controller;
mod fields;
mod http;
mod kinds;
mod managed;
mod patch;
mod real;
mod rules;
mod schema;
mod selector;
mod status;
mod store;

pub use charts::{Chart, ChartServer};
pub use real::{tools_dir, RealKube};

use std::future::IntoFuture;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;

use crate::http::{lock, Shared};
use crate::kinds::Kind;
use crate::store::{Change, FieldValidation, State, Target};

/// The fake's test-only debug endpoint: `GET` it (with the bearer token) for the request log
/// so far as a JSON array, oldest first, of `{"method", "path", "query", "fieldManager",
/// "contentType", "status"}` (the fields of [`Request`]). Requests to it are not logged, and
/// injected faults do not apply to it.
pub const REQUESTS_PATH: &str = "/fake/requests";

/// A request the fake served (or refused), as [`FakeKube::requests`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// "GET", "PATCH", ...
    pub method: String,
    /// The URL path, e.g. "/apis/apps/v1/namespaces/default/deployments/web".
    pub path: String,
    /// The raw query string, "" if none.
    pub query: String,
    /// The `fieldManager` query parameter.
    pub field_manager: Option<String>,
    /// The `Content-Type` header.
    pub content_type: Option<String>,
    /// The HTTP status answered.
    pub status: u16,
}

/// A fault to inject: the next `times` matching requests get `status` instead of an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The HTTP method to match ("PATCH"), or any.
    pub method: Option<String>,
    /// A substring the request path must contain ("" matches every path).
    pub path_contains: String,
    /// The HTTP status to answer: 429 TooManyRequests, 500 InternalError, 503, ...
    pub status: u16,
    /// Sent as the `Retry-After` header and `details.retryAfterSeconds`.
    pub retry_after_secs: Option<u64>,
    /// How many requests get the fault.
    pub times: usize,
}

impl Default for Fault {
    /// One 500 on any request.
    fn default() -> Self {
        Fault {
            method: None,
            path_contains: String::new(),
            status: 500,
            retry_after_secs: None,
            times: 1,
        }
    }
}

/// A running fake API server. Clones share the server; dropping the last one (or
/// [`FakeKube::stop`]) shuts it and its thread down.
#[derive(Clone)]
pub struct FakeKube {
    inner: Arc<Inner>,
}

struct Inner {
    url: String,
    state: Shared,
    /// The server thread's runtime, to run the Deployment controller on.
    runtime: tokio::runtime::Handle,
    /// Tells the server to stop, and its thread; taken on stop.
    shutdown: Mutex<Option<(oneshot::Sender<()>, JoinHandle<()>)>>,
    /// The Deployment controller's task, while it plays.
    controller: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Inner {
    fn stop(&self) {
        let running = self
            .shutdown
            .lock()
            .ok()
            .and_then(|mut running| running.take());
        if let Some((shutdown, thread)) = running {
            let _ = shutdown.send(());
            let _ = thread.join();
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop();
    }
}

impl FakeKube {
    /// The bearer token every request must carry.
    pub const TOKEN: &'static str = "gannet-fake-kube-token";

    /// Starts a server on 127.0.0.1 at a free port, in a thread of its own with its own tokio
    /// runtime (so sync and async tests alike can use it).
    ///
    /// # Panics
    /// If no loopback port or thread can be had.
    pub fn start() -> FakeKube {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let address = listener
            .local_addr()
            .expect("the listener's address")
            .to_string();
        let state: Shared = Arc::new(Mutex::new(State::new(address.clone())));
        let app = http::router(state.clone());
        let (shutdown, stopped) = oneshot::channel::<()>();
        let (runtime_sender, runtime_receiver) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("fake-kube".to_string())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a tokio runtime");
                let _ = runtime_sender.send(runtime.handle().clone());
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
                    tokio::select! {
                        _ = axum::serve(listener, app).into_future() => {}
                        _ = stopped => {}
                    }
                });
            })
            .expect("a thread for the fake API server");
        let runtime = runtime_receiver
            .recv()
            .expect("the fake API server's runtime");
        FakeKube {
            inner: Arc::new(Inner {
                url: format!("http://{address}"),
                state,
                runtime,
                shutdown: Mutex::new(Some((shutdown, thread))),
                controller: Mutex::new(None),
            }),
        }
    }

    /// Shuts the server down now (also done when the last clone is dropped). The stored
    /// objects stay readable and writable through the handle.
    pub fn stop(&self) {
        self.inner.stop();
    }

    /// "http://127.0.0.1:PORT".
    pub fn url(&self) -> String {
        self.inner.url.clone()
    }

    /// The bearer token every request must carry ([`FakeKube::TOKEN`]).
    pub fn token(&self) -> &str {
        Self::TOKEN
    }

    /// Writes `dir/kubeconfig`: one cluster (this server), one user (the token), one context
    /// "fake" (namespace "default"), the current one. Returns its path.
    ///
    /// # Panics
    /// If the file cannot be written.
    pub fn write_kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::write(&path, self.kubeconfig()).expect("the kubeconfig is written");
        path
    }

    /// The text [`FakeKube::write_kubeconfig`] writes.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\n\
             clusters:\n- name: fake\n  cluster:\n    server: {}\n\
             users:\n- name: fake\n  user:\n    token: {}\n\
             contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    \
             namespace: default\n\
             current-context: fake\n",
            self.url(),
            Self::TOKEN
        )
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.inner.state)
    }

    /// The stored object as the API returns it (with apiVersion and kind), if any.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let kind = Kind::by_kind(api_version, kind)?;
        let namespace = namespace.map(String::from).filter(|_| kind.namespaced);
        let target = Target {
            kind,
            namespace,
            name: name.to_string(),
            status: false,
        };
        self.state().get(&target).ok()
    }

    /// Every stored object of a kind, all namespaces, sorted by namespace and name.
    pub fn list(&self, api_version: &str, kind: &str) -> Vec<Value> {
        let Some(kind) = Kind::by_kind(api_version, kind) else {
            return Vec::new();
        };
        self.state().objects(kind, None, &[])
    }

    /// The requests served so far, oldest first.
    pub fn requests(&self) -> Vec<Request> {
        self.state().requests.clone()
    }

    /// Forgets the requests served so far.
    pub fn clear_requests(&self) {
        self.state().requests.clear();
    }

    /// Server-side apply of `object` as `manager` (the HTTP apply's code path), e.g. to play
    /// another tool or a controller. The namespace defaults to "default". Answers the object,
    /// or the `Status` the HTTP request would have had.
    pub fn apply_as(&self, manager: &str, object: Value, force: bool) -> Result<Value, Value> {
        let target = target_of(&object)?;
        let change = Change::Apply { object, force };
        self.state()
            .write(&target, manager, change, FieldValidation::Drop, false)
            .map(|(_, object)| object)
    }

    /// A JSON merge patch (RFC 7386) as `manager`: an Update operation, like `kubectl edit`,
    /// `kubectl scale` or an HPA (the HTTP merge patch's code path).
    pub fn merge_patch_as(
        &self,
        manager: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        patch: Value,
    ) -> Result<Value, Value> {
        let identity = serde_json::json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": namespace}});
        let target = target_of(&identity)?;
        let change = Change::MergePatch(patch);
        self.state()
            .write(&target, manager, change, FieldValidation::Drop, false)
            .map(|(_, object)| object)
    }

    /// Plays the Deployment controller: every ~20 ms, each Deployment whose status lags
    /// (`observedGeneration` behind `generation`, or replica counts not `spec.replicas`) for
    /// `delay` since its generation changed gets, through the status subresource as
    /// "kube-controller-manager", `observedGeneration`, all replica counts equal to
    /// `spec.replicas`, and conditions Available and Progressing (NewReplicaSetAvailable).
    pub fn play_deployment_controller(&self, delay: Duration) {
        let state = self.inner.state.clone();
        let task = self.inner.runtime.spawn(async move {
            let mut seen = controller::Seen::new();
            let mut ticks = tokio::time::interval(Duration::from_millis(20));
            loop {
                ticks.tick().await;
                controller::reconcile(&mut lock(&state), &mut seen, delay);
            }
        });
        let previous = self
            .inner
            .controller
            .lock()
            .ok()
            .and_then(|mut c| c.replace(task));
        previous.inspect(tokio::task::JoinHandle::abort);
    }

    /// Stops playing the Deployment controller.
    pub fn stop_playing_deployment_controller(&self) {
        let task = self.inner.controller.lock().ok().and_then(|mut c| c.take());
        task.inspect(tokio::task::JoinHandle::abort);
    }

    /// Injects a fault (see [`Fault`]); faults are matched in the order injected.
    pub fn inject(&self, fault: Fault) {
        self.state().faults.push(fault);
    }
}

/// The target of an object given whole: its apiVersion, kind, namespace (default "default")
/// and name.
fn target_of(object: &Value) -> Result<Target, Value> {
    let (api_version, kind_name) = (object["apiVersion"].as_str(), object["kind"].as_str());
    let kind = Kind::by_kind(
        api_version.unwrap_or_default(),
        kind_name.unwrap_or_default(),
    );
    let Some(kind) = kind else {
        let message = format!("no kind {kind_name:?} is served in version {api_version:?}");
        return Err(status::failure(404, "NotFound", &message, None));
    };
    let metadata = &object["metadata"];
    let namespace = metadata["namespace"].as_str().unwrap_or("default");
    Ok(Target {
        kind,
        namespace: kind.namespaced.then(|| namespace.to_string()),
        name: metadata["name"].as_str().unwrap_or_default().to_string(),
        status: false,
    })
}
