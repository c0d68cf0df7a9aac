//! PipeCD application configs (`app.pipecd.yaml`): parsing, defaults and errors.
//! PLACEHOLDER: being written; keep `AppConfig` and `AppKind` names.

#[derive(Clone, Debug, PartialEq)]
pub struct AppConfig {
    pub kind: AppKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppKind {
    LambdaApp,
    EcsApp,
    CloudRunApp,
    TerraformApp,
    KubernetesApp,
    Application,
}
