//! The web UI over HTTP (the browser test, webui_browser.rs, clicks
//! through it): login and its cookie, the strict headers, every page
//! scoped to the session's group, CSRF on the directive form, the proxy
//! header only when configured; the live analysis' incidents.

mod common;

use agent_core::DeviceId;
use common::webui::{upload, upload_demo, BAD, GOOD, WINDOWS};
use common::{start, Server, OPERATOR_PASSWORD, OTHER_TOKEN, TOKEN};
use fixtures::synth::{Fault, FleetSpec};
use service::proactive::reports::{self, Report, ReportDevice};
use service::store::{IncidentRow, Location};
use wire::alert::IncidentCause;

/// An agent that neither follows redirects nor keeps cookies: each test
/// sees every Set-Cookie and Location itself.
fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into()
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn reply(mut resp: ureq::http::Response<ureq::Body>) -> Reply {
    let status = resp.status().as_u16();
    let headers = resp
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let body = resp.body_mut().read_to_string().unwrap();
    Reply {
        status,
        headers,
        body,
    }
}

fn get(url: &str, path: &str, cookie: Option<&str>) -> Reply {
    let mut req = agent().get(format!("{url}{path}"));
    if let Some(c) = cookie {
        req = req.header("Cookie", c);
    }
    reply(req.call().unwrap())
}

fn get_with(url: &str, path: &str, header: (&str, &str)) -> Reply {
    reply(
        agent()
            .get(format!("{url}{path}"))
            .header(header.0, header.1)
            .call()
            .unwrap(),
    )
}

fn post_form(url: &str, path: &str, cookie: Option<&str>, form: &[(&str, &str)]) -> Reply {
    let mut req = agent().post(format!("{url}{path}"));
    if let Some(c) = cookie {
        req = req.header("Cookie", c);
    }
    reply(req.send_form(form.iter().copied()).unwrap())
}

/// Logs in as the operator of the group of device token `token` (made
/// at the first call); returns the `name=value` pair of the cookie.
fn login(server: &Server, token: &str) -> String {
    server.op(token);
    let name = format!("{}-op", common::group_of(token));
    let r = post_form(
        &server.url,
        "/login",
        None,
        &[("name", &name), ("password", OPERATOR_PASSWORD)],
    );
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.header("location"), Some("/devices"));
    let cookie = r.header("set-cookie").expect("login sets a cookie");
    cookie.split(';').next().unwrap().trim().to_string()
}

/// The value of `<input type="hidden" name="csrf" value="...">`.
fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a CSRF field") + 19;
    page[at..at + page[at..].find('"').unwrap()].to_string()
}

#[test]
fn login_sets_a_strict_cookie_and_pages_need_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let url = &server.url;

    // Not logged in: every page sends the browser to the login form.
    for page in [
        "/",
        "/devices",
        "/runs",
        "/diagnosis",
        "/directives",
        "/peers",
    ] {
        let r = get(url, page, None);
        assert_eq!(r.status, 303, "{page}");
        assert_eq!(r.header("location"), Some("/login"), "{page}");
    }
    let form = get(url, "/login", None);
    assert_eq!(form.status, 200);
    assert!(form.body.contains("type=\"password\""));

    server.op(TOKEN);
    let bad = post_form(
        url,
        "/login",
        None,
        &[("name", "phones-op"), ("password", "not-the-password")],
    );
    assert_eq!(bad.status, 401);
    assert!(bad.header("set-cookie").is_none());
    assert!(bad.body.contains("wrong password"));

    let r = post_form(
        url,
        "/login",
        None,
        &[("name", "phones-op"), ("password", OPERATOR_PASSWORD)],
    );
    let set_cookie = r.header("set-cookie").unwrap();
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(flag), "{set_cookie}");
    }
    // Plain HTTP: not Secure (the browser would drop it).
    assert!(!set_cookie.contains("Secure"), "{set_cookie}");
    let cookie = login(&server, TOKEN);
    let devices = get(url, "/devices", Some(&cookie));
    assert_eq!(devices.status, 200);
    assert!(devices
        .body
        .contains("<strong id=\"group\">phones</strong>"));

    // The strict headers, on pages and on the login form alike.
    for r in [&devices, &form] {
        let csp = r.header("content-security-policy").unwrap();
        assert!(csp.starts_with("default-src 'self'"), "{csp}");
        assert!(csp.contains("script-src 'none'"), "{csp}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        assert!(!r.body.contains("<script"));
        assert!(!r.body.contains("http://") && !r.body.contains("https://"));
    }

    // Logging out needs the CSRF token, then clears the cookie.
    let refused = post_form(url, "/logout", Some(&cookie), &[("csrf", "00")]);
    assert_eq!(refused.status, 403);
    let out = post_form(
        url,
        "/logout",
        Some(&cookie),
        &[("csrf", &csrf_of(&devices.body))],
    );
    assert_eq!(out.status, 303);
    assert!(out.header("set-cookie").unwrap().contains("Max-Age=0"));
    // Revoked on the server: the old cookie, replayed, opens nothing.
    let replayed = get(url, "/devices", Some(&cookie));
    assert_eq!(replayed.status, 303);
    assert_eq!(replayed.header("location"), Some("/login"));
    let (status, _) = common::get_with_cookie(url, "/v1/runs", &cookie);
    assert_eq!(status, 401);
}

