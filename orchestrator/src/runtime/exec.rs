//! A command run inside a service: where it reads and writes, its terminal, and how the two
//! runtimes' streams are pumped to and from it.

use std::future::Future;
use std::pin::Pin;

use futures_util::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::RuntimeError;

/// A terminal's size in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermSize {
    /// Rows.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

/// Where a command run in a service reads and writes, and its terminal.
pub struct ExecIo<'a> {
    /// What it reads on its standard input; `None` attaches none (it reads end-of-file).
    pub stdin: Option<Pin<Box<dyn AsyncRead + Send + 'a>>>,
    /// Where its standard output goes (with a terminal, everything it writes).
    pub stdout: Pin<Box<dyn AsyncWrite + Send + 'a>>,
    /// Where its standard error goes.
    pub stderr: Pin<Box<dyn AsyncWrite + Send + 'a>>,
    /// A terminal of this size, followed as it changes; `None` runs it without one.
    pub tty: Option<watch::Receiver<TermSize>>,
}

impl<'a> ExecIo<'a> {
    /// No input; output into `stdout` and `stderr`.
    pub fn collect(stdout: &'a mut Vec<u8>, stderr: &'a mut Vec<u8>) -> Self {
        ExecIo {
            stdin: None,
            stdout: Box::pin(stdout),
            stderr: Box::pin(stderr),
            tty: None,
        }
    }
}

