//! Tests for the ECS plugin: planning (no AWS), and every stage against moto on loopback
//! (ECS and ELBv2), driven through the core's state machine, with state checked through the
//! AWS APIs after every stage.
//!
//! Where moto does not model ECS: a task set is STEADY_STATE the moment it exists, and a
//! deleted one is gone at once (AWS drains it first). The waiting paths are unit-tested in
//! `steady` instead.

mod deploy;
mod drift;
mod harness;
mod planning;
mod steady;
