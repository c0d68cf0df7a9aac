//! The Cloud Run fake held to Google's own client. **The server here is a FAKE** (no Cloud Run
//! emulator exists); **Google's client is the check**: google-cloud-run over its REST
//! transport and google-auth, pinned from PyPI by `scripts/gcloud-client.sh`, drive it from
//! `tests/google_client.py` over loopback, with credentials as Google's auth library really
//! obtains them (the key file's self-signed JWTs, its JWT-bearer grant, the metadata server).
//! Whatever the client could not do, or read differently from what the real API answers, fails
//! here. The Python runs with every proxy pointing at a closed port, so it cannot reach Google.
//!
//! The client's venv: `GANNET_GCLOUD_PYTHON` (`make test` sets it), else what
//! `scripts/gcloud-client.sh path` installs (see `run_google_client`).

use std::path::Path;
use std::time::Duration;

use gannet_cloudrun_fake::{run_google_client, FakeRun, Request, TokenKind};
use serde_json::{json, Value};

const PROJECT: &str = "gannet-test";
const LOCATION: &str = "us-central1";
const PARENT: &str = "projects/gannet-test/locations/us-central1";

/// Google's client run with `args`; its JSON, or a panic with its stderr.
fn driver(args: &[&str], env: &[(&str, String)]) -> Value {
    run_google_client(args, env).unwrap_or_else(|e| panic!("{e}"))
}

/// Asserts that each JSON pointer of `value` has its expected value (`null`: absent).
fn check(value: &Value, expected: &[(&str, Value)]) {
    for (pointer, want) in expected {
        let got = value.pointer(pointer).unwrap_or(&Value::Null);
        assert_eq!(got, want, "{pointer} in {value:#}");
    }
}

fn key_file(fake: &FakeRun, dir: &Path) -> String {
    let path = dir.join("key.json");
    std::fs::write(&path, fake.service_account_key()).expect("the key file");
    path.to_string_lossy().into_owned()
}

fn cloud_run_calls(requests: &[Request]) -> impl Iterator<Item = &Request> {
    requests.iter().filter(|r| r.path.starts_with("/v2/"))
}

