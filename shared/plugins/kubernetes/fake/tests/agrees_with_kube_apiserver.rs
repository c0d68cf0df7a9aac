//! The fake against a real kube-apiserver (issue 31): the same client calls, through `kubectl`
//! and plain HTTP, made to a [`FakeKube`] and to a [`RealKube`], must have the same outcome
//! (the HTTP code and the field of the answer the case is about). A case the fake does not yet
//! agree on is listed in [`EXPECTED_DIFFERENCES`] with the reason; that case must still differ,
//! so fixing the fake means moving the case out of the list.
//!
//! The real server is built by `scripts/kube.sh ensure` (`make test` does it) and kubectl comes
//! from `GANNET_KUBECTL` or `scripts/kube.sh path`.

use std::path::{Path, PathBuf};
use std::process::Command;

use gannet_kube_fake::{FakeKube, RealKube};
use serde_json::{json, Value};

const MERGE: &str = "application/merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";
const JSON: &str = "application/json";
const SMP: &str = "application/strategic-merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

/// Cases where the fake still differs from the real server, and why.
const EXPECTED_DIFFERENCES: &[(&str, &str)] = &[(
    "kubectl reaches the server with its kubeconfig",
    "kubectl 1.36 sends no bearer token over plain HTTP, and the fake serves no TLS, so it \
     answers kubectl 401; the cases send over HTTP the bodies kubectl would",
)];

/// One server as the cases reach it: over HTTP with its token, and through kubectl with a
/// kubeconfig.
struct Server {
    url: String,
    token: String,
    http: reqwest::blocking::Client,
    kubeconfig: PathBuf,
}

impl Server {
    fn fake(fake: &FakeKube, dir: &Path) -> Server {
        Server {
            url: fake.url(),
            token: fake.token().to_string(),
            http: reqwest::blocking::Client::new(),
            kubeconfig: fake.write_kubeconfig(dir),
        }
    }

    fn real(real: &RealKube, dir: &Path) -> Server {
        let ca = std::fs::read(real.dir().join("ca.crt")).unwrap();
        let http = reqwest::blocking::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
            .build()
            .unwrap();
        Server {
            url: real.url(),
            token: real.token().to_string(),
            http,
            kubeconfig: real.write_kubeconfig(dir),
        }
    }

    /// A request; answers the HTTP code and the JSON body (null if none).
    fn call(&self, method: &str, path: &str, body: Option<(&str, Value)>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token);
        if let Some((content_type, body)) = body {
            request = request
                .header("Content-Type", content_type)
                .body(body.to_string());
        }
        let response = request.send().unwrap();
        let code = response.status().as_u16();
        (code, response.json().unwrap_or(Value::Null))
    }

    fn get(&self, path: &str) -> Value {
        let (code, body) = self.call("GET", path, None);
        assert_eq!(code, 200, "GET {path}: {body}");
        body
    }

    fn create(&self, collection: &str, object: Value) {
        let (code, body) = self.call("POST", collection, Some((JSON, object)));
        assert_eq!(code, 201, "POST {collection}: {body}");
    }

    /// kubectl with this server's kubeconfig: whether it succeeded, and its output.
    fn kubectl(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new(kubectl())
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }
}

fn kubectl() -> PathBuf {
    if let Some(path) = std::env::var_os("GANNET_KUBECTL") {
        return PathBuf::from(path);
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../scripts/kube.sh");
    let out = Command::new(script).arg("path").output().unwrap();
    assert!(out.status.success(), "scripts/kube.sh path failed");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("kubectl")
}

fn deployment(name: &str, image: &str) -> Value {
    let labels = json!({"app": name});
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "app", "image": image}]}}}
    })
}

