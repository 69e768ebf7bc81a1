//! docs/MEASUREMENTS.md holds every measured figure as a table under the command that produced
//! it: each table's nearest paragraph above it (or the table it continues) names a command in
//! backticks, so a figure without its command fails here.

use std::path::Path;

/// Commands a measurement may come from.
const COMMANDS: [&str; 5] = ["`systole ", "`cargo ", "`./x ", "`time ./x", "`mpirun "];

/// The first line (1-based) of each table in `doc` whose nearest prose paragraph above names no
/// command. Tables directly after a table share its paragraph; a heading ends the search.
fn tables_without_a_command(doc: &str) -> Vec<usize> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut missing = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let starts_table = line.starts_with('|') && (i == 0 || !lines[i - 1].starts_with('|'));
        if !starts_table {
            continue;
        }
        // Walk up past blank lines and earlier tables to the paragraph above.
        let mut j = i;
        let mut paragraph = String::new();
        while j > 0 {
            j -= 1;
            let l = lines[j];
            if l.starts_with('#') {
                break;
            }
            if l.trim().is_empty() || l.starts_with('|') {
                if !paragraph.is_empty() {
                    break;
                }
                continue;
            }
            paragraph.insert_str(0, &format!("{l}\n"));
        }
        // A paragraph wrapped over lines: rejoin it so "`systole\nbench" reads as one span.
        let joined = paragraph.replace('\n', " ");
        if !COMMANDS.iter().any(|c| joined.contains(c)) {
            missing.push(i + 1);
        }
    }
    missing
}

#[test]
fn every_measurement_table_names_its_command() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/MEASUREMENTS.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let missing = tables_without_a_command(&doc);
    assert!(
        missing.is_empty(),
        "docs/MEASUREMENTS.md: the tables at lines {missing:?} have no command above them; \
         name the command that produced each figure"
    );
    let tables = doc.matches("\n|--").count();
    assert!(
        tables >= 20,
        "only {tables} tables: the measurements belong in this file"
    );
}

#[test]
fn a_table_without_a_command_is_found() {
    let doc = "# M\n\nThe demo: `time ./x demo`.\n\n| a |\n|---|\n| 1 |\n\nNo command here.\n\n| b |\n|---|\n| 2 |\n";
    assert_eq!(tables_without_a_command(doc), vec![11]);
    let chained = "Measured: `systole bench`.\n\n| a |\n|---|\n\n| b |\n|---|\n";
    assert!(tables_without_a_command(chained).is_empty());
}
