package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/internal/yamlkeys"
	"github.com/agentrt/agentrt/placement"
	"github.com/spf13/cobra"
)

func (c *cli) placeCmd() *cobra.Command {
	var (
		cellsFile, needFile string
		explain, asJSON     bool
	)
	cmd := &cobra.Command{
		Use:   "place --cells FILE --need FILE",
		Short: "Choose the cell a run would be placed on, and say why",
		Long: `Choose, among the cells described in --cells, the one a run with the need in
--need is placed on, as the cluster does (package placement), and print its
id. Both files are YAML or JSON; see placement/testdata for examples.

Hard constraints come first: every topology label the need names must match,
the cell's clearance must be at least the need's (public < internal <
confidential < secret), the cell must not be full (running < max_runs), must
have the free GPUs needed (gpus, of gpu_kind when named), and must cost no
more than max_cost_per_hour. The cells left are scored, each part from 0 to
1000 times its weight (default 1): GPUs to spare, the share of the models
and datasets wanted that the cell has, and cheapness, less the load
(running / max_runs). The highest score wins; a tie goes to the lowest id.
The same files give the same choice, in whatever order the cells are listed.

--explain prints each candidate's score and its parts, and each refused
cell's reasons; --json prints the whole decision with its inputs (the
record the cluster journals: a cell that takes over a run whose lease expired writes
the decision that picked it in its lease entry). When no cell is eligible, the command fails and says
why each was refused (after the decision, with --explain or --json).`,
		Example: "  agentrt place --cells placement/testdata/cells.yaml --need placement/testdata/need.yaml --explain",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if explain && asJSON {
				return withHint(errors.New("--explain and --json together"), "pick one: the JSON holds every score and refusal too")
			}
			cb, err := fileread.Read(cellsFile, fileread.Cells)
			if err != nil {
				return err
			}
			cells, err := placement.ParseCells(cellsFile, cb)
			if err != nil {
				return placeInputError(err, "cells: [{id: HEX, max_runs: 8, clearance: internal, ...}]")
			}
			nb, err := fileread.Read(needFile, fileread.Need)
			if err != nil {
				return err
			}
			need, err := placement.ParseNeed(needFile, nb)
			if err != nil {
				return placeInputError(err, "{clearance: internal, topology: {region: eu}, gpus: 1, models: [...], ...}")
			}
			d, placeErr := placement.Place(need, cells)
			var ne *placement.NoEligibleError
			if placeErr != nil && !errors.As(placeErr, &ne) {
				return placeInputError(placeErr, "")
			}
			switch {
			case asJSON:
				b, err := json.MarshalIndent(d, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(c.stdout, "%s\n", b)
			case explain:
				fmt.Fprint(c.stdout, d.Explain())
			case placeErr == nil:
				fmt.Fprintln(c.stdout, d.Cell)
			}
			if placeErr != nil {
				return withHint(placeErr, "every cell fails a hard constraint of the need (topology, clearance, gpus, gpu_kind, max_cost_per_hour) or is full: loosen the need, or add a cell that meets it")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cellsFile, "cells", "", "file of cell descriptors, YAML or JSON (cells: [...]) (required)")
	cmd.Flags().StringVar(&needFile, "need", "", "file of the run's need, YAML or JSON (required)")
	cmd.Flags().BoolVar(&explain, "explain", false, "print each candidate's score and its parts, and the reasons for each refusal")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the whole decision and its inputs as JSON")
	_ = cmd.MarkFlagRequired("cells")
	_ = cmd.MarkFlagRequired("need")
	return cmd
}

// placeInputError gives a refused cells or need file its hint: the
// field's own, else what the file looks like (shape).
func placeInputError(err error, shape string) error {
	var ie *placement.InputError
	var uk *yamlkeys.UnknownKeyError
	switch {
	case errors.As(err, &ie) && ie.Hint != "":
		return withHint(err, "%s", ie.Hint)
	case errors.As(err, &uk), shape == "":
		// An unknown key's error lists the keys allowed already.
		return err
	}
	return withHint(err, "write e.g. %s (see placement/testdata)", shape)
}