fn config_map(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// The containers' names and images of a Deployment.
fn images(server: &Server, name: &str) -> Value {
    let web = server.get(&format!("{DEPLOYMENTS}/{name}"));
    let containers = web["spec"]["template"]["spec"]["containers"].as_array();
    let pairs = containers.into_iter().flatten();
    pairs.map(|c| json!([c["name"], c["image"]])).collect()
}

/// A case: the calls made, and the outcome compared.
type Case = (&'static str, fn(&Server) -> Value);

const CASES: &[Case] = &[
    ("strict create refuses an unknown field", |s| {
        let mut web = deployment("strict-create", "nginx:1");
        web["spec"]["replica"] = json!(3);
        let path = format!("{DEPLOYMENTS}?fieldValidation=Strict");
        let (code, _) = s.call("POST", &path, Some((JSON, web)));
        let (stored, _) = s.call("GET", &format!("{DEPLOYMENTS}/strict-create"), None);
        json!({"code": code, "stored": stored})
    }),
    ("strict server-side apply refuses an unknown field", |s| {
        let mut web = deployment("strict-apply", "nginx:1");
        web["spec"]["replica"] = json!(3);
        let path = format!("{DEPLOYMENTS}/strict-apply?fieldManager=t&fieldValidation=Strict");
        let (code, _) = s.call("PATCH", &path, Some((APPLY, web)));
        let (stored, _) = s.call("GET", &format!("{DEPLOYMENTS}/strict-apply"), None);
        json!({"code": code, "stored": stored})
    }),
    (
        "a create without fieldValidation drops an unknown field",
        |s| {
            let mut web = deployment("warn-create", "nginx:1");
            web["spec"]["replica"] = json!(3);
            let (code, _) = s.call("POST", DEPLOYMENTS, Some((JSON, web)));
            let stored = s.get(&format!("{DEPLOYMENTS}/warn-create"));
            json!({"code": code, "replica": stored["spec"]["replica"]})
        },
    ),
    (
        "a server-side apply with an unknown field is refused without fieldValidation too",
        |s| {
            let mut web = deployment("warn-apply", "nginx:1");
            web["spec"]["replica"] = json!(3);
            let path = format!("{DEPLOYMENTS}/warn-apply?fieldManager=t");
            let (code, _) = s.call("PATCH", &path, Some((APPLY, web)));
            let (_, stored) = s.call("GET", &format!("{DEPLOYMENTS}/warn-apply"), None);
            json!({"code": code, "replica": stored["spec"]["replica"]})
        },
    ),
    (
        "a ConfigMap whose data holds a number is refused on create",
        |s| {
            let body = config_map("number-create", json!({"a": 1}));
            let (code, body) = s.call("POST", CONFIGMAPS, Some((JSON, body)));
            json!({"code": code, "reason": body["reason"]})
        },
    ),
    (
        "a ConfigMap whose data holds a number is refused on apply",
        |s| {
            let body = config_map("number-apply", json!({"a": 1}));
            let path = format!("{CONFIGMAPS}/number-apply?fieldManager=t");
            let (code, body) = s.call("PATCH", &path, Some((APPLY, body)));
            json!({"code": code, "reason": body["reason"]})
        },
    ),
    (
        "a strategic merge patch (kubectl patch) merges containers by name",
        |s| {
            s.create(DEPLOYMENTS, deployment("smp", "nginx:1"));
            let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "sidecar", "image": "busybox:1"}]}}}});
            let (code, _) = s.call("PATCH", &format!("{DEPLOYMENTS}/smp"), Some((SMP, patch)));
            json!({"code": code, "images": images(s, "smp")})
        },
    ),
    (
        "a strategic merge patch deletes a container with $patch: delete",
        |s| {
            let mut web = deployment("smp-delete", "nginx:1");
            let sidecar = json!({"name": "sidecar", "image": "busybox:1"});
            web["spec"]["template"]["spec"]["containers"]
                .as_array_mut()
                .unwrap()
                .push(sidecar);
            s.create(DEPLOYMENTS, web);
            let patch = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "sidecar", "$patch": "delete"}]}}}});
            let path = format!("{DEPLOYMENTS}/smp-delete");
            let (code, _) = s.call("PATCH", &path, Some((SMP, patch)));
            json!({"code": code, "images": images(s, "smp-delete")})
        },
    ),
    ("kubectl set image's strategic merge patch", |s| {
        // The body kubectl 1.36 sends for `kubectl set image deployment/set-image app=nginx:3`.
        s.create(DEPLOYMENTS, deployment("set-image", "nginx:1"));
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "app"}],
            "containers": [{"image": "nginx:3", "name": "app"}]}}}});
        let path = format!("{DEPLOYMENTS}/set-image");
        let (code, _) = s.call("PATCH", &path, Some((SMP, patch)));
        json!({"code": code, "images": images(s, "set-image")})
    }),
    ("a JSON patch (kubectl patch --type json)", |s| {
        s.create(DEPLOYMENTS, deployment("json-patch", "nginx:1"));
        let patch = json!([
            {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "nginx:2"},
            {"op": "add", "path": "/spec/replicas", "value": 3},
            {"op": "test", "path": "/spec/replicas", "value": 3}]);
        let path = format!("{DEPLOYMENTS}/json-patch");
        let (code, web) = s.call("PATCH", &path, Some((JSON_PATCH, patch)));
        json!({"code": code, "images": images(s, "json-patch"), "replicas": web["spec"]["replicas"]})
    }),
    ("a JSON patch whose test fails is refused", |s| {
        s.create(DEPLOYMENTS, deployment("json-test", "nginx:1"));
        let patch = json!([{"op": "test", "path": "/spec/replicas", "value": 7}]);
        let path = format!("{DEPLOYMENTS}/json-test");
        let (code, _) = s.call("PATCH", &path, Some((JSON_PATCH, patch)));
        json!({"code": code})
    }),
    ("a JSON patch of a missing path is refused", |s| {
        s.create(DEPLOYMENTS, deployment("json-missing", "nginx:1"));
        let patch = json!([{"op": "replace", "path": "/spec/nothing/here", "value": 1}]);
        let path = format!("{DEPLOYMENTS}/json-missing");
        let (code, _) = s.call("PATCH", &path, Some((JSON_PATCH, patch)));
        json!({"code": code})
    }),
    ("a merge patch (kubectl patch --type merge)", |s| {
        s.create(DEPLOYMENTS, deployment("merge-patch", "nginx:1"));
        let patch = json!({"spec": {"replicas": 4}});
        let path = format!("{DEPLOYMENTS}/merge-patch");
        let (code, web) = s.call("PATCH", &path, Some((MERGE, patch)));
        json!({"code": code, "replicas": web["spec"]["replicas"]})
    }),
    ("kubectl reaches the server with its kubeconfig", |s| {
        let (ok, out) = s.kubectl(&["get", "namespace", "default", "-o", "name"]);
        json!({"ok": ok, "out": out})
    }),
    ("a PUT without resourceVersion replaces the object", |s| {
        s.create(CONFIGMAPS, config_map("put", json!({"a": "1"})));
        let body = config_map("put", json!({"a": "2"}));
        let (code, body) = s.call("PUT", &format!("{CONFIGMAPS}/put"), Some((JSON, body)));
        json!({"code": code, "data": body["data"]})
    }),
    ("a PUT with a stale resourceVersion conflicts", |s| {
        s.create(CONFIGMAPS, config_map("put-stale", json!({"a": "1"})));
        let mut body = config_map("put-stale", json!({"a": "2"}));
        body["metadata"]["resourceVersion"] = json!("1");
        let (code, body) = s.call(
            "PUT",
            &format!("{CONFIGMAPS}/put-stale"),
            Some((JSON, body)),
        );
        json!({"code": code, "reason": body["reason"]})
    }),
    ("changing a Service's clusterIP is refused", |s| {
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"ports": [{"port": 80}]}});
        s.create("/api/v1/namespaces/default/services", service);
        let patch =
            json!({"spec": {"clusterIP": "10.96.250.250", "clusterIPs": ["10.96.250.250"]}});
        let path = "/api/v1/namespaces/default/services/web";
        let (code, body) = s.call("PATCH", path, Some((MERGE, patch)));
        json!({"code": code, "reason": body["reason"]})
    }),
    (
        "a LIST with a field selector on metadata.name filters",
        |s| {
            s.create(CONFIGMAPS, config_map("selected", json!({})));
            s.create(CONFIGMAPS, config_map("not-selected", json!({})));
            let list = s.get(&format!(
                "{CONFIGMAPS}?fieldSelector=metadata.name%3Dselected"
            ));
            let items = list["items"].as_array().into_iter().flatten();
            let names: Vec<Value> = items.map(|i| i["metadata"]["name"].clone()).collect();
            json!({"names": names})
        },
    ),
    (
        "a field selector on a field the kind does not index is refused",
        |s| {
            let path = format!("{CONFIGMAPS}?fieldSelector=data.a%3D1");
            let (code, body) = s.call("GET", &path, None);
            json!({"code": code, "reason": body["reason"]})
        },
    ),
    (
        "a Deployment's new annotation is a new generation, a ConfigMap's label is not",
        |s| {
            let path = format!("{DEPLOYMENTS}/annotated?fieldManager=t");
            let mut web = deployment("annotated", "nginx:1");
            s.call("PATCH", &path, Some((APPLY, web.clone())));
            web["metadata"]["annotations"] = json!({"pipecd.dev/commit-hash": "b"});
            let (_, annotated) = s.call("PATCH", &path, Some((APPLY, web.clone())));
            web["metadata"]["labels"] = json!({"team": "x"});
            let (_, labelled) = s.call("PATCH", &path, Some((APPLY, web)));
            json!([
                annotated["metadata"]["generation"],
                labelled["metadata"]["generation"]
            ])
        },
    ),
    // Last: on a server that lets it happen, nothing can be created in default after it.
    ("deleting namespace default is refused", |s| {
        let (code, body) = s.call("DELETE", "/api/v1/namespaces/default", None);
        let (after, _) = s.call("GET", "/api/v1/namespaces/default", None);
        json!({"code": code, "reason": body["reason"], "after": after})
    }),
];

#[test]
fn the_same_calls_have_the_same_outcome_on_the_fake_and_on_kube_apiserver() {
    let fake = FakeKube::start();
    let real = RealKube::start();
    let (fake_dir, real_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let on_fake = Server::fake(&fake, fake_dir.path());
    let on_real = Server::real(&real, real_dir.path());
    let mut wrong = Vec::new();
    for (name, case) in CASES {
        let (fake_outcome, real_outcome) = (case(&on_fake), case(&on_real));
        eprintln!("{name}:\n  fake {fake_outcome}\n  real {real_outcome}");
        let expected_difference = EXPECTED_DIFFERENCES.iter().find(|(n, _)| n == name);
        match expected_difference {
            None if fake_outcome != real_outcome => wrong.push(format!(
                "{name}: the fake answered {fake_outcome}, kube-apiserver {real_outcome}"
            )),
            Some((_, why)) if fake_outcome == real_outcome => wrong.push(format!(
                "{name}: now agrees ({real_outcome}); remove it from EXPECTED_DIFFERENCES \
                 ({why})"
            )),
            _ => {}
        }
    }
    for (name, _) in EXPECTED_DIFFERENCES {
        assert!(CASES.iter().any(|(n, _)| n == name), "no case {name}");
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
