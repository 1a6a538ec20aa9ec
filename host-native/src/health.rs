//! `engage health`: asks a running server's `/readyz` and exits 0 when it answers
//! ready, for a container's `HEALTHCHECK` (an image `FROM scratch` has no curl).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

/// Options of `engage health`.
#[derive(Args)]
pub struct HealthArgs {
    /// The server's address, as `engage serve --listen` takes it; a server listening
    /// on every interface (0.0.0.0, ::) is asked on loopback.
    #[arg(long, env = "ENGAGE_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Seconds to wait for the answer.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_secs: u64,
}

/// Asks `/readyz`: `Ok` with what it said when the server is ready, `Err` with why
/// not (no answer, or its `message`).
pub fn run(args: &HealthArgs) -> Result<String, String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let ask = ask(&args.listen);
        match tokio::time::timeout(Duration::from_secs(args.timeout_secs), ask).await {
            Ok(answer) => answer,
            Err(_) => Err(format!("no answer from {} within {} s", args.listen, args.timeout_secs)),
        }
    })
}

async fn ask(listen: &str) -> Result<String, String> {
    let addr = address(listen).await?;
    let stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("{addr}: {e}"))?;
    tokio::spawn(connection);
    let request = hyper::Request::get("/readyz")
        .header("Host", addr.to_string())
        .header("User-Agent", concat!("engage-health/", env!("CARGO_PKG_VERSION")))
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = sender.send_request(request).await.map_err(|e| format!("{addr}: {e}"))?;
    let status = response.status();
    let body = response.into_body().collect().await.map_err(|e| format!("{addr}: {e}"))?.to_bytes();
    let said: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    match (status.as_u16(), said["status"].as_str()) {
        (200, Some("ready")) => Ok(format!("ready: http://{addr}")),
        (_, _) => {
            let why = said["message"].as_str().map(str::to_string).unwrap_or_else(|| format!("answered {status}"));
            Err(format!("not ready: http://{addr}: {why}"))
        }
    }
}

/// The address to ask: `listen` resolved, an unspecified address turned to loopback.
async fn address(listen: &str) -> Result<SocketAddr, String> {
    let mut addr = tokio::net::lookup_host(listen)
        .await
        .map_err(|e| format!("cannot resolve {listen}: {e}"))?
        .next()
        .ok_or_else(|| format!("cannot resolve {listen}"))?;
    if addr.port() == 0 {
        return Err(format!("{listen} names no port: give the port the server listens on"));
    }
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => addr.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        IpAddr::V6(ip) if ip.is_unspecified() => addr.set_ip(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        _ => {}
    }
    Ok(addr)
}
