package bench

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrt/agentrt/abi"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/caps/llm"
	"github.com/agentrt/agentrt/host/caps/llm/provider"
	"github.com/agentrt/agentrt/internal/fakellm"
	"github.com/agentrt/agentrt/internal/synthconv"
	"github.com/agentrt/agentrt/internal/wasmbuild"
	"github.com/agentrt/agentrt/journal"
	"github.com/agentrt/agentrt/journal/badgerstore"
)

// Figures 14 and 15: model calls through the real op (agentrt:llm's
// llm.complete and llm.next, served by host/caps/llm against the fake
// provider of internal/fakellm on loopback), timed against the same call
// made directly over HTTP, and the journal of a conversation made
// through it.

const (
	benchModel  = "fake-bench"
	benchKeyEnv = "AGENTRT_BENCH_FAKELLM_KEY"
	benchKey    = "sk-bench-fake"
	// overheadReply is every answer of figure 14: 66 bytes in 8 chunks,
	// overheadChunkDelay apart (a model streaming about 200 tokens a
	// second), so that the stream takes the op's first batch and at
	// least one llm.next.
	overheadReply      = "The journal is written before the effect; the answer comes after."
	overheadChunkDelay = 5 * time.Millisecond
)

// fakeProvider is the fake serving a script on loopback.
type fakeProvider struct {
	fake *fakellm.Server
	srv  *http.Server
	url  string
}

func startFakeProvider(script *fakellm.Script) (*fakeProvider, error) {
	f, err := fakellm.New(script)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &fakeProvider{fake: f, srv: &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}, url: "http://" + l.Addr().String()}
	go p.srv.Serve(l)
	return p, nil
}

func (p *fakeProvider) close() { p.srv.Close() }

// llmCell opens a cell whose llm.yaml names the fake at baseURL as the
// provider "fake" (Chat Completions), with the key in benchKeyEnv.
func llmCell(dir, baseURL string, engine *host.Engine) (*cell, error) {
	cfg, err := provider.Parse("llm.yaml", fmt.Appendf(nil, "providers:\n  fake:\n    kind: openai-chat\n    base_url: %s/v1\n    credential: {env: %s}\n    models:\n      %s: {input: \"0.40\", output: \"1.60\"}\n",
		baseURL, benchKeyEnv, benchModel))
	if err != nil {
		return nil, err
	}
	if err := os.Setenv(benchKeyEnv, benchKey); err != nil {
		return nil, err
	}
	st, err := badgerstore.Open(dir)
	if err != nil {
		return nil, err
	}
	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		st.Close()
		return nil, err
	}
	images := func(sum []byte) ([]byte, error) { return st.Blob(context.Background(), sum) }
	h, err := host.New(engine, host.Deps{Store: st, KV: st, Events: st, Key: key, LLM: llm.NewProviders(cfg, nil, images)}, host.Config{})
	if err != nil {
		st.Close()
		return nil, err
	}
	return &cell{store: st, host: h, key: key}, nil
}

func llmGrant() *host.Grant {
	g, err := host.ParseGrant(fmt.Appendf(nil, "capabilities: {run: {}, llm: {providers: [fake], models: [%s], max_output_tokens: 4096}}", benchModel))
	if err != nil {
		panic(err)
	}
	return g
}

// buildLLMAgent builds testdata/agents/llmcalls.
func buildLLMAgent(ctx context.Context, root string) ([]byte, error) {
	out := filepath.Join(dir(root, "guests"), "llmcalls.wasm")
	if err := wasmbuild.Go(ctx, filepath.Join(sourceDir(), "testdata", "agents", "llmcalls"), out); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}

// overheadScript answers "call i" for any i by its key, however often it
// is sent, so that one fake serves every repetition.
func overheadScript(calls int) *fakellm.Script {
	s := &fakellm.Script{APIKey: benchKey, Match: fakellm.MatchKey}
	for i := range calls {
		s.Turns = append(s.Turns, fakellm.Turn{Key: fmt.Sprintf("call %d", i), Reply: fakellm.Reply{Text: overheadReply, Chunks: 8, ChunkDelay: fakellm.Duration(overheadChunkDelay)},
			Usage: &fakellm.Usage{InputTokens: 8, OutputTokens: 16}})
	}
	return s
}

