package fakellm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxBody is the largest request body the fake reads; a larger one is
// answered 413.
const MaxBody = 32 << 20

// created is the timestamp every reply carries, so that two replies of a
// turn differ only in their ids.
const created = 1767225600 // 2026-01-01T00:00:00Z

// Server is the fake provider: an http.Handler serving the three APIs
// from a Script, and the record of what it was sent. It is safe for
// concurrent use.
type Server struct {
	script *Script
	now    func() time.Time

	mu       sync.Mutex
	cursor   int            // match: order: the next turn not yet given
	assigned map[string]int // match key → turn it was given
	attempts []int          // per turn, the attempts made at it
	requests []Request
	stored   map[string]*stored // stored Responses replies by id
	counted  map[string]bool    // response ids whose usage is in Stats.Usage
}

// stored is a stored response: what GET /v1/responses/{id} serves.
type stored struct {
	events []event
	final  []byte // the completed response object
	usage  Usage
	// background responses alone may be streamed again.
	background bool
}

// Request is one request the fake received, as Stats reports it. Of the
// headers it holds Idempotency-Key alone, so an API key cannot leak
// through it.
type Request struct {
	Seq    int       `json:"seq"`
	Time   time.Time `json:"time"`
	Method string    `json:"method"`
	Path   string    `json:"path"`
	// API is APIChat, APIResponses, APIMessages, APIResponsesGet, or ""
	// for a path the fake does not serve.
	API string `json:"api"`
	// KeyHeader is the header that carried the right key:
	// "authorization" or "x-api-key" ("" when refused).
	KeyHeader string `json:"key_header,omitempty"`
	// IdempotencyKey is the request's Idempotency-Key header: a call
	// sent again by a durable client should carry the key it had.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	Model          string `json:"model,omitempty"`
	Stream         bool   `json:"stream"`
	// BodySHA256 is the hex SHA-256 of the body as sent; MatchKey that of
	// its canonical JSON without stream, stream_options and background
	// (what order matching recognises a call sent again by).
	BodySHA256 string `json:"body_sha256,omitempty"`
	MatchKey   string `json:"match_key,omitempty"`
	// Turn is the index of the turn that answered, -1 if none; Attempt
	// counts the attempts at that turn, from 1.
	Turn     int    `json:"turn"`
	TurnName string `json:"turn_name,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
	// ResponseID is the id of the reply (for GET, the one retrieved).
	ResponseID string `json:"response_id,omitempty"`
	// StartingAfter is, for a resumed stream, the sequence number it
	// resumed after (-1 when the whole stream was asked for).
	StartingAfter int `json:"starting_after,omitempty"`
	Status        int `json:"status"`
	// Fault is the scripted fault the request met, as the script says it.
	Fault string `json:"fault,omitempty"`
	// Outcome is OutcomeCompleted, OutcomeRefused, OutcomeFault,
	// OutcomeCut, OutcomeMalformed or OutcomeCanceled; "" while the
	// answer is being written (a client may read its last byte before
	// the handler records it: see Stats.Settled).
	Outcome string `json:"outcome"`
	// Error is the message of an error the fake answered.
	Error string `json:"error,omitempty"`
	// Usage is the usage the answer carried, when the bytes that carry
	// it were written whole (handed to the connection: a client killed
	// just after may not have read them): nil for an error, for a stream cut or
	// cancelled before its usage event, and for a chat stream without
	// stream_options.include_usage.
	Usage *Usage `json:"usage,omitempty"`
	// Redelivery marks an answer that carried the usage of a stored
	// response already counted (retrieved or resumed again); its usage is
	// not added to Stats.Usage twice.
	Redelivery bool `json:"redelivery,omitempty"`
}

// The outcomes of a request.
const (
	OutcomeCompleted = "completed" // the whole answer was written
	OutcomeRefused   = "refused"   // 4xx from the fake itself: auth, a bad body, no turn, a mismatch
	OutcomeFault     = "fault"     // a scripted error status, or error event in a stream
	OutcomeCut       = "cut"       // a scripted cut: the connection was dropped mid-answer
	OutcomeMalformed = "malformed" // the answer was written with a scripted malformed part
	OutcomeCanceled  = "canceled"  // the client went away before the answer was written
)

// Stats is everything the fake was sent, in arrival order, and the sum of
// the usage its answers carried.
type Stats struct {
	Requests []Request `json:"requests"`
	// Usage sums Request.Usage over the requests that are not
	// redeliveries: what a client that read every answer could have
	// settled.
	Usage Usage `json:"usage"`
}

// Settled reports whether every request recorded has its outcome, so
// that a test polling Stats after its client finished reads final
// figures.
func (s Stats) Settled() bool {
	for _, r := range s.Requests {
		if r.Outcome == "" {
			return false
		}
	}
	return true
}

// ResentAfterCompletion returns the requests whose call (by MatchKey) had
// already been answered completely by an earlier request: the calls a
// durable client sent again although it had the answer.
func (s Stats) ResentAfterCompletion() []Request {
	done := map[string]bool{}
	var again []Request
	for _, r := range s.Requests {
		if r.MatchKey == "" || r.API == APIResponsesGet {
			continue
		}
		if done[r.MatchKey] {
			again = append(again, r)
		}
		if r.Outcome == OutcomeCompleted {
			done[r.MatchKey] = true
		}
	}
	return again
}

// New returns a Server for script, which must come from ParseScript (or
// pass its checks: New runs them again on a copy).
func New(script *Script) (*Server, error) {
	if script == nil {
		return nil, fmt.Errorf("%w: no script", ErrBadScript)
	}
	// check fills in defaults (stop reasons, tool arguments as JSON): on a
	// copy, so that the caller's script is never written to.
	sc := *script
	sc.Turns = append([]Turn(nil), script.Turns...)
	for i := range sc.Turns {
		sc.Turns[i].Reply.ToolCalls = append([]ToolCall(nil), sc.Turns[i].Reply.ToolCalls...)
	}
	if err := sc.check(); err != nil {
		return nil, err
	}
	return &Server{
		script:   &sc,
		now:      time.Now,
		assigned: map[string]int{},
		attempts: make([]int, len(sc.Turns)),
		stored:   map[string]*stored{},
		counted:  map[string]bool{},
	}, nil
}

// Stats returns a copy of what the server has recorded so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Requests: make([]Request, len(s.requests))}
	copy(st.Requests, s.requests)
	for i, r := range st.Requests {
		if r.Usage != nil {
			u := *r.Usage
			st.Requests[i].Usage = &u
			if !r.Redelivery {
				st.Usage.add(u)
			}
		}
	}
	return st
}

// StatsPath is where the server answers its Stats as JSON, for a test
// that runs the fake as a separate process.
const StatsPath = "/_fake/stats"

// ServeHTTP serves POST /v1/chat/completions, POST /v1/responses, GET
// /v1/responses/{id}, POST /v1/messages and GET /_fake/stats.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case path == StatsPath && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.MarshalIndent(s.Stats(), "", "  ")
		w.Write(append(b, '\n'))
	case path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.serveCall(w, r, APIChat)
	case path == "/v1/responses" && r.Method == http.MethodPost:
		s.serveCall(w, r, APIResponses)
	case path == "/v1/messages" && r.Method == http.MethodPost:
		s.serveCall(w, r, APIMessages)
	case strings.HasPrefix(path, "/v1/responses/") && r.Method == http.MethodGet:
		s.serveRetrieve(w, r, strings.TrimPrefix(path, "/v1/responses/"))
	default:
		i := s.record(Request{Method: r.Method, Path: path, Turn: -1})
		msg := fmt.Sprintf("fakellm serves POST /v1/chat/completions, POST /v1/responses, GET /v1/responses/{id}, POST /v1/messages and GET %s; not %s %s", StatsPath, r.Method, path)
		dialect := APIChat
		if strings.HasPrefix(path, "/v1/messages") {
			dialect = APIMessages
		}
		s.refuse(w, i, dialect, http.StatusNotFound, msg)
	}
}

func (s *Server) record(r Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Seq = len(s.requests) + 1
	r.Time = s.now()
	s.requests = append(s.requests, r)
	return len(s.requests) - 1
}

func (s *Server) update(i int, f func(*Request)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.requests[i])
}

// refuse answers an error of the fake's own (not a scripted fault).
func (s *Server) refuse(w http.ResponseWriter, i int, api string, status int, msg string) {
	s.update(i, func(r *Request) { r.Status, r.Outcome, r.Error = status, OutcomeRefused, msg })
	writeError(w, api, status, msg, 0, i+1)
}

// authorized checks the key where api's provider reads it and returns
// the header that carried it, or the message of a 401. The key is never
// echoed. Anthropic's API reads x-api-key, and Authorization: Bearer
// when x-api-key is absent (anthropic-sdk-go v2 sends the key that way);
// the OpenAI APIs read Authorization: Bearer only.
func (s *Server) authorized(r *http.Request, api string) (header, refusal string) {
	bearer, isBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if api == APIMessages {
		k := r.Header.Get("X-Api-Key")
		switch {
		case k == s.script.APIKey:
			return "x-api-key", ""
		case k != "":
			return "", "invalid x-api-key"
		case isBearer && bearer == s.script.APIKey:
			return "authorization", ""
		case r.Header.Get("Authorization") != "":
			return "", "invalid bearer token in the Authorization header"
		}
		return "", "x-api-key header is required"
	}
	h := r.Header.Get("Authorization")
	switch {
	case h == "" && r.Header.Get("X-Api-Key") != "":
		return "", "You didn't provide an API key in an Authorization header (Authorization: Bearer YOUR_KEY); this API does not read x-api-key."
	case h == "":
		return "", "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
	case !isBearer || bearer != s.script.APIKey:
		return "", "Incorrect API key provided."
	}
	return "authorization", ""
}

func (s *Server) serveCall(w http.ResponseWriter, r *http.Request, api string) {
	i := s.record(Request{Method: r.Method, Path: r.URL.Path, API: api, Turn: -1, IdempotencyKey: r.Header.Get("Idempotency-Key")})
	header, msg := s.authorized(r, api)
	if msg != "" {
		s.refuse(w, i, api, http.StatusUnauthorized, msg)
		return
	}
	s.update(i, func(r *Request) { r.KeyHeader = header })
	if api == APIMessages {
		v := r.Header.Get("Anthropic-Version")
		switch {
		case v == "":
			s.refuse(w, i, api, http.StatusBadRequest, "anthropic-version: header is required")
			return
		case s.script.AnthropicVersion != "" && v != s.script.AnthropicVersion:
			s.refuse(w, i, api, http.StatusBadRequest, fmt.Sprintf("anthropic-version: %q is not the version this fake serves (%s)", v, s.script.AnthropicVersion))
			return
		case s.script.AnthropicVersion == "" && !isDate(v):
			s.refuse(w, i, api, http.StatusBadRequest, fmt.Sprintf("anthropic-version: %q is not a valid version", v))
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.refuse(w, i, api, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is over the fake's limit of %d bytes", MaxBody))
		} else {
			s.update(i, func(r *Request) { r.Outcome, r.Error = OutcomeCanceled, "reading the body: "+err.Error() })
		}
		return
	}
	req, err := parseRequest(api, body)
	if err != nil {
		s.refuse(w, i, api, http.StatusBadRequest, err.Error())
		return
	}
	s.update(i, func(r *Request) {
		r.Model, r.Stream, r.BodySHA256, r.MatchKey = req.model, req.stream, req.bodySHA, req.matchKey
	})
	t, attempt, msg := s.match(req)
	if msg != "" {
		s.refuse(w, i, api, http.StatusBadRequest, msg)
		return
	}
	turn := &s.script.Turns[t]
	var fault Fault
	if attempt <= len(turn.Faults) {
		fault = turn.Faults[attempt-1]
	}
	seq := i + 1 // record numbers requests from 1
	g := &generation{
		turn: turn, index: t, model: req.model, usage: s.usageOf(turn, req),
		includeUsage: req.includeUsage, background: req.background, store: req.store,
		id: fmt.Sprintf("%d", seq),
	}
	s.update(i, func(r *Request) {
		r.Turn, r.TurnName, r.Attempt, r.Fault = t, turn.Name, attempt, fault.String()
		r.ResponseID = g.replyID(api)
	})
	if !sleep(r.Context(), time.Duration(turn.Reply.Delay+fault.Delay)) {
		s.update(i, func(r *Request) { r.Outcome = OutcomeCanceled })
		return
	}
	if fault.Status != 0 {
		m := fault.Message
		if m == "" {
			m = fmt.Sprintf("fakellm: scripted fault: %s (turn %d, attempt %d)", fault, t, attempt)
		}
		s.update(i, func(r *Request) { r.Status, r.Outcome, r.Error = fault.Status, OutcomeFault, m })
		writeError(w, api, fault.Status, m, time.Duration(fault.RetryAfter), seq)
		return
	}
	if api == APIResponses && req.store {
		// A stored response can be retrieved by id; a background one
		// streamed again, from any sequence number.
		id := g.replyID(api)
		st := &stored{events: g.events(api), final: g.body(api, "completed"), usage: g.usage, background: req.background}
		s.mu.Lock()
		s.stored[id] = st
		s.mu.Unlock()
		switch {
		case !req.background && req.stream:
			s.writeEvents(w, r.Context(), i, api, st.events, g.usage, id, fault, time.Duration(turn.Reply.ChunkDelay))
			return
		case !req.background:
			u := g.usage
			s.writeJSON(w, i, st.final, &u, fault)
			s.markRedelivery(i, id)
			return
		}
		if !req.stream {
			// A background request is answered at once, queued; the
			// client polls GET /v1/responses/{id} for the result.
			s.writeJSON(w, i, g.body(api, "queued"), nil, fault)
			return
		}
		s.writeEvents(w, r.Context(), i, api, st.events, g.usage, id, fault, time.Duration(turn.Reply.ChunkDelay))
		return
	}
	if req.stream {
		s.writeEvents(w, r.Context(), i, api, g.events(api), g.usage, "", fault, time.Duration(turn.Reply.ChunkDelay))
		return
	}
	u := g.usage
	s.writeJSON(w, i, g.body(api, "completed"), &u, fault)
}

// match finds the turn that answers req and counts the attempt, or
// returns why none does.
func (s *Server) match(req *request) (turn, attempt int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	turns := s.script.Turns
	t := -1
	if s.script.Match == MatchKey {
		for j := range turns {
			if turns[j].Key == req.lastText {
				t = j
				break
			}
		}
		if t < 0 {
			return 0, 0, fmt.Sprintf("fakellm: no turn has the key %q (the last message's text; match: key)", req.lastText)
		}
	} else if j, ok := s.assigned[req.matchKey]; ok {
		// The same call sent again (a retry, or a resumed run's call
		// left in doubt) gets the turn it had, not the next one.
		t = j
	} else {
		if s.cursor >= len(turns) {
			return 0, 0, fmt.Sprintf("fakellm: no turn left: the script's %d turns were all given to earlier calls", len(turns))
		}
		t = s.cursor
	}
	if m := turns[t].Expect.mismatch(req); m != "" {
		name := ""
		if turns[t].Name != "" {
			name = " (" + turns[t].Name + ")"
		}
		return 0, 0, fmt.Sprintf("fakellm: turn %d%s %s", t, name, m)
	}
	if s.script.Match == MatchOrder {
		if _, ok := s.assigned[req.matchKey]; !ok {
			s.assigned[req.matchKey] = t
			s.cursor++
		}
	}
	s.attempts[t]++
	return t, s.attempts[t], ""
}

// usageOf is the turn's usage, or, when the script gives none, one
// computed from the sizes of the request and the reply.
func (s *Server) usageOf(t *Turn, req *request) Usage {
	if t.Usage != nil {
		return *t.Usage
	}
	out := len(t.Reply.Text)
	for _, c := range t.Reply.ToolCalls {
		out += len(c.Name) + len(c.args)
	}
	return Usage{InputTokens: int64((req.bodyLen + 3) / 4), OutputTokens: int64((out + 3) / 4)}
}

func (s *Server) serveRetrieve(w http.ResponseWriter, r *http.Request, id string) {
	i := s.record(Request{Method: r.Method, Path: r.URL.Path, API: APIResponsesGet, Turn: -1, ResponseID: id})
	header, msg := s.authorized(r, APIResponses)
	if msg != "" {
		s.refuse(w, i, APIResponses, http.StatusUnauthorized, msg)
		return
	}
	s.update(i, func(r *Request) { r.KeyHeader = header })
	s.mu.Lock()
	st := s.stored[id]
	s.mu.Unlock()
	if st == nil {
		s.refuse(w, i, APIResponses, http.StatusNotFound, fmt.Sprintf("No response found with id '%s'.", id))
		return
	}
	q := r.URL.Query()
	stream := q.Get("stream") == "true"
	// openai-go's GetStreaming asks for the stream in a JSON body
	// ({"stream": true}) rather than the query; take either.
	if b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<10)); len(b) > 0 {
		var body struct {
			Stream bool `json:"stream"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			s.refuse(w, i, APIResponses, http.StatusBadRequest, "the body of a GET, when there is one, is a JSON object such as {\"stream\": true}: "+err.Error())
			return
		}
		stream = stream || body.Stream
	}
	after := -1
	if v := q.Get("starting_after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.refuse(w, i, APIResponses, http.StatusBadRequest, fmt.Sprintf("starting_after: %q is not a sequence number", v))
			return
		}
		if !stream {
			s.refuse(w, i, APIResponses, http.StatusBadRequest, "starting_after: only allowed when stream is true")
			return
		}
		if n >= len(st.events) {
			s.refuse(w, i, APIResponses, http.StatusBadRequest, fmt.Sprintf("starting_after: %d is past the stream's last sequence number, %d", n, len(st.events)-1))
			return
		}
		after = n
	}
	if stream && !st.background {
		s.refuse(w, i, APIResponses, http.StatusBadRequest, fmt.Sprintf("response '%s' was not created with background: true, so it cannot be streamed again", id))
		return
	}
	s.update(i, func(r *Request) { r.Stream, r.StartingAfter = stream, after })
	if !stream {
		u := st.usage
		s.writeJSON(w, i, st.final, &u, Fault{})
		s.markRedelivery(i, id)
		return
	}
	s.writeEvents(w, r.Context(), i, APIResponses, st.events[after+1:], st.usage, id, Fault{}, 0)
}

