//! SQLite Store and Queue for the embedded runtime, and the port conformance suites.
