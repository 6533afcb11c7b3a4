//! The HTTP API against a real `edge-service serve` process: the ingest
//! protocol's success and error paths, idempotency, queries, directives.

mod common;

use agent_core::{DeviceId, StreamId, Summary};
use common::*;
use fixtures::sample;

fn sample_items(first_seed: u64, n: u64, group: Option<&str>) -> Vec<Vec<u8>> {
    (first_seed..first_seed + n)
        .map(|seed| sample::encoded(seed, 400, group))
        .collect()
}

#[test]
fn ingest_is_idempotent_and_queryable() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let items = sample_items(1, 3, None);
    let ids: Vec<String> = items.iter().map(|i| id_of(i)).collect();

    let (status, json) = post_items(&server.url, &items);
    assert_eq!(status, 200, "{json}");
    assert_eq!(accepted(&json), ids);
    assert_eq!(json["rejected"], serde_json::json!([]));

    // A repeat (the uploader retrying after a lost answer) is acknowledged
    // again but not stored twice; a batch repeating an id lists it once.
    let mut again = items.clone();
    again.push(items[0].clone());
    let (status, json) = post_items(&server.url, &again);
    assert_eq!(status, 200);
    assert_eq!(accepted(&json), ids);
    assert_eq!(stored_ids(&server.db).len(), 3);

    // Empty body: zero items.
    let (status, json) = post_items(&server.url, &[]);
    assert_eq!(
        (status, json),
        (200, serde_json::json!({"accepted": [], "rejected": []}))
    );

    // The list and one run.
    let (status, runs) = get(&server.url, "/v1/runs", Some(&server.op(TOKEN)));
    assert_eq!(status, 200);
    let listed: Vec<&str> = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed.len(), 3);
    for id in &ids {
        assert!(listed.contains(&id.as_str()));
    }
    let first = Summary::decode(&items[0]).unwrap();
    let program = first.facts.program.to_string();
    let (_, by_program) = get(
        &server.url,
        &format!("/v1/runs?program={program}"),
        Some(&server.op(TOKEN)),
    );
    assert!(by_program["runs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["program"] == program.as_str()));
    assert!(!by_program["runs"].as_array().unwrap().is_empty());
    let start = first.run.start_unix_ns;
    let (_, window) = get(
        &server.url,
        &format!("/v1/runs?since={start}&until={}", start + 1),
        Some(&server.op(TOKEN)),
    );
    assert_eq!(window["runs"].as_array().unwrap().len(), 1);
    assert_eq!(window["runs"][0]["id"], ids[0].as_str());
    assert_eq!(window["runs"][0]["group"], "phones");

    let (status, run) = get(
        &server.url,
        &format!("/v1/runs/{}", ids[0]),
        Some(&server.op(TOKEN)),
    );
    assert_eq!(status, 200);
    let mut expected = summary_view::to_json(&first);
    expected["group"] = "phones".into();
    // Compared after the same text round trip (serde_json's float parsing).
    let expected: serde_json::Value = serde_json::from_str(&expected.to_string()).unwrap();
    assert_eq!(run, expected);

    // Another group's token sees neither the run nor the list.
    let (status, _) = get(
        &server.url,
        &format!("/v1/runs/{}", ids[0]),
        Some(&server.op(OTHER_TOKEN)),
    );
    assert_eq!(status, 404);
    let (_, theirs) = get(&server.url, "/v1/runs", Some(&server.op(OTHER_TOKEN)));
    assert_eq!(theirs["runs"], serde_json::json!([]));
    let (status, _) = get(
        &server.url,
        "/v1/runs?group=phones",
        Some(&server.op(OTHER_TOKEN)),
    );
    assert_eq!(status, 403);
    let (status, _) = get(&server.url, "/v1/runs/not-an-id", Some(&server.op(TOKEN)));
    assert_eq!(status, 400);
    let (status, _) = get(
        &server.url,
        &format!("/v1/runs/{}", "0".repeat(32)),
        Some(&server.op(TOKEN)),
    );
    assert_eq!(status, 404);
    let (status, _) = get(
        &server.url,
        "/v1/runs?since=yesterday",
        Some(&server.op(TOKEN)),
    );
    assert_eq!(status, 400);
    let (status, _) = get(&server.url, "/v1/runs", None);
    assert_eq!(status, 401);

    let (status, health) = get(&server.url, "/healthz", None);
    assert_eq!(
        (status, health),
        (200, serde_json::Value::String("ok".into()))
    );
}

fn raw_request(url: &str, request: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    String::from_utf8_lossy(&response).into_owned()
}

#[test]
fn bad_items_are_rejected_with_the_decoders_reason_and_the_rest_stored() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let good = sample_items(10, 2, None);
    let mut truncated = good[0].clone();
    truncated.truncate(truncated.len() / 2);
    let mut trailing = sample::encoded(20, 300, None);
    trailing.push(0);
    let mut wrong_version = sample::encoded(21, 300, None);
    wrong_version[0] = (agent_core::FORMAT_VERSION + 1) as u8;
    let mut inconsistent = sample::summary(22, 300, None);
    inconsistent.run.events += 1;
    let mut buf = [0u8; 2048];
    let inconsistent = inconsistent.encode(&mut buf).unwrap().to_vec();
    let oversized = vec![1u8; 3000];
    let garbage = vec![1u8, 0xff, 0xff, 0xff];
    let items = vec![
        good[0].clone(),
        truncated.clone(),
        Vec::new(),
        trailing.clone(),
        wrong_version.clone(),
        inconsistent.clone(),
        oversized.clone(),
        garbage.clone(),
        good[1].clone(),
    ];
    let (status, json) = post_items(&server.url, &items);
    assert_eq!(status, 200, "{json}");
    assert_eq!(accepted(&json), vec![id_of(&good[0]), id_of(&good[1])]);
    let rejected = json["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 7);
    for (r, index) in rejected.iter().zip(1..) {
        assert_eq!(r["index"], index);
        let expected = Summary::decode(&items[index]).unwrap_err().to_string();
        assert_eq!(r["reason"], expected.as_str(), "item {index}");
    }
    // The id is reported when it can be read.
    assert_eq!(rejected[0]["id"], id_of(&good[0]).as_str());
    assert_eq!(rejected[1]["id"], serde_json::Value::Null);
    assert!(rejected[4]["reason"]
        .as_str()
        .unwrap()
        .starts_with("inconsistent summary"));
    assert_eq!(stored_ids(&server.db).len(), 2);

    let (_, metrics) = get(&server.url, "/metrics", None);
    let metrics = metrics.as_str().unwrap().to_string();
    assert!(
        metrics.contains("edge_service_summaries_accepted_total 2"),
        "{metrics}"
    );
    assert!(metrics.contains("edge_service_summaries_rejected_total{reason=\"truncated\"} 2"));
    assert!(metrics.contains("edge_service_summaries_rejected_total{reason=\"inconsistent\"} 1"));
    assert!(metrics
        .contains("edge_service_http_requests_total{route=\"/v1/summaries\",status=\"200\"} 1"));
    assert!(metrics.contains("edge_service_store_commit_seconds_count"));
}

#[test]
fn refused_requests_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let items = sample_items(30, 2, None);
    let body = common::body(items.iter().map(Vec::as_slice));

    // 401: no token, unknown token, not a Bearer header.
    let (status, _, json) = post(&server.url, None, Some(CONTENT_TYPE), &body);
    assert_eq!(status, 401);
    assert!(json["error"].as_str().unwrap().contains("missing"));
    let (status, _, json) = post(
        &server.url,
        Some("not-a-known-token-at-all"),
        Some(CONTENT_TYPE),
        &body,
    );
    assert_eq!(
        (status, json["error"].as_str().unwrap()),
        (401, "unknown token")
    );
    let resp = agent()
        .post(format!("{}/v1/summaries", server.url))
        .header("Authorization", format!("Basic {TOKEN}"))
        .header("Content-Type", CONTENT_TYPE)
        .send(&body[..])
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);

    // 415: wrong or missing content type.
    let (status, _, json) = post(&server.url, Some(TOKEN), Some("application/json"), &body);
    assert_eq!(status, 415);
    assert!(json["error"].as_str().unwrap().contains(CONTENT_TYPE));
    let (status, _, _) = post(&server.url, Some(TOKEN), None, &body);
    assert_eq!(status, 415);

    // 413: body over 1 MiB; more than 256 items.
    // (The server answers as soon as it sees the length, so the client
    // sends only the head: a client still writing the body would see the
    // connection closed under it.)
    let response = raw_request(
        &server.url,
        &format!(
            "POST /v1/summaries HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\n\r\n",
            agent_core::framing::MAX_BODY + 1
        ),
    );
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    assert!(response.contains("exceeds 1048576 bytes"), "{response}");
    let many: Vec<Vec<u8>> = (0..257).map(|_| items[0].clone()).collect();
    let (status, json) = post_items(&server.url, &many);
    assert_eq!(status, 413, "{json}");

    // 400: broken framing (the last length runs past the end).
    let mut broken = body.clone();
    broken.extend_from_slice(&[100, 1, 2]);
    let (status, _, json) = post(&server.url, Some(TOKEN), Some(CONTENT_TYPE), &broken);
    assert_eq!(status, 400);
    assert!(json["error"].as_str().unwrap().contains("item 2"), "{json}");

    // 403: one summary claims another group; the others are not stored either.
    let mut mixed = items.clone();
    mixed.push(sample::encoded(32, 300, Some("laptops")));
    let (status, json) = post_items(&server.url, &mixed);
    assert_eq!(status, 403);
    assert!(
        json["error"]
            .as_str()
            .unwrap()
            .contains("claims group `laptops`"),
        "{json}"
    );

    assert!(stored_ids(&server.db).is_empty());

    // A summary naming its own group is fine.
    let own = vec![sample::encoded(33, 300, Some("phones"))];
    let (status, json) = post_items(&server.url, &own);
    assert_eq!((status, accepted(&json)), (200, vec![id_of(&own[0])]));

    // The same id from another group is not acknowledged for it.
    let body = common::body([own[0].as_slice()]);
    let other = sample::encoded(33, 300, None);
    assert_eq!(id_of(&other), id_of(&own[0]));
    let (status, _, json) = post(
        &server.url,
        Some(OTHER_TOKEN),
        Some(CONTENT_TYPE),
        &common::body([other.as_slice()]),
    );
    assert_eq!(status, 200);
    assert_eq!(json["accepted"], serde_json::json!([]));
    assert_eq!(
        json["rejected"][0]["reason"],
        "summary id already stored for another group"
    );
    let _ = body;
    assert_eq!(stored_ids(&server.db).len(), 1);
}

