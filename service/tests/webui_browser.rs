//! The web UI in a real browser: Debian's headless Chromium driven over
//! WebDriver (chromium-driver, installed by scripts/deps.d/webui.sh) from
//! fantoccini, clicking login → devices → a run → diagnosis on the demo's
//! data uploaded through ingest, asserting on what the pages show, and
//! saving a screenshot of each page into the test's output folder
//! (`$CARGO_TARGET_TMPDIR/webui-browser/`).

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::webui::{upload_demo, BAD, GOOD, WINDOWS};
use common::{start, TOKEN};
use fantoccini::{Client, ClientBuilder, Locator};

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

/// How many elements match `css` (at least one is waited for).
async fn count(client: &Client, css: &str) -> usize {
    wait_for(client, css).await;
    client.find_all(Locator::Css(css)).await.unwrap().len()
}

async fn click_through(client: &Client, url: &str, out: &Path, windowed: &str) {
    // Not logged in: the UI sends the browser to the login form.
    client.goto(url).await.unwrap();
    assert!(client.current_url().await.unwrap().path() == "/login");
    client
        .find(Locator::Id("token"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    shot(client, out, "1-login.png").await;
    client
        .find(Locator::Id("login"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();

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
    client
        .find(Locator::LinkText("Runs"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for(client, "#filter").await;
    let program = client
        .find(Locator::Css("input[name=program]"))
        .await
        .unwrap();
    program.send_keys("wget").await.unwrap();
    client
        .find(Locator::Id("filter"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(
        count(client, "#runs a.run").await,
        GOOD + BAD + WINDOWS as usize
    );
    shot(client, out, "3-runs.png").await;
    wait_for(client, &format!("a[href='/runs/{windowed}']"))
        .await
        .click()
        .await
        .unwrap();
    let table = text(client, "#show-table").await;
    assert!(table.starts_with(&format!("run {windowed}")), "{table}");
    assert!(table.contains("program wget"), "{table}");
    assert_eq!(count(client, "#window-plots svg").await, 2);
    assert_eq!(count(client, "#window-plots polyline").await, 5);
    shot(client, out, "4-run.png").await;

    // Diagnosis.
    client
        .find(Locator::LinkText("Diagnosis"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
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
    client
        .find(Locator::Id("diagnose"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
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
            async move { click_through(&client, &url, &out, &windowed).await }
        })
        .await;
        let _ = client.close().await;
        if let Err(e) = outcome {
            std::panic::resume_unwind(e.into_panic());
        }
    });
    eprintln!("screenshots in {}", out.display());
}
