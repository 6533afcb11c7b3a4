//! The uploader takes its proxy from the environment (`HTTPS_PROXY`,
//! `ALL_PROXY`, `NO_PROXY`) and tunnels TLS through it with CONNECT; a
//! plain-http loopback service is never sent through a proxy. A test binary
//! of its own: the environment is process-wide.

mod upload_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use upload_support::*;

/// A minimal HTTP CONNECT proxy; returns its address and the targets of the
/// tunnels it opened.
fn connect_proxy() -> (SocketAddr, Arc<Mutex<Vec<String>>>, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let tunnels = Arc::new(Mutex::new(Vec::new()));
    let refused = Arc::new(AtomicUsize::new(0));
    let (t, r) = (tunnels.clone(), refused.clone());
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { continue };
            let (t, r) = (t.clone(), r.clone());
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if client.read(&mut byte).unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let mut words = head.split_whitespace();
                let (Some("CONNECT"), Some(target)) = (words.next(), words.next()) else {
                    r.fetch_add(1, Ordering::SeqCst);
                    let _ =
                        client.write_all(b"HTTP/1.1 405 Only CONNECT\r\nContent-Length: 0\r\n\r\n");
                    return;
                };
                let Ok(upstream) = TcpStream::connect(target) else {
                    let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
                    return;
                };
                t.lock().unwrap().push(target.to_string());
                client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .unwrap();
                let (mut c2, mut u2) = (client.try_clone().unwrap(), upstream.try_clone().unwrap());
                let mut upstream = upstream;
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c2, &mut u2);
                    let _ = u2.shutdown(std::net::Shutdown::Write);
                });
                let _ = std::io::copy(&mut upstream, &mut client);
                let _ = client.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (addr, tunnels, refused)
}

#[test]
fn https_goes_through_the_environment_proxy_and_loopback_http_does_not() {
    let s = setup();
    let ids = s.device.spool(4);
    let (proxy, tunnels, refused) = connect_proxy();
    for var in [
        "NO_PROXY",
        "no_proxy",
        "ALL_PROXY",
        "all_proxy",
        "http_proxy",
        "HTTP_PROXY",
    ] {
        std::env::remove_var(var);
    }
    std::env::set_var("HTTPS_PROXY", format!("http://{proxy}"));

    assert_eq!(s.device.upload(&s.proxy.url(), &[]), ExitCode::SUCCESS);
    let target = s.proxy.url().trim_start_matches("https://").to_string();
    let opened = tunnels.lock().unwrap().clone();
    assert!(!opened.is_empty(), "no CONNECT tunnel was opened");
    assert!(opened.iter().all(|t| *t == target), "{opened:?}");
    s.service.assert_stored_exactly_once(&ids);

    // Plain http to the loopback service: straight there, even with
    // ALL_PROXY set.
    std::env::set_var("ALL_PROXY", format!("http://{proxy}"));
    let more = s.device.spool(2);
    let before = tunnels.lock().unwrap().len();
    let direct = format!("http://{}", s.service.addr);
    assert_eq!(s.device.upload(&direct, &[]), ExitCode::SUCCESS);
    assert_eq!(tunnels.lock().unwrap().len(), before);
    assert_eq!(refused.load(Ordering::SeqCst), 0, "nothing asked the proxy");
    let mut all = ids;
    all.extend(more);
    s.service.assert_stored_exactly_once(&all);
}
