//! Resource limits of the host tools: what a run may ask for before anything is allocated.
//! The host checks every size option and every tensor read from a checkpoint against these
//! (with checked arithmetic), so an oversized request is one clear error, never an allocation
//! failure, a wrapped product or a loop that never ends.

/// Largest tensor the host allocates, in words: any parameter matrix, any batch of activations
/// and any lowered convolution operand. 2^26 words are 128 MiB as 16-bit words, 256 MiB as f32.
pub const MAX_TENSOR_WORDS: usize = 1 << 26;

/// Largest number of parameters a model may have in total (weights and biases of all layers).
pub const MAX_MODEL_PARAMS: usize = 1 << 26;

/// Most data-parallel shards per global batch (each is a separate forward and backward pass).
pub const MAX_SHARDS: usize = 1024;

/// Most pixel values a data set read from files (`--dataset idx:`/`npz:`) may hold, both splits
/// together: 2^28 values are 1 GiB as the host's f32 (Fashion-MNIST holds 5.5 * 10^7, CIFAR-10
/// 1.8 * 10^8). A file's header is checked against this and against the file's own length
/// before anything is allocated.
pub const MAX_DATA_VALUES: usize = 1 << 28;

/// Largest data file (or decompressed file, or npz member) read, in bytes: the most values at
/// 8 bytes each (float64), plus room for headers.
pub const MAX_DATA_FILE_BYTES: u64 = 8 * (MAX_DATA_VALUES as u64) + (1 << 20);
