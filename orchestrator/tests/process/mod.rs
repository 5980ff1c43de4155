//! Running `af` as a person does: with something typed on its stdin, or in a terminal of its
//! own (util-linux `script` gives it a new pseudo-terminal as stdin, stdout and stderr).

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// `command` run with `input` on its stdin (then closed); its status and output.
pub(crate) fn fed(mut command: Command, input: &[u8]) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
    stdin.write_all(input).unwrap_or_else(|e| panic!("{e}"));
    drop(stdin);
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"))
}

/// `command` run in a new pseudo-terminal; its exit status and everything the terminal showed
/// (as stdout).
pub(crate) fn in_terminal(command: &Command) -> Output {
    let words: Vec<&str> = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|w| w.to_str().unwrap_or_else(|| panic!("{w:?} is not UTF-8")))
        .collect();
    let line = shlex::try_join(words).unwrap_or_else(|e| panic!("{e}"));
    let mut script = Command::new("script");
    script.args(["--quiet", "--return", "--command", &line, "/dev/null"]);
    if let Some(dir) = command.get_current_dir() {
        script.current_dir(dir);
    }
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => script.env(name, value),
            None => script.env_remove(name),
        };
    }
    script
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("script (util-linux): {e}"))
}
