//! Helpers shared by the integration tests.

pub mod python;
pub mod stub_tools;
