//! The board bridge's serial line: the one fact the board flow (which builds the bridge into a
//! bitstream) and the host's `bridge:` device (which talks to it) must share.

/// UART speed of the bridge top's byte bridge, in baud. The board flow builds the bridge's UART
/// at this rate and the `bridge:PATH` device opens the port at it unless told otherwise.
pub const BAUD: u32 = 115_200;