#[test]
fn directives_set_by_the_operator_reach_the_group() {
    let dir = tempfile::tempdir().unwrap();
    // `serve` creates the database; `directive` only opens an existing one.
    let server = start(dir.path(), &[]);
    let db = server.db.clone();
    let run = |args: &[&str]| {
        std::process::Command::new(bin())
            .args(args)
            .env("EDGE_SERVICE_DB", &db)
            .output()
            .unwrap()
    };
    let out = run(&[
        "directive",
        "set",
        "--group",
        "phones",
        "--match",
        "curl",
        "--only",
        "read,write,connect",
        "--window",
        "22:00-06:00",
        "--programs",
        "md5sum,curl",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&[
        "directive",
        "set",
        "--group",
        "phones",
        "--only",
        "read,nosuchcall",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown syscall `nosuchcall`"));
    let out = run(&["directive", "show"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("\"match\":\"curl\""), "{shown}");
    assert!(
        shown.contains("\"programs\":[\"md5sum\",\"curl\"]"),
        "{shown}"
    );

    let (status, d) = get(&server.url, "/v1/directives", Some(TOKEN));
    assert_eq!(status, 200);
    assert_eq!(
        d,
        serde_json::json!({"group": "phones", "match": "curl", "only": ["read", "write", "connect"], "window": "22:00-06:00", "programs": ["md5sum", "curl"], "device_directives": []})
    );
    let (_, d) = get(&server.url, "/v1/directives", Some(OTHER_TOKEN));
    assert_eq!(
        d,
        serde_json::json!({"group": "laptops", "match": null, "only": null, "window": null, "programs": null, "device_directives": []})
    );
    let (status, _) = get(&server.url, "/v1/directives", None);
    assert_eq!(status, 401);

    // Per device: only that device sees it, in its group only.
    let device = "0A".repeat(16);
    let out = run(&[
        "directive",
        "device",
        "--group",
        "phones",
        "--device",
        &device,
        "--program",
        "wget",
        "--match",
        "example.org",
        "--runs",
        "3",
        "--expires",
        "1h",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = printed["id"].as_str().unwrap().to_string();
    let path = format!("/v1/directives?device={device}");
    let (_, d) = get(&server.url, &path, Some(TOKEN));
    let listed = d["device_directives"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{d}");
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["program"], "wget");
    assert_eq!(listed[0]["match"], "example.org");
    assert_eq!(listed[0]["runs"], 3);
    assert_eq!(d["match"], "curl", "the group's directive is still there");
    let other_device = format!("/v1/directives?device={}", "0b".repeat(16));
    let (_, d) = get(&server.url, &other_device, Some(TOKEN));
    assert_eq!(d["device_directives"], serde_json::json!([]));
    let (_, d) = get(&server.url, &path, Some(OTHER_TOKEN));
    assert_eq!(
        d["device_directives"],
        serde_json::json!([]),
        "another group's"
    );
    let (status, d) = get(&server.url, "/v1/directives?device=xyz", Some(TOKEN));
    assert_eq!(status, 400, "{d}");
    for (bad, says) in [
        (vec!["--device", "xyz", "--runs", "1"], "not 32 hex digits"),
        (vec!["--device", &device, "--runs", "0"], "--runs"),
        (
            vec!["--device", &device, "--runs", "1", "--expires", "0s"],
            "future",
        ),
    ] {
        let mut args = vec!["directive", "device", "--group", "phones"];
        args.extend(bad.iter().copied());
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{args:?}"
        );
    }
    let out = run(&["directive", "device-list", "--group", "phones"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.contains("\"received\":0") && text.contains("\"issuer\":\"operator\""),
        "{text}"
    );
    let out = run(&[
        "directive",
        "device-clear",
        "--group",
        "phones",
        "--device",
        &device,
    ]);
    assert!(out.status.success());
    let (_, d) = get(&server.url, &path, Some(TOKEN));
    assert_eq!(d["device_directives"], serde_json::json!([]), "cleared");

    // Changed while the server runs: the next fetch sees it.
    let out = run(&["directive", "clear", "--group", "phones"]);
    assert!(out.status.success());
    let (_, d) = get(&server.url, "/v1/directives", Some(TOKEN));
    assert_eq!(d["match"], serde_json::Value::Null);
}

#[test]
fn directive_refuses_a_missing_database_and_sets_no_device_could_use() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(bin())
            .args(args)
            .env_remove("EDGE_SERVICE_DB")
            .current_dir(dir.path())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // A mistyped --db names the path and creates nothing.
    let typo = dir.path().join("servcie.db");
    let typo_arg = typo.display().to_string();
    for cmd in [
        vec!["directive", "set", "--group", "phones", "--db", &typo_arg],
        vec!["directive", "show", "--db", &typo_arg],
        vec!["directive", "clear", "--group", "phones", "--db", &typo_arg],
        vec!["diagnose", "--db", &typo_arg],
    ] {
        let (code, err) = run(&cmd);
        assert_eq!(code, Some(2), "{cmd:?}: {err}");
        assert!(
            err.contains(&typo_arg) && err.contains("does not exist"),
            "{cmd:?}: {err}"
        );
        assert!(!typo.exists(), "{cmd:?} created {typo_arg}");
    }

    let server = start(dir.path(), &[]);
    let db = server.db.display().to_string();
    let set = |extra: &[&str]| {
        let mut args = vec!["directive", "set", "--db", &db];
        args.extend_from_slice(extra);
        run(&args)
    };
    // A group no token can name (the tokens file splits on whitespace).
    let (code, err) = set(&["--group", "al pha"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("`al pha`") && err.contains("without whitespace"),
        "{err}"
    );
    // Sets that would leave a device tracing nothing or a pseudo-syscall.
    for only in ["", " , ", "<other>", "read,<unknown>", "read,nosuchcall"] {
        let (code, err) = set(&["--group", "phones", "--only", only]);
        assert_eq!(code, Some(2), "--only {only:?}: {err}");
        assert!(
            err.contains("at least one syscall") || err.contains("unknown syscall"),
            "--only {only:?}: {err}"
        );
    }
    // Programs a device could not shim: paths, blanks, hidden names.
    for programs in ["", ",", "/bin/sh", "md5sum,bin/curl", "md5 sum", ".profile"] {
        let (code, err) = set(&["--group", "phones", "--programs", programs]);
        assert_eq!(code, Some(2), "--programs {programs:?}: {err}");
        assert!(
            err.contains("is not a program name") || err.contains("at least one program name"),
            "--programs {programs:?}: {err}"
        );
    }
    let (_, d) = get(&server.url, "/v1/directives", Some(TOKEN));
    assert_eq!(d["only"], serde_json::Value::Null, "{d}");
    assert_eq!(d["programs"], serde_json::Value::Null, "{d}");
    // Repeats are sent once.
    let (code, err) = set(&["--group", "phones", "--only", "read,write,read"]);
    assert_eq!(code, Some(0), "{err}");
    let (_, d) = get(&server.url, "/v1/directives", Some(TOKEN));
    assert_eq!(d["only"], serde_json::json!(["read", "write"]));
}

/// No message shows a database password: not in the URL's user info (one
/// holding a `/`), not as `?password=`, not in a key=value connection
/// string, not when the URL is refused, whichever command prints it.
#[test]
fn database_passwords_are_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "S3cret";
    // Nothing listens on port 1: every command fails, naming the database.
    let dbs = [
        format!("postgres://postgres:{secret}/PW@127.0.0.1:1/edge"),
        format!("postgres://postgres:{secret}@127.0.0.1:1/edge"),
        format!("postgres://postgres@127.0.0.1:1/edge?password={secret}"),
        format!("postgresql://postgres@127.0.0.1:1/edge?sslmode=require&password={secret}"),
        format!("postgres://postgres:{secret}@127.0.0.1:1/edge?sslmode=bogus"),
        format!("host=127.0.0.1 port=1 password={secret}"),
    ];
    for db in &dbs {
        // A key=value string is read as an SQLite path, which serve would
        // create: only the commands that need an existing store.
        let serve = db.starts_with("postgres");
        for args in [
            vec!["directive", "show", "--db", db],
            vec!["prune", "--older-than", "30d", "--db", db],
            vec!["diagnose", "--db", db],
            vec![
                "peers",
                "--db",
                db,
                "--group",
                "phones",
                "--train-since",
                "2h",
                "--train-until",
                "1h",
                "--since",
                "1h",
            ],
            vec![
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--insecure-no-auth",
                "--db",
                db,
            ],
        ] {
            if args[0] == "serve" && !serve {
                continue;
            }
            let out = std::process::Command::new(bin())
                .args(&args)
                .env_remove("EDGE_SERVICE_DB")
                .env_remove("PGPASSWORD")
                .current_dir(dir.path())
                .output()
                .unwrap();
            let shown = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(!out.status.success(), "{args:?}: {shown}");
            assert!(
                !shown.contains(secret),
                "{args:?} shows the password: {shown}"
            );
            assert!(shown.contains("***"), "{args:?}: {shown}");
        }
    }
    // `--help` names the variable that may hold the URL, not its value.
    for command in [&["directive", "show"][..], &["serve"], &["prune"]] {
        let out = std::process::Command::new(bin())
            .args(command)
            .arg("--help")
            .env("EDGE_SERVICE_DB", &dbs[1])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("EDGE_SERVICE_DB"), "{command:?}: {help}");
        assert!(!help.contains(secret), "{command:?} --help: {help}");
    }
}

#[test]
fn the_bearer_scheme_is_case_insensitive() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let body = common::body(sample_items(70, 1, None).iter().map(Vec::as_slice));
    for scheme in ["bearer", "BEARER", "Bearer", "bEaReR"] {
        let mut resp = agent()
            .post(format!("{}/v1/summaries", server.url))
            .header("Authorization", format!("{scheme} {TOKEN}"))
            .header("Content-Type", CONTENT_TYPE)
            .send(&body[..])
            .unwrap();
        let text = resp.body_mut().read_to_string().unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{scheme}: {text}");
        let (status, _) = get_with_auth(&server.url, &format!("{scheme} {TOKEN}"));
        assert_eq!(status, 200, "{scheme}");
    }
    // Still refused: another scheme, a scheme without a token.
    for value in ["Basic {TOKEN}", "Bearer", "Bearer ", "Bearer{TOKEN}"] {
        let value = value.replace("{TOKEN}", TOKEN);
        let (status, _) = get_with_auth(&server.url, &value);
        assert_eq!(status, 401, "{value:?}");
    }
}

fn get_with_auth(url: &str, authorization: &str) -> (u16, String) {
    let mut resp = agent()
        .get(format!("{url}/v1/directives"))
        .header("Authorization", authorization)
        .call()
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_to_string().unwrap())
}

#[test]
fn refuses_to_start_without_authentication_unless_asked_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    let out = std::process::Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no --tokens FILE"));
    let out = std::process::Command::new(bin())
        .args([
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--insecure-no-auth",
            "--db",
        ])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("only allowed on a loopback"));
    let bad_tokens = dir.path().join("bad-tokens");
    std::fs::write(&bad_tokens, "phones short\n").unwrap();
    let out = std::process::Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--tokens"])
        .arg(&bad_tokens)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad-tokens") && err.contains("line 1"),
        "{err}"
    );

    // Open mode: the group is the summary's `group` fact, else `default`.
    let server = start(dir.path(), &["--insecure-no-auth"]);
    let items = [
        sample::encoded(40, 200, Some("lab")),
        sample::encoded(41, 200, None),
    ];
    let body = common::body(items.iter().map(Vec::as_slice));
    let (status, _, json) = post(&server.url, None, Some(CONTENT_TYPE), &body);
    assert_eq!(status, 200);
    assert_eq!(accepted(&json).len(), 2);
    let (_, runs) = get(&server.url, "/v1/runs?group=lab", None);
    assert_eq!(runs["runs"][0]["id"], id_of(&items[0]).as_str());
    let (_, runs) = get(&server.url, "/v1/runs?group=default", None);
    assert_eq!(runs["runs"][0]["id"], id_of(&items[1]).as_str());
}

