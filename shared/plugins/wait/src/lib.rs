//! The WAIT stage.
