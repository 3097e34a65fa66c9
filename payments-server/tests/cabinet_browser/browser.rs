//! A real browser for the cabinet tests: Debian's headless Chromium driven by ChromeDriver over
//! WebDriver (fantoccini, no TLS: ChromeDriver listens on loopback). Each test starts its own
//! ChromeDriver in a process group of its own and ends the group when done, Chromium included.
//!
//! The tests that use it are ignored in a plain `cargo test` (they need Chromium); asked for
//! (`--include-ignored`, as `.ci/run` does after installing `chromium` and `chromedriver`),
//! they fail without a browser, saying what to install.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

/// A ChromeDriver process (and the Chromium it starts), ended with its process group.
struct Driver {
    child: Child,
    port: u16,
    _profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        // ChromeDriver runs in a process group of its own (process_group(0)), with the
        // Chromium it started: end that group by its id, once it is certain to be the
        // driver's own (its id is the driver's pid), then the driver itself.
        let pid = self.child.id();
        if process_group_of(pid) == Some(pid) {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The process group of `pid` (the fifth field of `/proc/<pid>/stat`).
fn process_group_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

fn find(env: &str, candidates: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return Some(PathBuf::from(p));
    }
    candidates.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// The browser of one test.
pub struct Browser {
    pub client: Client,
    pub base: String,
    driver: Driver,
}

impl Browser {
    /// Chromium over ChromeDriver on `base` (the cabinet's URL). The tests that use it are
    /// `#[ignore = "needs Chromium: ..."]`: asked for (`--include-ignored`) without a browser,
    /// they fail here, saying what to install.
    pub async fn start(base: &str) -> Browser {
        Browser::start_with(base, false).await
    }

    /// [`Browser::start`], accepting the server's self-signed certificate when `insecure_tls`.
    pub async fn start_with(base: &str, insecure_tls: bool) -> Browser {
        let chromium = find(
            "CHROME_BIN",
            &["/usr/bin/chromium", "/usr/bin/chromium-browser"],
        );
        let chromedriver = find("CHROMEDRIVER", &["/usr/bin/chromedriver"]);
        let (Some(chromium), Some(chromedriver)) = (chromium, chromedriver) else {
            panic!(
                "chromium and chromedriver are not installed (Debian packages chromium and \
                 chromium-driver, or CHROME_BIN and CHROMEDRIVER; .ci/run installs them). \
                 Without them, leave out --include-ignored and these tests are reported as \
                 ignored."
            );
        };
        let port = payments_server::testing::free_port();
        let mut command = Command::new(&chromedriver);
        // The browser's time zone is the one the cabinet adopts at sign-in: UTC, whatever
        // the machine's, so that the pages read the same everywhere.
        command
            .arg(format!("--port={port}"))
            .env("TZ", "UTC")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            command.process_group(0);
        }
        let child = command.spawn().expect("chromedriver starts");
        let profile = tempfile::tempdir().expect("a profile directory");
        let driver = Driver {
            child,
            port,
            _profile: profile,
        };
        let webdriver = format!("http://127.0.0.1:{port}");
        wait_ready(&webdriver).await;
        let args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-extensions".into(),
            "--password-store=basic".into(),
            "--window-size=1280,900".into(),
            format!("--user-data-dir={}", driver._profile.path().display()),
        ];
        let caps = json!({
            "browserName": "chrome",
            "acceptInsecureCerts": insecure_tls,
            "goog:chromeOptions": {
                "binary": chromium.display().to_string(),
                "args": args,
            },
        });
        let caps = match caps {
            serde_json::Value::Object(map) => map,
            _ => unreachable!("an object"),
        };
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&webdriver)
            .await
            .expect("a WebDriver session in headless Chromium");
        Browser {
            client,
            base: base.trim_end_matches('/').to_string(),
            driver,
        }
    }

    /// Opens `path` on the cabinet.
    pub async fn open(&self, path: &str) {
        self.client
            .goto(&format!("{}{path}", self.base))
            .await
            .expect("the page opens");
    }

    /// The current path and query.
    pub async fn path(&self) -> String {
        let url = self.client.current_url().await.expect("a URL");
        match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        }
    }

    /// The element at `css`.
    pub async fn el(&self, css: &str) -> Element {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
    }

    /// Every element at `css`.
    pub async fn all(&self, css: &str) -> Vec<Element> {
        self.client
            .find_all(Locator::Css(css))
            .await
            .expect("a search")
    }

    /// Types `text` into the (cleared) field at `css`.
    pub async fn fill(&self, css: &str, text: &str) {
        let e = self.el(css).await;
        e.clear().await.expect("cleared");
        e.send_keys(text).await.expect("typed");
    }

    /// Clicks the link or button at `css` and waits for the page it leads to.
    pub async fn click(&self, css: &str) {
        let target = self.el(css).await;
        self.navigate_by(target).await;
    }

    /// Clicks the element at `css` without waiting for a new page (a checkbox).
    pub async fn toggle(&self, css: &str) {
        self.el(css).await.click().await.expect("clicked");
    }

    /// Clicks the link or button whose text is `text` and waits for the page it leads to.
    pub async fn click_text(&self, text: &str) {
        let xpath =
            format!("//a[normalize-space(.)='{text}'] | //button[normalize-space(.)='{text}']");
        let target = self
            .client
            .find(Locator::XPath(&xpath))
            .await
            .unwrap_or_else(|e| panic!("nothing named {text:?}: {e}"));
        self.navigate_by(target).await;
    }

    /// Clicks `target` and waits until the page it was on is replaced by a loaded one (the
    /// old `<html>` element goes stale).
    async fn navigate_by(&self, target: Element) {
        let old = self.el("html").await;
        target.click().await.expect("clicked");
        let start = Instant::now();
        while old.tag_name().await.is_ok() {
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "no new page within 15 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        loop {
            let ready = self
                .client
                .execute("return document.readyState;", vec![])
                .await
                .ok()
                .and_then(|v| v.as_str().map(|s| s == "complete"))
                .unwrap_or(false);
            if ready {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(15),
                "the page did not finish loading within 15 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The text of the element at `css`.
    pub async fn text(&self, css: &str) -> String {
        self.el(css).await.text().await.expect("text")
    }

    /// The text of the table row that contains `text`.
    pub async fn row(&self, text: &str) -> String {
        let xpath = format!("//tr[contains(., '{text}')]");
        self.client
            .find(Locator::XPath(&xpath))
            .await
            .unwrap_or_else(|e| panic!("no row with {text:?}: {e}"))
            .text()
            .await
            .expect("text")
    }

    /// The page's `<h1>`.
    pub async fn heading(&self) -> String {
        // Read in one script, not found then read: a page that updates itself (the payer
        // page) may replace its h1 between the two steps (a stale element).
        let text = self
            .client
            .execute(
                "const h = document.querySelector('h1'); return h ? h.innerText : null;",
                vec![],
            )
            .await
            .expect("read the h1");
        text.as_str()
            .unwrap_or_else(|| panic!("the page has no h1"))
            .trim()
            .to_string()
    }

    /// The page's error summary, or empty.
    pub async fn errors(&self) -> String {
        match self.client.find(Locator::Css(".error-summary")).await {
            Ok(e) => e.text().await.unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// The page source.
    pub async fn source(&self) -> String {
        self.client.source().await.expect("the source")
    }

    /// Signs in with a password (the first step); the browser is then on the next page.
    pub async fn password_step(&self, email: &str, password: &str) {
        self.open("/sign-in").await;
        self.fill("#email", email).await;
        self.fill("#password", password).await;
        self.click("form[action='/sign-in'] button[type=submit]")
            .await;
    }

    /// Signs out through the header's button.
    pub async fn sign_out(&self) {
        self.click("form[action='/sign-out'] button").await;
        assert_eq!(self.path().await, "/sign-in?done=signed_out");
    }

    /// A PNG of the whole page, written to `<dir>/<name>.png` when `CABINET_SCREENSHOTS`
    /// names a directory.
    pub async fn screenshot(&self, name: &str) {
        self.screenshot_at(name, 1280).await;
    }

    /// [`Browser::screenshot`] with the window `width` px wide (320: a small phone).
    pub async fn screenshot_at(&self, name: &str, width: u32) {
        let Some(dir) = std::env::var_os("CABINET_SCREENSHOTS") else {
            return;
        };
        // The height at this width (a narrow page is taller).
        let _ = self.client.set_window_size(width, 900).await;
        let height = self
            .client
            .execute(
                "return Math.ceil(document.documentElement.scrollHeight);",
                vec![],
            )
            .await
            .ok()
            .and_then(|v| v.as_u64())
            .unwrap_or(900)
            .clamp(600, 4000);
        // The window's outer size: the viewport is smaller by the (headless) chrome.
        let _ = self
            .client
            .set_window_size(width, u32::try_from(height).unwrap_or(900) + 100)
            .await;
        let _ = self.client.execute("window.scrollTo(0, 0);", vec![]).await;
        let png = self.client.screenshot().await.expect("a screenshot");
        let path = Path::new(&dir).join(format!("{name}.png"));
        std::fs::create_dir_all(Path::new(&dir)).expect("the screenshot directory");
        std::fs::write(&path, png).expect("the screenshot is written");
        let _ = self.client.set_window_size(1280, 900).await;
    }

    /// Ends the session (Chromium closes); the driver ends on drop.
    pub async fn close(self) {
        let Browser { client, driver, .. } = self;
        let _ = client.close().await;
        drop(driver);
    }
}

async fn wait_ready(webdriver: &str) {
    let http = reqwest::Client::new();
    let start = Instant::now();
    loop {
        if let Ok(r) = http.get(format!("{webdriver}/status")).send().await {
            if r.status().is_success() {
                return;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "chromedriver did not answer within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
