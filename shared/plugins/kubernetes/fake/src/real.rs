//! **A real Kubernetes API server, for tests only**: `kube-apiserver` and its store, built from
//! the Go module proxy and started on loopback by `scripts/kube.sh` (TLS with a CA of its own,
//! a bearer token, an audit log, no controllers). [`RealKube`] has the test helpers
//! [`crate::FakeKube`] has (direct reads, applies and merge patches as any manager, the request
//! log, a stand-in Deployment controller), done over the real API, so one test runs against
//! either.
//!
//! What differs, because the server is real: the request log comes from the server's audit
//! log (method, path, query and field manager; no content type), faults cannot be injected,
//! and the helpers block (use them from a synchronous test, not inside a tokio runtime).
//!
//! `make test` builds the binaries once per machine (`scripts/kube.sh ensure`); without them
//! [`RealKube::start`] fails saying how to get them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::controller::{due, Seen};
use crate::kinds::Kind;
use crate::Request;

/// The script that builds, starts and stops the server.
fn script() -> PathBuf {
    std::env::var_os("GANNET_KUBE_SCRIPT").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../scripts/kube.sh"),
        PathBuf::from,
    )
}

/// The directory of the binaries `scripts/kube.sh` built: kube-apiserver, etcd, kubectl, helm
/// and kustomize.
///
/// # Panics
/// When they are not built, saying how to build them.
pub fn tools_dir() -> PathBuf {
    let out = Command::new(script())
        .arg("path")
        .output()
        .expect("scripts/kube.sh runs");
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        out.status.success() && dir.join("helm").is_file(),
        "the Kubernetes tools are not built: run `scripts/kube.sh ensure` (make test does)"
    );
    dir
}

/// How often the stand-in Deployment controller looks.
const CONTROLLER_TICK: Duration = Duration::from_millis(100);

/// A kube-apiserver of its own, stopped (by PID, through the script) when dropped.
pub struct RealKube {
    dir: tempfile::TempDir,
    url: String,
    token: String,
    kubeconfig: PathBuf,
    http: reqwest::blocking::Client,
    controller: Mutex<Option<(Arc<AtomicBool>, JoinHandle<()>)>>,
}

impl RealKube {
    /// Starts a server (and its store) on 127.0.0.1, waiting until it is ready.
    ///
    /// # Panics
    /// If the binaries are not built, or the server does not start (the script's output says
    /// why).
    pub fn start() -> RealKube {
        let dir = tempfile::tempdir().expect("a directory for the API server");
        // With the owner's pid, the script's watchdog stops the servers should this process
        // die before its Drop runs (a test killed by its harness).
        let out = Command::new(script())
            .arg("start")
            .arg(dir.path())
            .env("GANNET_KUBE_OWNER_PID", std::process::id().to_string())
            .output()
            .expect("scripts/kube.sh runs");
        assert!(
            out.status.success(),
            "scripts/kube.sh start failed (run `make test`, or `scripts/kube.sh ensure` once): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let env = exports(&String::from_utf8_lossy(&out.stdout));
        let var = |name: &str| {
            env.get(name)
                .cloned()
                .unwrap_or_else(|| panic!("scripts/kube.sh start printed no {name}"))
        };
        let ca = std::fs::read(var("GANNET_KUBE_CA")).expect("the API server's CA");
        let http = reqwest::blocking::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("a PEM CA"))
            .timeout(Duration::from_secs(30))
            .build()
            .expect("an HTTPS client");
        RealKube {
            url: var("GANNET_KUBE_URL"),
            token: var("GANNET_KUBE_TOKEN"),
            kubeconfig: PathBuf::from(var("KUBECONFIG")),
            dir,
            http,
            controller: Mutex::new(None),
        }
    }

