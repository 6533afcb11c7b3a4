//! A tiny HTTP server serving one file from memory, inside a network
//! namespace (its thread enters the namespace with setns).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::netns::SERVER_IP;

/// The server's port.
pub const HTTP_PORT: u16 = 8080;
/// The one file it serves.
pub const FILE_PATH: &str = "/demo.bin";

/// A tiny HTTP server serving one file from memory, in the server namespace.
#[derive(Debug)]
pub struct FileServer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FileServer {
    /// Serves `size` bytes at [`FILE_PATH`] on [`SERVER_IP`]:[`HTTP_PORT`]
    /// inside network namespace `namespace`.
    pub fn start(namespace: &str, size: usize) -> anyhow::Result<FileServer> {
        let netns = std::fs::File::open(format!("/run/netns/{namespace}"))
            .with_context(|| format!("cannot open network namespace {namespace}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<anyhow::Result<()>>();
        let stop_flag = stop.clone();
        let thread = std::thread::spawn(move || {
            // setns(2) moves only this thread into the server's network
            // namespace.
            if let Err(err) = nix::sched::setns(&netns, nix::sched::CloneFlags::CLONE_NEWNET) {
                let _ = ready_tx.send(Err(anyhow::anyhow!(
                    "cannot enter the server namespace: {err}"
                )));
                return;
            }
            let listener = match TcpListener::bind((SERVER_IP, HTTP_PORT)) {
                Ok(l) => l,
                Err(e) => {
                    let _ = ready_tx.send(Err(anyhow::anyhow!(
                        "cannot listen on {SERVER_IP}:{HTTP_PORT}: {e}"
                    )));
                    return;
                }
            };
            if listener.set_nonblocking(true).is_err() {
                return;
            }
            let body = pseudo_random_bytes(size);
            let _ = ready_tx.send(Ok(()));
            while !stop_flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let _ = serve_one(conn, &body);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(())) => Ok(FileServer {
                stop,
                thread: Some(thread),
            }),
            Ok(Err(e)) => Err(e),
            Err(_) => bail!("the demo's HTTP server did not start"),
        }
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Bytes that do not compress (xorshift).
fn pseudo_random_bytes(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

/// Answers one HTTP/1.x request: the file for `GET /demo.bin` (any
/// query), 404 else.
fn serve_one(conn: TcpStream, body: &[u8]) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    conn.set_write_timeout(Some(Duration::from_secs(120)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // Skip the headers.
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    let mut conn = conn;
    let path = request_line.split_whitespace().nth(1).unwrap_or("");
    // A query (`?client=03`) only marks the fetch's command line, for a
    // watching agent to tell the clients apart.
    let path = path.split('?').next().unwrap_or("");
    if request_line.starts_with("GET ") && path == FILE_PATH {
        write!(
            conn,
            "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )?;
        conn.write_all(body)?;
    } else {
        conn.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
    }
    conn.flush()
}
