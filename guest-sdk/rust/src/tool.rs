//! The tool capability (`agentrt:tool`): native programs the grant
//! registers, run under the host's OS sandbox (abi/SPEC.md section 9.13).

use crate::cbor::{Bad, Reader, Res};
use crate::transport::{malformed, request, tool, Transport};
use crate::Result;

const OP_RUN: u32 = 1;

const T: Transport = tool::T;

/// A run of the tool the grant registers as `name`: `args` come after the
/// grant's fixed arguments, each one argv element, and `stdin` is the
/// tool's standard input (empty by default).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolRequest {
    pub name: String,
    pub args: Vec<String>,
    pub stdin: Vec<u8>,
}

impl ToolRequest {
    /// A run of name with args and an empty standard input.
    pub fn new<S: AsRef<str>>(name: &str, args: &[S]) -> ToolRequest {
        ToolRequest {
            name: name.to_string(),
            args: args.iter().map(|a| a.as_ref().to_string()).collect(),
            stdin: Vec::new(),
        }
    }

    /// Sets the tool's standard input.
    pub fn stdin<B: Into<Vec<u8>>>(mut self, stdin: B) -> ToolRequest {
        self.stdin = stdin.into();
        self
    }
}

/// A regular file the tool created or changed in its read-write area.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolFile {
    /// The name's bytes, as the tool made them: relative to the tool's
    /// working directory when beneath it ('/'-separated), else absolute. A
    /// file name need not be UTF-8; [`ToolFile::path_str`] gives it as text
    /// when it is.
    pub path: Vec<u8>,
    /// The file's size in bytes (or what was hashed of it, when it shrank
    /// meanwhile).
    pub size: u64,
    /// SHA-256 of the file's content; None when the host did not hash it,
    /// and then `unhashed` says why.
    pub sha256: Option<[u8; 32]>,
    /// Why there is no hash: "sparse" (the file has holes, which the host
    /// does not read), "hash" (the tool's hash limit was spent), "stopped"
    /// (the run was stopped while the host hashed), or a reason a later
    /// host gives. Empty when `sha256` is set.
    pub unhashed: String,
}

impl ToolFile {
    /// The path as text, when it is valid UTF-8.
    pub fn path_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.path).ok()
    }
}

/// How a tool's run ended.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolResult {
    /// The exit status; 128 + n for a tool ended by signal n.
    pub exit: i64,
    /// The signal that ended the tool ("SIGKILL"), or "".
    pub signal: String,
    /// At most the tool's output limit.
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The stream went past the output limit and was cut.
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// The wall-clock limit passed and every process of the tool was killed.
    pub timed_out: bool,
    /// The limits the tool ran into: "wall", "cpu", "memory", "processes",
    /// "file_size", "disk", "output", "files", "hash".
    pub limits: Vec<String>,
    /// The files written, sorted by path.
    pub files: Vec<ToolFile>,
}

/// Runs a native tool the grant registers (`tool.run`), under the host's OS
/// sandbox. Nothing goes through a shell: quotes, '*', '$' and ';' in an
/// argument reach the tool as they are. The host checks every argument
/// against the tool's schema first: `Error::Denied`, with a message naming
/// the argument and the rule, and nothing runs.
///
/// A tool that ran is a success whatever its exit status: read
/// `ToolResult::exit` (and `timed_out`, `limits`). The call is an effect,
/// journaled before the tool starts; if the run crashes while the tool
/// runs, a resume runs it again only when the grant declares it
/// idempotent, and otherwise answers `Error::InDoubt`. `Error::Failed`: the
/// sandbox could not be set up and the tool did not run.
pub fn tool_run(req: &ToolRequest) -> Result<ToolResult> {
    let has_args = !req.args.is_empty();
    let has_stdin = !req.stdin.is_empty();
    // "args" and "name" (4 bytes, args first bytewise), "stdin" (5); args
    // and stdin are omitempty.
    let mut w = request(1 + has_args as usize + has_stdin as usize);
    if has_args {
        w.text("args");
        w.array(req.args.len());
        for a in &req.args {
            w.text(a);
        }
    }
    w.text("name");
    w.text(&req.name);
    if has_stdin {
        w.text("stdin");
        w.bytes(Some(&req.stdin));
    }
    let body = T.round_trip(OP_RUN, &w.buf)?;
    decode_result(&body).map_err(|_| malformed("tool.run"))
}