/// Issue 36, item 7: a device's upload token ships in every app; it
/// must not open the web UI, whatever field it is typed in.
#[test]
fn a_device_token_does_not_log_in() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    for form in [
        &[("token", TOKEN)][..],
        &[("name", "phones"), ("password", TOKEN)][..],
        &[("name", TOKEN), ("password", TOKEN)][..],
    ] {
        let r = post_form(&server.url, "/login", None, form);
        assert!(r.status == 401 || r.status == 403, "{form:?}: {}", r.status);
        assert!(r.header("set-cookie").is_none(), "{form:?}");
    }
    // Nor does it as a cookie in today's main's form (hex of the token).
    let cookie = format!("edge_session={}", hex_of(TOKEN));
    assert_eq!(get(&server.url, "/devices", Some(&cookie)).status, 303);
}

fn hex_of(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Issue 36, item 8: login CSRF. A cross-origin POST to /login must not
/// set a cookie, even with the right password.
#[test]
fn a_cross_origin_login_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    server.op(TOKEN);
    let host = server.url.trim_start_matches("http://").to_string();
    let form = [("name", "phones-op"), ("password", OPERATOR_PASSWORD)];
    let post = |header: (&str, &str)| {
        reply(
            agent()
                .post(format!("{}/login", server.url))
                .header(header.0, header.1)
                .send_form(form.iter().copied())
                .unwrap(),
        )
    };
    for bad in [
        ("Origin", "https://evil.example"),
        ("Origin", "null"),
        ("Referer", "https://evil.example/login"),
    ] {
        let r = post(bad);
        assert_eq!(r.status, 403, "{bad:?}");
        assert!(r.header("set-cookie").is_none(), "{bad:?}");
    }
    let ok = post(("Origin", &format!("http://{host}")));
    assert_eq!(ok.status, 303, "{}", ok.body);
    assert!(ok.header("set-cookie").is_some());
}

/// Issue 36, item 8: failed logins lock the name and the address out;
/// the guess after the last allowed one is refused even with the right
/// password, and the operator gets in again once the lock-out ends.
#[test]
fn failed_logins_lock_out_then_let_in_again() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &["--login-max-failures", "3", "--login-lockout-ms", "1500"],
    );
    server.op(TOKEN);
    let try_login = |password: &str| {
        post_form(
            &server.url,
            "/login",
            None,
            &[("name", "phones-op"), ("password", password)],
        )
    };
    for _ in 0..3 {
        assert_eq!(try_login("a wrong guess").status, 401);
    }
    let refused = try_login(OPERATOR_PASSWORD);
    assert_eq!(refused.status, 429, "{}", refused.body);
    assert!(refused.header("set-cookie").is_none());
    let wait: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=2).contains(&wait), "{wait}");
    // Once the lock-out ends, the right password lets in again.
    let started = std::time::Instant::now();
    loop {
        let r = try_login(OPERATOR_PASSWORD);
        if r.status == 303 {
            assert!(r.header("set-cookie").is_some());
            break;
        }
        assert_eq!(r.status, 429, "{}", r.body);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "still locked out"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

#[test]
fn no_page_shows_another_groups_data() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let url = &server.url;
    let up = upload_demo(url);
    let phones = login(&server, TOKEN);
    let laptops = login(&server, OTHER_TOKEN);

    let pages = [
        "/devices".to_string(),
        "/runs".into(),
        "/runs?program=wget&limit=1000".into(),
        format!("/runs/{}", up.windowed),
        "/diagnosis?program=wget".into(),
        "/directives".into(),
        "/peers".into(),
        "/reports".into(),
    ];
    for page in &pages {
        let r = get(url, page, Some(&phones));
        assert_eq!(r.status, 200, "{page}: {}", r.body);
        for id in up.laptops_runs.iter().chain([&up.laptops_device]) {
            assert!(!r.body.contains(&id[..12]), "{page} shows laptops' {id}");
        }
    }
    // Phones' own runs do show.
    let runs = get(url, "/runs?limit=1000", Some(&phones)).body;
    assert!(runs.contains(&up.good_run) && runs.contains(&up.bad_run));
    // The diagnosis counts phones' runs only.
    let d = get(url, "/diagnosis?program=wget", Some(&phones)).body;
    assert!(
        d.contains(&format!("<strong id=\"run-count\">{}</strong>", GOOD + BAD)),
        "{d}"
    );
    // Another group's run is "not found", not shown; asking for it by
    // device filter finds nothing.
    for id in &up.laptops_runs {
        let r = get(url, &format!("/runs/{id}"), Some(&phones));
        assert_eq!(r.status, 404);
        assert_eq!(get(url, &format!("/runs/{id}"), Some(&laptops)).status, 200);
    }
    let r = get(
        url,
        &format!("/runs?device={}", up.laptops_device),
        Some(&phones),
    );
    assert!(r.body.contains("No runs match"), "{}", r.body);
    let r = get(url, "/runs?program=wget", Some(&laptops));
    assert!(!r.body.contains(&up.good_run[..12]));
}