#[test]
fn a_locked_store_answers_503_with_retry_after_then_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &["--busy-timeout-ms", "100"]);
    let items = sample_items(50, 2, None);
    // Another process (an operator's sqlite3, say) holds the write lock.
    let conn = rusqlite::Connection::open(&server.db).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    let body = common::body(items.iter().map(Vec::as_slice));
    let (status, retry, json) = post(&server.url, Some(TOKEN), Some(CONTENT_TYPE), &body);
    assert_eq!(status, 503, "{json}");
    assert!(retry.unwrap().parse::<u32>().unwrap() > 0);
    assert!(json["error"].as_str().unwrap().contains("busy"), "{json}");
    conn.execute_batch("COMMIT").unwrap();
    let (status, json) = post_items(&server.url, &items);
    assert_eq!(status, 200);
    assert_eq!(accepted(&json).len(), 2);
}

#[test]
fn random_and_mutated_bodies_never_break_the_server() {
    use rand::{Rng, SeedableRng};
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let base = sample::encoded(60, 500, None);
    let mut stored = 0;
    for round in 0..150 {
        let (status, json) = if round % 3 == 0 {
            // Arbitrary bytes: whatever the framing makes of them.
            let len = rng.random_range(0..4000);
            let body: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            let (status, _, json) = post(&server.url, Some(TOKEN), Some(CONTENT_TYPE), &body);
            (status, json)
        } else {
            // Well framed, each item a valid summary with a few bytes changed.
            let items: Vec<Vec<u8>> = (0..rng.random_range(1..8))
                .map(|_| {
                    let mut item = base.clone();
                    for _ in 0..rng.random_range(1..4) {
                        let at = rng.random_range(0..item.len());
                        item[at] = rng.random();
                    }
                    item
                })
                .collect();
            let (status, json) = post_items(&server.url, &items);
            if status == 200 {
                let answered = json["accepted"].as_array().unwrap().len()
                    + json["rejected"].as_array().unwrap().len();
                assert!(answered >= 1 && answered <= items.len(), "{json}");
            }
            (status, json)
        };
        assert!(matches!(status, 200 | 400 | 403 | 413), "{status} {json}");
        if status == 200 {
            stored += json["accepted"].as_array().unwrap().len();
        }
    }
    let (status, _) = get(&server.url, "/healthz", None);
    assert_eq!(status, 200);
    // Whatever was acknowledged is stored and can be shown.
    assert!(stored_ids(&server.db).len() <= stored);
    for id in stored_ids(&server.db) {
        let (status, _) = get(
            &server.url,
            &format!("/v1/runs/{id}"),
            Some(&server.op(TOKEN)),
        );
        assert_eq!(status, 200);
    }
}

