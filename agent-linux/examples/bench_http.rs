//! A loopback HTTP server for `scripts/bench-tracer`'s download workload:
//! answers every GET with SIZE bytes (from memory, no disk), one connection
//! at a time, until killed.
//!
//! Usage: `bench_http PORT_FILE SIZE_BYTES` — binds 127.0.0.1 on a free
//! port and writes the port number to PORT_FILE.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (port_file, size) = match (args.get(1), args.get(2).and_then(|s| s.parse::<u64>().ok())) {
        (Some(f), Some(n)) => (f.clone(), n),
        _ => {
            eprintln!("usage: bench_http PORT_FILE SIZE_BYTES");
            std::process::exit(2);
        }
    };
    let listener = TcpListener::bind("127.0.0.1:0")?;
    std::fs::write(&port_file, listener.local_addr()?.port().to_string())?;
    let chunk = vec![b'x'; 1 << 16];
    for stream in listener.incoming() {
        let mut stream = stream?;
        let mut reader = BufReader::new(stream.try_clone()?);
        let mut line = String::new();
        // Skip the request head.
        while reader.read_line(&mut line)? > 2 {
            line.clear();
        }
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n"
        );
        if stream.write_all(head.as_bytes()).is_err() {
            continue;
        }
        let mut left = size;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            if stream.write_all(&chunk[..n]).is_err() {
                break;
            }
            left -= n as u64;
        }
    }
    Ok(())
}