/// Runs observed in-process (libc calls) among the kernel-observed demo
/// runs: the run page says how its calls were seen, and the diagnosis
/// leaves them out (fewer than the others), counts them and says why,
/// with the demo's classes unchanged.
#[test]
fn in_process_runs_are_shown_so_and_left_out_of_the_diagnosis() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let url = &server.url;
    let up = upload_demo(url);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let in_process: Vec<agent_core::Summary> = (0..3u64)
        .map(|i| {
            let mut s = fixtures::sample::demo_run(
                3000 + i,
                true,
                DeviceId([0x1b; 16]),
                now - 600_000_000_000 + i,
            );
            s.coverage = agent_core::Coverage::in_process_from_start();
            s
        })
        .collect();
    upload(url, TOKEN, &in_process);
    let cookie = login(&server, TOKEN);

    let run = get(url, &format!("/runs/{}", in_process[0].id), Some(&cookie)).body;
    assert!(run.contains("calls seen: in-process (libc calls)"), "{run}");
    let run = get(url, &format!("/runs/{}", up.good_run), Some(&cookie)).body;
    assert!(run.contains("calls seen: kernel (every syscall)"), "{run}");

    let d = get(url, "/diagnosis?program=wget&since=1d", Some(&cookie)).body;
    assert!(
        d.contains(&format!(
            "id=\"class-good\"><strong>good</strong> <span class=\"count\">{GOOD}</span>"
        )),
        "{d}"
    );
    assert!(
        d.contains(&format!(
            "id=\"class-bad\"><strong>bad</strong> <span class=\"count\">{BAD}</span>"
        )),
        "{d}"
    );
    assert!(
        d.contains("id=\"left-out\">Left out: 3 run(s) observed in-process (libc calls)"),
        "{d}"
    );
}

#[test]
fn pages_show_the_runs_windows_and_diagnosis() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let url = &server.url;
    let up = upload_demo(url);
    let cookie = login(&server, TOKEN);

    let devices = get(url, "/devices", Some(&cookie)).body;
    // Six demo devices and the windowed run's.
    assert_eq!(devices.matches("class=\"device\"").count(), 7, "{devices}");

    let run = get(url, &format!("/runs/{}", up.windowed), Some(&cookie)).body;
    // The `edge-agent show` table (escaped) and the windows' two plots.
    assert!(run.contains("<pre id=\"show-table\">run "), "{run}");
    assert!(run.contains("window 1"), "{run}");
    assert_eq!(run.matches("<svg").count(), 2);
    assert_eq!(run.matches("<polyline").count(), 3 + 2);
    assert!(run.contains(&format!("({WINDOWS} of 1000 ms)")));

    let d = get(url, "/diagnosis?program=wget&since=1d", Some(&cookie)).body;
    assert!(
        d.contains(&format!(
            "id=\"class-good\"><strong>good</strong> <span class=\"count\">{GOOD}</span>"
        )),
        "{d}"
    );
    assert!(
        d.contains(&format!(
            "id=\"class-bad\"><strong>bad</strong> <span class=\"count\">{BAD}</span>"
        )),
        "{d}"
    );
    assert!(d.contains("rule-text\">if num_read &lt;"), "{d}");
    assert!(d.contains("accuracy <span class=\"accuracy\">1.000</span>"));
    // The duration plot and at least one plot per rule.
    let rules = d.matches("class=\"rule\"").count();
    assert!(rules >= 1);
    assert!(d.matches("<svg").count() > rules);
    // A time range without runs says so.
    let none = get(url, "/diagnosis?program=wget&until=2d", Some(&cookie)).body;
    assert!(none.contains("id=\"diagnosis-error\""), "{none}");
    // A bad time is named.
    let bad = get(
        url,
        "/diagnosis?program=wget&since=yesterday",
        Some(&cookie),
    )
    .body;
    assert!(bad.contains("since: time"), "{bad}");
}

#[test]
fn directives_change_only_with_confirmation_and_the_csrf_token() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let url = &server.url;
    let cookie = login(&server, TOKEN);
    let page = get(url, "/directives", Some(&cookie)).body;
    let csrf = csrf_of(&page);
    let form = |csrf: &str, action: &str| {
        post_form(
            url,
            "/directives",
            Some(&cookie),
            &[
                ("csrf", csrf),
                ("action", action),
                ("match_text", "wget"),
                ("only", "read,write"),
                ("window", "22:00-06:00"),
                ("programs", "md5sum,curl"),
            ],
        )
    };
    // Without the token, or with another session's: refused.
    assert_eq!(form("", "apply").status, 403);
    let other = login(&server, OTHER_TOKEN);
    let other_csrf = csrf_of(&get(url, "/directives", Some(&other)).body);
    assert_eq!(form(&other_csrf, "apply").status, 403);
    let (_, json) = common::get(url, "/v1/directives", Some(TOKEN));
    assert_eq!(json["match"], serde_json::Value::Null);

    // The first submit only shows the change.
    let preview = form(&csrf, "preview");
    assert_eq!(preview.status, 200);
    assert!(preview.body.contains("id=\"confirm\""));
    // The review shows the programs and carries them to the confirmation.
    assert!(
        preview
            .body
            .contains("<tr><td>programs</td><td>—</td><td>md5sum,curl</td></tr>"),
        "{}",
        preview.body
    );
    assert!(preview
        .body
        .contains("<input type=\"hidden\" name=\"programs\" value=\"md5sum,curl\">"));
    let (_, json) = common::get(url, "/v1/directives", Some(TOKEN));
    assert_eq!(json["match"], serde_json::Value::Null);
    // Confirming stores it, for this group only.
    let applied = form(&csrf, "apply");
    assert_eq!(applied.status, 303);
    let (_, json) = common::get(url, "/v1/directives", Some(TOKEN));
    assert_eq!(json["match"], "wget");
    assert_eq!(json["only"], serde_json::json!(["read", "write"]));
    assert_eq!(json["window"], "22:00-06:00");
    assert_eq!(json["programs"], serde_json::json!(["md5sum", "curl"]));
    // The edit page and the devices page show them.
    let page = get(url, "/directives", Some(&cookie)).body;
    assert!(
        page.contains("name=\"programs\" id=\"programs\" value=\"md5sum,curl\""),
        "{page}"
    );
    let devices = get(url, "/devices", Some(&cookie)).body;
    assert!(
        devices.contains("shims for <code>md5sum,curl</code>"),
        "{devices}"
    );
    let (_, json) = common::get(url, "/v1/directives", Some(OTHER_TOKEN));
    assert_eq!(json["match"], serde_json::Value::Null);
    // A bad value is refused with the validator's words.
    let bad = post_form(
        url,
        "/directives",
        Some(&cookie),
        &[
            ("csrf", &csrf),
            ("action", "apply"),
            ("only", "read,notacall"),
        ],
    );
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("unknown syscall `notacall`"));
    let bad = post_form(
        url,
        "/directives",
        Some(&cookie),
        &[
            ("csrf", &csrf),
            ("action", "apply"),
            ("programs", "md5sum,/bin/sh"),
        ],
    );
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("is not a program name"), "{}", bad.body);
    let (_, json) = common::get(url, "/v1/directives", Some(TOKEN));
    assert_eq!(json["programs"], serde_json::json!(["md5sum", "curl"]));
}

