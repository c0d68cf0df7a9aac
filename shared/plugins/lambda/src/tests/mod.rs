//! Tests for the Lambda plugin: planning (no AWS), and every stage against moto on loopback,
//! driven through the core's state machine, with state checked through the Lambda API.

mod deploy;
mod git_source;
mod harness;
mod live;
mod planning;
