//! systole-sim (being written).
