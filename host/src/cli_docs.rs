//! docs/CLI.md, the command-line reference, rendered from the clap definitions of `systole`
//! ([`crate::cli::Cli`]) and `systole-board-sim` ([`crate::board_sim::BoardSimArgs`]), so the
//! reference cannot drift from the options the binaries parse. `host/tests/cli_docs.rs` fails
//! when the committed file differs and names the command that rewrites it.

use clap::{Arg, ArgAction, Command, CommandFactory};
use std::fmt::Write;

/// The command that rewrites docs/CLI.md from the code.
pub const REGENERATE: &str = "SYSTOLE_UPDATE_DOCS=1 cargo test -p systole --test cli_docs";

/// docs/CLI.md as the current code renders it.
pub fn markdown() -> String {
    let mut systole = crate::cli::Cli::command();
    let mut board_sim = crate::board_sim::BoardSimArgs::command();
    // `build` gives every subcommand its full name (`systole train`) for the usage lines.
    systole.build();
    board_sim.build();
    let mut md = String::new();
    md.push_str("# Command-line reference\n\n");
    let _ = writeln!(
        md,
        "Generated from the clap definitions in `host/src/cli/` and `host/src/board_sim.rs`; \
         do not edit by hand. After changing an option, regenerate it with\n\
         `{REGENERATE}`.\n"
    );
    md.push_str("| command | what it does |\n|---|---|\n");
    let subcommands: Vec<&Command> = systole
        .get_subcommands()
        .filter(|c| c.get_name() != "help")
        .collect();
    for c in subcommands.iter().copied().chain([&board_sim]) {
        let _ = writeln!(
            md,
            "| [`{}`](#{}) | {} |",
            full_name(c),
            anchor(&full_name(c)),
            first_line(c)
        );
    }
    md.push('\n');
    for c in subcommands.into_iter().chain([&board_sim]) {
        command_section(&mut md, c);
    }
    md
}

/// `systole train`, or the binary's own name for a top-level command.
fn full_name(c: &Command) -> String {
    c.get_bin_name().unwrap_or(c.get_name()).to_string()
}

/// GitHub's anchor of a `## `name`` heading: lower case, spaces to dashes, punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|ch| match ch {
            ' ' => Some('-'),
            ch if ch.is_alphanumeric() || ch == '-' || ch == '_' => Some(ch),
            _ => None,
        })
        .collect()
}

/// The first sentence-line of a command's description, for the index table.
fn first_line(c: &Command) -> String {
    let about = c.get_about().map(|a| a.to_string()).unwrap_or_default();
    about.lines().next().unwrap_or("").replace('|', "\\|")
}

/// One command: its description, usage and every option.
fn command_section(md: &mut String, c: &Command) {
    let name = full_name(c);
    let _ = writeln!(md, "## `{name}`\n");
    let about = c.get_long_about().or(c.get_about());
    if let Some(about) = about {
        let _ = writeln!(md, "{}\n", sentence(about.to_string().trim_end()));
    }
    let usage = c.clone().render_usage().to_string();
    let _ = writeln!(md, "```text\n{}\n```\n", usage.trim_end());
    let args: Vec<&Arg> = c
        .get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .collect();
    if args.is_empty() {
        md.push_str("No options.\n\n");
        return;
    }
    for a in args {
        let _ = writeln!(md, "- {}", option_line(a));
    }
    md.push('\n');
}

/// `` `--array <ARRAY>` `` and its help, default and choices, on one list item.
fn option_line(a: &Arg) -> String {
    let mut flag = match (a.get_long(), a.get_short()) {
        (Some(long), Some(short)) => format!("-{short}, --{long}"),
        (Some(long), None) => format!("--{long}"),
        (None, Some(short)) => format!("-{short}"),
        (None, None) => String::new(),
    };
    if a.get_num_args().is_none_or(|n| n.takes_values()) && a.get_action().takes_values() {
        let names: Vec<String> = a
            .get_value_names()
            .map(|v| v.iter().map(|n| format!("<{n}>")).collect())
            .unwrap_or_else(|| vec![format!("<{}>", a.get_id().as_str().to_uppercase())]);
        if !flag.is_empty() {
            flag.push(' ');
        }
        flag.push_str(&names.join(" "));
        if a.get_value_delimiter().is_some() {
            flag.push_str(",...");
        }
    }
    let help = a
        .get_long_help()
        .or(a.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let mut line = format!("`{flag}`: {}", sentence(&one_paragraph(&help)));
    let defaults: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    if !defaults.is_empty() && !matches!(a.get_action(), ArgAction::SetTrue | ArgAction::SetFalse) {
        let _ = write!(line, " Default: `{}`.", defaults.join(","));
    }
    let choices: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if !choices.is_empty() && !matches!(a.get_action(), ArgAction::SetTrue | ArgAction::SetFalse) {
        let _ = write!(line, " One of {}.", choices.join(", "));
    }
    line
}

/// Ends `text` with a full stop (clap drops the doc comment's own), so a default appended after
/// it reads as its own sentence.
fn sentence(text: &str) -> String {
    match text.chars().last() {
        None => String::new(),
        Some('.') => text.to_string(),
        Some(_) => format!("{text}."),
    }
}

/// Help text on one line (doc comments wrap at 100 columns; a list item should not).
fn one_paragraph(help: &str) -> String {
    help.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subcommand_and_option_is_rendered() {
        let md = markdown();
        let cli = crate::cli::Cli::command();
        for c in cli.get_subcommands() {
            assert!(
                md.contains(&format!("## `systole {}`", c.get_name())),
                "{}",
                c.get_name()
            );
            for a in c.get_arguments().filter_map(Arg::get_long) {
                if a != "help" {
                    assert!(md.contains(&format!("`--{a}")), "--{a} of {}", c.get_name());
                }
            }
        }
        assert!(md.contains("## `systole-board-sim`"));
        assert!(md.contains("`--bridge`"));
        assert!(md.contains("Default: `8`."), "the array's default is shown");
    }

    #[test]
    fn anchors_follow_github() {
        assert_eq!(anchor("systole emit-verilog"), "systole-emit-verilog");
        assert_eq!(anchor("systole-board-sim"), "systole-board-sim");
    }
}
