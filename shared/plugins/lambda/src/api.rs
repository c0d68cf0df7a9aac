//! The AWS Lambda API as the stages use it: each call maps the SDK's types to the plugin's own
//! ([`LiveFunction`], [`AliasRouting`]) and its errors to [`ApiError`] (see `errors`).

use std::collections::{BTreeMap, HashMap};

use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::{
    AliasRoutingConfiguration, Architecture, Environment, EphemeralStorage, FunctionCode,
    FunctionConfiguration, LastUpdateStatus, PackageType, Runtime, State, VpcConfig,
};
use aws_sdk_lambda::Client;

use crate::errors::{build_error, classify, ApiError};
use crate::function::{Code, Desired, FunctionState, LiveFunction, UpdateStatus};
use crate::routing::AliasRouting;

/// At most this many pages of versions are read when looking for one (50 per page).
const MAX_VERSION_PAGES: usize = 200;

/// A Lambda client for one deploy target.
#[derive(Clone, Debug)]
pub(crate) struct LambdaApi {
    client: Client,
}

impl LambdaApi {
    pub(crate) fn new(client: Client) -> Self {
        Self { client }
    }

    #[cfg(test)]
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// `$LATEST` of function `name`, with its code location and tags; `None` if it does not
    /// exist.
    pub(crate) async fn function(&self, name: &str) -> Result<Option<LiveFunction>, ApiError> {
        self.function_at(name, None).await
    }

