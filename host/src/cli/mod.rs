//! The `systole` command line: argument definitions (clap derive) and the commands.

/// `println!` for a command's output, through [`write_line`]: a reader that went away ends the
/// process quietly instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::write_line(&format!($($arg)*))
    };
}

mod args_hardware;
mod bench;
mod boards;
mod check;
mod choices;
pub mod embed;
mod explore;
mod hardware;
mod output;
mod trace;
mod train;

pub(crate) use output::{progress_only, write_line, write_stdout};
pub use trace::{finish as finish_trace, TraceArgs};

pub use args_hardware::{BitstreamArgs, BoardsArgs, EmitArgs, ProgramArgs};
pub use choices::{Format, Init, Resources};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use systole_core::Rounding;
use systole_device::DeviceSpec;
use systole_train::data::DatasetSpec;
use systole_train::model::ModelName;
use systole_train::Precision;

/// systole: a systolic-array accelerator co-design kit. Train networks through a simulated
/// (or real) accelerator, check devices against the golden model, emit Verilog.
#[derive(Debug, Parser)]
#[command(name = "systole", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Train a network on a data set, offloading every matrix product to the device.
    Train(TrainArgs),
    /// Train several formats (by default f32, f16, bf16, fixed16 stochastic and nearest) with
    /// several seeds each and print the test accuracies and their means.
    Compare(CompareArgs),
    /// Check a device against the golden model on random matrix products and convolutions.
    Check(CheckArgs),
    /// Sweep the design space: for each array size, feature-map depth, word width and
    /// rounding, the test accuracy over seeds (golden model), simulated cycles per epoch,
    /// Yosys resources and the boards it fits; writes explore.csv, explore.json, pareto.png.
    Explore(ExploreArgs),
    /// Print the build, the array configuration and what is installed.
    Info(DeviceArgs),
    /// Write the accelerator's Verilog: module `top` with the n x n systolic array, its A/B/C
    /// buffers, register file and, unless --fm-depth 0, the conv unit (a feature-map buffer of
    /// --fm-depth words and two gather engines). Ports, registers and timing: docs/HARDWARE.md.
    EmitVerilog(EmitArgs),
    /// Regenerate the tables and worked examples of the hardware programming guide
    /// (docs/HARDWARE.md) from the code's definitions.
    Guide(GuideArgs),
    /// Time matrix products on the Verilator model: cycles, utilisation, simulation speed.
    Bench(BenchArgs),
    /// List the supported FPGA boards, the largest array each fits (resource model) and the
    /// board images as Yosys measured them at each word width W (boards/data/yosys-w.json,
    /// written by --synthesize).
    Boards(BoardsArgs),
    /// Generate the board design and build its bitstream (where the tools are installed).
    Bitstream(BitstreamArgs),
    /// Load a built bitstream onto a board with openFPGALoader.
    Program(ProgramArgs),
    /// Evaluate an ONNX file or a run on a test split in frozen formats (docs/ONNX.md).
    Eval(crate::onnx::cli::EvalArgs),
    /// Write a run's network as ONNX with QDQ pairs where the array rounds (docs/ONNX.md).
    Export(crate::onnx::cli::ExportArgs),
}

/// Options of `guide`.
#[derive(Debug, Clone, Args)]
pub struct GuideArgs {
    /// The guide to render.
    #[arg(long, default_value = "docs/HARDWARE.md")]
    pub doc: PathBuf,
    /// Rewrite the guide in place (else print the rendered guide).
    #[arg(long, conflicts_with = "check")]
    pub write: bool,
    /// Exit with an error if the guide's generated parts are out of date.
    #[arg(long)]
    pub check: bool,
}

