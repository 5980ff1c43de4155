//! `af exec SERVICE [--] CMD...`: run a command inside a running service (a shell when none is
//! named) with this process's stdin, stdout and stderr. When stdin is a terminal the command
//! gets one too: this terminal is put in raw mode while it runs (restored however it ends) and
//! each change of its size is passed on. af then exits with the command's status.

use std::io::{IsTerminal, Read};

use af_policy::error::{Report, codes};
use rustix::termios::{self, OptionalActions, Termios};
use tokio::io::AsyncWriteExt;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use crate::env_id::EnvId;
use crate::runtime::{ExecIo, Runtime, TermSize};

/// What runs when no command is named.
pub const SHELL: &str = "sh";

/// The status af exits with when the command never ran and the runtime gave none (the shell's
/// "found but could not be run").
pub const NOT_RUN: u8 = 126;

/// Run `argv` (the shell when empty) in `service`, in a terminal when `terminal` and stdin is
/// one; the command's exit status, [`NOT_RUN`] when the runtime could not tell it.
pub async fn run(
    runtime: &dyn Runtime,
    env: &EnvId,
    service: &str,
    argv: &[String],
    terminal: bool,
) -> Result<u8, Report> {
    let argv = if argv.is_empty() {
        vec![SHELL.to_owned()]
    } else {
        argv.to_vec()
    };
    let raw = if terminal && std::io::stdin().is_terminal() {
        Some(RawMode::enter()?)
    } else {
        None
    };
    let tty = match &raw {
        Some(_) => Some(follow_size()?),
        None => None,
    };
    let io = ExecIo {
        stdin: Some(Box::pin(stdin())),
        stdout: Box::pin(tokio::io::stdout()),
        stderr: Box::pin(tokio::io::stderr()),
        tty,
    };
    let exit = runtime.exec_attached(env, service, &argv, io).await;
    drop(raw);
    let _ = tokio::io::stdout().flush().await;
    Ok(exit
        .map_err(|e| e.report())?
        .map_or(NOT_RUN, |code| u8::try_from(code & 0xff).unwrap_or(NOT_RUN)))
}

/// This process's stdin, read on a thread of its own: a read blocked on a terminal must not
/// hold the runtime open when the command has ended.
fn stdin() -> tokio::io::DuplexStream {
    let (reader, mut writer) = tokio::io::duplex(64 * 1024);
    let handle = tokio::runtime::Handle::current();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0; 16 * 1024];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if handle.block_on(writer.write_all(&buf[..n])).is_err() {
                        break;
                    }
                }
            }
        }
    });
    reader
}

/// The terminal's size now, and each time it changes (SIGWINCH).
fn follow_size() -> Result<watch::Receiver<TermSize>, Report> {
    let (tx, rx) = watch::channel(size());
    let mut changes = signal(SignalKind::window_change()).map_err(|e| terminal_refused(&e))?;
    tokio::spawn(async move {
        while changes.recv().await.is_some() {
            if tx.send(size()).is_err() {
                break;
            }
        }
    });
    Ok(rx)
}

/// The size of the terminal on stdin (80×24 when it cannot be read).
fn size() -> TermSize {
    termios::tcgetwinsize(std::io::stdin()).map_or(TermSize { rows: 24, cols: 80 }, |w| TermSize {
        rows: w.ws_row,
        cols: w.ws_col,
    })
}

/// The terminal in raw mode (keys reach the command as typed, Ctrl-C included), restored when
/// dropped.
struct RawMode(Termios);

impl RawMode {
    fn enter() -> Result<RawMode, Report> {
        let stdin = std::io::stdin();
        let saved = termios::tcgetattr(&stdin).map_err(|e| terminal_refused(&e))?;
        let mut raw = saved.clone();
        raw.make_raw();
        termios::tcsetattr(&stdin, OptionalActions::Now, &raw).map_err(|e| terminal_refused(&e))?;
        Ok(RawMode(saved))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(std::io::stdin(), OptionalActions::Now, &self.0);
    }
}

fn terminal_refused(e: &dyn std::fmt::Display) -> Report {
    Report::new(
        &codes::RUN_UNSUPPORTED,
        format!("The terminal on stdin could not be set up for the command: {e}."),
    )
    .with_next("Run af exec with --no-tty (-T), or from another terminal.")
}
