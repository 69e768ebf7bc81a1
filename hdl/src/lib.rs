//! systole-hdl (being written).