/// Options of `bench`.
#[derive(Debug, Clone, Args)]
#[command(allow_negative_numbers = true)]
pub struct BenchArgs {
    /// Array sizes, comma-separated.
    #[arg(long, value_parser = whole, default_value = "8", value_delimiter = ',')]
    pub array: Vec<usize>,
    /// Square matrix sizes M=K=N, comma-separated.
    #[arg(long, value_parser = whole, default_value = "64,128", value_delimiter = ',')]
    pub sizes: Vec<usize>,
    /// Images of the LeNet-style conv layer measured on the conv unit (0: skip it).
    #[arg(long, value_parser = whole, default_value_t = 1)]
    pub conv_batch: usize,
    /// --trace traces the matrix products' model (one --array size); the conv layer runs on a
    /// model of its own, untraced.
    #[command(flatten)]
    pub trace: TraceArgs,
    /// Instead: the link. Trains the same --steps digits-MLP steps three ways in one run: the
    /// whole step on the simulated training SoC image, the host-driven step on it (board
    /// operations) and over bridge: on the simulated bridge image; prints bytes, frames, round
    /// trips, firmware cycles, projected epoch and 20-epoch demo times (slow: minutes).
    #[arg(long)]
    pub link: bool,
    /// Training steps of --link.
    #[arg(long, value_parser = whole, default_value_t = 3, requires = "link")]
    pub steps: usize,
    /// Mini-batch size of --link.
    #[arg(long, value_parser = whole, default_value_t = 32, requires = "link")]
    pub batch: usize,
    /// Hidden width of --link's MLP (64-H-10).
    #[arg(long, value_parser = whole, default_value_t = 32, requires = "link")]
    pub hidden: usize,
}

/// Where products run.
#[derive(Debug, Clone, Args)]
#[command(allow_negative_numbers = true)]
pub struct DeviceArgs {
    /// Where the products run.
    #[arg(long, default_value = "golden", value_parser = device_spec,
          help = format!("Device: {}.", systole_device::DEVICE_CHOICES))]
    pub device: DeviceSpec,
    /// Array size N (an N x N systolic array).
    #[arg(long, value_parser = whole, default_value_t = 8)]
    pub array: usize,
}

/// How pixels become the network's input.
#[derive(Debug, Clone, Args)]
#[command(allow_negative_numbers = true)]
pub struct InputArgs {
    /// The network's input is pixel / pixel_max * SCALE + OFFSET (pixel_max: 255 for byte
    /// images, 16 for digits, 1 for float images, which are taken as given).
    #[arg(long, default_value_t = 1.0)]
    pub input_scale: f32,
    /// See --input-scale.
    #[arg(long, default_value_t = 0.0)]
    pub input_offset: f32,
}

/// `--device`, parsed once: a wrong value is a usage error naming the choices.
fn device_spec(s: &str) -> Result<DeviceSpec, String> {
    s.parse()
        .map_err(|e: systole_device::DeviceError| e.to_string())
}

/// `--dataset`, parsed once.
fn dataset(s: &str) -> Result<DatasetSpec, String> {
    s.parse()
        .map_err(|e: systole_train::data::DataError| e.to_string())
}

/// The network, the data and the training recipe: what `train` and `compare` share.
#[derive(Debug, Clone, Args)]
#[command(allow_negative_numbers = true)]
pub struct RecipeArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub device: DeviceArgs,
    /// Network: mlp, cnn, lenet5, resnet8, a network file (.json) or an ONNX file (.onnx).
    #[arg(long, default_value = "mlp")]
    pub model: ModelName,
    /// With --model FILE.onnx: start from the file's weights (file) or at random (random).
    #[arg(long, value_enum, default_value_t = Init::File)]
    pub init: Init,
    /// MLP hidden widths, comma-separated.
    #[arg(long, value_parser = whole, default_value = "32", value_delimiter = ',')]
    pub hidden: Vec<usize>,
    /// CNN block channels, comma-separated.
    #[arg(long, value_parser = whole, default_value = "8,16", value_delimiter = ',')]
    pub channels: Vec<usize>,
    /// Data set: digits, fashion-mnist, idx:DIR (MNIST-format IDX files, gzipped or not) or
    /// npz:FILE (a numpy archive of x_train, y_train, x_test, y_test); see docs/DATA.md.
    #[arg(long, default_value = "digits", value_parser = dataset)]
    pub dataset: DatasetSpec,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub input: InputArgs,
    /// Train on only the first N training images.
    #[arg(long, value_parser = whole)]
    pub limit: Option<usize>,
    /// Print the network (layers, shapes, parameters, MACs) for the data set and exit.
    #[arg(long)]
    pub print_model: bool,
    /// With --print-model: print it as a network file (JSON) that --model reads.
    #[arg(long, requires = "print_model")]
    pub json: bool,
    /// Epochs in total (a resumed run continues up to this many).
    #[arg(long, value_parser = whole, default_value_t = 20)]
    pub epochs: usize,
    /// Mini-batch size.
    #[arg(long, value_parser = whole, default_value_t = 32)]
    pub batch: usize,
    /// Learning rate of the first epoch (rounded to 16 fractional bits on every precision)
    /// [default: 0.05 on digits, 0.02 on fashion-mnist and files].
    #[arg(long)]
    pub lr: Option<f32>,
    /// Factor the learning rate is multiplied by after each epoch (1: constant) [default: 1 on
    /// digits, 0.85 on fashion-mnist and files].
    #[arg(long)]
    pub lr_decay: Option<f32>,
    /// Momentum.
    #[arg(long, default_value_t = 0.9)]
    pub momentum: f32,
    /// Recompute every offloaded operation in the golden model and stop at the first difference.
    #[arg(long)]
    pub check: bool,
    /// Fixed point: word width W in bits (8 to 16) of every word the array computes with;
    /// other than 16 on any device (the array and its conv unit built at W): golden, verilator, and boards behind serial: and bridge: built at W
    /// (`systole bitstream --word-bits W`, `systole-board-sim --word-bits W`).
    #[arg(long, value_parser = whole_u32, default_value_t = 16)]
    pub word_bits: u32,
    /// Fixed point: width in bits (W to 16) of the weights and momentum the SGD update keeps,
    /// rounded to W before each product [default: W, no wider copy].
    #[arg(long, value_parser = whole_u32)]
    pub master_bits: Option<u32>,
}

