//! The fake over plain HTTP: response shapes, server-side apply, selectors, deletes, faults.

use std::thread::sleep;
use std::time::Duration;

use gannet_kube_fake::{FakeKube, Fault};
use serde_json::{json, Value};

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";
const MERGE: &str = "application/merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

/// An answer: HTTP code, JSON body and `Retry-After` header.
struct Answer {
    code: u16,
    body: Value,
    retry_after: Option<String>,
}

fn send(fake: &FakeKube, method: &str, path: &str, body: Option<(&str, &Value)>) -> Answer {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let url = format!("{}{path}", fake.url());
    let mut request = reqwest::blocking::Client::new()
        .request(method, url)
        .bearer_auth(fake.token());
    if let Some((content_type, body)) = body {
        request = request
            .header("Content-Type", content_type)
            .body(body.to_string());
    }
    let response = request.send().unwrap();
    let retry_after = response
        .headers()
        .get("Retry-After")
        .map(|v| v.to_str().unwrap().into());
    Answer {
        code: response.status().as_u16(),
        body: response.json().unwrap(),
        retry_after,
    }
}

fn get(fake: &FakeKube, path: &str) -> Answer {
    send(fake, "GET", path, None)
}

/// Server-side apply of a Deployment in "default".
fn apply(fake: &FakeKube, manager: &str, object: &Value, force: bool) -> Answer {
    let name = object["metadata"]["name"].as_str().unwrap();
    let path = format!("{DEPLOYMENTS}/{name}?fieldManager={manager}&force={force}");
    send(fake, "PATCH", &path, Some((APPLY, object)))
}

/// A merge patch of the Deployment "web" as `manager`.
fn patch_as(fake: &FakeKube, manager: &str, patch: Value) -> Result<Value, Value> {
    fake.merge_patch_as(
        manager,
        "apps/v1",
        "Deployment",
        Some("default"),
        "web",
        patch,
    )
}

fn stored(fake: &FakeKube, name: &str) -> Option<Value> {
    fake.get("apps/v1", "Deployment", Some("default"), name)
}

fn deployment(name: &str, replicas: u32, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": image}]}}}
    })
}

/// The managedFields entry of a manager.
fn entry<'a>(object: &'a Value, manager: &str) -> &'a Value {
    let entries = object["metadata"]["managedFields"].as_array().unwrap();
    entries
        .iter()
        .find(|e| e["manager"] == manager)
        .unwrap_or(&Value::Null)
}

#[test]
fn requests_without_the_token_are_unauthorized() {
    let fake = FakeKube::start();
    let url = format!("{}/api/v1/namespaces", fake.url());
    let response = reqwest::blocking::get(url).unwrap();
    assert_eq!(response.status().as_u16(), 401);
    let body: Value = response.json().unwrap();
    assert_eq!(
        (&body["kind"], &body["reason"]),
        (&json!("Status"), &json!("Unauthorized"))
    );
    assert_eq!(fake.requests()[0].status, 401);
}

#[test]
fn the_request_log_is_served_as_json_with_the_token_and_is_not_logged_itself() {
    let fake = FakeKube::start();
    apply(&fake, "gannet", &deployment("web", 1, "web:1"), false);
    get(&fake, &format!("{DEPLOYMENTS}?labelSelector=app%3Dweb"));
    let log = get(&fake, gannet_kube_fake::REQUESTS_PATH);
    assert_eq!(log.code, 200);
    assert_eq!(
        log.body,
        json!([
            {"method": "PATCH", "path": format!("{DEPLOYMENTS}/web"),
             "query": "fieldManager=gannet&force=false", "fieldManager": "gannet",
             "contentType": APPLY, "status": 201},
            {"method": "GET", "path": DEPLOYMENTS, "query": "labelSelector=app%3Dweb",
             "fieldManager": null, "contentType": null, "status": 200}
        ])
    );
    let url = format!("{}{}", fake.url(), gannet_kube_fake::REQUESTS_PATH);
    let anonymous = reqwest::blocking::get(url).unwrap();
    assert_eq!(anonymous.status().as_u16(), 401);
    assert_eq!(fake.requests().len(), 3, "only the refused one is logged");
}

