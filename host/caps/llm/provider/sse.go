package provider

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/agentrt/agentrt/abi"
)

// sseReader reads a server-sent event stream one event at a time, as all
// three APIs stream: an event is its data lines, joined by newlines, up to
// a blank line; other fields (event:, id:) are not needed, since every
// event's JSON names its type. A stream that ends before the event that
// closes it (end, such as "[DONE]") is interrupted, whether it ended
// between two events or inside one.
type sseReader struct {
	br   *bufio.Reader
	data bytes.Buffer
	end  string
	// events counts the events read, for errors.
	events int
}

func newSSE(r io.Reader, end string) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 64<<10), end: end}
}

// next returns the data of the next event, valid until the next call. At
// the stream's end it returns an *Error of kind stream_interrupted: the
// caller returns before that on its closing event.
func (s *sseReader) next() ([]byte, error) {
	s.data.Reset()
	for {
		line, err := readLine(s.br)
		if errors.Is(err, errLongLine) {
			return nil, &Error{Kind: abi.LLMMalformed, Msg: err.Error()}
		}
		if err == io.EOF {
			what := "between events"
			if len(line) > 0 || s.data.Len() > 0 {
				what = "inside an event"
			}
			return nil, &Error{Kind: abi.LLMStreamInterrupted, Msg: fmt.Sprintf("the stream ended %s, before %s, after %d events", what, s.end, s.events)}
		}
		if err != nil {
			return nil, err
		}
		l := strings.TrimRight(string(line), "\r\n")
		if l != "" {
			if v, ok := strings.CutPrefix(l, "data:"); ok {
				if s.data.Len() > 0 {
					s.data.WriteByte('\n') // an event's data lines join with newlines (SSE)
				}
				s.data.WriteString(strings.TrimPrefix(v, " "))
			}
			if s.data.Len() > MaxReply {
				return nil, &Error{Kind: abi.LLMMalformed, Msg: "a stream event is too large"}
			}
			continue
		}
		if s.data.Len() == 0 {
			continue
		}
		s.events++
		return s.data.Bytes(), nil
	}
}

// sink wraps onChunk so that its error is told apart from the stream's
// (errChunk): the caller's refusal of a chunk ends the call, not as a
// provider failure.
func sink(onChunk func(abi.LLMChunk) error) func(abi.LLMChunk) error {
	return func(ch abi.LLMChunk) error {
		if err := onChunk(ch); err != nil {
			return fmt.Errorf("%w: %w", errChunk, err)
		}
		return nil
	}
}

var errLongLine = fmt.Errorf("a stream line is longer than %d bytes", MaxReply)

// readLine reads one line of an event stream, of any length up to
// MaxReply (a Responses stream's last event carries the whole response on
// one line). At the end of the stream it returns what it read with
// io.EOF.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, err
	}
	buf := append([]byte(nil), line...)
	for err == bufio.ErrBufferFull {
		if len(buf) > MaxReply {
			return nil, errLongLine
		}
		line, err = br.ReadSlice('\n')
		buf = append(buf, line...)
	}
	return buf, err
}