    /// Function `name` at `qualifier` (a version or an alias: the version the alias points
    /// at), or `$LATEST` without one, with its code location and the function's tags; `None`
    /// if the function or the qualifier does not exist.
    pub(crate) async fn function_at(
        &self,
        name: &str,
        qualifier: Option<&str>,
    ) -> Result<Option<LiveFunction>, ApiError> {
        let out = match self
            .client
            .get_function()
            .function_name(name)
            .set_qualifier(qualifier.map(str::to_owned))
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                return match classify("Lambda GetFunction", e) {
                    ApiError::NotFound { .. } => Ok(None),
                    other => Err(other),
                }
            }
        };
        let mut live = out.configuration().map(live_function).unwrap_or_default();
        live.image_uri = out.code().and_then(|c| c.image_uri()).map(str::to_owned);
        live.resolved_image_uri = out
            .code()
            .and_then(|c| c.resolved_image_uri())
            .map(str::to_owned);
        live.tags = out
            .tags()
            .map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        Ok(Some(live))
    }

    /// Creates the function (unpublished); returns its `CodeSha256`.
    pub(crate) async fn create(&self, want: &Desired) -> Result<String, ApiError> {
        let m = &want.manifest;
        let mut req = self
            .client
            .create_function()
            .function_name(&m.name)
            .role(&m.role)
            .memory_size(m.memory)
            .timeout(m.timeout)
            .publish(false)
            .code(function_code(&want.code))
            .set_tags(Some(hash_map(&want.tags)))
            .set_handler(m.handler.clone())
            .set_runtime(m.runtime.as_deref().map(Runtime::from));
        if matches!(want.code, Code::Image { .. }) {
            req = req.package_type(PackageType::Image);
        }
        if !m.environments.is_empty() {
            req = req.environment(environment(&m.environments));
        }
        if let Some(size) = m.ephemeral_storage {
            req = req.ephemeral_storage(ephemeral(size)?);
        }
        if let Some(vpc) = &m.vpc_config {
            req = req.vpc_config(vpc_config(vpc));
        }
        if !m.layers.is_empty() {
            req = req.set_layers(Some(m.layers.clone()));
        }
        if let Some(arch) = &m.architecture {
            req = req.architectures(Architecture::from(arch.as_str()));
        }
        let out = req
            .send()
            .await
            .map_err(|e| classify("Lambda CreateFunction", e))?;
        Ok(out.code_sha256().unwrap_or_default().to_owned())
    }

    /// Replaces the code (and the architecture, which goes with it); returns `CodeSha256`.
    pub(crate) async fn update_code(&self, want: &Desired) -> Result<String, ApiError> {
        let mut req = self
            .client
            .update_function_code()
            .function_name(want.name())
            .publish(false);
        req = match &want.code {
            Code::Zip { bytes, .. } => req.zip_file(Blob::new(bytes.clone())),
            Code::S3 {
                bucket,
                key,
                object_version,
            } => req
                .s3_bucket(bucket)
                .s3_key(key)
                .set_s3_object_version(object_version.clone()),
            Code::Image { uri } => req.image_uri(uri),
        };
        if let Some(arch) = &want.manifest.architecture {
            req = req.architectures(Architecture::from(arch.as_str()));
        }
        let out = req
            .send()
            .await
            .map_err(|e| classify("Lambda UpdateFunctionCode", e))?;
        Ok(out.code_sha256().unwrap_or_default().to_owned())
    }

    /// Sets every configuration field the manifest has.
    pub(crate) async fn update_config(
        &self,
        want: &Desired,
        live: &LiveFunction,
    ) -> Result<(), ApiError> {
        let m = &want.manifest;
        let mut req = self
            .client
            .update_function_configuration()
            .function_name(&m.name)
            .role(&m.role)
            .memory_size(m.memory)
            .timeout(m.timeout)
            .set_handler(m.handler.clone())
            .set_runtime(m.runtime.as_deref().map(Runtime::from))
            .environment(environment(&m.environments))
            .set_revision_id(live.revision_id.clone());
        if let Some(size) = m.ephemeral_storage {
            req = req.ephemeral_storage(ephemeral(size)?);
        }
        let has_vpc = !live.subnet_ids.is_empty() || !live.security_group_ids.is_empty();
        if m.vpc_config.is_some() || has_vpc {
            req = req.vpc_config(vpc_config(&m.vpc_config.clone().unwrap_or_default()));
        }
        if !m.layers.is_empty() || !live.layers.is_empty() {
            req = req.set_layers(Some(m.layers.clone()));
        }
        req.send()
            .await
            .map_err(|e| classify("Lambda UpdateFunctionConfiguration", e))?;
        Ok(())
    }

    pub(crate) async fn tag(
        &self,
        arn: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        self.client
            .tag_resource()
            .resource(arn)
            .set_tags(Some(hash_map(tags)))
            .send()
            .await
            .map_err(|e| classify("Lambda TagResource", e))?;
        Ok(())
    }

    /// Publishes `$LATEST` as it was read (`CodeSha256` and `RevisionId` preconditions); returns
    /// the version. Lambda returns the latest version when nothing changed since it.
    pub(crate) async fn publish(
        &self,
        name: &str,
        live: &LiveFunction,
        description: &str,
    ) -> Result<String, ApiError> {
        let out = self
            .client
            .publish_version()
            .function_name(name)
            .code_sha256(&live.code_sha256)
            .set_revision_id(live.revision_id.clone())
            .description(description)
            .send()
            .await
            .map_err(|e| classify("Lambda PublishVersion", e))?;
        out.version()
            .map(str::to_owned)
            .ok_or_else(|| ApiError::incomplete("Lambda PublishVersion", "version number"))
    }

    /// The published version whose description is `description`, if there is one.
    pub(crate) async fn version_described(
        &self,
        name: &str,
        description: &str,
    ) -> Result<Option<String>, ApiError> {
        let mut marker: Option<String> = None;
        for _ in 0..MAX_VERSION_PAGES {
            let out = self
                .client
                .list_versions_by_function()
                .function_name(name)
                .set_marker(marker.take())
                .send()
                .await
                .map_err(|e| classify("Lambda ListVersionsByFunction", e))?;
            let found = out
                .versions()
                .iter()
                .filter(|v| v.version() != Some("$LATEST"))
                .find(|v| v.description() == Some(description))
                .and_then(|v| v.version());
            if let Some(version) = found {
                return Ok(Some(version.to_owned()));
            }
            match out.next_marker() {
                Some(next) if !next.is_empty() => marker = Some(next.to_owned()),
                _ => return Ok(None),
            }
        }
        Ok(None)
    }

    /// The alias's routing; `None` when the alias (or the function) does not exist.
    pub(crate) async fn alias(
        &self,
        function: &str,
        alias: &str,
    ) -> Result<Option<AliasRouting>, ApiError> {
        let out = match self
            .client
            .get_alias()
            .function_name(function)
            .name(alias)
            .send()
            .await
        {
            Ok(out) => out,
            Err(e) => {
                return match classify("Lambda GetAlias", e) {
                    ApiError::NotFound { .. } => Ok(None),
                    other => Err(other),
                }
            }
        };
        let weights = out
            .routing_config()
            .and_then(|r| r.additional_version_weights())
            .map(|w| w.iter().map(|(k, v)| (k.clone(), *v)).collect())
            .unwrap_or_default();
        Ok(Some(AliasRouting {
            version: out.function_version().unwrap_or_default().to_owned(),
            weights,
        }))
    }

    /// Points the alias at `routing`, creating it when `exists` is false. The routing config
    /// is always sent, so an empty one clears the weights.
    pub(crate) async fn put_alias(
        &self,
        function: &str,
        alias: &str,
        routing: &AliasRouting,
        exists: bool,
    ) -> Result<(), ApiError> {
        let config = AliasRoutingConfiguration::builder()
            .set_additional_version_weights(Some(
                routing
                    .weights
                    .iter()
                    .map(|(k, v)| (k.clone(), *v))
                    .collect(),
            ))
            .build();
        if exists {
            self.client
                .update_alias()
                .function_name(function)
                .name(alias)
                .function_version(&routing.version)
                .routing_config(config)
                .send()
                .await
                .map_err(|e| classify("Lambda UpdateAlias", e))?;
        } else {
            self.client
                .create_alias()
                .function_name(function)
                .name(alias)
                .function_version(&routing.version)
                .routing_config(config)
                .send()
                .await
                .map_err(|e| classify("Lambda CreateAlias", e))?;
        }
        Ok(())
    }

    pub(crate) async fn delete_alias(&self, function: &str, alias: &str) -> Result<(), ApiError> {
        match self
            .client
            .delete_alias()
            .function_name(function)
            .name(alias)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => match classify("Lambda DeleteAlias", e) {
                ApiError::NotFound { .. } => Ok(()),
                other => Err(other),
            },
        }
    }
}

