//! TLS and mutual TLS (rustls): certificates made for the test by a throwaway CA.

use std::path::PathBuf;

use ctxd::proto::{self, context_service_client::ContextServiceClient};
use rcgen::{
    BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

use crate::helpers::{TestApp, spawn_on};

struct Pki {
    dir: PathBuf,
    ca: String,
    client_cert: String,
    client_key: String,
}

fn pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf = |name: &str, usage| {
        let mut params = CertificateParams::new(vec![name.to_string()]).unwrap();
        params.extended_key_usages = vec![usage];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().unwrap();
        (
            params.signed_by(&key, &issuer).unwrap().pem(),
            key.serialize_pem(),
        )
    };
    let (server_cert, server_key) = leaf("localhost", ExtendedKeyUsagePurpose::ServerAuth);
    let (client_cert, client_key) = leaf("agent-backend", ExtendedKeyUsagePurpose::ClientAuth);
    let dir = std::env::temp_dir().join(format!("ctxd-tls-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("server.pem"), &server_cert).unwrap();
    std::fs::write(dir.join("server.key"), &server_key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    Pki {
        dir,
        ca: ca.pem(),
        client_cert,
        client_key,
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

async fn serve(pki: &Pki, mutual: bool) -> TestApp {
    let path = |f: &str| pki.dir.join(f).display().to_string();
    let (cert, key, ca) = (path("server.pem"), path("server.key"), path("ca.pem"));
    let mut flags = vec!["--tls-cert", cert.as_str(), "--tls-key", key.as_str()];
    if mutual {
        flags.extend(["--tls-client-ca", ca.as_str()]);
    }
    spawn_on(None, &flags).await
}

async fn client(
    app: &TestApp,
    pki: &Pki,
    with_identity: bool,
) -> Result<ContextServiceClient<Channel>, String> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&pki.ca))
        .domain_name("localhost");
    if with_identity {
        tls = tls.identity(Identity::from_pem(&pki.client_cert, &pki.client_key));
    }
    let channel = Channel::from_shared(format!("https://localhost:{}", app.addr.port()))
        .unwrap()
        .tls_config(tls)
        .map_err(|e| e.to_string())?
        .connect()
        .await
        .map_err(|e| format!("{e:?}"))?;
    Ok(ContextServiceClient::new(channel))
}

async fn works(client: &mut ContextServiceClient<Channel>) -> Result<(), tonic::Status> {
    client
        .count_tokens(proto::CountTokensRequest {
            text: "hello".into(),
            tokenizer: 0,
        })
        .await
        .map(|_| ())
}

#[tokio::test]
async fn tls_serves_clients_that_trust_the_server_certificate() {
    let pki = pki();
    let app = serve(&pki, false).await;
    let mut c = client(&app, &pki, false).await.unwrap();
    works(&mut c).await.unwrap();
    let mut plain = ContextServiceClient::connect(format!("http://127.0.0.1:{}", app.addr.port()))
        .await
        .unwrap();
    assert!(
        works(&mut plain).await.is_err(),
        "plaintext is refused on a TLS port"
    );
}

#[tokio::test]
async fn mutual_tls_refuses_clients_without_a_certificate() {
    let pki = pki();
    let app = serve(&pki, true).await;
    let mut with_cert = client(&app, &pki, true).await.unwrap();
    works(&mut with_cert).await.unwrap();
    let refused = match client(&app, &pki, false).await {
        Err(_) => true,
        Ok(mut c) => works(&mut c).await.is_err(),
    };
    assert!(refused, "a client without a certificate was served");
}
