package policy

import (
	_ "embed"
	"fmt"
	"slices"

	"github.com/cedar-policy/cedar-go/types"
	"github.com/cedar-policy/cedar-go/x/exp/schema"
	"github.com/cedar-policy/cedar-go/x/exp/schema/resolved"
	"github.com/cedar-policy/cedar-go/x/exp/schema/validate"
)

// SchemaFile is the name the embedded schema is reported under.
const SchemaFile = "schema.cedarschema"

//go:embed schema.cedarschema
var schemaText []byte

// Schema returns the text of the Cedar schema every policy is validated
// against and every request is checked against.
func Schema() []byte { return slices.Clone(schemaText) }

// compiled is the schema resolved once: the validator, and the action
// entities (with their groups as parents) that requests do not carry.
type compiled struct {
	validator *validate.Validator
	resolved  *resolved.Schema
	actions   map[string]types.EntityUID // op name -> Action UID, groups excluded
	entities  types.EntityMap            // every action entity, groups included
}

var theSchema = mustCompile()

func mustCompile() *compiled {
	c, err := compileSchema(schemaText)
	if err != nil {
		// The schema is embedded and tested; failing here is a build defect.
		panic(fmt.Sprintf("policy: embedded schema: %v", err))
	}
	return c
}

func compileSchema(text []byte) (*compiled, error) {
	var s schema.Schema
	s.SetFilename(SchemaFile)
	if err := s.UnmarshalCedar(text); err != nil {
		return nil, err
	}
	rs, err := s.Resolve()
	if err != nil {
		return nil, err
	}
	c := &compiled{
		validator: validate.New(rs, validate.WithStrict()),
		resolved:  rs,
		actions:   map[string]types.EntityUID{},
		entities:  types.EntityMap{},
	}
	for uid, a := range rs.Actions {
		c.entities[uid] = a.Entity
		if a.AppliesTo != nil {
			c.actions[string(uid.ID)] = uid
		}
	}
	return c, nil
}

// Actions returns the names of every action a request may name, sorted:
// one per ABI op, and tool.run.
func Actions() []string {
	names := make([]string, 0, len(theSchema.actions))
	for n := range theSchema.actions {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
