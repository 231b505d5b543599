//! The driver of the ABI vector tests (internal/sdkvectors/rusttest). It reads one command per
//! line on stdin, makes the SDK call the command names, and prints one line
//! per command on stdout: what the call returned, rendered as the Go test
//! renders the value it decoded from the same bytes. The Go test's stub
//! host checks the request bytes each call sends. The protocol is the C
//! driver's (guest-sdk/c/testdata/vectors.c), so one harness
//! (internal/sdkvectors) drives both.
//!
//! Commands (tokens separated by one space):
//!   statuses                 print every ABI status: "0:ok 1:pending ..."
//!   <op> <args...>           call the op, e.g. "kv.put x6b -"
//! Argument tokens: "x<hex>" is text or bytes (hex may be empty), "-" is a
//! null byte string, anything else a decimal number.
//! Output: "ok <fields...>" or "status <code> x<hex message>".
//!
//! The first argument is the size of the SDK's response buffer.

use std::fmt::Write as _;
use std::io::{Read, Write};

struct Args<'a> {
    toks: std::slice::Iter<'a, &'a str>,
}

fn die(msg: &str) -> ! {
    eprintln!("vectors: {}", msg);
    std::process::exit(2)
}

fn unhex(t: &str) -> Vec<u8> {
    let h = t
        .strip_prefix('x')
        .unwrap_or_else(|| die("argument is not x<hex>"));
    if h.len() % 2 == 1 {
        die("odd hex");
    }
    (0..h.len() / 2)
        .map(|i| {
            u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap_or_else(|_| die("bad hex digit"))
        })
        .collect()
}

impl<'a> Args<'a> {
    fn next(&mut self) -> &'a str {
        self.toks.next().unwrap_or_else(|| die("missing argument"))
    }

    /// Bytes, or None for "-".
    fn bytes(&mut self) -> Option<Vec<u8>> {
        match self.next() {
            "-" => None,
            t => Some(unhex(t)),
        }
    }

    fn text(&mut self) -> String {
        let b = self.bytes().unwrap_or_else(|| die("text argument is -"));
        String::from_utf8(b).unwrap_or_else(|_| die("text argument is not UTF-8"))
    }

    fn uint(&mut self) -> u64 {
        self.next().parse().unwrap_or_else(|_| die("not a number"))
    }
}

/// Renders bytes as x<hex>.
fn view(out: &mut String, b: &[u8]) {
    out.push_str(" x");
    for c in b {
        write!(out, "{:02x}", c).unwrap();
    }
}

fn flag(out: &mut String, b: bool) {
    out.push_str(if b { " true" } else { " false" });
}

/// The line for a call's outcome: "ok" and the fields render adds, or the
/// status and message of the error.
fn line<T>(res: agentrt::Result<T>, render: impl FnOnce(&mut String, T)) -> String {
    match res {
        Ok(v) => {
            let mut out = String::from("ok");
            render(&mut out, v);
            out
        }
        Err(e) => {
            let mut out = format!("status {}", e.status());
            view(&mut out, e.message().as_bytes());
            out
        }
    }
}