// markRedelivery counts the usage of response id once: an answer that
// carries it again is marked a redelivery.
func (s *Server) markRedelivery(i int, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.requests[i].Usage == nil {
		return
	}
	if s.counted[id] {
		s.requests[i].Redelivery = true
	}
	s.counted[id] = true
}

// writeJSON writes a non-streamed answer, with fault's malformation or
// cut; usage is recorded when the whole body was written.
func (s *Server) writeJSON(w http.ResponseWriter, i int, body []byte, usage *Usage, fault Fault) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Request-Id", fmt.Sprintf("req_fake_%d", i+1))
	switch {
	case fault.Malformed:
		body = malformed(body)
	case fault.CutAfter > 0:
		// The length promises the whole body; the connection ends
		// before it, as a provider's dying proxy would.
		n := min(fault.CutAfter, len(body)-1)
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		w.Write(body[:n])
		flush(w)
		s.update(i, func(r *Request) { r.Status, r.Outcome = http.StatusOK, OutcomeCut })
		panic(http.ErrAbortHandler)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(body)
	s.update(i, func(r *Request) {
		r.Status = http.StatusOK
		switch {
		case err != nil:
			r.Outcome = OutcomeCanceled
		case fault.Malformed:
			r.Outcome = OutcomeMalformed
		default:
			r.Outcome = OutcomeCompleted
			r.Usage = usage
		}
	})
}