/// A summary of device `device` (all bytes the same), window `window` of
/// the stream `stream`, as a version 2 device sends it.
fn from_device(seed: u64, device: u8, stream: u8, window: u32) -> Vec<u8> {
    let mut s = sample::summary(seed, 300, None);
    s.origin = agent_core::Origin {
        device: DeviceId([device; 16]),
        stream: StreamId([stream; 16]),
        window_ns: if window == 0 { 0 } else { 10_000_000_000 },
    };
    s.run.window = window;
    if window > 0 {
        s.run.exit = agent_core::Exit::Running;
    }
    s.cpu = Some(agent_core::CpuTime {
        user_ns: seed * 1_000,
        system_ns: seed,
    });
    let mut buf = [0u8; agent_core::MAX_ENCODED_LEN];
    s.encode(&mut buf).unwrap().to_vec()
}

fn listed_ids(json: &serde_json::Value, list: &str, field: &str) -> Vec<String> {
    json[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} in {json}"))
        .iter()
        .map(|r| r[field].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn runs_filter_by_device_and_stream_and_devices_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let v1 = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../agent-core/tests/fixtures/v1-wget.bin"),
    )
    .unwrap();
    // Device d1: three windows of one stream, and a whole run; device d2: a
    // whole run. In one upload framed as the uploader frames it.
    let items = vec![
        from_device(101, 0xd1, 0x51, 1),
        from_device(102, 0xd1, 0x51, 2),
        from_device(103, 0xd1, 0x51, 3),
        from_device(104, 0xd1, 0x52, 0),
        from_device(105, 0xd2, 0x53, 0),
    ];
    let (status, json) = post_items(&server.url, &items);
    assert_eq!(status, 200, "{json}");
    let ids: Vec<String> = items.iter().map(|i| id_of(i)).collect();
    assert_eq!(accepted(&json), ids);
    // A version 1 summary (no device, stream or window length), to its
    // group `lab`, beside a version 2 one.
    let lab_v2 = from_device(107, 0xd4, 0x55, 0);
    let (status, _, json) = post(
        &server.url,
        Some(LAB_TOKEN),
        Some(CONTENT_TYPE),
        &common::body([v1.as_slice(), lab_v2.as_slice()]),
    );
    assert_eq!(status, 200, "{json}");
    let v1_id = id_of(&v1);
    assert_eq!(accepted(&json), vec![v1_id.clone(), id_of(&lab_v2)]);
    // Another group's device, seen only by that group.
    let theirs = from_device(106, 0xd3, 0x54, 0);
    let (status, _, json) = post(
        &server.url,
        Some(OTHER_TOKEN),
        Some(CONTENT_TYPE),
        &common::body([theirs.as_slice()]),
    );
    assert_eq!(status, 200, "{json}");

    let d1 = "d1".repeat(16);
    let (status, runs) = get(
        &server.url,
        &format!("/v1/runs?device={d1}"),
        Some(&server.op(TOKEN)),
    );
    assert_eq!(status, 200, "{runs}");
    assert_eq!(listed_ids(&runs, "runs", "id"), ids[..4].to_vec());
    let w2 = &runs["runs"][1];
    assert_eq!(w2["device"], d1.as_str());
    assert_eq!(w2["stream"], "51".repeat(16));
    assert_eq!(w2["window"], 2);
    assert_eq!(w2["window_ns"], 10_000_000_000u64);
    assert_eq!(w2["exit"], "running");
    assert_eq!(w2["cpu_user_ns"], 102_000);
    assert_eq!(w2["cpu_system_ns"], 102);
    assert_eq!(w2["in_flight"], 0);
    // Upper-case hex is the same id.
    let (_, upper) = get(
        &server.url,
        &format!("/v1/runs?device={}", d1.to_uppercase()),
        Some(&server.op(TOKEN)),
    );
    assert_eq!(upper, runs);

    // The windows of one stream, in order.
    let (_, stream) = get(
        &server.url,
        &format!("/v1/runs?stream={}", "51".repeat(16)),
        Some(&server.op(TOKEN)),
    );
    assert_eq!(listed_ids(&stream, "runs", "id"), ids[..3].to_vec());
    let windows: Vec<u64> = stream["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["window"].as_u64().unwrap())
        .collect();
    assert_eq!(windows, vec![1, 2, 3]);

    // The version 1 summary was stored, without a device: the all-zero id
    // finds it, and its view says null.
    let (_, none) = get(
        &server.url,
        &format!("/v1/runs?device={}", "0".repeat(32)),
        Some(&server.op(LAB_TOKEN)),
    );
    assert_eq!(listed_ids(&none, "runs", "id"), vec![v1_id.clone()]);
    assert_eq!(none["runs"][0]["device"], serde_json::Value::Null);
    assert_eq!(none["runs"][0]["stream"], serde_json::Value::Null);
    assert_eq!(none["runs"][0]["cpu_user_ns"], serde_json::Value::Null);
    let (status, shown) = get(
        &server.url,
        &format!("/v1/runs/{v1_id}"),
        Some(&server.op(LAB_TOKEN)),
    );
    assert_eq!(status, 200);
    assert_eq!(shown["origin"]["device"], serde_json::Value::Null);
    assert_eq!(shown["facts"]["program"], "wget");
    let (_, lab) = get(&server.url, "/v1/devices", Some(&server.op(LAB_TOKEN)));
    assert_eq!(listed_ids(&lab, "devices", "device"), vec!["d4".repeat(16)]);

    // Another group's device is not among this group's runs.
    let d3 = "d3".repeat(16);
    let (_, none) = get(
        &server.url,
        &format!("/v1/runs?device={d3}"),
        Some(&server.op(TOKEN)),
    );
    assert_eq!(none["runs"], serde_json::json!([]));

    // Refused parameters.
    for bad in ["device=d1", "device=zz", "stream=123", "device="] {
        let (status, json) = get(
            &server.url,
            &format!("/v1/runs?{bad}"),
            Some(&server.op(TOKEN)),
        );
        assert_eq!(status, 400, "{bad}: {json}");
    }

    // The devices of the token's group, most recently seen first, with the
    // facts of their latest run and their counts.
    let (status, devices) = get(&server.url, "/v1/devices", Some(&server.op(TOKEN)));
    assert_eq!(status, 200, "{devices}");
    let listed = listed_ids(&devices, "devices", "device");
    assert_eq!(listed.len(), 2, "{devices}");
    assert!(listed.contains(&d1) && listed.contains(&"d2".repeat(16)));
    let one = devices["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device"] == d1.as_str())
        .unwrap();
    let latest = Summary::decode(&items[3]).unwrap();
    assert_eq!(one["group"], "phones");
    assert_eq!(one["runs"], 1);
    assert_eq!(one["windows"], 3);
    assert_eq!(one["last_start_unix_ns"], latest.run.start_unix_ns);
    assert_eq!(one["last_program"], latest.facts.program.as_str());
    assert_eq!(one["facts"]["kernel"], "6.1.0-28-amd64");
    assert_eq!(one["facts"]["device_model"], "ThinkPad X1 Carbon Gen 9");
    assert_eq!(one["facts"]["os_name"], "Debian GNU/Linux");
    assert!(
        one["last_seen_unix_ns"].as_u64().unwrap() >= one["first_seen_unix_ns"].as_u64().unwrap()
    );
    let parsed: wire::DeviceList = serde_json::from_value(devices.clone()).unwrap();
    assert_eq!(parsed.devices.len(), 2);
    let (_, limited) = get(&server.url, "/v1/devices?limit=1", Some(&server.op(TOKEN)));
    assert_eq!(limited["devices"].as_array().unwrap().len(), 1);

    // Scoping as /v1/runs: the other token sees its own device only, may
    // not ask for this group, and no token is 401.
    let (_, theirs) = get(&server.url, "/v1/devices", Some(&server.op(OTHER_TOKEN)));
    assert_eq!(listed_ids(&theirs, "devices", "device"), vec![d3]);
    let (status, _) = get(
        &server.url,
        "/v1/devices?group=phones",
        Some(&server.op(OTHER_TOKEN)),
    );
    assert_eq!(status, 403);
    let (status, _) = get(&server.url, "/v1/devices", None);
    assert_eq!(status, 401);
    let (status, _) = get(&server.url, "/v1/devices?limit=0", Some(&server.op(TOKEN)));
    assert_eq!(status, 400);
}

