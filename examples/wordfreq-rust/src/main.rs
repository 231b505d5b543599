//! wordfreq counts the words of its input, keeps a running total of every
//! word it has ever counted in durable kv state, and outputs a JSON summary:
//!
//!   {"words":N,"distinct":M,"top":[["the",5],...],"total_words":T}
//!
//! A word is a maximal run of ASCII letters and digits and of non-ASCII
//! characters; ASCII letters are lowercased. The input must be UTF-8.
//!
//! It makes the calls examples/wordfreq-c makes, in the same order and
//! with the same bytes: the two journals are the same call for call.

use agentrt::{Error, Level};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::process::exit;

const TOP: usize = 10;
const TOTAL_KEY: &str = "total_words";

fn word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c >= 0x80
}

/// Logs why the run failed, as "what: status: message", and ends it with
/// exit status 1.
fn fail(what: &str, err: Error) -> ! {
    let name = agentrt::status::name(err.status()).unwrap_or("unknown");
    let _ = agentrt::log(
        Level::ERROR,
        &format!("{}: {}: {}", what, name, err.message()),
    );
    exit(1)
}

fn main() {
    let input = agentrt::input().unwrap_or_else(|e| fail("reading the input", e));
    if std::str::from_utf8(&input).is_err() {
        let _ = agentrt::log(Level::ERROR, "the input is not UTF-8 text");
        exit(1);
    }
    let text = input.to_ascii_lowercase();

    // Words and their counts; a BTreeMap keeps them in byte order, which
    // breaks ties between equal counts the same way on every run.
    let mut counts: BTreeMap<&[u8], u64> = BTreeMap::new();
    let mut words = 0u64;
    for word in text.split(|&c| !word_byte(c)).filter(|w| !w.is_empty()) {
        *counts.entry(word).or_insert(0) += 1;
        words += 1;
    }

    // The running total lives in kv under TOTAL_KEY, as decimal text. The
    // first run finds no key.
    let mut total = match agentrt::kv_get(TOTAL_KEY) {
        Ok(v) => match std::str::from_utf8(&v)
            .ok()
            .filter(|s| s.bytes().all(|c| c.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok())
        {
            Some(n) => n,
            None => {
                let _ = agentrt::log(
                    Level::ERROR,
                    &format!("kv key {} does not hold a decimal number", TOTAL_KEY),
                );
                exit(1)
            }
        },
        Err(Error::NotFound(_)) => 0,
        Err(e) => fail(&format!("reading {}", TOTAL_KEY), e),
    };
    total += words;
    agentrt::kv_put(TOTAL_KEY, total.to_string())
        .unwrap_or_else(|e| fail(&format!("writing {}", TOTAL_KEY), e));

    // Most frequent first; the sort is stable, so equal counts keep the
    // map's byte order.
    let mut top: Vec<(&[u8], u64)> = counts.iter().map(|(w, n)| (*w, *n)).collect();
    top.sort_by(|a, b| b.1.cmp(&a.1));

    let msg = format!(
        "counted {} words ({} distinct); {} in total",
        words,
        counts.len(),
        total
    );
    let _ = agentrt::log(Level::INFO, &msg);

    // Words need no JSON escaping: they hold no quote, backslash or control
    // character, and the input is valid UTF-8.
    let mut out = format!(
        "{{\"words\":{},\"distinct\":{},\"top\":[",
        words,
        counts.len()
    );
    for (i, (w, n)) in top.iter().take(TOP).enumerate() {
        let sep = if i > 0 { "," } else { "" };
        write!(out, "{}[\"{}\",{}]", sep, String::from_utf8_lossy(w), n).unwrap();
    }
    write!(out, "],\"total_words\":{}}}", total).unwrap();
    agentrt::set_output(out).unwrap_or_else(|e| fail("setting the output", e));
}
