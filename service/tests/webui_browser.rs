//! The web UI in a real browser: Debian's headless Chromium driven over
//! WebDriver (chromium-driver, installed by scripts/deps.d/webui.sh) from
//! fantoccini, clicking login → devices → a run → diagnosis on the demo's
//! data uploaded through ingest, then peers (on a synthetic fleet) →
//! reports → a report → incidents → an incident → its windows, asserting
//! on what the pages show, and saving a screenshot of each page into the
//! test's output folder (`$CARGO_TARGET_TMPDIR/webui-browser/`).

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_core::DeviceId;
use common::webui::{upload_demo, BAD, GOOD, WINDOWS};
use common::{bin, start, OPERATOR_PASSWORD, TOKEN};
use fantoccini::{Client, ClientBuilder, Locator};
use fixtures::synth::{Fault, FleetSpec};
use service::proactive::reports::{self, Report, ReportDevice};
use service::store::{IncidentRow, Location};
use wire::alert::IncidentCause;

/// chromedriver, killed when dropped.
struct Driver {
    child: Child,
    port: u16,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

fn start_driver() -> Driver {
    // A free port: bound, read, released.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let driver = Driver { child, port };
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "chromedriver did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    driver
}

async fn browser(driver: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": "/usr/bin/chromium",
            // --no-sandbox: the tests run as root, which Chromium's sandbox refuses.
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1280,1800"]
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.port))
        .await
        .expect("a WebDriver session with headless Chromium")
}

async fn shot(client: &Client, dir: &Path, name: &str) {
    let png = client.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "{name} is a PNG");
    std::fs::write(dir.join(name), png).unwrap();
}

/// The first element matching `css`, waiting for the page that a click
/// started to load (a loaded machine may take seconds).
async fn wait_for(client: &Client, css: &str) -> fantoccini::elements::Element {
    client
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
}

async fn text(client: &Client, css: &str) -> String {
    client
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
        .text()
        .await
        .unwrap()
}