/// Options of a training run.
#[derive(Debug, Clone, Args)]
#[command(allow_negative_numbers = true)]
pub struct TrainArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub recipe: RecipeArgs,
    /// Number format: fixed16 (on the device), f32, f16 or bf16 (on the host).
    #[arg(long, value_enum, default_value_t = Precision::Fixed16)]
    pub precision: Precision,
    /// Rounding of every fixed-point conversion.
    #[arg(long, value_enum, default_value_t = Rounding::Stochastic)]
    pub rounding: Rounding,
    /// Run seed.
    #[arg(long, value_parser = whole_u64, default_value_t = 1)]
    pub seed: u64,
    /// Folder for run.json, history.csv, loss.png and checkpoint.json.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue the run whose checkpoint is in --out.
    #[arg(long)]
    pub resume: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub trace: TraceArgs,
    /// Start afresh in an --out folder that holds a checkpoint, replacing it (without this, or
    /// --resume, such a folder is refused so no run is lost).
    #[arg(long, conflicts_with = "resume")]
    pub overwrite: bool,
    /// On a board whose firmware trains itself (`--device serial:` to the training image),
    /// drive every step from the host anyway (each product one board operation) instead of
    /// running the whole step on the board.
    #[arg(long)]
    pub host_step: bool,
    /// Write checkpoint.json every N epochs and after the last (default: every epoch); --resume
    /// continues from the last one written. On a board that trains itself the other epochs
    /// read back only the parameters the evaluation needs, not the momentum.
    #[arg(long, value_parser = whole, default_value_t = 1)]
    pub checkpoint_every: usize,
    /// Data-parallel shards per batch (fixed16 only; default under mpirun: the rank count).
    /// Results depend on the shard count, not on how many MPI ranks share the shards.
    #[arg(long, value_parser = whole)]
    pub shards: Option<usize>,
    /// Micro-batches per shard, their gradients accumulated exactly (fixed16 only; must divide
    /// --batch / --shards). Results depend on this number, not on --stages or the rank count.
    #[arg(long, value_parser = whole)]
    pub microbatches: Option<usize>,
    /// Pipeline stages: the layers cut into this many stages, one MPI rank (and device) each,
    /// under mpirun -np STAGES x SHARDS (fixed16 only; the weights equal one process's).
    #[arg(long, value_parser = whole)]
    pub stages: Option<usize>,
    /// Where the stages are cut: the layers after which a stage ends, e.g. 1,2 (default: the
    /// cut whose largest stage has the fewest multiply-accumulates).
    #[arg(long, value_parser = whole, value_delimiter = ',', requires = "stages")]
    pub cut: Option<Vec<usize>>,
}

