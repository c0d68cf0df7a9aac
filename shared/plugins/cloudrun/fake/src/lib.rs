//! **A FAKE of Google's Cloud Run Admin API v2, for tests only.** No Cloud Run emulator exists,
//! so this stands in for the API on 127.0.0.1, held to Google's own client: `tests/google_client.rs`
//! drives it with google-cloud-run (REST transport) and google-auth, pinned from PyPI by
//! `scripts/gcloud-client.sh`, and what that client could not do, or read differently from the
//! real API, fails there. It replays the real API's JSON (camelCase, int64 as strings, Google's
//! error bodies and recorded messages):
//!
//! - services (`GET`, list with pages, `POST ?serviceId=`, `PATCH` with `updateMask` and
//!   `allowMissing`, `DELETE` with `etag`; `validateOnly` on each write: checked, answered with
//!   the defaults, nothing stored), revisions (`GET`, list with pages), and the long-running
//!   operation of each write and delete. A rollout runs with time, polled or not
//!   ([`FakeRun::set_rollout_time`], 2 s at start), or ends sooner after
//!   [`FakeRun::set_polls_until_done`] polls of its operation; meanwhile the service is
//!   `reconciling`, and only when done does its new revision become ready and its traffic take
//!   effect (or, for a delete, the service go). [`FakeRun::hold_operations`] stops the clock
//!   for tests that move operations on themselves ([`FakeRun::advance`]);
//! - JSON read as Google's parser reads it, by the v2 messages Google's client describes
//!   (`src/v2_schema.json`, checked against the pinned client): every current field accepted
//!   (`iapEnabled`, `readinessProbe`, ...), an unknown one refused, output-only fields on input
//!   ignored, enums stored and answered by name (a number sent is turned into its name), or
//!   answered as numbers to a client asking `$alt=json;enum-encoding=int`, as Google's client
//!   libraries do;
//! - a new revision only when the template changed, named by `template.revision` or generated
//!   (`{service}-00001-abc`); the platform's defaults in the template; `uri` and `urls` (the
//!   deterministic URL first); a revision whose image contains `crash` fails its rollout and
//!   leaves the traffic where it was;
//! - the real checks and errors, 400 `INVALID_ARGUMENT` with a `BadRequest` field violation in
//!   Google's shape (see `validate` for which messages are recorded answers): service ids,
//!   images, labels, env names, cpu and memory, ports, system labels or annotations, traffic;
//!   404; 409 for an existing service, a revision name reused with another template, a stale
//!   `etag`, a write during a rollout; and injected faults ([`Fault`]: 403, 429 with
//!   `Retry-After` and `RetryInfo`, 500, 503, ...);
//! - Google's token endpoints, all on this server: a service account key file
//!   ([`FakeRun::service_account_key`]) used as Google's libraries use it (self-signed JWTs for
//!   `https://run.googleapis.com/`) or through its JWT-bearer grant (for Google's standard
//!   audience), STS's exchange of a signed AWS `GetCallerIdentity` request (workload identity
//!   federation: the fake checks its shape, not its SigV4 signature) then `generateAccessToken`
//!   impersonation, and the metadata server as google-auth reads it (point `GCE_METADATA_HOST`,
//!   and `GCE_METADATA_IP` for its ping, at [`FakeRun::host`]). Cloud Run calls need a token
//!   the fake issued or a self-signed JWT of its key ([`TokenKind`]);
//! - a request log ([`FakeRun::requests`], and [`REQUESTS_PATH`] over HTTP: the fake's own
//!   endpoint, which no Google API has).
//!
//! ```no_run
//! use gannet_cloudrun_fake::FakeRun;
//!
//! let fake = FakeRun::start();
//! let key_file = fake.service_account_key(); // token_uri is the fake's
//! // ... point the code under test at fake.url() with that key, then look at what it did:
//! let traffic = fake.traffic("web");
//! // ... or play someone deploying by hand:
//! fake.patch_by_hand("web", |s| {
//!     s["template"]["containers"][0]["image"] = "gcr.io/demo/web:hotfix".into()
//! });
//! ```
//!
//! Like Google's JSON, it leaves out `false`, `0` and empty lists: an operation has no `done`
//! until it is done, a service no `reconciling` once it is settled, a 0% traffic status no
//! `percent`. Revision conditions carry the v2 `revisionReason`
//! (`HEALTH_CHECK_CONTAINER_ERROR` for a crash), not v1's `reason`.
//!
//! It does **not** model: jobs, executions, worker pools, IAM policies, `showDeleted` (a
//! deleted service is gone), the operations list and `:wait`, revision deletes over HTTP (see
//! [`FakeRun::delete_revision`]), real rollouts (a revision is ready once its time has passed,
//! unless an image contains `crash`), revision retirement, quota, or checks beyond those in
//! this crate. What `validateOnly` answers (a done operation whose response is the service with
//! its defaults, without status) and the order in which checks fail are the fake's best
//! reading of the reference, not recorded answers.