#[test]
fn the_proxy_header_is_trusted_only_when_configured() {
    let dir = tempfile::tempdir().unwrap();
    let plain = start(dir.path(), &[]);
    let r = get_with(&plain.url, "/devices", ("X-Edge-Group", "phones"));
    assert_eq!(r.status, 303, "the header must be ignored by default");

    let dir = tempfile::tempdir().unwrap();
    let proxied = start(dir.path(), &["--web-proxy-header", "X-Edge-Group"]);
    let r = get_with(&proxied.url, "/devices", ("X-Edge-Group", "laptops"));
    assert_eq!(r.status, 200);
    assert!(r.body.contains("<strong id=\"group\">laptops</strong>"));
    // No logout button: the proxy owns the session.
    assert!(!r.body.contains("id=\"logout\""));
    let r = get_with(&proxied.url, "/devices", ("X-Edge-Group", "not a group"));
    assert_eq!(r.status, 303);
}

/// A stored report of the proactive loop for `group`, as the detector's
/// investigation writes it.
fn report(group: &str, program: &str, device: u8, headline: &str) -> Report {
    Report {
        id: 0,
        group: group.into(),
        program: program.into(),
        trigger: reports::TRIGGER_SLOW.into(),
        status: reports::STATUS_DIAGNOSED.into(),
        detected_unix_ns: 1_763_700_000_000_000_000,
        created_unix_ns: 1_763_700_060_000_000_000,
        cluster: "3 slow runs of 12".into(),
        devices: vec![ReportDevice {
            device: DeviceId([device; 16]),
            cluster: "slow".into(),
            directive: 7,
            runs: 2,
        }],
        headline: headline.into(),
        text: format!("Diagnosis of {program}: {headline} & more"),
        json: serde_json::Value::Null,
        // As `diagnose --html` writes it: a whole page, its style in the
        // head, plots as inline SVG.
        html: format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><style>body{{margin:2em}}</style>\
             </head><body><h1>Diagnosis</h1><p class=\"stored\">{headline}</p>\
             <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"></svg></body></html>"
        ),
    }
}

#[test]
fn reports_are_listed_and_shown_for_their_group_only() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let url = &server.url;
    let phones = login(&server, TOKEN);
    let laptops = login(&server, OTHER_TOKEN);
    let empty = get(url, "/reports", Some(&phones)).body;
    assert!(empty.contains("id=\"no-reports\""), "{empty}");

    let mut store = Location::parse(&dir.path().join("service.db"))
        .open_existing()
        .unwrap();
    let older = store
        .add_report(&report("phones", "wget", 0xa1, "if num_read < 120"))
        .unwrap();
    let newer = store
        .add_report(&report("phones", "curl", 0xa2, "if num_connect > 3"))
        .unwrap();
    let theirs = store
        .add_report(&report("laptops", "rsync", 0xb3, "if num_fsync > 9"))
        .unwrap();

    let list = get(url, "/reports", Some(&phones)).body;
    assert_eq!(list.matches("class=\"report\"").count(), 2, "{list}");
    let (at_newer, at_older) = (
        list.find(&format!("href=\"/reports/{newer}\"")).unwrap(),
        list.find(&format!("href=\"/reports/{older}\"")).unwrap(),
    );
    assert!(at_newer < at_older, "newest first: {list}");
    assert!(list.contains("if num_read &lt; 120"), "{list}");
    assert!(list.contains("class=\"trigger\">slow<"));
    assert!(list.contains("class=\"status\">diagnosed<"));
    assert!(list.contains("2025-11-21"), "the time: {list}");
    assert!(
        !list.contains("rsync") && !list.contains("num_fsync"),
        "{list}"
    );

    let one = get(url, &format!("/reports/{older}"), Some(&phones));
    assert_eq!(one.status, 200, "{}", one.body);
    // The text, escaped; the device traced; the stored HTML's body
    // embedded, without its <style> (the CSP would drop it).
    assert!(
        one.body
            .contains("<pre id=\"report-text\">Diagnosis of wget: if num_read &lt; 120 &amp; more"),
        "{}",
        one.body
    );
    assert!(one.body.contains(&"a1".repeat(16)));
    assert!(one
        .body
        .contains("<p class=\"stored\">if num_read < 120</p>"));
    assert!(one.body.contains("id=\"report-html\"><h1>Diagnosis</h1>"));
    assert_eq!(one.body.matches("<svg").count(), 1);
    assert!(!one.body.contains("<style") && !one.body.contains("<script"));

    // Another group's report is not found, as a missing one; its own group
    // sees it.
    for (path, cookie, status) in [
        (format!("/reports/{theirs}"), &phones, 404),
        (format!("/reports/{theirs}"), &laptops, 200),
        (format!("/reports/{older}"), &laptops, 404),
        ("/reports/99999".to_string(), &phones, 404),
        ("/reports/x".to_string(), &phones, 404),
    ] {
        assert_eq!(get(url, &path, Some(cookie)).status, status, "{path}");
    }
    let theirs_list = get(url, "/reports", Some(&laptops)).body;
    assert!(theirs_list.contains("rsync") && !theirs_list.contains("wget"));
}

