//! A browser-like HTTP client over real sockets for the cabinet's non-browser tests: keeps the
//! session cookie, follows no redirect (the tests look at them), and sends what a browser
//! sends with a form (`Origin` and `Sec-Fetch-Site: same-origin`) unless told otherwise.

#![allow(dead_code)]

use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::redirect::Policy;

/// An answer: status, `Location`, `Set-Cookie` lines and the page.
#[derive(Debug)]
pub struct Page {
    pub status: u16,
    pub location: Option<String>,
    pub set_cookies: Vec<String>,
    pub headers: HeaderMap,
    pub body: String,
}

/// A visitor of the cabinet with its own cookie.
#[derive(Debug, Clone)]
pub struct Visitor {
    pub base: String,
    pub cookie: Option<String>,
    /// The refusal cookie of a page without a session (`cabinet-flash=...`), kept beside the
    /// session's as a browser keeps both.
    pub flash: Option<String>,
    http: reqwest::Client,
}

/// How a POST presents itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// A browser on the cabinet's own page: `Sec-Fetch-Site: same-origin` and `Origin`.
    Same,
    /// A browser on another site: `Sec-Fetch-Site: cross-site`, `Origin` of that site.
    Cross,
    /// Only an `Origin` of another site (an older browser without Fetch Metadata).
    ForeignOrigin,
    /// Neither header (not a browser).
    Bare,
}

impl Visitor {
    pub fn new(base: &str) -> Visitor {
        Visitor {
            base: base.trim_end_matches('/').to_string(),
            cookie: None,
            flash: None,
            http: reqwest::Client::builder()
                .redirect(Policy::none())
                .build()
                .expect("a client"),
        }
    }

    async fn send(&mut self, req: reqwest::RequestBuilder) -> Page {
        let jar: Vec<&str> = [&self.cookie, &self.flash]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        let req = if jar.is_empty() {
            req
        } else {
            req.header("cookie", jar.join("; "))
        };
        let resp = req.send().await.expect("the cabinet answers");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let location = headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let set_cookies: Vec<String> = headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_string)
            .collect();
        for line in &set_cookies {
            let pair = line.split(';').next().unwrap_or("").trim();
            let slot = if pair.contains("cabinet-flash=") {
                &mut self.flash
            } else {
                &mut self.cookie
            };
            if line.contains("Max-Age=0") {
                *slot = None;
            } else if !pair.is_empty() {
                *slot = Some(pair.to_string());
            }
        }
        let body = resp.text().await.expect("a body");
        Page {
            status,
            location,
            set_cookies,
            headers,
            body,
        }
    }

    /// GET `path`.
    pub async fn get(&mut self, path: &str) -> Page {
        let req = self.http.get(format!("{}{path}", self.base));
        self.send(req).await
    }

    /// GET the page a redirect (`303` after a POST) leads to, as a browser does next.
    pub async fn follow(&mut self, redirect: &Page) -> Page {
        assert_eq!(redirect.status, 303, "a redirect: {}", redirect.body);
        let to = redirect.location.clone().expect("a Location");
        // The fragment stays in the browser.
        let to = to.split('#').next().unwrap_or_default().to_string();
        self.get(&to).await
    }

    /// POST a form as the cabinet's own page would.
    pub async fn post(&mut self, path: &str, form: &[(&str, &str)]) -> Page {
        self.post_as(Site::Same, path, form).await
    }

    /// The first step of a sign-in: the form's email and password.
    pub async fn sign_in_with_password(&mut self, email: &str, password: &str) -> Page {
        self.post("/sign-in", &[("email", email), ("password", password)])
            .await
    }

    /// POST a form presenting itself as `site`.
    pub async fn post_as(&mut self, site: Site, path: &str, form: &[(&str, &str)]) -> Page {
        let mut req = self.http.post(format!("{}{path}", self.base)).form(form);
        let own = HeaderValue::from_str(&self.base).expect("a URL");
        match site {
            Site::Same => {
                req = req
                    .header("sec-fetch-site", "same-origin")
                    .header("origin", own);
            }
            Site::Cross => {
                req = req
                    .header("sec-fetch-site", "cross-site")
                    .header("origin", "https://evil.example");
            }
            Site::ForeignOrigin => req = req.header("origin", "https://evil.example"),
            Site::Bare => {}
        }
        self.send(req).await
    }
}
