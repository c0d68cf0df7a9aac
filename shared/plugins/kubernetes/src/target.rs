//! A Kubernetes deploy target (`plugins.kubernetes.deployTargets[i]`): which cluster, and how
//! gannet reaches it.

use gannet_config::typed::FieldError;
use gannet_sdk::targets::Named;
use serde::Deserialize;

use crate::eks::{self, Eks};

/// The fields of a target that say how gannet reaches and signs in to the cluster: a target's
/// `planPreview` replaces them all for plan previews.
pub const CREDENTIALS: &[&str] = &[
    "kubeConfigPath",
    "context",
    "masterURL",
    "inCluster",
    "eks",
    "certificateAuthorityData",
];

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeployTarget {
    pub name: String,
    /// A kubeconfig file; empty means `$KUBECONFIG` or `~/.kube/config` (unless `inCluster`).
    #[serde(default)]
    pub kube_config_path: String,
    /// The kubeconfig context; empty means its current context.
    #[serde(default)]
    pub context: String,
    /// PipeCD's `masterURL`: the API server's address, overriding the kubeconfig's.
    #[serde(default, rename = "masterURL")]
    pub master_url: String,
    /// Use the service account gannet runs as, inside the cluster.
    #[serde(default)]
    pub in_cluster: bool,
    /// PipeCD's pinned kubectl: gannet talks to the API itself, so the value is only accepted.
    #[serde(default)]
    pub kubectl_version: String,
    /// An EKS cluster reached with IAM authentication (a token made as `aws eks get-token`
    /// makes it), at `masterURL` with `certificateAuthorityData`.
    #[serde(default)]
    pub eks: Option<Eks>,
    /// The cluster's CA, base64 of PEM (`aws eks describe-cluster`'s
    /// `cluster.certificateAuthority.data`), with `eks`.
    #[serde(default)]
    pub certificate_authority_data: String,
}

impl Named for DeployTarget {
    fn name(&self) -> &str {
        &self.name
    }
}

impl DeployTarget {
    /// A target using the kubeconfig at `path` and its current context.
    pub fn kubeconfig(name: impl Into<String>, path: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            kube_config_path: path.into(),
            context: String::new(),
            master_url: String::new(),
            in_cluster: false,
            kubectl_version: String::new(),
            eks: None,
            certificate_authority_data: String::new(),
        }
    }

    /// Checks the target written at `at`.
    pub fn check(&self, at: &str) -> Result<(), FieldError> {
        let error = |field: &str, message: &str| FieldError {
            path: format!("{at}.{field}"),
            message: message.to_owned(),
        };
        if let Some(e) = &self.eks {
            gannet_plugin_aws_common::check_target(&format!("{at}.eks"), e.fields())?;
            if e.cluster_name.is_empty() {
                return Err(error("eks.clusterName", "is required"));
            }
            if self.in_cluster || !self.kube_config_path.is_empty() {
                return Err(error(
                    "eks",
                    "an EKS target is reached by masterURL with IAM authentication: leave out kubeConfigPath and inCluster",
                ));
            }
            if !self.master_url.starts_with("https://") {
                return Err(error(
                    "masterURL",
                    "an EKS target needs its API server endpoint (https://…eks.amazonaws.com, from aws eks describe-cluster)",
                ));
            }
            eks::ca_certificates(&self.certificate_authority_data).map_err(|m| FieldError {
                path: format!("{at}.certificateAuthorityData"),
                message: m,
            })?;
        }
        if self.in_cluster && !self.kube_config_path.is_empty() {
            return Err(error(
                "inCluster",
                "inCluster and kubeConfigPath exclude each other: keep one",
            ));
        }
        // The cluster's credentials (a kubeconfig's token, the EKS token) go to masterURL.
        let url = &self.master_url;
        if !url.is_empty() {
            gannet_sdk::targets::credentialed_url(url).map_err(|why| {
                error(
                    "masterURL",
                    &format!(
                        "{:?} {why} (such as https://10.0.0.1:6443)",
                        gannet_domain::report::redact_urls(url)
                    ),
                )
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use serde_json::json;

    fn check(v: serde_json::Value) -> Result<(), FieldError> {
        let t: DeployTarget = serde_json::from_value(v).map_err(|e| FieldError {
            path: "parse".into(),
            message: e.to_string(),
        })?;
        t.check("plugins.kubernetes.deployTargets[0]")
    }

    #[test]
    fn targets_are_checked_field_by_field() {
        let engine = base64::engine::general_purpose::STANDARD;
        let ca = engine.encode(format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
            engine.encode(b"der")
        ));
        let eks = json!({"clusterName": "prod", "region": "eu-west-1"});
        assert!(check(json!({"name": "a", "kubeConfigPath": "/k"})).is_ok());
        assert!(check(json!({"name": "a", "masterURL": "http://127.0.0.1:6443"})).is_ok());
        assert!(check(json!({"name": "a", "masterURL": "https://x.eks.amazonaws.com", "certificateAuthorityData": ca, "eks": eks})).is_ok());
        for (target, field) in [
            (
                json!({"name": "a", "inCluster": true, "kubeConfigPath": "/k"}),
                "inCluster",
            ),
            (
                json!({"name": "a", "masterURL": "10.0.0.1:6443"}),
                "masterURL",
            ),
            (
                json!({"name": "a", "masterURL": "http://10.0.0.1:6443"}),
                "masterURL",
            ),
            (
                json!({"name": "a", "masterURL": "http://localhost:x@evil.example/"}),
                "masterURL",
            ),
            (
                json!({"name": "a", "certificateAuthorityData": ca, "eks": eks}),
                "masterURL",
            ),
            (
                json!({"name": "a", "masterURL": "https://x", "eks": eks}),
                "certificateAuthorityData",
            ),
            (
                json!({"name": "a", "masterURL": "https://x", "certificateAuthorityData": ca, "eks": {"clusterName": "p", "region": "nowhere"}}),
                "eks.region",
            ),
        ] {
            let e = check(target.clone()).unwrap_err();
            assert_eq!(
                e.path,
                format!("plugins.kubernetes.deployTargets[0].{field}"),
                "{target}: {e:?}"
            );
        }
        assert!(check(json!({"name": "a", "kubectl": "x"}))
            .unwrap_err()
            .message
            .contains("unknown field"));
    }
}
