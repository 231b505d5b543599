package placement

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/agentrt/agentrt/internal/yamlkeys"
	"go.yaml.in/yaml/v3"
)

// CellsFile is the document ParseCells reads: YAML, or JSON, which is
// YAML too.
//
//	cells:
//	  - id: 3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29
//	    name: gpu-eu-1
//	    running: 2
//	    max_runs: 8
//	    gpus: {free: 4, kind: a100}
//	    models: [llama-3-70b]
//	    datasets: [s3://corpus/eu]
//	    cost_per_hour: 3.20
//	    clearance: confidential
//	    labels: {region: eu, zone: a}
type CellsFile struct {
	Cells []Cell `json:"cells" yaml:"cells"`
}

// ParseCells parses and validates a cells document (CellsFile); name is
// the file's name, for errors. A key the format does not have is an
// *yamlkeys.UnknownKeyError naming its line; a bad value an *InputError
// naming its field (or an error naming its line, for a value of the wrong
// type). A cell listed twice is refused.
func ParseCells(name string, doc []byte) ([]Cell, error) {
	var f CellsFile
	if err := decode(name, doc, &f); err != nil {
		return nil, err
	}
	if len(f.Cells) > MaxCells {
		return nil, fileError(name, bad("cells", "", "%d cells, over the %d allowed", len(f.Cells), MaxCells))
	}
	seen := make(map[string]int, len(f.Cells))
	for i := range f.Cells {
		field := fmt.Sprintf("cells[%d]", i)
		if err := f.Cells[i].Validate(field); err != nil {
			return nil, fileError(name, err)
		}
		if j, dup := seen[f.Cells[i].ID]; dup {
			return nil, fileError(name, bad(field+".id", "list each cell once", "cell %s is listed twice (also cells[%d])", short(f.Cells[i].ID), j))
		}
		seen[f.Cells[i].ID] = i
	}
	return f.Cells, nil
}

// ParseNeed parses and validates a need document: a Need's fields at the
// top level.
//
//	clearance: confidential
//	topology: {region: eu}
//	gpus: 1
//	gpu_kind: a100
//	models: [llama-3-70b]
//	datasets: [s3://corpus/eu]
//	max_cost_per_hour: 4
//	weights: {load: 2}
func ParseNeed(name string, doc []byte) (Need, error) {
	var n Need
	if err := decode(name, doc, &n); err != nil {
		return Need{}, err
	}
	if err := n.Validate(); err != nil {
		return Need{}, fileError(name, err)
	}
	return n, nil
}

// ErrEmptyDocument is returned by ParseCells and ParseNeed for a document
// with nothing in it.
var ErrEmptyDocument = errors.New("the document is empty")

func decode(name string, doc []byte, v any) error {
	if err := yamlkeys.Check(doc, reflect.TypeOf(v).Elem()); err != nil {
		var uk *yamlkeys.UnknownKeyError
		if errors.As(err, &uk) {
			uk.File = name
		}
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: %w", name, ErrEmptyDocument)
		}
		return fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: more than one YAML document (write one)", name)
	}
	return nil
}

// fileError names the file of an *InputError.
func fileError(name string, err error) error {
	var ie *InputError
	if errors.As(err, &ie) {
		ie.File = name
	}
	return err
}

// ParseSelf parses and validates one cell's descriptor of itself (a cell
// of a cells document at the top level, without its id, which is the
// describing cell's key): what a cluster cell announces in its heartbeat.
// A max_runs left out is 64.
func ParseSelf(name string, doc []byte) (Cell, error) {
	var c Cell
	if err := decode(name, doc, &c); err != nil {
		return Cell{}, err
	}
	if c.ID != "" {
		return Cell{}, fileError(name, bad("id", "leave the id out", "%q given, but a cell's id is its key: leave the id out", c.ID))
	}
	if c.MaxRuns == 0 {
		c.MaxRuns = 64
	}
	check := c
	check.ID = strings.Repeat("0", 64)
	if err := check.Validate("cell"); err != nil {
		return Cell{}, fileError(name, err)
	}
	return c, nil
}