#[test]
fn discovery_lists_versions_groups_and_resources() {
    let fake = FakeKube::start();
    assert_eq!(get(&fake, "/version").body["gitVersion"], "v1.33.0");
    assert_eq!(get(&fake, "/api").body["versions"], json!(["v1"]));
    let groups = get(&fake, "/apis").body;
    let groups = groups["groups"].as_array().unwrap();
    let istio = groups
        .iter()
        .find(|g| g["name"] == "networking.istio.io")
        .unwrap();
    assert_eq!(
        istio["preferredVersion"]["groupVersion"],
        "networking.istio.io/v1"
    );
    assert_eq!(istio["versions"].as_array().unwrap().len(), 2);
    let apps = get(&fake, "/apis/apps/v1").body;
    assert_eq!(apps["kind"], "APIResourceList");
    let resource = |list: &Value, name: &str| {
        let resources = list["resources"].as_array().unwrap().clone();
        resources.into_iter().find(|r| r["name"] == name).unwrap()
    };
    let deployments = resource(&apps, "deployments");
    assert_eq!(
        (&deployments["kind"], &deployments["namespaced"]),
        (&json!("Deployment"), &json!(true))
    );
    assert_eq!(deployments["singularName"], "deployment");
    assert_eq!(resource(&apps, "deployments/status")["kind"], "Deployment");
    assert_eq!(
        resource(&get(&fake, "/api/v1").body, "namespaces")["namespaced"],
        false
    );
    let missing = get(&fake, "/apis/nope.example.com/v1");
    assert_eq!(
        (missing.code, &missing.body["reason"]),
        (404, &json!("NotFound"))
    );
}

