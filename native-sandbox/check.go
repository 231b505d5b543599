package sandbox

import (
	"fmt"
	"strings"
)

// Report says what this machine's sandbox backend supports.
type Report struct {
	// Platform is GOOS/GOARCH.
	Platform string
	// Backend names the mechanism used here.
	Backend string
	// Features are the checks, in order.
	Features []Feature
}

// Feature is one check of a Report.
type Feature struct {
	Name string
	OK   bool
	// Required features must be OK for any launch; the others add depth or
	// are needed only by some specs (say which in Detail).
	Required bool
	Detail   string
}

func (r *Report) add(name string, ok, required bool, detail string) {
	r.Features = append(r.Features, Feature{Name: name, OK: ok, Required: required, Detail: detail})
}

// Ready reports whether every required feature is present.
func (r *Report) Ready() bool {
	for _, f := range r.Features {
		if f.Required && !f.OK {
			return false
		}
	}
	return true
}

// String renders the report, one feature a line.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "platform: %s\nbackend:  %s\n", r.Platform, r.Backend)
	for _, f := range r.Features {
		mark := "ok  "
		switch {
		case !f.OK && f.Required:
			mark = "FAIL"
		case !f.OK:
			mark = "no  "
		}
		fmt.Fprintf(&b, "  %s %-22s %s\n", mark, f.Name, f.Detail)
	}
	if r.Ready() {
		b.WriteString("ready: launches run sandboxed\n")
	} else {
		b.WriteString("not ready: launches are refused until the FAIL lines are fixed\n")
	}
	return b.String()
}
