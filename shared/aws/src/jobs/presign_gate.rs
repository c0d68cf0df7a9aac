//! S3's check of a presigned URL, in front of the IAM-enforcing moto (which cannot do it).
//!
//! moto 5.2.5 never verifies a presigned URL's signature, and under IAM enforcement it fails
//! every request without an `Authorization` header with a 500. This gate is an HTTP proxy the
//! build's curl goes through (`http_proxy`): it checks a presigned request as S3 does (SigV4
//! query signature over the method, path, query and host, with the signer's secret; expiry),
//! refuses a bad one with S3's 403 `SignatureDoesNotMatch` or `AccessDenied` (expired), and
//! forwards a good one to moto signed in headers with the same credentials, so moto then
//! authorises it as the signer's identity against its policies, as S3 does. A request that is
//! not presigned is refused: the build has no credential of its own for S3.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PercentEncodingMode, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
    UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// The query parameters of a presigned request's signature.
const AUTH_PARAMS: [&str; 7] = [
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Signature",
    "X-Amz-Security-Token",
];

pub(crate) struct PresignGate {
    /// `http://127.0.0.1:<port>`, for `http_proxy`.
    pub(crate) url: String,
}

#[derive(Clone)]
struct Gate {
    /// The signers the gate knows, by access key id.
    signers: Arc<BTreeMap<String, Credentials>>,
    http: reqwest::Client,
}

impl PresignGate {
    /// Starts the gate on a free loopback port (on the current tokio runtime), knowing
    /// `signers`' secrets.
    pub(crate) async fn start(signers: &[Credentials]) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the presign gate");
        let url = format!("http://{}", listener.local_addr().expect("its address"));
        let gate = Gate {
            signers: Arc::new(
                signers
                    .iter()
                    .map(|c| (c.access_key_id().to_owned(), c.clone()))
                    .collect(),
            ),
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("client"),
        };
        let app = axum::Router::new().fallback(check).with_state(gate);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url }
    }
}

fn s3_error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>"
    );
    (status, body).into_response()
}

async fn check(State(gate): State<Gate>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let Ok(body) = to_bytes(body, 256 * 1024 * 1024).await else {
        return s3_error(StatusCode::BAD_REQUEST, "IncompleteBody", "unreadable body");
    };
    // A proxy gets the absolute URL; its authority is the host the URL was signed for.
    let uri = parts.uri.clone();
    let host = uri.authority().map(ToString::to_string).unwrap_or_default();
    let query: Vec<(String, String)> = url_pairs(uri.query().unwrap_or_default());
    let param = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let (Some(signature), Some(credential), Some(date), Some(expires)) = (
        param("X-Amz-Signature"),
        param("X-Amz-Credential"),
        param("X-Amz-Date"),
        param("X-Amz-Expires"),
    ) else {
        return s3_error(
            StatusCode::FORBIDDEN,
            "AccessDenied",
            "only presigned requests pass",
        );
    };
    let mut scope = credential.split('/');
    let (key_id, region) = (scope.next().unwrap_or_default(), scope.nth(1));
    let Some(signer) = gate.signers.get(key_id) else {
        return s3_error(
            StatusCode::FORBIDDEN,
            "InvalidAccessKeyId",
            "The AWS Access Key Id you provided does not exist in our records.",
        );
    };
    let (Some(time), Ok(expires)) = (parse_amz_date(&date), expires.parse::<u64>()) else {
        return s3_error(
            StatusCode::FORBIDDEN,
            "AuthorizationQueryParametersError",
            "bad date",
        );
    };
    if SystemTime::now() > time + Duration::from_secs(expires) {
        return s3_error(StatusCode::FORBIDDEN, "AccessDenied", "Request has expired");
    }
    let region = region.unwrap_or("us-east-1");
    // The request as it was signed: without its signature's parameters (the signer adds them).
    let unsigned: Vec<String> = query
        .iter()
        .filter(|(k, _)| !AUTH_PARAMS.contains(&k.as_str()))
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    let path = uri.path();
    let base = if unsigned.is_empty() {
        format!("http://{host}{path}")
    } else {
        format!("http://{host}{path}?{}", unsigned.join("&"))
    };
    let mut settings = s3_settings();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(Duration::from_secs(expires));
    let method = parts.method.as_str();
    let Some(expected) = signature_of(signer, region, time, settings, method, &base, &host) else {
        return s3_error(StatusCode::FORBIDDEN, "SignatureDoesNotMatch", "unsignable");
    };
    if expected != signature {
        return s3_error(
            StatusCode::FORBIDDEN,
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided.",
        );
    }
    forward(&gate, signer, region, method, &base, &host, body).await
}

