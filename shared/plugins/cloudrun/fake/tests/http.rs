//! The fake over real HTTP, as a Cloud Run client sees it.

use gannet_cloudrun_fake::{FakeRun, Fault, Method, TokenKind};
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{json, Value};

const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
const SERVICES: &str = "/v2/projects/gannet-test/locations/us-central1/services";
const WEB: &str = "/v2/projects/gannet-test/locations/us-central1/services/web";

/// An answer: its status, JSON body and `Retry-After` header.
struct Answer {
    status: u16,
    body: Value,
    retry_after: Option<String>,
}

impl Answer {
    /// (HTTP status, Google's error status), e.g. (409, "ABORTED").
    fn error(&self) -> (u16, &str) {
        let status = self.body["error"]["status"].as_str();
        (self.status, status.unwrap_or_default())
    }

    fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or_default()
    }
}

fn send(request: RequestBuilder) -> Answer {
    let response = request.send().expect("the fake answers");
    let retry_after = response.headers().get("retry-after");
    let retry_after = retry_after.and_then(|v| v.to_str().ok()).map(String::from);
    let status = response.status().as_u16();
    let body = response.json().unwrap_or_default();
    Answer {
        status,
        body,
        retry_after,
    }
}

/// A call with a token of `kind` (none if `None`) and a JSON body (none if null).
fn call(
    fake: &FakeRun,
    kind: Option<TokenKind>,
    method: Method,
    path: &str,
    body: &Value,
) -> Answer {
    let mut request = Client::new().request(method, format!("{}{path}", fake.url()));
    if let Some(kind) = kind {
        request = request.bearer_auth(fake.token(kind));
    }
    if !body.is_null() {
        request = request.json(body);
    }
    send(request)
}

fn get(fake: &FakeRun, path: &str) -> Answer {
    call(
        fake,
        Some(TokenKind::KeyFile),
        Method::GET,
        path,
        &Value::Null,
    )
}

fn patch(fake: &FakeRun, body: &Value) -> Answer {
    call(fake, Some(TokenKind::KeyFile), Method::PATCH, WEB, body)
}

fn create(fake: &FakeRun, kind: TokenKind, body: &Value) -> Answer {
    let path = format!("{SERVICES}?serviceId=web");
    call(fake, Some(kind), Method::POST, &path, body)
}

/// The body of service `web` running `image`, in `revision` if not "".
fn web(image: &str, revision: &str) -> Value {
    let mut template = json!({"containers": [{"image": image}], "labels": {"app": "web"}});
    if !revision.is_empty() {
        template["revision"] = json!(revision);
    }
    json!({ "template": template })
}

/// Polls a write's operation until it is done; answers the done operation.
fn wait(fake: &FakeRun, write: &Answer) -> Value {
    assert_eq!(write.status, 200, "{}", write.body);
    let path = format!("/v2/{}", write.body["name"].as_str().unwrap_or_default());
    for _ in 0..10 {
        let polled = get(fake, &path);
        assert_eq!(polled.status, 200, "{}", polled.body);
        if polled.body["done"] == true {
            return polled.body;
        }
    }
    panic!("the operation is not done after 10 polls")
}

/// Asserts that each JSON pointer of `value` has its expected value.
fn check(value: &Value, expected: &[(&str, Value)]) {
    for (pointer, want) in expected {
        assert_eq!(value.pointer(pointer), Some(want), "{pointer} in {value:#}");
    }
}

