//! Helpers shared by the integration tests.

pub mod stub_tools;
