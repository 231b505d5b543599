package cell

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Frames are how the API answers with stored bytes: journal records,
// event-log records, run index records, a bundle. JSON would re-encode
// them; records must travel exactly as stored, so that every seal verifies
// byte for byte where they arrive. An answer of framed bytes is
// FramesType, and its body a sequence of frames:
//
//	kind (1 byte) | length of the payload (4 bytes, big-endian) | payload
//
// Each item is one frame, of at most MaxFrame bytes, so a reader holds
// one item at a time however long the answer. The last frame is always
// an end frame, whose payload is a JSON FramesEnd: how many items came
// and, when the read failed after the answer began, the error (with the
// kinds it belongs to; a journal cut by damage is a gap). An answer that
// ends without one was cut (the daemon died, the connection broke): the
// reader fails with ErrCut and never takes what came for the whole.

// FramesType is the Content-Type of an answer made of frames.
const FramesType = "application/vnd.agentrt.frames"

// Frame kinds.
const (
	// frameRecord is one journal record: its seq (8 bytes, big-endian),
	// then its bytes as stored.
	frameRecord byte = 'r'
	// frameItem is one opaque item: an event-log record, a run index
	// record (canonical CBOR), or a chunk of a bundle.
	frameItem byte = 'i'
	// frameEnd ends the answer: a JSON FramesEnd.
	frameEnd byte = 'e'
)

// MaxFrame is the largest frame payload a reader takes: a journal record
// (at most 256 MiB, the bundle format's record limit) with its seq.
const MaxFrame = 256<<20 + 8

// maxEndFrame bounds the end frame's JSON.
const maxEndFrame = 1 << 20

// bundleChunk is the size of the frames a bundle is sent in.
const bundleChunk = 64 << 10

// ErrFrameTooLarge is returned when an item to be sent is over MaxFrame:
// the read fails, with the end frame saying so.
var ErrFrameTooLarge = errors.New("cell: an item is too large for one frame")

// ErrCut is returned when an answer of frames ends before its end frame,
// or holds a frame that is not one: what arrived is not the whole answer.
var ErrCut = errors.New("cell: the answer was cut short")

// FramesEnd is the payload of the end frame.
type FramesEnd struct {
	// Items is the number of record and item frames before it.
	Items uint64 `json:"items"`
	// Error is why the read failed after the answer began; nil when it
	// succeeded.
	Error *APIError `json:"error,omitempty"`
	// Status is the status the error would have had as an answer of its
	// own (404, 500, ...), for the client's RemoteError.Code.
	Status int `json:"status,omitempty"`
	// Export reports a bundle written whole (GET /v1/runs/{run}/bundle).
	Export *ExportInfo `json:"export,omitempty"`
}

// frameWriter writes frames to an answer.
type frameWriter struct {
	w     *bufio.Writer
	items uint64
	err   error
}

func newFrameWriter(w http.ResponseWriter) *frameWriter {
	w.Header().Set("Content-Type", FramesType)
	w.WriteHeader(http.StatusOK)
	return &frameWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

func (fw *frameWriter) frame(kind byte, parts ...[]byte) error {
	if fw.err != nil {
		return fw.err
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n > MaxFrame {
		// The answer is still whole up to here: the read fails with this
		// error, which the end frame carries.
		return fmt.Errorf("%w: an item of %d bytes is over the frame limit of %d", ErrFrameTooLarge, n, MaxFrame)
	}
	var hdr [5]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:], uint32(n))
	if _, fw.err = fw.w.Write(hdr[:]); fw.err != nil {
		return fw.err
	}
	for _, p := range parts {
		if _, fw.err = fw.w.Write(p); fw.err != nil {
			return fw.err
		}
	}
	if kind != frameEnd {
		fw.items++
	}
	return nil
}

// record writes one journal record.
func (fw *frameWriter) record(seq uint64, raw []byte) error {
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	return fw.frame(frameRecord, s[:], raw)
}

// item writes one opaque item.
func (fw *frameWriter) item(b []byte) error { return fw.frame(frameItem, b) }

// Write writes p as item frames of at most bundleChunk bytes: a bundle
// streamed into the answer.
func (fw *frameWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), bundleChunk)
		if err := fw.item(p[:c]); err != nil {
			return n, err
		}
		n, p = n+c, p[c:]
	}
	return n, nil
}

// end writes the end frame, with err when the read failed, and flushes.
func (fw *frameWriter) end(err error, export *ExportInfo) error {
	fe := FramesEnd{Items: fw.items, Export: export}
	if err != nil {
		e := apiError(err, "")
		fe.Error, fe.Status = &e, readErrorCode(err)
	}
	b, _ := json.Marshal(fe)
	fw.frame(frameEnd, b)
	if fw.err != nil {
		return fw.err
	}
	return fw.w.Flush()
}

// frameReader reads the frames of an answer.
type frameReader struct {
	r     *bufio.Reader
	buf   []byte
	items uint64
	// end is the end frame of an answer that succeeded.
	end FramesEnd
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next record or item frame's kind and payload (valid
// until the next call), or, at the end frame, io.EOF when the answer
// succeeded and its error when it did not. An answer that breaks off, or
// whose frames do not parse, is ErrCut.
func (fr *frameReader) next() (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(fr.r, hdr[:]); err != nil {
		return 0, nil, fmt.Errorf("%w: it ended after %d items without its end frame (%v)", ErrCut, fr.items, err)
	}
	kind, n := hdr[0], binary.BigEndian.Uint32(hdr[1:])
	switch {
	case kind != frameRecord && kind != frameItem && kind != frameEnd:
		return 0, nil, fmt.Errorf("%w: frame %d has the unknown kind %#x", ErrCut, fr.items, kind)
	case n > MaxFrame, kind == frameEnd && n > maxEndFrame:
		return 0, nil, fmt.Errorf("%w: frame %d announces %d bytes, over the limit", ErrCut, fr.items, n)
	case kind == frameRecord && n < 8:
		return 0, nil, fmt.Errorf("%w: record frame %d has no seq", ErrCut, fr.items)
	}
	if cap(fr.buf) < int(n) {
		fr.buf = make([]byte, n)
	}
	fr.buf = fr.buf[:n]
	if _, err := io.ReadFull(fr.r, fr.buf); err != nil {
		return 0, nil, fmt.Errorf("%w: frame %d of %d bytes broke off (%v)", ErrCut, fr.items, n, err)
	}
	if kind != frameEnd {
		fr.items++
		return kind, fr.buf, nil
	}
	var fe FramesEnd
	if err := json.Unmarshal(fr.buf, &fe); err != nil {
		return 0, nil, fmt.Errorf("%w: the end frame does not decode: %v", ErrCut, err)
	}
	if fe.Items != fr.items {
		return 0, nil, fmt.Errorf("%w: the end frame counts %d items, %d arrived", ErrCut, fe.Items, fr.items)
	}
	if _, err := fr.r.ReadByte(); err != io.EOF {
		return 0, nil, fmt.Errorf("%w: bytes follow the end frame", ErrCut)
	}
	if fe.Error != nil {
		code := fe.Status
		if code < 400 {
			code = http.StatusInternalServerError
		}
		return frameEnd, nil, newRemoteError(code, *fe.Error)
	}
	fr.end = fe
	return frameEnd, nil, io.EOF
}
