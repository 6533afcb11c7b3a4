//! Writes the upload bodies of `scripts/soak-web`: one program's `--runs`
//! whole runs (service::sample's simulated runs, about 30 % of them slow
//! on the network, spread over the 24 hours before `--now` on `--devices`
//! devices) and a small fleet's window summaries of another program,
//! `--window-program` (`diagnose::peers::synth`: `--window-devices`
//! devices × `--windows`
//! one-second windows ending a minute before `--now`, one device
//! disk-slowed in the last quarter), framed as `POST /v1/summaries`
//! expects, as many to a body as the framing allows (`MAX_ITEMS`,
//! `MAX_BODY`). The soak uploads them over HTTP rather than writing a
//! store: the build it measures may be older than this one, and an older
//! `edge-service` refuses a store of a newer schema.
//!
//! Prints the number of bodies written, `DIR/body-00000.bin` onwards.
//!
//! Usage: edge-service-soak-body --out DIR --now UNIX_S [--program wget]
//!        [--group phones] [--runs 20000] [--events 3000] [--devices 50]
//!        [--window-program glusterfsd] [--window-devices 10] [--windows 600]
//!
//! The windows are another program's because the Diagnosis page counts
//! a program's windows with its runs (and leaves them out unless merged):
//! the soak's diagnosis reads exactly `--runs` runs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agent_core::framing::{write_item, MAX_BODY, MAX_ITEMS};
use anyhow::{bail, Context};
use diagnose::peers::synth::{Fault, FleetSpec};
use service::sample;

struct Options {
    out: PathBuf,
    now_unix_s: u64,
    program: String,
    group: String,
    window_program: String,
    runs: u64,
    events: u32,
    devices: u64,
    window_devices: usize,
    windows: u64,
}

fn parse_args() -> anyhow::Result<Options> {
    let mut o = Options {
        out: PathBuf::new(),
        now_unix_s: 0,
        program: "wget".into(),
        group: "phones".into(),
        window_program: "glusterfsd".into(),
        runs: 20_000,
        events: 3_000,
        devices: 50,
        window_devices: 10,
        windows: 600,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        let number = || value.parse::<u64>().with_context(|| flag.clone());
        match flag.as_str() {
            "--out" => o.out = PathBuf::from(&value),
            "--now" => o.now_unix_s = number()?,
            "--program" => o.program = value.clone(),
            "--group" => o.group = value.clone(),
            "--window-program" => o.window_program = value.clone(),
            "--runs" => o.runs = number()?,
            "--events" => o.events = u32::try_from(number()?).context("--events")?,
            "--devices" => o.devices = number()?.max(1),
            "--window-devices" => o.window_devices = usize::try_from(number()?)?,
            "--windows" => o.windows = number()?,
            _ => bail!("unknown option {flag}"),
        }
    }
    if o.out.as_os_str().is_empty() || o.now_unix_s < 2 * 86_400 {
        bail!("usage: edge-service-soak-body --out DIR --now UNIX_S [--program P] [--group G] [--window-program P] [--runs N] [--events N] [--devices N] [--window-devices N] [--windows N]");
    }
    Ok(o)
}

/// Fills bodies up to the framing's limits and writes each when full.
struct Bodies<'a> {
    dir: &'a Path,
    body: Vec<u8>,
    items: usize,
    written: usize,
}

impl Bodies<'_> {
    fn push(&mut self, item: &[u8]) -> anyhow::Result<()> {
        // A length prefix is at most 5 bytes; 16 leaves room to spare.
        if self.items == MAX_ITEMS || self.body.len() + item.len() + 16 > MAX_BODY {
            self.flush()?;
        }
        write_item(&mut self.body, item);
        self.items += 1;
        Ok(())
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        if self.items == 0 {
            return Ok(());
        }
        let path = self.dir.join(format!("body-{:05}.bin", self.written));
        std::fs::write(&path, &self.body)
            .with_context(|| format!("cannot write {}", path.display()))?;
        self.body.clear();
        self.items = 0;
        self.written += 1;
        Ok(())
    }
}

fn run() -> anyhow::Result<()> {
    let o = parse_args()?;
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("cannot create {}", o.out.display()))?;
    let mut bodies = Bodies {
        dir: &o.out,
        body: Vec::new(),
        items: 0,
        written: 0,
    };
    let second = 1_000_000_000u64;
    let day = 86_400 * second;
    let first = (o.now_unix_s - 2 * 86_400) * second + day;
    let step = day / o.runs.max(1);
    for i in 0..o.runs {
        // sample::summary draws its slow runs (network calls 4× longer,
        // fact net.adapter=nat) and its program from the seed: the program
        // is set here so that every run is the one program's.
        let mut s = sample::summary(5_000_000 + i, o.events, None);
        s.facts.program = agent_core::facts::truncated(&o.program);
        s.run.start_unix_ns = first + i * step;
        s.origin.device = [0; 16];
        s.origin.device[0] = 0xa0;
        s.origin.device[8..].copy_from_slice(&(i % o.devices + 1).to_be_bytes());
        bodies.push(&sample::encode(&s))?;
    }
    if o.window_devices > 0 && o.windows > 0 {
        let mut spec = FleetSpec::new(o.window_devices, o.windows);
        spec.program = o.window_program.clone();
        // The synthetic windows name their group: the upload token's.
        spec.group = o.group.clone();
        spec.start_unix_ns = (o.now_unix_s - 60 - o.windows) * second;
        spec.faults.push(Fault::Disk {
            device: 0,
            from: o.windows * 3 / 4,
            until: u64::MAX,
            factor: 3.0,
        });
        for s in spec.summaries() {
            bodies.push(&sample::encode(&s))?;
        }
    }
    bodies.flush()?;
    println!("{}", bodies.written);
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("edge-service-soak-body: {e:#}");
            ExitCode::from(2)
        }
    }
}
