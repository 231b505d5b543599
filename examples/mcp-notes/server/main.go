// Command server is the notes MCP server of the mcp-notes example: it
// serves the notes in one directory over stdio (newline-delimited JSON-RPC
// on stdin and stdout), logging to stderr. A grant declares it as a stdio
// server, which agentrt launches under its sandbox for the run that uses
// it:
//
//	server --dir /srv/notes
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/agentrt/agentrt/examples/mcp-notes/notes"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	dir := flag.String("dir", "", "the directory of the notes (required; it must exist)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("notes: ")
	if *dir == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: server --dir DIR")
		os.Exit(2)
	}
	if fi, err := os.Stat(*dir); err != nil || !fi.IsDir() {
		log.Fatalf("--dir %s: not a directory (%v)", *dir, err)
	}
	log.Printf("serving the notes in %s", *dir)
	if err := notes.NewServer(*dir).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
