package approval

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentrt/agentrt/internal/fileread"
	"github.com/agentrt/agentrt/internal/yamlkeys"
)

// The names of a cell's approval configuration in its data directory.
const (
	// ApproversDir holds one group file per group, named after the group.
	ApproversDir = "approvers"
	// RulesFile holds the quorum rules (optional).
	RulesFile = "approvals.yaml"
)

// Rule is how a group's requests are decided.
type Rule struct {
	// Quorum is how many distinct members must approve, 1 to the group's
	// size.
	Quorum int `cbor:"1,keyasint,omitempty"`
	// TwoPerson forbids the run's requesting principals to approve.
	TwoPerson bool `cbor:"2,keyasint,omitempty"`
	// Ordered requires approvals to come in the group file's order.
	Ordered bool `cbor:"3,keyasint,omitempty"`
	// Expires is how long a request waits before it is denied; 0 is
	// forever.
	Expires time.Duration `cbor:"4,keyasint,omitempty"`
}

// defaultRule is the rule of a group the rules file does not name when it
// has no default: one approval, no expiry.
var defaultRule = Rule{Quorum: 1}

// Stricter returns the stricter of r and o, for a policy rule that tightens
// a group's: the larger quorum, either flag, the shorter non-zero expiry.
func (r Rule) Stricter(o Rule) Rule {
	s := Rule{Quorum: max(r.Quorum, o.Quorum), TwoPerson: r.TwoPerson || o.TwoPerson, Ordered: r.Ordered || o.Ordered, Expires: r.Expires}
	if s.Expires == 0 || (o.Expires != 0 && o.Expires < s.Expires) {
		s.Expires = o.Expires
	}
	return s
}

// describe writes the rule for a group of members: "2 of 3, two-person, ordered, expires after 24h0m0s".
func (r Rule) describe(members int) string {
	s := fmt.Sprintf("%d of %d", r.Quorum, members)
	if r.TwoPerson {
		s += ", two-person"
	}
	if r.Ordered {
		s += ", ordered"
	}
	if r.Expires != 0 {
		s += ", expires after " + r.Expires.String()
	}
	return s
}

// Config is a cell's approver groups and their rules.
type Config struct {
	groups map[string]*Group
	rules  map[string]Rule
	def    Rule
}

// ruleDoc is a rule as approvals.yaml writes it; an absent field takes the
// default's value.
type ruleDoc struct {
	Quorum    *int    `yaml:"quorum"`
	TwoPerson *bool   `yaml:"two_person"`
	Ordered   *bool   `yaml:"ordered"`
	Expires   *string `yaml:"expires"`
}

type rulesDoc struct {
	Default *ruleDoc           `yaml:"default"`
	Groups  map[string]ruleDoc `yaml:"groups"`
}

// apply returns base with d's fields set over it.
func (d ruleDoc) apply(base Rule) (Rule, error) {
	r := base
	if d.Quorum != nil {
		if *d.Quorum < 1 {
			return r, fmt.Errorf("quorum %d; a quorum is at least 1", *d.Quorum)
		}
		r.Quorum = *d.Quorum
	}
	if d.TwoPerson != nil {
		r.TwoPerson = *d.TwoPerson
	}
	if d.Ordered != nil {
		r.Ordered = *d.Ordered
	}
	if d.Expires != nil {
		e, err := time.ParseDuration(*d.Expires)
		if err != nil {
			return r, fmt.Errorf("expires %q: %v (write e.g. 24h or 90m)", *d.Expires, err)
		}
		if e < 0 {
			return r, fmt.Errorf("expires %q is negative", *d.Expires)
		}
		r.Expires = e
	}
	return r, nil
}