/// A synthetic fleet of 4 devices tracing one program, one device's disk
/// three times slower in windows 50..80 (as tests/peers.rs).
fn fleet(group: &str, seed: u64, slow: usize) -> FleetSpec {
    FleetSpec {
        group: group.into(),
        seed,
        faults: vec![Fault::Disk {
            device: slow,
            from: 50,
            until: 80,
            factor: 3.0,
        }],
        ..FleetSpec::new(4, 80)
    }
}

fn post_fleet(url: &str, token: &str, spec: &FleetSpec) {
    let mut buf = vec![0u8; agent_core::MAX_ENCODED_LEN];
    let items: Vec<Vec<u8>> = spec
        .summaries()
        .map(|mut s| s.encode(&mut buf).unwrap().to_vec())
        .collect();
    for chunk in items.chunks(100) {
        let (status, _, json) = common::post(
            url,
            Some(token),
            Some(common::CONTENT_TYPE),
            &common::body(chunk.iter().map(Vec::as_slice)),
        );
        assert_eq!(status, 200, "{json}");
    }
}

#[test]
fn peers_page_names_the_slow_device_of_the_group_only() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let url = &server.url;
    let phones_fleet = fleet("phones", 1, 3);
    let laptops_fleet = fleet("laptops", 2, 1);
    post_fleet(url, TOKEN, &phones_fleet);
    post_fleet(url, OTHER_TOKEN, &laptops_fleet);
    let phones = login(&server, TOKEN);
    let laptops = login(&server, OTHER_TOKEN);
    let secs = |w: u64| (phones_fleet.window_start(w) / 1_000_000_000).to_string();
    // Training windows 0..40 (RFC 3339), diagnosis 40..80 (Unix seconds).
    let query = format!(
        "/peers?program=&train_since=2025-11-21T04:40:00Z&train_until={}&since={}&until={}&method=median",
        secs(40),
        secs(40),
        secs(80)
    );

    let form = get(url, "/peers", Some(&phones)).body;
    assert!(form.contains("name=\"train_since\"") && !form.contains("id=\"findings\""));

    let page = get(url, &query, Some(&phones));
    assert_eq!(page.status, 200, "{}", page.body);
    let p = &page.body;
    assert!(p.contains("<strong id=\"device-count\">4</strong>"), "{p}");
    let slow = common::hex(&phones_fleet.device_id(3));
    let rows: Vec<&str> = p.split("<tr class=\"finding\">").skip(1).collect();
    assert!(!rows.is_empty(), "{p}");
    assert!(
        rows.iter()
            .any(|r| r.contains("<td class=\"metric\">dread</td>")),
        "{p}"
    );
    for row in &rows {
        assert!(
            row.contains(&slow),
            "only the slow device is flagged: {row}"
        );
        assert!(row.contains("<td class=\"cause\">disk</td>"), "{row}");
        assert!(row.contains("<td class=\"method\">median</td>"), "{row}");
    }
    // The per-metric time series, as `peers --html` draws them: the slow
    // device in red.
    let plots = p.matches("<figure class=\"series\"><svg").count();
    assert!(plots >= 2, "{p}");
    assert!(p.contains("#d73027"), "{p}");
    // Not one of the laptops' devices, though they trace the same program
    // in the same windows.
    for d in 0..4 {
        let id = common::hex(&laptops_fleet.device_id(d));
        assert!(!p.contains(&id[..16]), "phones' page shows laptops' {id}");
    }
    // The laptops' page flags their own slow device.
    let theirs = get(url, &query, Some(&laptops)).body;
    assert!(
        theirs.contains(&common::hex(&laptops_fleet.device_id(1))),
        "{theirs}"
    );
    assert!(!theirs.contains(&slow));

    // Clear errors: a bad time, overlapping ranges, an unknown method,
    // too few devices.
    for (q, said) in [
        (
            "train_since=yesterday&train_until=1&since=2",
            "--train-since: time",
        ),
        (
            "train_since=1763700000&train_until=1763700060&since=1763700030",
            "overlaps",
        ),
        (
            "train_since=1763700000&train_until=1763700040&since=1763700040&method=kmeans",
            "unknown method",
        ),
    ] {
        let r = get(url, &format!("/peers?{q}"), Some(&phones)).body;
        assert!(r.contains("id=\"peers-error\""), "{q}: {r}");
        assert!(r.contains(said), "{q}: {r}");
    }
    let dir2 = tempfile::tempdir().unwrap();
    let small = start(dir2.path(), &[]);
    post_fleet(
        &small.url,
        TOKEN,
        &FleetSpec {
            group: "phones".into(),
            ..FleetSpec::new(2, 80)
        },
    );
    let cookie = login(&small, TOKEN);
    let r = get(&small.url, &query, Some(&cookie)).body;
    assert!(r.contains("fewer than 3 devices"), "{r}");
}

