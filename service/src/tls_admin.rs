//! `edge-service tls init` and `tls renew`: a private CA and the server
//! certificates it signs (rcgen), so that TLS works in one command.
//!
//! The CA's key lives in its own file (`ca.key`, mode 0600) so it can be
//! moved offline: only `tls renew` needs it (`--ca-key`). Devices trust the
//! CA (`ca.pem`), not the server certificate, so a renewed server
//! certificate is accepted without touching them; by default `renew` keeps
//! the server's key, so `--pin-sha256` pins keep matching too.

use std::io::Write as _;
use std::net::IpAddr;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PublicKeyData as _, SanType, SerialNumber,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use crate::tls::{utc, CertFacts};

/// The CA's lifetime: it outlives many server certificates, and replacing
/// it means giving every device a new `ca.pem`.
const CA_DAYS: i64 = 3650;
/// Certificates start this long before they are made, so that a device
/// whose clock lags a little still accepts them.
const BACKDATE_SECS: i64 = 3600;

/// The files of a TLS directory.
#[derive(Debug, Clone)]
pub struct TlsDir {
    pub dir: PathBuf,
}

impl TlsDir {
    pub fn ca_cert(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }
    pub fn ca_key(&self) -> PathBuf {
        self.dir.join("ca.key")
    }
    pub fn server_cert(&self) -> PathBuf {
        self.dir.join("server.pem")
    }
    pub fn server_key(&self) -> PathBuf {
        self.dir.join("server.key")
    }
}

/// What `tls init` needs.
#[derive(Debug, Clone)]
pub struct InitOptions {
    pub dir: PathBuf,
    /// `HOST[,HOST|IP...]` as given.
    pub names: String,
    pub days: u32,
    pub force: bool,
}

/// What `tls renew` needs.
#[derive(Debug, Clone)]
pub struct RenewOptions {
    pub dir: PathBuf,
    /// `None`: the names of the current server certificate.
    pub names: Option<String>,
    pub days: u32,
    /// `None`: `DIR/ca.key`.
    pub ca_key: Option<PathBuf>,
    pub new_key: bool,
}

/// A server name for the certificate: an IP address, or a DNS name
/// (`*.` wildcard allowed as the first label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Name {
    Ip(IpAddr),
    Dns(String),
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Name::Ip(ip) => write!(f, "{ip}"),
            Name::Dns(d) => f.write_str(d),
        }
    }
}