/// Options of `compare`.
#[derive(Debug, Clone, Args)]
#[command(allow_negative_numbers = true)]
pub struct CompareArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub recipe: RecipeArgs,
    /// Formats to train, comma-separated: f32, f16, bf16, fixed16-stochastic, fixed16-nearest,
    /// fixed16-truncate. The first is the one the others are compared with.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "f32,f16,bf16,fixed16-stochastic,fixed16-nearest"
    )]
    pub formats: Vec<Format>,
    /// The first run seed: each format trains with seeds --seed, --seed + 1, ...
    #[arg(long, value_parser = whole_u64, default_value_t = 1)]
    pub seed: u64,
    /// How many seeds each format trains with.
    #[arg(long, value_parser = whole_u64, default_value_t = 3)]
    pub seeds: u64,
    /// Folder for compare.csv and each run's reports (FORMAT-seedN/run.json, history.csv,
    /// loss.png).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replace the reports of an earlier compare in --out (without this such a folder is
    /// refused).
    #[arg(long)]
    pub overwrite: bool,
}

/// Options of `explore`. Lists are comma-separated; every combination is a design point.
#[derive(Debug, Clone, Args)]
#[command(allow_negative_numbers = true)]
pub struct ExploreArgs {
    /// Network: mlp, cnn, lenet5, resnet8, a network file (.json) or an ONNX file (.onnx).
    #[arg(long, default_value = "mlp")]
    pub model: ModelName,
    /// With --model FILE.onnx: every run starts from the file's weights (file) or at random
    /// from its seed (random).
    #[arg(long, value_enum, default_value_t = Init::File)]
    pub init: Init,
    /// MLP hidden widths, comma-separated.
    #[arg(long, value_parser = whole, default_value = "32", value_delimiter = ',')]
    pub hidden: Vec<usize>,
    /// CNN block channels, comma-separated.
    #[arg(long, value_parser = whole, default_value = "8,16", value_delimiter = ',')]
    pub channels: Vec<usize>,
    /// Data set: digits, fashion-mnist, idx:DIR or npz:FILE (see docs/DATA.md).
    #[arg(long, default_value = "digits", value_parser = dataset)]
    pub dataset: DatasetSpec,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub input: InputArgs,
    /// Train on only the first N training images.
    #[arg(long, value_parser = whole)]
    pub limit: Option<usize>,
    /// Epochs of every training run.
    #[arg(long, value_parser = whole, default_value_t = 5)]
    pub epochs: usize,
    /// Mini-batch size.
    #[arg(long, value_parser = whole, default_value_t = 32)]
    pub batch: usize,
    /// Learning rate [default: the data set's, as `train`].
    #[arg(long)]
    pub lr: Option<f32>,
    /// Learning-rate decay per epoch [default: the data set's, as `train`].
    #[arg(long)]
    pub lr_decay: Option<f32>,
    /// Momentum.
    #[arg(long, default_value_t = 0.9)]
    pub momentum: f32,
    /// Array sizes n (n x n), e.g. 4,8,16: sizes with a Verilated model in this build.
    #[arg(long)]
    pub array: String,
    /// Feature-map words of the conv unit (0: none), e.g. 0,4096.
    #[arg(long, default_value = "0")]
    pub fm_depth: String,
    /// Word widths W in bits, 8 to 16, e.g. 8,12,16 (each trains at W on the golden model; Yosys resources at W, none with --resources estimate).
    #[arg(long, default_value = "16")]
    pub word_bits: String,
    /// Roundings: stochastic, nearest, truncate.
    #[arg(long, default_value = "stochastic")]
    pub rounding: String,
    /// Two multiplies per DSP48E1, packed in pairs of PEs: off, on or off,on (on: W <= 8
    /// and even array sizes only; the same words and cycles, half the DSP48E1s).
    #[arg(long, default_value = "off")]
    pub dsp_pack: String,
    /// Boards each point is fitted to (all: every board of `systole boards`).
    #[arg(long, default_value = "all")]
    pub board: String,
    /// Seeds per point (--seed, --seed + 1, ...).
    #[arg(long, value_parser = whole_u64, default_value_t = 3)]
    pub seeds: u64,
    /// The first seed.
    #[arg(long, value_parser = whole_u64, default_value_t = 1)]
    pub seed: u64,
    /// Training steps each point runs on the Verilated array to check the cycle model.
    #[arg(long, value_parser = whole, default_value_t = 2)]
    pub sample_steps: usize,
    /// Resources from yosys (synth_xilinx, cached by design hash) or estimate (the resource
    /// model of `systole boards`, no synthesis).
    #[arg(long, value_enum, default_value_t = Resources::Yosys)]
    pub resources: Resources,
    /// Folder of the synthesis cache [default: ~/.cache/systole/synth].
    #[arg(long)]
    pub synth_cache: Option<PathBuf>,
    /// Worker threads [default: the cores].
    #[arg(long, value_parser = whole)]
    pub jobs: Option<usize>,
    /// Folder for explore.csv, explore.json and pareto.png; a sweep interrupted there
    /// resumes with its written points kept.
    #[arg(long)]
    pub out: PathBuf,
    /// Replace the results of a sweep with other settings in --out (without this it is
    /// refused).
    #[arg(long)]
    pub overwrite: bool,
}

