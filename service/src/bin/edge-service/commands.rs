//! Running each `edge-service` command but the analyses (`analyses`):
//! the library does the work, this prints what it did.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use service::directive::{Directive, DirectiveText, FromWords};
use service::proactive::directives::DeviceDirective;
use service::serve::serve;
use service::store::Store;

use crate::analyses;
use crate::args::{Cli, Command, DbArg, DirectiveCommand, OperatorCommand, TlsCommand};

/// A `--device` argument: 32 hex digits (any case).
fn device_arg(text: &str) -> anyhow::Result<agent_core::DeviceId> {
    text.parse::<agent_core::DeviceId>()
        .ok()
        .with_context(|| format!("--device `{text}` is not 32 hex digits"))
}

/// Runs the command line.
pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve(a) => {
            serve(a.options()?)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Directive(d) => directive(d),
        Command::Operator(o) => operator(o),
        Command::Prune(a) => {
            let location = a.db.location();
            let mut store = open(&a.db)?;
            let pruned = service::retention::prune(
                store.as_mut(),
                a.older_than,
                a.keep_raw,
                service::retention::now_unix_ns(),
            )
            .with_context(|| format!("cannot prune {location}"))?;
            println!(
                "pruned {} run(s){} and {} device(s) from {location}",
                pruned.runs,
                if a.keep_raw {
                    " (their raw summaries kept)"
                } else {
                    ""
                },
                pruned.devices
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Diagnose(args) => analyses::diagnose(&args),
        Command::Peers(args) => analyses::peers(&args),
        Command::Tls(t) => {
            match t {
                TlsCommand::Init(a) => {
                    service::tls_admin::init(&service::tls_admin::InitOptions {
                        dir: a.dir,
                        names: a.name,
                        days: a.days,
                        force: a.force,
                    })?
                }
                TlsCommand::Renew(a) => {
                    service::tls_admin::renew(&service::tls_admin::RenewOptions {
                        dir: a.dir,
                        names: a.name,
                        days: a.days,
                        ca_key: a.ca_key,
                        new_key: a.new_key,
                    })?
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Opens an existing database: a mistyped `--db` must not create a new,
/// empty one that the server never reads (only `serve` creates it).
fn open(db: &DbArg) -> anyhow::Result<Box<dyn Store>> {
    db.location().open_existing()
}

fn directive(cmd: DirectiveCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        DirectiveCommand::Set(a) => {
            let d = Directive::parse(
                &a.group,
                DirectiveText {
                    match_text: a.match_text.as_deref(),
                    only: a.only.as_deref(),
                    window: a.window.as_deref(),
                    programs: a.programs.as_deref(),
                },
            )?;
            open(&a.db)?
                .set_directive(&d)
                .with_context(|| format!("cannot store the directive in {}", a.db.location()))?;
            println!("{}", serde_json::to_string(&d)?);
        }
        DirectiveCommand::Show { db, group } => {
            let mut store = open(&db)?;
            let list = match group {
                Some(g) => vec![store.directive(&g)?.unwrap_or_else(|| Directive::empty(&g))],
                None => store.directives()?,
            };
            for d in list {
                println!("{}", serde_json::to_string(&d)?);
            }
        }
        DirectiveCommand::Clear { db, group } => {
            if !open(&db)?.clear_directive(&group)? {
                eprintln!("group `{group}` had no directive");
            }
        }
        DirectiveCommand::Device(a) => {
            let now = service::retention::now_unix_ns();
            let expires = u64::try_from(a.expires.as_nanos()).unwrap_or(u64::MAX);
            let mut d = DeviceDirective::new(
                &a.group,
                device_arg(&a.device)?,
                a.program.as_deref(),
                a.match_text.as_deref(),
                a.runs,
                now,
                now.saturating_add(expires),
                "operator",
            )?;
            d.id = open(&a.db)?
                .add_device_directive(&d)
                .with_context(|| format!("cannot store the directive in {}", a.db.location()))?;
            println!("{}", d.full_view());
        }
        DirectiveCommand::DeviceList { db, group, device } => {
            let device = device.as_deref().map(device_arg).transpose()?;
            for d in open(&db)?.device_directives(group.as_deref(), device.as_ref())? {
                println!("{}", d.full_view());
            }
        }
        DirectiveCommand::DeviceClear {
            db,
            group,
            device,
            id,
        } => {
            let device = device.as_deref().map(device_arg).transpose()?;
            let n = open(&db)?.clear_device_directives(&group, device.as_ref(), id)?;
            eprintln!("deleted {n} per-device directive(s) of group `{group}`");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The password of `operator add`: stdin's first line, or a prompt on the
/// terminal (typed twice).
fn read_password(from_stdin: bool) -> anyhow::Result<String> {
    if from_stdin {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .context("cannot read the password from stdin")?;
        return Ok(line.trim_end_matches(['\r', '\n']).to_string());
    }
    let first = rpassword::prompt_password("Password: ")
        .context("cannot prompt for the password (no terminal? use --password-stdin)")?;
    let again =
        rpassword::prompt_password("Password again: ").context("cannot prompt for the password")?;
    if first != again {
        anyhow::bail!("the passwords differ");
    }
    Ok(first)
}

fn operator(cmd: OperatorCommand) -> anyhow::Result<ExitCode> {
    use service::operators::{new_operator, new_secret, secret_hash, Credential, CredentialKind};
    match cmd {
        OperatorCommand::Add {
            db,
            name,
            group,
            password_stdin,
        } => {
            let password = read_password(password_stdin)?;
            let row = new_operator(&name, &group, &password, service::retention::now_unix_ns())?;
            let location = db.location();
            let mut store = location.opener(Duration::from_secs(5))()
                .with_context(|| format!("cannot open {location}"))?;
            if !store.add_operator(&row)? {
                anyhow::bail!("operator `{name}` already exists (operator remove it first)");
            }
            eprintln!("added operator `{name}` of group `{group}`");
        }
        OperatorCommand::Remove { db, name } => {
            if !open(&db)?.remove_operator(&name)? {
                anyhow::bail!("no operator `{name}`");
            }
            eprintln!("removed operator `{name}` with its sessions and API tokens");
        }
        OperatorCommand::List { db } => {
            for op in open(&db)?.operators()? {
                println!("{}\t{}", op.name, op.group);
            }
        }
        OperatorCommand::Token { db, name } => {
            let mut store = open(&db)?;
            let Some(op) = store.operator(&name)? else {
                anyhow::bail!("no operator `{name}`");
            };
            let secret = new_secret()?;
            store.add_credential(&Credential {
                hash: secret_hash(&secret),
                operator: op.name,
                group: op.group,
                kind: CredentialKind::Api,
                created_unix_ns: service::retention::now_unix_ns(),
                expires_unix_ns: None,
            })?;
            println!("{secret}");
        }
        OperatorCommand::Revoke { db, name, sessions } => {
            let n = open(&db)?.revoke_credentials(&name, sessions)?;
            eprintln!("revoked {n} credential(s) of operator `{name}`");
        }
    }
    Ok(ExitCode::SUCCESS)
}