// parseRules reads an approvals.yaml document (see LoadConfig) against
// the groups it may name. Unknown keys are refused, naming their line.
func parseRules(b []byte, groups map[string]*Group) (def Rule, rules map[string]Rule, err error) {
	var doc rulesDoc
	if err := yamlkeys.Check(b, reflect.TypeOf(doc)); err != nil {
		return Rule{}, nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return Rule{}, nil, fmt.Errorf("parse: %w", err)
	}
	def = defaultRule
	if doc.Default != nil {
		if def, err = doc.Default.apply(defaultRule); err != nil {
			return Rule{}, nil, fmt.Errorf("default: %w", err)
		}
	}
	rules = map[string]Rule{}
	for name, d := range doc.Groups {
		if groups[name] == nil {
			return Rule{}, nil, fmt.Errorf("groups.%s: no such group (no file %s/%s; groups: %s)", shorten(name), ApproversDir, shorten(name), groupList(groups))
		}
		r, err := d.apply(def)
		if err != nil {
			return Rule{}, nil, fmt.Errorf("groups.%s: %w", name, err)
		}
		rules[name] = r
	}
	for name, g := range groups {
		r, ok := rules[name]
		if !ok {
			r = def
		}
		if err := reachable(r, len(g.Members)); err != nil {
			where := "groups." + name
			if !ok {
				where = "default (for group " + name + ")"
			}
			return Rule{}, nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	return def, rules, nil
}

// reachable refuses a quorum a group of n members can never reach.
func reachable(r Rule, n int) error {
	if r.Quorum < 1 {
		return fmt.Errorf("quorum %d; a quorum is at least 1", r.Quorum)
	}
	if r.Quorum > n {
		return fmt.Errorf("quorum %d, but the group has %d member(s): no request could ever be approved", r.Quorum, n)
	}
	return nil
}

// LoadConfig reads a cell's approval configuration from its data
// directory dir: every file dir/approvers/<group> (ParseGroup; names
// starting with "." are skipped, any other name must be a valid group
// name) and dir/approvals.yaml, which is optional:
//
//	default:            # for groups not listed; omitted: quorum 1, no expiry
//	  quorum: 1
//	  expires: 72h
//	groups:
//	  release:
//	    quorum: 2        # k of the group's n members
//	    two_person: true # the run's requesting principals may not approve
//	    ordered: true    # approvals must come in the group file's order
//	    expires: 24h     # after this, a pending request is denied
//
// A field a group leaves out takes the default's value. A quorum of 0, or
// over the group's member count, is refused here. A missing approvers
// directory is an empty configuration.
func LoadConfig(dir string) (*Config, error) {
	c := &Config{groups: map[string]*Group{}, rules: map[string]Rule{}, def: defaultRule}
	adir := filepath.Join(dir, ApproversDir)
	entries, err := os.ReadDir(adir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("approver groups: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(adir, name)
		if !ValidGroupName(name) {
			return nil, fmt.Errorf("%s: %w (rename the file; it names its group)", path, checkGroupName(name))
		}
		b, err := fileread.Read(path, fileread.Trust)
		if err != nil {
			return nil, err
		}
		g, err := ParseGroup(name, b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(g.Members) == 0 {
			return nil, fmt.Errorf("%s: no approvers; add a line \"ssh-ed25519 AAAA... name\" per approver, or remove the file", path)
		}
		c.groups[name] = g
	}
	rpath := filepath.Join(dir, RulesFile)
	b, err := fileread.Read(rpath, fileread.Approvals)
	if errors.Is(err, fs.ErrNotExist) {
		for name, g := range c.groups {
			if err := reachable(c.def, len(g.Members)); err != nil {
				return nil, fmt.Errorf("group %s: %w", name, err)
			}
		}
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	def, rules, err := parseRules(b, c.groups)
	var uk *yamlkeys.UnknownKeyError
	if errors.As(err, &uk) {
		uk.File = rpath
		return nil, uk
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rpath, err)
	}
	c.def, c.rules = def, rules
	return c, nil
}

// Group returns the group name and the rule that applies to it. An unknown
// group is an error that lists the known ones.
func (c *Config) Group(name string) (*Group, Rule, error) {
	g := c.groups[name]
	if g == nil {
		return nil, Rule{}, fmt.Errorf("no approver group %q (groups: %s); add a file %s/%s", shorten(name), groupList(c.groups), ApproversDir, shorten(name))
	}
	r, ok := c.rules[name]
	if !ok {
		r = c.def
	}
	return g, r, nil
}

// Groups returns the names of the configured groups, sorted.
func (c *Config) Groups() []string {
	names := make([]string, 0, len(c.groups))
	for n := range c.groups {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func groupList(groups map[string]*Group) string {
	if len(groups) == 0 {
		return "none"
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