/// Options of `check`.
#[derive(Debug, Clone, Args)]
#[command(allow_negative_numbers = true)]
pub struct CheckArgs {
    #[command(flatten)]
    #[allow(missing_docs)]
    pub device: DeviceArgs,
    /// Random cases per operation kind and rounding mode.
    #[arg(long, value_parser = whole, default_value_t = 5)]
    pub cases: usize,
    /// Seed of the random cases.
    #[arg(long, value_parser = whole_u64, default_value_t = 1)]
    pub seed: u64,
    /// Word width W in bits (8 to 16) of the array checked: a board built at W
    /// (`systole bitstream --word-bits W`, `systole-board-sim --word-bits W`), or the golden
    /// model and Verilated array at W; the random words and formats fit W.
    #[arg(long, value_parser = whole_u32, default_value_t = 16)]
    pub word_bits: u32,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub trace: TraceArgs,
}

/// Parses a count or size: a whole number, with a message that says so (clap's own says
/// "invalid digit found in string" for `-1`).
pub(crate) fn whole(s: &str) -> Result<usize, String> {
    s.parse()
        .map_err(|_| format!("'{s}' is not a whole number from 0 to {}", usize::MAX))
}

/// [`whole`] for widths and other 32-bit values.
pub(crate) fn whole_u32(s: &str) -> Result<u32, String> {
    s.parse()
        .map_err(|_| format!("'{s}' is not a whole number from 0 to {}", u32::MAX))
}

/// [`whole`] for seeds and other 64-bit values.
pub(crate) fn whole_u64(s: &str) -> Result<u64, String> {
    s.parse()
        .map_err(|_| format!("'{s}' is not a whole number from 0 to {}", u64::MAX))
}

/// An error and its causes on one line, "what failed: why", for the user. Many of the
/// project's errors already name their cause in their own message (and keep it as `#[source]`
/// too), so a cause whose text is already there is not repeated.
pub fn error_text(e: &anyhow::Error) -> String {
    systole_device::error_chain(e.as_ref())
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Train(a) => {
            progress_only();
            train::train(&a)
        }
        c @ (Command::Eval(_) | Command::Export(_)) => crate::onnx::cli::run(c),
        Command::Compare(a) => {
            progress_only();
            train::compare(&a)
        }
        Command::Check(a) => check::check(&a),
        Command::Explore(a) => {
            progress_only();
            explore::explore(&a)
        }
        Command::Info(a) => check::info(&a),
        Command::EmitVerilog(a) => hardware::emit_verilog(&a),
        Command::Guide(a) => guide(&a),
        Command::Bench(a) => bench::bench(&a),
        Command::Boards(a) => boards::boards(&a),
        Command::Bitstream(a) => hardware::bitstream(&a),
        Command::Program(a) => {
            let board = systole_boards::find(&a.board)?;
            systole_boards::program(board, &a.out)?;
            outln!("programmed {} from {}", a.board, a.out.display());
            Ok(())
        }
    }
}

/// `systole guide`.
fn guide(a: &GuideArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    let doc = std::fs::read_to_string(&a.doc)
        .with_context(|| format!("reading {} (pass --doc PATH to the guide)", a.doc.display()))?;
    let fresh = crate::guide::render(&doc)?;
    if a.check {
        anyhow::ensure!(
            fresh == doc,
            "{} is out of date: run `systole guide --write`",
            a.doc.display()
        );
        outln!("{} is current", a.doc.display());
    } else if a.write {
        if fresh == doc {
            outln!("{} is current", a.doc.display());
        } else {
            systole_train::write_atomic(&a.doc, fresh.as_bytes())?;
            outln!("rewrote the generated parts of {}", a.doc.display());
        }
    } else {
        write_stdout(fresh.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
