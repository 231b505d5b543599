package main

import (
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestPlaceScripts runs the scripts of testdata/place: agentrt place on
// the example files of placement/testdata, found through $PLACEMENT.
func TestPlaceScripts(t *testing.T) {
	examples, err := filepath.Abs(filepath.Join("..", "..", "placement", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/place",
		Setup: func(env *testscript.Env) error {
			env.Setenv("PLACEMENT", examples)
			return nil
		},
	})
}
