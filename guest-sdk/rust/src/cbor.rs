//! Canonical CBOR as abi/SPEC.md section 6 defines it: a writer for
//! requests and a strict reader for responses, by hand, since the crate has
//! no dependencies.
//!
//! The reader walks a body's fields in canonical order (keys sorted by their
//! encoded bytes, optional fields present exactly when not zero, every other
//! field present): accepting nothing but that one order rejects unsorted,
//! duplicate, unknown and missing keys in one rule. It never panics and
//! never allocates for a count the body cannot hold.

/// Most items an array or map may hold (abi/SPEC.md section 7).
pub(crate) const MAX_ITEMS: u64 = 65536;

const NULL: u8 = 0xf6;

/// Writes one canonical data item.
pub(crate) struct Writer {
    pub(crate) buf: Vec<u8>,
}

impl Writer {
    pub(crate) fn new() -> Writer {
        Writer { buf: Vec::new() }
    }

    /// Writes a major type and its argument in the shortest form.
    pub(crate) fn head(&mut self, major: u8, v: u64) {
        let m = major << 5;
        if v < 24 {
            self.buf.push(m | v as u8);
        } else if v <= 0xff {
            self.buf.push(m | 24);
            self.buf.push(v as u8);
        } else if v <= 0xffff {
            self.buf.push(m | 25);
            self.buf.extend_from_slice(&(v as u16).to_be_bytes());
        } else if v <= 0xffff_ffff {
            self.buf.push(m | 26);
            self.buf.extend_from_slice(&(v as u32).to_be_bytes());
        } else {
            self.buf.push(m | 27);
            self.buf.extend_from_slice(&v.to_be_bytes());
        }
    }

    pub(crate) fn map(&mut self, pairs: usize) {
        self.head(5, pairs as u64);
    }

    pub(crate) fn array(&mut self, items: usize) {
        self.head(4, items as u64);
    }

    pub(crate) fn uint(&mut self, v: u64) {
        self.head(0, v);
    }

    /// Writes a text string; a &str is UTF-8 by construction.
    pub(crate) fn text(&mut self, s: &str) {
        self.head(3, s.len() as u64);
        self.buf.extend_from_slice(s.as_bytes());
    }

    /// Writes a byte string, or null for None: the two are different
    /// values (Go's nil and empty slices) with different bytes.
    pub(crate) fn bytes(&mut self, b: Option<&[u8]>) {
        match b {
            None => self.buf.push(NULL),
            Some(b) => {
                self.head(2, b.len() as u64);
                self.buf.extend_from_slice(b);
            }
        }
    }
}

/// A body that breaks the ABI's encoding rules or its type.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Bad;

pub(crate) type Res<T> = Result<T, Bad>;

/// Reads one body strictly.
pub(crate) struct Reader<'a> {
    b: &'a [u8],
    p: usize,
}