/// Issue 36, item 7: a device's upload token ships inside every app, so it
/// is public: it uploads and reads its directives, and nothing else. Fleet
/// data needs an operator's API token.
#[test]
fn a_device_token_reads_no_fleet_data() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &[]);
    let items = sample_items(500, 2, None);
    let (status, json) = post_items(&server.url, &items);
    assert_eq!(status, 200, "{json}");
    let id = id_of(&items[0]);
    for path in [
        "/v1/runs".to_string(),
        format!("/v1/runs/{id}"),
        "/v1/devices".to_string(),
        "/v1/reports".to_string(),
        "/v1/reports/1".to_string(),
    ] {
        let (status, json) = get(&server.url, &path, Some(TOKEN));
        assert_eq!(status, 403, "{path}: {json}");
        assert!(
            json["error"].as_str().unwrap().contains("device token"),
            "{json}"
        );
    }
    let (status, _) = get(&server.url, "/v1/directives", Some(TOKEN));
    assert_eq!(status, 200);
    // The operator's API token reads them, and is no upload token.
    let op = server.op(TOKEN);
    let (status, runs) = get(&server.url, "/v1/runs", Some(&op));
    assert_eq!(status, 200);
    assert_eq!(runs["runs"].as_array().unwrap().len(), 2);
    let (status, _) = get(&server.url, &format!("/v1/runs/{id}"), Some(&op));
    assert_eq!(status, 200);
    let body = common::body(items.iter().map(Vec::as_slice));
    let (status, _, _) = post(&server.url, Some(&op), Some(CONTENT_TYPE), &body);
    assert_eq!(status, 401);
    // Revoked: refused at once.
    let out = std::process::Command::new(bin())
        .args(["operator", "revoke", "phones-op", "--db"])
        .arg(&server.db)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (status, _) = get(&server.url, "/v1/runs", Some(&op));
    assert_eq!(status, 401);
}

