//! The http capability (`agentrt:http`): HTTP requests to the hosts the
//! grant lists (abi/SPEC.md section 9.9).

use crate::cbor::{Bad, Reader, Res};
use crate::transport::{http, malformed, request, Transport};
use crate::Result;

const OP_REQUEST: u32 = 1;

const T: Transport = http::T;

/// An HTTP request. Headers keep their order, and a name may repeat.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpRequest {
    pub method: String,
    /// An absolute http:// or https:// URL, without user info.
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpRequest {
    /// A request without headers or body.
    pub fn new(method: &str, url: &str) -> HttpRequest {
        HttpRequest {
            method: method.to_string(),
            url: url.to_string(),
            ..HttpRequest::default()
        }
    }

    /// Adds a header after those already there.
    pub fn header(mut self, name: &str, value: &str) -> HttpRequest {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Sets the body.
    pub fn body<B: Into<Vec<u8>>>(mut self, body: B) -> HttpRequest {
        self.body = body.into();
        self
    }
}

/// The answer to an HTTP request. An HTTP error status (4xx, 5xx) is a
/// successful call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpResponse {
    pub status: u16,
    /// The headers, sorted by name by the reference host, values of one
    /// name in their order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The host cut the body at its limit (8 MiB on the reference host).
    pub truncated: bool,
}

impl HttpResponse {
    /// The first value of the header name, compared without regard to
    /// ASCII case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Performs req (`http.request`). It is an effect: journaled before it is
/// sent, with an `Idempotency-Key` header the host derives from the run and
/// the step. It is not idempotent, so after a crash in flight it is
/// `Error::InDoubt` rather than sent twice (unless the grant says the
/// servers honour the key). A host outside the grant is `Error::Denied`; a
/// network error `Error::Failed`. The host does not follow redirects: the
/// agent sees the 3xx response.
pub fn http_request(req: &HttpRequest) -> Result<HttpResponse> {
    let has_body = !req.body.is_empty();
    let has_headers = !req.headers.is_empty();
    // "url" (3 bytes), "body" (4), "method" (6), "headers" (7); body and
    // headers are omitempty.
    let mut w = request(2 + has_body as usize + has_headers as usize);
    w.text("url");
    w.text(&req.url);
    if has_body {
        w.text("body");
        w.bytes(Some(&req.body));
    }
    w.text("method");
    w.text(&req.method);
    if has_headers {
        w.text("headers");
        w.array(req.headers.len());
        for (name, value) in &req.headers {
            w.array(2);
            w.text(name);
            w.text(value);
        }
    }
    let body = T.round_trip(OP_REQUEST, &w.buf)?;
    decode_response(&body).map_err(|_| malformed("http.request"))
}

/// A GET of url.
pub fn http_get(url: &str) -> Result<HttpResponse> {
    http_request(&HttpRequest::new("GET", url))
}

fn decode_response(b: &[u8]) -> Res<HttpResponse> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut out = HttpResponse::default();
    if !m.empty {
        r.want(&mut m, "body")?;
        out.body = r.bytes()?.unwrap_or_default().to_vec();
        r.want(&mut m, "status")?;
        out.status = r.uint(u16::MAX as u64)? as u16;
        r.want(&mut m, "headers")?;
        // A header is [name, value]: at least three bytes.
        let n = r.array(3)?;
        let mut headers = Vec::with_capacity(n);
        for _ in 0..n {
            if r.head()? != (4, 2) {
                return Err(Bad);
            }
            let name = r.text()?.to_string();
            let value = r.text()?.to_string();
            headers.push((name, value));
        }
        out.headers = headers;
        // truncated is omitempty: present only when true.
        out.truncated = r.opt_bool(&mut m, "truncated")?;
    }
    r.end(&m)?;
    Ok(out)
}
