//! The one list of compiled-in plugins. `gannet up` and the AWS functions both build their
//! plugins from it ([`Registry::build`] with gannet.yaml's `plugins:` or `GANNET_PLUGINS`).
//!
//! A new platform is its crate (exporting a [`gannet_core::registry::PluginSpec`]) plus one
//! line here and its dependency in this crate's `Cargo.toml`.

use gannet_core::registry::Registry;

/// Every plugin compiled into this build.
pub fn registry() -> Registry {
    Registry::new(vec![
        gannet_plugin_wait::SPEC,
        gannet_plugin_wait_approval::SPEC,
        gannet_plugin_script_run::SPEC,
        gannet_plugin_lambda::SPEC,
        gannet_plugin_ecs::SPEC,
        gannet_plugin_terraform::SPEC,
        gannet_plugin_kubernetes::SPEC,
        gannet_plugin_cloudrun::SPEC,
        gannet_plugin_analysis::SPEC,
        // Last: its phases run the stages of the plugins above (SCRIPT_RUN, ANALYSIS).
        gannet_plugin_lifecycle::SPEC,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_spec_is_named_as_its_plugin() {
        let registry = registry();
        let plugins = registry.without_settings().expect("empty settings build");
        let built: Vec<&str> = plugins.iter().map(|p| p.name()).collect();
        assert_eq!(built, registry.names());
    }
}
