//! Asks the host every call of the run.self family, through the SDK's typed
//! functions and once through `self_call`, and writes what they decoded as
//! the run's output, one line per call, for the test to check against the
//! host's own view of the run.

use std::fmt::Write as _;

fn hex(b: &[u8]) -> String {
    b.iter().map(|c| format!("{:02x}", c)).collect()
}

fn main() {
    agentrt::main(|_input| {
        let mut out = String::new();
        let me = agentrt::whoami()?;
        writeln!(
            out,
            "whoami abi={} run={} cell={} depth={} parent={} task={} attempt={} sha={}",
            me.abi,
            me.run_id,
            me.cell,
            me.depth,
            me.parent,
            me.task,
            me.attempt,
            hex(&me.module_sha256)
        )?;
        let caps = agentrt::my_caps()?;
        writeln!(
            out,
            "caps {} budget={} json={}",
            caps.capabilities.join(","),
            caps.budget,
            caps.caps.len()
        )?;
        // {"key": "a"}: a kv.get this run, granted run alone, may not make.
        let get = [0xa1, 0x63, b'k', b'e', b'y', 0x61, b'a'];
        let may = agentrt::may_i("kv.get", Some(&get))?;
        writeln!(
            out,
            "may kv.get decision={} stage={} status={} reason={}",
            may.decision, may.stage, may.status, may.reason
        )?;
        let dims = agentrt::my_budget()?;
        let steps = dims.iter().find(|d| d.dim == "steps");
        writeln!(
            out,
            "budget dims={} first={} steps.spent={} steps.limited={}",
            dims.len(),
            dims.first().map(|d| d.dim.as_str()).unwrap_or(""),
            steps.map(|d| d.spent).unwrap_or(u64::MAX),
            steps.map(|d| d.limited).unwrap_or(true)
        )?;
        let mode = agentrt::my_mode()?;
        writeln!(
            out,
            "mode {} modes={} rules={}",
            mode.mode,
            mode.modes,
            mode.rules.len()
        )?;
        let page = agentrt::my_journal(&agentrt::JournalQuery {
            phase: "completed".into(),
            ..Default::default()
        })?;
        let ops: Vec<String> = page
            .entries
            .iter()
            .map(|e| format!("{}@{}", e.op, e.seq))
            .collect();
        writeln!(out, "journal next={} {}", page.next, ops.join(","))?;
        match agentrt::my_journal(&agentrt::JournalQuery {
            limit: agentrt::MAX_JOURNAL_PAGE + 1,
            ..Default::default()
        }) {
            Ok(p) => writeln!(out, "over the cap: answered {} entries", p.entries.len())?,
            Err(e) => writeln!(out, "over the cap: {}", e)?,
        }
        let raw = agentrt::self_call(7, &[])?;
        writeln!(out, "raw run.self {} bytes", raw.len())?;
        Ok(out.into_bytes())
    })
}