/// An open server (`--insecure-no-auth`, loopback): the form asks for a
/// group name, and its session is a stored one like an operator's (logout
/// revokes it).
#[test]
fn an_open_server_logs_in_by_group_name() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &["--insecure-no-auth"]);
    let url = &server.url;
    assert!(get(url, "/login", None).body.contains("Group"));
    let bad = post_form(url, "/login", None, &[("name", "not a group")]);
    assert_eq!(bad.status, 401);
    let r = post_form(url, "/login", None, &[("name", "laptops")]);
    assert_eq!(r.status, 303, "{}", r.body);
    let cookie = r
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let devices = get(url, "/devices", Some(&cookie));
    assert_eq!(devices.status, 200);
    assert!(devices
        .body
        .contains("<strong id=\"group\">laptops</strong>"));
    let out = post_form(
        url,
        "/logout",
        Some(&cookie),
        &[("csrf", &csrf_of(&devices.body))],
    );
    assert_eq!(out.status, 303);
    assert_eq!(get(url, "/devices", Some(&cookie)).status, 303);
}

/// The value of one series of `/metrics` (`name{labels}`), 0 if absent.
fn metric(url: &str, series: &str) -> f64 {
    let text = get(url, "/metrics", None).body;
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Waits (polling, at most two minutes) until `series` passes `ok`.
fn wait_metric_until(url: &str, series: &str, ok: impl Fn(f64) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let now = metric(url, series);
        if ok(now) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{series} is still {now}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Waits until `series` is `value`.
fn wait_metric(url: &str, series: &str, value: f64) {
    wait_metric_until(url, series, |v| v == value);
}

const DIAGNOSIS_READ: &str = "edge_service_web_runs_read_total{page=\"diagnosis\"}";
const PEERS_READ: &str = "edge_service_web_runs_read_total{page=\"peers\"}";
const PEERS_CHUNKS: &str = "edge_service_web_chunks_read_total{page=\"peers\"}";
const RUNNING: &str = "edge_service_web_analyses_running";

#[test]
fn one_analysis_reads_at_most_the_limits_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &["--web-max-runs", "20", "--web-max-windows", "100"],
    );
    let url = &server.url;
    upload_demo(url);
    let cookie = login(&server, TOKEN);

    // 36 demo runs match; the newest 20 are diagnosed. The 12 windows are
    // left out of a diagnosis without --merge-windows, so they neither
    // count as runs nor take the limit's places.
    let total = GOOD + BAD;
    let d = get(url, "/diagnosis?program=wget&since=1d", Some(&cookie)).body;
    assert!(
        d.contains(&format!(
            "id=\"run-limit\">diagnosed the newest 20 of {total} runs (limit 20"
        )),
        "{d}"
    );
    assert!(d.contains("<strong id=\"run-count\">20</strong>"), "{d}");
    assert_eq!(metric(url, DIAGNOSIS_READ), 20.0, "runs read by one page");

    // Peers: more windows than the limit are refused by name, having read
    // no more than the limit.
    let spec = fleet("phones", 1, 3);
    post_fleet(url, TOKEN, &spec);
    let secs = |w: u64| (spec.window_start(w) / 1_000_000_000).to_string();
    let query = format!(
        "/peers?train_since={}&train_until={}&since={}&until={}",
        secs(0),
        secs(40),
        secs(40),
        secs(80)
    );
    let p = get(url, &query, Some(&cookie)).body;
    assert!(
        p.contains("more than 100 window summaries in the ranges")
            && p.contains("--web-max-windows"),
        "{p}"
    );
    assert!(metric(url, PEERS_READ) <= 100.0);
    // A span of decades (the six million queries) is refused
    // before any query.
    let chunks = metric(url, PEERS_CHUNKS);
    let p = get(
        url,
        "/peers?train_since=0&train_until=60&since=60",
        Some(&cookie),
    )
    .body;
    assert!(
        p.contains("the web UI reads at most 7d (serve --web-max-span)"),
        "{p}"
    );
    assert_eq!(metric(url, PEERS_CHUNKS), chunks);
}

/// Sends a logged-in GET on a raw connection and leaves the answer
/// unread: the connection is the client, closed when dropped.
fn start_request(url: &str, path: &str, cookie: &str) -> std::net::TcpStream {
    use std::io::Write;
    let addr = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nCookie: {cookie}\r\n\r\n"
    )
    .unwrap();
    stream
}

#[test]
fn a_busy_group_is_told_to_retry_and_a_gone_clients_analysis_stops() {
    let dir = tempfile::tempdir().unwrap();
    // No span limit to speak of: one query per 5 minutes since 1970 is
    // millions of queries, an analysis that runs for minutes.
    let server = start(dir.path(), &["--web-max-span", "100000d"]);
    let url = &server.url;
    let cookie = login(&server, TOKEN);
    let long = "/peers?train_since=0&train_until=60&since=60";
    let client = start_request(url, long, &cookie);
    wait_metric(url, RUNNING, 1.0);

    // The group runs one already (--web-analyses-per-group 1).
    let busy = get(url, long, Some(&cookie));
    assert_eq!(busy.status, 503, "{}", busy.body);
    assert_eq!(busy.header("retry-after"), Some("10"));
    assert!(busy.body.contains("busy"), "{}", busy.body);
    assert_eq!(metric(url, "edge_service_web_analyses_refused_total"), 1.0);

    // The client goes away: the analysis stops at its next chunk.
    wait_metric_until(url, PEERS_CHUNKS, |n| n >= 1.0);
    drop(client);
    wait_metric(url, "edge_service_web_analyses_cancelled_total", 1.0);
    wait_metric(url, RUNNING, 0.0);
    let stopped = metric(url, PEERS_CHUNKS);
    assert_eq!(
        metric(url, PEERS_CHUNKS),
        stopped,
        "no query after the stop"
    );
    assert!(stopped < 6_000_000.0, "stopped early: {stopped} queries");

    // The group may analyse again.
    let r = get(
        url,
        "/peers?train_since=0&train_until=60&since=60&until=120",
        Some(&cookie),
    );
    assert_eq!(r.status, 200, "{}", r.body);
}

