//! The commands for a program that embeds systole (the Python package `systole`): the same
//! options, checks, error sentences and run folders as the command line, with the results
//! returned instead of printed.

use super::train::{self as cli_train, check_trace, write_run_folder};
use super::{Cli, Command, TrainArgs};
use clap::{CommandFactory, Parser};
use systole_train::dist::Single;
use systole_train::run::{claim_out_dir, run_dist_from, RunSummary};
use systole_train::Observer;

pub use cli_train::{epoch_line, parse_rounding};

/// One long option of a subcommand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionInfo {
    /// Its name, as `--NAME` takes it.
    pub name: String,
    /// `false` for a flag (`--check`), `true` for an option that takes a value.
    pub takes_value: bool,
}

/// The long options of `systole SUBCOMMAND` (`None`: no such subcommand).
pub fn options_of(subcommand: &str) -> Option<Vec<OptionInfo>> {
    let cmd = Cli::command();
    let sub = cmd.find_subcommand(subcommand)?;
    Some(
        sub.get_arguments()
            .filter_map(|a| {
                Some(OptionInfo {
                    name: a.get_long()?.to_string(),
                    takes_value: a.get_action().takes_values(),
                })
            })
            .collect(),
    )
}

/// `systole train`'s options from `args`, the words after `systole train`.
pub fn train_args(args: &[String]) -> Result<TrainArgs, clap::Error> {
    let words = ["systole", "train"].into_iter().map(String::from);
    match Cli::try_parse_from(words.chain(args.iter().cloned()))?.command {
        Command::Train(a) => Ok(a),
        _ => unreachable!("the words start with `train`"),
    }
}

/// `systole eval`'s options from `args`, the words after `systole eval`.
pub fn eval_args(args: &[String]) -> Result<crate::onnx::cli::EvalArgs, clap::Error> {
    let words = ["systole", "eval"].into_iter().map(String::from);
    match Cli::try_parse_from(words.chain(args.iter().cloned()))?.command {
        Command::Eval(a) => Ok(a),
        _ => unreachable!("the words start with `eval`"),
    }
}

/// `systole export`'s options from `args`, the words after `systole export`.
pub fn export_args(args: &[String]) -> Result<crate::onnx::cli::ExportArgs, clap::Error> {
    let words = ["systole", "export"].into_iter().map(String::from);
    match Cli::try_parse_from(words.chain(args.iter().cloned()))?.command {
        Command::Export(a) => Ok(a),
        _ => unreachable!("the words start with `export`"),
    }
}

/// The sentence of a command-line parse error, as the CLI's `error:` line says it (without the
/// usage and the help hint that follow it in a terminal).
pub fn parse_error_sentence(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let text = text.split("\n\nUsage:").next().unwrap_or(&text);
    let text = text
        .split("\n\nFor more information")
        .next()
        .unwrap_or(text);
    text.trim().trim_start_matches("error: ").replace('\n', " ")
}

/// Why an embedded run failed: its options (nothing was started), or the run.
#[derive(Debug)]
pub enum Failure {
    /// The options are refused; no folder was touched, no device opened.
    Options(anyhow::Error),
    /// The run failed after it started.
    Run(anyhow::Error),
}

/// `systole train` in this process (one rank, no pipeline stages): the options checked as the
/// CLI checks them, `--out` claimed, the run reported through `obs` and its folder written as
/// the CLI writes it (run.json, history.csv, loss.png, checkpoint.json).
pub fn train(a: &TrainArgs, obs: &mut dyn Observer) -> Result<RunSummary, Failure> {
    let (cfg, model) = cli_train::config_and_model(a).map_err(Failure::Options)?;
    check_trace(a, &cfg).map_err(Failure::Options)?;
    if a.recipe.print_model {
        return Err(Failure::Options(anyhow::anyhow!(
            "--print-model prints the network and trains nothing: run systole train --print-model"
        )));
    }
    if a.stages.is_some_and(|s| s > 1) || a.cut.is_some() {
        return Err(Failure::Options(anyhow::anyhow!(
            "--stages and --cut split the layers over MPI ranks: run them with mpirun -np K systole train"
        )));
    }
    let window = a
        .trace
        .window(&a.recipe.device.device)
        .map_err(Failure::Options)?;
    let mut run = || -> anyhow::Result<RunSummary> {
        // Held until the reports are written: a second run into the same folder stops here.
        let _lock = a.out.as_deref().map(claim_out_dir).transpose()?;
        let data = cfg.load_data()?;
        cfg.graph_that_fits(&data)?;
        let opts = cli_train::options(a, window.clone());
        for line in cli_train::model_lines(&model, a.resume) {
            obs.run_start(&line);
        }
        let summary = run_dist_from(&cfg, &data, &opts, obs, &Single, model.start.as_ref());
        let summary = super::trace::finish(&window, summary.map_err(Into::into))?;
        if let Some(dir) = &a.out {
            write_run_folder(&summary, dir)?;
        }
        Ok(summary)
    };
    run().map_err(Failure::Run)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every option of `train` is listed with its kind, so a caller can map keyword arguments
    /// onto them.
    #[test]
    fn train_options_are_listed_with_their_kind() {
        let opts = options_of("train").unwrap();
        let find = |n: &str| opts.iter().find(|o| o.name == n).cloned();
        assert_eq!(find("epochs").map(|o| o.takes_value), Some(true));
        assert_eq!(find("check").map(|o| o.takes_value), Some(false));
        assert_eq!(find("device").map(|o| o.takes_value), Some(true));
        assert!(options_of("no-such-command").is_none());
    }

    /// A refused option reads as the CLI's error line, without the usage text after it.
    #[test]
    fn a_parse_error_is_one_sentence() {
        let e = train_args(&["--epochs".into(), "x".into()]).unwrap_err();
        let s = parse_error_sentence(&e);
        assert!(
            s.starts_with("invalid value 'x' for '--epochs <EPOCHS>'")
                && s.ends_with("'x' is not a whole number from 0 to 18446744073709551615"),
            "{s}"
        );
        assert!(!s.contains("Usage") && !s.contains("--help"), "{s}");
        let e = train_args(&["--no-such-option".into()]).unwrap_err();
        let s = parse_error_sentence(&e);
        assert!(
            s.starts_with("unexpected argument '--no-such-option' found"),
            "{s}"
        );
        assert!(!s.contains("Usage") && !s.contains('\n'), "{s}");
    }

    /// Options refused before anything starts are options failures.
    #[test]
    fn bad_options_fail_before_the_run() {
        let e = train_args(&["--model".into(), "transformer".into()]).unwrap_err();
        assert_eq!(
            parse_error_sentence(&e),
            "invalid value 'transformer' for '--model <MODEL>': unknown model 'transformer': use mlp, cnn, lenet5, resnet8, a network file (.json) or an ONNX file (.onnx)"
        );
        let a = train_args(&["--epochs".into(), "0".into()]).unwrap();
        match train(&a, &mut systole_train::Quiet) {
            Err(Failure::Options(e)) => assert_eq!(e.to_string(), "--epochs must be at least 1"),
            other => panic!("{other:?}"),
        }
    }
}
