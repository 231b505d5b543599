package capability

import (
	"errors"
	"strconv"
	"strings"
)

// MicroPerUSD is the number of micro-USD in one dollar: money is counted in
// integer micro-USD everywhere a ceiling, a price or a charge is kept, so
// that sums are exact and one amount has one encoding (no floats).
const MicroPerUSD = 1_000_000

// ErrUSD is returned by ParseUSD for text that is not an amount of dollars
// it can hold exactly.
var ErrUSD = errors.New("want dollars as digits with at most 6 decimals, e.g. 9.90")

// ParseUSD parses an amount of dollars ("10", "9.90", "$0.000125") into
// micro-USD, exactly: more than six decimals (a fraction of a micro-USD),
// a sign, an exponent or an amount above what a uint64 of micro-USD holds
// is refused with ErrUSD rather than rounded.
func ParseUSD(s string) (uint64, error) {
	s = strings.TrimPrefix(s, "$")
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" && frac == "" || dot && frac == "" || len(frac) > 6 || !digits(whole) || !digits(frac) {
		return 0, ErrUSD
	}
	var w uint64
	if whole != "" {
		var err error
		if w, err = strconv.ParseUint(whole, 10, 64); err != nil || w > (1<<64-1)/MicroPerUSD {
			return 0, ErrUSD
		}
	}
	f := uint64(0)
	if frac != "" {
		f, _ = strconv.ParseUint(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
	}
	n := w * MicroPerUSD
	if n+f < n {
		return 0, ErrUSD
	}
	return n + f, nil
}

func digits(s string) bool { return strings.Trim(s, "0123456789") == "" }

// FormatUSD writes micro-USD as dollars, exactly and without trailing
// zeros ("9.9", "10", "0.000125"): ParseUSD reads it back to the same
// amount.
func FormatUSD(micro uint64) string {
	s := strconv.FormatUint(micro/MicroPerUSD, 10)
	if f := micro % MicroPerUSD; f != 0 {
		s += "." + strings.TrimRight(strconv.FormatUint(f+MicroPerUSD, 10)[1:], "0")
	}
	return s
}
