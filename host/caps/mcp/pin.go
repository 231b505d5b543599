package mcp

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/agentrt/agentrt/host/caps"
	"github.com/agentrt/agentrt/journal"
)

// Pin is one tool's current definition hash, as a grant's pin holds it.
type Pin struct {
	Tool string
	// Hash is the SHA-256 of the definition (DefinitionHash), lower-case
	// hex.
	Hash string
	// Granted says the server's grant entry lists the tool.
	Granted bool
}

// Pins connects to server s as a run would (a stdio server under the
// sandbox, an http server with the cell's credential), reads its tool
// definitions and returns their hashes, in the server's order. It is what
// agentrt mcp pin prints.
func Pins(ctx context.Context, s *Server, d Deps) ([]Pin, error) {
	g := &Grant{Servers: []Server{*s}}
	if err := g.Check(); err != nil {
		return nil, err
	}
	in := &instance{grant: g, deps: d, conns: map[string]*conn{},
		run: &caps.Run{ID: journal.RunID{}, Now: time.Now, Deadline: func() time.Time { return time.Time{} }}}
	defer in.Close()
	srv := &g.Servers[0]
	cn, err := in.connect(ctx, srv)
	if err != nil {
		return nil, fmt.Errorf("mcp server %s: %w", srv.Name, err)
	}
	in.conns[srv.Name] = cn
	defs, err := definitions(ctx, cn.session)
	if err != nil {
		return nil, fmt.Errorf("mcp server %s: %w", srv.Name, err)
	}
	out := make([]Pin, len(defs))
	for i, def := range defs {
		out[i] = Pin{Tool: def.tool.Name, Hash: hex.EncodeToString(def.hash)}
		for _, t := range srv.Tools {
			out[i].Granted = out[i].Granted || t == def.tool.Name
		}
	}
	return out, nil
}