/// `count` summaries of device `device` (seeds from `first_seed`).
fn device_items(first_seed: u64, count: u64, device: u8) -> Vec<Vec<u8>> {
    (first_seed..first_seed + count)
        .map(|seed| {
            let mut s = sample::summary(seed, 200, None);
            s.origin.device = DeviceId([device; 16]);
            sample::encode(&s)
        })
        .collect()
}

/// The value of metric line `name{labels}` in /metrics.
fn metric(url: &str, line_start: &str) -> u64 {
    let text = agent()
        .get(format!("{url}/metrics"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(line_start))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {line_start} in {text}"))
}

/// Issue 36, item 7: upload tokens are public, so uploads have quotas per
/// client address (requests) and per device id (summaries): over one, 429
/// with Retry-After, nothing stored, counted by reason.
#[test]
fn uploads_over_a_quota_are_refused_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    // Refills so slowly that nothing refills during the test.
    let server = start(
        dir.path(),
        &[
            "--quota-device-burst",
            "5",
            "--quota-device-per-sec",
            "0.001",
        ],
    );
    let (status, json) = post_items(&server.url, &device_items(1, 4, 0xd1));
    assert_eq!(status, 200, "{json}");
    // Two more of the same device: over its 5, the whole batch refused.
    let body = common::body(device_items(10, 2, 0xd1).iter().map(Vec::as_slice));
    let (status, retry, json) = post(&server.url, Some(TOKEN), Some(CONTENT_TYPE), &body);
    assert_eq!(status, 429, "{json}");
    let retry: u64 = retry.expect("Retry-After").parse().unwrap();
    assert!(retry >= 1, "{retry}");
    assert_eq!(stored_ids(&server.db).len(), 4);
    // Another device has its own quota.
    let (status, _) = post_items(&server.url, &device_items(20, 5, 0xd2));
    assert_eq!(status, 200);
    assert_eq!(
        metric(
            &server.url,
            "edge_service_ingest_quota_refused_total{reason=\"device\"}"
        ),
        1
    );

    let dir = tempfile::tempdir().unwrap();
    let server = start(
        dir.path(),
        &[
            "--quota-address-burst",
            "3",
            "--quota-address-per-sec",
            "0.001",
        ],
    );
    for seed in 0..3 {
        let (status, _) = post_items(&server.url, &device_items(100 + seed, 1, 0xd3));
        assert_eq!(status, 200);
    }
    let body = common::body(device_items(200, 1, 0xd4).iter().map(Vec::as_slice));
    let (status, retry, _) = post(&server.url, Some(TOKEN), Some(CONTENT_TYPE), &body);
    assert_eq!(status, 429);
    assert!(retry.is_some());
    assert_eq!(
        metric(
            &server.url,
            "edge_service_ingest_quota_refused_total{reason=\"address\"}"
        ),
        1
    );
    // Reads are not uploads: the address's quota does not touch them.
    let (status, _) = get(&server.url, "/v1/directives", Some(TOKEN));
    assert_eq!(status, 200);
}

