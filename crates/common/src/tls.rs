//! TLS on the listeners, as an option: `server.tls_cert_file` and `server.tls_key_file` (PEM)
//! turn it on for the gRPC listener, the REST facade and the memory page; `server.tls_ca_file`
//! is the CA the process trusts, beside the system's roots, when it calls the other services at
//! `https://` endpoints. rustls with the aws-lc-rs provider, which tonic, reqwest and the AWS SDK
//! already build. The metrics listener stays plain HTTP (scraped from inside the cluster).
//!
//! Without these settings the listeners speak plain text: run them behind a service mesh that
//! encrypts between pods (docs/runbook.md, "TLS or a mesh").

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::serve::ListenerExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

use crate::config::ConfigError;

/// How long a client may take over its TLS handshake before its connection is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// TLS handshakes in progress at once on one HTTP listener; further connections wait in the
/// kernel's backlog, so that slow handshakes cannot pile up without bound.
const MAX_HANDSHAKES: usize = 256;

/// Chooses the process's rustls provider (aws-lc-rs). The dependencies enable both of rustls'
/// providers, and then rustls needs one chosen before any TLS configuration is built.
pub fn install_crypto_provider() {
    // Already chosen (an earlier call, a test): keep it.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
}

/// The certificate and key of the listeners.
#[derive(Clone)]
pub struct ServerTls {
    cert_pem: Arc<Vec<u8>>,
    key_pem: Arc<Vec<u8>>,
    http: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("ServerTls").finish_non_exhaustive()
    }
}

fn read(path: &Path, key: &str) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|err| ConfigError::invalid(key, format!("cannot read {}: {err}", path.display())))
}

impl ServerTls {
    /// Reads and checks a PEM certificate chain and its private key (PKCS#8, PKCS#1 or SEC1).
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<Self, ConfigError> {
        install_crypto_provider();
        let cert_pem = read(cert_file, "server.tls_cert_file")?;
        let key_pem = read(key_file, "server.tls_key_file")?;
        let certs = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| {
                ConfigError::invalid(
                    "server.tls_cert_file",
                    format!("{}: not PEM certificates: {err}", cert_file.display()),
                )
            })?;
        if certs.is_empty() {
            return Err(ConfigError::invalid(
                "server.tls_cert_file",
                format!("{}: no certificate in it", cert_file.display()),
            ));
        }
        // The key file's name only: its content never goes into a message.
        let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| {
            ConfigError::invalid(
                "server.tls_key_file",
                format!("{}: no PEM private key in it", key_file.display()),
            )
        })?;
        let mut http = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|err| {
                ConfigError::invalid("server.tls_key_file", format!("not usable with the certificate: {err}"))
            })?;
        http.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            cert_pem: Arc::new(cert_pem),
            key_pem: Arc::new(key_pem),
            http: Arc::new(http),
        })
    }

    /// The configuration of the gRPC listener.
    pub fn grpc(&self) -> tonic::transport::ServerTlsConfig {
        tonic::transport::ServerTlsConfig::new()
            .identity(tonic::transport::Identity::from_pem(&*self.cert_pem, &*self.key_pem))
            .timeout(HANDSHAKE_TIMEOUT)
    }

    /// Wraps an HTTP listener: connections are handed over once their handshake is done.
    pub fn listener(&self, listener: TcpListener) -> io::Result<TlsListener> {
        TlsListener::new(listener, self.http.clone())
    }
}

/// The TLS settings of the clients of the other services: the system's roots and, when
/// `server.tls_ca_file` names one, that CA.
pub fn client_tls(ca_file: Option<&Path>) -> Result<tonic::transport::ClientTlsConfig, ConfigError> {
    install_crypto_provider();
    let config = tonic::transport::ClientTlsConfig::new().with_native_roots();
    Ok(match ca_file {
        Some(path) => {
            let pem = read(path, "server.tls_ca_file")?;
            if CertificateDer::pem_slice_iter(&pem).next().is_none() {
                return Err(ConfigError::invalid(
                    "server.tls_ca_file",
                    format!("{}: no PEM certificate in it", path.display()),
                ));
            }
            config.ca_certificate(tonic::transport::Certificate::from_pem(pem))
        }
        None => config,
    })
}

/// An HTTP listener speaking TLS. A task accepts connections and runs their handshakes apart
/// (at most [`MAX_HANDSHAKES`] at once, each within [`HANDSHAKE_TIMEOUT`]), so that a slow or
/// silent client never holds up the others.
pub struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(tokio_rustls::server::TlsStream<TcpStream>, SocketAddr)>,
    acceptor: tokio::task::JoinHandle<()>,
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

impl TlsListener {
    fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> io::Result<Self> {
        let local = listener.local_addr()?;
        let (send, ready) = mpsc::channel(64);
        let tls = TlsAcceptor::from(config);
        let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
        let acceptor = tokio::spawn(async move {
            loop {
                let Ok(seat) = handshakes.clone().acquire_owned().await else {
                    return;
                };
                let (stream, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        // Out of file descriptors and the like: wait, as axum's own listener does.
                        tracing::warn!(%err, "cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if send.is_closed() {
                    return;
                }
                let _ = stream.set_nodelay(true);
                let (tls, send) = (tls.clone(), send.clone());
                tokio::spawn(async move {
                    let _seat = seat;
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            let _ = send.send((stream, peer)).await;
                        }
                        Ok(Err(err)) => tracing::debug!(%peer, %err, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Self { local, ready, acceptor })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accepting task ended: no connection will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// Serves an HTTP router on `listener`, over TLS when `tls` is set, with each request's peer
/// address (`ConnectInfo<SocketAddr>`), until `shutdown`.
pub async fn serve_http(
    listener: TcpListener,
    tls: Option<&ServerTls>,
    router: axum::Router,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let service = router.into_make_service_with_connect_info::<SocketAddr>();
    let stop = async move { shutdown.cancelled().await };
    match tls {
        None => axum::serve(listener, service).with_graceful_shutdown(stop).await,
        // `tap_io` only to get axum's `ConnectInfo<SocketAddr>` for a listener of our own.
        Some(tls) => {
            axum::serve(tls.listener(listener)?.tap_io(|_| {}), service)
                .with_graceful_shutdown(stop)
                .await
        }
    }
}