// callTimes are the host times of one streamed model call from its
// journal: the intent (the guest's call entered the journal path), the
// first batch (llm.complete completed: the first tokens are the guest's)
// and the last batch (the whole answer).
type callTimes struct{ intent, first, last int64 }

// streamedCallTimes reads the streamed calls of run from st.
func streamedCallTimes(ctx context.Context, st *badgerstore.Store, run journal.RunID) ([]callTimes, error) {
	var out []callTimes
	byStep := map[uint64]int{}
	err := journal.ReadEntries(ctx, st, run, func(e *journal.Entry, _ *journal.Record) error {
		switch {
		case e.Op == "llm.complete" && e.Phase == journal.PhaseIntent:
			byStep[e.Step] = len(out)
			out = append(out, callTimes{intent: e.Time})
		case (e.Op == "llm.complete" || e.Op == "llm.next") && e.Phase == journal.PhaseCompleted:
			g, err := journal.ForGuest(ctx, st, e)
			if err != nil {
				return err
			}
			var b abi.LLMBatch
			if err := abi.Unmarshal(g.Response, &b); err != nil {
				return fmt.Errorf("bench: entry %d (%s): %w", e.Seq, e.Op, err)
			}
			i, ok := byStep[b.Step]
			if !ok {
				return fmt.Errorf("bench: entry %d (%s) continues step %d, which opened no stream", e.Seq, e.Op, b.Step)
			}
			if e.Op == "llm.complete" {
				out[i].first = e.Time
			}
			if b.Response != nil {
				out[i].last = e.Time
			}
		}
		return nil
	})
	for i, c := range out {
		if err == nil && (c.first == 0 || c.last == 0) {
			err = fmt.Errorf("bench: streamed call %d of run %s has no first or last batch in the journal", i, run)
		}
	}
	return out, err
}