/// An incident of the live peer analysis as `online` stores it: a median
/// finding's evidence holds the metric's series in the device's peer set
/// (`device` second of three, flagged in windows 101..=103 of 1 s).
fn incident(group: &str, program: &str, device: DeviceId, t0: u64, closed: bool) -> IncidentRow {
    let s = 1_000_000_000u64;
    let others = [DeviceId([0x51; 16]), DeviceId([0x52; 16])];
    IncidentRow {
        id: 0,
        group: group.into(),
        program: program.into(),
        device,
        cause: IncidentCause::Disk,
        metric: "dread".into(),
        deviation: 3.25,
        first_window_unix_ns: t0 + 100 * s,
        last_window_unix_ns: t0 + 110 * s,
        opened_unix_ns: t0 + 115 * s,
        closed_unix_ns: closed.then_some(t0 + 140 * s),
        evidence: serde_json::json!({
            "method": "median",
            "evidence": "dread 3.1x the peers' median <b>",
            "score": 3.25,
            "flagged_windows_unix_ns": [t0 + 101 * s, t0 + 102 * s, t0 + 103 * s],
            "window_ns": s,
            "series": {
                "program": program,
                "metric": "dread",
                "devices": [others[0].to_string(), device.to_string(), others[1].to_string()],
                "windows_unix_ns": (99..105).map(|w| t0 + w * s).collect::<Vec<_>>(),
                "values_ns": [
                    [1e6, 1e6, 1e6, 1e6, 1e6, 1e6],
                    [1e6, 1e6, 3e6, 3e6, 3e6, 1e6],
                    [1e6, 1e6, 1e6, null, 1e6, 1e6],
                ],
                "median_ns": [1e6, 1e6, 1e6, 1e6, 1e6, 1e6],
                "thresholds_ns": [5e5, 5e5, 5e5],
            },
        }),
    }
}

/// The value of the attribute that follows `before`, unescaped as a
/// browser reads it (minijinja escapes `/` and `&`).
fn attribute(html: &str, before: &str) -> String {
    let at = html
        .find(before)
        .unwrap_or_else(|| panic!("no {before}: {html}"))
        + before.len();
    html[at..at + html[at..].find('"').unwrap()]
        .replace("&#x2f;", "/")
        .replace("&amp;", "&")
}