#[test]
fn apply_creates_once_then_changes_nothing_until_the_spec_changes() {
    let fake = FakeKube::start();
    let created = apply(&fake, "gannet", &deployment("web", 2, "web:1"), false);
    assert_eq!(created.code, 201);
    let created = created.body;
    assert_eq!(created["metadata"]["generation"], 1);
    assert_eq!(created["metadata"]["uid"].as_str().unwrap().len(), 36);
    let managed = &created["metadata"]["managedFields"];
    assert_eq!(managed.as_array().unwrap().len(), 1);
    let owned = json!({
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {"f:containers": {
                "k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}}}
        }}
    });
    let expected = json!({"manager": "gannet", "operation": "Apply", "apiVersion": "apps/v1",
        "time": managed[0]["time"], "fieldsType": "FieldsV1", "fieldsV1": owned});
    assert_eq!(managed[0], expected);
    let spec = &created["spec"];
    assert_eq!(
        spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxSurge"], "25%");
    assert_eq!(spec["template"]["spec"]["dnsPolicy"], "ClusterFirst");

    let again = apply(&fake, "gannet", &deployment("web", 2, "web:1"), false);
    assert_eq!(
        (again.code, &again.body),
        (200, &created),
        "a re-apply changes nothing"
    );

    let changed = apply(&fake, "gannet", &deployment("web", 2, "web:2"), false).body;
    assert_eq!(changed["metadata"]["generation"], 2);
    assert_ne!(
        changed["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    assert_eq!(stored(&fake, "web"), Some(changed));
}

#[test]
fn applying_a_field_another_manager_owns_conflicts_unless_forced() {
    let fake = FakeKube::start();
    apply(&fake, "alpha", &deployment("web", 2, "web:1"), false);
    let shared = apply(&fake, "beta", &deployment("web", 2, "web:1"), false);
    assert_eq!(shared.code, 200, "equal values are shared");
    let conflict = apply(&fake, "beta", &deployment("web", 3, "web:1"), false);
    assert_eq!(
        (conflict.code, &conflict.body["reason"]),
        (409, &json!("Conflict"))
    );
    let message = "Apply failed with 1 conflict: conflict with \"alpha\": .spec.replicas";
    assert_eq!(conflict.body["message"], message);
    let cause = json!({"reason": "FieldManagerConflict", "message": "conflict with \"alpha\"",
        "field": ".spec.replicas"});
    assert_eq!(conflict.body["details"]["causes"], json!([cause]));

    let forced = apply(&fake, "beta", &deployment("web", 3, "web:1"), true);
    assert_eq!(
        (forced.code, &forced.body["spec"]["replicas"]),
        (200, &json!(3))
    );
    assert!(entry(&forced.body, "alpha")["fieldsV1"]["f:spec"]
        .get("f:replicas")
        .is_none());
    assert!(entry(&forced.body, "beta")["fieldsV1"]["f:spec"]
        .get("f:replicas")
        .is_some());
}

#[test]
fn a_merge_patch_takes_the_fields_it_changes() {
    let fake = FakeKube::start();
    apply(&fake, "gannet", &deployment("web", 2, "web:1"), false);
    let path = format!("{DEPLOYMENTS}/web?fieldManager=kubectl-edit");
    let patched = send(
        &fake,
        "PATCH",
        &path,
        Some((MERGE, &json!({"spec": {"replicas": 5}}))),
    );
    assert_eq!(
        (patched.code, &patched.body["metadata"]["generation"]),
        (200, &json!(2))
    );
    let edit = entry(&patched.body, "kubectl-edit");
    assert_eq!(
        (&edit["operation"], &edit["fieldsV1"]),
        (&json!("Update"), &json!({"f:spec": {"f:replicas": {}}}))
    );

    let conflict = apply(&fake, "gannet", &deployment("web", 2, "web:1"), false);
    assert_eq!(conflict.code, 409);
    let cause = &conflict.body["details"]["causes"][0];
    assert_eq!(
        cause["message"],
        "conflict with \"kubectl-edit\" using apps/v1"
    );
    let no_op = patch_as(&fake, "hpa", json!({}));
    let version = &patched.body["metadata"]["resourceVersion"];
    assert_eq!(&no_op.unwrap()["metadata"]["resourceVersion"], version);
}

#[test]
fn a_field_left_out_of_the_next_apply_is_removed_unless_another_manager_owns_it() {
    let fake = FakeKube::start();
    let mut web = deployment("web", 2, "web:1");
    web["metadata"]["labels"]["team"] = json!("a");
    web["metadata"]["annotations"] = json!({"note": "x"});
    let containers = json!([{"name": "app", "image": "web:1"}, {"name": "log", "image": "log:1"},
        {"name": "proxy", "image": "proxy:1"}]);
    web["spec"]["template"]["spec"]["containers"] = containers.clone();
    apply(&fake, "gannet", &web, false);
    let mut edited = containers;
    edited[2]["image"] = json!("proxy:2");
    let edit = json!({"metadata": {"labels": {"extra": "kept"}},
        "spec": {"template": {"spec": {"containers": edited}}}});
    patch_as(&fake, "kubectl-edit", edit).unwrap();

    let applied = apply(&fake, "gannet", &deployment("web", 2, "web:1"), false).body;
    assert_eq!(
        applied["metadata"]["labels"],
        json!({"app": "web", "extra": "kept"})
    );
    assert!(applied["metadata"].get("annotations").is_none());
    let containers = applied["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    let left: Vec<_> = containers
        .iter()
        .map(|c| (&c["name"], &c["image"]))
        .collect();
    let proxy = (&json!("proxy"), &json!("proxy:2"));
    assert_eq!(
        left,
        [(&json!("app"), &json!("web:1")), proxy],
        "the edited field stays"
    );
}

#[test]
fn lists_select_by_label() {
    let fake = FakeKube::start();
    let labels = [
        ("a", json!({"app": "web", "tier": "front"})),
        ("b", json!({"app": "db"})),
    ];
    for (name, labels) in labels.into_iter().chain([("c", json!({}))]) {
        let metadata = json!({"name": name, "labels": labels});
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata});
        fake.apply_as("gannet", object, false).unwrap();
    }
    let cases = [
        ("app=web", "a"),
        ("app==web", "a"),
        ("app!=web", "b,c"),
        ("app", "a,b"),
        ("!app", "c"),
        ("app%20in%20(web,db)", "a,b"),
        ("app%20notin%20(web)", "b,c"),
        ("app,tier=front", "a"),
    ];
    for (selector, expected) in cases {
        let list = get(
            &fake,
            &format!("/api/v1/namespaces/default/configmaps?labelSelector={selector}"),
        );
        assert_eq!(
            (list.code, &list.body["kind"]),
            (200, &json!("ConfigMapList")),
            "{selector}"
        );
        assert!(list.body["metadata"]["resourceVersion"].is_string());
        let items = list.body["items"].as_array().unwrap();
        assert!(items
            .iter()
            .all(|item| item.get("kind").is_none() && item.get("apiVersion").is_none()));
        let names: Vec<&str> = items
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.join(","), expected, "{selector}");
    }
    let bad = get(
        &fake,
        "/api/v1/namespaces/default/configmaps?labelSelector=app%20in%20web",
    );
    assert_eq!((bad.code, &bad.body["reason"]), (400, &json!("BadRequest")));
    apply(&fake, "gannet", &deployment("web", 1, "web:1"), false);
    let everywhere = get(&fake, "/apis/apps/v1/deployments").body;
    assert_eq!(everywhere["items"][0]["metadata"]["namespace"], "default");
    assert_eq!(fake.list("v1", "ConfigMap").len(), 3);
}

#[test]
fn a_put_with_a_stale_resource_version_conflicts() {
    let fake = FakeKube::start();
    let mut web = apply(&fake, "gannet", &deployment("web", 1, "web:1"), false).body;
    apply(&fake, "gannet", &deployment("web", 1, "web:2"), false);
    web["spec"]["replicas"] = json!(4);
    let path = format!("{DEPLOYMENTS}/web?fieldManager=kubectl-replace");
    let stale = send(&fake, "PUT", &path, Some(("application/json", &web)));
    assert_eq!(stale.code, 409);
    let message = "Operation cannot be fulfilled on deployments.apps \"web\": the object has been \
        modified; please apply your changes to the latest version and try again";
    assert_eq!(stale.body["message"], message);
    let mut current = stored(&fake, "web").unwrap();
    current["spec"]["replicas"] = json!(4);
    let replaced = send(&fake, "PUT", &path, Some(("application/json", &current))).body;
    assert_eq!(replaced["spec"]["replicas"], 4);
    let owned = &entry(&replaced, "kubectl-replace")["fieldsV1"];
    assert_eq!(owned, &json!({"f:spec": {"f:replicas": {}}}));
}

#[test]
fn deletes_propagate_to_owned_objects() {
    let fake = FakeKube::start();
    for (propagation, dependent_left) in [("Background", false), ("Orphan", true)] {
        let owner = apply(&fake, "gannet", &deployment("web", 1, "web:1"), false).body;
        let uid = &owner["metadata"]["uid"];
        let mut owned = deployment("web-1", 1, "web:1");
        owned["kind"] = json!("ReplicaSet");
        owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1",
            "kind": "Deployment", "name": "web", "uid": uid, "controller": true}]);
        fake.apply_as("kube-controller-manager", owned, false)
            .unwrap();
        let options = json!({"kind": "DeleteOptions", "propagationPolicy": propagation});
        let deleted = send(
            &fake,
            "DELETE",
            &format!("{DEPLOYMENTS}/web"),
            Some(("application/json", &options)),
        );
        assert_eq!(
            (deleted.code, &deleted.body["status"]),
            (200, &json!("Success"))
        );
        assert_eq!(&deleted.body["details"]["uid"], uid);
        assert_eq!(stored(&fake, "web"), None);
        let left = fake.get("apps/v1", "ReplicaSet", Some("default"), "web-1");
        assert_eq!(left.is_some(), dependent_left, "{propagation}");
        if let Some(left) = left {
            assert!(left["metadata"].get("ownerReferences").is_none());
            let owned = &entry(&left, "kube-controller-manager")["fieldsV1"]["f:metadata"];
            assert!(owned.get("f:ownerReferences").is_none());
        }
    }
    let missing = send(&fake, "DELETE", &format!("{DEPLOYMENTS}/web"), None);
    assert_eq!(
        (missing.code, &missing.body["message"]),
        (404, &json!("deployments.apps \"web\" not found"))
    );
    assert_eq!(
        missing.body["details"],
        json!({"name": "web", "group": "apps", "kind": "deployments"})
    );
}