#[test]
fn googles_client_creates_reads_updates_lists_and_deletes_services_on_the_fake() {
    let fake = FakeRun::start();
    // Only time finishes a rollout: however often the client polls, a rollout takes 600 ms.
    fake.set_polls_until_done(u32::MAX);
    fake.set_rollout_time(Duration::from_millis(600));
    let dir = tempfile::tempdir().expect("a temp dir");
    let key = key_file(&fake, dir.path());
    let seen = driver(
        &["drive", &fake.url(), PROJECT, LOCATION],
        &[("KEY_FILE", key)],
    );
    let requests = fake.requests();

    // Created and waited on with operation.result(): every field Google's client sent kept,
    // the enums it sent as numbers stored and answered by name, output-only input ignored.
    let created = &seen["created"];
    let stored = fake.service("web").expect("web exists");
    check(
        created,
        &[
            ("/name", json!(format!("{PARENT}/services/web"))),
            ("/ingress", json!("INGRESS_TRAFFIC_INTERNAL_ONLY")),
            ("/iapEnabled", json!(true)),
            ("/labels/team", json!("payments")),
            (
                "/template/executionEnvironment",
                json!("EXECUTION_ENVIRONMENT_GEN2"),
            ),
            (
                "/template/containers/0/readinessProbe/httpGet/path",
                json!("/ready"),
            ),
            (
                "/template/containers/0/readinessProbe/periodSeconds",
                json!(5),
            ),
            ("/terminalCondition/state", json!("CONDITION_SUCCEEDED")),
            ("/reconciling", Value::Null),
            ("/uri", stored["uri"].clone()),
        ],
    );
    assert_eq!(seen["create_metadata"]["reconciling"], true, "{seen:#}");
    let create = cloud_run_calls(&requests)
        .find(|r| r.method == "POST")
        .expect("the create");
    assert_eq!(
        create.body.as_ref().map(|b| b["ingress"].clone()),
        Some(json!(2))
    );
    assert!(
        create.query.contains("enum-encoding%3Dint"),
        "{}",
        create.query
    );
    assert_eq!(
        stored["ingress"], "INGRESS_TRAFFIC_INTERNAL_ONLY",
        "stored by name"
    );

    // `urls`: the deterministic URL first, then the hash-based one (the `uri`).
    let urls = json!(["https://web-123.us-central1.run.app", stored["uri"]]);
    assert_eq!(seen["get"]["urls"], urls);

    // validate_only: the defaults answered, nothing stored.
    check(
        &seen["validate_only_create"],
        &[
            ("/name", json!(format!("{PARENT}/services/dry"))),
            ("/template/timeout", json!("300s")),
            ("/template/containers/0/ports/0/containerPort", json!(8080)),
        ],
    );
    assert_eq!(seen["validate_only_get"]["code"], 404);
    assert_eq!(
        seen["after_validate_only_update"]["template"]["containers"][0]["image"],
        "gcr.io/demo/web:v2"
    );

    // update_mask: only the labels changed; the same template, so no new revision.
    check(
        &seen["masked"],
        &[
            ("/labels/team", json!("checkout")),
            ("/template/containers/0/image", json!("gcr.io/demo/web:v1")),
            (
                "/latestCreatedRevision",
                created["latestCreatedRevision"].clone(),
            ),
            ("/generation", json!("2")),
        ],
    );
    check(
        &seen["reused_revision_name"],
        &[("/code", json!(409)), ("/status", json!("ALREADY_EXISTS"))],
    );
    let updated = &seen["updated"];
    assert_eq!(
        updated["template"]["containers"][0]["image"],
        "gcr.io/demo/web:v2"
    );
    assert_ne!(
        updated["latestReadyRevision"],
        created["latestReadyRevision"]
    );

    // The last rollout was never polled: the service alone was read until it settled.
    check(
        &seen["watched"]["service"],
        &[
            ("/template/containers/0/image", json!("gcr.io/demo/web:v3")),
            ("/terminalCondition/state", json!("CONDITION_SUCCEEDED")),
            ("/reconciling", Value::Null),
        ],
    );
    assert!(seen["watched"]["gets"].as_u64() > Some(1), "{seen:#}");
    let last_patch = requests
        .iter()
        .rposition(|r| r.method == "PATCH")
        .expect("the updates");
    let until_next_write = requests[last_patch + 1..]
        .iter()
        .take_while(|r| r.method == "GET");
    let polls_after = until_next_write
        .filter(|r| r.path.contains("/operations/"))
        .count();
    assert_eq!(polls_after, 0, "no poll of the last rollout's operation");

    // Revisions: v1, v2, v3, newest first, each ready; one read by name.
    let revisions = seen["revisions"].as_array().expect("revisions");
    let images: Vec<&Value> = revisions
        .iter()
        .map(|r| &r["containers"][0]["image"])
        .collect();
    assert_eq!(
        images,
        [
            "gcr.io/demo/web:v3",
            "gcr.io/demo/web:v2",
            "gcr.io/demo/web:v1"
        ]
    );
    check(
        &seen["revision"],
        &[
            ("/name", revisions[2]["name"].clone()),
            ("/conditions/0/type", json!("Ready")),
            ("/conditions/0/state", json!("CONDITION_SUCCEEDED")),
            ("/service", json!(format!("{PARENT}/services/web"))),
        ],
    );

    // The list, one service a page, followed by the client's pager.
    let page = |service: &str| json!([format!("{PARENT}/services/{service}")]);
    assert_eq!(seen["list_pages"], json!([page("api"), page("web")]));

    // Delete: a stale etag refused, then done, the service gone.
    check(
        &seen["delete_stale_etag"],
        &[("/code", json!(409)), ("/status", json!("ABORTED"))],
    );
    assert_eq!(seen["deleted"]["name"], format!("{PARENT}/services/api"));
    assert!(seen["deleted"]["deleteTime"].is_string(), "{seen:#}");
    assert_eq!(seen["get_deleted"]["code"], 404);
    assert!(fake.service("api").is_none());

    // What Google refuses, in Google's shape: 400 INVALID_ARGUMENT, a field violation.
    let google = "Violation in CreateServiceRequest.service_id";
    let limits = "template.containers.resources.limits";
    for (case, field, description) in [
        (
            "upper-case id",
            google,
            "only lowercase, digits, and hyphens;",
        ),
        (
            "50-character id",
            google,
            "only lowercase, digits, and hyphens;",
        ),
        (
            "memory lots",
            &format!("{limits}.memory"),
            "Invalid value specified for memory.",
        ),
        (
            "cpu 7",
            &format!("{limits}.cpu"),
            "Invalid value specified for cpu.",
        ),
        (
            "env name with =",
            "template.containers[0].env[0].name",
            "invalid env name 'A=B'",
        ),
        (
            "env PORT",
            "template.containers[0].env",
            "The following reserved env names were provided: PORT.",
        ),
        (
            "image :::",
            "template.containers[0].image",
            "Expected an image path like",
        ),
        (
            "label key Bad Key",
            "labels",
            "At least one label does not conform to GCP naming style. Label key 'Bad Key'",
        ),
    ] {
        let refused = &seen["refused"][case];
        check(
            refused,
            &[
                ("/exception", json!("BadRequest")),
                ("/code", json!(400)),
                ("/status", json!("INVALID_ARGUMENT")),
                ("/violations/0/field", json!(field)),
            ],
        );
        let said = refused["violations"][0]["description"]
            .as_str()
            .unwrap_or_default();
        assert!(said.starts_with(description), "{case}: {refused:#}");
        let message = refused["message"].as_str().unwrap_or_default();
        assert_eq!(message, format!("{field}: {said}"), "{case}");
    }
    assert_eq!(seen["refused_left_nothing"], page("web"));

    // Every call carried the key file's self-signed JWT; no token endpoint was asked.
    let kinds: Vec<Option<TokenKind>> = cloud_run_calls(&requests)
        .map(|r| r.authorization_kind)
        .collect();
    assert!(!kinds.is_empty());
    assert!(
        kinds.iter().all(|k| *k == Some(TokenKind::SelfSignedJwt)),
        "{kinds:?}"
    );
    assert_eq!(fake.token_requests(TokenKind::KeyFile), 0);
}

