//! HTTPS: serving TLS directly (`annotate serve --tls-cert/--tls-key`, rustls with its ring provider), and
//! knowing per request whether it arrived over HTTPS (directly, or through a proxy the admin trusts by address
//! that says so in `X-Forwarded-Proto`), so that cookies are `Secure` and HSTS is sent exactly then.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use stepwise_core::{Error, Result};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::server::TlsStream;

/// How requests reach the server.
#[derive(Debug, Clone, Default)]
pub struct Transport {
    /// The server speaks TLS itself: every request is HTTPS.
    pub tls: bool,
    /// Peers whose `X-Forwarded-Proto` is believed (a TLS-terminating proxy in front of the server).
    pub trusted_proxies: Vec<IpAddr>,
}

impl Transport {
    /// Did this request arrive over HTTPS? `peer`: the TCP peer (absent when not served over a socket).
    pub fn is_https(&self, peer: Option<IpAddr>, forwarded_proto: Option<&str>) -> bool {
        self.tls
            || peer.is_some_and(|p| self.trusted_proxies.contains(&p))
                && forwarded_proto
                    .and_then(|v| v.split(',').next())
                    .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
    }
}

/// A TLS server configuration from PEM files: a certificate chain (leaf first) and its private key.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| Error::bad_input(format!("--tls-cert {}: not a PEM certificate file: {e}", cert.display())))?;
    if certs.is_empty() {
        return Err(Error::bad_input(format!("--tls-cert {}: no CERTIFICATE block in the file", cert.display())));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| Error::bad_input(format!("--tls-key {}: not a PEM private key file: {e}", key.display())))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::runtime(format!("TLS: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| Error::bad_input(format!("--tls-cert/--tls-key: the key does not fit the certificate: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A listener that hands out connections once their TLS handshake is done. Handshakes run in their own tasks
/// (with a time limit), so a slow or silent client delays no one else.
pub struct TlsListener {
    ready: tokio::sync::mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

/// Longest a client may take over its TLS handshake.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

impl TlsListener {
    pub fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let acceptor = TlsAcceptor::from(config);
        let (tx, ready) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: wait instead of spinning.
                        tracing::warn!("accept: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (acceptor, handed) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_LIMIT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = handed.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!("TLS handshake with {peer}: {e}"),
                        Err(_) => tracing::debug!("TLS handshake with {peer}: timed out"),
                    }
                });
                if tx.is_closed() {
                    return;
                }
            }
        });
        Ok(TlsListener { ready, local })
    }
}

/// The TCP peer of a request (`ConnectInfo<Peer>`), over TLS or not.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

impl Connected<IncomingStream<'_, TlsListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Peer {
        Peer(*stream.remote_addr())
    }
}

impl Connected<IncomingStream<'_, TcpListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Peer {
        Peer(*stream.remote_addr())
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accept loop ended (the server is shutting down): no more connections.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_is_direct_tls_or_a_trusted_proxy_saying_so() {
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.7".parse().unwrap();
        let plain = Transport::default();
        assert!(!plain.is_https(Some(local), Some("https")), "an untrusted peer's header is ignored");
        let direct = Transport { tls: true, trusted_proxies: vec![] };
        assert!(direct.is_https(None, None));
        let proxied = Transport { tls: false, trusted_proxies: vec![local] };
        assert!(proxied.is_https(Some(local), Some("https")));
        assert!(proxied.is_https(Some(local), Some("HTTPS, http")), "the first hop's scheme counts");
        assert!(!proxied.is_https(Some(local), Some("http")));
        assert!(!proxied.is_https(Some(local), None));
        assert!(!proxied.is_https(Some(other), Some("https")));
        assert!(!proxied.is_https(None, Some("https")));
    }

    #[test]
    fn bad_pem_files_are_named() {
        let td = tempfile::tempdir().unwrap();
        let cert = td.path().join("cert.pem");
        std::fs::write(&cert, "not a certificate").unwrap();
        let e = server_config(&cert, &td.path().join("key.pem")).unwrap_err().to_string();
        assert!(e.contains("cert.pem") && e.contains("no CERTIFICATE"), "{e}");
    }
}