    /// "https://127.0.0.1:PORT".
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// The admin's bearer token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The server's directory: its certificates, kubeconfig, logs and audit log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `dir/kubeconfig` (the server, its CA, the token, namespace "default") and
    /// returns its path.
    ///
    /// # Panics
    /// If the file cannot be written.
    pub fn write_kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::copy(&self.kubeconfig, &path).expect("the kubeconfig is written");
        path
    }

    /// The object as the API returns it, if any.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let path = object_path(api_version, kind, namespace, name).ok()?;
        let (status, body) = self.call(reqwest::Method::GET, &path, None);
        (status == 200).then_some(body)
    }

    /// Every object of a kind, all namespaces, sorted by namespace and name.
    pub fn list(&self, api_version: &str, kind: &str) -> Vec<Value> {
        let Some(k) = Kind::by_kind(api_version, kind) else {
            return Vec::new();
        };
        let path = format!("{}/{}", group_path(k), k.plural);
        let (status, body) = self.call(reqwest::Method::GET, &path, None);
        if status != 200 {
            return Vec::new();
        }
        let mut items = body["items"].as_array().cloned().unwrap_or_default();
        for item in &mut items {
            item["apiVersion"] = json!(api_version);
            item["kind"] = json!(kind);
        }
        items
    }

    /// Server-side apply of `object` as `manager`; the namespace defaults to "default".
    /// Answers the object, or the server's `Status`.
    pub fn apply_as(&self, manager: &str, object: Value, force: bool) -> Result<Value, Value> {
        let meta = &object["metadata"];
        let path = object_path(
            object["apiVersion"].as_str().unwrap_or_default(),
            object["kind"].as_str().unwrap_or_default(),
            Some(meta["namespace"].as_str().unwrap_or("default")),
            meta["name"].as_str().unwrap_or_default(),
        )?;
        let query = format!("?fieldManager={manager}&force={force}");
        self.patch(
            &format!("{path}{query}"),
            "application/apply-patch+yaml",
            object,
        )
    }

    /// A JSON merge patch as `manager` (an Update, like `kubectl edit` or an HPA).
    pub fn merge_patch_as(
        &self,
        manager: &str,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
        patch: Value,
    ) -> Result<Value, Value> {
        let path = object_path(api_version, kind, namespace, name)?;
        let path = format!("{path}?fieldManager={manager}");
        self.patch(&path, "application/merge-patch+json", patch)
    }

    /// The requests the server has logged so far (its audit log), oldest first. The content
    /// type is not in the audit log, so it is `None`.
    pub fn requests(&self) -> Vec<Request> {
        let text = std::fs::read_to_string(self.dir.path().join("audit.log")).unwrap_or_default();
        text.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|e| e["stage"] == "ResponseComplete")
            .map(|e| {
                let uri = e["requestURI"].as_str().unwrap_or_default();
                let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
                let field_manager = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("fieldManager="))
                    .map(str::to_owned);
                Request {
                    method: method_of(e["verb"].as_str().unwrap_or_default()).to_owned(),
                    path: path.to_owned(),
                    query: query.to_owned(),
                    field_manager,
                    content_type: None,
                    status: e["responseStatus"]["code"]
                        .as_u64()
                        .and_then(|c| u16::try_from(c).ok())
                        .unwrap_or(0),
                }
            })
            .collect()
    }

    /// Plays the Deployment controller (none runs): every Deployment whose status lags its
    /// spec for `delay` (from the generation it lags) gets a rolled-out status through the
    /// status subresource, as "kube-controller-manager" would write it.
    pub fn play_deployment_controller(&self, delay: Duration) {
        self.stop_playing_deployment_controller();
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, http) = (stop.clone(), self.http.clone());
        let (url, token) = (self.url.clone(), self.token.clone());
        let thread = std::thread::spawn(move || {
            let mut seen = Seen::new();
            while !flag.load(Ordering::Relaxed) {
                let list = http
                    .get(format!("{url}/apis/apps/v1/deployments"))
                    .bearer_auth(&token)
                    .send()
                    .and_then(|r| r.json::<Value>());
                for d in list
                    .ok()
                    .and_then(|l| l["items"].as_array().cloned())
                    .unwrap_or_default()
                {
                    let Some((ns, name, status)) = due(&d, &mut seen, delay) else {
                        continue;
                    };
                    // A Deployment deleted meanwhile is skipped, as a controller would.
                    let _ = http
                        .patch(format!(
                            "{url}/apis/apps/v1/namespaces/{ns}/deployments/{name}/status?fieldManager=kube-controller-manager"
                        ))
                        .bearer_auth(&token)
                        .header("content-type", "application/merge-patch+json")
                        .body(json!({ "status": status }).to_string())
                        .send();
                }
                std::thread::sleep(CONTROLLER_TICK);
            }
        });
        if let Ok(mut c) = self.controller.lock() {
            *c = Some((stop, thread));
        }
    }

    /// Stops playing the Deployment controller.
    pub fn stop_playing_deployment_controller(&self) {
        let playing = self.controller.lock().ok().and_then(|mut c| c.take());
        if let Some((stop, thread)) = playing {
            stop.store(true, Ordering::Relaxed);
            let _ = thread.join();
        }
    }

    /// Installs the Istio `VirtualService` and `DestinationRule` CRDs (v1 and v1beta1, any
    /// spec) and waits until the server serves them.
    ///
    /// # Panics
    /// If the server refuses them or does not serve them within 30 s.
    pub fn install_istio_crds(&self) {
        for (kind, plural) in [
            ("VirtualService", "virtualservices"),
            ("DestinationRule", "destinationrules"),
        ] {
            let versions: Vec<Value> = ["v1", "v1beta1"]
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    json!({
                        "name": v, "served": true, "storage": i == 0,
                        "schema": {"openAPIV3Schema": {"type": "object",
                            "properties": {"spec": {"type": "object",
                                "x-kubernetes-preserve-unknown-fields": true}}}}
                    })
                })
                .collect();
            let crd = json!({
                "apiVersion": "apiextensions.k8s.io/v1",
                "kind": "CustomResourceDefinition",
                "metadata": {"name": format!("{plural}.networking.istio.io")},
                "spec": {
                    "group": "networking.istio.io",
                    "scope": "Namespaced",
                    "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(),
                              "listKind": format!("{kind}List")},
                    "versions": versions
                }
            });
            let name = format!("{plural}.networking.istio.io");
            let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}");
            let query = "?fieldManager=e2e-setup&force=true";
            self.patch(
                &format!("{path}{query}"),
                "application/apply-patch+yaml",
                crd,
            )
            .unwrap_or_else(|e| panic!("the {kind} CRD is refused: {e}"));
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let (status, _) = self.call(
                    reqwest::Method::GET,
                    &format!("/apis/networking.istio.io/v1beta1/{plural}"),
                    None,
                );
                if status == 200 {
                    break;
                }
                assert!(Instant::now() < deadline, "the {kind} CRD is not served");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    fn patch(&self, path: &str, content_type: &str, body: Value) -> Result<Value, Value> {
        let (status, answer) = self.call(
            reqwest::Method::PATCH,
            path,
            Some((content_type, body.to_string())),
        );
        if (200..300).contains(&status) {
            Ok(answer)
        } else {
            Err(answer)
        }
    }

    fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<(&str, String)>,
    ) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token);
        if let Some((content_type, body)) = body {
            request = request.header("content-type", content_type).body(body);
        }
        match request.send() {
            Ok(response) => {
                let status = response.status().as_u16();
                (status, response.json().unwrap_or(Value::Null))
            }
            Err(e) => (0, json!({"message": e.to_string()})),
        }
    }
}

