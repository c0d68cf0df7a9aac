//! How a list or show command prints, as kubectl's `-o`: a table (the default), `-o wide`
//! (more columns), `-o name` (the names or ids alone, one a line, for a script's loop) or
//! `-o json` (the API's JSON; `--json` is the same).

use clap::ValueEnum;
use serde::Serialize;

use crate::render::Columns;

/// The shape of a command's output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// The API's JSON, pretty-printed (as --json).
    Json,
    /// The table with more columns.
    Wide,
    /// The names (apps) or ids (deployments) alone, one a line.
    Name,
    /// The table (the default).
    #[value(skip)]
    Table,
}

/// `-o FORMAT`, or `--json`.
#[derive(clap::Args)]
pub struct OutputArgs {
    /// Output format: json (as --json), wide (more columns), or name (the names or ids
    /// alone, one a line) [example: -o name]
    #[arg(short = 'o', long = "output", value_enum, value_name = "FORMAT")]
    format: Option<Output>,
    /// Print JSON (the same as -o json).
    #[arg(long, conflicts_with = "format")]
    json: bool,
}

impl OutputArgs {
    pub fn output(&self) -> Output {
        if self.json {
            Output::Json
        } else {
            self.format.unwrap_or(Output::Table)
        }
    }
}

/// What a command prints of one value, in each of the shapes.
pub struct Shown<'a, T: Serialize> {
    /// What `-o json` prints.
    pub json: &'a T,
    /// What `-o name` prints, a line each.
    pub names: Vec<String>,
    /// The table (or the view) in the given columns.
    pub table: &'a dyn Fn(Columns) -> String,
}

impl Output {
    /// The text `shown` prints as in this shape.
    pub fn text<T: Serialize>(self, shown: &Shown<'_, T>) -> anyhow::Result<String> {
        Ok(match self {
            Self::Json => format!("{}\n", serde_json::to_string_pretty(shown.json)?),
            Self::Name => shown.names.iter().map(|n| format!("{n}\n")).collect(),
            Self::Wide => (shown.table)(Columns::Wide),
            Self::Table => (shown.table)(Columns::Normal),
        })
    }

    /// Prints `shown` in this shape.
    pub fn print<T: Serialize>(self, shown: &Shown<'_, T>) -> anyhow::Result<()> {
        print!("{}", self.text(shown)?);
        Ok(())
    }
}
