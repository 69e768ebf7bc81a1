//! Shared helpers for the integration tests in tests/tests/.
