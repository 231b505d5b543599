package cell_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrt/agentrt/approval"
	"github.com/agentrt/agentrt/host"
	"github.com/agentrt/agentrt/host/cell"
	"github.com/agentrt/agentrt/internal/testutil"
	"github.com/agentrt/agentrt/journal"
	"github.com/chromedp/chromedp"
)

// EnvArtifacts names a directory where the browser test keeps its
// screenshots; unset, they go to a temporary directory and are removed.
const envArtifacts = "AGENTRT_ARTIFACTS"

// browser starts a headless Chromium (Debian's chromium, which make deps
// installs) for the test; without one the test fails, as the sandbox tests
// do without bubblewrap, so that make test never passes having skipped it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium on PATH: run make deps, which installs it (%v)", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1400, 1000))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// TestUIInABrowser drives the dashboard in headless Chromium as a person
// would: signs in with the token, opens the runs list and a run, sees its
// timeline and opens a payload, presses verify and sees OK, presses it on
// a tampered copy of the run and sees the failure named, watches a parked
// run's live events, and answers its approval with a signed vote that
// makes the quorum. Each step keeps a screenshot ($AGENTRT_ARTIFACTS).
func TestUIInABrowser(t *testing.T) {
	ctx := browser(t)
	shots := os.Getenv(envArtifacts)
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			if len(png) < 8 || string(png[1:4]) != "PNG" {
				t.Errorf("screenshot %s is not a PNG", name)
			}
			return os.WriteFile(filepath.Join(shots, "dashboard-"+name+".png"), png, 0o644)
		})
	}
	// text reads the text of the element sel finds into *to.
	text := func(sel string, to *string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) (err error) {
			*to, err = chromedp.Text(chromedp.CSS(sel))(ctx, tg)
			return err
		})
	}
	value := func(sel string, to *string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) (err error) {
			*to, err = chromedp.Value(chromedp.CSS(sel))(ctx, tg)
			return err
		})
	}

	dir := t.TempDir()
	alice := newApprover(t, "alice")
	writeApprovers(t, dir, "release", "groups:\n  release: {quorum: 1, expires: 1h}\n", alice)
	c, err := cell.Open(context.Background(), dir, uiCellOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Host.Run(context.Background(), host.RunSpec{Code: testutil.BuildGo(t, "host/testdata/agents/smoke"), Name: "smoke.wasm", Input: []byte("hello browser"), Grant: mustGrant(t, smokeGrant)})
	if err != nil || res.Status != journal.StatusCompleted {
		t.Fatalf("smoke run: %v %+v", err, res)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	smoke := res.Run.String()
	tampered := serveDashboard(t, serveUIAPI(t, tamperedCopy(t, dir, res.Run), cell.ServerOptions{}))
	d := serveDashboard(t, serveUIAPI(t, dir, cell.ServerOptions{}))
	in, _ := json.Marshal(map[string]any{"action": "ship the release", "group": "release"})
	parked, err := d.srv.Launch(context.Background(), host.RunSpec{Code: testutil.BuildC(t, "host/testdata/agents/waiter"), Name: "waiter.wasm", Input: in, Grant: mustGrant(t, waiterGrant)}, "started")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d.api, parked, journal.StatusParked)

	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	// do runs the actions in order, each named in the failure.
	do := func(actions ...chromedp.Action[chromedp.Void]) error {
		for i, a := range actions {
			actx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := chromedp.Do(actx, a)
			cancel()
			if err != nil {
				var url string
				url, _ = chromedp.Run(ctx, chromedp.Location())
				body, _ := chromedp.Run(ctx, chromedp.Text(css("main")))
				return fmt.Errorf("browser step %d (at %s): %w\n%s", i+1, url, err, body)
			}
		}
		return nil
	}
	login := func(base, token string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(
			chromedp.Navigate(base+"/"),
			chromedp.WaitVisible(css(`input[name=token]`)),
			chromedp.SendKeys(css(`input[name=token]`), token),
			chromedp.Click(css(`form[action="/login"] button`)),
			chromedp.WaitVisible(css(`table.runs`)),
		)
	}
	var runs, payload, verdict, live, state, statement string
	err = do(
		login(d.base, d.token), text(`table.runs`, &runs), shot("runs"),
		chromedp.Click(css(`a[href="/runs/`+smoke+`"]`)),
		chromedp.WaitVisible(css(`table.timeline`)),
		chromedp.Click(css(`button[data-payload="/runs/`+smoke+`/entries/0/input"]`)),
		chromedp.WaitVisible(css(`pre.payload`)),
		text(`pre.payload`, &payload), shot("run"),
		chromedp.Click(css(`form.verify button`)),
		chromedp.WaitVisible(css(`#verdict`)),
		text(`#verdict`, &verdict), shot("verify"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(runs, smoke) || !strings.Contains(runs, parked.String()) {
		t.Fatalf("the runs list shows %q", runs)
	}
	if !strings.Contains(payload, "input of entry 0") || !strings.Contains(payload, "hello browser") {
		t.Fatalf("the opened input shows %q", payload)
	}
	if verdict != "OK" {
		t.Fatalf("verify shows %q", verdict)
	}

	err = do(
		login(tampered.base, tampered.token),
		chromedp.Navigate(tampered.base+"/runs/"+smoke),
		chromedp.Click(css(`form.verify button`)),
		chromedp.WaitVisible(css(`#verdict`)),
		text(`#verdict`, &verdict), shot("verify-tampered"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if verdict != "FAILED: hash" {
		t.Fatalf("verify of the tampered copy shows %q", verdict)
	}

	err = do(
		chromedp.Navigate(d.base+"/runs/"+parked.String()),
		chromedp.WaitVisible(css(`#live li`)),
		chromedp.Sleep(300*time.Millisecond),
		text(`#live`, &live), shot("live"),
		chromedp.Navigate(d.base+"/approvals"),
		chromedp.WaitVisible(css(`section.approval`)),
		value(`section.approval form input[name=statement]`, &statement),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(live, "start · seq 0") || !strings.Contains(live, "approval.request") {
		t.Fatalf("the live view shows %q", live)
	}
	sig, err := approval.Sign(alice.signer, []byte(statement))
	if err != nil {
		t.Fatal(err)
	}
	err = do(
		chromedp.SetValue(css(`section.approval form textarea`), string(sig)),
		chromedp.Click(css(`section.approval form button`)),
		chromedp.WaitVisible(css(`#state`)),
		text(`#state`, &state), shot("voted"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if state != "approved" {
		t.Fatalf("after the vote the approval is %q", state)
	}
	m := waitStatus(t, d.api, parked, journal.StatusCompleted)
	if !strings.Contains(string(m.Output), `"alice"`) {
		t.Fatalf("the approved run's output: %s", m.Output)
	}
	t.Logf("screenshots in %s", shots)
}