fn run(op: &str, a: &mut Args) -> String {
    match op {
        "statuses" => {
            let names: Vec<String> = (0..64)
                .filter_map(|i| agentrt::status::name(i).map(|n| format!("{}:{}", i, n)))
                .collect();
            names.join(" ")
        }
        "run.input" => line(agentrt::run_input(), |o, r| {
            view(o, r.input.as_deref().unwrap_or_default());
            view(o, &r.state);
            write!(o, " {}", r.segment).unwrap();
        }),
        "run.checkpoint" => line(agentrt::checkpoint(a.bytes()), |_, ()| {}),
        "run.set_output" => line(agentrt::set_output(a.bytes()), |_, ()| {}),
        "run.log" => {
            let level = a.uint();
            let level = u8::try_from(level).unwrap_or_else(|_| die("level is not a u8"));
            line(agentrt::log(agentrt::Level(level), &a.text()), |_, ()| {})
        }
        "run.limit" => {
            let n = a.uint();
            let limits: Vec<agentrt::BudgetLimit> = (0..n)
                .map(|_| agentrt::BudgetLimit {
                    dim: a.text(),
                    amount: a.uint(),
                })
                .collect();
            line(agentrt::limit(&limits), |o, cs| {
                write!(o, " {}", cs.len()).unwrap();
                for c in &cs {
                    view(o, c.dim.as_bytes());
                    write!(o, " {}", c.amount).unwrap();
                }
            })
        }
        "run.introspect" => line(agentrt::introspect(), |o, r| {
            write!(o, " {} {}", r.abi, r.steps).unwrap();
            view(o, r.run_id.as_bytes());
            write!(o, " {}", r.capabilities.len()).unwrap();
            for c in &r.capabilities {
                view(o, c.as_bytes());
            }
            view(o, &r.module_sha256);
        }),
        "run.self" => line(agentrt::whoami(), |o, r| {
            write!(o, " {}", r.abi).unwrap();
            view(o, r.cell.as_bytes());
            view(o, r.task.as_bytes());
            write!(o, " {}", r.depth).unwrap();
            view(o, r.parent.as_bytes());
            view(o, r.run_id.as_bytes());
            write!(o, " {} {}", r.attempt, r.parent_step).unwrap();
            view(o, &r.module_sha256);
        }),
        "run.self_caps" => line(agentrt::my_caps(), |o, r| {
            view(o, r.caps.as_bytes());
            view(o, r.budget.as_bytes());
            write!(o, " {}", r.capabilities.len()).unwrap();
            for c in &r.capabilities {
                view(o, c.as_bytes());
            }
        }),
        "run.self_may" => {
            let op = a.text();
            line(agentrt::may_i(&op, a.bytes().as_deref()), |o, r| {
                view(o, r.stage.as_bytes());
                view(o, r.reason.as_bytes());
                write!(o, " {}", r.status).unwrap();
                view(o, r.decision.as_bytes());
            })
        }
        "run.self_budget" => line(agentrt::my_budget(), |o, dims| {
            write!(o, " {}", dims.len()).unwrap();
            for d in &dims {
                view(o, d.dim.as_bytes());
                write!(o, " {} {} {}", d.left, d.spent, d.ceiling).unwrap();
                flag(o, d.limited);
                write!(o, " {} {}", d.children, d.reserved).unwrap();
            }
        }),
        "run.self_mode" => line(agentrt::my_mode(), |o, r| {
            view(o, r.mode.as_bytes());
            flag(o, r.modes);
            write!(o, " {}", r.rules.len()).unwrap();
            for m in &r.rules {
                view(o, m.op.as_bytes());
                view(o, m.name.as_bytes());
                view(o, m.effect.as_bytes());
                view(o, m.method.as_bytes());
                view(o, m.resource.as_bytes());
            }
            view(o, r.default.as_bytes());
        }),
        "run.self_journal" => {
            let q = agentrt::JournalQuery {
                op: a.text(),
                from: a.uint(),
                limit: u32::try_from(a.uint()).unwrap_or_else(|_| die("limit is not a u32")),
                phase: a.text(),
            };
            line(agentrt::my_journal(&q), |o, p| {
                write!(o, " {} {}", p.next, p.entries.len()).unwrap();
                for e in &p.entries {
                    view(o, e.op.as_bytes());
                    write!(o, " {}", e.seq).unwrap();
                    view(o, &e.hash);
                    write!(o, " {}", e.step).unwrap();
                    view(o, e.phase.as_bytes());
                    view(o, &e.input);
                    view(o, &e.output);
                    write!(o, " {}", e.status).unwrap();
                }
            })
        }
        "kv.get" => line(agentrt::kv_get(&a.text()), |o, v| view(o, &v)),
        "kv.put" => {
            let key = a.text();
            line(agentrt::kv_put(&key, a.bytes()), |_, ()| {})
        }
        "kv.delete" => line(agentrt::kv_delete(&a.text()), flag),
        "kv.list" => {
            let (prefix, after) = (a.text(), a.text());
            let limit = u32::try_from(a.uint()).unwrap_or_else(|_| die("limit is not a u32"));
            line(agentrt::kv_list(&prefix, &after, limit), |o, l| {
                write!(o, " {}", l.keys.len()).unwrap();
                for k in &l.keys {
                    view(o, k.as_bytes());
                }
                flag(o, l.more);
            })
        }
        "http.request" => {
            let mut req = agentrt::HttpRequest::new(&a.text(), &a.text());
            for _ in 0..a.uint() {
                req = req.header(&a.text(), &a.text());
            }
            req.body = a.bytes().unwrap_or_default();
            line(agentrt::http_request(&req), |o, r| {
                write!(o, " {} {}", r.status, r.headers.len()).unwrap();
                for (n, v) in &r.headers {
                    view(o, n.as_bytes());
                    view(o, v.as_bytes());
                }
                view(o, &r.body);
                flag(o, r.truncated);
            })
        }
        "clock.now" => line(agentrt::now_unix_nano(), |o, t| {
            write!(o, " {}", t).unwrap()
        }),
        "random.bytes" => {
            let n = u32::try_from(a.uint()).unwrap_or_else(|_| die("n is not a u32"));
            line(agentrt::random_bytes(n), |o, b| view(o, &b))
        }
        "tool.run" => {
            let name = a.text();
            let args: Vec<String> = (0..a.uint()).map(|_| a.text()).collect();
            let req = agentrt::ToolRequest::new(&name, &args).stdin(a.bytes().unwrap_or_default());
            line(agentrt::tool_run(&req), |o, r| {
                write!(o, " {}", r.exit).unwrap();
                view(o, r.signal.as_bytes());
                view(o, &r.stdout);
                view(o, &r.stderr);
                flag(o, r.stdout_truncated);
                flag(o, r.stderr_truncated);
                flag(o, r.timed_out);
                write!(o, " {}", r.limits.len()).unwrap();
                for l in &r.limits {
                    view(o, l.as_bytes());
                }
                write!(o, " {}", r.files.len()).unwrap();
                for f in &r.files {
                    view(o, &f.path);
                    flag(o, f.path_str().is_none());
                    write!(o, " {}", f.size).unwrap();
                    view(o, f.sha256.as_ref().map(|h| &h[..]).unwrap_or_default());
                    view(o, f.unhashed.as_bytes());
                }
            })
        }
        "timer.sleep" => {
            // "timer.sleep x<for|until> NS": the field the request sets.
            let field = a.text();
            let ns = a.uint();
            let res = match field.as_str() {
                "for" => agentrt::sleep(std::time::Duration::from_nanos(ns)),
                "until" => agentrt::sleep_until(
                    std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns),
                ),
                _ => die("timer.sleep takes for or until"),
            };
            line(res, |o, w| write!(o, " {} {}", w.due, w.woke).unwrap())
        }
        "approval.request" => {
            let (action, group) = (a.text(), a.text());
            line(agentrt::request_approval(&action, &group), |o, r| {
                flag(o, r.approved);
                view(o, &r.digest);
                view(o, r.reason.as_bytes());
                write!(o, " {}", r.approvers.len()).unwrap();
                for n in &r.approvers {
                    view(o, n.as_bytes());
                }
            })
        }
        _ => die("unknown command"),
    }
}

fn main() {
    let hint = std::env::args()
        .nth(1)
        .unwrap_or_else(|| die("no response buffer size argument"));
    agentrt::set_response_buffer(
        hint.parse()
            .unwrap_or_else(|_| die("the buffer size is not a number")),
    );
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .unwrap_or_else(|_| die("stdin is not UTF-8"));
    if !input.is_empty() && !input.ends_with('\n') {
        die("the last line lacks a newline");
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for l in input.lines() {
        let toks: Vec<&str> = l.split(' ').collect();
        let mut a = Args {
            toks: toks[1..].iter(),
        };
        let res = run(toks[0], &mut a);
        if a.toks.next().is_some() {
            die("unused arguments");
        }
        writeln!(out, "{}", res).unwrap();
    }
    out.flush().unwrap();
}
