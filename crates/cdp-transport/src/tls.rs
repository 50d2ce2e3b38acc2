//! TLS for `wss://` endpoints and `https://` discovery: rustls with the ring
//! provider, webpki roots plus the caller's extra roots.
//!
//! The provider is passed explicitly to every config, so a process-wide
//! default provider (installed by us, by the caller, or by nobody) neither
//! matters nor conflicts.

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{CertificateError, ClientConfig, RootCertStore};
use std::sync::Arc;

/// Builds the client config: webpki roots (Mozilla's list) plus `extra_roots`
/// (DER), TLS 1.2 and 1.3, no client certificate, no ALPN (HTTP/1.1 and the
/// WebSocket upgrade both run over the default).
///
/// The error is the reason text for an [`Error::Connect`](crate::Error::Connect).
pub(crate) fn client_config(extra_roots: &[Vec<u8>]) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for (i, der) in extra_roots.iter().enumerate() {
        roots
            .add(CertificateDer::from(der.as_slice()).into_owned())
            .map_err(|e| {
                format!(
                    "extra root certificate #{i} (ConnectOptions::extra_root_certificates) is not usable: {e}"
                )
            })?;
    }
    let config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup failed: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The server name for SNI and certificate checks: a DNS name or an IP
/// address (`[::1]` without brackets).
pub(crate) fn server_name(host: &str) -> Result<ServerName<'static>, String> {
    ServerName::try_from(host.trim_matches(['[', ']']).to_string())
        .map_err(|_| format!("{host:?} is not a valid TLS server name"))
}

/// A reason text for a failed TLS handshake, when `e` carries a rustls error
/// (tokio-rustls wraps it in an `io::Error`); `None` for other I/O errors.
///
/// Certificate problems say what to do about them: an unknown issuer is the
/// usual case of a private CA or a self-signed certificate.
pub(crate) fn describe_io(e: &std::io::Error) -> Option<String> {
    let tls = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    Some(describe(tls))
}

fn describe(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            // BadSignature: an anchor with the issuer's name exists but did
            // not sign it (another CA of the same name): not trusted either.
            CertificateError::UnknownIssuer | CertificateError::BadSignature => format!(
                "TLS handshake failed: the server's certificate is not trusted ({c:?}); \
                 for a private CA or a self-signed certificate, pass its DER certificate \
                 in ConnectOptions::extra_root_certificates"
            ),
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                "TLS handshake failed: the server's certificate is not valid for this host name"
                    .into()
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "TLS handshake failed: the server's certificate has expired".into()
            }
            other => format!("TLS handshake failed: invalid server certificate: {other}"),
        },
        other => format!("TLS handshake failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_builds_with_webpki_roots_and_rejects_garbage_extra_roots() {
        assert!(client_config(&[]).is_ok());
        let err = client_config(&[b"not a certificate".to_vec()]).err();
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("extra root certificate #0")),
            "{err:?}"
        );
    }

    #[test]
    fn a_process_wide_default_provider_does_not_matter() {
        // Installing one (or finding one installed) must not change or break ours.
        let _ = rustls::crypto::ring::default_provider().install_default();
        assert!(client_config(&[]).is_ok());
    }

    #[test]
    fn server_names_accept_dns_names_and_ip_addresses() {
        assert!(server_name("localhost").is_ok());
        assert!(server_name("127.0.0.1").is_ok());
        assert!(server_name("[::1]").is_ok());
        assert!(server_name("bad name!").is_err());
    }

    #[test]
    fn unknown_issuer_says_not_trusted() {
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        let text = describe_io(&io).unwrap_or_default();
        assert!(text.contains("not trusted"), "{text}");
        assert!(text.contains("extra_root_certificates"), "{text}");
        let plain = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(describe_io(&plain), None);
    }
}