mod auth;
mod error;
mod google_client;
mod http;
mod resource;
mod rollout;
mod run;
mod schema;
mod validate;

use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use axum::http::Method;
use base64::Engine;
pub use google_client::run_google_client;
use rand::Rng;
use serde_json::Value;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::OffsetDateTime;
use tokio::sync::oneshot;

use crate::auth::Auth;
use crate::http::{lock, Shared, State};
use crate::run::{Platform, Write, WriteMode};

/// The fake's test-only debug endpoint: `GET` it (with any token the fake issued) for the
/// request log so far as a JSON array, oldest first, of `{"method", "path", "query", "body",
/// "authorizationKind", "status"}`. Requests to it are not logged and get no faults.
pub const REQUESTS_PATH: &str = "/fake/requests";

/// Which credential a bearer token came from: each kind has one token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// The JWT-bearer grant of the service account key file (`POST /token`).
    KeyFile,
    /// STS's token for an AWS identity (`POST /v1/token`): good only to impersonate.
    Federated,
    /// The impersonated service account's token (`generateAccessToken`).
    Impersonated,
    /// The metadata server's token of the default compute service account.
    Metadata,
    /// A JWT the key file's key signed itself and sent as the bearer token, as Google's client
    /// libraries use a key file (google.aip.dev/auth/4111): no token endpoint is asked, so
    /// there is no fixed token of this kind ([`FakeRun::token`] answers "").
    SelfSignedJwt,
}

impl TokenKind {
    /// The kinds the fake issues a token of.
    const FIXED: [TokenKind; 4] = [
        TokenKind::KeyFile,
        TokenKind::Federated,
        TokenKind::Impersonated,
        TokenKind::Metadata,
    ];

    /// Its name, as `GET /fake/requests` writes it ("KeyFile", ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TokenKind::KeyFile => "KeyFile",
            TokenKind::Federated => "Federated",
            TokenKind::Impersonated => "Impersonated",
            TokenKind::Metadata => "Metadata",
            TokenKind::SelfSignedJwt => "SelfSignedJwt",
        }
    }
}

/// A request the fake served (or refused), as [`FakeRun::requests`] lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// "GET", "PATCH", ...
    pub method: String,
    /// The URL path, e.g. "/v2/projects/p/locations/l/services/web".
    pub path: String,
    /// The raw query string, "" if none.
    pub query: String,
    /// The JSON body, or a form body's fields as a JSON object.
    pub body: Option<Value>,
    /// The kind of the bearer token, if it is one the fake issued.
    pub authorization_kind: Option<TokenKind>,
    /// The HTTP status answered.
    pub status: u16,
}

/// A fault to inject: the next `times` matching Cloud Run requests (with a valid token) get
/// `status` in Google's shape instead of an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The HTTP method to match, or any.
    pub method: Option<Method>,
    /// A substring the request path must contain ("" matches every path).
    pub path_contains: String,
    /// 403 PERMISSION_DENIED (naming the call's permission), 429 RESOURCE_EXHAUSTED, 404,
    /// 409, 500, 503, ...
    pub status: u16,
    /// Sent as the `Retry-After` header and, on a 429, a `RetryInfo` detail.
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

/// A running fake. Clones share the server; dropping the last one (or [`FakeRun::stop`])
/// shuts it and its thread down.
#[derive(Clone)]
pub struct FakeRun {
    inner: Arc<Inner>,
}

