//! The SCRIPT_RUN stage.
