//! A TCP proxy that delays every byte by a fixed time in each direction, as a
//! network between machines would: `delay-proxy LISTEN TARGET DELAY_MS`, e.g.
//! `cargo run --release -p engage-tests --bin delay-proxy -- 127.0.0.1:6432
//! 127.0.0.1:5432 1` puts 1 ms each way (2 ms a round trip) between engage and
//! PostgreSQL. Bytes are forwarded in order and without waiting for each other: a
//! chunk read at time t is written at t + delay, so the delay adds latency, never
//! limits throughput. Plain threads, not an async runtime: a thread's sleep ends
//! within tens of microseconds of its time, where a 1 ms timer wheel rounds every
//! wait up to the next tick (a 1 ms delay measured 2.4 ms a way). It prints
//! `listening on ADDR` once it accepts connections.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Copies `from` into `to`, each chunk `delay` after it was read.
fn delayed(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (send, chunks) = mpsc::channel::<(Instant, Vec<u8>)>();
    thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 || send.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    });
    for (due, chunk) in chunks {
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        if to.write_all(&chunk).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

fn serve(client: TcpStream, target: &str, delay: Duration) -> std::io::Result<()> {
    let server = TcpStream::connect(target)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (client_out, server_out) = (client.try_clone()?, server.try_clone()?);
    thread::spawn(move || delayed(client, server_out, delay));
    thread::spawn(move || delayed(server, client_out, delay));
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listen, target, delay_ms] = args.as_slice() else {
        eprintln!("usage: delay-proxy LISTEN TARGET DELAY_MS (e.g. 127.0.0.1:6432 127.0.0.1:5432 1)");
        std::process::exit(2);
    };
    let delay = match delay_ms.parse::<f64>() {
        Ok(ms) if ms >= 0.0 && ms.is_finite() => Duration::from_secs_f64(ms / 1000.0),
        _ => {
            eprintln!("DELAY_MS must be a number of milliseconds, not '{delay_ms}'");
            std::process::exit(2);
        }
    };
    let listener = TcpListener::bind(listen).unwrap_or_else(|e| {
        eprintln!("cannot listen on {listen}: {e}");
        std::process::exit(1);
    });
    println!("listening on {}", listener.local_addr().map(|a| a.to_string()).unwrap_or_default());
    for client in listener.incoming().flatten() {
        if let Err(e) = serve(client, target, delay) {
            eprintln!("cannot reach {target}: {e}");
        }
    }
}
