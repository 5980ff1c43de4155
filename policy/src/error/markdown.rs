//! `docs/errors.md`, rendered from the catalogue.

use std::fmt::Write;

use super::{CATALOGUE, ExitStatus};

/// The error reference as Markdown: the exit statuses, then every code with what it means and
/// what to do next. `docs/errors.md` is exactly this; a test in `policy` keeps them in step.
pub fn render_markdown() -> String {
    let mut out = String::from(
        "# af error reference\n\n\
         <!-- Generated from policy/src/error/catalogue.rs; do not edit. \
         Regenerate with `AF_BLESS=1 cargo test -p af-policy --test generated_docs`. -->\n\n\
         Every refusal af makes prints a stable code, one sentence saying what happened and a \
         `Next:` line saying what to do:\n\n\
         ```text\n\
         AF-SCH-001 No runtime satisfies the placement requirement region=eu-west-2; targets offer region=eu-west-1 (frankfurt).\n  \
         Next: Declare a target under runtime.targets carrying that tag, or relax runtime.requires. Nothing was created.\n\
         ```\n\n\
         Manifest problems are all reported at once, each prefixed with `af.yaml:LINE:COLUMN:`.\n\n\
         ## Exit statuses\n\n\
         | Status | When |\n| --- | --- |\n| 0 | success |\n",
    );
    for status in ExitStatus::ALL {
        let _ = writeln!(out, "| {} | {} |", status.code(), status.meaning());
    }
    out.push_str("\n## Codes\n\n| Code | Exit | Meaning | Next |\n| --- | --- | --- | --- |\n");
    for code in CATALOGUE {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            code.code,
            code.exit.code(),
            escape(code.meaning),
            escape(code.next)
        );
    }
    out
}

/// Keep a table cell one cell.
fn escape(text: &str) -> String {
    text.replace('|', "\\|")
}
