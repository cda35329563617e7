//! A small HTTP/1.1 client for simulated annotators (`stepwise bench annotate`, the pilot study): one kept-alive
//! connection per person, form posts, the session cookie, `Content-Length` and chunked bodies. Only what this
//! server speaks; not a general client.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Largest response body read (pages are a few kilobytes).
const MAX_BODY: usize = 8 << 20;

#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub location: Option<String>,
    pub body: String,
}

pub struct Client {
    addr: SocketAddr,
    conn: Option<BufReader<TcpStream>>,
    pub cookie: String,
    timeout: Duration,
}

fn io_error(m: impl Into<String>) -> std::io::Error {
    std::io::Error::other(m.into())
}

impl Client {
    pub fn new(addr: SocketAddr) -> Client {
        Client { addr, conn: None, cookie: String::new(), timeout: Duration::from_secs(30) }
    }

    /// Talk to another address from now on (a restarted server); the connection is reopened.
    pub fn set_addr(&mut self, addr: SocketAddr) {
        if addr != self.addr {
            self.addr = addr;
            self.conn = None;
        }
    }

    pub async fn get(&mut self, path: &str) -> std::io::Result<Reply> {
        self.request("GET", path, None).await
    }

    pub async fn post_form(&mut self, path: &str, form: &str) -> std::io::Result<Reply> {
        self.request("POST", path, Some(form)).await
    }

    /// One request on the kept-alive connection (opened when needed). Any I/O failure drops the connection, so
    /// the caller may retry.
    pub async fn request(&mut self, method: &str, path: &str, form: Option<&str>) -> std::io::Result<Reply> {
        let result = tokio::time::timeout(self.timeout, self.exchange(method, path, form)).await;
        match result {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => {
                self.conn = None;
                Err(e)
            }
            Err(_) => {
                self.conn = None;
                Err(io_error(format!("{method} {path}: no answer within {:?}", self.timeout)))
            }
        }
    }

    async fn exchange(&mut self, method: &str, path: &str, form: Option<&str>) -> std::io::Result<Reply> {
        if self.conn.is_none() {
            let s = TcpStream::connect(self.addr).await?;
            s.set_nodelay(true)?;
            self.conn = Some(BufReader::new(s));
        }
        let conn = self.conn.as_mut().ok_or_else(|| io_error("no connection"))?;
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: keep-alive\r\n", self.addr);
        if !self.cookie.is_empty() {
            head.push_str(&format!("Cookie: {}\r\n", self.cookie));
        }
        let body = form.unwrap_or("");
        if form.is_some() {
            head.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let stream = conn.get_mut();
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.flush().await?;

        let mut line = String::new();
        if conn.read_line(&mut line).await? == 0 {
            return Err(io_error("connection closed before a status line"));
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| io_error(format!("bad status line {line:?}")))?;
        let (mut length, mut chunked, mut close, mut location) = (None, false, false, None);
        let mut cookies = Vec::new();
        loop {
            line.clear();
            if conn.read_line(&mut line).await? == 0 {
                return Err(io_error("connection closed in the headers"));
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let Some((k, v)) = l.split_once(':') else { continue };
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            match k.as_str() {
                "content-length" => length = v.parse::<usize>().ok(),
                "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
                "connection" => close = v.eq_ignore_ascii_case("close"),
                "location" => location = Some(v.to_string()),
                "set-cookie" => {
                    if let Some(kv) = v.split(';').next()
                        && let Some((name, value)) = kv.split_once('=')
                    {
                        cookies.push((name.trim().to_string(), value.trim().to_string()));
                    }
                }
                _ => {}
            }
        }
        for (name, value) in cookies {
            self.set_cookie(&name, &value);
        }
        let conn = self.conn.as_mut().ok_or_else(|| io_error("no connection"))?;
        let mut bytes = Vec::new();
        if chunked {
            loop {
                line.clear();
                conn.read_line(&mut line).await?;
                let size = usize::from_str_radix(line.trim(), 16).map_err(|_| io_error("bad chunk size"))?;
                if bytes.len() + size > MAX_BODY {
                    return Err(io_error("response body too large"));
                }
                let start = bytes.len();
                bytes.resize(start + size, 0);
                conn.read_exact(&mut bytes[start..]).await?;
                line.clear();
                conn.read_line(&mut line).await?;
                if size == 0 {
                    break;
                }
            }
        } else if let Some(n) = length {
            if n > MAX_BODY {
                return Err(io_error("response body too large"));
            }
            bytes.resize(n, 0);
            conn.read_exact(&mut bytes).await?;
        } else {
            conn.read_to_end(&mut bytes).await?;
            close = true;
        }
        if close {
            self.conn = None;
        }
        Ok(Reply { status, location, body: String::from_utf8_lossy(&bytes).into_owned() })
    }

    fn set_cookie(&mut self, name: &str, value: &str) {
        let mut kept: Vec<String> = self
            .cookie
            .split("; ")
            .filter(|c| !c.is_empty() && !c.starts_with(&format!("{name}=")))
            .map(str::to_string)
            .collect();
        if !value.is_empty() {
            kept.push(format!("{name}={value}"));
        }
        self.cookie = kept.join("; ");
    }
}

/// The value of `name="FIELD" value="..."` in a page (hidden form fields).
pub fn form_value<'a>(html: &'a str, field: &str) -> Option<&'a str> {
    let key = format!("name=\"{field}\" value=\"");
    let i = html.find(&key)? + key.len();
    let j = html[i..].find('"')? + i;
    Some(&html[i..j])
}

/// The assignment id of the work form on a page.
pub fn work_form(html: &str) -> Option<i64> {
    let key = "action=\"/work/";
    let i = html.find(key)? + key.len();
    let j = html[i..].find('"')? + i;
    html[i..j].parse().ok()
}

/// "item K of N" on a work page.
pub fn item_of(html: &str) -> Option<(usize, usize)> {
    let i = html.find("item ")? + 5;
    let rest = &html[i..];
    let (k, rest) = rest.split_once(" of ")?;
    let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((k.trim().parse().ok()?, n.parse().ok()?))
}