#[test]
fn a_create_rolls_out_after_three_polls_and_an_unchanged_template_adds_no_revision() {
    let fake = FakeRun::start();
    let written = create(&fake, TokenKind::KeyFile, &web("gcr.io/p/web:1", ""));
    assert_eq!(
        written.body.get("done"),
        None,
        "Google leaves out `done: false`"
    );
    check(
        &written.body["metadata"],
        &[
            (
                "/@type",
                json!("type.googleapis.com/google.cloud.run.v2.Service"),
            ),
            ("/reconciling", json!(true)),
            ("/terminalCondition/state", json!("CONDITION_RECONCILING")),
        ],
    );
    let busy = patch(&fake, &web("gcr.io/p/web:1", ""));
    assert_eq!(busy.error(), (409, "ABORTED"));

    let service = wait(&fake, &written)["response"].clone();
    check(
        &service,
        &[
            ("/terminalCondition/state", json!("CONDITION_SUCCEEDED")),
            ("/generation", json!("1")),
            ("/observedGeneration", json!("1")),
            (
                "/creator",
                json!("gannet-deployer@gannet-test.iam.gserviceaccount.com"),
            ),
            ("/template/timeout", json!("300s")),
            ("/template/maxInstanceRequestConcurrency", json!(80)),
            ("/template/scaling/maxInstanceCount", json!(100)),
            (
                "/template/containers/0/ports",
                json!([{"name": "http1", "containerPort": 8080}]),
            ),
            (
                "/template/containers/0/resources/limits/memory",
                json!("512Mi"),
            ),
        ],
    );
    let revision = service["template"]["revision"].as_str().unwrap_or_default();
    assert!(
        revision.starts_with("web-00001-") && revision.len() == 13,
        "{revision}"
    );
    assert_eq!(fake.traffic("web"), [(revision.to_string(), 100)]);
    let revision = &fake.revisions("web")[0];
    let ready = [
        ("/conditions/0/type", json!("Ready")),
        ("/conditions/0/state", json!("CONDITION_SUCCEEDED")),
    ];
    check(revision, &ready);

    wait(&fake, &patch(&fake, &web("gcr.io/p/web:1", "")));
    let revisions = fake.revisions("web").len();
    assert_eq!(revisions, 1, "an unchanged template makes no revision");
    assert_eq!(fake.service("web").unwrap_or_default()["generation"], "2");
}

#[test]
fn a_named_revision_is_made_and_its_traffic_checked_then_served_once_ready() {
    let fake = FakeRun::start();
    wait(
        &fake,
        &create(&fake, TokenKind::KeyFile, &web("gcr.io/demo/web:1", "")),
    );
    let first = fake.traffic("web")[0].0.clone();
    let split = |second: i32| {
        let mut body = web("gcr.io/demo/web:2", "web-v2");
        body["traffic"] = json!([
            {"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION", "revision": first, "percent": 90},
            {"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION", "revision": "web-v2",
             "percent": second, "tag": "canary"}]);
        body
    };
    assert_eq!(patch(&fake, &split(20)).error(), (400, "INVALID_ARGUMENT"));
    let mut unknown = web("gcr.io/demo/web:2", "");
    unknown["traffic"] = json!([{"revision": "web-x", "percent": 100}]);
    let message = "Violation in UpdateServiceRequest.service.traffic[0].revision: Revision \
                   'web-x' does not exist.";
    assert_eq!(patch(&fake, &unknown).message(), message);
    let mut system = web("gcr.io/demo/web:2", "");
    system["annotations"] = json!({"run.googleapis.com/ingress": "all"});
    assert_eq!(patch(&fake, &system).error(), (400, "INVALID_ARGUMENT"));

    let written = patch(&fake, &split(10));
    let served = fake.traffic("web");
    assert_eq!(served, [(first.clone(), 100)], "the old split until done");
    wait(&fake, &written);
    let served = fake.traffic("web");
    assert_eq!(served, [(first, 90), ("web-v2".to_string(), 10)]);
    let newest = &fake.revisions("web")[0]["name"];
    assert_eq!(newest, &format!("{WEB}/revisions/web-v2")[4..]);

    let hand = fake.patch_by_hand("web", |service| {
        service["template"]["containers"][0]["image"] = json!("gcr.io/demo/web:3");
    });
    let hand = hand.unwrap_or_default();
    let editor = json!("operator@example.com");
    check(
        &hand,
        &[("/done", json!(true)), ("/response/lastModifier", editor)],
    );
    let newest = fake.revisions("web")[0]["name"].clone();
    let newest = newest.as_str().unwrap_or_default();
    assert!(
        newest.contains("/revisions/web-00003-"),
        "a generated name: {newest}"
    );
}

#[test]
fn an_existing_service_or_a_revision_name_reused_with_another_template_is_a_conflict() {
    let fake = FakeRun::start();
    fake.set_polls_until_done(0);
    let created = create(
        &fake,
        TokenKind::KeyFile,
        &web("gcr.io/demo/web:1", "web-v1"),
    );
    assert_eq!(created.status, 200);
    let again = create(
        &fake,
        TokenKind::KeyFile,
        &web("gcr.io/demo/web:1", "web-v1"),
    );
    assert_eq!(again.error(), (409, "ALREADY_EXISTS"));
    assert_eq!(again.message(), "Resource 'web' already exists.");
    let reused = patch(&fake, &web("gcr.io/demo/web:2", "web-v1"));
    let message = "Revision named 'web-v1' with different configuration already exists.";
    assert_eq!(
        (reused.error(), reused.message()),
        ((409, "ALREADY_EXISTS"), message)
    );
    let mut stale = web("gcr.io/demo/web:1", "web-v1");
    stale["etag"] = json!("\"stale\"");
    assert_eq!(patch(&fake, &stale).error(), (409, "ABORTED"));
}