#[test]
fn only_the_status_subresource_writes_status() {
    let fake = FakeKube::start();
    let mut web = deployment("web", 1, "web:1");
    web["status"] = json!({"replicas": 7});
    assert!(apply(&fake, "gannet", &web, false)
        .body
        .get("status")
        .is_none());
    let status = json!({"status": {"replicas": 1}, "spec": {"replicas": 9}});
    let path = format!("{DEPLOYMENTS}/web/status?fieldManager=controller");
    let patched = send(&fake, "PATCH", &path, Some((MERGE, &status))).body;
    assert_eq!(
        (&patched["status"], &patched["spec"]["replicas"]),
        (&json!({"replicas": 1}), &json!(1))
    );
    assert_eq!(entry(&patched, "controller")["subresource"], "status");
    let applied = apply(&fake, "gannet", &web, false).body;
    assert_eq!(
        applied["status"]["replicas"], 1,
        "main writes keep the stored status"
    );
    assert_eq!(
        get(&fake, &format!("{DEPLOYMENTS}/web/status")).body,
        applied
    );
}

#[test]
fn invalid_objects_are_rejected_with_the_real_messages() {
    let fake = FakeKube::start();
    let invalid = |path: &str, object: Value, message: &str, field: &str| {
        let answer = send(&fake, "POST", path, Some(("application/json", &object)));
        assert_eq!(
            (answer.code, &answer.body["reason"]),
            (422, &json!("Invalid")),
            "{message}"
        );
        let text = answer.body["message"].as_str().unwrap();
        assert!(text.contains(message), "{text} / {message}");
        assert_eq!(
            answer.body["details"]["causes"][0]["field"], field,
            "{message}"
        );
    };
    let nameless = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}});
    invalid(
        DEPLOYMENTS,
        nameless,
        "Deployment.apps \"\" is invalid: [metadata.name: Required \
        value: name or generateName is required, spec.selector: Required value, \
        spec.template.metadata.labels: Invalid value: map[string]string(nil): `selector` does \
        not match template `labels`]",
        "metadata.name",
    );
    invalid(
        DEPLOYMENTS,
        deployment("Web_1", 1, "web:1"),
        "Deployment.apps \"Web_1\" is invalid: \
        metadata.name: Invalid value: \"Web_1\": a lowercase RFC 1123 subdomain",
        "metadata.name",
    );
    let mut web = deployment("web", 1, "web:1");
    web["spec"]["selector"]["matchLabels"]["app"] = json!("other");
    invalid(
        DEPLOYMENTS,
        web.clone(),
        "Deployment.apps \"web\" is invalid: \
        spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: \
        `selector` does not match template `labels`",
        "spec.template.metadata.labels",
    );
    web["spec"].as_object_mut().unwrap().remove("selector");
    invalid(
        DEPLOYMENTS,
        web,
        "is invalid: [spec.selector: Required value, ",
        "spec.selector",
    );
    let mut web = deployment("web", 1, "web:1");
    web["metadata"]["labels"]["app"] = json!("x".repeat(64));
    invalid(
        DEPLOYMENTS,
        web.clone(),
        "must be no more than 63 characters",
        "metadata.labels",
    );
    web["metadata"]["labels"]["app"] = json!("a b");
    let message = "metadata.labels: Invalid value: \"a b\": a valid label must be";
    invalid(DEPLOYMENTS, web, message, "metadata.labels");
    for ports in [json!([]), Value::Null] {
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"ports": ports}});
        let message = "Service \"web\" is invalid: spec.ports: Required value";
        invalid(
            "/api/v1/namespaces/default/services",
            service,
            message,
            "spec.ports",
        );
    }

    apply(&fake, "gannet", &deployment("web", 1, "web:1"), false);
    let mut moved = deployment("web", 1, "web:1");
    moved["spec"]["selector"]["matchLabels"]["tier"] = json!("x");
    moved["spec"]["template"]["metadata"]["labels"]["tier"] = json!("x");
    let immutable = apply(&fake, "gannet", &moved, false);
    assert_eq!(immutable.code, 422);
    let message = "Deployment.apps \"web\" is invalid: spec.selector: Invalid value: \
        v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"web\", \"tier\":\"x\"}, \
        MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable";
    assert_eq!(immutable.body["message"], message);
    let no_manager = send(
        &fake,
        "PATCH",
        &format!("{DEPLOYMENTS}/web"),
        Some((APPLY, &moved)),
    );
    assert_eq!(
        (no_manager.code, &no_manager.body["details"]["kind"]),
        (422, &json!("PatchOptions"))
    );
}

