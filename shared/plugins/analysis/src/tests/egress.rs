//! `https` checks held to the egress rule, against a real server on loopback that counts what
//! reaches it: refused before any connection unless `allowPrivateNetworks` lists loopback, one
//! lookup a request whose answer is where the connection goes, no redirect followed, and no
//! body in the log or in a failure's reason.

use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::header::LOCATION;
use axum::response::IntoResponse;

use super::*;
use crate::egress::{Answer, Lookup};

/// What reached the "admin" server, by path.
#[derive(Default)]
struct Hits {
    admin: AtomicUsize,
    redirect: AtomicUsize,
    second: AtomicUsize,
}

/// The body the admin page answers: nothing of it may reach a log.
const ADMIN_BODY: &str = "root-password=correct-horse-battery-staple";

/// A loopback "admin" server: `/admin` answers 200 with [`ADMIN_BODY`], `/redirect` answers
/// 302 to `/second`, `/second` answers 200. Each counts its requests.
async fn admin_server() -> (SocketAddr, Arc<Hits>) {
    let hits = Arc::new(Hits::default());
    let app = Router::new()
        .route(
            "/admin",
            get(|State(h): State<Arc<Hits>>| async move {
                h.admin.fetch_add(1, Ordering::SeqCst);
                ADMIN_BODY
            }),
        )
        .route(
            "/redirect",
            get(|State(h): State<Arc<Hits>>| async move {
                h.redirect.fetch_add(1, Ordering::SeqCst);
                (StatusCode::FOUND, [(LOCATION, "/second")], "moved").into_response()
            }),
        )
        .route(
            "/second",
            get(|State(h): State<Arc<Hits>>| async move {
                h.second.fetch_add(1, Ordering::SeqCst);
                "second"
            }),
        )
        .with_state(hits.clone());
    (serve(app).await, hits)
}

