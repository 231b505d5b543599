package trigger

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		spec string
		kind Kind
		err  string
	}{
		{"schedule:*/5 * * * *", Schedule, ""},
		{"schedule:30 */5 * * * *", Schedule, ""},
		{"schedule:@every 10s", Schedule, ""},
		{"schedule:@hourly", Schedule, ""},
		{"schedule:", "", "no cron expression"},
		{"schedule:61 * * * *", "", "cron"},
		{"schedule:* * *", "", "cron"},
		{"kv:orders/new/", KV, ""},
		{"kv:orders/", KV, ""},
		{"kv:orders", "", "kv:NAMESPACE/PREFIX"},
		{"kv:/x", "", "kv:NAMESPACE/PREFIX"},
		{"file:/srv/inbox/*.csv", File, ""},
		{"file:/srv/inbox/**/*.csv", File, ""},
		{"file:/srv/inbox/ready", File, ""},
		{"file:inbox/*.csv", "", "not absolute"},
		{"file:/srv/[", "", "not valid"},
		{"webhook", Webhook, ""},
		{"webhook:x", "", "takes nothing"},
		{"metric:runs_failed>3/10m", Metric, ""},
		{"metric:queue_depth>3", "", "no queue"},
		{"cron:* * * * *", "", "unknown kind"},
	} {
		sp, err := Parse(c.spec)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !errors.Is(err, ErrSpec) {
				t.Errorf("%q: %v, want an error with %q", c.spec, err, c.err)
			}
			continue
		}
		if err != nil || sp.Kind != c.kind {
			t.Errorf("%q: %v %v", c.spec, sp.Kind, err)
			continue
		}
	}
	want := map[string]string{
		"kv:orders/new/":           "orders|new/",
		"file:/srv/inbox/*.csv":    "/srv/inbox|*.csv",
		"file:/srv/inbox/**/*.csv": "/srv/inbox|**/*.csv",
		"file:/srv/inbox/ready":    "/srv/inbox|ready",
		"metric:runs_failed>3/10m": "runs_failed>3 10m0s",
	}
	for spec, w := range want {
		sp, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		switch sp.Kind {
		case KV:
			got = sp.Namespace + "|" + sp.Prefix
		case File:
			got = strings.ReplaceAll(sp.Dir, "\\", "/") + "|" + sp.Glob
		case Metric:
			got = fmt.Sprint(sp.Expr.Counter, sp.Expr.Op, sp.Expr.Value, sp.Expr.Window)
		}
		if got != w {
			t.Errorf("%q parsed as %q, want %q", spec, got, w)
		}
	}
	sp, _ := Parse("file:/srv/inbox/**/*.csv")
	for rel, ok := range map[string]bool{"a.csv": true, "x/y/b.csv": true, "a.txt": false} {
		if sp.Match(rel) != ok {
			t.Errorf("%s matches %q: %v", sp.Glob, rel, !ok)
		}
	}
}

func TestPolicies(t *testing.T) {
	for s, want := range map[string]string{"": "once", "once": "once", "skip": "skip", "all:5": "all:5"} {
		m, err := ParseMisfire(s)
		if err != nil || m.String() != want {
			t.Errorf("misfire %q: %v %v, want %s", s, m, err, want)
		}
	}
	for _, bad := range []string{"all", "all:0", "all:-1", "all:1001", "sometimes"} {
		if _, err := ParseMisfire(bad); err == nil {
			t.Errorf("misfire %q taken", bad)
		}
	}
	for _, c := range []struct {
		s    string
		kind Kind
		want Overlap
	}{{"", Schedule, OverlapSkip}, {"", Metric, OverlapSkip}, {"", KV, OverlapQueue}, {"", Webhook, OverlapQueue}, {"allow", File, OverlapAllow}} {
		if o, err := ParseOverlap(c.s, c.kind); err != nil || o != c.want {
			t.Errorf("overlap %q for %s: %v %v, want %s", c.s, c.kind, o, err, c.want)
		}
	}
	if _, err := ParseOverlap("parallel", KV); err == nil {
		t.Error("overlap parallel taken")
	}
}