#[test]
fn a_missing_namespace_is_not_found() {
    let fake = FakeKube::start();
    let mut web = deployment("web", 1, "web:1");
    web["metadata"]["namespace"] = json!("shop");
    let path = "/apis/apps/v1/namespaces/shop/deployments/web?fieldManager=gannet";
    let missing = send(&fake, "PATCH", path, Some((APPLY, &web)));
    assert_eq!(
        (missing.code, &missing.body["message"]),
        (404, &json!("namespaces \"shop\" not found"))
    );
    assert_eq!(
        missing.body["details"],
        json!({"name": "shop", "kind": "namespaces"})
    );
    let shop = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}});
    let created = send(
        &fake,
        "PATCH",
        "/api/v1/namespaces/shop?fieldManager=gannet",
        Some((APPLY, &shop)),
    );
    assert_eq!(created.code, 201);
    assert_eq!(send(&fake, "PATCH", path, Some((APPLY, &web))).code, 201);
}

#[test]
fn injected_faults_answer_instead_of_the_server() {
    let fake = FakeKube::start();
    fake.inject(Fault {
        method: Some("GET".into()),
        path_contains: "/deployments".into(),
        status: 429,
        retry_after_secs: Some(3),
        times: 1,
    });
    let limited = get(&fake, DEPLOYMENTS);
    assert_eq!(
        (limited.code, limited.retry_after.as_deref()),
        (429, Some("3"))
    );
    let body = &limited.body;
    assert_eq!(
        (&body["reason"], &body["code"]),
        (&json!("TooManyRequests"), &json!(429))
    );
    assert_eq!(body["details"]["retryAfterSeconds"], 3);
    assert_eq!(
        get(&fake, DEPLOYMENTS).code,
        200,
        "only `times` requests fail"
    );
    fake.inject(Fault {
        status: 503,
        times: 2,
        ..Fault::default()
    });
    assert_eq!(get(&fake, "/api").code, 503);
    let requests = fake.requests();
    assert_eq!(
        requests.iter().map(|r| r.status).collect::<Vec<_>>(),
        [429, 200, 503]
    );
    assert_eq!(
        (requests[0].method.as_str(), requests[0].path.as_str()),
        ("GET", DEPLOYMENTS)
    );
    fake.clear_requests();
    assert!(fake.requests().is_empty());
}