/// The fields of a map being read: how many pairs are left.
pub(crate) struct Map {
    pairs: u64,
    /// The body was empty: the zero value, with no fields at all.
    pub(crate) empty: bool,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { b, p: 0 }
    }

    fn left(&self) -> usize {
        self.b.len() - self.p
    }

    /// The major type of the next item, without consuming it.
    pub(crate) fn peek_major(&self) -> Option<u8> {
        self.b.get(self.p).map(|ib| ib >> 5)
    }

    /// Reads an item head. It rejects what canonical ABI CBOR never holds:
    /// arguments not in their shortest form, indefinite lengths, reserved
    /// values, tags, floats and simple values other than false, true and
    /// null (returned as major 7 with 20, 21 and 22).
    pub(crate) fn head(&mut self) -> Res<(u8, u64)> {
        let ib = *self.b.get(self.p).ok_or(Bad)?;
        self.p += 1;
        let (major, ai) = (ib >> 5, ib & 31);
        let mut v = ai as u64;
        if ai >= 24 {
            if ai > 27 || major == 7 {
                return Err(Bad);
            }
            let n = 1usize << (ai - 24);
            if self.left() < n {
                return Err(Bad);
            }
            v = 0;
            for &byte in &self.b[self.p..self.p + n] {
                v = v << 8 | byte as u64;
            }
            self.p += n;
            const MIN: [u64; 4] = [24, 0x100, 0x1_0000, 0x1_0000_0000];
            if v < MIN[(ai - 24) as usize] {
                return Err(Bad);
            }
        }
        if major == 6 || (major == 7 && !(20..=22).contains(&v)) {
            return Err(Bad);
        }
        Ok((major, v))
    }

    /// Reads an unsigned integer of at most max.
    pub(crate) fn uint(&mut self, max: u64) -> Res<u64> {
        match self.head()? {
            (0, v) if v <= max => Ok(v),
            _ => Err(Bad),
        }
    }

    /// Reads an int64: major type 0 or 1 within the signed 64-bit range.
    pub(crate) fn int64(&mut self) -> Res<i64> {
        match self.head()? {
            (0, v) if v <= i64::MAX as u64 => Ok(v as i64),
            (1, v) if v <= i64::MAX as u64 => Ok(-1 - v as i64),
            _ => Err(Bad),
        }
    }

    pub(crate) fn bool(&mut self) -> Res<bool> {
        match self.head()? {
            (7, 20) => Ok(false),
            (7, 21) => Ok(true),
            _ => Err(Bad),
        }
    }

    /// Reads a string of the given major type (2 bytes, 3 text); with
    /// nullable, null reads as None.
    fn string(&mut self, want: u8, nullable: bool) -> Res<Option<&'a [u8]>> {
        let (major, n) = self.head()?;
        if major == 7 && n == 22 && nullable {
            return Ok(None);
        }
        if major != want || n > self.left() as u64 {
            return Err(Bad);
        }
        let s = &self.b[self.p..self.p + n as usize];
        self.p += n as usize;
        Ok(Some(s))
    }

    /// Reads a text string; Rust's UTF-8 check is Go's utf8.Valid: no
    /// overlong forms, no surrogates, nothing above U+10FFFF.
    pub(crate) fn text(&mut self) -> Res<&'a str> {
        let s = self.string(3, false)?.ok_or(Bad)?;
        std::str::from_utf8(s).map_err(|_| Bad)
    }

    /// Reads a byte string or null (None).
    pub(crate) fn bytes(&mut self) -> Res<Option<&'a [u8]>> {
        self.string(2, true)
    }

    /// Reads a byte string that is not null.
    pub(crate) fn bstr(&mut self) -> Res<&'a [u8]> {
        self.string(2, false)?.ok_or(Bad)
    }

    /// Reads an array head, or null as no items. min_item is the fewest
    /// bytes one item takes, to refuse counts the body cannot hold before
    /// anything is allocated for them.
    pub(crate) fn array(&mut self, min_item: u64) -> Res<usize> {
        match self.head()? {
            (7, 22) => Ok(0),
            (4, n) if n <= MAX_ITEMS && n * min_item <= self.left() as u64 => Ok(n as usize),
            _ => Err(Bad),
        }
    }

    /// Reads an array head that must not be null (an omitempty list, present
    /// only when it has items).
    pub(crate) fn nonempty_array(&mut self, min_item: u64) -> Res<usize> {
        match self.head()? {
            (4, n) if (1..=MAX_ITEMS).contains(&n) && n * min_item <= self.left() as u64 => {
                Ok(n as usize)
            }
            _ => Err(Bad),
        }
    }

    /// Starts a body. The empty body is the zero value of every type.
    pub(crate) fn begin(&mut self) -> Res<Map> {
        if self.left() == 0 {
            return Ok(Map {
                pairs: 0,
                empty: true,
            });
        }
        self.map()
    }

    /// Reads a map head (a map nested in a body).
    pub(crate) fn map(&mut self) -> Res<Map> {
        match self.head()? {
            (5, n) if n <= MAX_ITEMS => Ok(Map {
                pairs: n,
                empty: false,
            }),
            _ => Err(Bad),
        }
    }

    /// Consumes the next key of m if it is name, an ABI v1 key, so shorter
    /// than 24 bytes and encoded with a one-byte head.
    pub(crate) fn key(&mut self, m: &mut Map, name: &str) -> bool {
        let n = name.len();
        let rest = &self.b[self.p..];
        if m.pairs == 0
            || rest.len() < n + 1
            || rest[0] != 0x60 + n as u8
            || &rest[1..n + 1] != name.as_bytes()
        {
            return false;
        }
        self.p += n + 1;
        m.pairs -= 1;
        true
    }

    /// Consumes key name, which must come next.
    pub(crate) fn want(&mut self, m: &mut Map, name: &str) -> Res<()> {
        if self.key(m, name) {
            Ok(())
        } else {
            Err(Bad)
        }
    }

    /// Reads the omitempty text field name of m: "" when absent, and
    /// present only when not empty.
    pub(crate) fn opt_text(&mut self, m: &mut Map, name: &str) -> Res<String> {
        if !self.key(m, name) {
            return Ok(String::new());
        }
        match self.text()? {
            "" => Err(Bad),
            s => Ok(s.to_string()),
        }
    }

    /// Reads the omitempty unsigned field name of m, at most max: 0 when
    /// absent, and present only when not 0.
    pub(crate) fn opt_uint(&mut self, m: &mut Map, name: &str, max: u64) -> Res<u64> {
        if !self.key(m, name) {
            return Ok(0);
        }
        match self.uint(max)? {
            0 => Err(Bad),
            v => Ok(v),
        }
    }

    /// Reads the omitempty byte-string field name of m: empty when
    /// absent, and present only when not empty (nor null).
    pub(crate) fn opt_bytes(&mut self, m: &mut Map, name: &str) -> Res<Vec<u8>> {
        if !self.key(m, name) {
            return Ok(Vec::new());
        }
        match self.bstr()? {
            [] => Err(Bad),
            b => Ok(b.to_vec()),
        }
    }

    /// Reads the omitempty bool field name of m: false when absent, and
    /// present only when true.
    pub(crate) fn opt_bool(&mut self, m: &mut Map, name: &str) -> Res<bool> {
        if !self.key(m, name) {
            return Ok(false);
        }
        if self.bool()? {
            Ok(true)
        } else {
            Err(Bad)
        }
    }

    /// Checks that every pair of a nested map was read.
    pub(crate) fn close(&self, m: &Map) -> Res<()> {
        if m.pairs == 0 {
            Ok(())
        } else {
            Err(Bad)
        }
    }

    /// Checks that every pair of the body's map was read and nothing
    /// follows it.
    pub(crate) fn end(&self, m: &Map) -> Res<()> {
        if m.pairs == 0 && self.p == self.b.len() {
            Ok(())
        } else {
            Err(Bad)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_shortest() {
        let cases: [(u64, &[u8]); 6] = [
            (0, &[0x00]),
            (23, &[0x17]),
            (24, &[0x18, 24]),
            (0x100, &[0x19, 1, 0]),
            (0x1_0000, &[0x1a, 0, 1, 0, 0]),
            (0x1_0000_0000, &[0x1b, 0, 0, 0, 1, 0, 0, 0, 0]),
        ];
        for (v, want) in cases {
            let mut w = Writer::new();
            w.uint(v);
            assert_eq!(w.buf, want, "{}", v);
            assert_eq!(Reader::new(want).uint(u64::MAX), Ok(v));
        }
        // 23 in a one-byte argument, 255 in two: not the shortest form.
        assert_eq!(Reader::new(&[0x18, 23]).uint(u64::MAX), Err(Bad));
        assert_eq!(Reader::new(&[0x19, 0, 0xff]).uint(u64::MAX), Err(Bad));
    }

    #[test]
    fn refuses_what_canonical_cbor_never_holds() {
        let bad: [&[u8]; 8] = [
            &[0x5f, 0xff], // indefinite byte string
            &[0xc0, 0x00], // tag
            &[0xf9, 0, 0], // half float
            &[0xf7],       // undefined
            &[0xf8, 0x20], // simple value in a byte
            &[0x1c],       // reserved additional information
            &[0x19, 0x01], // argument cut short
            &[],           // nothing
        ];
        for b in bad {
            assert_eq!(Reader::new(b).head(), Err(Bad), "{:x?}", b);
        }
    }

    #[test]
    fn int64_range() {
        assert_eq!(Reader::new(&[0x20]).int64(), Ok(-1));
        let min = [0x3b, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(Reader::new(&min).int64(), Ok(i64::MIN));
        let below = [0x3b, 0x80, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(Reader::new(&below).int64(), Err(Bad));
    }

    #[test]
    fn counts_the_body_cannot_hold() {
        // 65536 items announced, 2 bytes present.
        assert_eq!(
            Reader::new(&[0x9a, 0, 1, 0, 0, 0x60, 0x60]).array(1),
            Err(Bad)
        );
        assert_eq!(Reader::new(&[0x82, 0x60, 0x60]).array(1), Ok(2));
        assert_eq!(Reader::new(&[0x80]).nonempty_array(1), Err(Bad));
        assert_eq!(Reader::new(&[0xf6]).array(1), Ok(0));
    }

    #[test]
    fn text_must_be_utf8() {
        assert_eq!(Reader::new(&[0x62, 0xc3, 0xa9]).text(), Ok("é"));
        assert_eq!(Reader::new(&[0x61, 0xff]).text(), Err(Bad));
        // a surrogate half, U+D800, as Go's utf8.Valid refuses it
        assert_eq!(Reader::new(&[0x63, 0xed, 0xa0, 0x80]).text(), Err(Bad));
    }
}
