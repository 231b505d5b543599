package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/internal/otlptest"
)

// TestRunExportsItsTrace: agentrt run with OTEL_EXPORTER_OTLP_ENDPOINT set
// exports the run's spans over OTLP/HTTP before it exits: the run's span
// and one per call, all naming the run, under service.name agentrt (or
// OTEL_SERVICE_NAME). A bad OTEL_* value is refused with a hint.
func TestRunExportsItsTrace(t *testing.T) {
	f, modules := daemonFixture(t)
	data := t.TempDir()
	grant := writeTemp(t, smokeGrantYAML)
	rcv := otlptest.Start(t)
	cmd := f.cmd(data, "run", modules["smoke"], "--grant", grant, "-q", "--json")
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	var res struct {
		Run string `json:"run_id"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || res.Run == "" {
		t.Fatalf("run --json: %q (%v)", out.String(), err)
	}
	spans := rcv.Of(res.Run)
	runs, calls := 0, 0
	for _, s := range spans {
		if s.Service != "agentrt" {
			t.Errorf("span %s of service %q", s.Name, s.Service)
		}
		if s.Name == "agentrt.run" {
			runs++
		} else if s.Has("agentrt.journal.seq") && s.Has("agentrt.journal.entry_hash") {
			calls++
		}
	}
	if runs != 1 || calls != 11 {
		t.Fatalf("%d run spans and %d call spans for run %s (of %d spans received); want 1 and the smoke agent's 11 calls", runs, calls, res.Run, len(rcv.Spans()))
	}

	bad := f.cmd(data, "run", modules["smoke"], "--grant", grant, "-q")
	bad.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=zipkin")
	errOut.Reset()
	bad.Stderr = &errOut
	if err := bad.Run(); err == nil || !strings.Contains(errOut.String(), "OTEL_TRACES_EXPORTER") || !strings.Contains(errOut.String(), "hint:") {
		t.Fatalf("a run with OTEL_TRACES_EXPORTER=zipkin: %v\n%s", err, errOut.String())
	}
}