/// The Incidents pages (issue 35): the live analysis' incidents stored
/// through the store API, open ones listed before closed ones, newest
/// first, closed ones a page at a time; a program name from a device
/// escaped; one incident with its evidence plot and a link to the
/// device's windows around it (followed: exactly those windows); another
/// group's, a missing and a malformed id; login needed, an upload token
/// opening nothing.
#[test]
fn incidents_are_listed_open_first_and_shown_with_their_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let url = &server.url;
    let phones = login(&server, TOKEN);
    let laptops = login(&server, OTHER_TOKEN);
    let empty = get(url, "/incidents", Some(&phones));
    assert_eq!(empty.status, 200, "{}", empty.body);
    assert!(empty.body.contains("id=\"no-open\"") && empty.body.contains("id=\"no-closed\""));
    assert!(empty
        .body
        .contains("<a href=\"/incidents\" class=\"active\">Incidents</a>"));

    let t0 = 1_763_700_000_000_000_000u64; // 2025-11-21T04:40:00Z
    let device = DeviceId([0xd1; 16]);
    let hostile = "<script>alert(1)</script>&\"x";
    let mut store = Location::parse(&dir.path().join("service.db"))
        .open_existing()
        .unwrap();
    let open_old = store
        .add_incident(&incident("phones", "glusterfsd", device, t0, false))
        .unwrap();
    let closed = store
        .add_incident(&incident("phones", hostile, device, t0, true))
        .unwrap();
    let open_new = store
        .add_incident(&IncidentRow {
            cause: IncidentCause::Errno {
                name: "ENOSPC".into(),
            },
            metric: "ENOSPC".into(),
            evidence: serde_json::json!({"method": "errno", "evidence": "ENOSPC on 40 of 41 writes"}),
            ..incident("phones", "glusterfsd", DeviceId([0xd2; 16]), t0, false)
        })
        .unwrap();
    let theirs = store
        .add_incident(&incident(
            "laptops",
            "rsyncd",
            DeviceId([0xe1; 16]),
            t0,
            false,
        ))
        .unwrap();

    let list = get(url, "/incidents", Some(&phones));
    assert_eq!(list.status, 200, "{}", list.body);
    let l = &list.body;
    assert_eq!(l.matches("class=\"incident\"").count(), 3, "{l}");
    let at = |id: i64| {
        l.find(&format!("href=\"/incidents/{id}\""))
            .unwrap_or_else(|| panic!("no incident {id}: {l}"))
    };
    assert!(
        at(open_new) < at(open_old) && at(open_old) < at(closed),
        "{l}"
    );
    let (open_table, closed_table) = l.split_at(l.find("id=\"closed-incidents\"").unwrap());
    assert!(open_table.contains("id=\"open-incidents\""));
    assert!(open_table.contains("class=\"cause\">errno ENOSPC<"), "{l}");
    assert!(
        closed_table.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;&amp;&quot;x"),
        "{l}"
    );
    assert!(
        closed_table.contains("2025-11-21T04:42:20"),
        "the close time: {l}"
    );
    assert!(!l.contains("<script") && !l.contains("rsyncd"), "{l}");
    assert!(!l.contains(&format!("/incidents/{theirs}\"")));

    // The median incident: its facts, the series drawn (this device in
    // red, its 3 flagged windows shaded), the link to its windows.
    let one = get(url, &format!("/incidents/{closed}"), Some(&phones));
    assert_eq!(one.status, 200, "{}", one.body);
    let p = &one.body;
    assert!(
        p.contains(&device.to_string()) && p.contains("class=\"cause\">disk<"),
        "{p}"
    );
    assert!(
        p.contains("dread 3.1x the peers&#x27; median &lt;b&gt;")
            || p.contains("dread 3.1x the peers' median &lt;b&gt;"),
        "{p}"
    );
    assert!(
        !p.contains("<script") && p.contains("&lt;script&gt;"),
        "{p}"
    );
    let plot = &p[p.find("id=\"evidence-plot\"").expect("the plot")..];
    let svg = &plot[plot.find("<svg").unwrap()..plot.find("</svg>").unwrap()];
    assert_eq!(svg.matches("<rect").count(), 3, "{svg}");
    assert!(svg.contains("stroke=\"#d73027\""), "{svg}");
    let href = attribute(p, "id=\"windows-link\" href=\"");
    assert_eq!(
        href,
        format!(
            "/runs?program=%3Cscript%3Ealert%281%29%3C%2Fscript%3E%26%22x&device={device}\
             &since=2025-11-21T04%3A40%3A40.000000Z&until=2025-11-21T04%3A42%3A51.000000Z\
             &limit=1000"
        )
    );
    // The errno incident has no series: said so, no plot.
    let errno = get(url, &format!("/incidents/{open_new}"), Some(&phones)).body;
    assert!(
        errno.contains("id=\"no-plot\"") && !errno.contains("<svg"),
        "{errno}"
    );
    assert!(errno.contains("ENOSPC on 40 of 41 writes"));

    // Followed, the link lists the device's windows of the program from a
    // minute before the first window to a minute after the last one's end:
    // windows 41..=171 of 200 (1 s each from t0), not its other program's.
    let windows = fixtures::sample::windowed_run(5, "glusterfsd", device, t0, 200);
    let mut other = fixtures::sample::windowed_run(6, "nfsd", device, t0 + 100_000_000_000, 3);
    other.extend(windows);
    upload(url, TOKEN, &other);
    let runs_href = attribute(
        &get(url, &format!("/incidents/{open_old}"), Some(&phones)).body,
        "id=\"windows-link\" href=\"",
    );
    let runs = get(url, &runs_href, Some(&phones));
    assert_eq!(runs.status, 200, "{runs_href}: {}", runs.body);
    let r = &runs.body;
    assert_eq!(r.matches("class=\"run\"").count(), 131, "{runs_href}: {r}");
    // The first and last rows' starts (the form shows the range's ends).
    let row = |t: &str| r.contains(&format!("\">2025-11-21T{t}.000000Z</a>"));
    assert!(row("04:40:40") && row("04:42:50"), "{r}");
    assert!(!row("04:40:39") && !row("04:42:51"), "{r}");
    assert!(!r.contains("nfsd"), "{r}");

    // Another group's, a missing and a malformed id.
    for (path, cookie, status) in [
        (format!("/incidents/{theirs}"), &phones, 404),
        (format!("/incidents/{theirs}"), &laptops, 200),
        (format!("/incidents/{closed}"), &laptops, 404),
        ("/incidents/99999".to_string(), &phones, 404),
        ("/incidents/x1".to_string(), &phones, 400),
        ("/incidents/99999999999999999999".to_string(), &phones, 400),
        ("/incidents?before=x".to_string(), &phones, 400),
    ] {
        let r = get(url, &path, Some(cookie));
        assert_eq!(r.status, status, "{path}: {}", r.body);
    }
    let theirs_list = get(url, "/incidents", Some(&laptops)).body;
    assert!(theirs_list.contains("rsyncd") && !theirs_list.contains("glusterfsd"));

    // Closed incidents a page (50) at a time.
    for _ in 0..50 {
        store
            .add_incident(&incident("phones", "nginx", device, t0, true))
            .unwrap();
    }
    let first = get(url, "/incidents", Some(&phones)).body;
    let (_, closed_part) = first.split_at(first.find("id=\"closed-incidents\"").unwrap());
    assert_eq!(closed_part.matches("class=\"incident\"").count(), 50);
    assert!(!closed_part.contains(&format!("href=\"/incidents/{closed}\"")));
    let older = attribute(&first, "id=\"older\" href=\"");
    let second = get(url, &older, Some(&phones)).body;
    assert_eq!(
        second.matches("class=\"incident\"").count(),
        2 + 1,
        "{second}"
    );
    assert!(second.contains(&format!("href=\"/incidents/{closed}\"")));
    assert!(!second.contains("id=\"older\""));

    // No session, or an upload token in any form: the login form.
    for header in [
        None,
        Some(("Authorization", format!("Bearer {TOKEN}"))),
        Some(("Cookie", format!("edge_session={TOKEN}"))),
        Some(("Cookie", format!("edge_session={}", hex_of(TOKEN)))),
    ] {
        for path in ["/incidents".to_string(), format!("/incidents/{closed}")] {
            let r = match &header {
                None => get(url, &path, None),
                Some((name, value)) => get_with(url, &path, (name, value)),
            };
            assert_eq!(r.status, 303, "{path} {header:?}");
            assert_eq!(r.header("location"), Some("/login"));
        }
    }
}