impl Drop for RealKube {
    fn drop(&mut self) {
        self.stop_playing_deployment_controller();
        let _ = Command::new(script())
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}

/// `export NAME=VALUE` lines (values optionally quoted), as the script prints them.
fn exports(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("export "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| {
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v);
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

fn group_path(kind: &Kind) -> String {
    if kind.group.is_empty() {
        format!("/api/{}", kind.version)
    } else {
        format!("/apis/{}/{}", kind.group, kind.version)
    }
}

/// The object's URL path, for the kinds [`Kind`] knows.
fn object_path(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Result<String, Value> {
    let k = Kind::by_kind(api_version, kind).ok_or_else(
        || json!({"message": format!("kind {kind} ({api_version}) is not in the test table")}),
    )?;
    Ok(match namespace.filter(|_| k.namespaced) {
        Some(ns) => format!("{}/namespaces/{ns}/{}/{name}", group_path(k), k.plural),
        None => format!("{}/{}/{name}", group_path(k), k.plural),
    })
}

/// The HTTP method of an audit event's verb.
fn method_of(verb: &str) -> &'static str {
    match verb {
        "create" => "POST",
        "update" => "PUT",
        "patch" => "PATCH",
        "delete" | "deletecollection" => "DELETE",
        _ => "GET",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripts_exports_read_quoted_or_not() {
        let env = exports("export A=\"x y\"\nexport B=/tmp/ca.pem\nnoise\nexport C='z'\n");
        assert_eq!(env["A"], "x y");
        assert_eq!(env["B"], "/tmp/ca.pem");
        assert_eq!(env["C"], "z");
    }

    #[test]
    fn paths_follow_the_group_and_the_scope() {
        assert_eq!(
            object_path("apps/v1", "Deployment", Some("default"), "web").unwrap(),
            "/apis/apps/v1/namespaces/default/deployments/web"
        );
        assert_eq!(
            object_path("v1", "Namespace", Some("default"), "x").unwrap(),
            "/api/v1/namespaces/x"
        );
        assert!(object_path("example.com/v1", "Widget", None, "w").is_err());
    }
}