/// Runs the tool name with args: [`tool_run`] with an empty standard input.
pub fn tool<S: AsRef<str>>(name: &str, args: &[S]) -> Result<ToolResult> {
    tool_run(&ToolRequest::new(name, args))
}

fn decode_result(b: &[u8]) -> Res<ToolResult> {
    let mut r = Reader::new(b);
    let mut m = r.begin()?;
    let mut out = ToolResult::default();
    if !m.empty {
        r.want(&mut m, "exit")?;
        out.exit = r.int64()?;
        // files, limits, signal, timed_out and the *_truncated flags are
        // omitempty: present only when not empty (not false).
        if r.key(&mut m, "files") {
            out.files = decode_files(&mut r)?;
        }
        if r.key(&mut m, "limits") {
            out.limits = crate::texts(&mut r)?;
            if out.limits.is_empty() {
                return Err(Bad);
            }
        }
        out.signal = r.opt_text(&mut m, "signal")?;
        r.want(&mut m, "stderr")?;
        out.stderr = r.bytes()?.unwrap_or_default().to_vec();
        r.want(&mut m, "stdout")?;
        out.stdout = r.bytes()?.unwrap_or_default().to_vec();
        out.timed_out = true_flag(&mut r, &mut m, "timed_out")?;
        out.stderr_truncated = true_flag(&mut r, &mut m, "stderr_truncated")?;
        out.stdout_truncated = true_flag(&mut r, &mut m, "stdout_truncated")?;
    }
    r.end(&m)?;
    Ok(out)
}

/// Reads an omitempty flag: absent (false), or present and true.
fn true_flag(r: &mut Reader, m: &mut crate::cbor::Map, key: &str) -> Res<bool> {
    if !r.key(m, key) {
        return Ok(false);
    }
    if r.bool()? {
        Ok(true)
    } else {
        Err(Bad)
    }
}

/// Reads a non-empty list of tool-file maps (the field is omitempty).
fn decode_files(r: &mut Reader) -> Res<Vec<ToolFile>> {
    // A file is a map of three pairs: at least 18 bytes.
    let n = r.nonempty_array(18)?;
    let mut files = Vec::with_capacity(n);
    for _ in 0..n {
        let mut m = r.map()?;
        let mut f = ToolFile::default();
        r.want(&mut m, "path")?;
        f.path = decode_name(r)?;
        r.want(&mut m, "size")?;
        f.size = r.uint(u64::MAX)?;
        // "sha256" (6 bytes) before "unhashed" (8); exactly one of them.
        if r.key(&mut m, "sha256") {
            let h = r.bstr()?;
            f.sha256 = Some(<[u8; 32]>::try_from(h).map_err(|_| Bad)?);
        } else {
            r.want(&mut m, "unhashed")?;
            f.unhashed = r.text()?.to_string();
            if f.unhashed.is_empty() {
                return Err(Bad);
            }
        }
        r.close(&m)?;
        files.push(f);
    }
    Ok(files)
}

/// Reads a file name: a text string, or a byte string holding a name that
/// is not UTF-8 (one that is would be a text string: a byte string holding
/// UTF-8 is not canonical).
fn decode_name(r: &mut Reader) -> Res<Vec<u8>> {
    if r.peek_major() == Some(2) {
        let b = r.bstr()?;
        if std::str::from_utf8(b).is_ok() {
            return Err(Bad);
        }
        return Ok(b.to_vec());
    }
    Ok(r.text()?.as_bytes().to_vec())
}