/// One check of `url` after a second: a stage of one measurement.
fn check_of(url: &str, extra: Value) -> Value {
    let mut check = json!({"url": url, "interval": "1s"});
    if let (Some(c), Some(e)) = (check.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    json!({"duration": "1s", "https": [check]})
}

#[tokio::test]
async fn loopback_is_refused_before_any_connection_unless_allow_private_networks_lists_it() {
    let (addr, hits) = admin_server().await;
    let url = format!("http://{addr}/admin");
    let with = check_of(&url, json!({"expectedResponse": "root-password"}));

    // Planned with no allowed network: refused, naming the field and the setting.
    let refused = plugin(json!([]))
        .validate_stage(STAGE_ANALYSIS, &with)
        .unwrap_err();
    assert_eq!(refused.field, "https[0].url");
    assert_eq!(
        refused.message,
        "127.0.0.1 is a loopback address: an ANALYSIS https check may reach it only when plugins.analysis.http.allowPrivateNetworks lists its network"
    );

    // A stage planned while loopback was allowed, run after it no longer is: the measurement
    // fails with the refusal, and the server sees nothing.
    let mut d = Driver::new(loopback_plugin(), with.clone(), Clock::Virtual);
    d.plugin = plugin(json!([]));
    let reason = failure(d.run().await);
    assert!(
        reason.ends_with("(127.0.0.1 is a loopback address: an ANALYSIS https check may reach it only when plugins.analysis.http.allowPrivateNetworks lists its network)"),
        "{reason}"
    );
    assert_eq!(hits.admin.load(Ordering::SeqCst), 0, "{}", d.log());

    // Listed: the check reaches the server.
    let mut d = Driver::new(loopback_plugin(), with, Clock::Virtual);
    assert_eq!(d.run().await, StageResult::Success, "{}", d.log());
    assert_eq!(hits.admin.load(Ordering::SeqCst), 1);
}

#[test]
fn a_written_address_that_says_where_it_goes_is_refused_at_config_check_naming_the_field() {
    let p = plugin(json!([]));
    for url in [
        "http://169.254.169.254/latest/api/token",
        "http://[fd00:ec2::254]/latest/api/token",
        "http://127.0.0.1:9001/2018-06-01/runtime/invocation/next",
        "http://localhost:8080/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0:8080/",
        "http://10.0.0.8/health",
        "http://192.168.1.1/",
        "http://[fd12::1]/",
        "http://2130706433/",
    ] {
        let with = check_of(
            url,
            json!({"method": "PUT", "headers": [{"key": "X-aws-ec2-metadata-token-ttl-seconds", "value": "21600"}]}),
        );
        let e = p.validate_stage(STAGE_ANALYSIS, &with).unwrap_err();
        assert_eq!(e.field, "https[0].url", "{url}: {}", e.message);
        assert!(
            e.message.contains("allowPrivateNetworks"),
            "{url}: {}",
            e.message
        );
    }
    // PipeCD sends any method with any headers; to a name, the rule applies at each request.
    let public = check_of(
        "https://canary.example.com/health",
        json!({"method": "POST", "headers": [{"key": "X-Probe", "value": "1"}]}),
    );
    assert!(p.validate_stage(STAGE_ANALYSIS, &public).is_ok());
}

/// A lookup answering from a script, one answer a call (the last one again when it runs
/// out), counting its calls.
struct Scripted {
    answers: Vec<Vec<IpAddr>>,
    calls: AtomicUsize,
}

impl Lookup for Scripted {
    fn lookup(
        &self,
        _name: &str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Answer> + Send>> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let answer = self.answers[n.min(self.answers.len() - 1)].clone();
        Box::pin(async move { Ok(answer) })
    }
}

/// The plugin whose checks may reach `allowed`, with names looked up by `answers`.
fn scripted_plugin(allowed: &[&str], answers: &[&[&str]]) -> (Arc<AnalysisPlugin>, Arc<Scripted>) {
    let lookup = Arc::new(Scripted {
        answers: answers
            .iter()
            .map(|a| a.iter().map(|ip| ip.parse().expect("an address")).collect())
            .collect(),
        calls: AtomicUsize::new(0),
    });
    let plugin = AnalysisPlugin::new(
        Vec::new(),
        crate::egress::Egress::allowing(allowed),
        lookup.clone(),
    );
    (Arc::new(plugin), lookup)
}

#[tokio::test]
async fn a_name_is_looked_up_once_a_request_and_the_connection_goes_to_the_address_checked() {
    let (addr, hits) = admin_server().await;
    // `gannet-check.invalid` exists in no DNS: only the scripted lookup knows it.
    let url = format!("http://gannet-check.invalid:{}/admin", addr.port());

    // The first answer is allowed; the second (a rebinding) holds a metadata address too.
    let (p, lookup) = scripted_plugin(
        &["127.0.0.1/32"],
        &[&["127.0.0.1"], &["127.0.0.1", "169.254.169.254"]],
    );
    let with = json!({"duration": "2s", "https": [{"url": url, "interval": "1s"}]});
    let mut d = Driver::new(p, with, Clock::Virtual);
    let reason = failure(d.run().await);
    // One lookup a measurement, none by anyone else; the first reached the address it
    // answered, the second was refused whole, before connecting.
    assert_eq!(lookup.calls.load(Ordering::SeqCst), 2, "{}", d.log());
    assert_eq!(hits.admin.load(Ordering::SeqCst), 1, "{}", d.log());
    assert!(d.log().contains("[https[0]] #1: HTTP 200"), "{}", d.log());
    assert!(
        reason.ends_with("last: - (gannet-check.invalid resolves to 169.254.169.254, a link-local address (where cloud metadata services answer): an ANALYSIS https check may reach it only when plugins.analysis.http.allowPrivateNetworks lists its network)"),
        "{reason}"
    );

    // An allowed first answer nobody listens at: the connection goes there (and fails), not
    // to the loopback server a second lookup would have named.
    let (p, lookup) = scripted_plugin(&["127.0.0.2/32"], &[&["127.0.0.2"], &["127.0.0.1"]]);
    let with = json!({"duration": "1s", "https": [{"url": url, "interval": "1s"}]});
    let mut d = Driver::new(p, with, Clock::Virtual);
    let reason = failure(d.run().await);
    assert_eq!(lookup.calls.load(Ordering::SeqCst), 1, "{reason}");
    assert_eq!(hits.admin.load(Ordering::SeqCst), 1, "{reason}");
    assert!(!reason.contains("resolves to"), "{reason}");
}

#[tokio::test]
async fn a_redirect_is_answered_as_is_and_never_followed() {
    let (addr, hits) = admin_server().await;
    let url = format!("http://{addr}/redirect");

    let mut d = Driver::new(loopback_plugin(), check_of(&url, json!({})), Clock::Virtual);
    let reason = failure(d.run().await);
    assert!(
        reason.ends_with("last: HTTP 302 (answered 302)"),
        "{reason}"
    );
    assert_eq!(hits.redirect.load(Ordering::SeqCst), 1);
    assert_eq!(hits.second.load(Ordering::SeqCst), 0);

    // A check that expects the redirect passes on it, still without following it.
    let with = check_of(&url, json!({"expectedCode": 302}));
    let mut d = Driver::new(loopback_plugin(), with, Clock::Virtual);
    assert_eq!(d.run().await, StageResult::Success, "{}", d.log());
    assert_eq!(hits.second.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn no_part_of_a_body_reaches_the_log_or_a_reason() {
    let (addr, _) = admin_server().await;
    let url = format!("http://{addr}/admin");
    let secret_parts = ["root-password", "correct-horse", "battery-staple"];
    let cases = [
        // The body holds it: a pass says so, and no more.
        (json!({"expectedResponse": "horse"}), true),
        // It does not, or the code is wrong: the failure names the status only.
        (json!({"expectedResponse": "not-there"}), false),
        (
            json!({"expectedCode": 500, "expectedResponse": "root"}),
            false,
        ),
        (json!({"expectedCode": 404}), false),
    ];
    for (extra, passes) in cases {
        let mut d = Driver::new(
            loopback_plugin(),
            check_of(&url, extra.clone()),
            Clock::Virtual,
        );
        let result = d.run().await;
        assert_eq!(
            result == StageResult::Success,
            passes,
            "{extra}: {result:?}"
        );
        let mut seen = d.log();
        if let StageResult::Failure { reason } = &result {
            seen.push_str(reason);
        }
        seen.push_str(&format!("{:?}", d.stage().metadata));
        for part in secret_parts {
            assert!(!seen.contains(part), "{extra}: {part} in {seen}");
        }
    }
}