/// Clicks the element `locator` finds (waiting for it) and waits for the
/// page the click loads. Without the wait, a check right after the click
/// could read the page being left, or an empty one mid-load: the filtered
/// runs list was once counted as 0.
async fn follow(client: &Client, locator: Locator<'_>) {
    let element = client
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(locator)
        .await
        .unwrap_or_else(|e| panic!("nothing to click: {e}"));
    // A mark on the page being left; the new page's window has none.
    client
        .execute("window.edgeLeaving = true;", vec![])
        .await
        .unwrap();
    element.click().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // Mid-navigation, a script may fail to run; that is not an answer.
        let loaded = client
            .execute(
                "return window.edgeLeaving === undefined && document.readyState === 'complete';",
                vec![],
            )
            .await;
        if matches!(loaded, Ok(serde_json::Value::Bool(true))) {
            return;
        }
        assert!(Instant::now() < deadline, "the click loaded no new page");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many elements match `css` (at least one is waited for).
async fn count(client: &Client, css: &str) -> usize {
    wait_for(client, css).await;
    client.find_all(Locator::Css(css)).await.unwrap().len()
}

async fn click_through(client: &Client, url: &str, out: &Path, windowed: &str) {
    // Not logged in: the UI sends the browser to the login form.
    client.goto(url).await.unwrap();
    assert!(client.current_url().await.unwrap().path() == "/login");
    for (field, value) in [("name", "phones-op"), ("password", OPERATOR_PASSWORD)] {
        client
            .find(Locator::Id(field))
            .await
            .unwrap()
            .send_keys(value)
            .await
            .unwrap();
    }
    shot(client, out, "1-login.png").await;
    follow(client, Locator::Id("login")).await;

    // Devices.
    wait_for(client, "#devices").await;
    assert_eq!(client.current_url().await.unwrap().path(), "/devices");
    assert_eq!(text(client, "#group").await, "phones");
    assert_eq!(count(client, "#devices a.device").await, 7);
    // The stylesheet loaded under the strict CSP (same origin).
    let background = client
        .execute(
            "return getComputedStyle(document.querySelector('header')).backgroundColor",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(background, "rgb(35, 49, 63)");
    shot(client, out, "2-devices.png").await;

    // Runs of wget, then the windowed run.
    follow(client, Locator::LinkText("Runs")).await;
    wait_for(client, "#filter").await;
    let program = client
        .find(Locator::Css("input[name=program]"))
        .await
        .unwrap();
    program.send_keys("wget").await.unwrap();
    follow(client, Locator::Id("filter")).await;
    assert_eq!(
        count(client, "#runs a.run").await,
        GOOD + BAD + WINDOWS as usize
    );
    shot(client, out, "3-runs.png").await;
    follow(client, Locator::Css(&format!("a[href='/runs/{windowed}']"))).await;
    let table = text(client, "#show-table").await;
    assert!(table.starts_with(&format!("run {windowed}")), "{table}");
    assert!(table.contains("program wget"), "{table}");
    assert_eq!(count(client, "#window-plots svg").await, 2);
    assert_eq!(count(client, "#window-plots polyline").await, 5);
    shot(client, out, "4-run.png").await;

    // Diagnosis.
    follow(client, Locator::LinkText("Diagnosis")).await;
    wait_for(client, "#diagnose").await;
    client
        .find(Locator::Css("input[name=program]"))
        .await
        .unwrap()
        .send_keys("wget")
        .await
        .unwrap();
    client
        .find(Locator::Css("input[name=since]"))
        .await
        .unwrap()
        .send_keys("1d")
        .await
        .unwrap();
    follow(client, Locator::Id("diagnose")).await;
    assert_eq!(text(client, "#run-count").await, (GOOD + BAD).to_string());
    assert_eq!(text(client, "#class-good .count").await, GOOD.to_string());
    assert_eq!(text(client, "#class-bad .count").await, BAD.to_string());
    let first_rule = text(client, ".rule .rule-text").await;
    assert!(first_rule.starts_with("if num_read <"), "{first_rule}");
    assert_eq!(text(client, ".rule .accuracy").await, "1.000");
    assert!(text(client, "#clusters").await.contains("boundary"));
    assert_eq!(count(client, "#duration-plot svg").await, 1);
    let rules = count(client, ".rule").await;
    assert!(rules >= 1);
    assert!(count(client, ".rule svg").await >= rules);
    // Each rule plot draws every run: good and bad points.
    let first_plot = client.find(Locator::Css(".rule figure")).await.unwrap();
    let points = first_plot.find_all(Locator::Css("circle")).await.unwrap();
    assert_eq!(points.len(), GOOD + BAD);
    shot(client, out, "5-diagnosis.png").await;
}

/// The fleet the Peers page analyses: 4 devices, device 3's disk three
/// times slower in windows 50..80 (as tests/peers.rs).
fn peers_fleet() -> FleetSpec {
    FleetSpec {
        group: "phones".into(),
        faults: vec![Fault::Disk {
            device: 3,
            from: 50,
            until: 80,
            factor: 3.0,
        }],
        ..FleetSpec::new(4, 80)
    }
}

/// After the first pages: uploads the peers fleet, and stores a report of
/// the proactive loop whose HTML is `diagnose --html`'s on the demo's runs
/// (the report the detector would store).
fn add_peers_and_report(url: &str, dir: &Path) -> String {
    let mut buf = vec![0u8; agent_core::MAX_ENCODED_LEN];
    let items: Vec<Vec<u8>> = peers_fleet()
        .summaries()
        .map(|mut s| s.encode(&mut buf).unwrap().to_vec())
        .collect();
    for chunk in items.chunks(100) {
        let (status, json) = common::post_items(url, chunk);
        assert_eq!(status, 200, "{json}");
    }
    let db = dir.join("service.db");
    let html = dir.join("report.html");
    let out = Command::new(bin())
        .args([
            "diagnose",
            "--group",
            "phones",
            "--program",
            "wget",
            "--since",
            "1d",
        ])
        .arg("--db")
        .arg(&db)
        .arg("--html")
        .arg(&html)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut store = Location::parse(&db).open_existing().unwrap();
    store
        .add_report(&Report {
            id: 0,
            group: "phones".into(),
            program: "wget".into(),
            trigger: reports::TRIGGER_SLOW.into(),
            status: reports::STATUS_DIAGNOSED.into(),
            detected_unix_ns: 1_763_700_000_000_000_000,
            created_unix_ns: 1_763_700_060_000_000_000,
            cluster: format!("{BAD} slow runs of {}", GOOD + BAD),
            devices: vec![ReportDevice {
                device: DeviceId([3; 16]),
                cluster: "slow".into(),
                directive: 1,
                runs: 2,
            }],
            headline: "if num_read < 120 then good".into(),
            text: String::from_utf8_lossy(&out.stdout).into_owned(),
            json: serde_json::Value::Null,
            html: std::fs::read_to_string(&html).unwrap(),
        })
        .unwrap();
    store.add_incident(&peers_incident()).unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The incident the live analysis would store for the peers fleet's slow
/// disk: open, device 3 flagged in windows 50..80, its evidence the
/// `dread` series of the 4 devices in windows 40..90 as `online` keeps it.
fn peers_incident() -> IncidentRow {
    let fleet = peers_fleet();
    let windows: Vec<u64> = (40..80).collect();
    let slow = |d: usize, w: u64| d == 3 && (50..80).contains(&w);
    IncidentRow {
        id: 0,
        group: "phones".into(),
        program: fleet.program.clone(),
        device: fleet.device_id(3),
        cause: IncidentCause::Disk,
        metric: "dread".into(),
        deviation: 2.84,
        first_window_unix_ns: fleet.window_start(50),
        last_window_unix_ns: fleet.window_start(79),
        opened_unix_ns: fleet.window_start(55),
        closed_unix_ns: None,
        evidence: serde_json::json!({
            "method": "median",
            "evidence": "dread: 3.0x the median of its 4 peers in 30 of 30 windows",
            "score": 2.84,
            "flagged_windows_unix_ns": (50..80).map(|w| fleet.window_start(w)).collect::<Vec<_>>(),
            "window_ns": fleet.window_ns,
            "series": {
                "program": fleet.program,
                "metric": "dread",
                "devices": (0..4).map(|d| fleet.device_id(d).to_string()).collect::<Vec<_>>(),
                "windows_unix_ns": windows.iter().map(|w| fleet.window_start(*w)).collect::<Vec<_>>(),
                "values_ns": (0..4).map(|d| windows.iter().map(|w| {
                    let base = 1.0e6 + 4.0e4 * (((*w as usize + d) % 5) as f64);
                    if slow(d, *w) { 3.0 * base } else { base }
                }).collect::<Vec<_>>()).collect::<Vec<_>>(),
                "median_ns": windows.iter().map(|_| 1.08e6).collect::<Vec<_>>(),
                "thresholds_ns": [4.0e5, 4.0e5, 4.0e5, 4.0e5],
            },
        }),
    }
}

/// The Incidents page lists the fleet's open incident; its page draws the
/// evidence and links to the device's windows, which the Runs page lists.
async fn click_incidents(client: &Client, out: &Path) {
    let fleet = peers_fleet();
    follow(client, Locator::LinkText("Incidents")).await;
    assert_eq!(count(client, "#open-incidents tr.incident").await, 1);
    assert_eq!(text(client, "#open-incidents .cause").await, "disk");
    assert_eq!(text(client, "#open-incidents .program").await, "glusterfsd");
    shot(client, out, "9-incidents.png").await;
    follow(client, Locator::Css("a.incident-link")).await;
    assert_eq!(
        text(client, "#incident-facts code.device").await,
        fleet.device_id(3).to_string()
    );
    // The series of the 4 devices, the flagged windows shaded.
    assert_eq!(count(client, "#evidence-plot svg").await, 1);
    assert_eq!(count(client, "#evidence-plot svg rect").await, 30);
    shot(client, out, "10-incident.png").await;
    follow(client, Locator::Id("windows-link")).await;
    // Windows 0..80 of device 3: a minute either side of 50..80 covers
    // them all (1 s windows), its peers' not at all.
    assert_eq!(count(client, "#runs a.run").await, 80);
}

async fn fill(client: &Client, name: &str, value: &str) {
    client
        .find(Locator::Css(&format!("[name={name}]")))
        .await
        .unwrap()
        .send_keys(value)
        .await
        .unwrap();
}

/// The Peers page on the fleet, then the Reports page and the report
/// whose text is `report_text`.
async fn click_peers_and_reports(client: &Client, out: &Path, report_text: &str) {
    let fleet = peers_fleet();
    let secs = |w: u64| (fleet.window_start(w) / 1_000_000_000).to_string();
    follow(client, Locator::LinkText("Peers")).await;
    wait_for(client, "#analyse").await;
    fill(client, "train_since", "2025-11-21T04:40:00Z").await;
    fill(client, "train_until", &secs(40)).await;
    fill(client, "since", &secs(40)).await;
    fill(client, "until", &secs(80)).await;
    client
        .find(Locator::Css("select[name=method] option[value=median]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    follow(client, Locator::Id("analyse")).await;
    assert_eq!(text(client, "#device-count").await, "4");
    let slow = common::hex(&fleet.device_id(3));
    assert_eq!(text(client, "#findings .device").await, slow);
    assert_eq!(text(client, "#findings .cause").await, "disk");
    assert!(count(client, "#findings tr.finding").await >= 1);
    assert!(count(client, "#series svg").await >= 2);
    shot(client, out, "6-peers.png").await;

    follow(client, Locator::LinkText("Reports")).await;
    assert_eq!(count(client, "#reports tr.report").await, 1);
    assert_eq!(text(client, "#reports .trigger").await, "slow");
    shot(client, out, "7-reports.png").await;
    follow(client, Locator::Css("a.report-link")).await;
    let first_line = report_text.lines().next().unwrap();
    let shown = text(client, "#report-text").await;
    assert!(shown.starts_with(first_line), "{first_line:?} / {shown:?}");
    // The stored `diagnose --html` report, embedded under the CSP: its
    // heading, its rules and their plots are there.
    let embedded = text(client, "#report-html").await;
    assert!(
        embedded.starts_with(&format!("Diagnosis of {} runs", GOOD + BAD)),
        "{embedded}"
    );
    assert!(count(client, "#report-html h2 code").await >= 1);
    assert!(count(client, "#report-html svg").await >= 2);
    shot(client, out, "8-report.png").await;
}

#[test]
fn login_devices_run_diagnosis_in_chromium() {
    if !on_path("chromedriver") || !Path::new("/usr/bin/chromium").is_file() {
        edge_tests::skip(
            "login_devices_run_diagnosis_in_chromium",
            "chromium and chromium-driver are not installed (scripts/install-deps installs them)",
        );
        return;
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("webui-browser");
    std::fs::create_dir_all(&out).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let up = upload_demo(&server.url);
    // The operator the browser logs in as (its API token is not used).
    server.op(TOKEN);
    let driver = start_driver();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = browser(&driver).await;
        // Close the session whatever the outcome, then report it.
        let outcome = tokio::spawn({
            let client = client.clone();
            let url = server.url.clone();
            let out = out.clone();
            let windowed = up.windowed.clone();
            let data = dir.path().to_path_buf();
            async move {
                click_through(&client, &url, &out, &windowed).await;
                let prepared = url.clone();
                let report_text =
                    tokio::task::spawn_blocking(move || add_peers_and_report(&prepared, &data))
                        .await
                        .unwrap();
                click_peers_and_reports(&client, &out, &report_text).await;
                click_incidents(&client, &out).await;
            }
        })
        .await;
        let _ = client.close().await;
        if let Err(e) = outcome {
            std::panic::resume_unwind(e.into_panic());
        }
    });
    eprintln!("screenshots in {}", out.display());
}
