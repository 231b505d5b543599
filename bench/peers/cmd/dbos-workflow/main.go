// Command dbos-workflow is the DBOS program of make bench-peers' CLI
// figure: one process that opens DBOS on the database given, runs one
// workflow of -steps steps to its end and exits, as agentrt run runs one
// agent.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/agentrt/agentrt/bench/peers/dbosflow"
)

func main() {
	db := flag.String("db", "", "PostgreSQL URL of DBOS's system database")
	steps := flag.Int("steps", 100, "steps of the workflow")
	flag.Parse()
	if *db == "" {
		fmt.Fprintln(os.Stderr, "dbos-workflow: -db is required")
		os.Exit(2)
	}
	ctx, err := dbosflow.Open(*db)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dbos-workflow:", err)
		os.Exit(1)
	}
	err = dbosflow.Run(ctx, *steps)
	dbosflow.Close(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dbos-workflow:", err)
		os.Exit(1)
	}
}
