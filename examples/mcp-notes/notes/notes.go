// Package notes is the notes MCP server of the mcp-notes example: notes
// kept as files in one directory, offered as four tools (add_note,
// list_notes, read_note, delete_note) and as resources notes://TITLE.
// The server command (../server) serves it over stdio; the example's
// tests also serve it over streamable HTTP.
package notes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// titleRE is what a note's title may be: it is also its file's name.
var titleRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// maxText bounds a note's text.
const maxText = 64 << 10

// AddArgs are add_note's arguments.
type AddArgs struct {
	Title string `json:"title" jsonschema:"the note's title: 1-64 lower-case letters, digits or '-'"`
	Text  string `json:"text" jsonschema:"the note's text"`
}

// TitleArgs name one note.
type TitleArgs struct {
	Title string `json:"title" jsonschema:"the note's title"`
}

// NewServer returns the notes server over the notes in dir, which must
// exist.
func NewServer(dir string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1.0.0"}, nil)
	path := func(title string) (string, error) {
		if !titleRE.MatchString(title) {
			return "", fmt.Errorf("title %q: use 1-64 lower-case letters, digits or '-', starting with a letter or digit", title)
		}
		return filepath.Join(dir, title+".txt"), nil
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	mcp.AddTool(s, &mcp.Tool{Name: "add_note", Description: "Save a note under a title, replacing the note of that title."},
		func(_ context.Context, _ *mcp.CallToolRequest, a AddArgs) (*mcp.CallToolResult, any, error) {
			p, err := path(a.Title)
			if err != nil {
				return nil, nil, err
			}
			if len(a.Text) > maxText {
				return nil, nil, fmt.Errorf("text: %d bytes, at most %d", len(a.Text), maxText)
			}
			if err := os.WriteFile(p, []byte(a.Text), 0o644); err != nil {
				return nil, nil, err
			}
			return text("saved " + a.Title), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list_notes", Description: "List the titles of the notes, one a line.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			titles, err := list(dir)
			if err != nil {
				return nil, nil, err
			}
			return text(strings.Join(titles, "\n")), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read_note", Description: "Read the note of a title.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, a TitleArgs) (*mcp.CallToolResult, any, error) {
			p, err := path(a.Title)
			if err != nil {
				return nil, nil, err
			}
			b, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil, fmt.Errorf("no note %q", a.Title)
			}
			if err != nil {
				return nil, nil, err
			}
			return text(string(b)), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete_note", Description: "Delete the note of a title.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true)}},
		func(_ context.Context, _ *mcp.CallToolRequest, a TitleArgs) (*mcp.CallToolResult, any, error) {
			p, err := path(a.Title)
			if err != nil {
				return nil, nil, err
			}
			if err := os.Remove(p); err != nil {
				return nil, nil, fmt.Errorf("no note %q", a.Title)
			}
			return text("deleted " + a.Title), nil, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "note", URITemplate: "notes://{title}", MIMEType: "text/plain"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			p, err := path(strings.TrimPrefix(r.Params.URI, "notes://"))
			if err != nil {
				return nil, mcp.ResourceNotFoundError(r.Params.URI)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil, mcp.ResourceNotFoundError(r.Params.URI)
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, MIMEType: "text/plain", Text: string(b)}}}, nil
		})
	return s
}

// list returns the titles of the notes in dir, sorted.
func list(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var titles []string
	for _, e := range ents {
		if t, ok := strings.CutSuffix(e.Name(), ".txt"); ok && titleRE.MatchString(t) && e.Type().IsRegular() {
			titles = append(titles, t)
		}
	}
	slices.Sort(titles)
	return titles, nil
}

func ptr[T any](v T) *T { return &v }
