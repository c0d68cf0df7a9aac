//! gannet's embedded runtime as a library: the controller config ([`settings`]), how jobs are
//! confined ([`jobs`]), `gannet up` ([`up`]) and the web console it serves ([`CONSOLE`]). The
//! `gannet` binary wires them to the command line; tests run them in-process with a plugin
//! registry of their own.

pub mod jobs;
pub mod settings;
pub mod up;

/// The web console `gannet up` and `gannet console` serve: the bundle `make console` built,
/// embedded. Without a bundle of the current sources this crate does not compile, and the
/// error names the command to run.
pub const CONSOLE: gannet_controller::Console = gannet_console::bundle();