fn live_function(c: &FunctionConfiguration) -> LiveFunction {
    let text = |s: Option<&str>| s.unwrap_or_default().to_owned();
    LiveFunction {
        arn: text(c.function_arn()),
        state: c.state().map(|s| match s {
            State::Pending => FunctionState::Pending,
            State::Active => FunctionState::Active,
            State::Inactive => FunctionState::Inactive,
            State::Failed => FunctionState::Failed,
            _ => FunctionState::Other,
        }),
        state_reason: text(c.state_reason()),
        update: c.last_update_status().map(|s| match s {
            LastUpdateStatus::InProgress => UpdateStatus::InProgress,
            LastUpdateStatus::Successful => UpdateStatus::Successful,
            LastUpdateStatus::Failed => UpdateStatus::Failed,
            _ => UpdateStatus::None,
        }),
        update_reason: text(c.last_update_status_reason()),
        version: c.version().map(str::to_owned),
        code_sha256: text(c.code_sha256()),
        image_uri: None,
        resolved_image_uri: None,
        revision_id: c.revision_id().map(str::to_owned),
        role: text(c.role()),
        handler: c.handler().map(str::to_owned),
        runtime: c.runtime().map(|r| r.as_str().to_owned()),
        memory: c.memory_size(),
        timeout: c.timeout(),
        environments: c
            .environment()
            .and_then(|e| e.variables())
            .map(|v| v.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default(),
        ephemeral_storage: c.ephemeral_storage().map(|e| e.size()),
        subnet_ids: c
            .vpc_config()
            .map(|v| v.subnet_ids().to_vec())
            .unwrap_or_default(),
        security_group_ids: c
            .vpc_config()
            .map(|v| v.security_group_ids().to_vec())
            .unwrap_or_default(),
        layers: c
            .layers()
            .iter()
            .filter_map(|l| l.arn().map(str::to_owned))
            .collect(),
        architectures: c
            .architectures()
            .iter()
            .map(|a| a.as_str().to_owned())
            .collect(),
        tags: BTreeMap::new(),
    }
}

fn function_code(code: &Code) -> FunctionCode {
    let b = FunctionCode::builder();
    match code {
        Code::Zip { bytes, .. } => b.zip_file(Blob::new(bytes.clone())),
        Code::S3 {
            bucket,
            key,
            object_version,
        } => b
            .s3_bucket(bucket)
            .s3_key(key)
            .set_s3_object_version(object_version.clone()),
        Code::Image { uri } => b.image_uri(uri),
    }
    .build()
}

fn environment(vars: &BTreeMap<String, String>) -> Environment {
    Environment::builder()
        .set_variables(Some(hash_map(vars)))
        .build()
}

fn ephemeral(size: i32) -> Result<EphemeralStorage, ApiError> {
    EphemeralStorage::builder()
        .size(size)
        .build()
        .map_err(|e| build_error("Lambda EphemeralStorage", e))
}

fn vpc_config(vpc: &crate::manifest::VpcConfig) -> VpcConfig {
    VpcConfig::builder()
        .set_subnet_ids(Some(vpc.subnet_ids.clone()))
        .set_security_group_ids(Some(vpc.security_group_ids.clone()))
        .build()
}

fn hash_map(map: &BTreeMap<String, String>) -> HashMap<String, String> {
    map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}