/// Parses `HOST[,HOST|IP...]`.
pub fn parse_names(text: &str) -> anyhow::Result<Vec<Name>> {
    let mut names = Vec::new();
    for part in text.split(',').map(str::trim) {
        if part.is_empty() {
            bail!("--name {text:?}: an empty name (give HOST[,HOST|IP...])");
        }
        let bare = part.trim_start_matches('[').trim_end_matches(']');
        let name = match bare.parse::<IpAddr>() {
            Ok(ip) => Name::Ip(ip),
            Err(_) => {
                let dns = part.to_ascii_lowercase();
                // rustls' own check of a DNS name: a client connects with it.
                let check = dns.strip_prefix("*.").unwrap_or(&dns);
                if rustls::pki_types::DnsName::try_from(check).is_err() || check.contains('*') {
                    bail!("--name {part:?} is neither an IP address nor a valid DNS name");
                }
                Name::Dns(dns)
            }
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(names)
}

/// `edge-service tls init`: a new CA, and a server certificate it signs.
pub fn init(opts: &InitOptions) -> anyhow::Result<()> {
    let names = parse_names(&opts.names)?;
    check_days(opts.days)?;
    let dir = TlsDir {
        dir: opts.dir.clone(),
    };
    if !opts.force {
        for path in [
            dir.ca_cert(),
            dir.ca_key(),
            dir.server_cert(),
            dir.server_key(),
        ] {
            if path.exists() {
                bail!(
                    "{} already exists: devices may trust this CA; to make a new CA anyway \
                     (every device then needs the new ca.pem) add --force; for a new server \
                     certificate from the same CA use: edge-service tls renew --dir {}",
                    path.display(),
                    opts.dir.display()
                );
            }
        }
    }
    make_private_dir(&opts.dir)?;
    let now = now();
    let ca_key = KeyPair::generate().context("cannot make the CA's key")?;
    let mut ca = CertificateParams::default();
    ca.distinguished_name = DistinguishedName::new();
    ca.distinguished_name.push(
        DnType::CommonName,
        format!("Edge Agent CA for {} {}", names[0], &utc(now)[..10]),
    );
    // Path length 0: it signs server certificates, never another CA.
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca.serial_number = Some(random_serial()?);
    ca.not_before = datetime(now - BACKDATE_SECS)?;
    ca.not_after = datetime(now + CA_DAYS * 86_400)?;
    let ca_cert = ca
        .self_signed(&ca_key)
        .context("cannot sign the CA certificate")?;
    let server_key = KeyPair::generate().context("cannot make the server's key")?;
    let issuer = Issuer::from_ca_cert_der(ca_cert.der(), &ca_key)
        .context("cannot read back the CA certificate")?;
    let server = sign_server(&names, opts.days, now, &server_key, &issuer)?;

    // Keys first: a certificate without its key is useless, the reverse
    // is only incomplete.
    write_file(&dir.ca_key(), ca_key.serialize_pem().as_bytes(), 0o600)?;
    write_file(
        &dir.server_key(),
        server_key.serialize_pem().as_bytes(),
        0o600,
    )?;
    write_file(&dir.ca_cert(), ca_cert.pem().as_bytes(), 0o644)?;
    write_file(&dir.server_cert(), server.pem().as_bytes(), 0o644)?;

    let ca_facts = CertFacts::parse(ca_cert.der()).context("cannot read the CA certificate")?;
    let facts = CertFacts::parse(server.der()).context("cannot read the server certificate")?;
    println!("edge-service tls init: made in {}:", opts.dir.display());
    println!(
        "  ca.pem      the private CA ({}, until {}): give it to every device (--ca)",
        ca_facts.subject,
        utc(ca_facts.not_after)
    );
    println!(
        "  ca.key      the CA's private key (mode 0600): only `tls renew` needs it; it may be \
         kept offline (tls renew --ca-key FILE)"
    );
    print_server(&dir, &facts, true);
    Ok(())
}

/// `edge-service tls renew`: a new server certificate from the same CA.
pub fn renew(opts: &RenewOptions) -> anyhow::Result<()> {
    check_days(opts.days)?;
    let dir = TlsDir {
        dir: opts.dir.clone(),
    };
    let ca_pem_path = dir.ca_cert();
    let ca_der = CertificateDer::from_pem_file(&ca_pem_path).with_context(|| {
        format!(
            "cannot read the CA certificate {} (made by edge-service tls init)",
            ca_pem_path.display()
        )
    })?;
    let ca_facts = CertFacts::parse(&ca_der)
        .with_context(|| format!("{} is not a readable certificate", ca_pem_path.display()))?;
    if !ca_facts.is_ca {
        bail!(
            "{} {} is not a CA certificate",
            ca_pem_path.display(),
            ca_facts.label()
        );
    }
    let ca_key_path = opts.ca_key.clone().unwrap_or_else(|| dir.ca_key());
    let ca_key = read_key(&ca_key_path, "the CA's key")?;
    if ca_key.subject_public_key_info() != ca_facts.spki {
        bail!(
            "{} is not the key of the CA {} ({}): give the ca.key made with it (--ca-key FILE)",
            ca_key_path.display(),
            ca_pem_path.display(),
            ca_facts.subject
        );
    }
    let old = CertificateDer::from_pem_file(dir.server_cert())
        .ok()
        .and_then(|der| CertFacts::parse(&der));
    let names = match (&opts.names, &old) {
        (Some(text), _) => parse_names(text)?,
        (None, Some(old)) if !old.names.is_empty() => parse_names(&old.names.join(","))?,
        _ => bail!(
            "{} has no names to renew: give them with --name HOST[,HOST|IP...]",
            dir.server_cert().display()
        ),
    };
    let now = now();
    if ca_facts.not_after < now + i64::from(opts.days) * 86_400 {
        bail!(
            "the CA {} expires at {}, before the {} days asked; ask fewer --days, or make a new \
             CA with: edge-service tls init --force (every device then needs the new ca.pem)",
            ca_facts.subject,
            utc(ca_facts.not_after),
            opts.days
        );
    }
    let key_path = dir.server_key();
    let new_key = opts.new_key || !key_path.exists();
    let server_key = if new_key {
        KeyPair::generate().context("cannot make the server's key")?
    } else {
        read_key(&key_path, "the server's key")?
    };
    let issuer = Issuer::from_ca_cert_der(&ca_der, &ca_key)
        .with_context(|| format!("cannot use {} as the issuer", ca_pem_path.display()))?;
    let server = sign_server(&names, opts.days, now, &server_key, &issuer)?;
    if new_key {
        write_file(&key_path, server_key.serialize_pem().as_bytes(), 0o600)?;
    }
    write_file(&dir.server_cert(), server.pem().as_bytes(), 0o644)?;
    let facts = CertFacts::parse(server.der()).context("cannot read the server certificate")?;
    println!(
        "edge-service tls renew: a new server certificate from {} in {}:",
        ca_facts.subject,
        opts.dir.display()
    );
    print_server(&dir, &facts, new_key);
    if new_key && old.is_some_and(|o| o.spki != facts.spki) {
        println!(
            "the server's key is new: devices that pin the old key refuse this one until they \
             are given the pin above"
        );
    }
    Ok(())
}

/// The lines about the server certificate and how to use it.
fn print_server(dir: &TlsDir, facts: &CertFacts, new_key: bool) {
    let first = facts.names.first().map_or("HOST", String::as_str);
    let host = if first.contains(':') {
        format!("[{first}]")
    } else {
        first.to_string()
    };
    println!(
        "  server.pem  the server certificate for {} (until {})",
        facts.names.join(", "),
        utc(facts.not_after)
    );
    println!(
        "  server.key  the server's private key (mode 0600){}",
        if new_key { "" } else { ", unchanged" }
    );
    println!("serve with:");
    println!(
        "  edge-service serve --tls-cert {} --tls-key {} [--listen ADDR --tokens FILE ...]",
        dir.server_cert().display(),
        dir.server_key().display()
    );
    println!("devices upload with:");
    println!(
        "  edge-agent upload --server https://{host}:PORT --ca {} [--pin-sha256 ...]",
        dir.ca_cert().display()
    );
    println!(
        "the server key's pin{} (optional: a device given it accepts only this key):",
        if new_key { "" } else { ", unchanged" }
    );
    println!("  --pin-sha256 {}", facts.pin());
}

fn sign_server(
    names: &[Name],
    days: u32,
    now: i64,
    key: &KeyPair,
    issuer: &Issuer<'_, &KeyPair>,
) -> anyhow::Result<rcgen::Certificate> {
    let mut params = CertificateParams::default();
    params.subject_alt_names = names
        .iter()
        .map(|n| {
            Ok(match n {
                Name::Ip(ip) => SanType::IpAddress(*ip),
                Name::Dns(d) => SanType::DnsName(
                    d.clone()
                        .try_into()
                        .with_context(|| format!("--name {d:?} is not ASCII"))?,
                ),
            })
        })
        .collect::<anyhow::Result<_>>()?;
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, names[0].to_string());
    // CA:FALSE said explicitly: the certificate a TLS client wants.
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    // Random: a renewal with the same key and names must not repeat a serial.
    params.serial_number = Some(random_serial()?);
    params.not_before = datetime(now - BACKDATE_SECS)?;
    params.not_after = datetime(now + i64::from(days) * 86_400)?;
    params
        .signed_by(key, issuer)
        .context("cannot sign the server certificate")
}

fn check_days(days: u32) -> anyhow::Result<()> {
    if days == 0 || i64::from(days) > CA_DAYS {
        bail!("--days {days}: give 1 to {CA_DAYS}");
    }
    Ok(())
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

fn datetime(secs: i64) -> anyhow::Result<time::OffsetDateTime> {
    time::OffsetDateTime::from_unix_timestamp(secs).context("date out of range")
}

/// 16 random bytes, the top bit clear (a positive INTEGER).
fn random_serial() -> anyhow::Result<SerialNumber> {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] &= 0x7f;
    bytes[0] |= 0x01;
    Ok(SerialNumber::from_slice(&bytes))
}

fn read_key(path: &Path, what: &str) -> anyhow::Result<KeyPair> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read {what} {}", path.display()))?;
    KeyPair::from_pem(&text).map_err(|e| {
        anyhow::anyhow!(
            "{} is not a usable private key ({what}): {e}",
            path.display()
        )
    })
}

