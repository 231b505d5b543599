package cell_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/capability"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
)

// remote returns err as the cell's answer, failing unless it is one with
// status code and kind.
func remote(t *testing.T, what string, err error, code int, kind error) *cell.RemoteError {
	t.Helper()
	var re *cell.RemoteError
	if !errors.As(err, &re) || re.Code != code || (kind != nil && !errors.Is(err, kind)) {
		t.Fatalf("%s: %v, want a %d answer matching %v", what, err, code, kind)
	}
	return re
}

// waitEnd waits for run to finish in the cell and returns how it ended.
func waitEnd(t *testing.T, c *cell.Client, run string) cell.RunInfo {
	t.Helper()
	st, err := c.Events(context.Background(), run, true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for {
		l, err := st.Next()
		if err != nil {
			t.Fatalf("events of %s: %v", run, err)
		}
		if l.End != nil {
			return *l.End
		}
	}
}

// TestModulesByHash: a module pushed once, or submitted by its bytes once,
// is run by its hash afterwards without being compiled again; a hash the
// cell lacks is a 404 (no_module) that says to push it, and nothing runs.
func TestModulesByHash(t *testing.T) {
	ctx := context.Background()
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{})
	code := testutil.BuildWAT(t, "host/testdata/wat/loop.wat")
	sum := sha256.Sum256(code)
	hexSum := hex.EncodeToString(sum[:])

	_, err := a.unix.Module(ctx, hexSum)
	remote(t, "GET of a module never pushed", err, http.StatusNotFound, host.ErrUnknownModule)
	_, err = a.unix.Submit(ctx, cell.Submission{ModuleSHA256: hexSum})
	re := remote(t, "submission by a hash never pushed", err, http.StatusNotFound, host.ErrUnknownModule)
	if !strings.Contains(re.Hint(), "agentrt module push") {
		t.Errorf("hint %q does not say to push the module", re.Hint())
	}
	if runs, err := a.cell.Store.Runs(ctx); err != nil || len(runs) != 0 {
		t.Fatalf("the refused submission left %d runs (%v)", len(runs), err)
	}

	mi, err := a.unix.PushModule(ctx, code)
	if err != nil || mi.SHA256 != hexSum || mi.Size != len(code) {
		t.Fatalf("push: %+v %v, want sha256 %s", mi, err, hexSum)
	}
	if mi, err := a.tcp.Module(ctx, hexSum); err != nil || mi.SHA256 != hexSum {
		t.Fatalf("GET after the push: %+v %v", mi, err)
	}
	ci, err := a.unix.Cell(ctx)
	if err != nil || ci.Compiled == nil || ci.Compiled.Compiles != 1 {
		t.Fatalf("after the push the cell shows %+v (%v), want 1 compile", ci.Compiled, err)
	}
	for i := range 2 {
		run, err := a.unix.Submit(ctx, cell.Submission{ModuleSHA256: hexSum})
		if err != nil {
			t.Fatalf("submission %d by hash: %v", i, err)
		}
		if ri := waitEnd(t, a.unix, run); ri.Status != journal.StatusCompleted || ri.ModuleSHA256 != hexSum {
			t.Fatalf("run %d by hash: %+v", i, ri)
		}
	}
	ci, _ = a.unix.Cell(ctx)
	if ci.Compiled.Compiles != 1 || ci.Compiled.Hits != 2 {
		t.Fatalf("after two runs by hash: %+v, want 1 compile and 2 hits", ci.Compiled)
	}

	// Bytes submitted once are stored by their hash.
	other := testutil.BuildWAT(t, "host/testdata/wat/grow.wat")
	osum := sha256.Sum256(other)
	if _, err := a.unix.Submit(ctx, cell.Submission{Module: other, ModuleSHA256: hex.EncodeToString(osum[:])}); err != nil {
		t.Fatalf("submission of bytes with their hash: %v", err)
	}
	if _, err := a.unix.Module(ctx, hex.EncodeToString(osum[:])); err != nil {
		t.Fatalf("a module submitted by its bytes is not kept: %v", err)
	}

	for _, tc := range []struct {
		name string
		sub  cell.Submission
		code int
		kind error
	}{
		{"bytes with another hash", cell.Submission{Module: code, ModuleSHA256: hex.EncodeToString(osum[:])}, http.StatusBadRequest, host.ErrModuleMismatch},
		{"neither bytes nor hash", cell.Submission{Input: []byte("x")}, http.StatusBadRequest, nil},
		{"a hash that is not hex", cell.Submission{ModuleSHA256: "xyz"}, http.StatusBadRequest, nil},
		{"a hash of 31 bytes", cell.Submission{ModuleSHA256: hexSum[:62]}, http.StatusBadRequest, nil},
	} {
		_, err := a.unix.Submit(ctx, tc.sub)
		remote(t, tc.name, err, tc.code, tc.kind)
	}

	_, err = a.unix.PushModule(ctx, []byte("not a module"))
	remote(t, "push of text", err, http.StatusUnprocessableEntity, host.ErrNotWasm)
	textSum := sha256.Sum256([]byte("not a module"))
	_, err = a.unix.Module(ctx, hex.EncodeToString(textSum[:]))
	remote(t, "GET of the refused push", err, http.StatusNotFound, host.ErrUnknownModule)
	_, err = a.unix.PushModule(ctx, bytes.Repeat([]byte{0}, cell.MaxModule+1))
	remote(t, "push over the module limit", err, http.StatusRequestEntityTooLarge, cell.ErrModuleTooLarge)
}

