//! `af init`: write `af.yaml` from the project's Compose file, and say what was not carried
//! over and why. Nothing is written on a refusal; an existing af.yaml is replaced only with
//! `--force`, after its difference is shown.

use std::path::{Path, PathBuf};

use af_orchestrator::compose::{self, Adoption, Left};
use af_policy::error::{Report, codes};
use af_policy::manifest::{FILE_NAME, Manifest};
use serde::Serialize;

use crate::cli::Global;
use crate::output::{Format, print_json, say};
use crate::refusal::Refusal;

#[derive(Serialize)]
struct Written<'a> {
    file: String,
    from: String,
    replaced: bool,
    #[serde(flatten)]
    adoption: &'a Adoption,
}

/// Read the Compose file (`from`, or the one in the working directory), write af.yaml beside
/// the working directory's (or where `--file` names), print the summary.
pub(super) fn run(global: &Global, from: Option<&Path>, force: bool) -> Result<(), Refusal> {
    let cwd = std::env::current_dir().map_err(|e| {
        Report::new(
            &codes::MAN_UNREADABLE,
            format!("The working directory cannot be read: {e}."),
        )
    })?;
    let target = global.file.clone().unwrap_or_else(|| cwd.join(FILE_NAME));
    let manifest_dir = target
        .parent()
        .map_or_else(|| cwd.clone(), Path::to_path_buf);
    let source = match from {
        Some(path) => path.to_path_buf(),
        None => compose::find(&cwd)?,
    };
    let compose = compose::read(&source)?;
    let fallback = manifest_dir
        .file_name()
        .map_or_else(|| "app".to_owned(), |n| n.to_string_lossy().into_owned());
    let adoption = compose::adopt(&compose, &source, &manifest_dir, &fallback);
    let existing = std::fs::read_to_string(&target).ok();
    if existing.is_some() && !force {
        return Err(Report::new(
            &codes::INIT_EXISTS,
            format!("{} exists already; nothing was written.", target.display()),
        )
        .into());
    }
    let staged = Staged::write(&target, &adoption.text)?;
    if let Err(problems) = Manifest::from_path(&staged.path) {
        let mut reports = vec![Report::new(
            &codes::INIT_WOULD_NOT_VALIDATE,
            format!(
                "The af.yaml written from {} would not pass af validate; nothing was written.",
                source.display()
            ),
        )];
        reports.extend(problems.reports());
        return Err(Refusal::reports(reports));
    }
    if let Some(before) = &existing
        && global.output == Format::Text
    {
        say!("{}", difference(before, &adoption.text, &target));
    }
    staged.commit()?;
    match global.output {
        Format::Json => print_json(&Written {
            file: target.display().to_string(),
            from: source.display().to_string(),
            replaced: existing.is_some(),
            adoption: &adoption,
        }),
        Format::Text => summary(&adoption, &target, &source),
    }
    Ok(())
}

fn summary(adoption: &Adoption, target: &Path, source: &Path) {
    say!(
        "✓ wrote {} from {}: project {}, services {}",
        target.display(),
        source.display(),
        adoption.name,
        adoption.services.join(", ")
    );
    let list = |title: &str, entries: &[Left]| {
        if entries.is_empty() {
            return;
        }
        say!("{title}");
        for left in entries {
            let at = left
                .service
                .as_deref()
                .map_or_else(|| "(top level)".to_owned(), |s| format!("services.{s}"));
            say!("  {at}: {}: {}", left.field, left.why);
        }
    };
    list(
        "Refused (a contained service cannot have it):",
        &adoption.refused,
    );
    list("Not carried over:", &adoption.left);
    say!("Every request out is refused until a rule lets it through (egress default: block).");
    say!("Next: af up, then af net suggest proposes rules from what the services sent.");
}

/// The unified difference between the af.yaml there and the one af init writes.
fn difference(before: &str, after: &str, target: &Path) -> String {
    let name = target.display().to_string();
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .header(&format!("{name} (now)"), &format!("{name} (af init)"))
        .to_string()
}

/// The new af.yaml, written beside the target and moved over it only once it passes.
struct Staged {
    path: PathBuf,
    target: PathBuf,
}

impl Staged {
    fn write(target: &Path, text: &str) -> Result<Staged, Refusal> {
        let name = format!(".{FILE_NAME}.af-init-{}", std::process::id());
        let path = target.with_file_name(name);
        std::fs::write(&path, text).map_err(|e| {
            Report::new(
                &codes::MAN_UNREADABLE,
                format!("{} could not be written: {e}.", path.display()),
            )
        })?;
        Ok(Staged {
            path,
            target: target.to_path_buf(),
        })
    }

    fn commit(self) -> Result<(), Refusal> {
        std::fs::rename(&self.path, &self.target).map_err(|e| {
            Refusal::from(Report::new(
                &codes::MAN_UNREADABLE,
                format!("{} could not be written: {e}.", self.target.display()),
            ))
        })
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
