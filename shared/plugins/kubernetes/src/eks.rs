//! EKS with IAM authentication: the bearer token `aws eks get-token` makes, made here. It is
//! `k8s-aws-v1.` and the base64url of an STS `GetCallerIdentity` URL presigned (SigV4, 60 s)
//! with the header `x-k8s-aws-id: <cluster>` signed in; EKS calls it to learn the IAM
//! identity, and accepts the token for 15 minutes. The credentials are the deploy target's:
//! the standard AWS chain, or the role it names (assumed).

use std::time::{Duration, SystemTime};

use aws_credential_types::provider::ProvideCredentials;
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings,
};
use aws_sigv4::sign::v4;
use base64::Engine;
use gannet_plugin_aws_common::{sdk_config, AwsFields};
use gannet_sdk::plugin::StepError;
use serde::Deserialize;

/// How long gannet uses one token before it makes another (EKS accepts one for 15 minutes).
pub const TOKEN_LIFETIME: Duration = Duration::from_secs(10 * 60);

/// `deployTargets[i].eks`: the cluster, and the AWS identity that reaches it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Eks {
    /// The EKS cluster's name.
    pub cluster_name: String,
    pub region: String,
    /// A role to assume (mapped to a Kubernetes user by the cluster's access entries).
    #[serde(default)]
    pub role_arn: Option<String>,
    /// Another endpoint for STS (tests only).
    #[serde(default)]
    pub sts_endpoint: Option<String>,
}

impl Eks {
    pub fn fields(&self) -> AwsFields<'_> {
        AwsFields {
            name: &self.cluster_name,
            region: &self.region,
            role_arn: self.role_arn.as_deref(),
            endpoint: self.sts_endpoint.as_deref(),
        }
    }

    /// A token for the cluster, with the target's credentials as they are now.
    pub async fn token(&self) -> Result<String, StepError> {
        let config = sdk_config(self.fields(), None).await;
        let provider = config
            .credentials_provider()
            .ok_or_else(|| StepError::permanent("EKS: no AWS credentials for the deploy target"))?;
        let credentials = provider
            .provide_credentials()
            .await
            .map_err(|e| StepError::transient("EKS: get AWS credentials for the token", e))?;
        token(
            &self.cluster_name,
            &self.region,
            &credentials,
            SystemTime::now(),
        )
    }
}

/// The token for `cluster` in `region`, signed with `credentials` at `now`.
pub fn token(
    cluster: &str,
    region: &str,
    credentials: &Credentials,
    now: SystemTime,
) -> Result<String, StepError> {
    let url =
        format!("https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15");
    let mut settings = SigningSettings::default();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(Duration::from_secs(60));
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("sts")
        .time(now)
        .settings(settings)
        .build()
        .map_err(|e| StepError::permanent(format!("EKS token: {e}")))?
        .into();
    let headers = [("x-k8s-aws-id", cluster)];
    let signable = SignableRequest::new("GET", &url, headers.into_iter(), SignableBody::Bytes(&[]))
        .map_err(|e| StepError::permanent(format!("EKS token: {e}")))?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| StepError::permanent(format!("EKS token: {e}")))?
        .into_parts();
    let mut request = http::Request::builder()
        .method("GET")
        .uri(&url)
        .body(())
        .map_err(|e| StepError::permanent(format!("EKS token: {e}")))?;
    instructions.apply_to_request_http1x(&mut request);
    let signed = request.uri().to_string();
    Ok(format!(
        "k8s-aws-v1.{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signed)
    ))
}

/// The cluster's CA certificates (DER) from `certificateAuthorityData`: base64 of PEM, as
/// `aws eks describe-cluster` gives it.
pub fn ca_certificates(data: &str) -> Result<Vec<Vec<u8>>, String> {
    let engine = base64::engine::general_purpose::STANDARD;
    let pem = engine
        .decode(data.trim())
        .map_err(|e| format!("certificateAuthorityData is not base64: {e}"))?;
    let pem = String::from_utf8(pem)
        .map_err(|_| "certificateAuthorityData is not PEM text".to_owned())?;
    let mut out = Vec::new();
    for block in pem.split("-----BEGIN CERTIFICATE-----").skip(1) {
        let body = block
            .split("-----END CERTIFICATE-----")
            .next()
            .unwrap_or_default();
        let compact: String = body.chars().filter(|c| !c.is_whitespace()).collect();
        let der = engine
            .decode(compact)
            .map_err(|e| format!("certificateAuthorityData: a certificate is not base64: {e}"))?;
        out.push(der);
    }
    if out.is_empty() {
        return Err("certificateAuthorityData holds no PEM certificate".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_a_presigned_get_caller_identity_url_for_the_cluster() {
        let credentials = Credentials::new(
            "AKIDEXAMPLE",
            "secret",
            Some("session".into()),
            None,
            "test",
        );
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let made = token("prod", "eu-west-1", &credentials, now).unwrap();
        let encoded = made.strip_prefix("k8s-aws-v1.").expect("the EKS prefix");
        assert!(!encoded.contains('='), "no padding: {encoded}");
        let url = String::from_utf8(
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(encoded)
                .unwrap(),
        )
        .unwrap();
        assert!(
            url.starts_with(
                "https://sts.eu-west-1.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&"
            ),
            "{url}"
        );
        for part in [
            "X-Amz-Algorithm=AWS4-HMAC-SHA256",
            "X-Amz-Credential=AKIDEXAMPLE%2F20231114%2Feu-west-1%2Fsts%2Faws4_request",
            "X-Amz-Date=20231114T221320Z",
            "X-Amz-Expires=60",
            "X-Amz-SignedHeaders=host%3Bx-k8s-aws-id",
            "X-Amz-Security-Token=session",
            "X-Amz-Signature=",
        ] {
            assert!(url.contains(part), "{part} not in {url}");
        }
        assert!(
            !url.contains("secret"),
            "the secret key never leaves: {url}"
        );
        // Deterministic for the same inputs; another cluster signs differently.
        assert_eq!(token("prod", "eu-west-1", &credentials, now).unwrap(), made);
        assert_ne!(token("test", "eu-west-1", &credentials, now).unwrap(), made);
    }

    #[test]
    fn the_ca_is_read_from_base64_pem() {
        let engine = base64::engine::general_purpose::STANDARD;
        let pem = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            engine.encode(b"der bytes")
        );
        assert_eq!(
            ca_certificates(&engine.encode(pem)).unwrap(),
            [b"der bytes".to_vec()]
        );
        assert!(ca_certificates("%%%").unwrap_err().contains("not base64"));
        assert!(ca_certificates(&engine.encode("no pem"))
            .unwrap_err()
            .contains("no PEM"));
    }
}
