//! systole-firmware (being written).