// writeEvents writes a stream of events, waiting delay between two, with
// fault's malformation or cut. The usage is recorded once the event that
// carries it was written and flushed; storedID names a background
// response, whose usage is counted once however often it is streamed.
func (s *Server) writeEvents(w http.ResponseWriter, ctx context.Context, i int, api string, events []event, usage Usage, storedID string, fault Fault, delay time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Request-Id", fmt.Sprintf("req_fake_%d", i+1))
	w.WriteHeader(http.StatusOK)
	flush(w)
	delay += time.Duration(fault.ChunkDelay)
	cut := -1
	if fault.CutAfter > 0 {
		// A cut past the end falls in the last event: a cut always cuts.
		cut = min(fault.CutAfter, len(events)-1)
	}
	errAt := -1
	if fault.ErrorAfter > 0 {
		errAt = min(fault.ErrorAfter, len(events)-1)
	}
	bad := -1
	if fault.Malformed {
		bad = len(events) / 2
	}
	outcome := OutcomeCompleted
	sentBad := false
	for k, ev := range events {
		if k > 0 && !sleep(ctx, delay) {
			outcome = OutcomeCanceled
			break
		}
		b := ev.bytes()
		if k == bad {
			b = event{name: ev.name, data: malformed(ev.data)}.bytes()
		}
		if k == errAt {
			b := streamError(api, k, fault.Message)
			if _, err := w.Write(b); err != nil {
				outcome = OutcomeCanceled
			} else {
				flush(w)
				outcome = OutcomeFault
			}
			break
		}
		if k == cut {
			w.Write(b[:len(b)/2])
			flush(w)
			s.update(i, func(r *Request) { r.Status, r.Outcome = http.StatusOK, OutcomeCut })
			panic(http.ErrAbortHandler)
		}
		if _, err := w.Write(b); err != nil {
			outcome = OutcomeCanceled
			break
		}
		flush(w)
		sentBad = sentBad || k == bad
		if ev.usage {
			u := usage
			s.update(i, func(r *Request) { r.Usage = &u })
			if storedID != "" {
				s.markRedelivery(i, storedID)
			}
		}
	}
	if outcome == OutcomeFault {
		s.update(i, func(r *Request) {
			r.Status, r.Outcome, r.Error = http.StatusOK, OutcomeFault, "an error event after "+strconv.Itoa(errAt)+" events"
		})
		return
	}
	if outcome == OutcomeCompleted && api == APIChat {
		if _, err := io.WriteString(w, "data: [DONE]\n\n"); err != nil {
			outcome = OutcomeCanceled
		}
		flush(w)
	}
	if sentBad {
		// A client that stops reading at the malformed event may close
		// before the rest is written: the fault was still delivered.
		outcome = OutcomeMalformed
	}
	s.update(i, func(r *Request) { r.Status, r.Outcome = http.StatusOK, outcome })
}