/// Creates `dir` (mode 0700 when new: it holds keys).
fn make_private_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot restrict {}", dir.display()))
}

/// Writes `path` whole or not at all (a temporary file renamed over it),
/// created with `mode` so a key is never readable by others, even briefly.
fn write_file(path: &Path, data: &[u8], mode: u32) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map_or_else(|| "file".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .with_context(|| format!("cannot create {}", tmp.display()))?;
    file.write_all(data)
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    // The umask may have narrowed the mode; a key must be 0600 exactly.
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot set the mode of {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse() {
        let names = parse_names("Edge.Example.com, 127.0.0.1,[::1],*.fleet.example").unwrap();
        assert_eq!(
            names,
            vec![
                Name::Dns("edge.example.com".into()),
                Name::Ip("127.0.0.1".parse().unwrap()),
                Name::Ip("::1".parse().unwrap()),
                Name::Dns("*.fleet.example".into()),
            ]
        );
        for bad in ["", "a,,b", "bad name", "a.*.b", "**.x"] {
            assert!(parse_names(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn init_then_renew_keeps_the_ca_and_the_key() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("tls");
        let init_opts = InitOptions {
            dir: dir.clone(),
            names: "localhost,127.0.0.1".into(),
            days: 30,
            force: false,
        };
        init(&init_opts).unwrap();
        let d = TlsDir { dir: dir.clone() };
        for key in [d.ca_key(), d.server_key()] {
            let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", key.display());
        }
        let read =
            |p: PathBuf| CertFacts::parse(&CertificateDer::from_pem_file(p).unwrap()).unwrap();
        let (ca, server) = (read(d.ca_cert()), read(d.server_cert()));
        assert!(ca.is_ca && !server.is_ca);
        assert_eq!(server.issuer, ca.subject);
        assert_eq!(server.names, ["localhost", "127.0.0.1"]);
        let err = init(&init_opts).unwrap_err().to_string();
        assert!(
            err.contains("already exists") && err.contains("--force"),
            "{err}"
        );

        renew(&RenewOptions {
            dir: dir.clone(),
            names: None,
            days: 60,
            ca_key: None,
            new_key: false,
        })
        .unwrap();
        let renewed = read(d.server_cert());
        assert_eq!(read(d.ca_cert()), ca, "the CA is untouched");
        assert_eq!(renewed.spki, server.spki, "the key is kept");
        assert_eq!(renewed.names, server.names);
        assert!(renewed.not_after > server.not_after);
        // The pair still loads in rustls.
        crate::tls::server_config(&d.server_cert(), &d.server_key()).unwrap();

        renew(&RenewOptions {
            dir: dir.clone(),
            names: Some("edge.example".into()),
            days: 10,
            ca_key: None,
            new_key: true,
        })
        .unwrap();
        let rekeyed = read(d.server_cert());
        assert_ne!(rekeyed.spki, server.spki);
        assert_eq!(rekeyed.names, ["edge.example"]);
        crate::tls::server_config(&d.server_cert(), &d.server_key()).unwrap();

        // Another CA's key is refused.
        let other = tmp.path().join("other.key");
        std::fs::write(&other, KeyPair::generate().unwrap().serialize_pem()).unwrap();
        let err = renew(&RenewOptions {
            dir,
            names: None,
            days: 10,
            ca_key: Some(other),
            new_key: false,
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("is not the key of the CA"), "{err}");
    }
}
