package cell_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrt/agentrt/host/caps/mcp"
	"github.com/agentrt/agentrt/host/cell"
)

// TestOpenRefusesBadMCPCredentials: a cell whose DATA/mcp.yaml is
// malformed does not open, and the error names the file and the key.
func TestOpenRefusesBadMCPCredentials(t *testing.T) {
	dir := t.TempDir()
	doc := "credentials:\n  search:\n    headers:\n      Authorization: {value: s3cret}\n"
	if err := os.WriteFile(filepath.Join(dir, mcp.CredentialsFile), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := cell.Open(context.Background(), dir, cell.Options{NoCache: true})
	if err == nil {
		c.Close(context.Background())
		t.Fatal("the cell opened with a malformed mcp.yaml")
	}
	if !strings.Contains(err.Error(), "mcp.yaml:4") || !strings.Contains(err.Error(), `unknown key "value"`) {
		t.Fatalf("error %q, want the file, its line and the key", err)
	}
}
