//! Test TLS: a throwaway CA and a loopback TLS terminator that relays to a
//! plain TCP backend (a `cdp_mock::MockServer` or its `/json/version` server).
//!
//! Shared by `tls.rs` and `endpoint.rs` through `#[path]`; not a test target.

#![allow(dead_code)]

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpStream};

/// A test CA and a server certificate it issued for `localhost` only.
pub struct TestPki {
    /// The CA certificate (DER): what `extra_root_certificates` takes.
    pub ca_der: Vec<u8>,
    server: Arc<rustls::ServerConfig>,
}

impl TestPki {
    /// A fresh CA and a `localhost` server certificate signed by it.
    pub fn new() -> Self {
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "tabwarden test CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().expect("ca key");
        let ca_cert = ca.self_signed(&ca_key).expect("ca cert");
        let issuer = Issuer::new(ca, ca_key);

        let mut leaf = CertificateParams::new(vec!["localhost".to_string()]).expect("leaf params");
        leaf.distinguished_name
            .push(DnType::CommonName, "localhost");
        let leaf_key = KeyPair::generate().expect("leaf key");
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer).expect("leaf cert");

        let server = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf_cert.der().clone(), ca_cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .expect("server config");
        Self {
            ca_der: ca_cert.der().to_vec(),
            server: Arc::new(server),
        }
    }
    /// The CA certificate as a rustls type.
    pub fn ca(&self) -> CertificateDer<'static> {
        CertificateDer::from(self.ca_der.clone())
    }
}

/// A loopback TLS terminator on port 0: each connection's TLS is accepted
/// here and its plaintext relayed to `backend`.
pub struct TlsRelay {
    /// The listening port (connect to `localhost:PORT`).
    pub port: u16,
    /// SNI of each accepted handshake, in order (`None` when the client sent none).
    pub sni: Arc<Mutex<Vec<Option<String>>>>,
    /// Handshakes that failed (the client refused the certificate, ...).
    pub failed_handshakes: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsRelay {
    /// Starts the relay in front of `backend`.
    pub async fn start(pki: &TestPki, backend: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let acceptor = tokio_rustls::TlsAcceptor::from(pki.server.clone());
        let sni = Arc::new(Mutex::new(Vec::new()));
        let failed = Arc::new(Mutex::new(Vec::new()));
        let (sni2, failed2) = (sni.clone(), failed.clone());
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let (acceptor, sni, failed) = (acceptor.clone(), sni2.clone(), failed2.clone());
                tokio::spawn(async move {
                    let mut tls = match acceptor.accept(sock).await {
                        Ok(t) => t,
                        Err(e) => {
                            failed.lock().expect("lock").push(e.to_string());
                            return;
                        }
                    };
                    sni.lock()
                        .expect("lock")
                        .push(tls.get_ref().1.server_name().map(str::to_string));
                    let Ok(mut up) = TcpStream::connect(backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                });
            }
        });
        Self {
            port,
            sni,
            failed_handshakes: failed,
            task,
        }
    }
    /// SNI values seen so far.
    pub fn sni(&self) -> Vec<Option<String>> {
        self.sni.lock().expect("lock").clone()
    }
}

/// `host:port` of an `http://host:port` URL.
pub fn http_addr(url: &str) -> SocketAddr {
    url.trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .expect("http://ip:port")
}
