//! The deployment state machine: pure functions from a deployment and an event to the next state.
