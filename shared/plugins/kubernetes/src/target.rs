//! A Kubernetes deploy target (`plugins.kubernetes.deployTargets[i]`): which cluster, and how
//! gannet reaches it.

use gannet_core::targets::Named;
use gannet_core::typed::FieldError;
use serde::Deserialize;

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
    /// An EKS cluster reached with IAM authentication (not supported yet: refused by name).
    #[serde(default)]
    pub eks: Option<serde_json::Value>,
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
        }
    }

    /// Checks the target written at `at`.
    pub fn check(&self, at: &str) -> Result<(), FieldError> {
        let error = |field: &str, message: &str| FieldError {
            path: format!("{at}.{field}"),
            message: message.to_owned(),
        };
        if self.eks.is_some() {
            return Err(error(
                "eks",
                "EKS clusters with IAM authentication are not supported yet: give a kubeConfigPath whose user runs `aws eks get-token`, or run gannet in the cluster (inCluster)",
            ));
        }
        if self.in_cluster && !self.kube_config_path.is_empty() {
            return Err(error(
                "inCluster",
                "inCluster and kubeConfigPath exclude each other: keep one",
            ));
        }
        let url = &self.master_url;
        if !(url.is_empty() || url.starts_with("https://") || url.starts_with("http://")) {
            return Err(error(
                "masterURL",
                "must be an http(s) URL such as https://10.0.0.1:6443",
            ));
        }
        Ok(())
    }
}