#[test]
fn dry_runs_store_nothing() {
    let fake = FakeKube::start();
    let path = format!("{DEPLOYMENTS}/web?fieldManager=gannet&dryRun=All");
    let would_be = send(
        &fake,
        "PATCH",
        &path,
        Some((APPLY, &deployment("web", 1, "web:1"))),
    );
    assert_eq!(
        (would_be.code, &would_be.body["metadata"]["generation"]),
        (201, &json!(1))
    );
    assert_eq!(stored(&fake, "web"), None);
    let request = &fake.requests()[0];
    assert_eq!(
        (
            request.field_manager.as_deref(),
            request.content_type.as_deref()
        ),
        (Some("gannet"), Some(APPLY))
    );
}

#[test]
fn the_deployment_controller_rolls_out_after_the_delay() {
    let fake = FakeKube::start();
    fake.play_deployment_controller(Duration::from_millis(300));
    apply(&fake, "gannet", &deployment("web", 3, "web:1"), false);
    sleep(Duration::from_millis(60));
    assert_eq!(
        stored(&fake, "web").unwrap().get("status"),
        None,
        "not before the delay"
    );
    let rolled_out = |generation: i64| {
        (0..100).any(|_| {
            sleep(Duration::from_millis(20));
            let status = stored(&fake, "web").unwrap()["status"].clone();
            status["observedGeneration"] == generation && status["readyReplicas"] == 3
        })
    };
    assert!(rolled_out(1));
    let web = stored(&fake, "web").unwrap();
    let conditions = web["status"]["conditions"].as_array().unwrap();
    assert!(conditions
        .iter()
        .any(|c| c["type"] == "Progressing" && c["reason"] == "NewReplicaSetAvailable"));
    let controller = entry(&web, "kube-controller-manager");
    assert_eq!(
        (&controller["operation"], &controller["subresource"]),
        (&json!("Update"), &json!("status"))
    );
    apply(&fake, "gannet", &deployment("web", 3, "web:2"), false);
    assert!(rolled_out(2));

    fake.stop_playing_deployment_controller();
    apply(&fake, "gannet", &deployment("web", 3, "web:3"), false);
    sleep(Duration::from_millis(300));
    assert_eq!(
        stored(&fake, "web").unwrap()["status"]["observedGeneration"],
        2
    );
}