struct Inner {
    url: String,
    state: Shared,
    /// Tells the server to stop, and its thread; taken on stop.
    shutdown: Mutex<Option<(oneshot::Sender<()>, JoinHandle<()>)>>,
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

/// The account `patch_by_hand` writes as.
const HAND_EDITOR: &str = "operator@example.com";

impl FakeRun {
    /// Starts a server on 127.0.0.1 at a free port, in a thread of its own with its own tokio
    /// runtime (so sync and async tests alike can use it), with a new RSA key pair.
    ///
    /// # Panics
    /// If no loopback port or thread can be had.
    pub fn start() -> FakeRun {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let address = listener.local_addr().expect("the listener's address");
        let url = format!("http://{address}");
        let state = State {
            url: url.clone(),
            auth: Auth::new("gannet-test"),
            platform: Platform::default(),
            faults: Vec::new(),
            requests: Vec::new(),
        };
        let state: Shared = Arc::new(Mutex::new(state));
        let app = http::router(state.clone());
        let (shutdown, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("fake-cloudrun".to_string())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a tokio runtime");
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
                    tokio::select! {
                        _ = axum::serve(listener, app).into_future() => {}
                        _ = stopped => {}
                    }
                });
            })
            .expect("a thread for the fake Cloud Run API");
        FakeRun {
            inner: Arc::new(Inner {
                url,
                state,
                shutdown: Mutex::new(Some((shutdown, thread))),
            }),
        }
    }

    /// Shuts the server down now (also done when the last clone is dropped). What it stored
    /// stays readable through the handle.
    pub fn stop(&self) {
        self.inner.stop();
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.inner.state)
    }

    /// "http://127.0.0.1:PORT": the base of every endpoint (Cloud Run's `/v2/...`, `/token`,
    /// STS's `/v1/token`, IAM's `/v1/projects/-/serviceAccounts/...`, `/computeMetadata/v1`).
    pub fn url(&self) -> String {
        self.inner.url.clone()
    }

    /// "127.0.0.1:PORT", for `GCE_METADATA_HOST`.
    pub fn host(&self) -> String {
        self.inner.url.trim_start_matches("http://").to_string()
    }

    /// The project of the key file and the metadata server, "gannet-test" (paths may name any).
    pub fn project(&self) -> String {
        self.state().auth.project.clone()
    }

    /// "us-central1" (paths may name any location).
    pub fn location(&self) -> String {
        "us-central1".to_string()
    }

    /// A service account key file (JSON) whose `token_uri` is this fake's `/token`.
    pub fn service_account_key(&self) -> String {
        let token_uri = format!("{}/token", self.url());
        let key_file = self.state().auth.key_file(&token_uri);
        serde_json::to_string_pretty(&key_file).unwrap_or_default()
    }

    /// The workload identity provider STS accepts as `audience`.
    pub fn wif_audience(&self) -> String {
        auth::WIF_AUDIENCE.to_string()
    }

    /// The service account a federated AWS identity may impersonate.
    pub fn impersonated_email(&self) -> String {
        self.state().auth.impersonated_email()
    }

    /// The token of a kind, e.g. to call the API from a test without the token dance.
    pub fn token(&self, kind: TokenKind) -> String {
        self.state().auth.token(kind).to_string()
    }

    /// How many tokens of a kind the fake issued (to check a client caches its token).
    pub fn token_requests(&self, kind: TokenKind) -> usize {
        self.state().auth.issued.get(&kind).copied().unwrap_or(0)
    }

    /// The AWS access key ids of the STS exchanges, oldest first.
    pub fn aws_access_key_ids(&self) -> Vec<String> {
        self.state().auth.aws_access_key_ids.clone()
    }

    /// The service of that name (in any project and location), as `GET` answers it.
    pub fn service(&self, name: &str) -> Option<Value> {
        let mut state = self.state();
        state.platform.settle();
        let name = state.platform.find(name)?;
        state.platform.service(&name).ok()
    }

    /// The service's revisions, newest first.
    pub fn revisions(&self, service: &str) -> Vec<Value> {
        let mut state = self.state();
        state.platform.settle();
        let name = state.platform.find(service);
        let revisions = name.and_then(|name| state.platform.revisions(&name).ok());
        revisions.unwrap_or_default()
    }

    /// Deletes a revision that serves no traffic, as `gcloud run revisions delete` would;
    /// the error body when Cloud Run would refuse.
    pub fn delete_revision(&self, service: &str, revision: &str) -> Result<(), Value> {
        let mut state = self.state();
        let Some(name) = state.platform.find(service) else {
            return Err(Value::Null);
        };
        let deleted = state.platform.delete_revision(&name, revision);
        deleted.map_err(|failure| failure.body)
    }

    /// The traffic served, from `trafficStatuses`: (revision, percent), without the 0%s.
    pub fn traffic(&self, service: &str) -> Vec<(String, i32)> {
        let service = self.service(service).unwrap_or_default();
        let statuses = service["trafficStatuses"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let served = statuses.iter().filter_map(|status| {
            let percent = i32::try_from(status["percent"].as_i64()?).ok()?;
            let revision = status["revision"].as_str()?.to_string();
            (percent > 0).then_some((revision, percent))
        });
        served.collect()
    }

    /// Plays another client (gcloud, the console) editing the service: `edit` changes the
    /// service as `GET` answers it (without `template.revision`, so a changed template gets a
    /// generated revision name; output-only fields are ignored, as on any write), the write
    /// goes the API's way as "operator@example.com", and its operation is done at once.
    /// Answers the done operation, or Google's error body.
    pub fn patch_by_hand(
        &self,
        service: &str,
        edit: impl FnOnce(&mut Value),
    ) -> Result<Value, Value> {
        let mut state = self.state();
        state.platform.settle();
        let not_found = || error::not_found("SERVICE", service, "-", "-").body;
        let name = state.platform.find(service).ok_or_else(not_found)?;
        let mut body = state.platform.service(&name).map_err(|f| f.body)?;
        if let Some(template) = body["template"].as_object_mut() {
            template.remove("revision");
        }
        edit(&mut body);
        let write = Write {
            mode: WriteMode::Update,
            update_mask: None,
            validate_only: false,
            caller: HAND_EDITOR,
            at_once: true,
        };
        let written = state.platform.write(&name, &body, &write);
        written.map_err(|failure| failure.body)
    }

    /// How many polls of an operation it takes to be done, at the most (3 at start; 0: done
    /// at once; `u32::MAX`: only time finishes it, see [`FakeRun::set_rollout_time`]).
    pub fn set_polls_until_done(&self, polls: u32) {
        self.state().platform.pace.polls_until_done = polls;
    }

    /// How long a rollout (or a delete) takes, polled or not (2 s at start): once it has
    /// passed, the operation is done, whoever looks (its poll, the service's `GET`, a list).
    pub fn set_rollout_time(&self, time: Duration) {
        self.state().platform.pace.rollout_time = time;
    }

    /// With `true`, the platform's clock stops and polls no longer move operations on: only
    /// [`FakeRun::advance`] does, as the passing of time would (a test that runs each step
    /// twice, and wants the repeat to see what the first saw, advances between steps). With
    /// `false`, time runs again from where it stopped.
    pub fn hold_operations(&self, held: bool) {
        self.state().platform.pace.clock.hold(held);
    }

    /// Brings every operation not yet done one poll closer to done.
    pub fn advance(&self) {
        self.state().platform.advance();
    }

    /// Injects a fault (see [`Fault`]); faults are matched in the order injected.
    pub fn inject(&self, fault: Fault) {
        self.state().faults.push(fault);
    }

    /// The requests served so far, oldest first.
    pub fn requests(&self) -> Vec<Request> {
        self.state().requests.clone()
    }

    /// Forgets the requests served so far.
    pub fn clear_requests(&self) {
        self.state().requests.clear();
    }
}