// streamError is api's error event, sent as the k-th event of a stream.
func streamError(api string, k int, msg string) []byte {
	switch api {
	case APIMessages:
		if msg == "" {
			msg = "Overloaded"
		}
		return event{name: "error", data: mustJSON(map[string]any{
			"type": "error", "error": map[string]any{"type": "overloaded_error", "message": msg},
		})}.bytes()
	case APIResponses:
		if msg == "" {
			msg = "The server had an error while processing your request."
		}
		return event{name: "error", data: mustJSON(map[string]any{
			"type": "error", "code": "server_error", "message": msg, "param": nil, "sequence_number": k,
		})}.bytes()
	default:
		if msg == "" {
			msg = "The server had an error while processing your request."
		}
		return event{data: mustJSON(map[string]any{
			"error": map[string]any{"message": msg, "type": "server_error", "param": nil, "code": nil},
		})}.bytes()
	}
}

// malformed returns b cut at its middle, with what no JSON parser takes.
func malformed(b []byte) []byte {
	out := append([]byte(nil), b[:len(b)/2]...)
	return append(out, "<<fakellm: malformed>>"...)
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// sleep waits d, or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// writeError writes an error in api's shape: OpenAI's {"error": {message,
// type, param, code}} or Anthropic's {"type": "error", "error": {type,
// message}}.
func writeError(w http.ResponseWriter, api string, status int, msg string, retryAfter time.Duration, seq int) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
	}
	var body any
	if api == APIMessages {
		h.Set("Request-Id", fmt.Sprintf("req_fake_%d", seq))
		typ := map[int]string{
			400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
			404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
			500: "api_error", 529: "overloaded_error",
		}[status]
		if typ == "" {
			typ = "api_error"
		}
		body = map[string]any{
			"type":       "error",
			"error":      map[string]any{"type": typ, "message": msg},
			"request_id": fmt.Sprintf("req_fake_%d", seq),
		}
	} else {
		h.Set("X-Request-Id", fmt.Sprintf("req_fake_%d", seq))
		typ, code := "invalid_request_error", any(nil)
		switch {
		case status == 401:
			code = "invalid_api_key"
		case status == 404:
			code = "not_found"
		case status == 429:
			typ, code = "requests", "rate_limit_exceeded"
		case status >= 500:
			typ = "server_error"
		}
		body = map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}}
	}
	b, _ := json.Marshal(body)
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