/// Issue 36, item 7: token rotation without downtime. Two tokens of one
/// group are valid at once; the tokens file is re-read without a restart
/// (here when its modification time changes; SIGHUP too), and a file that
/// does not parse keeps the tokens in force.
#[test]
fn tokens_rotate_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), &["--tokens-recheck-ms", "100"]);
    let tokens = dir.path().join("tokens");
    const NEW: &str = "phones-token-new-0123456789";
    let upload = |token: &str, seed: u64| {
        let body = common::body(device_items(seed, 1, 0xe1).iter().map(Vec::as_slice));
        post(&server.url, Some(token), Some(CONTENT_TYPE), &body).0
    };
    let wait_until = |what: &str, f: &dyn Fn() -> bool| {
        let started = std::time::Instant::now();
        while !f() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "timed out waiting until {what}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    assert_eq!(upload(NEW, 1), 401);
    // Step 1: both tokens.
    std::fs::write(&tokens, format!("phones {TOKEN}\nphones {NEW}\n")).unwrap();
    wait_until("the new token is accepted", &|| upload(NEW, 2) == 200);
    assert_eq!(upload(TOKEN, 3), 200);
    // A broken file keeps both.
    std::fs::write(&tokens, "phones short\n").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(upload(TOKEN, 4), 200);
    assert_eq!(upload(NEW, 5), 200);
    // Step 2: the old one removed; SIGHUP re-reads at once.
    std::fs::write(&tokens, format!("phones {NEW}\n")).unwrap();
    let pid = server.child.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    wait_until("the old token is refused", &|| upload(TOKEN, 6) == 401);
    assert_eq!(upload(NEW, 7), 200);
    // The same process throughout.
    assert!(server.child.id().to_string() == pid);
    assert_eq!(get(&server.url, "/healthz", None).0, 200);
}