/// The output of a command run inside a service.
#[derive(Debug, Clone)]
pub struct ExecOutput {
    /// Exit status; `None` if the runtime could not tell.
    pub exit: Option<i64>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// A piece of what the command wrote.
pub(crate) enum Output<B> {
    /// On its standard output (or its terminal).
    Stdout(B),
    /// On its standard error.
    Stderr(B),
}

/// Pump one attached command until its output ends: `output` into the writers, the caller's
/// stdin into `input`, and each terminal size to `resize`. At the end of stdin the input is
/// closed when `close_input`, else held open: a protocol with no way to say end-of-input
/// would end the whole session instead, losing what the command had still to write.
pub(crate) async fn pump<B, I, R, F>(
    io: &mut ExecIo<'_>,
    output: impl Stream<Item = Result<Output<B>, RuntimeError>>,
    input: Option<I>,
    close_input: bool,
    mut resize: R,
) -> Result<(), RuntimeError>
where
    B: AsRef<[u8]>,
    I: AsyncWrite + Unpin,
    R: FnMut(TermSize) -> F,
    F: Future<Output = ()>,
{
    let (stdin, tty) = (io.stdin.take(), io.tty.take());
    let (stdout, stderr) = (&mut io.stdout, &mut io.stderr);
    // A reader that went away (`af exec ... | head`) ends the session, as it ends a pipe.
    let drain = async {
        let mut output = std::pin::pin!(output);
        while let Some(piece) = output.next().await {
            let (to, bytes) = match piece? {
                Output::Stdout(bytes) => (&mut *stdout, bytes),
                Output::Stderr(bytes) => (&mut *stderr, bytes),
            };
            if to.write_all(bytes.as_ref()).await.is_err() || to.flush().await.is_err() {
                break;
            }
        }
        Ok(())
    };
    let feed = async {
        if let (Some(mut stdin), Some(mut input)) = (stdin, input) {
            if tokio::io::copy(&mut stdin, &mut input).await.is_ok() && close_input {
                let _ = input.shutdown().await;
            }
            // `input` is held until the output ends, so an unclosed input stays open.
            std::future::pending::<()>().await
        }
        std::future::pending::<()>().await
    };
    let follow = async {
        if let Some(mut sizes) = tty {
            loop {
                let size = *sizes.borrow_and_update();
                resize(size).await;
                if sizes.changed().await.is_err() {
                    break;
                }
            }
        }
        std::future::pending::<()>().await
    };
    tokio::select! {
        done = drain => done,
        () = feed => Ok(()),
        () = follow => Ok(()),
    }
}

/// What `reader` gives, piece by piece, until its end; nothing when there is none.
pub(crate) fn pieces(
    reader: Option<impl AsyncRead + Unpin>,
) -> impl Stream<Item = std::io::Result<Vec<u8>>> {
    futures_util::stream::unfold(reader, |reader| async move {
        let mut reader = reader?;
        let mut piece = vec![0; 8192];
        match reader.read(&mut piece).await {
            Ok(0) => None,
            Ok(n) => {
                piece.truncate(n);
                Some((Ok(piece), Some(reader)))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::stream;

    #[tokio::test]
    async fn output_goes_to_its_stream_input_is_fed_and_every_size_reaches_the_terminal() {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (sizes_tx, sizes_rx) = watch::channel(TermSize { rows: 24, cols: 80 });
        let (to_command, mut command_reads) = tokio::io::duplex(64);
        let io = ExecIo {
            stdin: Some(Box::pin(&b"typed\n"[..])),
            stdout: Box::pin(&mut out),
            stderr: Box::pin(&mut err),
            tty: Some(sizes_rx),
        };
        let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel();
        // The command answers once it has read its input and its terminal was resized.
        let (answer_tx, answer_rx) = tokio::sync::oneshot::channel::<()>();
        let output = stream::iter([
            Ok(Output::Stdout(b"out-1 ".to_vec())),
            Ok(Output::Stderr(b"err-1".to_vec())),
        ])
        .chain(stream::once(async move {
            let _ = answer_rx.await;
            Ok(Output::Stdout(b"out-2".to_vec()))
        }));
        let command = async {
            let mut line = [0u8; 6];
            command_reads.read_exact(&mut line).await.unwrap();
            assert_eq!(&line, b"typed\n");
            assert_eq!(seen_rx.recv().await, Some(TermSize { rows: 24, cols: 80 }));
            sizes_tx
                .send(TermSize {
                    rows: 50,
                    cols: 132,
                })
                .unwrap();
            assert_eq!(
                seen_rx.recv().await,
                Some(TermSize {
                    rows: 50,
                    cols: 132
                })
            );
            answer_tx.send(()).unwrap();
        };
        let mut io = io;
        let pumped = pump(&mut io, output, Some(to_command), true, |size| {
            let seen = seen_tx.clone();
            async move {
                seen.send(size).unwrap();
            }
        });
        let (pumped, ()) = tokio::join!(pumped, command);
        pumped.unwrap();
        drop(io);
        assert_eq!(out, b"out-1 out-2");
        assert_eq!(err, b"err-1");
    }

    #[tokio::test]
    async fn the_input_is_closed_when_the_protocol_can_say_so_and_held_open_when_not() {
        for close in [true, false] {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let (to_command, mut command_reads) = tokio::io::duplex(64);
            let io = ExecIo {
                stdin: Some(Box::pin(&b"x"[..])),
                stdout: Box::pin(&mut out),
                stderr: Box::pin(&mut err),
                tty: None,
            };
            let (ended_tx, ended_rx) = tokio::sync::oneshot::channel::<bool>();
            let output = stream::once(async move {
                let ended = ended_rx.await.unwrap();
                Ok(Output::Stdout(
                    if ended { &b"eof"[..] } else { &b"open"[..] }.to_vec(),
                ))
            });
            let command = async {
                let mut got = [0u8; 1];
                command_reads.read_exact(&mut got).await.unwrap();
                let mut rest = [0u8; 1];
                let ended = tokio::time::timeout(
                    std::time::Duration::from_millis(200),
                    command_reads.read(&mut rest),
                )
                .await
                .is_ok_and(|read| read.is_ok_and(|n| n == 0));
                ended_tx.send(ended).unwrap();
            };
            let mut io = io;
            let pumped = pump(&mut io, output, Some(to_command), close, |_| async {});
            let (pumped, ()) = tokio::join!(pumped, command);
            pumped.unwrap();
            drop(io);
            assert_eq!(out, if close { &b"eof"[..] } else { &b"open"[..] });
        }
    }
}