#[test]
fn a_crashing_image_fails_the_operation_and_leaves_the_traffic() {
    let fake = FakeRun::start();
    fake.set_polls_until_done(1);
    wait(
        &fake,
        &create(&fake, TokenKind::KeyFile, &web("gcr.io/demo/web:1", "")),
    );
    let before = fake.traffic("web");
    let done = wait(&fake, &patch(&fake, &web("gcr.io/demo/web:crash", "")));
    assert_eq!(done["error"]["code"], 9);
    let message = done["error"]["message"].as_str().unwrap_or_default();
    let expected = "is not ready and cannot serve traffic. The user-provided container failed";
    assert!(message.contains(expected), "{message}");
    assert_eq!(fake.traffic("web"), before);
    let failed = json!("CONDITION_FAILED");
    let revision = &fake.revisions("web")[0];
    check(
        revision,
        &[
            ("/conditions/0/type", json!("Ready")),
            ("/conditions/0/state", failed.clone()),
        ],
    );
    let service = fake.service("web").unwrap_or_default();
    check(&service, &[("/terminalCondition/state", failed)]);
}

#[test]
fn faults_and_missing_tokens_answer_in_googles_shape() {
    let fake = FakeRun::start();
    let anonymous = call(&fake, None, Method::GET, WEB, &Value::Null);
    assert_eq!(anonymous.error(), (401, "UNAUTHENTICATED"));
    let federated = call(
        &fake,
        Some(TokenKind::Federated),
        Method::GET,
        WEB,
        &Value::Null,
    );
    assert_eq!(
        federated.error(),
        (401, "UNAUTHENTICATED"),
        "federated tokens only impersonate"
    );
    let message = "Resource 'web' of kind 'SERVICE' in region 'us-central1' in project \
                   'gannet-test' does not exist.";
    let missing = get(&fake, WEB);
    assert_eq!(
        (missing.error(), missing.message()),
        ((404, "NOT_FOUND"), message)
    );

    let quota = Fault {
        method: Some(Method::GET),
        status: 429,
        retry_after_secs: Some(7),
        ..Fault::default()
    };
    fake.inject(quota);
    fake.inject(Fault {
        status: 403,
        ..Fault::default()
    });
    let exhausted = get(&fake, WEB);
    assert_eq!(
        (exhausted.error(), exhausted.retry_after.as_deref()),
        ((429, "RESOURCE_EXHAUSTED"), Some("7"))
    );
    let retry_info =
        json!({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"});
    let details = exhausted.body["error"]["details"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(details.contains(&retry_info), "{}", exhausted.body);
    let denied = patch(&fake, &json!({}));
    let message = "Permission 'run.services.update' denied on resource 'projects/gannet-test/\
                   locations/us-central1/services/web' (or resource may not exist).";
    assert_eq!(
        (denied.error(), denied.message()),
        ((403, "PERMISSION_DENIED"), message)
    );
    assert_eq!(get(&fake, WEB).status, 404, "the faults are used up");
    let logged: Vec<u16> = fake.requests().iter().map(|r| r.status).collect();
    assert_eq!(logged, [401, 401, 404, 429, 403, 404]);
}

/// The JWT-bearer grant of the fake's key file, the JWT made by `sign`.
fn jwt_grant(fake: &FakeRun, sign: impl FnOnce(&Value) -> String) -> Answer {
    let key_file: Value = serde_json::from_str(&fake.service_account_key()).unwrap_or_default();
    let assertion = sign(&key_file);
    let form = [
        ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
        ("assertion", &assertion),
    ];
    let token_uri = key_file["token_uri"].as_str().unwrap_or_default();
    send(Client::new().post(token_uri).form(&form))
}

fn signed_jwt(key_file: &Value) -> String {
    let pem = key_file["private_key"].as_str().unwrap_or_default();
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(pem.as_bytes()).expect("an RSA key");
    let now = std::time::UNIX_EPOCH
        .elapsed()
        .expect("a clock after 1970")
        .as_secs();
    let claims = json!({"iss": key_file["client_email"], "aud": key_file["token_uri"],
                        "scope": SCOPE, "iat": now, "exp": now + 3600});
    let header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    jsonwebtoken::encode(&header, &claims, &key).expect("a signed JWT")
}

#[test]
fn the_key_files_jwt_grant_takes_its_signature_only() {
    let fake = FakeRun::start();
    let token = jwt_grant(&fake, signed_jwt).body;
    let access_token = fake.token(TokenKind::KeyFile);
    assert_eq!(
        token,
        json!({"access_token": access_token, "expires_in": 3599, "token_type": "Bearer"})
    );
    let forged = jwt_grant(&fake, |key_file| {
        let jwt = signed_jwt(key_file);
        let (signed, signature) = jwt.rsplit_once('.').unwrap_or_default();
        let forged = if signature.starts_with('A') { "B" } else { "A" };
        format!("{signed}.{forged}{}", &signature[1..])
    });
    let invalid = json!({"error": "invalid_grant", "error_description": "Invalid JWT Signature."});
    assert_eq!((forged.status, forged.body), (400, invalid));
    assert_eq!(fake.token_requests(TokenKind::KeyFile), 1);
}

fn url_encode(text: &str) -> String {
    let keep = |b: &u8| b.is_ascii_alphanumeric() || b"-_.~".contains(b);
    let encode = |b: u8| {
        if keep(&b) {
            char::from(b).to_string()
        } else {
            format!("%{b:02X}")
        }
    };
    text.bytes().map(encode).collect()
}

/// STS's exchange of a signed AWS `GetCallerIdentity` for `audience`.
fn sts_exchange(fake: &FakeRun, audience: &str) -> Answer {
    let host = "sts.eu-west-1.amazonaws.com";
    let authorization = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240101/eu-west-1/sts/\
        aws4_request, SignedHeaders=host;x-amz-date;x-goog-cloud-target-resource, Signature=ab12";
    let subject = json!({
        "url": format!("https://{host}?Action=GetCallerIdentity&Version=2011-06-15"),
        "method": "POST",
        "headers": [{"key": "Authorization", "value": authorization}, {"key": "host", "value": host},
                    {"key": "x-amz-date", "value": "20240101T000000Z"},
                    {"key": "x-goog-cloud-target-resource", "value": audience}]});
    let form = [
        (
            "grant_type",
            "urn:ietf:params:oauth:grant-type:token-exchange",
        ),
        ("audience", audience),
        ("scope", SCOPE),
        (
            "requested_token_type",
            "urn:ietf:params:oauth:token-type:access_token",
        ),
        (
            "subject_token_type",
            "urn:ietf:params:aws:token-type:aws4_request",
        ),
        ("subject_token", &url_encode(&subject.to_string())),
    ];
    send(
        Client::new()
            .post(format!("{}/v1/token", fake.url()))
            .form(&form),
    )
}

#[test]
fn an_aws_identity_gets_a_cloud_run_token_through_sts_then_impersonation() {
    let fake = FakeRun::start();
    let elsewhere =
        "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/x/providers/y";
    assert_eq!(
        sts_exchange(&fake, elsewhere).body["error"],
        "invalid_target"
    );
    let federated = sts_exchange(&fake, &fake.wif_audience());
    assert_eq!(
        federated.body["access_token"],
        fake.token(TokenKind::Federated)
    );
    assert_eq!(fake.aws_access_key_ids(), ["AKIDEXAMPLE"]);

    let email = fake.impersonated_email();
    let path = format!("/v1/projects/-/serviceAccounts/{email}:generateAccessToken");
    let body = json!({"scope": [SCOPE], "lifetime": "3600s"});
    let refused = call(&fake, Some(TokenKind::KeyFile), Method::POST, &path, &body);
    assert_eq!(
        refused.error(),
        (403, "PERMISSION_DENIED"),
        "only a federated token impersonates"
    );
    let impersonated = call(
        &fake,
        Some(TokenKind::Federated),
        Method::POST,
        &path,
        &body,
    )
    .body;
    assert_eq!(
        impersonated["accessToken"],
        fake.token(TokenKind::Impersonated)
    );
    assert!(impersonated["expireTime"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));

    let written = create(
        &fake,
        TokenKind::Impersonated,
        &web("gcr.io/demo/web:1", ""),
    );
    assert_eq!(written.body["metadata"]["creator"], email.as_str());
    let kinds: Vec<_> = fake
        .requests()
        .iter()
        .map(|r| r.authorization_kind)
        .collect();
    use TokenKind::{Federated, Impersonated, KeyFile};
    assert_eq!(
        kinds,
        [
            None,
            None,
            Some(KeyFile),
            Some(Federated),
            Some(Impersonated)
        ]
    );
}

#[test]
fn the_metadata_server_wants_its_flavor_header() {
    let fake = FakeRun::start();
    let metadata = format!("http://{}/computeMetadata/v1", fake.host());
    let token = format!("{metadata}/instance/service-accounts/default/token");
    assert_eq!(send(Client::new().get(&token)).status, 403);
    let token = send(
        Client::new()
            .get(&token)
            .header("Metadata-Flavor", "Google"),
    );
    assert_eq!(token.body["access_token"], fake.token(TokenKind::Metadata));
    let project = Client::new().get(format!("{metadata}/project/project-id"));
    let project = project
        .header("Metadata-Flavor", "Google")
        .send()
        .expect("an answer");
    assert_eq!(project.text().unwrap_or_default(), "gannet-test");
}

/// A JWT the key file's key signs itself, its claims those of Google's client libraries
/// (`iss` and `sub` the account, `aud` Cloud Run's) with `changes` (a `null` removes a claim).
fn self_signed(fake: &FakeRun, changes: &Value) -> String {
    let key_file: Value = serde_json::from_str(&fake.service_account_key()).unwrap_or_default();
    let pem = key_file["private_key"].as_str().unwrap_or_default();
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(pem.as_bytes()).expect("an RSA key");
    let now = std::time::UNIX_EPOCH
        .elapsed()
        .expect("a clock after 1970")
        .as_secs();
    let email = &key_file["client_email"];
    let mut claims = json!({"iss": email, "sub": email, "aud": "https://run.googleapis.com/",
                            "iat": now, "exp": now + 3600});
    for (claim, value) in changes.as_object().into_iter().flatten() {
        match value {
            Value::Null => claims.as_object_mut().map(|c| c.remove(claim)),
            value => claims
                .as_object_mut()
                .map(|c| c.insert(claim.clone(), value.clone())),
        };
    }
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = key_file["private_key_id"].as_str().map(String::from);
    jsonwebtoken::encode(&header, &claims, &key).expect("a signed JWT")
}

#[test]
fn a_self_signed_jwt_of_the_key_is_a_token_for_cloud_run_only() {
    let fake = FakeRun::start();
    let now = std::time::UNIX_EPOCH.elapsed().map_or(0, |d| d.as_secs());
    let other = "someone@else.iam.gserviceaccount.com";
    for (case, changes, status) in [
        ("Cloud Run's audience", json!({}), 404),
        (
            "a scope, no audience",
            json!({"aud": null, "scope": SCOPE}),
            404,
        ),
        (
            "another API's audience",
            json!({"aud": "https://pubsub.googleapis.com/"}),
            401,
        ),
        ("another account", json!({ "iss": other }), 401),
        (
            "expired",
            json!({"iat": now - 7200, "exp": now - 3600}),
            401,
        ),
        ("longer than an hour", json!({"exp": now + 7200}), 401),
    ] {
        let jwt = self_signed(&fake, &changes);
        let url = format!("{}{WEB}", fake.url());
        let answer = send(Client::new().get(url).bearer_auth(jwt));
        assert_eq!(answer.status, status, "{case}: {}", answer.body);
    }
    let kinds: Vec<_> = fake
        .requests()
        .iter()
        .map(|r| r.authorization_kind)
        .collect();
    let signed = Some(TokenKind::SelfSignedJwt);
    assert_eq!(kinds, [signed, signed, None, None, None, None]);
    assert_eq!(
        fake.token_requests(TokenKind::KeyFile),
        0,
        "no token asked for"
    );
}

#[test]
fn enums_are_stored_by_name_and_answered_as_numbers_to_whoever_asks() {
    let fake = FakeRun::start();
    fake.set_polls_until_done(0);
    let mut body = web("gcr.io/demo/web:1", "");
    body["ingress"] = json!(3);
    body["template"]["executionEnvironment"] = json!(1);
    assert_eq!(create(&fake, TokenKind::KeyFile, &body).status, 200);
    let stored = fake.service("web").unwrap_or_default();
    check(
        &stored,
        &[
            ("/ingress", json!("INGRESS_TRAFFIC_INTERNAL_LOAD_BALANCER")),
            (
                "/template/executionEnvironment",
                json!("EXECUTION_ENVIRONMENT_GEN1"),
            ),
        ],
    );
    let numbers = get(&fake, &format!("{WEB}?$alt=json;enum-encoding=int")).body;
    check(
        &numbers,
        &[
            ("/ingress", json!(3)),
            ("/launchStage", json!(4)),
            ("/terminalCondition/state", json!(4)),
            ("/traffic/0/type", json!(1)),
        ],
    );
    assert_eq!(
        get(&fake, WEB).body["terminalCondition"]["state"],
        "CONDITION_SUCCEEDED"
    );

    let mut unknown = web("gcr.io/demo/web:1", "");
    unknown["ingress"] = json!(9);
    let refused = patch(&fake, &unknown);
    let message = "Invalid value at 'service.ingress' \
                   (type.googleapis.com/google.cloud.run.v2.IngressTraffic), 9";
    assert_eq!(
        (refused.error(), refused.message()),
        ((400, "INVALID_ARGUMENT"), message)
    );
    let mut misspelt = web("gcr.io/demo/web:1", "");
    misspelt["template"]["containers"][0]["imag"] = json!("x");
    let message = "Invalid JSON payload received. Unknown name \"imag\" at \
                   'service.template.containers[0]': Cannot find field.";
    assert_eq!(patch(&fake, &misspelt).message(), message);
}

#[test]
fn a_rollout_ends_with_time_for_whoever_looks_unless_the_clock_is_held() {
    let fake = FakeRun::start();
    fake.set_polls_until_done(u32::MAX);
    fake.set_rollout_time(std::time::Duration::from_millis(300));
    let written = create(&fake, TokenKind::KeyFile, &web("gcr.io/demo/web:1", ""));
    assert_eq!(get(&fake, WEB).body["reconciling"], true);
    std::thread::sleep(std::time::Duration::from_millis(400));
    let settled = get(&fake, WEB).body;
    assert_eq!(settled.get("reconciling"), None, "{settled}");
    assert_eq!(settled["terminalCondition"]["state"], "CONDITION_SUCCEEDED");
    let operation = format!("/v2/{}", written.body["name"].as_str().unwrap_or_default());
    assert_eq!(get(&fake, &operation).body["done"], true);

    fake.hold_operations(true);
    assert_eq!(patch(&fake, &web("gcr.io/demo/web:2", "")).status, 200);
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(get(&fake, WEB).body["reconciling"], true, "held");
    fake.hold_operations(false);
    std::thread::sleep(std::time::Duration::from_millis(400));
    assert_eq!(get(&fake, WEB).body.get("reconciling"), None);
}

#[test]
fn services_are_listed_by_page_and_deleted_by_their_operation() {
    let fake = FakeRun::start();
    fake.set_polls_until_done(1);
    for id in ["web", "api", "db"] {
        let path = format!("{SERVICES}?serviceId={id}");
        let body = web("gcr.io/demo/web:1", "");
        let created = call(&fake, Some(TokenKind::KeyFile), Method::POST, &path, &body);
        wait(&fake, &created);
    }
    let first = get(&fake, &format!("{SERVICES}?pageSize=2")).body;
    let names = |page: &Value| -> Vec<String> {
        let services = page["services"].as_array().cloned().unwrap_or_default();
        let names = services.iter().filter_map(|s| s["name"].as_str());
        names
            .map(|n| n.rsplit('/').next().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(names(&first), ["api", "db"]);
    let token = first["nextPageToken"].as_str().unwrap_or_default();
    let second = get(&fake, &format!("{SERVICES}?pageSize=2&pageToken={token}")).body;
    assert_eq!(
        (names(&second), second.get("nextPageToken")),
        (vec!["web".into()], None)
    );
    let bad = get(&fake, &format!("{SERVICES}?pageToken=nope"));
    assert_eq!(bad.error(), (400, "INVALID_ARGUMENT"));

    let delete = |query: &str| {
        let path = format!("{WEB}{query}");
        call(
            &fake,
            Some(TokenKind::KeyFile),
            Method::DELETE,
            &path,
            &Value::Null,
        )
    };
    assert_eq!(delete("?etag=%22stale%22").error(), (409, "ABORTED"));
    let dry = delete("?validateOnly=true");
    assert_eq!(dry.body["done"], true);
    assert!(
        fake.service("web").is_some(),
        "validateOnly deletes nothing"
    );
    let deleting = delete("");
    assert_eq!(get(&fake, WEB).body["reconciling"], true);
    let done = wait(&fake, &deleting);
    assert!(done["response"]["deleteTime"].is_string(), "{done}");
    assert_eq!(get(&fake, WEB).status, 404);
    assert!(fake.revisions("web").is_empty());
}