// TestSubmissionByHashWithinItsToken: a run named by hash is granted by
// its token like any other: a module importing what the token does not
// grant is refused before it runs (and the refusal journaled), a token
// from another issuer is refused, and a client without the API token
// cannot push or submit at all.
func TestSubmissionByHashWithinItsToken(t *testing.T) {
	ctx := context.Background()
	a := serveAPI(t, t.TempDir(), cell.ServerOptions{})
	code := testutil.BuildWAT(t, "host/cell/testdata/kv3.wat")
	mi, err := a.unix.PushModule(ctx, code)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	runOnly, err := capability.Issue(a.cell.Key, capability.Claims{Audience: a.cell.Public(), NotBefore: now.Add(-time.Minute), Expires: now.Add(time.Hour),
		Caps: capability.Caps{Run: &capability.Unit{}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.unix.Submit(ctx, cell.Submission{ModuleSHA256: mi.SHA256, Token: runOnly})
	if re := remote(t, "kv module by hash under a run-only token", err, http.StatusUnprocessableEntity, nil); !strings.Contains(re.Error(), "kv") {
		t.Fatalf("the refusal %q does not name the missing capability", re.Error())
	}
	runs, err := a.cell.Store.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].Status != journal.StatusFailed || hex.EncodeToString(runs[0].ModuleSHA256) != mi.SHA256 {
		t.Fatalf("the refusal is journaled as one failed run of the module: %+v %v", runs, err)
	}

	_, foreignKey, _ := ed25519.GenerateKey(nil)
	foreign, err := capability.Issue(foreignKey, capability.Claims{Audience: a.cell.Public(), NotBefore: now.Add(-time.Minute), Expires: now.Add(time.Hour),
		Caps: capability.Caps{Run: &capability.Unit{}, KV: &capability.KV{Namespaces: []string{"new", "old"}}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.unix.Submit(ctx, cell.Submission{ModuleSHA256: mi.SHA256, Token: foreign})
	remote(t, "by hash under another issuer's token", err, http.StatusForbidden, nil)

	anon, err := cell.DialWith("http://"+a.addr, cell.DialOptions{Token: strings.Repeat("0", 64)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = anon.PushModule(ctx, code)
	remote(t, "push without the API token", err, http.StatusUnauthorized, nil)
	_, err = anon.Submit(ctx, cell.Submission{ModuleSHA256: mi.SHA256})
	remote(t, "submission by hash without the API token", err, http.StatusUnauthorized, nil)
	_, err = anon.Module(ctx, mi.SHA256)
	remote(t, "module query without the API token", err, http.StatusUnauthorized, nil)
}