pub(crate) fn now() -> String {
    rfc3339(SystemTime::now())
}

/// RFC 3339 in UTC with microseconds, as Google writes timestamps.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    const FORMAT: &[BorrowedFormatItem<'_>] =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");
    OffsetDateTime::from(time.max(UNIX_EPOCH))
        .format(FORMAT)
        .expect("a UTC date and time has every component of the format")
}

pub(crate) fn random_hex(bytes: usize) -> String {
    let mut rng = rand::thread_rng();
    hex::encode((0..bytes).map(|_| rng.gen::<u8>()).collect::<Vec<u8>>())
}

pub(crate) fn random_letters(count: usize) -> String {
    let mut rng = rand::thread_rng();
    (0..count)
        .map(|_| char::from(rng.gen_range(b'a'..=b'z')))
        .collect()
}

/// A UUID4-shaped id.
pub(crate) fn new_uid() -> String {
    let hex = random_hex(16);
    let part = |range: std::ops::Range<usize>| &hex[range];
    format!(
        "{}-{}-4{}-a{}-{}",
        part(0..8),
        part(8..12),
        part(13..16),
        part(17..20),
        part(20..32)
    )
}

/// A quoted etag, new on every write.
pub(crate) fn new_etag() -> String {
    let bytes: [u8; 18] = rand::thread_rng().gen();
    let tag = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    format!("\"{tag}\"")
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_writes_utc_with_microseconds() {
        let time = std::time::UNIX_EPOCH + std::time::Duration::from_micros(1_709_251_199_000_042);
        assert_eq!(super::rfc3339(time), "2024-02-29T23:59:59.000042Z");
        assert_eq!(
            super::rfc3339(std::time::UNIX_EPOCH),
            "1970-01-01T00:00:00.000000Z"
        );
    }
}