// directCall makes one streamed Chat Completions call to the fake with
// net/http and reads the stream as a client does: the time to its first
// content event and to its end.
func directCall(ctx context.Context, hc *http.Client, url string, i int) (ttft, total time.Duration, err error) {
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"call %d"}],"max_completion_tokens":4096,"stream":true,"stream_options":{"include_usage":true}}`, benchModel, i)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+benchKey)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("bench: the fake answered %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	var text strings.Builder
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var ev struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return 0, 0, err
		}
		for _, c := range ev.Choices {
			if c.Delta.Content != "" && ttft == 0 {
				ttft = time.Since(start)
			}
			text.WriteString(c.Delta.Content)
		}
	}
	total = time.Since(start)
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if !done || text.String() != overheadReply {
		return 0, 0, errors.New("bench: the direct call's stream ended early or answered other text")
	}
	return ttft, total, nil
}

// Figure 14: the overhead of a model call through the real op.
func (h *harness) llmOverhead(ctx context.Context) ([]Figure, error) {
	n := h.cfg.LLMCalls
	code, err := buildLLMAgent(ctx, h.root)
	if err != nil {
		return nil, err
	}
	fp, err := startFakeProvider(overheadScript(n))
	if err != nil {
		return nil, err
	}
	defer fp.close()
	c, err := llmCell(dir(h.root, "llm-overhead"), fp.url, h.engine)
	if err != nil {
		return nil, err
	}
	defer c.close()
	db, err := openBareBadger(dir(h.root, "llm-commit-floor"))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer hc.CloseIdleConnections()
	input := func(calls int) []byte {
		return fmt.Appendf(nil, `{"calls":%d,"stream":true,"model":%q}`, calls, benchModel)
	}
	// Warm up both paths: the module's compilation, the connections.
	warm, err := c.host.Run(ctx, host.RunSpec{Code: code, Name: "bench", Input: input(2), Grant: llmGrant()})
	if err != nil {
		return nil, err
	}
	if warm.Status != journal.StatusCompleted {
		return nil, endedErr(ctx, c.store, "warm-up run", warm)
	}
	for i := range 2 {
		if _, _, err := directCall(ctx, hc, fp.url, i); err != nil {
			return nil, err
		}
	}
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	var ttft50, ttft99, tot50, tot99, dttft50, dttft99, dtot50, dtot99, commit50 []float64
	for r := range h.cfg.Reps {
		res, err := c.host.Run(ctx, host.RunSpec{Code: code, Name: "bench", Input: input(n), Grant: llmGrant()})
		if err != nil {
			return nil, err
		}
		if res.Status != journal.StatusCompleted {
			return nil, endedErr(ctx, c.store, "run", res)
		}
		times, err := streamedCallTimes(ctx, c.store, res.Run)
		if err != nil {
			return nil, err
		}
		if len(times) != n {
			return nil, fmt.Errorf("bench: run %s journaled %d model calls, want %d", res.Run, len(times), n)
		}
		var first, whole []time.Duration
		for _, t := range times {
			first = append(first, time.Duration(t.first-t.intent))
			whole = append(whole, time.Duration(t.last-t.intent))
		}
		ttft50, ttft99 = append(ttft50, ms(percentile(first, 50))), append(ttft99, ms(percentile(first, 99)))
		tot50, tot99 = append(tot50, ms(percentile(whole, 50))), append(tot99, ms(percentile(whole, 99)))

		var dfirst, dwhole []time.Duration
		for i := range n {
			a, b, err := directCall(ctx, hc, fp.url, i)
			if err != nil {
				return nil, err
			}
			dfirst, dwhole = append(dfirst, a), append(dwhole, b)
		}
		dttft50, dttft99 = append(dttft50, ms(percentile(dfirst, 50))), append(dttft99, ms(percentile(dfirst, 99)))
		dtot50, dtot99 = append(dtot50, ms(percentile(dwhole, 50))), append(dtot99, ms(percentile(dwhole, 99)))

		lat, err := bareCommits(db, fmt.Sprintf("llm%d/", r), 50)
		if err != nil {
			return nil, err
		}
		commit50 = append(commit50, ms(percentile(lat, 50)))
		h.logf("14 model calls rep %d: ttft p50 %.2f ms (direct %.2f), total p50 %.2f ms (direct %.2f), durable commit p50 %.2f ms",
			r, ttft50[r], dttft50[r], tot50[r], dtot50[r], commit50[r])
	}
	commit := median(commit50)
	// The goal: what the op adds at p50 beyond the durable commit it must
	// make before the request leaves (intent and executing, fsynced) is
	// at most 1 ms.
	bound := func(direct []float64) *Goal {
		return &Goal{Text: fmt.Sprintf("at most the direct call + the durable commit (%.2f ms) + 1 ms", commit), MaxValue: ptr(median(direct) + commit + 1)}
	}
	measures := func(what string) string {
		return fmt.Sprintf("host.Host.Run of bench/testdata/agents/llmcalls (a Go agent, guest SDK agent.LLMStream) making %d streamed llm.complete calls "+
			"(then llm.next until the last batch) to internal/fakellm on loopback through host/caps/llm (provider kind openai-chat, a badgerstore, "+
			"one short user message, a 66-byte answer in 8 chunks %v apart); %s, from the call's intent entry to the journal entry that carries it, "+
			"by the host times the journal records: the gate, the durable commit of intent and executing, the provider client, the batch and "+
			"its journal entry; the percentile over the calls of a repetition, median over repetitions. The op gathers a stream's chunks "+
			"for up to %v after the first into one batch (host/caps/llm BatchWait), which the time to the first token includes. The durable commit alone (a bare badger "+
			"SyncWrites Set+Commit, p50) and the time added at p50 are in extra.", n, overheadChunkDelay, what, llm.BatchWait)
	}
	floorOf := func(name string, v []float64, what string) *Floor {
		return &Floor{Name: name, Unit: "ms", Value: median(v), Samples: v,
			Measures: fmt.Sprintf("the same %d calls (same body shape) made directly with net/http to the same fake, keep-alive, the SSE stream read line by line: %s.", n, what)}
	}
	extra := func(ours, direct []float64) map[string]float64 {
		return map[string]float64{"durable commit p50 ms": commit, "added p50 ms": median(ours) - median(direct)}
	}
	return []Figure{{
		ID: "14a", Name: "model call through llm.complete, streamed: time to first token, p50", Unit: "ms", Better: "lower",
		Value: median(ttft50), Samples: ttft50, Extra: extra(ttft50, dttft50), Goal: bound(dttft50),
		Measures: measures("time to the first batch (llm.complete's answer)"),
		Floor:    floorOf("direct HTTP call: first content event, p50", dttft50, "the time from sending the request to reading its first content event, p50"),
	}, {
		ID: "14b", Name: "model call, streamed: time to first token, p99", Unit: "ms", Better: "lower",
		Value: median(ttft99), Samples: ttft99, Extra: extra(ttft99, dttft99),
		Measures: measures("time to the first batch, p99"),
		Floor:    floorOf("direct HTTP call: first content event, p99", dttft99, "p99 of the time to the first content event"),
	}, {
		ID: "14c", Name: "model call through llm.complete + llm.next, streamed: whole answer, p50", Unit: "ms", Better: "lower",
		Value: median(tot50), Samples: tot50, Extra: extra(tot50, dtot50), Goal: bound(dtot50),
		Measures: measures("time to the last batch (the whole answer)"),
		Floor:    floorOf("direct HTTP call: whole stream, p50", dtot50, "the time from sending the request to the end of the stream ([DONE]), p50"),
	}, {
		ID: "14d", Name: "model call, streamed: whole answer, p99", Unit: "ms", Better: "lower",
		Value: median(tot99), Samples: tot99, Extra: extra(tot99, dtot99),
		Measures: measures("time to the last batch, p99"),
		Floor:    floorOf("direct HTTP call: whole stream, p99", dtot99, "p99 of the time to the end of the stream"),
	}}, nil
}

// conversationScript is the model's side of the synthetic conversation:
// turn i answers synthconv's assistant message i, in order.
func conversationScript(conv *synthconv.Conversation) *fakellm.Script {
	s := &fakellm.Script{APIKey: benchKey}
	for i := range conv.Calls() {
		s.Turns = append(s.Turns, fakellm.Turn{Reply: fakellm.Reply{Text: conv.Assist[i]}})
	}
	return s
}

// opConversation runs the first calls calls of the synthetic
// conversation through llm.complete on a fresh cell and returns the
// run's size in the store (records and distinct blobs, verified) and the
// sum of the requests' sizes as the guest sent them.
func (h *harness) opConversation(ctx context.Context, code []byte, calls int, name string) (convSize, int64, error) {
	conv := synthconv.New(convCalls, convTokens, 12)
	fp, err := startFakeProvider(conversationScript(conv))
	if err != nil {
		return convSize{}, 0, err
	}
	defer fp.close()
	c, err := llmCell(dir(h.root, name), fp.url, h.engine)
	if err != nil {
		return convSize{}, 0, err
	}
	defer c.close()
	in := fmt.Appendf(nil, `{"calls":%d,"conv_calls":%d,"conv_tokens":%d,"seed":12,"model":%q}`, calls, convCalls, convTokens, benchModel)
	res, err := c.host.Run(ctx, host.RunSpec{Code: code, Name: "bench", Input: in, Grant: llmGrant()})
	if err != nil {
		return convSize{}, 0, err
	}
	if res.Status != journal.StatusCompleted {
		return convSize{}, 0, endedErr(ctx, c.store, "conversation run", res)
	}
	var naive int64
	n := 0
	err = journal.ReadEntries(ctx, c.store, res.Run, func(e *journal.Entry, _ *journal.Record) error {
		if e.Op != "llm.complete" || e.Phase != journal.PhaseIntent {
			return nil
		}
		req, err := journal.ResolvePayload(ctx, c.store, e.Request, e.InputHash, 64<<20)
		if err != nil {
			return err
		}
		naive += int64(len(req))
		n++
		return nil
	})
	if err != nil {
		return convSize{}, 0, err
	}
	if n != calls {
		return convSize{}, 0, fmt.Errorf("bench: conversation run %s journaled %d model calls, want %d", res.Run, n, calls)
	}
	size, err := measureConv(ctx, c.store, res.Run)
	return size, naive, err
}

// Figure 15: the journal of a model conversation made through the real op.
func (h *harness) llmConversation(ctx context.Context) ([]Figure, error) {
	code, err := buildLLMAgent(ctx, h.root)
	if err != nil {
		return nil, err
	}
	var q [4]convSize
	var naive int64
	for i := range q {
		calls := convCalls * (i + 1) / 4
		var nv int64
		if q[i], nv, err = h.opConversation(ctx, code, calls, fmt.Sprintf("llm-conversation-%d", calls)); err != nil {
			return nil, err
		}
		if i == 3 {
			naive = nv
		}
	}
	mb := func(n int64) float64 { return float64(n) / 1e6 }
	inc := func(i int) int64 { return q[i].total() - q[i-1].total() }
	lin := float64(inc(3)) / float64(inc(1))
	final := q[3]
	h.logf("15 conversation through llm.complete, %d calls: %d bytes stored (%d records, %d blobs), naive sum of requests %d; after 25/50/75/100 calls %d/%d/%d/%d",
		convCalls, final.total(), final.records, final.blobs, naive, q[0].total(), q[1].total(), q[2].total(), q[3].total())
	return []Figure{{
		ID: "15a", Name: fmt.Sprintf("journal of a %d-call conversation growing to %dk tokens, through llm.complete: size", convCalls, convTokens/1000), Unit: "MB", Better: "lower",
		Value: mb(final.total()), Samples: []float64{mb(final.total())},
		Extra: map[string]float64{"records MB": mb(final.records), "blobs MB": mb(final.blobs),
			"MB after 25 calls": mb(q[0].total()), "MB after 50 calls": mb(q[1].total()), "MB after 75 calls": mb(q[2].total())},
		Goal: &Goal{Text: "at most 2.5 MB", MaxValue: ptr(2.5)},
		Floor: &Floor{Name: "naive sum of the requests", Unit: "MB", Value: mb(naive), Samples: []float64{mb(naive)},
			Measures: "the bytes of the 100 llm.complete requests as the guest sent them (abi.LLMRequest, canonical CBOR), each resending the whole history: what a journal keeping payloads inline holds of requests alone"},
		Measures: fmt.Sprintf("host.Host.Run of bench/testdata/agents/llmcalls holding one conversation with internal/fakellm through host/caps/llm "+
			"(unstreamed llm.complete, a badgerstore): internal/synthconv's %d user messages, about 500 tokens each, and the fake's answers of "+
			"about 1500 (synthconv's assistant messages), appended as they come; the figure is the run's records as stored plus its distinct "+
			"blobs, read back and verified, as the host journaled them. Sizes after 25, 50 and 75 calls are runs of those first calls on "+
			"fresh stores. Badger's own overhead is not counted. Figure 13 is the same conversation journaled by hand.", convCalls),
	}, {
		ID: "15b", Name: "journal of the conversation through llm.complete: growth of calls 76-100 against calls 26-50", Unit: "x", Better: "lower",
		Value: lin, Samples: []float64{lin}, Goal: &Goal{Text: "at most 1.2x (linear: bytes per call roughly constant)", MaxValue: ptr(1.2)},
		Extra:    map[string]float64{"bytes per call, calls 26-50": float64(inc(1)) / 25, "bytes per call, calls 76-100": float64(inc(3)) / 25},
		Measures: "the store bytes (records and distinct blobs, as in 15a) the last quarter of the calls added, divided by what the second quarter added: 1 when every call costs the same",
	}}, nil
}
