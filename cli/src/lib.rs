//! gannet's embedded runtime as a library: the controller config ([`settings`]), how jobs are
//! confined ([`jobs`]) and `gannet up` ([`up`]). The `gannet` binary wires them to the command
//! line; tests run them in-process with a plugin registry of their own.

pub mod jobs;
pub mod settings;
pub mod up;
