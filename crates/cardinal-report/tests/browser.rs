//! The reports in a real browser: headless Chromium driven by chromedriver over the W3C
//! WebDriver HTTP protocol (ureq, loopback only, bounded waits; the driver is killed on drop).
//!
//! The sweep pages of the committed fixture runs and the calibration page are rendered, loaded
//! from file:// URLs, and checked: no console error (a deliberately broken page first proves the
//! check sees errors), nothing fetched, the plots (SVG) and the case table present, the
//! language / failed-metric / refusal filters leave visible exactly the rows the records say, a
//! row opens its case, a citation opens its card, a script tag inside an answer stays text.
//! Screenshots go to `$CARGO_TARGET_TMPDIR/cardinal-report/` (paths printed; `--nocapture`).
//!
//! Needs Debian's `chromium` and `chromium-driver` (`scripts/test` installs them); without them
//! the test fails with one line saying so. `CARDINAL_CHROMIUM` / `CARDINAL_CHROMEDRIVER` point
//! at other binaries.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use std::{env, fs};

use base64::Engine as _;
use cardinal_eval::GateConfig;
use cardinal_report::{CalibrationOptions, SweepOptions};
use serde_json::{json, Value};

mod common;
use common::{
    calibration_fixture, card_texts, copy_dir, kb_card_texts, sweep_fixture, sweep_fixtures,
};

const MISSING: &str = "the browser test needs Chromium and chromedriver: install them with `apt-get install chromium chromium-driver` (scripts/test does)";