/// Sends the checked request to moto signed in headers with the signer's credentials.
async fn forward(
    gate: &Gate,
    signer: &Credentials,
    region: &str,
    method: &str,
    url: &str,
    host: &str,
    body: bytes::Bytes,
) -> Response {
    let identity = signer.clone().into();
    let mut settings = s3_settings();
    settings.signature_location = SignatureLocation::Headers;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("s3")
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .expect("signing params")
        .into();
    let headers = [("host", host), ("x-amz-content-sha256", "UNSIGNED-PAYLOAD")];
    let signable = SignableRequest::new(
        method,
        url,
        headers.into_iter(),
        SignableBody::UnsignedPayload,
    )
    .expect("signable");
    let (instructions, _) = sign(signable, &params).expect("sign").into_parts();
    let mut request = http::Request::builder()
        .method(method)
        .uri(url)
        .header("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
        .body(())
        .expect("request");
    instructions.apply_to_request_http1x(&mut request);
    let mut upstream = gate
        .http
        .request(method.parse().expect("method"), url)
        .body(body);
    for (name, value) in request.headers() {
        upstream = upstream.header(name, value);
    }
    match upstream.send().await {
        Ok(answer) => {
            let status = StatusCode::from_u16(answer.status().as_u16()).expect("status");
            let bytes = answer.bytes().await.unwrap_or_default();
            (status, Body::from(bytes)).into_response()
        }
        Err(err) => (StatusCode::BAD_GATEWAY, err.to_string()).into_response(),
    }
}

/// S3's SigV4 settings: paths neither normalised nor encoded twice, an unsigned payload.
fn s3_settings() -> SigningSettings {
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings
}

/// The query signature `signer` makes for the request at `time`.
fn signature_of(
    signer: &Credentials,
    region: &str,
    time: SystemTime,
    settings: SigningSettings,
    method: &str,
    url: &str,
    host: &str,
) -> Option<String> {
    let identity = signer.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("s3")
        .time(time)
        .settings(settings)
        .build()
        .ok()?
        .into();
    let headers = [("host", host)];
    let signable = SignableRequest::new(
        method,
        url,
        headers.into_iter(),
        SignableBody::UnsignedPayload,
    )
    .ok()?;
    let (instructions, _) = sign(signable, &params).ok()?.into_parts();
    let (_, params) = instructions.into_parts();
    params
        .into_iter()
        .find(|(k, _)| *k == "X-Amz-Signature")
        .map(|(_, v)| v.into_owned())
}

/// `20261127T145000Z` as a time.
fn parse_amz_date(date: &str) -> Option<SystemTime> {
    let digits = |r: std::ops::Range<usize>| date.get(r)?.parse::<u64>().ok();
    let (y, mo, d) = (digits(0..4)?, digits(4..6)?, digits(6..8)?);
    let (h, mi, s) = (digits(9..11)?, digits(11..13)?, digits(13..15)?);
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, mo) = if mo <= 2 { (y - 1, mo + 12) } else { (y, mo) };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * (mo - 3) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(days * 86_400 + h * 3600 + mi * 60 + s))
}

/// The decoded pairs of a query string.
fn url_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// SigV4's URI encoding of a query key or value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn amz_dates_are_read() {
    assert_eq!(
        parse_amz_date("19700102T000001Z"),
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(86_401))
    );
    assert_eq!(
        parse_amz_date("20000301T000000Z"),
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(951_868_800))
    );
}
