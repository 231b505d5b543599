package placement

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Cost is a price per hour, in millionths of the unit the cluster's cells
// agree on (micro-dollars for USD): 2.5 per hour is Cost(2_500_000). It is
// an integer so that every platform scores it to the same bits; in YAML
// and JSON it is written as a decimal number (cost_per_hour: 2.5) with at
// most six decimal places, parsed exactly, never through a float.
type Cost int64

// MaxCost is the highest cost per hour a descriptor may carry: a billion
// units. It keeps every product the score computes within an int64.
const MaxCost = Cost(1_000_000_000 * 1_000_000)

var errCost = errors.New("not a cost")

// ParseCost parses a decimal number of units, such as "2.5" or "0.000125",
// into a Cost.
func ParseCost(s string) (Cost, error) {
	bad := func(why string) (Cost, error) {
		return 0, fmt.Errorf("%w: %q %s (write a decimal number such as 2.5, with at most 6 decimal places)", errCost, s, why)
	}
	if strings.HasPrefix(s, "-") {
		return bad("is negative")
	}
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" && (!dot || frac == "") {
		return bad("is not a number")
	}
	if len(frac) > 6 {
		return bad("has more than 6 decimal places")
	}
	for _, part := range []string{whole, frac} {
		for _, r := range part {
			if r < '0' || r > '9' {
				return bad("is not a plain decimal number")
			}
		}
	}
	if len(strings.TrimLeft(whole, "0")) > 10 {
		return bad(fmt.Sprintf("is over the most a cost may be (%s)", MaxCost))
	}
	var w, f int64
	if whole != "" {
		w, _ = strconv.ParseInt(whole, 10, 64)
	}
	if frac != "" {
		f, _ = strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	c := Cost(w*1_000_000 + f)
	if c > MaxCost {
		return bad(fmt.Sprintf("is over the most a cost may be (%s)", MaxCost))
	}
	return c, nil
}

// String writes the cost as a decimal number of units, with no trailing
// zeros: "2.5", "3", "0.000125".
func (c Cost) String() string {
	neg := ""
	u := uint64(c)
	if c < 0 {
		neg, u = "-", uint64(-c)
	}
	s := neg + strconv.FormatUint(u/1_000_000, 10)
	if f := u % 1_000_000; f != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%06d", f), "0")
	}
	return s
}

// MarshalJSON writes the cost as a JSON number of units.
func (c Cost) MarshalJSON() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalJSON reads a JSON number of units, exactly.
func (c *Cost) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("%w: %s is not a number (write a decimal number such as 2.5)", errCost, b)
	}
	v, err := ParseCost(n.String())
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// UnmarshalYAML reads a YAML number of units, exactly: the number as
// written, not as a float64 would hold it.
func (c *Cost) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		return fmt.Errorf("line %d: %w: %q (write a decimal number such as 2.5, unquoted)", n.Line, errCost, n.Value)
	}
	v, err := ParseCost(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*c = v
	return nil
}