/// A binary named by `var`, else the first of `names` found on PATH or in `extra` paths.
fn find_binary(var: &str, names: &[&str], extra: &[&str]) -> Option<PathBuf> {
    if let Some(p) = env::var_os(var) {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let path = env::var_os("PATH").unwrap_or_default();
    for name in names {
        for dir in env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    extra.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// chromedriver and one browser session; both end on drop.
struct Browser {
    driver: Child,
    base: String,
    session: String,
    agent: ureq::Agent,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start() -> Browser {
        let chromium = find_binary(
            "CARDINAL_CHROMIUM",
            &["chromium", "chromium-browser", "google-chrome"],
            &["/usr/lib/chromium/chromium"],
        );
        let chromedriver = find_binary(
            "CARDINAL_CHROMEDRIVER",
            &["chromedriver"],
            &["/usr/lib/chromium/chromedriver"],
        );
        let (Some(chromium), Some(chromedriver)) = (chromium, chromedriver) else {
            panic!("{MISSING}");
        };
        // A free loopback port; chromedriver itself accepts local connections only (no
        // --allowed-ips / --allowed-origins).
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let driver = Command::new(&chromedriver)
            .arg(format!("--port={port}"))
            .arg("--log-level=WARNING")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{MISSING} ({}: {e})", chromedriver.display()));
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_connect(Some(Duration::from_secs(2)))
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let base = format!("http://127.0.0.1:{port}");
        let profile = tempfile::tempdir().expect("a profile directory");
        let mut browser = Browser {
            driver,
            base,
            session: String::new(),
            agent,
            _profile: profile,
        };
        // Bounded wait for the driver (20 s).
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = browser
                .agent
                .get(format!("{}/status", browser.base))
                .call()
                .ok()
                .and_then(|mut r| r.body_mut().read_json::<Value>().ok())
                .is_some_and(|v| v["value"]["ready"] == json!(true));
            if ready {
                break;
            }
            if let Ok(Some(status)) = browser.driver.try_wait() {
                panic!("chromedriver exited before it was ready: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "chromedriver was not ready within 20 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,1600",
            &format!("--user-data-dir={}", browser._profile.path().display()),
        ];
        let caps = json!({
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "timeouts": {"pageLoad": 30000, "script": 10000, "implicit": 0},
                    "goog:chromeOptions": {"binary": chromium, "args": args},
                    "goog:loggingPrefs": {"browser": "ALL"}
                }
            }
        });
        let v = browser.raw("POST", "/session", Some(caps));
        browser.session = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {v}"))
            .to_string();
        browser
    }

    /// One WebDriver call; panics (with the driver's message) on an error status.
    fn raw(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let response = match method {
            "GET" => self.agent.get(&url).call(),
            "DELETE" => self.agent.delete(&url).call(),
            _ => self.agent.post(&url).send_json(body.unwrap_or(json!({}))),
        };
        let mut response = response.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = response.status();
        let v: Value = response
            .body_mut()
            .with_config()
            .limit(256 * 1024 * 1024)
            .read_json()
            .unwrap_or_else(|e| panic!("{method} {path}: unreadable reply: {e}"));
        assert!(status.is_success(), "{method} {path}: {status}: {v}");
        v
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let path = format!("/session/{}{path}", self.session);
        self.raw(method, &path, body)["value"].take()
    }

    fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(json!({ "url": url })));
        self.wait_for(
            "document.readyState === 'complete'",
            Duration::from_secs(20),
        );
    }

    fn js(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }

    /// Polls a JavaScript condition until it is true (bounded).
    fn wait_for(&self, condition: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        let script = format!("return !!({condition});");
        while self.js(&script) != json!(true) {
            assert!(
                Instant::now() < deadline,
                "not true within {limit:?}: {condition}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn element(&self, css: &str) -> String {
        let v = self.call(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        );
        v.as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_string()
    }

    fn click(&self, css: &str) {
        let id = self.element(css);
        self.call("POST", &format!("/element/{id}/click"), None);
    }

    fn displayed(&self, css: &str) -> bool {
        let id = self.element(css);
        self.call("GET", &format!("/element/{id}/displayed"), None) == json!(true)
    }

    /// Browser console entries at SEVERE level since the last call (errors and uncaught
    /// exceptions).
    fn console_errors(&self) -> Vec<String> {
        let v = self.call("POST", "/se/log", Some(json!({"type": "browser"})));
        v.as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["level"] == json!("SEVERE"))
            .map(|e| e["message"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// A screenshot of the viewport (1280 × 1600), or of the whole page (the window grown to
    /// the page's height, capped).
    fn screenshot(&self, path: &Path, full_page: bool) {
        if full_page {
            let height = self
                .js("return document.documentElement.scrollHeight;")
                .as_u64()
                .unwrap_or(1600)
                .clamp(800, 12000);
            self.call(
                "POST",
                "/window/rect",
                Some(json!({"width": 1280, "height": height})),
            );
        }
        let b64 = self.call("GET", "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().expect("a base64 screenshot"))
            .expect("valid base64");
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        fs::create_dir_all(path.parent().expect("a parent")).expect("screenshot dir");
        fs::write(path, png).expect("writing the screenshot");
        println!("screenshot: {}", path.display());
        self.call(
            "POST",
            "/window/rect",
            Some(json!({"width": 1280, "height": 1600})),
        );
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let url = format!("{}/session/{}", self.base, self.session);
            let _ = self.agent.delete(&url).call();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn file_url(path: &Path) -> String {
    format!("file://{}", path.display())
}

fn count(b: &Browser, script: &str) -> u64 {
    b.js(script)
        .as_u64()
        .unwrap_or_else(|| panic!("not a count: {script}"))
}

const VISIBLE_ROWS: &str = "return Array.from(document.querySelectorAll('tbody.case')).filter(function (t) { return t.getClientRects().length > 0; }).length;";

/// Per-case facts of a fixture's records, for the expected filter counts.
struct Case {
    lang: String,
    refused: bool,
    /// Keys scored 0 (a 0–1 metric's failure).
    zero_keys: Vec<String>,
}

fn fixture_cases(dir: &Path) -> Vec<Case> {
    fs::read_to_string(dir.join("records.jsonl"))
        .expect("records.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a record");
            Case {
                lang: v["scores"]["lang"].as_str().unwrap_or("").to_string(),
                refused: v["refused"] == json!(true),
                zero_keys: v["scores"]["scores"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(_, x)| x.as_f64() == Some(0.0))
                    .map(|(k, _)| k.clone())
                    .collect(),
            }
        })
        .collect()
}

/// Loads a sweep page and checks it: no console error, nothing fetched, the plots and the case
/// table present, the filters give the counts the records give, a row opens its case and a
/// citation its card. Returns the number of cases.
fn check_sweep_page(b: &Browser, html: &Path, run: &Path, shots: &Path, name: &str) -> usize {
    b.goto(&file_url(html));
    let errors = b.console_errors();
    assert!(errors.is_empty(), "{name}: console errors: {errors:?}");
    assert_eq!(
        count(b, "return performance.getEntriesByType('resource').length;"),
        0,
        "{name}: the page fetched something"
    );
    // Plots: one drawn SVG per metric, each with bars, laid out with a real size.
    let plots = count(
        b,
        "return document.querySelectorAll('figure.plot.metric svg').length;",
    );
    assert!(plots >= 3, "{name}: only {plots} metric plots");
    assert_eq!(
        count(b, "return Array.from(document.querySelectorAll('figure.plot.metric svg')).filter(function (s) { return s.querySelectorAll('rect').length > 3 && s.getBoundingClientRect().width > 100; }).length;"),
        plots,
        "{name}: an empty or invisible plot"
    );
    // The case table: every case a row, all visible before filtering.
    let cases = fixture_cases(run);
    let n = cases.len() as u64;
    assert!(n > 1, "{name}: the fixture needs cases");
    assert!(b.displayed("table#cases"));
    assert_eq!(
        count(b, "return document.querySelectorAll('tbody.case').length;"),
        n
    );
    assert_eq!(count(b, VISIBLE_ROWS), n);
    assert_eq!(
        count(b, "return document.scripts.length;"),
        1,
        "{name}: only the page's script"
    );

    // Filters, through real clicks on the options: a language (the one with fewest cases),
    // then a metric failed in it, then refusals.
    let mut langs: Vec<(usize, String)> = Vec::new();
    for c in &cases {
        match langs.iter_mut().find(|(_, l)| *l == c.lang) {
            Some(e) => e.0 += 1,
            None => langs.push((1, c.lang.clone())),
        }
    }
    langs.sort();
    let (by_lang, lang) = langs[0].clone();
    assert!((by_lang as u64) < n, "{name}: needs more than one language");
    b.click(&format!("#f-lang option[value='{lang}']"));
    b.wait_for(
        &format!("document.getElementById('shown-count').textContent === '{by_lang}'"),
        Duration::from_secs(5),
    );
    assert_eq!(
        count(b, VISIBLE_ROWS),
        by_lang as u64,
        "{name}: language filter"
    );
    let in_lang: Vec<&Case> = cases.iter().filter(|c| c.lang == lang).collect();
    let failed_key = [
        "refusal_correctness",
        "retrieval_hit_at_k",
        "citation_coverage",
        "citation_correctness",
    ]
    .into_iter()
    .find(|k| in_lang.iter().any(|c| c.zero_keys.iter().any(|z| z == k)));
    let mut expected: Vec<&Case> = in_lang.clone();
    if let Some(key) = failed_key {
        b.click(&format!("#f-failed option[value='{key}']"));
        expected.retain(|c| c.zero_keys.iter().any(|z| z == key));
        assert_eq!(
            count(b, VISIBLE_ROWS),
            expected.len() as u64,
            "{name}: failed-metric filter {key}"
        );
    }
    b.click("#f-refusal option[value='no']");
    expected.retain(|c| !c.refused);
    assert_eq!(
        count(b, VISIBLE_ROWS),
        expected.len() as u64,
        "{name}: refusal filter"
    );
    assert_eq!(
        b.js("return document.getElementById('shown-count').textContent;"),
        json!(expected.len().to_string())
    );
    // Back to everything.
    b.click("#f-lang option[value='']");
    b.click("#f-failed option[value='']");
    b.click("#f-refusal option[value='']");
    assert_eq!(count(b, VISIBLE_ROWS), n);

    // A row opens its case; a citation opens its card.
    let case = b
        .js("var t = Array.from(document.querySelectorAll('tbody.case')).find(function (t) { return t.querySelector('.answer a.cite'); }); return t ? t.dataset.case : null;")
        .as_str()
        .unwrap_or_else(|| panic!("{name}: no case with a linked citation"))
        .to_string();
    let case = format!("tbody.case[data-case='{case}']");
    assert!(!b.displayed(&format!("{case} tr.case-detail")));
    b.click(&format!("{case} button.open"));
    assert!(
        b.displayed(&format!("{case} tr.case-detail")),
        "{name}: the case did not open"
    );
    assert!(b.displayed(&format!("{case} table.retrieved")));
    assert!(b.displayed(&format!("{case} table.verdicts")));
    let anchor = b.js(&format!(
        "return document.querySelector(\"{case} .answer a.cite\").getAttribute('href').slice(1);"
    ));
    let anchor = anchor.as_str().expect("a citation link").to_string();
    b.click(&format!("{case} .answer a.cite"));
    b.wait_for(
        &format!("document.getElementById('{anchor}').open === true"),
        Duration::from_secs(5),
    );
    let errors = b.console_errors();
    assert!(
        errors.is_empty(),
        "{name}: console errors while using the page: {errors:?}"
    );
    b.js(&format!(
        "document.querySelector(\"{case}\").scrollIntoView(); window.scrollBy(0, -60); return 0;"
    ));
    b.screenshot(&shots.join(format!("{name}-case.png")), false);
    b.js("window.scrollTo(0, 0); return 0;");
    b.screenshot(&shots.join(format!("{name}-top.png")), false);
    b.screenshot(&shots.join(format!("{name}.png")), true);
    cases.len()
}

#[test]
fn reports_work_in_headless_chromium() {
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cardinal-report");
    let run = copy_dir(&sweep_fixture());
    let sweep_html = cardinal_report::write_sweep(
        run.path(),
        &SweepOptions {
            card_texts: card_texts(),
            gates: Some(GateConfig {
                min_retrieval_recall: Some(0.5),
                min_retrieval_hit: Some(0.99),
            }),
            title: Some("Cardinal sweep — hand-written fixture".into()),
            ..SweepOptions::default()
        },
    )
    .expect("rendering the sweep page");
    let cal = copy_dir(&calibration_fixture());
    let cal_html = cardinal_report::write_calibration(
        cal.path(),
        &CalibrationOptions {
            labels_dir: Some(cal.path().join("labels")),
            title: None,
        },
    )
    .expect("rendering the calibration page");

    let b = Browser::start();

    // The console check sees errors: a page that logs one and throws is caught.
    let broken = run.path().join("broken.html");
    fs::write(
        &broken,
        "<!DOCTYPE html><title>x</title><script>console.error('deliberate'); undefinedFunction();</script>",
    )
    .expect("writing the control page");
    b.goto(&file_url(&broken));
    let errors = b.console_errors();
    assert!(
        errors.iter().any(|e| e.contains("deliberate")) && errors.len() >= 2,
        "the console check missed the control page's errors: {errors:?}"
    );

    // --- The sweep page of the hand-written run (judged; a script tag in an answer).
    check_sweep_page(&b, &sweep_html, run.path(), &shots, "sweep-handwritten");
    assert_eq!(
        b.js("return Array.from(document.querySelectorAll('.answer')).some(function (a) { return a.textContent.indexOf(\"<script>alert('xss')</script>\") >= 0; });"),
        json!(true),
        "the answer's script tag is not shown as text"
    );
    assert!(
        count(
            &b,
            "return document.querySelectorAll('.judge table').length;"
        ) > 0
    );

    // --- Every other committed sweep fixture (real runs), with the repository's KB as cards.
    let cards = kb_card_texts();
    for fixture in sweep_fixtures() {
        if fixture == sweep_fixture() {
            continue;
        }
        let name = fixture
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a fixture name")
            .to_string();
        let dir = copy_dir(&fixture);
        let html = cardinal_report::write_sweep(
            dir.path(),
            &SweepOptions {
                card_texts: cards.clone(),
                title: Some(format!("Cardinal sweep — {name}")),
                ..SweepOptions::default()
            },
        )
        .expect("rendering a fixture's sweep page");
        check_sweep_page(&b, &html, dir.path(), &shots, &name);
    }

    // --- The calibration page.
    b.goto(&file_url(&cal_html));
    let errors = b.console_errors();
    assert!(
        errors.is_empty(),
        "console errors on the calibration page: {errors:?}"
    );
    assert_eq!(
        count(
            &b,
            "return performance.getEntriesByType('resource').length;"
        ),
        0
    );
    let heatmaps = count(
        &b,
        "return document.querySelectorAll('figure.heatmap svg').length;",
    );
    let scatters = count(
        &b,
        "return document.querySelectorAll('figure.scatter svg').length;",
    );
    assert!(
        heatmaps >= 2 && heatmaps == scatters,
        "{heatmaps} heatmaps, {scatters} scatters"
    );
    assert!(
        count(
            &b,
            "return document.querySelectorAll('figure.scatter circle').length;"
        ) > 0
    );
    assert!(b.displayed("table.worst"));
    b.screenshot(&shots.join("calibration-top.png"), false);
    b.screenshot(&shots.join("calibration.png"), true);
}
