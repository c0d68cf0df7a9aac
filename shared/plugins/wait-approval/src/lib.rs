//! The WAIT_APPROVAL stage.