func TestDue(t *testing.T) {
	sp, err := Parse("schedule:@hourly")
	if err != nil {
		t.Fatal(err)
	}
	h := func(n float64) time.Time {
		return time.Date(2026, 1, 1, 0, 0, 0, 0, time.Local).Add(time.Duration(n * float64(time.Hour)))
	}
	hours := func(ts []time.Time) string {
		var s []string
		for _, t := range ts {
			s = append(s, fmt.Sprint(t.Sub(h(0)).Hours()))
		}
		return strings.Join(s, ",")
	}
	for _, c := range []struct {
		name          string
		cursor, now   float64
		misfire       string
		fire, skipped string
		catchup       bool
	}{
		{"nothing due", 0, 0.5, "once", "", "", false},
		{"on time", 0, 1, "once", "1", "", false},
		{"a little late", 0, 1.01, "skip", "1", "", false},
		{"late past grace, skip", 0, 1.5, "skip", "", "1", true},
		{"late past grace, once", 0, 1.5, "once", "1", "", true},
		{"outage, skip, newest on time", 0, 5, "skip", "5", "1,2,3,4", true},
		{"outage, skip", 0, 5.5, "skip", "", "1,2,3,4,5", true},
		{"outage, once", 0, 5.5, "once", "5", "1,2,3,4", true},
		{"outage, all:3", 0, 5.5, "all:3", "3,4,5", "1,2", true},
		{"outage, all:10", 0, 5.5, "all:10", "1,2,3,4,5", "", true},
		{"from a cursor", 3, 5.5, "all:10", "4,5", "", true},
	} {
		m, err := ParseMisfire(c.misfire)
		if err != nil {
			t.Fatal(err)
		}
		p := Due(sp.Cron, h(c.cursor), h(c.now), m)
		if hours(p.Fire) != c.fire || hours(p.Skipped) != c.skipped || p.Catchup != c.catchup {
			t.Errorf("%s: fire %s skipped %s catch-up %v, want %s, %s, %v", c.name, hours(p.Fire), hours(p.Skipped), p.Catchup, c.fire, c.skipped, c.catchup)
		}
	}
	// A week of seconds lists a bounded number of moments, the newest.
	sec, _ := Parse("schedule:@every 1s")
	start := h(0)
	p := Due(sec.Cron, start, start.Add(7*24*time.Hour), Misfire{Mode: MisfireAll, N: 3})
	if len(p.Fire) != 3 || len(p.Skipped) > maxDue || !p.Fire[2].Equal(start.Add(7*24*time.Hour)) {
		t.Fatalf("a week of seconds: %d fired (last %v), %d skipped", len(p.Fire), p.Fire[len(p.Fire)-1], len(p.Skipped))
	}
}

func TestExpr(t *testing.T) {
	for _, c := range []struct {
		s   string
		err string
	}{
		{"runs_failed>3/10m", ""},
		{"runs_started >= 100 / 1h", ""},
		{"runs_parked>50", ""},
		{"runs_live<1", ""},
		{"runs_failed>3", "counts over a window"},
		{"runs_parked>3/10m", "not a count over a window"},
		{"queue_depth>3", "no queue yet"},
		{"spend>9.5/1h", "spend_usd"},
		{"spend_usd>9.5/1h", ""},
		{"spend_usd>9.5", "counts over a window"},
		{"cpu>3/1m", "no such counter"},
		{"runs_failed=>3/1m", "operator"},
		{"runs_failed>x/1m", "not a number"},
		{"runs_failed>3/1ms", "window"},
		{">3", "COUNTER OP NUMBER"},
	} {
		_, err := ParseExpr(c.s)
		if (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: %v, want %q", c.s, err, c.err)
		}
	}
	e, _ := ParseExpr("runs_failed>=2/1m")
	if e.Holds(1) || !e.Holds(2) || !e.Holds(3) {
		t.Error(">= holds wrong")
	}
	var edge Edge
	var fired []bool
	for _, h := range []bool{false, true, true, false, true} {
		fired = append(fired, edge.Look(h))
	}
	if fmt.Sprint(fired) != "[false true false false true]" {
		t.Errorf("edge fired %v", fired)
	}
}

func TestWebhookSignature(t *testing.T) {
	secret := strings.Repeat("ab", 32)
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"a":1}`)
	ts := "1800000000"
	sig := Sign(secret, now, body)
	if _, err := Verify(secret, ts, sig, body, now.Add(ReplayWindow)); err != nil {
		t.Fatalf("a good signature at the window's edge: %v", err)
	}
	for _, c := range []struct {
		name          string
		ts, sig, body string
		at            time.Time
		want          error
	}{
		{"no timestamp", "", sig, string(body), now, ErrNoSignature},
		{"no signature", ts, "", string(body), now, ErrNoSignature},
		{"other body", ts, sig, `{"a":2}`, now, ErrBadSignature},
		{"other timestamp", "1800000001", sig, string(body), now, ErrBadSignature},
		{"no v1", ts, strings.TrimPrefix(sig, "v1="), string(body), now, ErrBadSignature},
		{"not hex", ts, "v1=zz", string(body), now, ErrBadSignature},
		{"too old", ts, sig, string(body), now.Add(ReplayWindow + time.Second), ErrStale},
		{"from the future", ts, sig, string(body), now.Add(-ReplayWindow - time.Second), ErrStale},
	} {
		if _, err := Verify(secret, c.ts, c.sig, []byte(c.body), c.at); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := Verify(strings.Repeat("cd", 32), ts, sig, body, now); !errors.Is(err, ErrBadSignature) {
		t.Errorf("another secret: %v", err)
	}
}
