package conf

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written in TOML as a Go duration string
// ("500ms", "10s", "72h").
type Duration struct{ time.Duration }

// D returns the duration.
func (d Duration) D() time.Duration { return d.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"500ms\", \"10s\", \"72h\")", b)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration in Go syntax.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// Size is a byte count written in TOML as an integer or a string with a
// binary unit: "64KiB", "4MiB", "1GiB" (also "KB"/"MB"/"GB"/"K"/"M"/"G" as
// powers of 1024).
type Size int64

// Bytes returns the size as an int64.
func (s Size) Bytes() int64 { return int64(s) }

var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"TIB", 1 << 40}, {"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10},
	{"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10},
	{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1},
}

// ParseSize parses a byte size such as "4MiB" or "1048576".
func ParseSize(text string) (Size, error) {
	s := strings.ToUpper(strings.TrimSpace(text))
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || (mult > 1 && n > (1<<62)/mult) {
		return 0, fmt.Errorf("invalid size %q (want e.g. 65536, \"64KiB\", \"4MiB\", \"1GiB\")", text)
	}
	return Size(n * mult), nil
}

// UnmarshalText parses a size string.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// UnmarshalTOML accepts a plain integer as well as a string.
func (s *Size) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return fmt.Errorf("invalid size %d: negative", x)
		}
		*s = Size(x)
		return nil
	case string:
		return s.UnmarshalText([]byte(x))
	default:
		return fmt.Errorf("invalid size %v: want an integer or a string like \"4MiB\"", v)
	}
}

// String renders the size with the largest exact binary unit.
func (s Size) String() string {
	n := int64(s)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
