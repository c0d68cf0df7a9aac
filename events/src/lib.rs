//! Versioned wire types: queue messages and emitted events.