#[test]
fn googles_auth_library_gets_tokens_from_the_key_files_grant_and_the_metadata_server() {
    let fake = FakeRun::start();
    let dir = tempfile::tempdir().expect("a temp dir");
    let key = key_file(&fake, dir.path());
    let args = |mode| ["auth", "URL", PROJECT, LOCATION, mode];

    // The key file refreshed by google-auth: its grant, signed for Google's standard audience.
    let mut grant = args("token-grant");
    let url = fake.url();
    grant[1] = &url;
    let seen = driver(&grant, &[("KEY_FILE", key)]);
    assert_eq!(seen, json!({"token_expires": true, "services": []}));
    assert_eq!(fake.token_requests(TokenKind::KeyFile), 1);
    let listed = fake.requests();
    let listed = cloud_run_calls(&listed).last().expect("the list call");
    assert_eq!(listed.authorization_kind, Some(TokenKind::KeyFile));

    // google.auth.default() on a machine whose metadata server is the fake's.
    fake.clear_requests();
    let mut metadata = args("metadata");
    metadata[1] = &url;
    let host = fake.host();
    let seen = driver(
        &metadata,
        &[
            ("GCE_METADATA_HOST", host.clone()),
            ("GCE_METADATA_IP", host),
        ],
    );
    check(
        &seen,
        &[
            (
                "/credentials",
                json!("google.auth.compute_engine.credentials"),
            ),
            ("/project", json!(PROJECT)),
            ("/email", json!("123-compute@developer.gserviceaccount.com")),
            ("/services", json!([])),
        ],
    );
    let requests = fake.requests();
    let paths: Vec<(&str, &str, u16)> = requests
        .iter()
        .map(|r| (r.path.as_str(), r.query.as_str(), r.status))
        .collect();
    let recursive = (
        "/computeMetadata/v1/instance/service-accounts/default/",
        "recursive=true",
        200,
    );
    assert!(paths.contains(&("/", "", 200)), "the ping: {paths:?}");
    assert!(paths.contains(&recursive), "the account: {paths:?}");
    assert!(fake.token_requests(TokenKind::Metadata) >= 1, "{paths:?}");
    let listed = cloud_run_calls(&requests).last().expect("the list call");
    assert_eq!(listed.authorization_kind, Some(TokenKind::Metadata));
}

#[test]
fn the_fakes_v2_schema_is_the_one_googles_client_describes() {
    let committed: Value =
        serde_json::from_str(include_str!("../src/v2_schema.json")).expect("src/v2_schema.json");
    let described = driver(&["schema"], &[]);
    assert!(
        committed == described,
        "src/v2_schema.json is not what the pinned google-cloud-run describes; regenerate it: \
         $(scripts/gcloud-client.sh path) shared/plugins/cloudrun/fake/tests/google_client.py \
         schema > shared/plugins/cloudrun/fake/src/v2_schema.json"
    );
}
